"""`snt.ExponentialMovingAverage`: a debiased exponential moving average."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import checks, errors, metrics, once

__all__ = ["ExponentialMovingAverage"]


def check_decay(argument: str, decay: Any) -> Any:
    """A decay: a real number (as `checks.real`), or, as the original allowed,
    an array or tensor of them, one per element of the averaged values."""
    if isinstance(decay, np.ndarray) and decay.ndim:
        if decay.dtype.kind not in "iuf":
            raise errors.bad_type(argument, "must be a real number or array", decay)
        return tf.constant(decay)
    if isinstance(decay, (tf.Tensor, tf.Variable)) and decay.shape.rank:
        if not (decay.dtype.is_floating or decay.dtype.is_integer):
            raise errors.bad_type(argument, "must be a real number or array", decay)
        return decay
    return checks.real(argument, decay)


class _VariableOps:
    """Reads and writes of `tf.Variable`s (distributed ones included)."""

    @staticmethod
    def read(variable: Any, dtype: tf.DType) -> tf.Tensor:
        del dtype
        return variable.read_value()

    @staticmethod
    def add(variable: Any, delta: tf.Tensor) -> None:
        variable.assign_add(delta)

    @staticmethod
    def sub(variable: Any, delta: tf.Tensor) -> None:
        variable.assign_sub(delta)

    @staticmethod
    def assign(variable: Any, value: tf.Tensor) -> None:
        variable.assign(value)


class _HandleOps:
    """The same reads and writes, on variables' resource handles."""

    @staticmethod
    def read(handle: Any, dtype: tf.DType) -> tf.Tensor:
        return tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype)

    @staticmethod
    def add(handle: Any, delta: tf.Tensor) -> None:
        tf.raw_ops.AssignAddVariableOp(resource=handle, value=delta)

    @staticmethod
    def sub(handle: Any, delta: tf.Tensor) -> None:
        tf.raw_ops.AssignSubVariableOp(resource=handle, value=delta)

    @staticmethod
    def assign(handle: Any, value: tf.Tensor) -> None:
        tf.raw_ops.AssignVariableOp(resource=handle, value=value)


def _update(
    ops: Any, counter: Any, hidden: Any, average: Any, value: tf.Tensor, decay: Any
) -> None:
    """The update maths, once: one step of the moving average, debiased.

    `counter`, `hidden` and `average` are variables or their handles, read and
    written through `ops` (`_VariableOps` or `_HandleOps`).
    """
    dtype = value.dtype
    ops.add(counter, tf.constant(1, tf.int64))
    if isinstance(decay, (tf.Tensor, tf.Variable)):
        decay = tf.cast(decay, dtype)
    ops.sub(hidden, (ops.read(hidden, dtype) - value) * (1 - decay))
    base = decay if isinstance(decay, tf.Tensor) else tf.constant(decay, dtype)
    count = tf.cast(ops.read(counter, tf.int64), dtype)
    ops.assign(average, ops.read(hidden, dtype) / (1 - tf.pow(base, count)))


def _update_handles(*args: Any, decay: Any) -> None:
    """`_update` of each average: `args` are the averages' `(counter, hidden,
    average)` handles, three per average, then one value per average."""
    count = len(args) // 4
    for i in range(count):
        counter, hidden, average = args[3 * i : 3 * i + 3]
        _update(_HandleOps, counter, hidden, average, args[3 * count + i], decay)


def _update_tensor_decay(*args: Any) -> None:
    _update_handles(*args[:-1], decay=args[-1])


# Inside a `tf.function` the update is one call of a function instead of a
# dozen ops per average: creating ops is most of the cost of tracing a network
# with many moving averages (ResNet-50 has 106, updated in 53 calls: batch
# norm updates its mean and variance together, `update_together`; the calls
# cut its trace time by a third). TensorFlow inlines the call before it runs
# the graph, so the executed maths is the same. Handles rather than variables
# are passed: a function called with variables keeps weak references to the
# ones it was first traced with. A Python decay is bound into its own
# function (tracing would turn it into a float32 tensor argument); a tensor
# decay is the last argument.
_update_functions: dict[Any, Any] = {}


def _update_function(decay: Any) -> Any:
    key = None if isinstance(decay, tf.Tensor) else decay
    function = _update_functions.get(key)
    if function is None:
        python_function: Any = _update_tensor_decay
        if key is not None:
            python_function = functools.partial(_update_handles, decay=key)
        function = tf.function(python_function, autograph=False, reduce_retracing=True)
        _update_functions[key] = function
    return function


