"""Networks built from Sonnet modules: `snt.nets`."""

from sonnet._src.nets.mlp import MLP as MLP

__all__ = [
    "MLP",
]
