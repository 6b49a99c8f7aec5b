"""Stochastic gradient descent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import base, utils
from sonnet._src.optimizers import optimizer_utils as opt_utils


class SGD(base.Optimizer):
    """Stochastic gradient descent: `parameter -= learning_rate * update`.

    Stateless (no slot variables). `tf.IndexedSlices` updates touch only the
    rows they index (repeated indices add up). With a schedule as
    `learning_rate`, the optimizer also counts its updates in `step` (int64
    scalar `sgd/t`, made in the constructor; a checkpoint path like Adam's):
    each `apply` uses `learning_rate(step)`, then increments `step`.

    Args:
      learning_rate: Step size: a real number, a scalar tensor, a scalar
        `tf.Variable` (tracked, so training code can `assign` it and the next
        `apply` uses the new value), or a schedule: a callable such as
        `snt.optimizers.schedules.CosineDecay(...)`. Cast to each update's
        dtype.
      name: Module name; default `"sgd"`.

    >>> w = tf.Variable([1.0, 2.0])
    >>> opt = snt.optimizers.SGD(learning_rate=0.1)
    >>> opt.apply([tf.constant([1.0, -1.0])], [w])
    >>> w.numpy()
    array([0.9, 2.1], dtype=float32)
    """

    def __init__(self, learning_rate: Any, name: str | None = None):
        super().__init__(name=name)
        self.learning_rate, self._scheduled = opt_utils.learning_rate(learning_rate)
        if self._scheduled:
            self.step = opt_utils.step_counter()

    @utils.no_autograph
    def apply(self, updates: Sequence[Any], parameters: Sequence[tf.Variable]) -> None:
        """Applies `updates` to `parameters` (see `snt.Optimizer.apply`).

        SGD keeps no slots, so each call may pass other parameters.
        """
        checked, learning_rate = opt_utils.begin_apply(self, updates, parameters)
        hyper = opt_utils.CastCache(lambda dtype: opt_utils.cast(learning_rate, dtype))
        opt_utils.for_each_update(
            lambda p, g: _sgd_rule(p, g, hyper), checked, parameters
        )


def _sgd_rule(parameter: tf.Variable, update: Any, hyper: opt_utils.CastCache) -> None:
    param = opt_utils.Ref(parameter)
    if isinstance(update, tf.IndexedSlices):
        # Scatter-subtract adds up repeated indices, so no de-duplication.
        dtype = param.compute_dtype
        param.scatter_sub(update.indices, tf.cast(update.values, dtype) * hyper(dtype))
    elif param.fused():
        tf.raw_ops.ResourceApplyGradientDescent(
            var=param.handle, alpha=hyper(param.dtype), delta=update
        )
    else:
        dtype = param.compute_dtype
        param.assign_sub(hyper(dtype) * tf.cast(update, dtype))
