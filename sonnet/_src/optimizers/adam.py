"""Adam (arXiv:1412.6980)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import tensorflow as tf

from sonnet._src import base, once, utils
from sonnet._src.optimizers import optimizer_utils as opt_utils


class Adam(base.Optimizer):
    """Adam: per-parameter step sizes from running moments of the updates.

    Each `apply` first increments `step` (`t`), then per parameter::

      m = beta1 * m + (1 - beta1) * update
      v = beta2 * v + (1 - beta2) * update ** 2
      m_hat = m / (1 - beta1 ** t)
      v_hat = v / (1 - beta2 ** t)
      parameter -= learning_rate * m_hat / (sqrt(v_hat) + epsilon)

    (`epsilon` is added after bias correction, as in the paper.) Dense
    updates use TensorFlow's fused Adam kernel with `epsilon` rescaled by
    `sqrt(1 - beta2 ** t)`, which is the same rule written differently.

    Variables: `step` (int64 scalar `adam/t`, created in the constructor) and,
    created on the first `apply` (one per parameter, matched by position
    afterwards), the lists `m` and `v` (variable names
    `adam/m/<parameter name>`, `adam/v/<parameter name>`). A
    `tf.IndexedSlices` update (repeated indices summed) updates only the
    indexed rows of the parameter, `m` and `v`.

    Args:
      learning_rate: Step size; default 0.001 (the paper's). A real number,
        scalar tensor, `tf.Variable` (tracked; assign it to change it) or a
        schedule: a callable (see `snt.optimizers.schedules`) that each
        `apply` calls as `learning_rate(step)`, with `step` before its
        increment (0 on the first `apply`).
      beta1: Decay of the first moment, in [0, 1); default 0.9.
      beta2: Decay of the second moment, in [0, 1); default 0.999.
      epsilon: Added to the denominator for stability; default 1e-8.
      name: Module name; default `"adam"`.

    All hyper-parameters are cast to each update's dtype.

    >>> w = tf.Variable([1.0, 2.0])
    >>> opt = snt.optimizers.Adam(learning_rate=0.001)
    >>> opt.apply([tf.constant([5.0, 5.0])], [w])
    >>> w.numpy(), int(opt.step)
    (array([0.999, 1.999], dtype=float32), 1)
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.learning_rate, self._scheduled = opt_utils.learning_rate(learning_rate)
        self.beta1 = opt_utils.hyper_parameter("beta1", beta1)
        self.beta2 = opt_utils.hyper_parameter("beta2", beta2)
        self.epsilon = opt_utils.hyper_parameter("epsilon", epsilon)
        self.step = opt_utils.step_counter()
        self.m: list[tf.Variable] = []
        self.v: list[tf.Variable] = []

    @once.once
    def _initialize(self, parameters: Sequence[tf.Variable]) -> None:
        opt_utils.create_slots(parameters, m=self.m, v=self.v)

    @utils.no_autograph
    def apply(self, updates: Sequence[Any], parameters: Sequence[tf.Variable]) -> None:
        """Applies `updates` to `parameters` (see `snt.Optimizer.apply`).

        Increments `step` first; the first call creates `m` and `v`.
        """
        checked, learning_rate = opt_utils.begin_apply(
            self, updates, parameters, self.m, step_every_apply=True
        )
        step = tf.convert_to_tensor(self.step)
        cache = opt_utils.CastCache(
            lambda dtype: self._hyper(step, learning_rate, dtype)
        )
        opt_utils.for_each_update(
            lambda p, g, m, v: _adam_rule(p, g, m, v, cache),
            checked,
            parameters,
            self.m,
            self.v,
        )

    @base.no_name_scope
    def _hyper(self, step: tf.Tensor, learning_rate: Any, dtype: tf.DType) -> Hyper:
        """The hyper-parameters of one `apply`, as `dtype` tensors."""
        t = tf.cast(step, dtype)
        beta1 = opt_utils.cast(self.beta1, dtype)
        beta2 = opt_utils.cast(self.beta2, dtype)
        epsilon = opt_utils.cast(self.epsilon, dtype)
        beta2_power = tf.pow(beta2, t)
        return Hyper(
            opt_utils.cast(learning_rate, dtype),
            beta1,
            beta2,
            epsilon,
            tf.pow(beta1, t),
            beta2_power,
            # The fused kernel's epsilon, see `_adam_rule`.
            epsilon * tf.sqrt(1 - beta2_power),
            None,
        )


class Hyper(NamedTuple):
    """Adam's per-`apply` values, cast to one dtype."""

    learning_rate: tf.Tensor
    beta1: tf.Tensor
    beta2: tf.Tensor
    epsilon: tf.Tensor
    beta1_power: tf.Tensor
    beta2_power: tf.Tensor
    fused_epsilon: tf.Tensor
    # `learning_rate * weight_decay` for decoupled weight decay (AdamW).
    decay: tf.Tensor | None


def _adam_rule(
    parameter: tf.Variable,
    update: Any,
    m_slot: tf.Variable,
    v_slot: tf.Variable,
    hyper: opt_utils.CastCache,
) -> None:
    param = opt_utils.Ref(parameter)
    m, v = opt_utils.Ref(m_slot), opt_utils.Ref(v_slot)
    sparse = isinstance(update, tf.IndexedSlices)
    # TensorFlow has no sparse Adam kernel.
    fused = not sparse and param.fused(m, v)
    dtype = param.dtype if fused else param.compute_dtype
    lr, beta1, beta2, epsilon, beta1_power, beta2_power, fused_epsilon, decay = hyper(
        dtype
    )
    if sparse:
        values, indices = opt_utils.deduplicate(update)
        values = tf.cast(values, dtype)
        new_m = beta1 * m.gather(indices) + (1 - beta1) * values
        new_v = beta2 * v.gather(indices) + (1 - beta2) * tf.square(values)
        m.scatter_update(indices, new_m)
        v.scatter_update(indices, new_v)
        step = _adam_step(new_m, new_v, lr, epsilon, beta1_power, beta2_power)
        if decay is not None:
            # Decoupled weight decay of the updated rows, from their old values.
            step += decay * param.gather(indices)
        param.scatter_sub(indices, step)
    elif fused:
        if decay is not None:
            # `parameter -= decay * parameter` in one fused kernel.
            tf.raw_ops.ResourceApplyGradientDescent(
                var=param.handle,
                alpha=decay,
                delta=tf.raw_ops.ReadVariableOp(resource=param.handle, dtype=dtype),
            )
        # The kernel computes lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + e),
        # which with e = epsilon * sqrt(1 - b2^t) is the rule above rearranged.
        tf.raw_ops.ResourceApplyAdam(
            var=param.handle,
            m=m.handle,
            v=v.handle,
            beta1_power=beta1_power,
            beta2_power=beta2_power,
            lr=lr,
            beta1=beta1,
            beta2=beta2,
            epsilon=fused_epsilon,
            grad=update,
        )
    else:
        update = tf.cast(update, param.compute_dtype)
        new_m = beta1 * m.read() + (1 - beta1) * update
        new_v = beta2 * v.read() + (1 - beta2) * tf.square(update)
        m.assign(new_m)
        v.assign(new_v)
        step = _adam_step(new_m, new_v, lr, epsilon, beta1_power, beta2_power)
        if decay is not None:
            step += decay * param.read()
        param.assign_sub(step)


def _adam_step(
    m: tf.Tensor,
    v: tf.Tensor,
    lr: tf.Tensor,
    epsilon: tf.Tensor,
    beta1_power: tf.Tensor,
    beta2_power: tf.Tensor,
) -> tf.Tensor:
    m_hat = m / (1 - beta1_power)
    v_hat = v / (1 - beta2_power)
    return lr * m_hat / (tf.sqrt(v_hat) + epsilon)
