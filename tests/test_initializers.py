"""Tests for `snt.initializers`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src import initializers as init_lib
from tests.conformance import bad_input

I = snt.initializers  # noqa: E741 - short alias keeps the tables readable

NUMERICAL = [
    I.Zeros(),
    I.Ones(),
    I.Constant(2),
    I.RandomUniform(),
    I.Identity(),
]
FLOATING = [
    I.RandomNormal(),
    I.TruncatedNormal(),
    I.Orthogonal(),
    I.VarianceScaling(),
]
ALL = NUMERICAL + FLOATING


def _id(init: init_lib.Initializer) -> str:
    return type(init).__name__


def test_public_names():
    assert set(I.__all__) == {
        "Constant",
        "Identity",
        "Initializer",
        "Ones",
        "Orthogonal",
        "RandomNormal",
        "RandomUniform",
        "TruncatedNormal",
        "VarianceScaling",
        "Zeros",
    }
    for name in I.__all__:
        assert getattr(I, name) is getattr(init_lib, name)
    assert snt.initializers is I


def test_initializer_is_abstract():
    with pytest.raises(TypeError):
        I.Initializer()  # type: ignore[abstract]


# Shapes ---------------------------------------------------------------------


@pytest.mark.parametrize("init", ALL, ids=_id)
@pytest.mark.parametrize(
    "shape",
    [
        [3, 4],
        (3, 4),
        tf.TensorShape([3, 4]),
        tf.constant([3, 4]),
        tf.constant([3, 4], tf.int64),
        np.array([3, 4]),
        [tf.constant(3), 4],
    ],
    ids=["list", "tuple", "TensorShape", "tensor", "int64", "ndarray", "mixed"],
)
def test_shape_forms(init, shape):
    out = init(shape, tf.float32)
    assert out.shape == (3, 4)
    assert out.dtype == tf.float32


@pytest.mark.parametrize("init", ALL, ids=_id)
def test_batch_agnostic_concrete_function(init):
    fn = tf.function(lambda x: init(tf.shape(x), tf.float32))
    concrete = fn.get_concrete_function(tf.TensorSpec([None, None]))
    assert concrete(tf.zeros([5, 2])).shape == (5, 2)
    assert concrete(tf.zeros([2, 6])).shape == (2, 6)


@pytest.mark.parametrize("init", ALL, ids=_id)
def test_mixed_symbolic_shape_in_tf_function(init):
    fn = tf.function(lambda x: init([tf.shape(x)[0], 3], tf.float32))
    concrete = fn.get_concrete_function(tf.TensorSpec([None]))
    assert concrete(tf.zeros([4])).shape == (4, 3)


@pytest.mark.parametrize("init", ALL, ids=_id)
def test_rank3_shape(init):
    assert init([2, 3, 4], tf.float32).shape == (2, 3, 4)


@pytest.mark.parametrize("init", ALL, ids=_id)
@pytest.mark.parametrize(
    "shape, error, fragment",
    [
        ([2, -1], ValueError, "non-negative"),
        ([2.0, 3], TypeError, "shape"),
        (["a"], TypeError, "shape"),
        ("ab", TypeError, "shape"),
        (3, TypeError, "shape"),
        (None, TypeError, "shape"),
        (tf.TensorShape([None, 3]), ValueError, "fully defined"),
        (tf.TensorShape(None), ValueError, "fully defined"),
        (tf.constant([2.0, 3.0]), TypeError, "integer dtype"),
        (tf.constant([[2, 3]]), ValueError, "1-D"),
        ([tf.constant([2, 3])], TypeError, "shape"),
        (tf.constant([2, -3]), ValueError, "non-negative"),
    ],
)
def test_bad_shapes(init, shape, error, fragment):
    if isinstance(shape, int) and isinstance(init, (I.Zeros, I.Ones)):
        pytest.skip("`tf.zeros(3)` is the shape [3]: see test_single_size_shape")
    with pytest.raises(error, match=fragment) as info:
        init(shape, tf.float32)
    assert "`shape`" in str(info.value) and "Received" in str(info.value)
    # The original let a TF op fail on these (`InvalidArgumentError`), or
    # e.g. `len(shape)` (`TypeError`), or raised a `ValueError`: ours are all.
    assert isinstance(info.value, (tf.errors.InvalidArgumentError, ValueError))
    if isinstance(info.value, TypeError) and not isinstance(init, I.VarianceScaling):
        assert isinstance(info.value, tf.errors.InvalidArgumentError)
        assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "init", [I.Zeros(), I.Ones(), I.RandomUniform(), I.Identity()], ids=_id
)
def test_negative_size_is_an_invalid_argument_error(init):
    with pytest.raises(tf.errors.InvalidArgumentError, match="non-negative") as info:
        init([-3, -4], tf.float32)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("init", [I.Zeros(), I.Ones()], ids=_id)
@pytest.mark.parametrize("size", [3, np.int64(3), np.array(3)], ids=str)
def test_single_size_shape(init, size):
    # As `tf.zeros(3)` / `tf.ones(3)` in the original.
    out = init(size, tf.float32)
    assert out.shape == (3,)
    expected = 0.0 if isinstance(init, I.Zeros) else 1.0
    np.testing.assert_array_equal(out, np.full([3], expected, np.float32))


def test_variance_scaling_string_shape_is_an_unimplemented_error():
    # The original's fan computation cast the string (`UnimplementedError`).
    with pytest.raises(tf.errors.UnimplementedError, match="`shape`") as info:
        I.VarianceScaling()("x", tf.float32)
    assert isinstance(info.value, TypeError)


def test_shape_of_unknown_length_in_tf_function():
    fn = tf.function(lambda s: I.Zeros()(s, tf.float32))
    with pytest.raises(ValueError, match="statically known length"):
        fn.get_concrete_function(tf.TensorSpec([None], tf.int32))


# Dtypes ---------------------------------------------------------------------


@pytest.mark.parametrize("init", NUMERICAL, ids=_id)
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.int8, tf.float16, "float64"])
def test_numerical_accept_integer_and_float(init, dtype):
    out = init([2, 2], dtype)
    assert out.dtype == tf.as_dtype(dtype)


@pytest.mark.parametrize("init", FLOATING, ids=_id)
@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float32, tf.float64])
def test_floating_accept_floats(init, dtype):
    out = init([3, 2], dtype)
    assert out.dtype == dtype
    assert np.all(np.isfinite(tf.cast(out, tf.float32).numpy()))


@pytest.mark.parametrize("init", FLOATING, ids=_id)
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.bool, tf.string])
def test_floating_reject_others(init, dtype):
    with pytest.raises(ValueError, match="`dtype` must be a floating point dtype"):
        init([2, 2], dtype)


@pytest.mark.parametrize("init", NUMERICAL, ids=_id)
@pytest.mark.parametrize("dtype", [tf.bool, tf.string, tf.complex64])
def test_numerical_reject_others(init, dtype):
    with pytest.raises(ValueError, match="`dtype` must be an integer or floating"):
        init([2, 2], dtype)


@pytest.mark.parametrize("init", ALL, ids=_id)
@pytest.mark.parametrize("dtype", ["not_a_dtype", None, 3.5])
def test_dtype_that_is_not_a_dtype(init, dtype):
    with pytest.raises(TypeError, match="`dtype` must be a TensorFlow dtype"):
        init([2, 2], dtype)


# Constant initializers --------------------------------------------------------


def test_zeros_ones_values():
    np.testing.assert_array_equal(I.Zeros()([2, 3], tf.int32), np.zeros([2, 3]))
    np.testing.assert_array_equal(I.Ones()([2, 3], tf.float64), np.ones([2, 3]))


@pytest.mark.parametrize(
    "value, dtype, expected",
    [(2, tf.int32, 2), (0.5, tf.float32, 0.5), (np.float32(-1.5), tf.float64, -1.5)],
)
def test_constant_values(value, dtype, expected):
    out = I.Constant(value)([2, 2], dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.full([2, 2], expected))


def test_constant_attribute_and_repr():
    c = I.Constant(3)
    assert c.value == 3
    assert repr(c) == "Constant(value=3)"


@pytest.mark.parametrize(
    "value", [tf.constant(1.0), tf.Variable(1.0), [1.0], (1,), np.ones([2]), "a", None]
)
def test_constant_rejects_non_scalars(value):
    with pytest.raises(TypeError, match="`value` must be a scalar number"):
        I.Constant(value)


def test_constant_not_representable_in_dtype():
    with pytest.raises(ValueError, match="`value` must be representable as int32"):
        I.Constant(2.5)([2], tf.int32)


# Random initializers ----------------------------------------------------------


def test_random_uniform_range_and_moments():
    out = I.RandomUniform(-2.0, 4.0, seed=1)([20000], tf.float32).numpy()
    assert out.min() >= -2.0 and out.max() < 4.0
    assert abs(out.mean() - 1.0) < 0.1
    assert abs(out.var() - 36 / 12) < 0.15


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.int8, tf.uint8])
def test_random_uniform_integers(dtype):
    out = I.RandomUniform(0, 5, seed=3)([2000], dtype)
    assert out.dtype == dtype
    values = set(out.numpy().tolist())
    assert values == {0, 1, 2, 3, 4}


def test_random_uniform_errors():
    # TF's integer kernel failed with `InvalidArgumentError`.
    with pytest.raises(tf.errors.InvalidArgumentError, match="`maxval` must be >"):
        I.RandomUniform(1, 1)([2], tf.int32)
    with pytest.raises(ValueError, match="`maxval` must be > minval"):
        I.RandomUniform(1, 1)([2], tf.int32)
    with pytest.raises(ValueError, match="`maxval` must be given for integer"):
        I.RandomUniform(0, None)([2], tf.int32)
    with pytest.raises(ValueError, match="`minval` must be a real number"):
        I.RandomUniform(None, 1)
    with pytest.raises(ValueError, match="`minval` must be a whole number"):
        I.RandomUniform(0.5, 3)([2], tf.int32)
    with pytest.raises(TypeError, match="`minval` must be a real number"):
        I.RandomUniform("a", 1)
    with pytest.raises(ValueError, match="`maxval` must be finite"):
        I.RandomUniform(0, float("inf"))


def test_random_uniform_reversed_float_bounds():
    # As `tf.random.uniform` in the original: values in (maxval, minval].
    out = I.RandomUniform(0.0, -2.0, seed=1)([1000], tf.float32).numpy()
    assert out.min() >= -2.0 and out.max() <= 0.0 and out.min() < -1.5


def test_random_uniform_maxval_none_means_one():
    # `tf.random.uniform(maxval=None)` for floats.
    tf.random.set_seed(0)
    a = I.RandomUniform(0.0, None, seed=3)([5], tf.float32)
    tf.random.set_seed(0)
    b = I.RandomUniform(0.0, 1.0, seed=3)([5], tf.float32)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "make",
    [
        lambda v: I.RandomUniform(minval=v, maxval=5.0, seed=3),
        lambda v: I.RandomUniform(minval=-5.0, maxval=v, seed=3),
        lambda v: I.RandomNormal(mean=v, seed=3),
        lambda v: I.RandomNormal(stddev=v, seed=3),
        lambda v: I.TruncatedNormal(mean=v, seed=3),
        lambda v: I.TruncatedNormal(stddev=v, seed=3),
        lambda v: I.Identity(gain=v),
        lambda v: I.Orthogonal(gain=v, seed=3),
    ],
)
@pytest.mark.parametrize(
    "spelling",
    [
        lambda v: [v],
        lambda v: (np.float32(v),),
        lambda v: tf.constant(v, tf.float64),
        lambda v: np.array(v),
    ],
    ids=["list", "tuple", "tensor_float64", "np0d"],
)
def test_real_argument_spellings(make, spelling):
    # A one-element list broadcast like its element in the original; a
    # float64 tensor is cast (the original's op failed on it).
    tf.random.set_seed(0)
    expected = make(2.0)([3, 4], tf.float32)
    tf.random.set_seed(0)
    result = make(spelling(2.0))([3, 4], tf.float32)
    assert result.dtype == tf.float32 and result.shape == (3, 4)
    np.testing.assert_allclose(result, expected, rtol=1e-6)


@pytest.mark.parametrize("cls", [I.RandomNormal, I.TruncatedNormal])
def test_negative_stddev_draws_like_its_absolute_value(cls):
    # As TF's `sample * stddev + mean`, which the original used.
    tf.random.set_seed(0)
    a = cls(mean=1.0, stddev=-2.0, seed=3)([50], tf.float32)
    tf.random.set_seed(0)
    b = cls(mean=1.0, stddev=2.0, seed=3)([50], tf.float32)
    np.testing.assert_allclose(a - 1.0, -(b - 1.0), atol=1e-5)


@pytest.mark.parametrize(
    "seed", [3.5, 3.9, np.float32(3.5), tf.constant(3.0), tf.constant(3.7)], ids=str
)
def test_fractional_seeds_are_truncated(seed):
    # TF's random ops, which the original passed the seed to, truncate it.
    assert I.RandomNormal(seed=seed).seed == 3
    tf.random.set_seed(0)
    a = I.RandomNormal(seed=seed)([4], tf.float32)
    tf.random.set_seed(0)
    b = I.RandomNormal(seed=3)([4], tf.float32)
    np.testing.assert_array_equal(a, b)


def test_identity_integer_dtype():
    # The original multiplied by the float gain and failed.
    out = I.Identity()([2, 3], tf.int32)
    assert out.dtype == tf.int32
    np.testing.assert_array_equal(out, np.eye(2, 3, dtype=np.int32))
    np.testing.assert_array_equal(I.Identity(2)([2, 2], tf.int64), 2 * np.eye(2))


def test_variance_scaling_variable_scale():
    # The original's `scale /= fan` failed for a variable.
    scale = tf.Variable(2.0)
    init = I.VarianceScaling(scale=scale, seed=1)
    tf.random.set_seed(0)
    a = init([30, 40], tf.float32)
    tf.random.set_seed(0)
    b = I.VarianceScaling(scale=2.0, seed=1)([30, 40], tf.float32)
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_random_uniform_whole_float_seed():
    tf.random.set_seed(0)
    a = I.RandomUniform(seed=124.0)([4], tf.float32)
    tf.random.set_seed(0)
    b = I.RandomUniform(seed=124)([4], tf.float32)
    np.testing.assert_array_equal(a, b)


def test_variance_scaling_scale_as_tensor():
    tf.random.set_seed(0)
    a = I.VarianceScaling(scale=tf.constant(2.0), seed=1)([30, 40], tf.float32)
    tf.random.set_seed(0)
    b = I.VarianceScaling(scale=2.0, seed=1)([30, 40], tf.float32)
    np.testing.assert_allclose(a, b, rtol=1e-6)
    with pytest.raises(ValueError, match="`scale` must be a positive number"):
        I.VarianceScaling(scale=tf.constant(-1.0))


def test_random_uniform_tensor_bounds():
    out = I.RandomUniform(tf.constant(1.0), tf.constant(2.0))([100], tf.float64)
    assert out.dtype == tf.float64
    assert out.numpy().min() >= 1.0 and out.numpy().max() < 2.0


@pytest.mark.parametrize("cls", [I.RandomNormal, I.TruncatedNormal])
def test_normal_moments(cls):
    out = cls(mean=1.0, stddev=0.5, seed=2)([40000], tf.float32).numpy()
    assert abs(out.mean() - 1.0) < 0.02
    if cls is I.RandomNormal:
        assert abs(out.std() - 0.5) < 0.02
    else:
        # A normal truncated at 2 stddevs has stddev 0.8796 * stddev.
        assert abs(out.std() - 0.5 * 0.87962566) < 0.02
        assert out.min() >= 0.0 and out.max() <= 2.0


@pytest.mark.parametrize("cls", [I.RandomNormal, I.TruncatedNormal])
def test_normal_argument_errors(cls):
    # NaN/inf, which the original took, only give NaN/inf values.
    with pytest.raises(ValueError, match="`stddev` must be finite"):
        cls(stddev=float("nan"))
    with pytest.raises(TypeError, match="`stddev` must be a real number"):
        cls(stddev="1")
    with pytest.raises(TypeError, match="`mean` must be a real number"):
        cls(mean=[0.0, 1.0])
    # `tf.convert_to_tensor(None)` raised a `ValueError` in the original.
    with pytest.raises(ValueError, match="`mean` must be a real number"):
        cls(mean=None)
    with pytest.raises(TypeError, match="`seed` must be an integer"):
        cls(seed="1")
    assert cls(seed=True).seed == 1  # Bools are integers, as in the original.
    assert cls(seed=124.0).seed == 124  # So are whole floats.
    assert cls(seed=np.int64(3), stddev=np.array(2.0)).stddev == 2.0


@pytest.mark.parametrize("cls", [I.RandomNormal, I.TruncatedNormal])
def test_normal_tensor_stddev(cls):
    out = cls(stddev=tf.constant(0.0))([5], tf.float32)
    np.testing.assert_array_equal(out, np.zeros([5]))


RANDOM = [
    I.RandomUniform(seed=7),
    I.RandomNormal(seed=7),
    I.TruncatedNormal(seed=7),
    I.Orthogonal(seed=7),
    I.VarianceScaling(seed=7),
    I.VarianceScaling(distribution="uniform", seed=7),
    I.VarianceScaling(distribution="normal", seed=7),
]


@pytest.mark.parametrize("init", RANDOM, ids=repr)
def test_seed_is_reproducible_eager_and_in_tf_function(init):
    tf.random.set_seed(123)
    first = init([4, 3], tf.float32).numpy()
    tf.random.set_seed(123)
    again = init([4, 3], tf.float32).numpy()
    np.testing.assert_array_equal(first, again)
    tf.random.set_seed(123)
    traced = tf.function(lambda: init([4, 3], tf.float32))().numpy()
    np.testing.assert_array_equal(first, traced)
    tf.random.set_seed(124)
    other = init([4, 3], tf.float32).numpy()
    assert not np.array_equal(first, other)


def test_reprs():
    assert repr(I.Zeros()) == "Zeros()"
    assert repr(I.RandomUniform(-1, 1, seed=3)) == (
        "RandomUniform(minval=-1, maxval=1, seed=3)"
    )
    assert repr(I.TruncatedNormal(stddev=0.5)) == (
        "TruncatedNormal(mean=0.0, stddev=0.5, seed=None)"
    )
    assert repr(I.Orthogonal(gain=2.0)) == "Orthogonal(gain=2.0, seed=None)"
    assert repr(I.VarianceScaling(2.0, "fan_avg", "Uniform")) == (
        "VarianceScaling(scale=2.0, mode='fan_avg', distribution='uniform', seed=None)"
    )


def test_attributes():
    u = I.RandomUniform(1, 2, seed=3)
    assert (u.minval, u.maxval, u.seed) == (1, 2, 3)
    n = I.RandomNormal(0.5, 2.0, 4)
    assert (n.mean, n.stddev, n.seed) == (0.5, 2.0, 4)
    t = I.TruncatedNormal(0.5, 2.0, 4)
    assert (t.mean, t.stddev, t.seed) == (0.5, 2.0, 4)
    assert I.Identity(3.0).gain == 3.0
    o = I.Orthogonal(2.0, 5)
    assert (o.gain, o.seed) == (2.0, 5)
    v = I.VarianceScaling(2.0, "fan_out", "NORMAL", 6)
    assert (v.scale, v.mode, v.distribution, v.seed) == (2.0, "fan_out", "normal", 6)


# Identity -------------------------------------------------------------------


@pytest.mark.parametrize("shape", [[3, 3], [2, 4], [4, 2], [2, 3, 4], [2, 1, 3, 3]])
@pytest.mark.parametrize("gain", [1.0, -0.5])
def test_identity_matches_numpy(shape, gain):
    out = I.Identity(gain)(shape, tf.float32).numpy()
    expected = np.broadcast_to(np.eye(shape[-2], shape[-1]), shape) * gain
    np.testing.assert_array_equal(out, expected)


def test_identity_integer_dtype_and_gain():
    out = I.Identity(gain=3)([2, 2], tf.int32)
    assert out.dtype == tf.int32
    np.testing.assert_array_equal(out, 3 * np.eye(2))
    with pytest.raises(ValueError, match="`gain` must be a whole number"):
        I.Identity(gain=0.5)([2, 2], tf.int32)


def test_identity_tensor_gain():
    out = I.Identity(tf.constant(2.0))([2, 2], tf.float64)
    np.testing.assert_array_equal(out, 2 * np.eye(2))


def test_identity_dynamic_batch_shape():
    fn = tf.function(lambda x: I.Identity()(tf.shape(x), tf.float32))
    concrete = fn.get_concrete_function(tf.TensorSpec([None, None, None]))
    out = concrete(tf.zeros([2, 3, 3])).numpy()
    np.testing.assert_array_equal(out, np.broadcast_to(np.eye(3), [2, 3, 3]))


@pytest.mark.parametrize("cls", [I.Identity, I.Orthogonal])
@pytest.mark.parametrize("shape", [[], [3]])
def test_rank_below_two(cls, shape):
    with pytest.raises(ValueError, match="`shape` must have at least two dim"):
        cls()(shape, tf.float32)


@pytest.mark.parametrize("cls", [I.Identity, I.Orthogonal])
def test_gain_type(cls):
    with pytest.raises(TypeError, match="`gain` must be a real number"):
        cls(gain="big")


# Orthogonal -------------------------------------------------------------------


@pytest.mark.parametrize("shape", [[5, 3], [3, 5], [4, 4], [3, 3, 4, 5], [2, 2, 8, 3]])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_orthogonal_rows_or_columns(shape, gain):
    out = I.Orthogonal(gain=gain, seed=1)(shape, tf.float64).numpy()
    assert out.shape == tuple(shape)
    w = out.reshape(-1, shape[-1])
    rows, cols = w.shape
    gram = w.T @ w if rows >= cols else w @ w.T
    np.testing.assert_allclose(gram, gain**2 * np.eye(min(rows, cols)), atol=1e-10)


def test_orthogonal_dynamic_shapes():
    fn = tf.function(lambda x: I.Orthogonal()(tf.shape(x), tf.float32))
    concrete = fn.get_concrete_function(tf.TensorSpec([None, None]))
    for shape in ([6, 2], [2, 6]):
        w = concrete(tf.zeros(shape)).numpy()
        assert w.shape == tuple(shape)
        gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
        np.testing.assert_allclose(gram, np.eye(2), atol=1e-5)


def test_orthogonal_is_not_biased_in_sign():
    # Without the sign correction the diagonal of Q would be biased.
    diag = np.stack(
        [np.diag(I.Orthogonal()([3, 3], tf.float64).numpy()) for _ in range(200)]
    )
    assert abs(diag.mean()) < 0.15


# VarianceScaling ------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, fans",
    [
        ([], (1, 1)),
        ([7], (7, 7)),
        ([3, 5], (3, 5)),
        ([2, 3, 4, 5], (24, 30)),
        ([3, 4, 5], (12, 15)),
    ],
)
def test_compute_fans(shape, fans):
    assert init_lib._compute_fans(shape) == fans


def _expected_variance(scale, mode, shape):
    fan_in, fan_out = init_lib._compute_fans(shape)
    n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}
    return scale / max(1.0, n[mode])


@pytest.mark.parametrize("distribution", ["truncated_normal", "normal", "uniform"])
@pytest.mark.parametrize("mode", ["fan_in", "fan_out", "fan_avg"])
@pytest.mark.parametrize("shape", [[400, 100], [3, 3, 40, 90]])
def test_variance_scaling_variance(distribution, mode, shape):
    init = I.VarianceScaling(2.0, mode, distribution, seed=4)
    out = init(shape, tf.float64).numpy()
    variance = _expected_variance(2.0, mode, shape)
    np.testing.assert_allclose(out.var(), variance, rtol=0.06)
    assert abs(out.mean()) < 0.05 * np.sqrt(variance) + 1e-3
    if distribution == "uniform":
        assert np.abs(out).max() <= np.sqrt(3 * variance)
    if distribution == "truncated_normal":
        stddev = np.sqrt(variance) / 0.87962566103423978
        assert np.abs(out).max() <= 2 * stddev


def test_variance_scaling_small_fan_is_not_amplified():
    # scale / max(1, n): a fan below 1 does not increase the variance.
    out = I.VarianceScaling(1.0, "fan_in", "normal", seed=1)([0, 5], tf.float32)
    assert out.shape == (0, 5)
    out = I.VarianceScaling(1.0, "fan_in", "normal", seed=1)([20000], tf.float64)
    np.testing.assert_allclose(out.numpy().var(), 1 / 20000, rtol=0.05)


def test_variance_scaling_dynamic_shape_variance():
    init = I.VarianceScaling(1.0, "fan_avg", "uniform", seed=2)
    fn = tf.function(lambda x: init(tf.shape(x), tf.float64))
    concrete = fn.get_concrete_function(tf.TensorSpec([None, None]))
    out = concrete(tf.zeros([300, 100])).numpy()
    np.testing.assert_allclose(out.var(), 1.0 / 200, rtol=0.06)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"scale": 0.0}, ValueError, "`scale` must be a positive number"),
        ({"scale": -1.0}, ValueError, "`scale` must be a positive number"),
        ({"scale": float("inf")}, ValueError, "`scale` must be finite"),
        ({"scale": "1"}, TypeError, "`scale` must be a real number"),
        ({"mode": "fan_sum"}, ValueError, "`mode` must be one of"),
        ({"mode": None}, ValueError, "`mode` must be one of"),
        ({"distribution": "untruncated_normal"}, ValueError, "`distribution`"),
        ({"distribution": 3}, TypeError, "`distribution` must be one of"),
        # The original called `distribution.lower()`.
        ({"distribution": 3}, AttributeError, "`distribution` must be one of"),
        ({"distribution": None}, AttributeError, "`distribution` must be one of"),
        ({"distribution": b"normal"}, ValueError, "`distribution` must be one of"),
        # The original compared `scale <= 0`.
        ({"scale": [1.0]}, TypeError, "`scale` must be a real number"),
        ({"scale": None}, TypeError, "`scale` must be a real number"),
    ],
)
def test_variance_scaling_argument_errors(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        I.VarianceScaling(**kwargs)


def test_variance_scaling_distribution_case_insensitive():
    assert I.VarianceScaling(distribution="Truncated_Normal").distribution == (
        "truncated_normal"
    )


# check_initializers -------------------------------------------------------------


def test_check_initializers():
    zeros = I.Zeros()
    assert init_lib.check_initializers(None, ["w"]) == {}
    assert init_lib.check_initializers({"w": zeros}, ["w", "b"]) == {"w": zeros}
    with pytest.raises(TypeError, match="`initializers` must be a dict-like"):
        init_lib.check_initializers([zeros], ["w"])
    with pytest.raises(KeyError, match="unknown keys"):
        init_lib.check_initializers({"x": zeros}, ["w"])


# Bad constructor arguments (hypothesis) -----------------------------------------


@pytest.mark.parametrize(
    "cls",
    [
        I.Constant,
        I.RandomUniform,
        I.RandomNormal,
        I.TruncatedNormal,
        I.Identity,
        I.Orthogonal,
        I.VarianceScaling,
    ],
    ids=lambda c: c.__name__,
)
@settings(max_examples=25, deadline=None)
@given(value=bad_input.junk(), position=st.integers(0, 3))
def test_junk_constructor_arguments(cls, value, position):
    names = bad_input.parameter_names(cls)
    argument = names[min(position, len(names) - 1)]
    ok, init = bad_input.outcome(lambda: cls(**{argument: value}), [argument])
    if ok:
        # Whatever was accepted must give a clean result or a clean error.
        ok, out = bad_input.outcome(
            lambda: init([2, 2], tf.float32), [argument, "shape", "dtype"]
        )
        if ok:
            assert out.shape == (2, 2)
