"""Tests for `snt.mixed_precision`."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings

import sonnet as snt
from sonnet._src import mixed_precision as mp_lib
from tests.conformance import bad_input

HALF_TYPES = [tf.float16, tf.bfloat16]


@pytest.fixture(autouse=True)
def _reset_mode():
    snt.mixed_precision.disable()
    yield
    snt.mixed_precision.disable()


class MPLinear(snt.Linear):
    """`snt.Linear` whose `__call__` is replaced after class creation."""


MPLinear.__call__ = snt.mixed_precision.modes([tf.float32, tf.float16, tf.bfloat16])(
    snt.Linear.__call__
)


class Recorder(snt.Module):
    """Decorated in the class body; records what it sees."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[tf.DType, tf.DType]] = []

    @snt.mixed_precision.modes([tf.float16, tf.bfloat16])
    def __call__(self, x, rest=None):
        if not hasattr(self, "w"):
            self.w = tf.Variable(tf.ones([x.shape[-1], 2], x.dtype), name="w")
        self.seen.append((x.dtype, self.w.dtype))
        out = tf.matmul(x, self.w)
        return {"out": out, "rest": rest, "count": tf.constant(1)}


def matmul_dtypes(f, *args) -> list[tf.DType]:
    """Input dtypes of every MatMul in the graph traced for `f(*args)`."""
    graph = tf.function(f).get_concrete_function(*args).graph
    return [op.get_attr("T") for op in graph.get_operations() if op.type == "MatMul"]


def test_mode_functions():
    assert mp_lib.current_mode() is None
    snt.mixed_precision.enable(tf.float16)
    assert mp_lib.current_mode() == tf.float16
    snt.mixed_precision.enable("bfloat16")
    assert mp_lib.current_mode() == tf.bfloat16
    snt.mixed_precision.disable()
    assert mp_lib.current_mode() is None


def test_scope_nests_and_restores():
    snt.mixed_precision.enable(tf.bfloat16)
    with snt.mixed_precision.scope(tf.float16):
        assert mp_lib.current_mode() == tf.float16
        with snt.mixed_precision.scope(None):
            assert mp_lib.current_mode() is None
        assert mp_lib.current_mode() == tf.float16
    assert mp_lib.current_mode() == tf.bfloat16


def test_scope_restores_on_error():
    with pytest.raises(RuntimeError):
        with snt.mixed_precision.scope(tf.float16):
            raise RuntimeError("boom")
    assert mp_lib.current_mode() is None


@pytest.mark.parametrize("dtype", HALF_TYPES)
def test_unbound_method_first_call_full_precision_then_half(dtype):
    mod = MPLinear(3, b_init=snt.initializers.RandomNormal())
    x = tf.random.normal([2, 4], seed=1)
    with snt.mixed_precision.scope(dtype):
        first = mod(x)  # Builds the module, in full precision.
        assert matmul_dtypes(mod, x) == [dtype]
        second = mod(x)
    assert mod.w.dtype == tf.float32 and mod.b.dtype == tf.float32
    assert isinstance(mod.w, tf.Variable)
    assert first.dtype == tf.float32 and second.dtype == tf.float32
    expected = x.numpy() @ mod.w.numpy() + mod.b.numpy()
    np.testing.assert_allclose(first.numpy(), expected, rtol=1e-6, atol=1e-6)
    # Half precision: close, but not float32-exact.
    tol = 1e-2 if dtype == tf.float16 else 5e-2
    np.testing.assert_allclose(second.numpy(), expected, rtol=tol, atol=tol)
    assert not np.allclose(second.numpy(), expected, rtol=1e-6, atol=1e-6)


def test_eager_intermediate_dtype():
    # The matmul result itself is half precision: cast back only at the end.
    seen = []

    class Probe(snt.Module):
        @snt.mixed_precision.modes([tf.float16])
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = tf.Variable(tf.ones([2, 2]), name="w")
            y = tf.matmul(x, self.w)
            seen.append(y.dtype)
            return y

    mod = Probe()
    with snt.mixed_precision.scope(tf.float16):
        outs = [mod(tf.ones([1, 2])) for _ in range(2)]
    assert seen == [tf.float32, tf.float16]
    assert [o.dtype for o in outs] == [tf.float32, tf.float32]


def test_no_mode_or_invalid_mode_runs_unchanged():
    mod = MPLinear(3)
    x = tf.ones([1, 2])
    mod(x)
    assert matmul_dtypes(mod, x) == [tf.float32]
    half_only = Recorder()
    half_only(x)
    with snt.mixed_precision.scope(tf.float64):
        half_only(x)
    assert half_only.seen == [(tf.float32, tf.float32)] * 2
    assert "_mp_seen" not in vars(half_only)


