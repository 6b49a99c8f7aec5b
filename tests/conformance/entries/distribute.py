"""Registry entries for `snt.distribute` modules."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance.case import Case


def _images(shape: tuple[int, ...] = (4, 3, 3, 2)) -> tuple[tf.Tensor]:
    x = tf.reshape(tf.range(tf.reduce_prod(shape), dtype=tf.float32), shape)
    return (tf.sin(x) * 3.0 + 1.0,)


def _crbn(data_format: str = "channels_last") -> snt.distribute.CrossReplicaBatchNorm:
    return snt.distribute.CrossReplicaBatchNorm(
        create_scale=True,
        create_offset=True,
        moving_mean=snt.ExponentialMovingAverage(0.9, name="moving_mean"),
        moving_variance=snt.ExponentialMovingAverage(0.9, name="moving_variance"),
        data_format=data_format,
    )


CASES = [
    Case(
        id="CrossReplicaBatchNorm-train",
        cls=snt.distribute.CrossReplicaBatchNorm,
        factory=_crbn,
        inputs=_images,
        call=lambda m, x: m(x, is_training=True),
        ctor_kwargs={
            "create_scale": True,
            "create_offset": True,
            "moving_mean": snt.ExponentialMovingAverage(0.9, name="moving_mean"),
            "moving_variance": snt.ExponentialMovingAverage(
                0.9, name="moving_variance"
            ),
        },
    ),
    Case(
        id="CrossReplicaBatchNorm-eval",
        cls=snt.distribute.CrossReplicaBatchNorm,
        factory=_crbn,
        inputs=_images,
        call=lambda m, x: m(x, is_training=False),
    ),
    Case(
        id="CrossReplicaBatchNorm-NCW-local-stats",
        cls=snt.distribute.CrossReplicaBatchNorm,
        factory=lambda: _crbn("NCW"),
        # Two channels, like the other cases: the conformance suite makes a
        # plain `MirroredStrategy` per test, and those share collective keys
        # across a process, so every all-reduce there must have one shape.
        inputs=lambda: _images((4, 2, 5)),
        call=lambda m, x: m(x, is_training=False, test_local_stats=True),
    ),
]
