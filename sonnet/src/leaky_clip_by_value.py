"""2.0.2's `sonnet.src.leaky_clip_by_value` path (see `sonnet.src`)."""

from sonnet._src.gradient_ops import leaky_clip_by_value

__all__ = ["leaky_clip_by_value"]