def test_float32_mode_first_call_then_float32():
    mod = MPLinear(3)
    x = tf.ones([1, 2])
    with snt.mixed_precision.scope(tf.float32):
        assert matmul_dtypes(mod, x) == [tf.float32]
        assert matmul_dtypes(mod, x) == [tf.float32]


def test_first_call_is_per_instance():
    x = tf.ones([1, 2])
    first, second = Recorder(), Recorder()
    with snt.mixed_precision.scope(tf.float16):
        first(x)
        first(x)
        second(x)
    assert first.seen == [(tf.float32, tf.float32), (tf.float16, tf.float16)]
    assert second.seen == [(tf.float32, tf.float32)]


def test_first_call_counts_only_under_a_valid_mode():
    x = tf.ones([1, 2])
    mod = Recorder()
    mod(x)  # Builds outside mixed precision.
    with snt.mixed_precision.scope(tf.float16):
        mod(x)
        mod(x)
    assert [s[0] for s in mod.seen] == [tf.float32, tf.float32, tf.float16]


def test_failed_first_call_does_not_count():
    calls = []

    @snt.mixed_precision.modes([tf.float16])
    def f(x):
        calls.append(x.dtype)
        if len(calls) == 1:
            raise RuntimeError("first call fails")
        return x

    with snt.mixed_precision.scope(tf.float16):
        with pytest.raises(RuntimeError):
            f(tf.ones([1]))
        f(tf.ones([1]))
        f(tf.ones([1]))
    assert calls == [tf.float32, tf.float32, tf.float16]


def test_arguments_and_results_casting():
    mod = Recorder()
    x = tf.ones([1, 2])
    with snt.mixed_precision.scope(tf.bfloat16):
        mod(x)
        out = mod(x, rest=[tf.ones([1], tf.float64), tf.constant([3]), 2.5, "s"])
    assert mod.seen[-1] == (tf.bfloat16, tf.bfloat16)
    assert out["out"].dtype == tf.float32
    # Floating results become float32 (even float64 inputs passed through).
    assert out["rest"][0].dtype == tf.float32
    assert out["rest"][1].dtype == tf.int32
    assert out["rest"][2:] == [2.5, "s"]
    assert out["count"].dtype == tf.int32


def test_plain_function_tracks_first_call_per_decoration():
    seen = []

    def f(x):
        seen.append(x.dtype)
        return x * 2

    g1 = snt.mixed_precision.modes([tf.float16])(f)
    g2 = snt.mixed_precision.modes([tf.float16])(f)
    with snt.mixed_precision.scope(tf.float16):
        g1(tf.ones([1]))
        g1(tf.ones([1]))
        out = g2(tf.ones([1]))
    assert seen == [tf.float32, tf.float16, tf.float32]
    assert out.dtype == tf.float32
    assert g1.__name__ == "f"


def test_bound_method():
    mod = snt.Linear(2)
    x = tf.ones([1, 3])
    mod(x)  # Built eagerly: a traced first call would trace twice.
    call = snt.mixed_precision.modes([tf.float16])(mod.__call__)
    with snt.mixed_precision.scope(tf.float16):
        assert matmul_dtypes(call, x) == [tf.float32]
        assert matmul_dtypes(call, x) == [tf.float16]
        assert call(x).dtype == tf.float32
    assert "_mp_seen" in vars(mod)


def test_callable_object():
    mod = snt.Linear(2)
    x = tf.ones([1, 3])
    mod(x)
    call = snt.mixed_precision.modes([tf.float16])(mod)
    with snt.mixed_precision.scope(tf.float16):
        assert matmul_dtypes(call, x) == [tf.float32]
        assert matmul_dtypes(call, x) == [tf.float16]
    assert mod.w.dtype == tf.float32


def test_nested_modules_run_in_half_precision():
    mlp = snt.nets.MLP([3, 2])
    x = tf.ones([1, 4])
    mlp(x)
    call = snt.mixed_precision.modes([tf.float16])(mlp)
    with snt.mixed_precision.scope(tf.float16):
        assert matmul_dtypes(call, x) == [tf.float32, tf.float32]
        assert matmul_dtypes(call, x) == [tf.float16, tf.float16]
    assert all(v.dtype == tf.float32 for v in mlp.variables)


def test_gradients_reach_float32_variables():
    mod = MPLinear(2)
    x = tf.ones([1, 3])
    with snt.mixed_precision.scope(tf.float16):
        mod(x)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(mod(x))
    grads = tape.gradient(loss, mod.trainable_variables)
    assert [g.dtype for g in grads] == [tf.float32, tf.float32]
    np.testing.assert_allclose(grads[1].numpy(), np.full([3, 2], 1.0))


