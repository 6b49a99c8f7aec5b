"""Registry entries for the normalization modules (batch, layer, instance, group)."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance.registry import Case


def _images(shape: tuple[int, ...] = (4, 3, 3, 2)) -> tuple[tf.Tensor]:
    n = 1
    for d in shape:
        n *= d
    x = tf.reshape(tf.range(n, dtype=tf.float32), shape)
    return (tf.sin(x) * 3.0 + 1.0,)


def _train(module: snt.BatchNorm, x: tf.Tensor) -> tf.Tensor:
    return module(x, is_training=True)


def _eval(module: snt.BatchNorm, x: tf.Tensor) -> tf.Tensor:
    return module(x, is_training=False)


def _local_stats(module: snt.BatchNorm, x: tf.Tensor) -> tf.Tensor:
    return module(x, is_training=False, test_local_stats=True)


def _bn() -> snt.BatchNorm:
    return snt.BatchNorm(create_scale=True, create_offset=True, decay_rate=0.9)


def _base_bn() -> snt.BaseBatchNorm:
    return snt.BaseBatchNorm(
        create_scale=True,
        create_offset=False,
        moving_mean=snt.ExponentialMovingAverage(0.5, name="moving_mean"),
        moving_variance=snt.ExponentialMovingAverage(0.5, name="moving_variance"),
    )


CASES = [
    # Rank-4 channels-last: the fused kernel.
    Case(
        id="BatchNorm-train",
        cls=snt.BatchNorm,
        factory=_bn,
        inputs=_images,
        call=_train,
    ),
    Case(
        id="BatchNorm-eval", cls=snt.BatchNorm, factory=_bn, inputs=_images, call=_eval
    ),
    # Rank 2 (reshaped for the fused kernel) and rank-3 channels-first
    # (unfused), with batch statistics but no update.
    Case(
        id="BatchNorm-rank2-local-stats",
        cls=snt.BatchNorm,
        factory=lambda: snt.BatchNorm(False, True),
        inputs=lambda: _images((5, 3)),
        call=_local_stats,
    ),
    Case(
        id="BatchNorm-NCW-train",
        cls=snt.BatchNorm,
        factory=lambda: snt.BatchNorm(True, True, data_format="NCW"),
        inputs=lambda: _images((4, 3, 5)),
        call=_train,
    ),
    Case(
        id="BaseBatchNorm-train",
        cls=snt.BaseBatchNorm,
        factory=_base_bn,
        inputs=_images,
        call=_train,
    ),
    Case(
        id="LayerNorm",
        cls=snt.LayerNorm,
        factory=lambda: snt.LayerNorm(-1, create_scale=True, create_offset=True),
        inputs=lambda: _images((2, 3, 4)),
    ),
    Case(
        id="LayerNorm-slice-NCHW",
        cls=snt.LayerNorm,
        factory=lambda: snt.LayerNorm(
            slice(1, None),
            create_scale=True,
            create_offset=False,
            data_format="NCHW",
        ),
        inputs=_images,
    ),
    Case(
        id="InstanceNorm",
        cls=snt.InstanceNorm,
        factory=lambda: snt.InstanceNorm(create_scale=True, create_offset=True),
        inputs=_images,
    ),
    Case(
        id="GroupNorm",
        cls=snt.GroupNorm,
        factory=lambda: snt.GroupNorm(groups=2),
        inputs=lambda: _images((2, 3, 3, 4)),
    ),
    Case(
        id="GroupNorm-NCHW",
        cls=snt.GroupNorm,
        factory=lambda: snt.GroupNorm(groups=2, data_format="NCHW"),
        inputs=lambda: _images((2, 4, 3, 3)),
    ),
]

NOT_REGISTERED: dict[type, str] = {}
