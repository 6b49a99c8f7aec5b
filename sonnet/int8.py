"""int8 weights for inference: `snt.int8.quantize(model)`."""

from sonnet._src.int8 import quantize as quantize

__all__ = ["quantize"]
