"""2.0.2's `sonnet.src.conv` path (see `sonnet.src`)."""

from sonnet._src.conv import Conv1D, Conv2D, Conv3D, ConvND

__all__ = ["Conv1D", "Conv2D", "Conv3D", "ConvND"]
