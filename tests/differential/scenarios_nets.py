"""Differential scenarios: `snt.nets`, `snt.initializers`, `snt.optimizers`.

Loaded by `harness.py` in both environments: imports only snt, tf, numpy.
"""

import numpy as np
import tensorflow as tf

import sonnet as snt


def register(h):
    x = h.x((2, 4))
    h.module_grid(
        "MLP",
        snt.nets.MLP,
        {"output_sizes": [3, 2], "@inputs": x},
        {
            "output_sizes": [
                ("list", lambda: [3, 2]),
                ("tuple", lambda: (3, 2)),
                ("np_ints", lambda: [np.int64(3), np.int32(2)]),
                ("ndarray", lambda: np.array([3, 2])),
                ("tensor", lambda: tf.constant([3, 2])),
                ("generator", lambda: (i for i in [3, 2])),
                ("empty", lambda: []),
                ("int", lambda: 3),
                ("None", lambda: None),
                ("zero", lambda: [0, 2]),
                ("negative", lambda: [-3]),
                ("whole_floats", lambda: [3.0, 2.0]),
            ],
            "w_init": h.initializers(),
            "b_init": h.initializers(),
            "with_bias": h.bools(True),
            "activation": [
                ("tanh", lambda: tf.tanh),
                ("lambda", lambda: lambda t: t * 2.0),
                ("None", lambda: None),
            ],
            "dropout_rate": h.floats(0.0)
            + [("half_eval", lambda: 0.5), ("one", lambda: 1.0)],
            "activate_final": h.bools(False),
            "@inputs": h.inputs((2, 4)),
            "@is_training": h.bools(False) + [("omitted", lambda: h.OMIT)],
        },
        modes=h.ALL_MODES,
    )
    h.module_grid(
        "MLP(dropout_train)",
        snt.nets.MLP,
        {"output_sizes": [3, 2], "dropout_rate": 0.5, "@inputs": x},
        {"@is_training": h.bools(True)},
        values=False,
    )
    small_convnet = {
        "output_channels": (2, 3),
        "strides": (1, 2),
        "w_init": h.Ramp(),
        "@inputs": h.x((2, 8, 8, 3)),
        "@is_training": False,
    }
    h.module_grid(
        "Cifar10ConvNet",
        snt.nets.Cifar10ConvNet,
        small_convnet,
        {
            "num_classes": h.ints(4, invalid=False),
            "output_channels": [
                ("list", lambda: [2, 3]),
                ("np_ints", lambda: (np.int64(2), np.int64(3))),
                ("mismatched", lambda: (2, 3, 4)),
            ],
            "strides": [("list", lambda: [1, 2]), ("ints", lambda: 1)],
            "data_format": h.strs("NHWC", "NCHW"),
            "@is_training": h.bools(False)[:6],
            "@test_local_stats": h.bools(True)[:6],
        },
        modes=("unknown_batch",),
    )
    # ResNets are slow to build: a few spellings only (the shared code paths
    # are covered by the BatchNorm and Conv2D grids).
    few_bools = [
        ("np.bool", lambda: np.bool_(False)),
        ("tensor", lambda: tf.constant(False)),
    ]
    h.module_grid(
        "ResNet",
        snt.nets.ResNet,
        {
            "blocks_per_group_list": [1, 1, 1, 1],
            "num_classes": 3,
            "channels_per_group_list": (4, 4, 4, 4),
            "@inputs": h.x((2, 8, 8, 3)),
            "@is_training": False,
        },
        {
            "blocks_per_group_list": [
                ("np_ints", lambda: [np.int64(1)] * 4),
                ("wrong_length", lambda: [1, 1]),
            ],
            "num_classes": [("np.int64", lambda: np.int64(3)), ("zero", lambda: 0)],
            "bn_config": [
                ("dict", lambda: {"decay_rate": 0.9, "eps": 1e-3}),
                ("create_scale", lambda: {"create_scale": False}),
                ("bogus_key", lambda: {"bogus": 1}),
            ],
            "resnet_v2": few_bools,
            "channels_per_group_list": [("wrong_length", lambda: (4, 4))],
            "@is_training": few_bools,
        },
        modes=False,
    )
    h.add("ResNet50(constructor)", lambda: repr(snt.nets.ResNet50(10)) and "ok")
    vq_base = {
        "embedding_dim": 4,
        "num_embeddings": 5,
        "commitment_cost": 0.25,
        "@inputs": h.x((2, 3, 4)),
        "@is_training": False,
    }
    vq_axes = {
        "embedding_dim": h.ints(4),
        "num_embeddings": h.ints(5),
        "commitment_cost": h.floats(0.25),
        "dtype": h.dtypes(),
        "@is_training": h.bools(False),
        "@inputs": h.inputs((2, 3, 4)),
    }
    h.module_grid("VectorQuantizer", snt.nets.VectorQuantizer, vq_base, vq_axes)
    h.module_grid(
        "VectorQuantizerEMA",
        snt.nets.VectorQuantizerEMA,
        {**vq_base, "decay": 0.9},
        {**vq_axes, "decay": h.floats(0.9), "epsilon": h.floats(1e-5)},
        modes=h.ALL_MODES,
    )

    # -- initializers
    init_axes = {
        "@shape": h.shapes((3, 4))
        + [("int", lambda: 3), ("empty", lambda: ()), ("rank3", lambda: (2, 3, 4))],
        "@dtype": h.dtypes(),
    }
    for name, ctor, args in [
        ("Zeros", snt.initializers.Zeros, {}),
        ("Ones", snt.initializers.Ones, {}),
        ("Constant", snt.initializers.Constant, {"value": h.floats(0.5)}),
        ("RandomUniform", snt.initializers.RandomUniform, None),
        ("RandomNormal", snt.initializers.RandomNormal, None),
        ("TruncatedNormal", snt.initializers.TruncatedNormal, None),
        ("Identity", snt.initializers.Identity, {"gain": h.floats(2.0)}),
        ("Orthogonal", snt.initializers.Orthogonal, None),
        ("VarianceScaling", snt.initializers.VarianceScaling, None),
    ]:
        random = args is None
        if random:
            args = {"seed": h.ints(3) + [("whole_float", lambda: 3.0)]}
            if name == "RandomUniform":
                args.update(minval=h.floats(-1.0), maxval=h.floats(1.0))
            elif name in ("RandomNormal", "TruncatedNormal"):
                args.update(mean=h.floats(0.0), stddev=h.floats(1.0))
            elif name == "Orthogonal":
                args.update(gain=h.floats(1.0))
            elif name == "VarianceScaling":
                args.update(
                    scale=h.floats(1.0),
                    mode=h.strs("fan_in", "fan_out", "fan_avg"),
                    distribution=h.strs("truncated_normal", "normal", "uniform"),
                )
        h.grid(
            f"initializers.{name}",
            lambda _c=ctor, _r=random, **kw: _initialize(h, _c, _r, **kw),
            {"@shape": (3, 4), "@dtype": tf.float32},
            {**args, **init_axes},
        )
    h.add("initializers.Identity(non_square)", _identity_non_square)
    h.add("initializers.Orthogonal(seeded_equal)", _orthogonal_seeded)

    # -- optimizers
    for name, cls, base, axes in [
        ("SGD", snt.optimizers.SGD, {"learning_rate": 0.1}, {}),
        (
            "Momentum",
            snt.optimizers.Momentum,
            {"learning_rate": 0.1, "momentum": 0.9},
            {"momentum": h.floats(0.9), "use_nesterov": h.bools(False)},
        ),
        (
            "Adam",
            snt.optimizers.Adam,
            {},
            {
                "beta1": h.floats(0.9),
                "beta2": h.floats(0.999, invalid=False),
                "epsilon": h.floats(1e-8, invalid=False),
            },
        ),
        (
            "RMSProp",
            snt.optimizers.RMSProp,
            {"learning_rate": 0.1},
            {
                "decay": h.floats(0.9, invalid=False),
                "momentum": h.floats(0.5),
                "epsilon": h.floats(1e-10, invalid=False),
                "centered": h.bools(False),
            },
        ),
    ]:
        h.grid(
            f"optimizers.{name}",
            lambda _c=cls, **kw: _optimize(_c, **kw),
            base,
            {"learning_rate": h.floats(0.1), **axes, **_APPLY_AXES},
        )
        h.grid(
            f"functional.{name.lower()}",
            lambda _c=cls, **kw: _functional_optimize(_c, **kw),
            base,
            {"learning_rate": h.floats(0.1, invalid=False)},
        )
        h.add(
            f"optimizers.{name}(tf.function)",
            lambda _c=cls, _b=base: _optimize(_c, traced=True, **_b),
        )
    h.add("optimizers(same_names_in_one_trace)", _same_names_in_one_trace)


