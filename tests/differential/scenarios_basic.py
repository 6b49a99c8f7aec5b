"""Differential scenarios: basic modules and functions of `snt`.

Loaded by `harness.py` in both environments: imports only snt, tf, numpy.
"""

import numpy as np
import tensorflow as tf

import sonnet as snt


def register(h):
    x24 = h.x((2, 4))
    h.module_grid(
        "Linear",
        snt.Linear,
        {"output_size": 3, "w_init": h.Ramp(), "@inputs": x24},
        {
            "output_size": h.ints(3),
            "with_bias": h.bools(True),
            "w_init": h.initializers(),
            "b_init": h.initializers(),
            "name": h.names(),
            "@inputs": h.inputs((2, 4)),
        },
        modes=h.ALL_MODES,
    )
    h.module_grid(
        "Bias",
        snt.Bias,
        {"@inputs": h.x((2, 3, 4))},
        {
            "output_size": h.ints(4),
            "bias_dims": h.shapes((1, 2)) + [("empty", lambda: [])],
            "b_init": h.initializers(),
            "name": h.names(),
            "@inputs": h.inputs((2, 3, 4)),
        },
    )
    h.module_grid(
        "Flatten",
        snt.Flatten,
        {"@inputs": h.x((2, 3, 4))},
        {"preserve_dims": h.ints(1) + [("two", lambda: 2), ("three", lambda: 3)]},
    )
    h.module_grid(
        "Reshape",
        snt.Reshape,
        {"output_shape": (2, 2), "@inputs": h.x((2, 4))},
        {
            "output_shape": h.shapes((2, 2))
            + [("minus_one", lambda: (-1,)), ("int4", lambda: 4)],
            "preserve_dims": h.ints(1) + [("two", lambda: 2)],
            "@inputs": h.inputs((2, 4)),
        },
    )
    for f in (snt.flatten, snt.reshape):
        name = f.__name__

        def build(_f=f, **kwargs):
            return _f(**kwargs)

        base = {"inputs": h.x((2, 3, 2))}
        axes = {"inputs": h.inputs((2, 3, 2)), "name": h.names()}
        if f is snt.reshape:
            base["output_shape"] = (6,)
            axes["output_shape"] = h.shapes((6,)) + [("minus_one", lambda: (-1,))]
            axes["preserve_dims"] = h.ints(1)
        h.grid(name, build, base, axes)

    h.module_grid(
        "Sequential",
        snt.Sequential,
        {
            "layers": h.lazy(lambda: [snt.Linear(3, w_init=h.Ramp()), tf.nn.relu]),
            "@inputs": x24,
        },
        {
            "layers": [
                ("None", lambda: None),
                ("empty", lambda: []),
                ("tuple", lambda: (snt.Linear(3), tf.nn.relu)),
                ("generator", lambda: (f for f in [tf.nn.relu, tf.tanh])),
                ("function", lambda: [lambda x: x * 2.0]),
                ("str", lambda: "x"),
                ("not_callable", lambda: [1]),
            ],
            "@inputs": h.inputs((2, 4)),
        },
        call=lambda m, *a: m(*a),
        modes=h.ALL_MODES,
    )
    h.add("Sequential(multiple_outputs)", _sequential_multi)

    h.module_grid(
        "BatchApply",
        lambda **kw: snt.BatchApply(snt.Linear(3, w_init=h.Ramp()), **kw),
        {"@inputs": h.x((2, 3, 4))},
        {
            "num_dims": h.ints(2) + [("one", lambda: 1), ("three", lambda: 3)],
            "@inputs": h.inputs((2, 3, 4)),
        },
        modes=h.ALL_MODES,
    )
    h.add("BatchApply(nested_args)", _batch_apply_nested)
    for f in (snt.merge_leading_dims, snt.split_leading_dim):
        name = f.__name__
        if f is snt.merge_leading_dims:
            base = {"x": h.x((2, 3, 4)), "num_dims": 2}

            def build(**kwargs):
                return snt.merge_leading_dims(**kwargs)

        else:
            base = {"x": h.x((6, 4)), "example": h.x((2, 3, 5)), "num_dims": 2}

            def build(**kwargs):
                return snt.split_leading_dim(**kwargs)

        h.grid(
            name,
            build,
            base,
            {
                "x": h.inputs((6, 4) if "split" in name else (2, 3, 4)),
                "num_dims": h.ints(2) + [("three", lambda: 3)],
            },
        )

    h.module_grid(
        "Deferred",
        snt.Deferred,
        {"constructor": lambda: snt.Linear(3, w_init=h.Ramp()), "@inputs": x24},
        {
            "call_methods": [
                ("tuple", lambda: ("__call__",)),
                ("list", lambda: ["__call__"]),
                ("str", lambda: "__call__"),
                ("empty", lambda: ()),
            ],
            "name": h.names(),
        },
    )

    h.module_grid(
        "Dropout(eval)",
        snt.Dropout,
        {"rate": 0.5, "@inputs": x24, "@is_training": False},
        {
            "rate": h.floats(0.5) + [("one", lambda: 1.0), ("above_one", lambda: 1.5)],
            "noise_shape": h.shapes((2, 4)) + [("with_none", lambda: [None, 4])],
            "seed": h.ints(3) + [("whole_float", lambda: 3.0)],
            # True values (`not`, 2, a non-empty list) are training mode:
            # random values, see Dropout(train).
            "@is_training": [
                b for b in h.bools(False) if b[0] not in ("not", "int2", "list")
            ],
            "@inputs": h.inputs((2, 4)),
        },
        modes=False,
    )
    h.module_grid(
        "Dropout(train)",
        snt.Dropout,
        {"rate": 0.5, "seed": 1, "@inputs": x24, "@is_training": True},
        {
            "rate": h.floats(0.5),
            "seed": [("None", lambda: None), ("np.int64", lambda: np.int64(2))],
            "@is_training": h.bools(True),
        },
        values=False,
        modes=h.ALL_MODES,
    )
    h.add("Dropout(rate=0_keeps_values)", _dropout_rate_zero)

    ids = h.lazy(lambda: tf.constant([[0, 2], [1, 3]]))
    h.module_grid(
        "Embed",
        snt.Embed,
        {"vocab_size": 5, "embed_dim": 3, "@inputs": ids},
        {
            "vocab_size": h.ints(5),
            "embed_dim": h.ints(3),
            "existing_vocab": [
                ("ndarray", lambda: h.ramp((5, 3))),
                ("tensor", lambda: tf.constant(h.ramp((5, 3)))),
                ("list", lambda: h.ramp((5, 3)).tolist()),
                ("float64", lambda: h.ramp((5, 3), np.float64)),
                ("rank1", lambda: h.ramp((5,))),
            ],
            "densify_gradients": h.bools(False),
            "initializer": h.initializers(),
            "trainable": h.bools(True),
            "dtype": h.dtypes(),
            "@inputs": [
                ("list", lambda: [[0, 2], [1, 3]]),
                ("ndarray", lambda: np.array([[0, 2], [1, 3]])),
                ("int64", lambda: tf.constant([[0, 2], [1, 3]], tf.int64)),
                ("float", lambda: tf.constant([[0.0, 2.0]])),
                ("out_of_range", lambda: tf.constant([7])),
                ("negative", lambda: tf.constant([-1])),
                ("scalar", lambda: tf.constant(1)),
            ],
        },
        modes=h.ALL_MODES,
    )
    h.add("Embed(gradient)", _embed_gradient)

    h.module_grid(
        "ExponentialMovingAverage",
        snt.ExponentialMovingAverage,
        {"decay": 0.9, "@inputs": h.x((3,))},
        {
            "decay": h.floats(0.9) + [("one", lambda: 1.0), ("above", lambda: 1.5)],
            "@inputs": h.inputs((3,)),
        },
    )
    h.add("ExponentialMovingAverage(methods)", _ema_methods)

    for cls in (snt.Mean, snt.Sum):
        h.module_grid(
            cls.__name__,
            cls,
            {"@inputs": h.x((2, 3))},
            {"name": h.names(), "@inputs": h.inputs((2, 3))},
        )
    h.add("Mean(methods)", lambda: _metric_methods(snt.Mean()))
    h.add("Sum(methods)", lambda: _metric_methods(snt.Sum()))
    h.add("Mean(shape_change)", lambda: _metric_shape_change(snt.Mean()))
    h.add("Sum(shape_change)", lambda: _metric_shape_change(snt.Sum()))

    h.grid(
        "scale_gradient",
        _scale_gradient,
        {"t": h.x((3,)), "scale": 2.0},
        {"t": h.inputs((3,)), "scale": h.floats(2.0)},
    )
    h.grid(
        "leaky_clip_by_value",
        _leaky_clip,
        {"t": h.x((4,)), "clip_value_min": -0.5, "clip_value_max": 0.5},
        {
            "t": h.inputs((4,)),
            "clip_value_min": h.floats(-0.5, invalid=False),
            "clip_value_max": h.floats(0.5, invalid=False),
            "name": h.names(),
        },
    )


