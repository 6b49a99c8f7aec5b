"""2.0.2's `sonnet.src.dropout` path (see `sonnet.src`)."""

from sonnet._src.dropout import Dropout

__all__ = ["Dropout"]
