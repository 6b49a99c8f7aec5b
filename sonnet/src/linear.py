"""2.0.2's `sonnet.src.linear` path (see `sonnet.src`)."""

from sonnet._src.linear import Linear

__all__ = ["Linear"]
