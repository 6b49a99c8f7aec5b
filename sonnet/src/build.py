"""2.0.2's `sonnet.src.build` path (see `sonnet.src`)."""

from sonnet._src.build import build

__all__ = ["build"]
