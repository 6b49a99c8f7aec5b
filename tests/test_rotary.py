"""Tests for `snt.apply_rotary_embedding` and `snt.RotaryEmbedding`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _data(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _reference(x, positions=None, base=10000.0):
    """Explicit rotate-half RoPE: pair i is (x[i], x[i + D/2])."""
    x = x.astype(np.float64)
    b, t, _, d = x.shape
    half = d // 2
    if positions is None:
        positions = np.arange(t)
    positions = np.broadcast_to(np.asarray(positions, np.float64), (b, t))
    y = np.empty_like(x)
    for i in range(half):
        angle = positions * base ** (-2.0 * i / d)  # [B, T]
        cos, sin = np.cos(angle)[..., None], np.sin(angle)[..., None]
        first, second = x[..., i], x[..., i + half]
        y[..., i] = first * cos - second * sin
        y[..., i + half] = second * cos + first * sin
    return y


def test_matches_explicit_formula():
    x = _data([2, 5, 3, 8])
    np.testing.assert_allclose(
        snt.apply_rotary_embedding(x), _reference(x), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("base", [10000.0, 100.0, np.float32(500)])
def test_positions_and_base(base):
    x = _data([2, 4, 2, 6])
    shared = np.array([3, 7, 0, 100])
    np.testing.assert_allclose(
        snt.apply_rotary_embedding(x, shared, base=base),
        _reference(x, shared, float(base)),
        rtol=1e-4,
        atol=1e-4,
    )
    per_example = np.array([[0, 1, 2, 3], [10, 11, 12, 13]], np.int64)
    np.testing.assert_allclose(
        snt.apply_rotary_embedding(x, tf.constant(per_example), base=base),
        _reference(x, per_example, float(base)),
        rtol=1e-4,
        atol=1e-4,
    )


def test_batch_of_one_positions_broadcast():
    x = _data([3, 4, 2, 4])
    positions = np.arange(4)[None] + 5
    np.testing.assert_allclose(
        snt.apply_rotary_embedding(x, positions),
        _reference(x, positions),
        rtol=1e-5,
        atol=1e-5,
    )


def test_position_zero_is_identity():
    x = _data([2, 1, 3, 4])
    np.testing.assert_allclose(snt.apply_rotary_embedding(x), x, rtol=1e-6)


def test_preserves_the_norm_of_each_pair():
    x = _data([2, 6, 3, 8])
    y = snt.apply_rotary_embedding(x, np.arange(6) * 37).numpy()
    pairs = lambda a: np.hypot(a[..., :4], a[..., 4:])
    np.testing.assert_allclose(pairs(y), pairs(x), rtol=1e-5)
    np.testing.assert_allclose(
        np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5
    )


def test_dot_products_depend_on_relative_position_only():
    q = _data([1, 1, 1, 16], seed=1)
    k = _data([1, 1, 1, 16], seed=2)

    def score(m, n):
        qm = snt.apply_rotary_embedding(q, [m])
        kn = snt.apply_rotary_embedding(k, [n])
        return float(tf.reduce_sum(qm * kn))

    for m, n in [(0, 0), (5, 2), (2, 5), (40, 3)]:
        expected = score(m, n)
        for shift in (1, 17, 250):
            assert score(m + shift, n + shift) == pytest.approx(expected, abs=1e-3)
    # And the scores do change with the offset.
    assert score(5, 0) != pytest.approx(score(0, 0), abs=1e-3)


@pytest.mark.parametrize("dtype, tolerance", [(tf.float16, 5e-3), (tf.bfloat16, 4e-2)])
def test_half_precision(dtype, tolerance):
    x = _data([2, 7, 2, 8])
    half = tf.cast(x, dtype)
    y = snt.apply_rotary_embedding(half, np.arange(7) * 50)
    assert y.dtype == dtype
    expected = _reference(tf.cast(half, tf.float32).numpy(), np.arange(7) * 50)
    np.testing.assert_allclose(
        tf.cast(y, tf.float32), expected, rtol=tolerance, atol=tolerance
    )


def test_float64_precision():
    x = _data([1, 3, 1, 4]).astype(np.float64)
    y = snt.apply_rotary_embedding(tf.constant(x), [1000, 20000, 300000])
    assert y.dtype == tf.float64
    np.testing.assert_allclose(y, _reference(x, [1000, 20000, 300000]), rtol=1e-10)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_tf_function(jit_compile):
    x = _data([2, 5, 3, 8])
    positions = np.array([4, 3, 2, 1, 0], np.int32)
    f = tf.function(snt.apply_rotary_embedding, jit_compile=jit_compile)
    np.testing.assert_allclose(
        f(tf.constant(x), tf.constant(positions)),
        _reference(x, positions),
        rtol=1e-5,
        atol=1e-5,
    )


def test_unknown_shapes_in_a_trace():
    x = _data([2, 5, 3, 8])
    f = tf.function(
        snt.apply_rotary_embedding,
        input_signature=[tf.TensorSpec([None, None, None, None])],
    )
    np.testing.assert_allclose(f(x), _reference(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="even last dimension"):
        f(_data([1, 2, 1, 3]))


def test_module_wraps_the_function():
    x = _data([2, 3, 2, 4])
    rope = snt.RotaryEmbedding(base=50.0)
    np.testing.assert_allclose(
        rope(x, positions=[1, 2, 3]),
        snt.apply_rotary_embedding(x, [1, 2, 3], base=50.0),
    )
    assert rope.variables == ()
    assert repr(rope) == "RotaryEmbedding(base=50.0)"


# Errors.


def test_odd_feature_size_raises():
    with pytest.raises(ValueError, match="`x` must have an even last dimension"):
        snt.apply_rotary_embedding(tf.ones([1, 2, 1, 5]))


def test_wrong_rank_raises():
    with pytest.raises(ValueError, match=r"`x` must have rank 4 `\[B, T, H, D\]`"):
        snt.apply_rotary_embedding(tf.ones([2, 3, 4]))


def test_non_float_inputs_raise():
    with pytest.raises(TypeError, match="`x` must have a floating point dtype"):
        snt.apply_rotary_embedding(tf.ones([1, 2, 1, 4], tf.int32))
    with pytest.raises(TypeError, match="`x` must be a float tensor"):
        snt.apply_rotary_embedding(None)  # pyright: ignore[reportArgumentType]


def test_bad_positions_raise():
    x = tf.ones([2, 3, 1, 4])
    with pytest.raises(ValueError, match="`positions` must have shape `\\[T\\]`"):
        snt.apply_rotary_embedding(x, tf.range(4))
    with pytest.raises(ValueError, match="`positions` must have shape"):
        snt.apply_rotary_embedding(x, tf.zeros([3, 3], tf.int32))
    with pytest.raises(ValueError, match="`positions` must have shape"):
        snt.apply_rotary_embedding(x, tf.zeros([2, 3, 1], tf.int32))
    with pytest.raises(TypeError, match="`positions` must have an integer"):
        snt.apply_rotary_embedding(x, tf.constant([True, False, True]))
    with pytest.raises(TypeError, match="`positions` must be an integer tensor"):
        snt.apply_rotary_embedding(x, "abc")  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize("base", [0.0, -1.0])
def test_non_positive_base_raises(base):
    with pytest.raises(ValueError, match="`base` must be positive"):
        snt.apply_rotary_embedding(tf.ones([1, 1, 1, 2]), base=base)
    with pytest.raises(ValueError, match="`base` must be positive"):
        snt.RotaryEmbedding(base=base)


def test_non_number_base_raises():
    with pytest.raises(TypeError, match="`base` must be a real number"):
        snt.RotaryEmbedding(base="x")  # pyright: ignore[reportArgumentType]
