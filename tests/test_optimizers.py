"""Tests for `snt.optimizers`: SGD, Momentum, Adam, RMSProp."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input

# NumPy references of the spec's rules, in float64 --------------------------
#
# Each reference takes (parameter, update, state, hyper) for the rows being
# updated and returns (new parameter, new state); `state` is a dict of slots.


def _ref_sgd(p, g, state, h):
    return p - h["learning_rate"] * g, state


def _ref_momentum(p, g, state, h):
    lr, mu = h["learning_rate"], h["momentum"]
    acc = mu * state["acc"] + g
    step = lr * (mu * acc + g) if h.get("use_nesterov") else lr * acc
    return p - step, {"acc": acc}


def _ref_adam(p, g, state, h):
    lr, b1, b2, eps = (
        h.get("learning_rate", 0.001),
        h.get("beta1", 0.9),
        h.get("beta2", 0.999),
        h.get("epsilon", 1e-8),
    )
    t = state["t"]
    m = b1 * state["m"] + (1 - b1) * g
    v = b2 * state["v"] + (1 - b2) * g * g
    m_hat = m / (1 - b1**t)
    v_hat = v / (1 - b2**t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), {"m": m, "v": v, "t": t}


def _ref_rmsprop(p, g, state, h):
    lr = h["learning_rate"]
    decay, mu, eps = (
        h.get("decay", 0.9),
        h.get("momentum", 0.0),
        h.get("epsilon", 1e-10),
    )
    ms = g * g * (1 - decay) + state["ms"] * decay
    mg = g * (1 - decay) + state["mg"] * decay
    den = ms - mg * mg + eps if h.get("centered") else ms + eps
    mom = mu * state["mom"] + lr * g / np.sqrt(den)
    return p - mom, {"ms": ms, "mg": mg, "mom": mom}


CONFIGS: list[tuple[str, type, dict[str, Any], Callable[..., Any]]] = [
    ("sgd", snt.optimizers.SGD, {"learning_rate": 0.1}, _ref_sgd),
    (
        "momentum",
        snt.optimizers.Momentum,
        {"learning_rate": 0.1, "momentum": 0.9},
        _ref_momentum,
    ),
    (
        "nesterov",
        snt.optimizers.Momentum,
        {"learning_rate": 0.05, "momentum": 0.8, "use_nesterov": True},
        _ref_momentum,
    ),
    ("adam", snt.optimizers.Adam, {"learning_rate": 0.01}, _ref_adam),
    (
        "adam_custom",
        snt.optimizers.Adam,
        {"learning_rate": 0.1, "beta1": 0.5, "beta2": 0.9, "epsilon": 1e-3},
        _ref_adam,
    ),
    ("rmsprop", snt.optimizers.RMSProp, {"learning_rate": 0.01}, _ref_rmsprop),
    (
        "rmsprop_momentum",
        snt.optimizers.RMSProp,
        {"learning_rate": 0.01, "decay": 0.8, "momentum": 0.5, "epsilon": 1e-6},
        _ref_rmsprop,
    ),
    (
        "rmsprop_centered",
        snt.optimizers.RMSProp,
        {"learning_rate": 0.01, "momentum": 0.5, "centered": True},
        _ref_rmsprop,
    ),
]
CONFIG_IDS = [c[0] for c in CONFIGS]

_TOLERANCE = {
    tf.float64: 1e-10,
    tf.float32: 2e-5,
    tf.float16: 1e-2,
    tf.bfloat16: 5e-2,
}


def _zero_state(shape: tuple[int, ...]) -> dict[str, Any]:
    return {k: np.zeros(shape) for k in ("acc", "m", "v", "ms", "mg", "mom")}


class _Reference:
    """Tracks the NumPy reference of one parameter across steps."""

    def __init__(
        self, rule: Callable[..., Any], hyper: dict[str, Any], value: np.ndarray
    ):
        self.rule, self.hyper = rule, hyper
        self.value = value.astype(np.float64)
        self.state = _zero_state(value.shape)

    def dense(self, g: np.ndarray, t: int) -> None:
        self.value, state = self.rule(self.value, g, {**self.state, "t": t}, self.hyper)
        self.state.update({k: v for k, v in state.items() if k != "t"})

    def sparse(self, values: np.ndarray, indices: np.ndarray, t: int) -> None:
        rows = np.unique(indices)
        summed = np.stack([values[indices == r].sum(axis=0) for r in rows])
        sliced = {k: v[rows] for k, v in self.state.items()}
        new, state = self.rule(self.value[rows], summed, {**sliced, "t": t}, self.hyper)
        self.value[rows] = new
        for k, v in state.items():
            if k != "t":
                self.state[k][rows] = v


def _grads(step: int, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(step)
    return rng.normal(size=shape) * scale


def _check_steps(
    cls: type,
    hyper: dict[str, Any],
    rule: Callable[..., Any],
    dtype: tf.DType = tf.float32,
    sparse: bool = False,
    function: bool = False,
    scale: float = 1.0,
    steps: int = 4,
) -> None:
    w0 = np.arange(12, dtype=np.float64).reshape(4, 3) / 10 - 0.5
    b0 = np.array([0.1, -0.2, 0.3])
    w = tf.Variable(tf.constant(w0, dtype), name="w")
    b = tf.Variable(tf.constant(b0, dtype), name="b")
    ref_w, ref_b = _Reference(rule, hyper, w0), _Reference(rule, hyper, b0)
    opt = cls(**hyper)
    indices = np.array([2, 0, 2])

    def apply(gw: Any, gb: tf.Tensor) -> None:
        opt.apply([gw, gb], [w, b])

    if function:
        apply = tf.function(apply)
    for t in range(1, steps + 1):
        gb = _grads(100 + t, (3,), scale)
        if sparse:
            values = _grads(t, (3, 3), scale)
            gw = tf.IndexedSlices(
                tf.constant(values, dtype), tf.constant(indices), tf.constant([4, 3])
            )
            ref_w.sparse(values, indices, t)
        else:
            values = _grads(t, (4, 3), scale)
            gw = tf.constant(values, dtype)
            ref_w.dense(values, t)
        ref_b.dense(gb, t)
        apply(gw, tf.constant(gb, dtype))
        tol = _TOLERANCE[dtype]
        np.testing.assert_allclose(
            w.numpy().astype(np.float64), ref_w.value, rtol=tol, atol=tol
        )
        np.testing.assert_allclose(
            b.numpy().astype(np.float64), ref_b.value, rtol=tol, atol=tol
        )
    if sparse:
        np.testing.assert_array_equal(
            w.numpy()[[1, 3]], w0[[1, 3]].astype(w.dtype.as_numpy_dtype)
        )


# Numerics -------------------------------------------------------------------


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS, ids=CONFIG_IDS)
def test_matches_numpy_reference(name, cls, hyper, rule, sparse, function):
    _check_steps(cls, hyper, rule, sparse=sparse, function=function)


@pytest.mark.parametrize(
    "dtype", [tf.float64, tf.float16, tf.bfloat16], ids=lambda d: d.name
)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS, ids=CONFIG_IDS)
def test_other_dtypes(name, cls, hyper, rule, sparse, dtype):
    # float64/float16 use the fused kernels; bfloat16 the plain-op rules.
    _check_steps(cls, hyper, rule, dtype=dtype, sparse=sparse, steps=2)


@pytest.mark.parametrize("scale", [1e-4, 1e-7, 1e-9])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_adam_epsilon_after_bias_correction(scale, sparse):
    # With tiny updates epsilon dominates; the fused kernel is only used with
    # a rescaled epsilon that reproduces the spec's placement exactly.
    _check_steps(
        snt.optimizers.Adam,
        {"learning_rate": 0.01},
        _ref_adam,
        sparse=sparse,
        scale=scale,
        steps=6,
    )


def test_adam_example_from_spec():
    w = tf.Variable([1.0, 2.0])
    opt = snt.optimizers.Adam(learning_rate=1e-3)
    expected = [[0.999, 1.999], [0.998, 1.998], [0.997, 1.997]]
    for e in expected:
        opt.apply([tf.constant([5.0, 5.0])], [w])
        np.testing.assert_allclose(w.numpy(), e, rtol=1e-6)
    assert int(opt.step) == 3


@pytest.mark.parametrize(
    "cls,hyper,kernel",
    [
        (snt.optimizers.SGD, {"learning_rate": 0.1}, "ResourceApplyGradientDescent"),
        (
            snt.optimizers.Momentum,
            {"learning_rate": 0.1, "momentum": 0.9},
            "ResourceApplyMomentum",
        ),
        (snt.optimizers.Adam, {}, "ResourceApplyAdam"),
        (snt.optimizers.RMSProp, {"learning_rate": 0.1}, "ResourceApplyRMSProp"),
        (
            snt.optimizers.RMSProp,
            {"learning_rate": 0.1, "centered": True},
            "ResourceApplyCenteredRMSProp",
        ),
    ],
)
def test_dense_float32_updates_use_fused_kernels(cls, hyper, kernel):
    w = tf.Variable(tf.ones([3]))
    opt = cls(**hyper)
    fn = tf.function(lambda g: opt.apply([g], [w]))
    graph = fn.get_concrete_function(tf.TensorSpec([3])).graph
    assert kernel in {op.type for op in graph.get_operations()}


def test_none_updates_skip_parameter_and_slots():
    a, b = tf.Variable([1.0, 2.0]), tf.Variable([3.0])
    opt = snt.optimizers.Momentum(0.1, 0.9)
    opt.apply([None, tf.constant([1.0])], [a, b])
    np.testing.assert_array_equal(a.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(opt.accumulated_momentum[0].numpy(), [0.0, 0.0])
    np.testing.assert_allclose(b.numpy(), [2.9])
    # Slots exist for every parameter of the first call, including skipped ones.
    assert len(opt.accumulated_momentum) == 2


def test_sparse_update_leaves_other_rows_and_their_slots():
    w = tf.Variable(tf.ones([3, 2]))
    opt = snt.optimizers.Adam(0.1)
    opt.apply([tf.ones([3, 2])], [w])
    m_before, v_before = opt.m[0].numpy(), opt.v[0].numpy()
    w_before = w.numpy()
    opt.apply([tf.IndexedSlices(tf.ones([1, 2]), tf.constant([1]))], [w])
    for before, after in ((m_before, opt.m[0]), (v_before, opt.v[0]), (w_before, w)):
        np.testing.assert_array_equal(after.numpy()[[0, 2]], before[[0, 2]])
        assert not np.array_equal(after.numpy()[1], before[1])


@pytest.mark.parametrize("dtype", [tf.uint8, tf.int16, tf.int32, tf.int64])
@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS, ids=CONFIG_IDS)
def test_sparse_indices_of_any_integer_dtype(name, cls, hyper, rule, dtype):
    w, ref = tf.Variable(tf.ones([3, 2])), tf.Variable(tf.ones([3, 2]))
    values = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    cls(**hyper).apply([tf.IndexedSlices(values, tf.constant([2, 0], dtype))], [w])
    cls(**hyper).apply([tf.IndexedSlices(values, tf.constant([2, 0]))], [ref])
    np.testing.assert_array_equal(w.numpy(), ref.numpy())


def test_gradient_of_gather_is_sparse_and_applied():
    emb = tf.Variable(tf.ones([5, 2]))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(emb, [1, 3, 1]))
    (grad,) = tape.gradient(loss, [emb])
    assert isinstance(grad, tf.IndexedSlices)
    snt.optimizers.SGD(0.5).apply([grad], [emb])
    np.testing.assert_allclose(emb.numpy()[:, 0], [1.0, 0.0, 1.0, 0.5, 1.0])


def test_apply_returns_none_and_works_without_autograph():
    w = tf.Variable([1.0])
    opt = snt.optimizers.RMSProp(0.1, centered=True)
    assert opt.apply([tf.constant([1.0])], [w]) is None
    tf.function(lambda: opt.apply([tf.constant([1.0])], [w]), autograph=False)()


@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS, ids=CONFIG_IDS)
def test_variable_access_order_is_the_same_on_retrace(name, cls, hyper, rule):
    # The first trace creates the slots; a retrace must watch the same
    # variables in the same order.
    lin = snt.Linear(2)
    opt = cls(**hyper)
    watched = []

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(lin(x)))
            grads = tape.gradient(loss, lin.trainable_variables)
            opt.apply(grads, lin.trainable_variables)
        watched.append([(id(v), v.name) for v in tape.watched_variables()])

    fn = tf.function(step, autograph=False)
    fn(tf.ones([1, 3]))
    fn(tf.ones([2, 3]))  # New input shape: retrace.
    assert len(watched) >= 2 and all(w == watched[0] for w in watched)


# Hyper-parameters -----------------------------------------------------------


@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS, ids=CONFIG_IDS)
def test_variable_hyperparameters_are_tracked_and_take_effect(
    name, cls, hyper, rule, tmp_path
):
    lr = tf.Variable(0.0, dtype=tf.float64, name="lr")
    opt = cls(**{**hyper, "learning_rate": lr})
    assert opt.learning_rate is lr
    w = tf.Variable([1.0, -1.0])
    opt.apply([tf.constant([1.0, 1.0])], [w])
    np.testing.assert_array_equal(w.numpy(), [1.0, -1.0])  # lr 0: no change.
    lr.assign(0.5)
    opt.apply([tf.constant([1.0, 1.0])], [w])
    assert np.all(w.numpy() < [1.0, -1.0])
    keys = [
        k
        for k, _ in tf.train.list_variables(
            tf.train.Checkpoint(opt=opt).write(str(tmp_path / "c"))
        )
    ]
    assert "opt/learning_rate/.ATTRIBUTES/VARIABLE_VALUE" in keys


def test_tensor_hyperparameters_and_integer_values():
    w = tf.Variable([1.0], dtype=tf.float64)
    snt.optimizers.SGD(tf.constant(1)).apply([tf.constant([0.5], tf.float64)], [w])
    snt.optimizers.SGD(1).apply([tf.constant([0.25], tf.float64)], [w])
    np.testing.assert_allclose(w.numpy(), [0.25])


def test_hyperparameters_stored_as_passed():
    opt = snt.optimizers.RMSProp(
        0.1, decay=0.5, momentum=0.2, epsilon=1e-3, centered=True
    )
    assert (opt.learning_rate, opt.decay, opt.momentum, opt.epsilon, opt.centered) == (
        0.1,
        0.5,
        0.2,
        1e-3,
        True,
    )
    adam = snt.optimizers.Adam()
    assert (adam.learning_rate, adam.beta1, adam.beta2, adam.epsilon) == (
        0.001,
        0.9,
        0.999,
        1e-8,
    )
    mom = snt.optimizers.Momentum(0.1, 0.9)
    assert mom.use_nesterov is False


# Variables, names, checkpoint paths ----------------------------------------


def _params() -> list[tf.Variable]:
    lin = snt.Linear(2)
    lin(tf.ones([1, 3]))
    return list(lin.trainable_variables)


def _all_variables(module: Any) -> list[tf.Variable]:
    return list(tf.Module.variables.fget(module))


@pytest.mark.parametrize(
    "make,names,paths",
    [
        (
            lambda: snt.optimizers.Momentum(0.1, 0.9),
            [
                "momentum/accumulated_momentum/linear/b",
                "momentum/accumulated_momentum/linear/w",
            ],
            ["accumulated_momentum/0", "accumulated_momentum/1"],
        ),
        (
            lambda: snt.optimizers.Adam(),
            [
                "adam/m/linear/b",
                "adam/m/linear/w",
                "adam/t",
                "adam/v/linear/b",
                "adam/v/linear/w",
            ],
            ["m/0", "m/1", "step", "v/0", "v/1"],
        ),
        (
            lambda: snt.optimizers.RMSProp(0.1),
            [
                "rms_prop/momentum/linear/b",
                "rms_prop/momentum/linear/w",
                "rms_prop/rms/linear/b",
                "rms_prop/rms/linear/w",
            ],
            ["mom/0", "mom/1", "ms/0", "ms/1"],
        ),
        (
            lambda: snt.optimizers.RMSProp(0.1, centered=True),
            [
                "rms_prop/mg/linear/b",
                "rms_prop/mg/linear/w",
                "rms_prop/momentum/linear/b",
                "rms_prop/momentum/linear/w",
                "rms_prop/rms/linear/b",
                "rms_prop/rms/linear/w",
            ],
            ["mg/0", "mg/1", "mom/0", "mom/1", "ms/0", "ms/1"],
        ),
    ],
    ids=["momentum", "adam", "rmsprop", "rmsprop_centered"],
)
def test_slot_names_order_and_checkpoint_paths(make, names, paths, tmp_path):
    params = _params()
    opt = make()
    opt.apply([tf.ones_like(p) for p in params], params)
    variables = _all_variables(opt)
    assert [v.name.split(":")[0] for v in variables] == names
    assert all(not v.trainable for v in variables)
    for v in variables:
        if v.name != "adam/t:0":
            assert v.shape in ([2], [3, 2])
    path = tf.train.Checkpoint(opt=opt).write(str(tmp_path / "ckpt"))
    keys = sorted(
        k[len("opt/") : -len("/.ATTRIBUTES/VARIABLE_VALUE")]
        for k, _ in tf.train.list_variables(path)
        if k.startswith("opt/")
    )
    assert keys == sorted(paths)


def test_slots_created_on_first_apply_adam_step_in_constructor():
    adam = snt.optimizers.Adam()
    assert [v.name for v in _all_variables(adam)] == ["adam/t:0"]
    assert adam.step.dtype == tf.int64 and adam.m == [] and adam.v == []
    rms = snt.optimizers.RMSProp(0.1)
    assert _all_variables(rms) == []
    w = tf.Variable([1.0])
    rms.apply([tf.constant([1.0])], [w])
    assert len(rms.mom) == len(rms.ms) == 1 and len(rms.mg) == 0
    with pytest.raises(ValueError, match="does not currently contain any variables"):
        _ = snt.optimizers.SGD(0.1).variables


def test_slots_created_inside_tf_function_have_the_same_names():
    params = _params()
    opt = snt.optimizers.Adam()
    tf.function(lambda: opt.apply([tf.ones_like(p) for p in params], params))()
    assert [v.name for v in _all_variables(opt)] == [
        "adam/m/linear/b:0",
        "adam/m/linear/w:0",
        "adam/t:0",
        "adam/v/linear/b:0",
        "adam/v/linear/w:0",
    ]


def test_slots_of_same_named_optimizers_in_one_trace_are_made_unique():
    # As in Sonnet 2.0.2, whose slots were made in the trace: the graph makes
    # the second `adam/m` scope `adam/m_1`. Eagerly, names repeat.
    params = _params()
    first, second = snt.optimizers.Adam(), snt.optimizers.Adam()
    updates = [tf.ones_like(p) for p in params]

    @tf.function
    def step():
        first.apply(updates, params)
        second.apply(updates, params)

    step()
    assert sorted(v.name for v in second.m + second.v) == [
        "adam/m_1/linear/b:0",
        "adam/m_1/linear/w:0",
        "adam/v_1/linear/b:0",
        "adam/v_1/linear/w:0",
    ]
    assert sorted(v.name for v in first.m) == ["adam/m/linear/b:0", "adam/m/linear/w:0"]
    eager = snt.optimizers.Adam()
    eager.apply(updates, params)
    assert sorted(v.name for v in eager.m) == ["adam/m/linear/b:0", "adam/m/linear/w:0"]


@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS, ids=CONFIG_IDS)
def test_checkpoint_round_trip_continues_identically(name, cls, hyper, rule, tmp_path):
    w = tf.Variable([1.0, 2.0])
    opt = cls(**hyper)
    for _ in range(2):
        opt.apply([tf.constant([0.5, -1.0])], [w])
    path = tf.train.Checkpoint(w=w, opt=opt).write(str(tmp_path / "ckpt"))
    opt.apply([tf.constant([0.5, -1.0])], [w])
    expected = w.numpy()
    w2 = tf.Variable([0.0, 0.0])
    opt2 = cls(**hyper)
    status = tf.train.Checkpoint(w=w2, opt=opt2).read(path)
    opt2.apply([tf.constant([0.5, -1.0])], [w2])  # Slots restored on creation.
    status.assert_consumed()
    np.testing.assert_allclose(w2.numpy(), expected, rtol=1e-6)


def test_repr():
    assert repr(snt.optimizers.SGD(0.1)) == "SGD(learning_rate=0.1)"
    assert repr(snt.optimizers.Adam()) == "Adam()"
    assert (
        repr(snt.optimizers.Momentum(0.1, 0.9, use_nesterov=True))
        == "Momentum(learning_rate=0.1, momentum=0.9, use_nesterov=True)"
    )
    assert repr(snt.optimizers.RMSProp(0.1, centered=True)) == (
        "RMSProp(learning_rate=0.1, centered=True)"
    )


def test_public_names():
    # `AdamW` and the `schedules` submodule are additions (issue 13);
    # `Accumulator`, `Muon` and `muon_route` (issue 34).
    assert snt.optimizers.__all__ == [
        "Accumulator",
        "Adam",
        "AdamW",
        "Momentum",
        "Muon",
        "RMSProp",
        "SGD",
        "muon_route",
        "schedules",
    ]
    for name in snt.optimizers.__all__:
        if name[0].isupper():
            assert issubclass(getattr(snt.optimizers, name), snt.Optimizer)
    assert snt.optimizers.RMSProp(0.1).name == "rms_prop"


# Errors ---------------------------------------------------------------------


def _state(variables: list[tf.Variable]) -> list[np.ndarray]:
    return [v.numpy().copy() for v in variables]


@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize(
    "make_updates,error,fragment",
    [
        (lambda: [tf.ones([2])], ValueError, "one entry per parameter"),
        (lambda: [None, None], ValueError, "at least one update"),
        (
            lambda: [tf.ones([2]), tf.ones([3], tf.float64)],
            ValueError,
            r"updates\[1\]` must have the dtype",
        ),
        (
            lambda: [tf.ones([2]), tf.ones([4])],
            ValueError,
            r"updates\[1\]` must have the shape",
        ),
        (
            lambda: [tf.ones([2]), "foo"],
            ValueError,
            r"updates\[1\]` must have the dtype",
        ),
        (
            lambda: [tf.ones([2]), object()],
            TypeError,
            r"updates\[1\]` must be a tensor",
        ),
        (
            lambda: [tf.ones([2]), tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]))],
            ValueError,
            r"updates\[1\]\.values` must have shape",
        ),
        (
            lambda: [tf.ones([2]), tf.IndexedSlices(tf.ones([1]), tf.constant([0.0]))],
            TypeError,
            r"updates\[1\]\.indices` must have an integer dtype",
        ),
        (
            lambda: [tf.ones([2]), tf.IndexedSlices(tf.ones([1]), tf.constant([[0]]))],
            ValueError,
            r"updates\[1\]\.indices` must be 1-D",
        ),
        (
            lambda: [tf.ones([2]), tf.IndexedSlices(tf.ones([2]), tf.constant([0]))],
            ValueError,
            "one row per index",
        ),
        (
            lambda: [tf.ones([2]), tf.IndexedSlices(tf.ones([1]), tf.constant([5]))],
            ValueError,
            r"must lie in \[0, 3\)",
        ),
        (
            lambda: [tf.ones([2]), tf.IndexedSlices(tf.ones([1]), tf.constant([-1]))],
            ValueError,
            r"must lie in \[0, 3\)",
        ),
        (
            lambda: [tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0])), tf.ones([3])],
            ValueError,
            r"updates\[0\]\.values` must have shape",
        ),
        (
            lambda: (g for g in [tf.ones([2]), tf.ones([3])]),
            TypeError,
            "`updates` must be a list",
        ),
    ],
)
def test_bad_updates_raise_and_change_nothing(
    name, cls, hyper, rule, make_updates, error, fragment
):
    a, b = tf.Variable([1.0, 2.0]), tf.Variable([3.0, 4.0, 5.0])
    opt = cls(**hyper)
    before = _state([a, b])
    with pytest.raises(error, match=fragment):
        opt.apply(make_updates(), [a, b])
    for v, value in zip([a, b], before):
        np.testing.assert_array_equal(v.numpy(), value)
    # Nothing was created or counted: the failed call did not initialize.
    assert [v.name for v in _all_variables(opt)] in ([], ["adam/t:0"])
    if isinstance(opt, snt.optimizers.Adam):
        assert int(opt.step) == 0
    opt.apply([tf.ones([2]), tf.ones([3])], [a, b])  # Still usable.


@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS, ids=CONFIG_IDS)
def test_bad_parameters(name, cls, hyper, rule):
    opt = cls(**hyper)
    with pytest.raises(ValueError, match="`parameters` must not be empty"):
        opt.apply([], [])
    with pytest.raises(TypeError, match=r"`parameters\[0\]` must be a tf.Variable"):
        opt.apply([tf.ones([2])], [tf.ones([2])])
    with pytest.raises(
        TypeError, match=r"`parameters\[0\]` must have a floating point"
    ):
        opt.apply([tf.ones([2], tf.int32)], [tf.Variable([1, 2])])
    with pytest.raises(TypeError, match="`parameters` must be a list or tuple"):
        opt.apply([tf.ones([2])], tf.Variable([1.0, 2.0]))


@pytest.mark.parametrize("name,cls,hyper,rule", CONFIGS[1:], ids=CONFIG_IDS[1:])
def test_later_calls_must_pass_the_same_parameters(name, cls, hyper, rule):
    a, b = tf.Variable([1.0, 2.0]), tf.Variable([3.0])
    opt = cls(**hyper)
    opt.apply([tf.ones([2]), tf.ones([1])], [a, b])
    before = _state([a, b] + _all_variables(opt))
    with pytest.raises(ValueError, match="same variables, in the same order"):
        opt.apply([tf.ones([2])], [a])
    with pytest.raises(
        ValueError, match=r"`parameters\[0\]` must be the same variables"
    ):
        opt.apply([tf.ones([1]), tf.ones([2])], [b, a])
    after = _state([a, b] + _all_variables(opt))
    for x, y in zip(before, after):
        np.testing.assert_array_equal(x, y)


def test_graph_mode_bad_shape_is_caught_at_trace_time():
    w = tf.Variable(tf.ones([2, 2]))
    opt = snt.optimizers.Adam()
    with pytest.raises(ValueError, match=r"updates\[0\]` must have the shape"):
        tf.function(lambda: opt.apply([tf.ones([3, 2])], [w]))()


def test_unsupported_strategy_is_rejected():
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        w = tf.Variable([1.0])
    opt = snt.optimizers.SGD(0.1)
    with (
        strategy.scope(),
        pytest.raises(ValueError, match="Received: a `MirroredStrategy`"),
    ):
        opt.apply([tf.constant([1.0])], [w])
    with pytest.raises(ValueError, match="Sonnet optimizers must run outside"):
        strategy.run(lambda: opt.apply([tf.constant([1.0])], [w]))
    np.testing.assert_array_equal(w.numpy(), [1.0])
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    with one.scope():
        v = tf.Variable([1.0])
        opt.apply([tf.constant([1.0])], [v])
    np.testing.assert_allclose(v.numpy(), [0.9])


@pytest.mark.parametrize(
    "cls,kwargs,error,fragment",
    [
        (
            snt.optimizers.SGD,
            {"learning_rate": "0.1"},
            TypeError,
            "`learning_rate` must be a real",
        ),
        (
            snt.optimizers.SGD,
            {"learning_rate": None},
            ValueError,
            "`learning_rate` must be a real",
        ),
        (
            snt.optimizers.SGD,
            {"learning_rate": float("nan")},
            ValueError,
            "must be finite",
        ),
        (
            snt.optimizers.SGD,
            {"learning_rate": tf.ones([2])},
            ValueError,
            "must be a scalar",
        ),
        (
            snt.optimizers.SGD,
            {"learning_rate": tf.constant("a")},
            TypeError,
            "must be a real number",
        ),
        (
            snt.optimizers.SGD,
            {"learning_rate": 0.1, "name": "a b"},
            ValueError,
            "`name`",
        ),
        (
            snt.optimizers.Momentum,
            {"learning_rate": 0.1, "momentum": 0.9, "use_nesterov": "yes"},
            TypeError,
            "`use_nesterov` must be a bool",
        ),
        (
            snt.optimizers.RMSProp,
            {"learning_rate": 0.1, "centered": "1"},
            TypeError,
            "`centered` must be a bool",
        ),
    ],
)
def test_bad_constructor_arguments(cls, kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        cls(**kwargs)


_HYPER = [
    (snt.optimizers.SGD, {}, "learning_rate"),
    (snt.optimizers.Momentum, {"learning_rate": 0.1, "momentum": 0.9}, "momentum"),
    (snt.optimizers.Adam, {}, "beta1"),
    (snt.optimizers.Adam, {}, "epsilon"),
    (snt.optimizers.RMSProp, {"learning_rate": 0.1}, "decay"),
]


@pytest.mark.parametrize("cls, base, argument", _HYPER)
def test_none_hyper_parameter_is_a_value_error(cls, base, argument):
    # The original's `tf.convert_to_tensor(None)` raised a `ValueError`.
    with pytest.raises(ValueError, match=f"`{argument}` must be a real number"):
        cls(**{"learning_rate": 0.1, **base, argument: None})


@pytest.mark.parametrize("cls, base, argument", _HYPER)
def test_string_hyper_parameter_is_an_unimplemented_error(cls, base, argument):
    # The original's `tf.cast` of a string failed (`UnimplementedError`).
    with pytest.raises(tf.errors.UnimplementedError) as info:
        cls(**{"learning_rate": 0.1, **base, argument: "0.1"})
    assert isinstance(info.value, TypeError)
    assert f"`{argument}` must be a real number" in str(info.value)


@pytest.mark.parametrize("cls, base, argument", _HYPER)
def test_one_element_list_hyper_parameter_means_its_element(cls, base, argument):
    # TF broadcast `[v]` like `v` in the original.
    value = {"learning_rate": 0.1, **base}.get(argument, 0.5)
    results = []
    for spelling in (value, [value], (np.float32(value),)):
        optimizer = cls(**{"learning_rate": 0.1, **base, argument: spelling})
        assert getattr(optimizer, argument) == pytest.approx(value)
        w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
        for _ in range(2):
            optimizer.apply([tf.constant([[0.5, -0.5], [0.1, 0.2]])], [w])
        results.append(w.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
    np.testing.assert_allclose(results[2], results[0], rtol=1e-6)


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (snt.optimizers.SGD, {"learning_rate": [0.1, 0.2]}),
        (snt.optimizers.SGD, {"learning_rate": [[0.1]]}),
    ],
)
def test_longer_or_nested_list_hyper_parameters_are_rejected(cls, kwargs):
    with pytest.raises(TypeError, match="`learning_rate` must be a real number"):
        cls(**kwargs)


@pytest.mark.parametrize("cls", [snt.optimizers.SGD, snt.optimizers.Adam])
def test_update_of_the_wrong_shape_is_an_invalid_argument_error(cls):
    # The original's TF op failed with `InvalidArgumentError`.
    optimizer = cls(learning_rate=0.1)
    w = tf.Variable(tf.ones([2, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        optimizer.apply([tf.ones([3])], [w])
    assert isinstance(info.value, ValueError)
    assert "`updates[0]` must have the shape of `parameters[0]`" in str(info.value)
    np.testing.assert_array_equal(w.numpy(), np.ones([2, 2]))


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        # The original checks no hyper-parameter: out-of-range values (a
        # negative learning rate ascends) and any numeric spelling are taken.
        (snt.optimizers.SGD, {"learning_rate": -0.1}),
        (snt.optimizers.SGD, {"learning_rate": True}),
        (snt.optimizers.SGD, {"learning_rate": np.array(0.1, np.float32)}),
        (snt.optimizers.Momentum, {"learning_rate": 0.1, "momentum": -1}),
        (
            snt.optimizers.Momentum,
            {"learning_rate": 0.1, "momentum": 0.9, "use_nesterov": 1},
        ),
        (snt.optimizers.Adam, {"beta1": 1.0, "beta2": np.float64(0.99)}),
        (snt.optimizers.Adam, {"learning_rate": tf.constant(0.1), "epsilon": -1e-8}),
        (snt.optimizers.RMSProp, {"learning_rate": 0.1, "decay": 1.5, "centered": 0}),
    ],
)
def test_constructor_accepts_what_the_original_accepts(cls, kwargs):
    optimizer = cls(**kwargs)
    w = tf.Variable([1.0, 2.0])
    optimizer.apply([tf.constant([0.5, 0.5])], [w])
    assert w.shape == [2]


# Fuzzing --------------------------------------------------------------------

_CTOR_ARGS = {
    snt.optimizers.SGD: ["learning_rate"],
    snt.optimizers.Momentum: ["learning_rate", "momentum", "use_nesterov"],
    snt.optimizers.Adam: ["learning_rate", "beta1", "beta2", "epsilon"],
    snt.optimizers.RMSProp: [
        "learning_rate",
        "decay",
        "momentum",
        "epsilon",
        "centered",
    ],
}
_VALID = {
    "learning_rate": 0.1,
    "momentum": 0.5,
    "use_nesterov": False,
    "beta1": 0.9,
    "beta2": 0.99,
    "epsilon": 1e-6,
    "decay": 0.9,
    "centered": False,
}


@settings(max_examples=25, deadline=None)
@given(
    cls=st.sampled_from(list(_CTOR_ARGS)),
    data=st.data(),
)
def test_constructor_junk(cls, data):
    names = _CTOR_ARGS[cls] + ["name"]
    kwargs = {
        n: data.draw(st.one_of(st.just(_VALID.get(n, None)), bad_input.junk()))
        for n in names
    }
    ok, opt = bad_input.outcome(lambda: cls(**kwargs), kwargs)
    if ok:
        w = tf.Variable([1.0, 2.0])
        # Accepted hyper-parameters need not be sensible (the original checks
        # none: a negative epsilon may give NaN), but `apply` must run.
        opt.apply([tf.constant([1.0, 1.0])], [w])
        assert w.shape == [2] and w.dtype == tf.float32


def _junk_update() -> st.SearchStrategy[Any]:
    return st.one_of(
        bad_input.junk(),
        st.sampled_from(
            [
                tf.ones([3]),
                tf.ones([2, 2]),
                tf.ones([2], tf.float16),
                tf.ones([2], tf.int32),
                tf.IndexedSlices(tf.ones([1]), tf.constant([7])),
                tf.IndexedSlices(tf.ones([1, 1]), tf.constant([0])),
                tf.IndexedSlices(tf.ones([1]), tf.constant([1])),
            ]
        ),
    )


@settings(max_examples=25, deadline=None)
@given(
    cls=st.sampled_from(list(_CTOR_ARGS)),
    updates=st.lists(
        st.one_of(st.just(tf.ones([2])), _junk_update()), min_size=0, max_size=3
    ),
)
def test_apply_junk_updates(cls, updates):
    kwargs = {n: _VALID[n] for n in _CTOR_ARGS[cls]}
    opt = cls(**kwargs)
    params = [tf.Variable([1.0, 2.0]) for _ in range(2)]
    before = _state(params)
    ok, _ = bad_input.outcome(
        lambda: opt.apply(updates, params), ["updates", "parameters"]
    )
    if not ok:
        for v, value in zip(params, before):
            np.testing.assert_array_equal(v.numpy(), value)
