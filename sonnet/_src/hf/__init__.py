"""Hugging Face model directories, generation, tokenizers and PEFT adapters
(`snt.hf`)."""
