"""2.0.2's `sonnet.src.depthwise_conv` path (see `sonnet.src`)."""

from sonnet._src.depthwise_conv import DepthwiseConv2D

__all__ = ["DepthwiseConv2D"]
