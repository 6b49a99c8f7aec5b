"""Metrics: modules that accumulate state over a stream of values."""

from __future__ import annotations

import abc
from typing import Any

import tensorflow as tf

from sonnet._src import base, errors, once

__all__ = ["Mean", "Metric", "Sum"]

# With `tf.distribute` each replica holds a copy of the state; updates made in a
# replica context keep the first replica's result (as `snt.distribute.Replicator`
# does for every variable) instead of failing.
_AGGREGATION = tf.VariableAggregation.ONLY_FIRST_REPLICA


def state_variable(initial_value: Any, name: str) -> tf.Variable:
    """A non-trainable variable holding metric state."""
    return tf.Variable(
        initial_value, trainable=False, name=name, aggregation=_AGGREGATION
    )


def zeros_like(value: Any) -> tf.Tensor:
    """Zeros like `value` (a tensor or `tf.TensorSpec`), to initialize state;
    from the static shape when it is known (no op reading `value`)."""
    if not value.shape.is_fully_defined():
        return tf.zeros_like(value)
    return tf.zeros(value.shape, value.dtype)


def broadcasts_to(shape: tf.TensorShape, target: tf.TensorShape) -> bool:
    """Whether an operand of `shape` combined with one of `target` gives
    `target`'s shape."""
    try:
        return tf.broadcast_static_shape(shape, target).is_compatible_with(target)
    except ValueError:
        return False


def _is_string(value: Any) -> bool:
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value.dtype == tf.string
    return isinstance(value, (str, bytes))


def check_value(
    value: Any,
    state: tf.Variable | None,
    inexact: bool = False,
    initializing: bool = False,
    broadcast: bool = False,
) -> tf.Tensor:
    """Converts a metric input and checks it fits the metric's `state`.

    Exception types are the ones the original's ops raised: a value of
    another shape or dtype than the state, or a boolean or string value to
    accumulate, is a `errors.InvalidArgumentError` (a `ValueError` too).

    Args:
      value: The value passed to `update`/`initialize`/`__call__`.
      state: A state variable the value is combined with, or None before the
        state exists.
      inexact: Whether only floating point or complex values can be
        accumulated (an integer tensor is then a `TypeError`, as in the
        original).
      initializing: For `initialize`, which (as in the original) takes the
        shape and dtype of any tensor.
      broadcast: Whether a value that broadcasts to the state's shape is
        fine (else it must have that shape).

    Returns:
      `value` as a tensor (Python numbers and arrays take `state`'s dtype; a
      Python integer becomes float32 if `inexact`).
    """
    if inexact and not initializing and _is_string(value):
        # The original's arithmetic on strings had no kernel.
        raise errors.unimplemented_type(
            "value", "must have a floating point dtype", value
        )
    if not isinstance(value, (tf.Tensor, tf.Variable)):
        dtype = None if state is None else state.dtype
        try:
            value = tf.convert_to_tensor(value, dtype=dtype)
        except (TypeError, ValueError) as e:
            expected = "must be convertible to a numeric tensor"
            if dtype is not None:
                expected = f"must be convertible to a {dtype.name} tensor"
            raise errors.error_like(e, "value", expected, value) from e
        if inexact and state is None and value.dtype.is_integer:
            value = tf.cast(value, tf.float32)
    if initializing:
        return value  # type: ignore[return-value]
    dtype = value.dtype
    if state is not None:
        if dtype != state.dtype:
            raise errors.invalid_argument(
                "value",
                f"must have the dtype of the first value ({state.dtype.name})",
                value,
            )
        if broadcast:
            fits = broadcasts_to(value.shape, state.shape)
        else:
            fits = value.shape.is_compatible_with(state.shape)
        if not fits:
            raise errors.invalid_argument(
                "value",
                f"must have the shape of the first value {state.shape}",
                value,
            )
    if not (dtype.is_floating or dtype.is_integer or dtype.is_complex):
        raise errors.invalid_argument_type("value", "must have a numeric dtype", value)
    if inexact and not (dtype.is_floating or dtype.is_complex):
        raise errors.bad_type("value", "must have a floating point dtype", value)
    return value  # type: ignore[return-value]


class NotReadyError(ValueError, AttributeError):
    """A metric's `value` read before its first update.

    The original failed reading an attribute of the missing state
    (`AttributeError`; `ValueError` for `snt.Sum`), so this is both; as an
    `AttributeError`, `hasattr(metric, "value")` is False until then, as it
    was.
    """


def not_ready(metric: Metric) -> NotReadyError:
    return NotReadyError(
        f"`{metric.name}` has no value before its first `update(value)`. "
        f"Received: `value` requested from {metric!r} before any update."
    )


