"""Differential scenarios: normalisation modules.

Loaded by `harness.py` in both environments: imports only snt, tf, numpy.
"""

import numpy as np
import tensorflow as tf

import sonnet as snt

_SHAPE = (4, 3, 3, 4)


def register(h):
    x = h.x(_SHAPE)
    common = {
        "create_scale": h.bools(True),
        "create_offset": h.bools(True),
        "eps": h.floats(1e-3),
        "scale_init": h.initializers(),
        "offset_init": h.initializers(),
        "data_format": h.strs("channels_last", "channels_first", "NHWC", "NCHW"),
        "@inputs": h.inputs(_SHAPE),
    }
    h.module_grid(
        "BatchNorm(train)",
        snt.BatchNorm,
        {
            "create_scale": True,
            "create_offset": True,
            "@inputs": x,
            "@is_training": True,
        },
        {
            **common,
            "decay_rate": h.floats(0.9) + [("one", lambda: 1.0)],
            "@is_training": h.bools(True),
            "@test_local_stats": h.bools(False),
        },
        modes=h.ALL_MODES,
    )
    h.module_grid(
        "BatchNorm(eval)",
        snt.BatchNorm,
        {
            "create_scale": False,
            "create_offset": False,
            "@inputs": x,
            "@is_training": False,
        },
        {
            "@test_local_stats": h.bools(False),
            "@scale": [
                ("tensor", lambda: tf.constant([1.0, 2.0, 3.0, 4.0])),
                ("scalar", lambda: 2.0),
                ("wrong_shape", lambda: tf.ones([3])),
            ],
            "@offset": [
                ("tensor", lambda: tf.constant([0.5, 0.0, 0.1, 0.2])),
                ("list", lambda: [0.5, 0.0, 0.1, 0.2]),
            ],
        },
    )
    h.add("BatchNorm(eval_before_train)", _batch_norm_eval_first)
    h.module_grid(
        "CrossReplicaBatchNorm",
        lambda **kw: snt.distribute.CrossReplicaBatchNorm(
            moving_mean=snt.ExponentialMovingAverage(0.9),
            moving_variance=snt.ExponentialMovingAverage(0.9),
            **kw,
        ),
        {
            "create_scale": True,
            "create_offset": True,
            "@inputs": x,
            "@is_training": True,
        },
        {"eps": h.floats(1e-3, invalid=False), "@is_training": h.bools(True)},
    )
    h.module_grid(
        "BaseBatchNorm",
        snt.BaseBatchNorm,
        {
            "create_scale": True,
            "create_offset": True,
            "moving_mean": h.lazy(lambda: snt.ExponentialMovingAverage(0.5)),
            "moving_variance": h.lazy(lambda: snt.ExponentialMovingAverage(0.5)),
            "@inputs": x,
            "@is_training": True,
        },
        {
            "moving_mean": [
                ("Mean", lambda: snt.Mean()),
                ("None", lambda: None),
                ("float", lambda: 0.5),
            ],
            "@is_training": h.bools(True),
        },
    )
    h.module_grid(
        "LayerNorm",
        snt.LayerNorm,
        {"axis": -1, "create_scale": True, "create_offset": True, "@inputs": x},
        {
            **common,
            "axis": [
                ("int", lambda: -1),
                ("np.int64", lambda: np.int64(3)),
                ("tensor", lambda: tf.constant(-1)),
                ("slice", lambda: slice(1, None)),
                ("list", lambda: [1, 2]),
                ("tuple", lambda: (-1, -2)),
                ("duplicate", lambda: [1, 1]),
                ("out_of_range", lambda: 4),
                ("whole_float", lambda: -1.0),
                ("None", lambda: None),
                ("str", lambda: "x"),
                ("empty", lambda: []),
            ],
        },
        modes=h.ALL_MODES,
    )
    h.module_grid(
        "InstanceNorm",
        snt.InstanceNorm,
        {"create_scale": True, "create_offset": True, "@inputs": x},
        common,
    )
    h.module_grid(
        "GroupNorm",
        snt.GroupNorm,
        {"groups": 2, "@inputs": x},
        {
            **common,
            "groups": h.ints(2) + [("not_divisor", lambda: 3)],
            "axis": [
                ("slice", lambda: slice(1, None)),
                ("int", lambda: -1),
                ("list", lambda: [1, 2, 3]),
                ("tuple", lambda: (3,)),
                ("out_of_range", lambda: 5),
                ("str", lambda: "x"),
            ],
        },
    )


def _batch_norm_eval_first():
    bn = snt.BatchNorm(True, True)
    return bn(tf.ones((2, 3)), is_training=False), bn
