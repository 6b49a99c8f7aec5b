"""Low-rank adapters (LoRA) for fine-tuning: `snt.lora.add(model, rank=8)`."""

from sonnet._src.lora import LoRA as LoRA
from sonnet._src.lora import adapters as adapters
from sonnet._src.lora import add as add
from sonnet._src.lora import merge as merge
from sonnet._src.lora import remove as remove
from sonnet._src.lora import restore as restore
from sonnet._src.lora import save as save
from sonnet._src.lora import unmerge as unmerge

__all__ = [
    "LoRA",
    "adapters",
    "add",
    "merge",
    "remove",
    "restore",
    "save",
    "unmerge",
]
