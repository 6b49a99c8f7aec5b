"""Hugging Face model directories in and out: `snt.hf.load(path)`.

Open-weight decoder models (GPT-2, Llama 2/3, Mistral, Qwen2/3) as plain
`snt.nets.CausalLM` module trees; generation with the KV cache; tokenizers
(`tokenizer.json`); LoRA adapters in PEFT's format. Needs the `hf` extra
(`pip install 'sonnet[hf]'`: `safetensors`, `tokenizers`).
"""

from sonnet._src.hf.checkpoint import load as load
from sonnet._src.hf.checkpoint import save as save
from sonnet._src.hf.generate import generate as generate
from sonnet._src.hf.generate import load_tokenizer as load_tokenizer
from sonnet._src.hf.peft import load_adapters as load_adapters
from sonnet._src.hf.peft import save_adapters as save_adapters

__all__ = [
    "generate",
    "load",
    "load_adapters",
    "load_tokenizer",
    "save",
    "save_adapters",
]
