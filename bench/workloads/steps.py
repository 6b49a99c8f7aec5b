"""Pieces the workloads' train steps share.

`raw_adam` is the raw column's optimizer: Adam (or AdamW, with a decoupled
weight decay) written by hand with the fused kernel, the maths `snt`'s
optimizers run, so that the raw steps pay no optimizer framework.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf


def raw_adam(
    params: list[tf.Variable], lr: float = 1e-3, weight_decay: float = 0.0
) -> Callable[[list[tf.Tensor]], None]:
    """Adam by hand: moment variables and the fused kernel per parameter;
    with `weight_decay`, AdamW's decoupled decay (`p -= lr * decay * p`)
    first."""
    beta1, beta2, epsilon = 0.9, 0.999, 1e-8
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    m = [tf.Variable(tf.zeros_like(p)) for p in params]
    v = [tf.Variable(tf.zeros_like(p)) for p in params]

    def apply(grads: list[tf.Tensor]) -> None:
        t = tf.cast(step.assign_add(1), tf.float32)
        beta1_power, beta2_power = tf.pow(beta1, t), tf.pow(beta2, t)
        # Epsilon after bias correction (the paper's rule), as `snt` does.
        fused_epsilon = epsilon * tf.sqrt(1 - beta2_power)
        for p, g, mp, vp in zip(params, grads, m, v, strict=True):
            if weight_decay:
                p.assign_sub(lr * weight_decay * p)
            tf.raw_ops.ResourceApplyAdam(
                var=p.handle,
                m=mp.handle,
                v=vp.handle,
                beta1_power=beta1_power,
                beta2_power=beta2_power,
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                epsilon=fused_epsilon,
                grad=g,
            )

    return apply
