"""2.0.2's `sonnet.src.group_norm` path (see `sonnet.src`)."""

from sonnet._src.group_norm import GroupNorm

__all__ = ["GroupNorm"]
