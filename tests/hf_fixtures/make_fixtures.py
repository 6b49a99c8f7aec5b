"""Writes the Hugging Face reference fixtures in this folder, with `transformers`.

Each case is a tiny, randomly initialised decoder model of one family and
config option, written by `transformers`' own `save_pretrained` (config.json
plus safetensors), with what `transformers` computes for it in
`reference.npz`:

- `tokens` `[2, 10]` int32 and their `logits` `[2, 10, vocab]` float32;
- `prompt` `[1, 4]` and `greedy` `[1, 8]`: the greedy continuation (argmax of
  the last position, the whole prefix run again each step);
- for `peft_lora`, `adapted_logits`: the logits with PEFT's LoRA adapter.

Cases: `gpt2` (learned positions, LayerNorm, tanh-GELU, fused `c_attn`, tied
head); `llama2` (RoPE, RMSNorm, SwiGLU, untied); `llama3` (GQA, explicit
`head_dim`, the `llama3` rope scaling, tied head); `llama_bias`
(`attention_bias`, `mlp_bias`); `mistral` (sliding window 4, so the 10-token
inputs use it); `qwen2` (q/k/v biases); `qwen3` (per-head q/k RMSNorm);
`llama3_bf16` (the llama3 model stored in bfloat16; its reference is the
float32 model with those rounded weights); `llama3_sharded` (several
safetensors files and their index); `peft_lora` (llama2 with a PEFT LoRA
adapter of rank 2 on every projection, random non-zero `B`). `tokenizer.json`
(a byte-level BPE of 128 tokens trained on Python's own `this` text) sits in
`gpt2` and `llama2`.

Needs `torch`, `transformers` (5.x), `peft`, `tokenizers` and `safetensors`;
the tests and CI only read the files. To regenerate (same seeds, same files
up to the library versions):

    pip install torch transformers peft tokenizers safetensors
    python tests/hf_fixtures/make_fixtures.py

`--check-export DIR` instead loads a model directory written by
`snt.hf.save` (for each case subfolder of DIR) in `transformers` and compares
its logits with the case's reference: the write direction.
"""

from __future__ import annotations

import argparse
import codecs
import copy
import json
import pathlib
import shutil
import this
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
VOCAB = 128
SMALL = dict(
    vocab_size=VOCAB,
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
)


def _configs() -> dict[str, object]:
    import transformers as tr

    return {
        "gpt2": tr.GPT2Config(
            vocab_size=VOCAB,
            n_positions=64,
            n_embd=16,
            n_layer=2,
            n_head=4,
            activation_function="gelu_new",
            bos_token_id=1,
            eos_token_id=2,
        ),
        "llama2": tr.LlamaConfig(**SMALL, num_key_value_heads=4),
        "llama3": tr.LlamaConfig(
            **SMALL,
            num_key_value_heads=2,
            head_dim=8,
            tie_word_embeddings=True,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
            rope_theta=500000.0,
        ),
        "llama_bias": tr.LlamaConfig(
            **SMALL, num_key_value_heads=2, attention_bias=True, mlp_bias=True
        ),
        "mistral": tr.MistralConfig(**SMALL, num_key_value_heads=2, sliding_window=4),
        "qwen2": tr.Qwen2Config(**SMALL, num_key_value_heads=2),
        "qwen3": tr.Qwen3Config(**SMALL, num_key_value_heads=2, head_dim=8),
    }


def _model(config: object, seed: int) -> Any:
    import torch
    import transformers as tr

    torch.manual_seed(seed)
    model = tr.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():  # Larger than the 0.02 default: logits that differ.
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return model.float().eval()


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    tokens = rng.integers(3, VOCAB, size=(2, 10)).astype(np.int32)
    prompt = rng.integers(3, VOCAB, size=(1, 4)).astype(np.int32)
    return tokens, prompt


def _reference(model: Any) -> dict[str, np.ndarray]:
    import torch

    tokens, prompt = _inputs()
    with torch.no_grad():
        logits = model(torch.tensor(tokens, dtype=torch.long)).logits
        logits = logits.float().numpy()
        sequence = torch.tensor(prompt, dtype=torch.long)
        for _ in range(8):
            step = model(sequence).logits[:, -1].argmax(-1, keepdim=True)
            sequence = torch.cat([sequence, step], dim=1)
    greedy = sequence[:, prompt.shape[1] :].numpy().astype(np.int32)
    return {"tokens": tokens, "logits": logits, "prompt": prompt, "greedy": greedy}


def _tokenizer(folder: pathlib.Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    text = codecs.decode(this.s, "rot13")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()[:100],
    )
    tokenizer.train_from_iterator(text.splitlines(), trainer)
    tokenizer.save(str(folder / "tokenizer.json"))


def _write(name: str, model: Any, **save: object) -> pathlib.Path:
    folder = HERE / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder, **save)
    return folder


def make() -> None:
    import peft
    import torch
    import transformers as tr

    for seed, (name, config) in enumerate(_configs().items()):
        model = _model(config, seed)
        folder = _write(name, model)
        np.savez(folder / "reference.npz", **_reference(model))
        if name in ("gpt2", "llama2"):
            _tokenizer(folder)
        if name == "llama3":
            # A copy: `to(bfloat16)` also rounds buffers (the rotary
            # frequencies) that `float()` would not restore.
            bf16 = _write("llama3_bf16", copy.deepcopy(model).to(torch.bfloat16))
            rounded = tr.AutoModelForCausalLM.from_pretrained(
                bf16, dtype=torch.float32, attn_implementation="eager"
            ).eval()
            np.savez(bf16 / "reference.npz", **_reference(rounded))
            sharded = _write("llama3_sharded", model, max_shard_size="20KB")
            np.savez(sharded / "reference.npz", **_reference(model))
        if name == "llama2":
            torch.manual_seed(100)
            lora = peft.LoraConfig(
                r=2,
                lora_alpha=4,
                target_modules=[
                    "q_proj",
                    "k_proj",
                    "v_proj",
                    "o_proj",
                    "gate_proj",
                    "up_proj",
                    "down_proj",
                ],
                init_lora_weights=False,  # Random, non-zero `B`.
            )
            adapted = peft.get_peft_model(model, lora).eval()
            folder = HERE / "peft_lora"
            shutil.rmtree(folder, ignore_errors=True)
            adapted.save_pretrained(folder)
            tokens, _ = _inputs()
            with torch.no_grad():
                logits = adapted(torch.tensor(tokens, dtype=torch.long)).logits
            np.savez(
                folder / "reference.npz",
                tokens=tokens,
                adapted_logits=logits.float().numpy(),
            )
    print(json.dumps(sorted(p.name for p in HERE.iterdir() if p.is_dir())))


def check_export(root: pathlib.Path) -> None:
    """Loads each exported case in `transformers`; compares with the reference."""
    import torch
    import transformers as tr

    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        reference = np.load(HERE / folder.name / "reference.npz")
        model = tr.AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, attn_implementation="eager"
        ).eval()
        with torch.no_grad():
            tokens = torch.tensor(reference["tokens"], dtype=torch.long)
            logits = model(tokens).logits.numpy()
        error = float(np.max(np.abs(logits - reference["logits"])))
        print(f"{folder.name}: max |logits - reference| = {error:.2e}")
        assert error < 1e-4, folder.name


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check-export", type=pathlib.Path, default=None)
    args = parser.parse_args()
    if args.check_export is None:
        make()
    else:
        check_export(args.check_export)
