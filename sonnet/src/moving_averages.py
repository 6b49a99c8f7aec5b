"""2.0.2's `sonnet.src.moving_averages` path (see `sonnet.src`)."""

from sonnet._src.moving_averages import ExponentialMovingAverage

__all__ = ["ExponentialMovingAverage"]