def _sequential_multi():
    seq = snt.Sequential([lambda a, b: (a + b, a - b), lambda pair: pair[0] * pair[1]])
    return seq(tf.constant([1.0, 2.0]), tf.constant([3.0, 5.0]))


def _batch_apply_nested():
    def f(a, b, scale=1.0):
        return {"sum": a + b * scale, "first": a}

    batch = snt.BatchApply(f)
    a = tf.reshape(tf.range(24, dtype=tf.float32), (2, 3, 4))
    return batch(a, a * 2.0, scale=3.0)


def _dropout_rate_zero():
    x = tf.ones((3, 4))
    return snt.Dropout(0.0)(x, is_training=True)


def _embed_gradient():
    embed = snt.Embed(existing_vocab=np.arange(12, dtype=np.float32).reshape(4, 3))
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(embed(tf.constant([0, 2, 2])))
    grad = tape.gradient(y, embed.embeddings)
    return tf.convert_to_tensor(grad), embed


def _ema_methods():
    ema = snt.ExponentialMovingAverage(0.5)
    first = ema(tf.constant([1.0, 2.0]))
    second = ema(tf.constant([3.0, 4.0]))
    value = ema.value
    ema.reset()
    after_reset = ema(tf.constant([5.0, 6.0]))
    ema.initialize(tf.constant([0.0, 0.0]))
    return first, second, value, after_reset, ema


def _metric_methods(metric):
    metric.update(tf.constant([1.0, 2.0]))
    first = metric.value
    metric(tf.constant([3.0, 1.0]))
    second = metric.value
    metric.reset()
    metric.update(np.array([4.0, 5.0], np.float32))
    return first, second, metric.value, metric


def _metric_shape_change(metric):
    metric.update(tf.constant([1.0, 2.0]))
    metric.update(tf.constant([3.0]))
    return metric.value


def _scale_gradient(t, scale):
    t = tf.convert_to_tensor(t)
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = snt.scale_gradient(t, scale)
        loss = tf.reduce_sum(y * y)
    return y, tape.gradient(loss, t)


def _leaky_clip(t, **kwargs):
    t = tf.convert_to_tensor(t)
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = snt.leaky_clip_by_value(t, **kwargs)
    return y, tape.gradient(y, t)
