"""2.0.2's `sonnet.src.bias` path (see `sonnet.src`)."""

from sonnet._src.bias import Bias, calculate_bias_shape

__all__ = ["Bias", "calculate_bias_shape"]
