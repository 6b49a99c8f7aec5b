"""2.0.2's `sonnet.src.reshape` path (see `sonnet.src`)."""

from sonnet._src.reshape import Flatten, Reshape, flatten, reshape

__all__ = ["Flatten", "Reshape", "flatten", "reshape"]