def test_class_body_decoration_keeps_the_name_scope():
    class Scoped(snt.Module):
        @snt.mixed_precision.modes([tf.float16])
        def __call__(self, x):
            return tf.Variable(x, name="v").name

    assert Scoped(name="outer")(tf.ones([1])) == "outer/v:0"


def test_mixed_precision_leaves_no_patch_behind():
    mod = MPLinear(2)
    with snt.mixed_precision.scope(tf.float16):
        mod(tf.ones([1, 2]))
        mod(tf.ones([1, 2]))
    assert "__getattribute__" not in snt.Module.__dict__
    assert isinstance(mod.w, tf.Variable)


def test_copy_and_pickle_keep_working():
    mod = MPLinear(2)
    with snt.mixed_precision.scope(tf.float16):
        mod(tf.ones([1, 2]))
    clone = copy.deepcopy(mod)
    assert vars(clone)["_mp_seen"] == vars(mod)["_mp_seen"]
    assert pickle.loads(pickle.dumps(vars(mod)["_mp_seen"])) == vars(mod)["_mp_seen"]


def test_not_tracked_as_module_state(tmp_path):
    mod = MPLinear(2)
    with snt.mixed_precision.scope(tf.float16):
        mod(tf.ones([1, 2]))
    assert len(mod.variables) == 2
    path = tf.train.Checkpoint(m=mod).write(str(tmp_path / "ckpt"))
    keys = [name for name, _ in tf.train.list_variables(path)]
    assert not any("_mp_seen" in k for k in keys)
    assert "m/w/.ATTRIBUTES/VARIABLE_VALUE" in keys


@pytest.mark.parametrize(
    ("call", "error", "argument"),
    [
        (lambda: snt.mixed_precision.enable("foo"), TypeError, "dtype"),
        (lambda: snt.mixed_precision.scope(3.5), TypeError, "dtype"),
        (lambda: snt.mixed_precision.modes(3), TypeError, "valid_types"),
        (lambda: snt.mixed_precision.modes("float16"), TypeError, "valid_types"),
        (lambda: snt.mixed_precision.modes(["nope"]), TypeError, "valid_types"),
        (lambda: snt.mixed_precision.modes([tf.float16])(3), TypeError, "f"),
    ],
)
def test_bad_arguments(call, error, argument):
    with pytest.raises(error, match=f"`{argument}`.*Received"):
        call()
    assert mp_lib.current_mode() is None


def test_decorating_a_non_callable_is_also_an_attribute_error():
    # What the original raised.
    with pytest.raises(AttributeError, match="`f`.*Received"):
        snt.mixed_precision.modes([tf.float16])(3)


@pytest.mark.parametrize("dtype", [tf.int32, tf.bool, "float16", np.float16])
def test_any_dtype_is_a_mode(dtype):
    # As in the original: only the decorated functions' `valid_types` decide
    # whether a mode applies.
    seen = []

    @snt.mixed_precision.modes([tf.float16])
    def f(x):
        seen.append(x.dtype)
        return x

    with snt.mixed_precision.scope(dtype):
        assert mp_lib.current_mode() == tf.as_dtype(dtype)
        f(tf.ones([1]))
        f(tf.ones([1]))
    snt.mixed_precision.enable(dtype)
    snt.mixed_precision.disable()
    half = tf.as_dtype(dtype) == tf.float16
    assert seen == [tf.float32, tf.float16 if half else tf.float32]


@settings(max_examples=25, deadline=None)
@given(value=bad_input.junk())
def test_junk_dtype(value):
    try:
        bad_input.outcome(lambda: snt.mixed_precision.enable(value), ["dtype"])
        bad_input.outcome(lambda: snt.mixed_precision.modes(value), ["valid_types"])
    finally:
        snt.mixed_precision.disable()


def test_first_call_inside_tf_function():
    # Creating variables makes `tf.function` trace twice: the first trace
    # (which creates the variables) is the full precision call.
    mod = MPLinear(2)
    x = tf.ones([1, 3])
    with snt.mixed_precision.scope(tf.float16):
        y = tf.function(mod)(x)
    assert y.dtype == tf.float32
    assert [v.dtype for v in mod.variables] == [tf.float32, tf.float32]


def test_callable_object_without_dict():
    class Slotted:
        __slots__ = ("calls",)

        def __init__(self):
            self.calls = []

        def __call__(self, x):
            self.calls.append(x.dtype)
            return x

    obj = Slotted()
    call = snt.mixed_precision.modes([tf.float16])(obj)
    with snt.mixed_precision.scope(tf.float16):
        for _ in range(3):
            assert call(tf.ones([1])).dtype == tf.float32
    assert obj.calls == [tf.float32, tf.float16, tf.float16]