def _call_applies(*variables: Any) -> bool:
    """Whether the update may be a function call: inside a function, plain
    variables (not distributed or wrapped by a custom getter)."""
    if not tf.inside_function() or tf.distribute.has_strategy():
        return False
    return all(
        isinstance(v, tf.Variable)
        and not isinstance(v, tf.distribute.DistributedValues)
        for v in variables
    )


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
      decay: Weight of the past: a real number (Python, NumPy, or a scalar
        tensor or variable), normally in `[0, 1]` and close to 1 (e.g.
        0.99); as in the original, values outside are not refused (NaN and
        infinities are), and an array or tensor gives one decay per element
        (broadcast against the values).
      name: Module name, default `"exponential_moving_average"`.

    >>> ema = snt.ExponentialMovingAverage(decay=0.5)
    >>> float(ema(3.0)), float(ema(6.0))
    (3.0, 5.0)
    """

    def __init__(self, decay: Any, name: str | None = None):
        super().__init__(name=name)
        self._decay = check_decay("decay", decay)
        self._counter = metrics.state_variable(tf.constant(0, tf.int64), "counter")
        self._hidden: tf.Variable | None = None
        self.average: tf.Variable | None = None

    @once.once
    def initialize(self, value: Any) -> None:
        """Creates zero `hidden`/`average` state shaped like `value`."""
        value = metrics.check_value(value, None, inexact=True, initializing=True)
        decay = self._decay
        if isinstance(decay, (tf.Tensor, tf.Variable)) and decay.shape.rank:
            if not metrics.broadcasts_to(decay.shape, value.shape):
                raise errors.invalid_argument(
                    "value", f"must have a shape that `decay` {decay.shape} fits", value
                )
        zeros = metrics.zeros_like(value)
        self._hidden = metrics.state_variable(zeros, "hidden")
        self.average = metrics.state_variable(zeros, "average")

    def update(self, value: Any) -> None:
        """Moves the average towards `value`."""
        _update_all((self,), (value,))

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


def _joint_decay(averages: Sequence[ExponentialMovingAverage]) -> Any:
    """The decay all `averages` share, for one update call; None if they
    differ (tensors and variables: unless they are the same object)."""
    decay = averages[0]._decay
    for other in averages[1:]:
        if other._decay is not decay and (
            isinstance(decay, (tf.Tensor, tf.Variable)) or other._decay != decay
        ):
            return None
    return decay


def update_together(averages: Sequence[Any], values: Sequence[Any]) -> None:
    """`average.update(value)` for each pair, in order.

    Inside a `tf.function`, `snt.ExponentialMovingAverage`s with one decay and
    plain variables update in one function call (one op to trace, instead of a
    call per average); anything else updates one by one.
    """
    if not all(type(a) is ExponentialMovingAverage for a in averages) or (
        _joint_decay(averages) is None
    ):
        for average, value in zip(averages, values, strict=True):
            average.update(value)
        return
    _update_all(averages, values)


def _update_all(
    averages: Sequence[ExponentialMovingAverage], values: Sequence[Any]
) -> None:
    """The update of `averages` (sharing one decay) by `values`."""
    checked = []
    for average, value in zip(averages, values, strict=True):
        value = metrics.check_value(
            value, average._hidden, inexact=True, broadcast=True
        )
        average.initialize(value)
        checked.append(value)
    triples: list[tuple[tf.Variable, tf.Variable, tf.Variable]] = []
    for a in averages:
        assert a._hidden is not None and a.average is not None
        triples.append((a._counter, a._hidden, a.average))
    decay = averages[0]._decay
    if not _call_applies(*(v for triple in triples for v in triple)):
        for (counter, hidden, average), value in zip(triples, checked, strict=True):
            _update(_VariableOps, counter, hidden, average, value, decay)
        return
    if isinstance(decay, tf.Variable):
        decay = decay.read_value()
    values = [v.read_value() if isinstance(v, tf.Variable) else v for v in checked]
    handles = [v.handle for triple in triples for v in triple]
    if isinstance(decay, tf.Tensor):
        _update_function(decay)(*handles, *values, decay)
    else:
        _update_function(decay)(*handles, *values)
