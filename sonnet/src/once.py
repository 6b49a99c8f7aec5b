"""2.0.2's `sonnet.src.once` path (see `sonnet.src`)."""

from sonnet._src.once import once

__all__ = ["once"]
