"""2.0.2's `sonnet.src.axis_norm` path (see `sonnet.src`)."""

from sonnet._src.axis_norm import InstanceNorm, LayerNorm

__all__ = ["InstanceNorm", "LayerNorm"]
