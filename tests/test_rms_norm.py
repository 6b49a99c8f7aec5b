"""Tests for `snt.RMSNorm`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 3.0 + 0.5).astype(np.float32)


def _rms_norm(x, axes, eps=1e-6, scale=1.0):
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x**2, axis=axes, keepdims=True) + eps) * scale


@pytest.mark.parametrize(
    "axis, axes",
    [
        (-1, (2,)),
        (2, (2,)),
        ([1, 2], (1, 2)),
        (slice(1, None), (1, 2)),
        (np.int64(1), (1,)),
    ],
)
def test_matches_numpy(axis, axes):
    x = _data([2, 3, 4])
    norm = snt.RMSNorm(axis)
    np.testing.assert_allclose(norm(x), _rms_norm(x, axes), rtol=1e-5, atol=1e-6)


def test_scale_variable_and_init():
    x = _data([2, 3, 4])
    norm = snt.RMSNorm(scale_init=snt.initializers.Constant(2.0), eps=1e-3)
    y = norm(x)
    np.testing.assert_allclose(y, _rms_norm(x, (2,), 1e-3, 2.0), rtol=1e-5)
    assert [(v.name, v.shape.as_list(), v.trainable) for v in norm.variables] == [
        ("rms_norm/scale:0", [4], True)
    ]
    norm.scale.assign(np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(
        norm(x), _rms_norm(x, (2,), 1e-3, np.arange(4)), rtol=1e-5, atol=1e-6
    )


def test_scale_is_per_channel_for_any_axis():
    norm = snt.RMSNorm(axis=slice(1, None))
    norm(_data([2, 3, 4, 5]))
    assert norm.scale.shape == [5]


def test_no_scale():
    x = _data([3, 6])
    norm = snt.RMSNorm(create_scale=False)
    y = norm(x)
    np.testing.assert_allclose(np.sqrt(np.mean(np.square(y), -1)), 1.0, rtol=1e-5)
    assert norm.scale is None
    with pytest.raises(ValueError, match="does not currently contain any variables"):
        norm.variables  # noqa: B018 - the property raises when empty


def test_zeros_give_zeros():
    y = snt.RMSNorm()(tf.zeros([2, 3]))
    np.testing.assert_array_equal(y, np.zeros([2, 3]))


def test_mean_is_not_subtracted():
    # Unlike LayerNorm, a constant input maps to +-1, not 0.
    y = snt.RMSNorm(eps=0.0)(tf.fill([2, 4], -3.0))
    np.testing.assert_allclose(y, -np.ones([2, 4]), rtol=1e-6)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_half_precision_statistics_in_float32(dtype):
    # 300**2 overflows float16: statistics in float16 would give 0 outputs.
    x = _data([2, 8]) * 100
    y = snt.RMSNorm()(tf.cast(x, dtype))
    assert y.dtype == dtype
    tolerance = 2e-2 if dtype == tf.bfloat16 else 2e-3
    expected = _rms_norm(tf.cast(tf.cast(x, dtype), tf.float32).numpy(), (1,))
    np.testing.assert_allclose(
        tf.cast(y, tf.float32), expected, rtol=tolerance, atol=tolerance
    )
    norm = snt.RMSNorm()
    norm(tf.cast(x, dtype))
    assert norm.scale.dtype == dtype


def test_tf_function_and_xla():
    x = _data([2, 3, 4])
    norm = snt.RMSNorm()
    expected = norm(x)
    np.testing.assert_allclose(tf.function(norm)(x), expected, rtol=1e-6)
    np.testing.assert_allclose(
        tf.function(norm, jit_compile=True)(x), expected, rtol=1e-5
    )


def test_tensor_eps():
    x = _data([2, 3])
    y = snt.RMSNorm(eps=tf.constant(0.5, tf.float64))(x)
    np.testing.assert_allclose(y, _rms_norm(x, (1,), 0.5), rtol=1e-5)


def test_repr():
    assert repr(snt.RMSNorm(eps=1e-5)) == "RMSNorm(eps=1e-05)"


# Errors.


def test_negative_eps_raises():
    with pytest.raises(ValueError, match="`eps` must not be negative"):
        snt.RMSNorm(eps=-1.0)


def test_bad_axis_raises():
    with pytest.raises(ValueError, match="`axis` must be an int"):
        snt.RMSNorm(axis="x")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`axis` must name axes of the rank-2"):
        snt.RMSNorm(axis=3)(tf.ones([2, 3]))


def test_scale_init_without_scale_raises():
    with pytest.raises(ValueError, match="`scale_init` must be None when"):
        snt.RMSNorm(create_scale=False, scale_init=snt.initializers.Ones())


def test_bad_inputs_raise():
    with pytest.raises(TypeError, match="`inputs` must have a floating point dtype"):
        snt.RMSNorm()(tf.ones([2, 3], tf.int32))
    with pytest.raises(ValueError, match="`inputs` must have a known rank >= 2"):
        snt.RMSNorm()(tf.ones([3]))
    norm = snt.RMSNorm()
    norm(tf.ones([2, 3]))
    with pytest.raises(ValueError, match="must keep the number of channels"):
        norm(tf.ones([2, 4]))
    with pytest.raises(TypeError, match="must keep the dtype of the first call"):
        norm(tf.ones([2, 3], tf.float64))
