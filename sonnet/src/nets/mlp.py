"""2.0.2's `sonnet.src.nets.mlp` path (see `sonnet.src`)."""

from sonnet._src.nets.mlp import MLP

__all__ = ["MLP"]