_APPLY_AXES = {
    "@updates": [
        ("None_entry", lambda: "none"),
        ("IndexedSlices", lambda: "sparse"),
        ("float64", lambda: "float64"),
        ("wrong_length", lambda: "short"),
        ("wrong_shape", lambda: "shape"),
        ("ndarray", lambda: "ndarray"),
    ],
}


def _initialize(h, ctor, random, **kwargs):
    shape = kwargs.pop("@shape")
    dtype = kwargs.pop("@dtype")
    value = ctor(**kwargs)(shape, dtype)
    return h.Spec(value) if random else value


def _identity_non_square():
    return snt.initializers.Identity(gain=0.5)([2, 3, 4], tf.float32)


def _orthogonal_seeded():
    a = snt.initializers.Orthogonal(seed=3)([4, 4], tf.float32)
    b = snt.initializers.Orthogonal(seed=3)([4, 4], tf.float32)
    product = tf.matmul(a, a, transpose_a=True)
    return product, bool(tf.reduce_all(a == b))


def _params():
    return [
        tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="w"),
        tf.Variable([0.5, -0.5], name="b"),
    ]


def _updates(kind, params):
    if kind == "none":
        return [None, tf.constant([0.1, 0.2])]
    if kind == "sparse":
        rows = tf.IndexedSlices(tf.constant([[0.1, 0.1]]), tf.constant([1]), (2, 2))
        return [rows, tf.constant([0.1, 0.2])]
    if kind == "float64":
        return [tf.ones([2, 2], tf.float64), tf.ones([2], tf.float64)]
    if kind == "short":
        return [tf.ones([2, 2])]
    if kind == "shape":
        return [tf.ones([3]), tf.ones([2])]
    if kind == "ndarray":
        return [np.ones([2, 2], np.float32), np.ones([2], np.float32)]
    return [
        tf.fill(p.shape, 0.1) + tf.cast(tf.range(p.shape[-1]), p.dtype) * 0.05
        for p in params
    ]