class Metric(base.Module):
    """Base class for metrics: state updated by a stream of values.

    Subclasses implement `initialize(value)` (create state shaped like
    `value`), `update(value)` and `reset()`, and override the `value`
    property (which is None here; like the original, it is not abstract).
    Calling a metric updates it and returns its current value.

    >>> class Maximum(snt.Metric):
    ...   def __init__(self):
    ...     super().__init__()
    ...     self.maximum = None
    ...   def initialize(self, value):
    ...     if self.maximum is None:
    ...       self.maximum = tf.Variable(tf.fill(value.shape, float("-inf")))
    ...   def update(self, value):
    ...     self.initialize(value)
    ...     self.maximum.assign(tf.maximum(self.maximum, value))
    ...   @property
    ...   def value(self):
    ...     return tf.convert_to_tensor(self.maximum)
    ...   def reset(self):
    ...     self.maximum.assign(tf.fill(self.maximum.shape, float("-inf")))
    >>> m = Maximum()
    >>> _ = m(tf.constant(1.0)); float(m(tf.constant(-2.0)))
    1.0
    """

    @abc.abstractmethod
    def initialize(self, value: Any) -> None:
        """Creates the state that depends on `value` (shape, dtype)."""

    @abc.abstractmethod
    def update(self, value: Any) -> None:
        """Accumulates `value` into the state."""

    @property
    def value(self) -> Any:
        """The current value of the metric (None unless a subclass says)."""
        return None

    @abc.abstractmethod
    def reset(self) -> None:
        """Returns the state to its initial value."""

    def __call__(self, value: Any) -> tf.Tensor:
        """Updates the metric with `value` and returns the new value."""
        self.update(value)
        return self.value


class _RunningSum(Metric):
    """A metric holding a `sum` variable created by the first value."""

    def __init__(self, name: str | None = None):
        super().__init__(name=name)
        self.sum: tf.Variable | None = None

    @once.once
    def initialize(self, value: Any) -> None:
        """Creates a zero `sum` shaped like `value` (without adding it)."""
        value = check_value(value, None, initializing=True)
        self.sum = state_variable(zeros_like(value), "sum")

    def _add(self, value: Any) -> None:
        value = check_value(value, self.sum)
        self.initialize(value)
        assert self.sum is not None
        self.sum.assign_add(value)


class Sum(_RunningSum):
    """Running element-wise sum of the values it is given.

    The state `sum` (a non-trainable variable named `sum`) is created by the
    first `update` (or an explicit `initialize`) with the value's shape and
    dtype; later values must have the same shape and dtype.

    Args:
      name: Module name, default `"sum"`.

    >>> total = snt.Sum()
    >>> _ = total(tf.constant([1.0, 2.0]))
    >>> total(tf.constant([3.0, 4.0])).numpy()
    array([4., 6.], dtype=float32)
    """

    def update(self, value: Any) -> None:
        """Adds `value` to the running sum."""
        self._add(value)

    @property
    def value(self) -> tf.Tensor:
        """The sum of all values since creation or the last `reset`."""
        if self.sum is None:
            raise not_ready(self)
        return tf.convert_to_tensor(self.sum)

    def reset(self) -> None:
        """Sets the sum back to zero."""
        if self.sum is not None:
            self.sum.assign(tf.zeros_like(self.sum))


class Mean(_RunningSum):
    """Running element-wise mean of the values it is given.

    Holds a `count` of updates (int64, created in the constructor) and a `sum`
    created by the first `update` (or `initialize`) with the value's shape and
    dtype; `value` is `sum / count`.

    Args:
      name: Module name, default `"mean"`.

    >>> mean = snt.Mean()
    >>> _ = mean(tf.constant([1.0, 2.0]))
    >>> mean(tf.constant([3.0, 6.0])).numpy()
    array([2., 4.], dtype=float32)
    """

    def __init__(self, name: str | None = None):
        super().__init__(name=name)
        self.count = state_variable(tf.constant(0, tf.int64), "count")

    def update(self, value: Any) -> None:
        """Adds `value` to the sum and increments the count."""
        self._add(value)
        self.count.assign_add(1)

    @property
    def value(self) -> tf.Tensor:
        """The mean of all values since creation or the last `reset`."""
        if self.sum is None:
            raise not_ready(self)
        return self.sum / tf.cast(self.count, self.sum.dtype)

    def reset(self) -> None:
        """Sets the sum and the count back to zero."""
        if self.sum is not None:
            self.sum.assign(tf.zeros_like(self.sum))
        self.count.assign(0)
