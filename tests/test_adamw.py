"""Tests for `snt.optimizers.AdamW`: Adam with decoupled weight decay."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt

_TOLERANCE = {tf.float64: 1e-10, tf.float32: 2e-5, tf.float16: 1e-2, tf.bfloat16: 5e-2}


class _NumpyAdamW:
    """AdamW in float64 NumPy, for the rows a step updates."""

    def __init__(self, value: np.ndarray, **hyper: Any):
        self.lr = hyper.get("learning_rate", 0.001)
        self.b1 = hyper.get("beta1", 0.9)
        self.b2 = hyper.get("beta2", 0.999)
        self.eps = hyper.get("epsilon", 1e-8)
        self.wd = hyper.get("weight_decay", 0.01)
        self.value = value.astype(np.float64)
        self.m = np.zeros_like(self.value)
        self.v = np.zeros_like(self.value)

    def step(self, g: np.ndarray, t: int, rows: Any = slice(None), lr: Any = None):
        lr = self.lr if lr is None else lr
        p = self.value[rows]
        m = self.b1 * self.m[rows] + (1 - self.b1) * g
        v = self.b2 * self.v[rows] + (1 - self.b2) * g * g
        m_hat, v_hat = m / (1 - self.b1**t), v / (1 - self.b2**t)
        self.value[rows] = (
            p - lr * m_hat / (np.sqrt(v_hat) + self.eps) - (lr * self.wd * p)
        )
        self.m[rows], self.v[rows] = m, v


def _grads(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


HYPERS = [
    {"learning_rate": 0.01},
    {"learning_rate": 0.1, "weight_decay": 0.3},
    {"learning_rate": 0.05, "beta1": 0.5, "beta2": 0.9, "epsilon": 1e-3},
]


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("hyper", HYPERS, ids=["default", "decay", "custom"])
@pytest.mark.parametrize(
    "dtype", [tf.float32, tf.float64, tf.float16, tf.bfloat16], ids=lambda d: d.name
)
def test_matches_numpy_reference(hyper, sparse, function, dtype):
    # float32/64/16 dense updates use the fused kernel (plus a separate
    # decay), bfloat16 and sparse ones the plain-op rule.
    w0 = np.arange(12, dtype=np.float64).reshape(4, 3) / 5 - 1
    b0 = np.array([0.5, -1.0, 2.0])
    w = tf.Variable(tf.constant(w0, dtype), name="w")
    b = tf.Variable(tf.constant(b0, dtype), name="b")
    ref_w, ref_b = _NumpyAdamW(w0, **hyper), _NumpyAdamW(b0, **hyper)
    opt = snt.optimizers.AdamW(**hyper)
    apply = opt.apply
    if function:
        apply = tf.function(apply)
    indices = np.array([2, 0, 2])
    steps = 5 if dtype in (tf.float32, tf.float64) else 2
    for t in range(1, steps + 1):
        gb = _grads(100 + t, (3,))
        if sparse:
            values = _grads(t, (3, 3))
            rows = np.unique(indices)
            summed = np.stack([values[indices == r].sum(0) for r in rows])
            ref_w.step(summed, t, rows)
            gw: Any = tf.IndexedSlices(
                tf.constant(values, dtype), tf.constant(indices), tf.constant([4, 3])
            )
        else:
            values = _grads(t, (4, 3))
            ref_w.step(values, t)
            gw = tf.constant(values, dtype)
        ref_b.step(gb, t)
        apply([gw, tf.constant(gb, dtype)], [w, b])
        tol = _TOLERANCE[dtype]
        for var, ref in ((w, ref_w), (b, ref_b)):
            np.testing.assert_allclose(
                var.numpy().astype(np.float64), ref.value, rtol=tol, atol=tol
            )
    assert int(opt.step) == steps
    if sparse:  # Rows without updates neither move nor decay.
        np.testing.assert_array_equal(
            w.numpy()[[1, 3]], w0[[1, 3]].astype(dtype.as_numpy_dtype)
        )


def test_zero_weight_decay_is_adam():
    w, ref = (
        tf.Variable([[1.0, -2.0], [3.0, 0.5]]),
        tf.Variable([[1.0, -2.0], [3.0, 0.5]]),
    )
    adamw = snt.optimizers.AdamW(0.1, weight_decay=0.0)
    adam = snt.optimizers.Adam(0.1)
    for t in range(3):
        g = tf.constant(_grads(t, (2, 2)), tf.float32)
        adamw.apply([g], [w])
        adam.apply([g], [ref])
    np.testing.assert_allclose(w.numpy(), ref.numpy(), rtol=1e-6)


def test_decay_uses_the_value_before_the_update():
    # A zero update leaves Adam's step at zero: only the decay moves `w`.
    w = tf.Variable([2.0, -4.0])
    opt = snt.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
    opt.apply([tf.zeros([2])], [w])
    np.testing.assert_allclose(w.numpy(), [1.9, -3.8], rtol=1e-6)
    opt.apply([tf.zeros([2])], [w])
    np.testing.assert_allclose(w.numpy(), [1.805, -3.61], rtol=1e-6)


def test_none_update_skips_the_decay_too():
    a, b = tf.Variable([1.0, 2.0]), tf.Variable([3.0])
    opt = snt.optimizers.AdamW(0.1, weight_decay=0.5)
    opt.apply([None, tf.constant([0.0])], [a, b])
    np.testing.assert_array_equal(a.numpy(), [1.0, 2.0])
    np.testing.assert_allclose(b.numpy(), [2.85])


def test_dense_float32_updates_use_the_fused_kernel():
    w = tf.Variable(tf.ones([3]))
    opt = snt.optimizers.AdamW()
    fn = tf.function(lambda g: opt.apply([g], [w]))
    graph = fn.get_concrete_function(tf.TensorSpec([3])).graph
    kernels = {op.type for op in graph.get_operations()}
    assert {"ResourceApplyAdam", "ResourceApplyGradientDescent"} <= kernels


def test_variable_weight_decay_is_tracked_and_takes_effect(tmp_path):
    decay = tf.Variable(0.0, name="decay")
    opt = snt.optimizers.AdamW(0.1, weight_decay=decay)
    assert opt.weight_decay is decay
    w = tf.Variable([1.0])
    opt.apply([tf.zeros([1])], [w])
    np.testing.assert_array_equal(w.numpy(), [1.0])
    decay.assign(0.5)
    opt.apply([tf.zeros([1])], [w])
    np.testing.assert_allclose(w.numpy(), [0.95])
    path = tf.train.Checkpoint(opt=opt).write(str(tmp_path / "ckpt"))
    keys = {k for k, _ in tf.train.list_variables(path)}
    assert "opt/weight_decay/.ATTRIBUTES/VARIABLE_VALUE" in keys


def _checkpoint_keys(opt: snt.Optimizer, tmp_path: Any, name: str) -> list[str]:
    lin = snt.Linear(2)
    lin(tf.ones([1, 3]))
    params = list(lin.trainable_variables)
    opt.apply([tf.ones_like(p) for p in params], params)
    path = tf.train.Checkpoint(opt=opt).write(str(tmp_path / name))
    return sorted(k for k, _ in tf.train.list_variables(path) if k.startswith("opt/"))


def test_variables_and_checkpoint_paths_are_adams(tmp_path):
    adamw = snt.optimizers.AdamW()
    adam_keys = _checkpoint_keys(snt.optimizers.Adam(), tmp_path, "adam")
    assert _checkpoint_keys(adamw, tmp_path, "adamw") == adam_keys
    assert [v.name for v in tf.Module.variables.fget(adamw)] == [
        "adam_w/m/linear/b:0",
        "adam_w/m/linear/w:0",
        "adam_w/t:0",
        "adam_w/v/linear/b:0",
        "adam_w/v/linear/w:0",
    ]


def test_checkpoint_of_adam_restores_into_adamw(tmp_path):
    # Same object graph: Adam's state can seed AdamW (and back).
    w = tf.Variable([1.0, 2.0])
    adam = snt.optimizers.Adam(0.1)
    adam.apply([tf.constant([0.5, -1.0])], [w])
    path = tf.train.Checkpoint(w=w, opt=adam).write(str(tmp_path / "ckpt"))
    w2 = tf.Variable([0.0, 0.0])
    adamw = snt.optimizers.AdamW(0.1)
    status = tf.train.Checkpoint(w=w2, opt=adamw).read(path)
    adamw.apply([tf.constant([0.5, -1.0])], [w2])
    status.assert_consumed()
    assert int(adamw.step) == 2


def test_defaults_repr_and_name():
    opt = snt.optimizers.AdamW()
    hyper = (opt.learning_rate, opt.beta1, opt.beta2, opt.epsilon, opt.weight_decay)
    assert hyper == (0.001, 0.9, 0.999, 1e-8, 0.01)
    assert opt.name == "adam_w"
    assert isinstance(opt, snt.optimizers.Adam)
    assert repr(opt) == "AdamW()"
    assert repr(snt.optimizers.AdamW(0.1, weight_decay=0.0)) == (
        "AdamW(learning_rate=0.1, weight_decay=0.0)"
    )


def test_scheduled_learning_rate_scales_the_decay():
    schedule = snt.optimizers.schedules.PiecewiseConstant([1], [0.1, 0.2])
    w = tf.Variable([1.0])
    opt = snt.optimizers.AdamW(schedule, weight_decay=0.5)
    opt.apply([tf.zeros([1])], [w])
    opt.apply([tf.zeros([1])], [w])
    np.testing.assert_allclose(w.numpy(), [0.95 * 0.9], rtol=1e-6)


def test_functional_adamw():
    opt = snt.functional.optimizer(snt.optimizers.AdamW)(0.1, weight_decay=0.5)
    params = [tf.constant([1.0, -2.0])]
    state = opt.init(params)
    params, state = opt.apply(state, [tf.zeros([2])], params)
    np.testing.assert_allclose(params[0].numpy(), [0.95, -1.9], rtol=1e-6)


@pytest.mark.parametrize(
    "value,error,fragment",
    [
        (None, ValueError, "`weight_decay` must be a real number"),
        ("0.1", tf.errors.UnimplementedError, "`weight_decay` must be a real number"),
        (tf.ones([2]), ValueError, "`weight_decay` must be a scalar"),
        (float("inf"), ValueError, "`weight_decay` must be finite"),
    ],
)
def test_bad_weight_decay(value, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.optimizers.AdamW(weight_decay=value)


@pytest.mark.parametrize("value", [[0.1], (np.float32(0.1),), np.array(0.1), 1])
def test_weight_decay_spellings_of_the_other_hyper_parameters(value):
    opt = snt.optimizers.AdamW(weight_decay=value)
    w = tf.Variable([1.0])
    opt.apply([tf.zeros([1])], [w])
    expected = 1 - 0.001 * float(np.asarray(value).reshape(-1)[0])
    np.testing.assert_allclose(w.numpy(), [expected], rtol=1e-6)