def _optimize(cls, traced=False, **kwargs):
    kind = kwargs.pop("@updates", "dense")
    params = _params()
    optimizer = cls(**kwargs)

    def step():
        optimizer.apply(_updates(kind, params), params)

    if traced:
        step = tf.function(step)
    for _ in range(3):
        step()
    return params, optimizer


def _same_names_in_one_trace():
    # Two optimizers of one name whose slots are made in the same trace: the
    # graph makes the second's slot scopes unique (`adam/m_1/...`), as when
    # an agent's policy and critic optimizers step in one `tf.function`. One
    # made eagerly first keeps the plain names.
    params = _params()
    eager = snt.optimizers.Adam(0.1)
    eager.apply(_updates("dense", params), params)
    optimizers = [
        snt.optimizers.Adam(0.1),
        snt.optimizers.Adam(0.1),
        snt.optimizers.RMSProp(0.1, momentum=0.5, centered=True),
        snt.optimizers.RMSProp(0.1, momentum=0.5, centered=True),
        snt.optimizers.Momentum(0.1, 0.9, name="adam"),
        snt.optimizers.Momentum(0.1, 0.9, name="adam"),
    ]

    @tf.function
    def step():
        for optimizer in [*optimizers, eager]:
            optimizer.apply(_updates("dense", params), params)

    step()
    return [[v.name for v in o.variables] for o in [eager, *optimizers]]


def _functional_optimize(cls, **kwargs):
    # As the original's functional optimizers take them: the parameters of a
    # transformed function, a dict keyed by variable references.
    init = snt.initializers.Constant(0.5)
    net = snt.functional.transform(lambda x: snt.Linear(2, w_init=init)(x))
    params = net.init(tf.ones([1, 3]))
    optimizer = snt.functional.optimizer(cls)(**kwargs)
    state = optimizer.init(params)
    updates = {r: tf.fill(v.shape, 0.1) for r, v in params.items()}
    for _ in range(2):
        params, state = optimizer.apply(state, updates, params)

    def values(d):
        return [v for _, v in sorted(d.items(), key=lambda kv: kv[0].deref().name)]

    return values(params), values(state)
