"""2.0.2's `sonnet.src.conv_transpose` path (see `sonnet.src`)."""

from sonnet._src.conv_transpose import (
    Conv1DTranspose,
    Conv2DTranspose,
    Conv3DTranspose,
    ConvNDTranspose,
)

__all__ = ["Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose", "ConvNDTranspose"]
