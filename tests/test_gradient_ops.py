"""Tests for `snt.scale_gradient` and `snt.leaky_clip_by_value`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input


def _grad(fn, t, dy=None):
    t = tf.convert_to_tensor(t)
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = fn(t)
    return y, tape.gradient(y, t, output_gradients=dy)


# scale_gradient -----------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.0, 0.5, -1.0, 3])
def test_scale_gradient(scale):
    t = tf.constant([1.0, -2.0, 3.0])
    dy = tf.constant([0.5, 1.0, -2.0])
    y, g = _grad(lambda x: snt.scale_gradient(x, scale), t, dy)
    np.testing.assert_array_equal(y, t)
    np.testing.assert_allclose(g, scale * dy.numpy())


def test_scale_gradient_tensor_scale_gets_no_gradient():
    scale = tf.Variable(2.0)
    t = tf.constant([1.0, 2.0], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = tf.reduce_sum(snt.scale_gradient(t, scale))
    g_t, g_scale = tape.gradient(y, [t, scale])
    np.testing.assert_array_equal(g_t, [2.0, 2.0])
    assert g_scale is None


def test_scale_gradient_in_tf_function_and_xla():
    fn = tf.function(
        lambda x: _grad(lambda t: snt.scale_gradient(t, 0.25), x)[1], jit_compile=True
    )
    np.testing.assert_allclose(fn(tf.ones([2, 2])), np.full([2, 2], 0.25))


def test_scale_gradient_second_order_forward():
    # The forward value is an identity: it composes with other ops unchanged.
    t = tf.constant(2.0)
    y, g = _grad(lambda x: snt.scale_gradient(x, 0.5) ** 2, t)
    assert float(y) == 4.0 and float(g) == 2.0


@pytest.mark.parametrize(
    "scale, error, fragment",
    [
        ("2", TypeError, "`scale` must be a real number"),
        # `tf.convert_to_tensor(None)` raised a `ValueError` in the original.
        (None, ValueError, "`scale` must be a real number"),
        ([1.0, 2.0], TypeError, "`scale` must be a real number"),
        # The original took these, and gave NaN / infinite gradients.
        (float("nan"), ValueError, "`scale` must be finite"),
        (float("inf"), ValueError, "`scale` must be finite"),
        (tf.constant("a"), TypeError, "`scale` must have a numeric dtype"),
    ],
)
def test_scale_gradient_bad_scale(scale, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.scale_gradient(tf.ones([2]), scale)


@pytest.mark.parametrize("t", ["a", tf.constant([True])])
def test_scale_gradient_bad_t(t):
    # The original's TF op failed with `InvalidArgumentError`.
    with pytest.raises(tf.errors.InvalidArgumentError, match="`t`") as info:
        snt.scale_gradient(t, 1.0)
    assert isinstance(info.value, TypeError)


def test_scale_gradient_none_t():
    with pytest.raises(ValueError, match="`t` must be a numeric tensor"):
        snt.scale_gradient(None, 1.0)


@pytest.mark.parametrize(
    "scale",
    [np.array(2.0), np.array(2.0, np.float32), [2.0], (np.float32(2.0),), True],
    ids=["np0d", "np0d_float32", "list", "tuple", "bool"],
)
def test_scale_gradient_scale_spellings(scale):
    x = tf.constant([1.0, 2.0, 3.0])
    y, g = _grad(lambda t: snt.scale_gradient(t, scale), x)
    np.testing.assert_array_equal(y, x)
    assert g.shape == (3,) and g.dtype == tf.float32
    np.testing.assert_allclose(g, np.full([3], float(np.ravel(scale)[0])))


def test_scale_gradient_float64_scale_is_cast():
    # The original's `scale * dy` failed on the dtype mismatch.
    x = tf.constant([1.0, 2.0])
    _, g = _grad(lambda t: snt.scale_gradient(t, tf.constant(0.5, tf.float64)), x)
    assert g.dtype == tf.float32
    np.testing.assert_allclose(g, [0.5, 0.5])


# leaky_clip_by_value ------------------------------------------------------------


def test_leaky_clip_documented_example():
    t = tf.constant([-2.0, 0.5, 2.0])
    y, g = _grad(lambda x: snt.leaky_clip_by_value(x, -1.0, 1.0), t, tf.ones([3]))
    np.testing.assert_array_equal(y, [-1.0, 0.5, 1.0])
    np.testing.assert_array_equal(g, [0.0, 1.0, 1.0])
    _, g = _grad(lambda x: snt.leaky_clip_by_value(x, -1.0, 1.0), t, -tf.ones([3]))
    np.testing.assert_array_equal(g, [-1.0, -1.0, 0.0])


def _numpy_leaky_clip(t, dy, lo, hi):
    y = np.clip(t, lo, hi)
    blocked = ((t < lo) & (dy > 0)) | ((t > hi) & (dy < 0))
    return y, np.where(blocked, 0.0, dy)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_leaky_clip_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    t = rng.normal(scale=2.0, size=[4, 5]).astype(np.float32)
    dy = rng.normal(size=[4, 5]).astype(np.float32)
    lo = rng.uniform(-1.0, 0.0, size=[5]).astype(np.float32)
    hi = np.float32(1.0)
    y, g = _grad(
        lambda x: snt.leaky_clip_by_value(x, tf.constant(lo), hi),
        tf.constant(t),
        tf.constant(dy),
    )
    y_ref, g_ref = _numpy_leaky_clip(t, dy, lo, hi)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(g, g_ref)


def test_leaky_clip_bounds_get_no_gradient():
    lo, hi = tf.Variable(-1.0), tf.Variable(1.0)
    t = tf.constant([-3.0, 0.0, 3.0])
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = tf.reduce_sum(snt.leaky_clip_by_value(t, lo, hi))
    g_t, g_lo, g_hi = tape.gradient(y, [t, lo, hi])
    np.testing.assert_array_equal(g_t, [0.0, 1.0, 1.0])
    assert g_lo is None and g_hi is None


def test_leaky_clip_integers_and_tf_function():
    fn = tf.function(lambda x: snt.leaky_clip_by_value(x, 0, 3))
    np.testing.assert_array_equal(fn(tf.constant([-1, 2, 5])), [0, 2, 3])


def test_leaky_clip_name():
    fn = tf.function(lambda x: snt.leaky_clip_by_value(x, 0.0, 1.0, name="my_clip"))
    graph = fn.get_concrete_function(tf.TensorSpec([2])).graph
    assert any("my_clip" in op.name for op in graph.get_operations())


@pytest.mark.parametrize(
    "args, error, fragment",
    [
        ((tf.ones([3]), 1.0, -1.0), ValueError, "`clip_value_max` must be >="),
        ((tf.ones([3]), tf.zeros([2]), 1.0), ValueError, "`clip_value_min` and"),
        ((tf.ones([3]), tf.zeros([3, 3]), 1.0), ValueError, "larger shape"),
        (("a", 0.0, 1.0), TypeError, "`t` must be convertible|`t` must have"),
        ((tf.constant([True]), 0.0, 1.0), TypeError, "`t` must have a numeric"),
        ((tf.constant([1, 2]), 0.5, 2), TypeError, "`clip_value_min`"),
        ((tf.ones([2]), "a", 1.0), TypeError, "`clip_value_min`"),
        # `tf.convert_to_tensor(None)` raised a `ValueError` in the original.
        ((tf.ones([2]), 0.0, None), ValueError, "`clip_value_max`"),
        ((tf.ones([2]), None, 1.0), ValueError, "`clip_value_min`"),
        # The original's `tf.maximum` failed (`InvalidArgumentError`).
        (
            (tf.ones([2]), tf.constant(0.0, tf.float64), 1.0),
            tf.errors.InvalidArgumentError,
            "`clip_value_min` must have the dtype of `t`",
        ),
        (
            (tf.ones([2]), 0.0, tf.constant(1.0, tf.float64)),
            tf.errors.InvalidArgumentError,
            "`clip_value_max` must have the dtype of `t`",
        ),
    ],
)
def test_leaky_clip_errors(args, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.leaky_clip_by_value(*args)


def test_leaky_clip_bad_bound_dtype_is_also_a_type_error():
    with pytest.raises(TypeError):
        snt.leaky_clip_by_value(tf.ones([2]), tf.constant(0.0, tf.float64), 1.0)


def test_leaky_clip_bad_name():
    # A `TypeError`, and a `ValueError` as the original's (its gradient
    # failed).
    with pytest.raises(TypeError, match="`name` must be a string") as info:
        snt.leaky_clip_by_value(tf.ones([2]), 0.0, 1.0, name=3)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "t",
    [
        np.array([-2.0, 0.2, 2.0, 3.0], np.float32),
        [-2.0, 0.2, 2.0, 3.0],
        tf.constant([-2.0, 0.2, 2.0, 3.0], tf.float64),
        tf.constant([-2.0, 0.2, 2.0, 3.0], tf.float16),
    ],
    ids=["ndarray", "list", "float64", "float16"],
)
@pytest.mark.parametrize(
    "lo, hi",
    [
        (-1.0, 1.0),
        (np.array(-1.0), np.float32(1.0)),
        ([-1.0], [1.0]),
    ],
    ids=["float", "numpy", "list"],
)
def test_leaky_clip_spellings_forward_and_gradient(t, lo, hi):
    # The original's gradient always failed; its forward pass is
    # `tf.clip_by_value`.
    x = tf.convert_to_tensor(t)
    dy = tf.constant([1.0, 1.0, -1.0, 1.0], x.dtype)
    y, g = _grad(lambda v: snt.leaky_clip_by_value(v, lo, hi), x, dy)
    assert y.dtype == x.dtype and g.dtype == x.dtype and y.shape == (4,)
    np.testing.assert_allclose(
        np.asarray(y, np.float64), [-1.0, 0.2, 1.0, 1.0], rtol=1e-3
    )
    # Zeroed where descent would push further out: below with dy > 0, above
    # with dy < 0.
    np.testing.assert_array_equal(np.asarray(g, np.float64), [0.0, 1.0, 0.0, 1.0])


@settings(max_examples=25, deadline=None)
@given(value=bad_input.junk(), position=st.integers(0, 2))
def test_leaky_clip_junk(value, position):
    args = [tf.constant([-2.0, 0.5, 2.0]), -1.0, 1.0]
    names = ["t", "clip_value_min", "clip_value_max"]
    args[position] = value
    bad_input.outcome(
        lambda: snt.leaky_clip_by_value(*args), [names[position], "clip_value"]
    )


@settings(max_examples=25, deadline=None)
@given(value=bad_input.junk(), position=st.integers(0, 1))
def test_scale_gradient_junk(value, position):
    args = [tf.constant([1.0, 2.0]), 0.5]
    names = ["t", "scale"]
    args[position] = value
    bad_input.outcome(lambda: snt.scale_gradient(*args), [names[position]])
