"""SGD with (optionally Nesterov) momentum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, once, utils
from sonnet._src.optimizers import optimizer_utils as opt_utils


class Momentum(base.Optimizer):
    """SGD with momentum (Polyak's heavy ball, or Nesterov's variant).

    Per parameter, with an accumulator `acc` (starts at zero)::

      acc = momentum * acc + update
      parameter -= learning_rate * (momentum * acc + update)  # Nesterov
      parameter -= learning_rate * acc                        # otherwise

    The accumulators are created on the first `apply` (one per parameter of
    that call, matched by position afterwards), in the list
    `accumulated_momentum` (checkpoint paths `accumulated_momentum/<i>`,
    variable names `momentum/accumulated_momentum/<parameter name>`).
    `tf.IndexedSlices` updates (repeated indices summed) update only the
    indexed rows of the parameter and of its accumulator.

    Args:
      learning_rate: Step size: real number, scalar tensor, `tf.Variable`
        (tracked; assign it to change it) or a schedule (a callable, see
        `snt.optimizers.schedules`; it adds a `step` variable). Cast to each
        update's dtype.
      momentum: Decay of the accumulator, same kinds of values; 0 gives SGD.
      use_nesterov: Python bool: use Nesterov momentum
        (arXiv:1212.0901); default False.
      name: Module name; default `"momentum"`.

    >>> w = tf.Variable([1.0])
    >>> opt = snt.optimizers.Momentum(learning_rate=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...   opt.apply([tf.constant([1.0])], [w])
    >>> w.numpy(), opt.accumulated_momentum[0].numpy()
    (array([0.71], dtype=float32), array([1.9], dtype=float32))
    """

    def __init__(
        self,
        learning_rate: Any,
        momentum: Any,
        use_nesterov: bool = False,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.learning_rate, self._scheduled = opt_utils.learning_rate(learning_rate)
        if self._scheduled:
            self.step = opt_utils.step_counter()
        self.momentum = opt_utils.hyper_parameter("momentum", momentum)
        self.use_nesterov = checks.flag("use_nesterov", use_nesterov)
        self.accumulated_momentum: list[tf.Variable] = []

    @once.once
    def _initialize(self, parameters: Sequence[tf.Variable]) -> None:
        opt_utils.create_slots(
            parameters, accumulated_momentum=self.accumulated_momentum
        )

    @utils.no_autograph
    def apply(self, updates: Sequence[Any], parameters: Sequence[tf.Variable]) -> None:
        """Applies `updates` to `parameters` (see `snt.Optimizer.apply`).

        The first call creates `accumulated_momentum`, one per parameter.
        """
        checked, learning_rate = opt_utils.begin_apply(
            self, updates, parameters, self.accumulated_momentum
        )
        hyper = opt_utils.CastCache(opt_utils.casts(learning_rate, self.momentum))
        nesterov = self.use_nesterov
        opt_utils.for_each_update(
            lambda p, g, acc: _momentum_rule(p, g, acc, hyper, nesterov),
            checked,
            parameters,
            self.accumulated_momentum,
        )


# The fused kernels: (dense, sparse).
_KERNELS = (tf.raw_ops.ResourceApplyMomentum, tf.raw_ops.ResourceSparseApplyMomentum)


def _momentum_rule(
    parameter: tf.Variable,
    update: Any,
    accumulator: tf.Variable,
    hyper: opt_utils.CastCache,
    nesterov: bool,
) -> None:
    param, acc = opt_utils.Ref(parameter), opt_utils.Ref(accumulator)
    if param.fused(acc):
        lr, mu = hyper(param.dtype)
        opt_utils.fused_apply(
            _KERNELS,
            update,
            var=param.handle,
            accum=acc.handle,
            lr=lr,
            momentum=mu,
            use_nesterov=nesterov,
        )
        return
    dtype = param.compute_dtype
    lr, mu = hyper(dtype)
    if isinstance(update, tf.IndexedSlices):
        values, indices = opt_utils.deduplicate(update)
        values = tf.cast(values, dtype)
        new_acc = mu * acc.gather(indices) + values
        acc.scatter_update(indices, new_acc)
        step = lr * (mu * new_acc + values) if nesterov else lr * new_acc
        param.scatter_sub(indices, step)
    else:
        update = tf.cast(update, dtype)
        new_acc = mu * acc.read() + update
        acc.assign(new_acc)
        param.assign_sub(lr * (mu * new_acc + update) if nesterov else lr * new_acc)
