"""`snt.ExponentialMovingAverage`: a debiased exponential moving average."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import metrics, once, utils

__all__ = ["ExponentialMovingAverage"]


def _check_decay(decay: Any) -> Any:
    if isinstance(decay, (tf.Tensor, tf.Variable)):
        if not decay.dtype.is_floating or decay.shape.rank not in (0, None):
            raise utils.bad_type("decay", "must be a floating point scalar", decay)
        return decay
    if isinstance(decay, (bool, np.bool_)) or not isinstance(
        decay, (int, float, np.integer, np.floating)
    ):
        raise utils.bad_type("decay", "must be a number in [0, 1]", decay)
    if not (math.isfinite(decay) and 0 <= decay <= 1):
        raise utils.bad_value("decay", "must be a number in [0, 1]", decay)
    return decay


class ExponentialMovingAverage(metrics.Metric):
    """Exponential moving average of a stream of values, with debiasing.

    Each `update(value)` sets `hidden = decay * hidden + (1 - decay) * value`
    (with `hidden` starting at zero) and `average = hidden / (1 - decay**t)`
    after `t` updates. Dividing by `1 - decay**t` removes the bias towards the
    zero start (arXiv:1412.6980, section 3), so the first update gives exactly
    the value.

    State: `_counter` (int64 scalar named `counter`, created in the
    constructor); `_hidden` and `average` (named `hidden`, `average`) created
    by the first `update`/`initialize` with the value's shape and a floating
    point dtype (Python integers become float32). Later values must have the
    same shape and dtype.

    Args:
      decay: Weight of the past, a number in `[0, 1]` (or a float scalar
        tensor). Typical values are close to 1 (e.g. 0.99).
      name: Module name, default `"exponential_moving_average"`.

    >>> ema = snt.ExponentialMovingAverage(decay=0.5)
    >>> float(ema(3.0)), float(ema(6.0))
    (3.0, 5.0)
    """

    def __init__(self, decay: Any, name: str | None = None):
        super().__init__(name=name)
        self._decay = _check_decay(decay)
        self._counter = metrics.state_variable(tf.constant(0, tf.int64), "counter")
        self._hidden: tf.Variable | None = None
        self.average: tf.Variable | None = None

    @once.once
    def initialize(self, value: Any) -> None:
        """Creates zero `hidden`/`average` state shaped like `value`."""
        value = metrics.check_value(value, None, floating=True)
        self._hidden = metrics.state_variable(tf.zeros_like(value), "hidden")
        self.average = metrics.state_variable(tf.zeros_like(value), "average")

    def update(self, value: Any) -> None:
        """Moves the average towards `value`."""
        value = metrics.check_value(value, self._hidden, floating=True)
        self.initialize(value)
        assert self._hidden is not None and self.average is not None
        self._counter.assign_add(1)
        decay = self._decay
        if isinstance(decay, (tf.Tensor, tf.Variable)):
            decay = tf.cast(decay, value.dtype)
        counter = tf.cast(self._counter, value.dtype)
        self._hidden.assign_sub((self._hidden - value) * (1 - decay))
        self.average.assign(self._hidden / (1 - tf.pow(decay, counter)))

    @property
    def value(self) -> tf.Tensor:
        """The debiased moving average (zeros before the first update)."""
        if self.average is None:
            raise metrics.not_ready(self)
        return self.average.read_value()

    def reset(self) -> None:
        """Forgets all updates: counter, hidden state and average become zero."""
        self._counter.assign(0)
        if self._hidden is not None and self.average is not None:
            self._hidden.assign(tf.zeros_like(self._hidden))
            self.average.assign(tf.zeros_like(self.average))
