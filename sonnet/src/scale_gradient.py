"""2.0.2's `sonnet.src.scale_gradient` path (see `sonnet.src`)."""

from sonnet._src.gradient_ops import scale_gradient

__all__ = ["scale_gradient"]
