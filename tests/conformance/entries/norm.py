"""Registry entries for the normalization modules (batch, layer, instance, group)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance import case
from tests.conformance.case import Case


def _images(shape: tuple[int, ...] = (4, 3, 3, 2)) -> tuple[tf.Tensor]:
    n = 1
    for d in shape:
        n *= d
    x = tf.reshape(tf.range(n, dtype=tf.float32), shape)
    return (tf.sin(x) * 3.0 + 1.0,)


def _train(module: Any, x: tf.Tensor) -> tf.Tensor:
    return module(x, is_training=True)


def _eval(module: Any, x: tf.Tensor) -> tf.Tensor:
    return module(x, is_training=False)


def _local_stats(module: Any, x: tf.Tensor) -> tf.Tensor:
    return module(x, is_training=False, test_local_stats=True)


_case = case.from_kwargs


def _base_kwargs() -> dict[str, Any]:
    return {
        "create_scale": True,
        "create_offset": False,
        "moving_mean": snt.ExponentialMovingAverage(0.5, name="moving_mean"),
        "moving_variance": snt.ExponentialMovingAverage(0.5, name="moving_variance"),
    }


_BN = {"create_scale": True, "create_offset": True, "decay_rate": 0.9}


class _LastBatch(snt.Metric):
    """A user's metric that starts from the value `initialize` is given and
    holds the last update (like the original's tests' metric).

    `snt.BaseBatchNorm` initializes it with the first batch's moments, so
    inference on the first call normalizes with them.
    """

    def __init__(self, name: str | None = None):
        super().__init__(name=name)
        self.last: tf.Variable | None = None

    @snt.once
    def initialize(self, value: tf.Tensor) -> None:
        # Zeros (a constant, created outside any trace), then the value.
        self.last = tf.Variable(tf.zeros_like(value), trainable=False, name="last")
        self.last.assign(value)

    def update(self, value: tf.Tensor) -> None:
        assert self.last is not None
        self.last.assign(value)

    @property
    def value(self) -> tf.Tensor:
        assert self.last is not None
        return tf.convert_to_tensor(self.last)

    def reset(self) -> None:
        pass


def _user_metrics() -> snt.BaseBatchNorm:
    return snt.BaseBatchNorm(True, True, _LastBatch("mean"), _LastBatch("variance"))


CASES = [
    # Rank-4 channels-last: the fused kernel.
    _case("BatchNorm-train", snt.BatchNorm, _BN, _images, _train),
    _case("BatchNorm-eval", snt.BatchNorm, _BN, _images, _eval),
    # Rank 2 (reshaped for the fused kernel), batch statistics, no update.
    _case(
        "BatchNorm-rank2-local-stats",
        snt.BatchNorm,
        {"create_scale": False, "create_offset": True},
        lambda: _images((5, 3)),
        _local_stats,
    ),
    # Rank-3 channels-first: the unfused path.
    _case(
        "BatchNorm-NCW-train",
        snt.BatchNorm,
        {"create_scale": True, "create_offset": True, "data_format": "NCW"},
        lambda: _images((4, 3, 5)),
        _train,
    ),
    # Rank-4 channels-first: the fused kernel in NCHW.
    _case(
        "BatchNorm-NCHW-train",
        snt.BatchNorm,
        {"create_scale": True, "create_offset": False, "data_format": "NCHW"},
        lambda: _images((2, 3, 2, 4)),
        _train,
    ),
    Case(
        id="BaseBatchNorm-train",
        cls=snt.BaseBatchNorm,
        # Fresh metrics per module (not deep copies), so that under a
        # distribution strategy their variables are created in its scope.
        factory=lambda: snt.BaseBatchNorm(**_base_kwargs()),
        inputs=_images,
        call=_train,
        ctor_kwargs=_base_kwargs(),
    ),
    Case(
        id="BaseBatchNorm-user-metrics-eval",
        cls=snt.BaseBatchNorm,
        factory=_user_metrics,
        inputs=_images,
        call=_eval,
    ),
    _case(
        "LayerNorm",
        snt.LayerNorm,
        {"axis": -1, "create_scale": True, "create_offset": True},
        lambda: _images((2, 3, 4)),
    ),
    _case(
        "LayerNorm-slice-NCHW",
        snt.LayerNorm,
        {
            "axis": slice(1, None),
            "create_scale": True,
            "create_offset": False,
            "data_format": "NCHW",
        },
        _images,
    ),
    _case(
        "InstanceNorm",
        snt.InstanceNorm,
        {"create_scale": True, "create_offset": True},
        _images,
    ),
    _case("GroupNorm", snt.GroupNorm, {"groups": 2}, lambda: _images((2, 3, 3, 4))),
    _case(
        "GroupNorm-NCHW",
        snt.GroupNorm,
        {"groups": 2, "data_format": "NCHW"},
        lambda: _images((2, 4, 3, 3)),
    ),
]

NOT_REGISTERED: dict[type, str] = {}
