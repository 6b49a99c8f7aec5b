"""2.0.2's `sonnet.src.sequential` path (see `sonnet.src`)."""

from sonnet._src.sequential import Sequential

__all__ = ["Sequential"]
