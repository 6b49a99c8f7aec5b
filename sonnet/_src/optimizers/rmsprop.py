"""RMSProp (Hinton's lecture 6e), optionally centered and with momentum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, once, utils
from sonnet._src.optimizers import optimizer_utils as opt_utils


class RMSProp(base.Optimizer):
    """RMSProp: divides each update by a running root mean square.

    Per parameter, with slots `ms`, `mom` (and `mg` when centered), all
    starting at zero::

      ms = decay * ms + (1 - decay) * update ** 2
      mg = decay * mg + (1 - decay) * update          # centered only
      denominator = ms - mg ** 2 + epsilon            # centered
      denominator = ms + epsilon                      # otherwise
      mom = momentum * mom + learning_rate * update / sqrt(denominator)
      parameter -= mom

    Slots are created on the first `apply` (one per parameter, matched by
    position afterwards) in the lists `mom` (variable names
    `rms_prop/momentum/<parameter name>`), `ms` (`rms_prop/rms/...`) and,
    only when centered, `mg` (`rms_prop/mg/...`; the list stays empty
    otherwise). A `tf.IndexedSlices` update (repeated indices summed) updates
    only the indexed rows of the parameter and its slots.

    Args:
      learning_rate: Step size: real number, scalar tensor, `tf.Variable`
        (tracked; assign it to change it) or a schedule (a callable, see
        `snt.optimizers.schedules`; it adds a `step` variable).
      decay: Decay of the moving averages, in [0, 1]; default 0.9.
      momentum: Momentum of the step, >= 0; default 0 (none).
      epsilon: Added inside the square root for stability; default 1e-10.
      centered: Python bool: normalise by the variance rather than the
        second moment of the updates (arXiv:1308.0850); default False.
      name: Module name; default `"rms_prop"`.

    All hyper-parameters are cast to each update's dtype.

    >>> w = tf.Variable([1.0])
    >>> opt = snt.optimizers.RMSProp(learning_rate=0.1)
    >>> opt.apply([tf.constant([2.0])], [w])
    >>> w.numpy().round(4), opt.ms[0].numpy().round(4)
    (array([0.6838], dtype=float32), array([0.4], dtype=float32))
    """

    def __init__(
        self,
        learning_rate: Any,
        decay: Any = 0.9,
        momentum: Any = 0.0,
        epsilon: Any = 1e-10,
        centered: bool = False,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.learning_rate, self._scheduled = opt_utils.learning_rate(learning_rate)
        if self._scheduled:
            self.step = opt_utils.step_counter()
        self.decay = opt_utils.hyper_parameter("decay", decay)
        self.momentum = opt_utils.hyper_parameter("momentum", momentum)
        self.epsilon = opt_utils.hyper_parameter("epsilon", epsilon)
        self.centered = checks.flag("centered", centered)
        self.mom: list[tf.Variable] = []
        self.ms: list[tf.Variable] = []
        self.mg: list[tf.Variable] = []

    @once.once
    def _initialize(self, parameters: Sequence[tf.Variable]) -> None:
        opt_utils.create_slots(parameters, momentum=self.mom, rms=self.ms)
        if self.centered:
            opt_utils.create_slots(parameters, mg=self.mg)

    @utils.no_autograph
    def apply(self, updates: Sequence[Any], parameters: Sequence[tf.Variable]) -> None:
        """Applies `updates` to `parameters` (see `snt.Optimizer.apply`).

        The first call creates the slots `mom`, `ms` (and `mg`), one per parameter.
        """
        checked, learning_rate = opt_utils.begin_apply(
            self, updates, parameters, self.ms
        )
        hyper = opt_utils.CastCache(
            opt_utils.casts(learning_rate, self.decay, self.momentum, self.epsilon)
        )
        if self.centered:
            opt_utils.for_each_update(
                lambda p, g, mom, ms, mg: _rmsprop_rule(p, g, mom, ms, mg, hyper),
                checked,
                parameters,
                self.mom,
                self.ms,
                self.mg,
            )
        else:
            opt_utils.for_each_update(
                lambda p, g, mom, ms: _rmsprop_rule(p, g, mom, ms, None, hyper),
                checked,
                parameters,
                self.mom,
                self.ms,
            )


# The fused kernels, (dense, sparse): plain and centered.
_KERNELS = (tf.raw_ops.ResourceApplyRMSProp, tf.raw_ops.ResourceSparseApplyRMSProp)
_CENTERED_KERNELS = (
    tf.raw_ops.ResourceApplyCenteredRMSProp,
    tf.raw_ops.ResourceSparseApplyCenteredRMSProp,
)


def _rmsprop_rule(
    parameter: tf.Variable,
    update: Any,
    mom_slot: tf.Variable,
    ms_slot: tf.Variable,
    mg_slot: tf.Variable | None,
    hyper: opt_utils.CastCache,
) -> None:
    param = opt_utils.Ref(parameter)
    mom, ms = opt_utils.Ref(mom_slot), opt_utils.Ref(ms_slot)
    mg = None if mg_slot is None else opt_utils.Ref(mg_slot)
    fused = param.fused(mom, ms) if mg is None else param.fused(mom, ms, mg)
    dtype = param.dtype if fused else param.compute_dtype
    lr, decay, momentum, epsilon = hyper(dtype)
    if fused:
        kernels, slots = _KERNELS, dict(ms=ms.handle, mom=mom.handle)
        if mg is not None:
            kernels = _CENTERED_KERNELS
            slots["mg"] = mg.handle
        opt_utils.fused_apply(
            kernels,
            update,
            var=param.handle,
            lr=lr,
            rho=decay,
            momentum=momentum,
            epsilon=epsilon,
            **slots,
        )
    elif isinstance(update, tf.IndexedSlices):
        values, indices = opt_utils.deduplicate(update)
        values = tf.cast(values, dtype)
        new_ms = tf.square(values) * (1 - decay) + ms.gather(indices) * decay
        ms.scatter_update(indices, new_ms)
        denominator = new_ms + epsilon
        if mg is not None:
            new_mg = values * (1 - decay) + mg.gather(indices) * decay
            mg.scatter_update(indices, new_mg)
            denominator -= tf.square(new_mg)
        new_mom = momentum * mom.gather(indices) + lr * values * tf.math.rsqrt(
            denominator
        )
        mom.scatter_update(indices, new_mom)
        param.scatter_sub(indices, new_mom)
    else:
        update = tf.cast(update, dtype)
        new_ms = tf.square(update) * (1 - decay) + ms.read() * decay
        ms.assign(new_ms)
        denominator = new_ms + epsilon
        if mg is not None:
            new_mg = update * (1 - decay) + mg.read() * decay
            mg.assign(new_mg)
            denominator -= tf.square(new_mg)
        new_mom = momentum * mom.read() + lr * update * tf.math.rsqrt(denominator)
        mom.assign(new_mom)
        param.assign_sub(new_mom)
