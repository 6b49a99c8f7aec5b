"""Tests for `snt.regularizers`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings

import sonnet as snt
from sonnet._src import regularizers as reg_lib
from tests.conformance import bad_input

R = snt.regularizers
CLASSES = [R.L1, R.L2, R.OffDiagonalOrthogonal]


def _tensors() -> list[np.ndarray]:
    rng = np.random.default_rng(2)
    return [rng.normal(size=[3, 4]), rng.normal(size=[2, 2, 5])]


def _numpy(cls: type, scale: float, tensors: list[np.ndarray]) -> float:
    if cls is R.L1:
        return scale * sum(np.abs(t).sum() for t in tensors)
    if cls is R.L2:
        return scale * sum(np.square(t).sum() for t in tensors)
    total = 0.0
    for t in tensors:
        w = t.reshape(-1, t.shape[-1])
        gram = np.square(w.T @ w)
        total += gram.sum() - np.trace(gram)
    return scale * total


def test_public_names():
    assert R.__all__ == ["L1", "L2", "OffDiagonalOrthogonal", "Regularizer"]
    assert isinstance(R.__all__, list)
    for name in R.__all__:
        assert getattr(R, name) is getattr(reg_lib, name)


def test_regularizer_is_abstract():
    with pytest.raises(TypeError):
        R.Regularizer()  # type: ignore[abstract]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("scale", [0.0, 0.5, 2])
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_matches_numpy(cls, scale, dtype):
    tensors = _tensors()
    out = cls(scale)([tf.constant(t, dtype) for t in tensors])
    assert out.dtype == dtype and out.shape == ()
    np.testing.assert_allclose(out, _numpy(cls, scale, tensors), rtol=1e-5)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_accepts_variables_and_tuples(cls):
    tensors = _tensors()
    out = cls(1.0)(tuple(tf.Variable(t) for t in tensors))
    np.testing.assert_allclose(out, _numpy(cls, 1.0, tensors), rtol=1e-6)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_empty_returns_zero_like_scale(cls):
    out = cls(0.5)([])
    assert out.dtype == tf.float32 and float(out) == 0.0
    out = cls(tf.constant(0.5, tf.float64))([])
    assert out.dtype == tf.float64 and float(out) == 0.0


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_tensor_scale(cls):
    tensors = _tensors()
    out = cls(tf.Variable(0.25))([tf.constant(t) for t in tensors])
    assert out.dtype == tf.float64
    np.testing.assert_allclose(out, _numpy(cls, 0.25, tensors), rtol=1e-6)


def test_off_diagonal_orthogonal_is_zero_for_orthogonal_columns():
    w = snt.initializers.Orthogonal()([6, 3], tf.float32)
    assert abs(float(R.OffDiagonalOrthogonal(1.0)([w]))) < 1e-4


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_in_tf_function_and_gradient(cls):
    w = tf.Variable(np.arange(6.0).reshape(2, 3))
    fn = tf.function(lambda: cls(1.0)([w]))
    with tf.GradientTape() as tape:
        loss = fn()
    np.testing.assert_allclose(loss, _numpy(cls, 1.0, [w.numpy()]), rtol=1e-6)
    assert tape.gradient(loss, w) is not None


def test_reprs():
    assert repr(R.L1(0.5)) == str(R.L1(0.5)) == "L1(scale=0.5)"
    assert repr(R.L2(0.1)) == str(R.L2(0.1)) == "L2(scale=0.1)"
    # The original's repr says "Orthogonal", not the class name; kept.
    assert repr(R.OffDiagonalOrthogonal(0.2)) == "Orthogonal(scale=0.2)"
    assert str(R.OffDiagonalOrthogonal(0.2)) == "Orthogonal(scale=0.2)"


def test_scale_attribute():
    assert R.L2(0.3).scale == 0.3


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "scale, error",
    [
        (-0.1, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        ("1", TypeError),
        (None, TypeError),
        ([1.0], TypeError),
        (tf.constant(1), TypeError),
        (tf.constant([1.0, 2.0]), TypeError),
    ],
)
def test_bad_scale(cls, scale, error):
    # NaN and infinite scales, which the original took, only give NaN/inf
    # losses.
    with pytest.raises(error, match="`scale` must be"):
        cls(scale)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "scale",
    [np.array(0.5), np.array(0.5, np.float32), np.float32(0.5), True],
    ids=["np0d", "np0d_float32", "np.float32", "bool"],
)
def test_numpy_and_bool_scales(cls, scale):
    # As in the original, which only compared `scale < 0`.
    tensors = [tf.constant([[1.0, -2.0], [3.0, 0.5]])]
    expected = cls(float(scale))(tensors)
    result = cls(scale)(tensors)
    assert result.dtype == tf.float32 and result.shape == ()
    np.testing.assert_allclose(result, expected, rtol=1e-6)
    assert cls(scale).scale is scale  # Kept as given (the repr shows it).


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_float64_tensor_scale_is_cast(cls):
    # The original's `scale * loss` failed on the dtype mismatch.
    tensors = [tf.constant([[1.0, -2.0], [3.0, 0.5]])]
    result = cls(tf.constant(0.5, tf.float64))(tensors)
    assert result.dtype == tf.float32
    np.testing.assert_allclose(result, cls(0.5)(tensors), rtol=1e-6)


def test_off_diagonal_orthogonal_accepts_arrays():
    # The original read `.shape.with_rank_at_least` of each tensor, which
    # NumPy arrays lack; L1 and L2 took arrays.
    reg = R.OffDiagonalOrthogonal(0.5)
    w = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_allclose(reg([w]), reg([tf.constant(w)]))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "tensors, fragment",
    [
        (tf.ones([2, 2]), "must be a list or tuple"),
        (np.ones([2, 2]), "must be a list or tuple"),
        ("ab", "must be a list or tuple"),
        (None, "must be a list or tuple"),
        ([tf.ones([2, 2], tf.int32)], "must hold floating point tensors"),
        ([tf.ones([2, 2]), tf.ones([2, 2], tf.float64)], "must all have the same"),
        (["a"], "must hold floating point tensors"),
        ([object()], "must be convertible to a tensor"),
    ],
)
def test_bad_tensors(cls, tensors, fragment):
    with pytest.raises(TypeError, match=fragment) as info:
        cls(1.0)(tensors)
    assert "`tensors`" in str(info.value)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "tensors",
    [
        tf.ones([2, 2]),
        np.ones([2, 2]),
        [tf.ones([2, 2]), tf.ones([2, 2], tf.float64)],
    ],
    ids=["tensor", "ndarray", "mixed_dtypes"],
)
def test_bad_tensors_error_classes(cls, tensors):
    # The original's `if not tensors:` raised a `ValueError` for a tensor or
    # an array; `tf.add_n` an `InvalidArgumentError` for mixed dtypes. Ours
    # are both, and `TypeError`s.
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        cls(1.0)(tensors)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


@pytest.mark.parametrize("shape", [[], [4]])
def test_off_diagonal_orthogonal_needs_rank_two(shape):
    with pytest.raises(ValueError, match="`tensors` must hold tensors of rank >= 2"):
        R.OffDiagonalOrthogonal(1.0)([tf.ones([2, 2]), tf.ones(shape)])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(scale=bad_input.junk())
def test_junk_scale(cls, scale):
    ok, regularizer = bad_input.outcome(lambda: cls(scale), ["scale"])
    if ok:
        assert regularizer([tf.eye(2)]).shape == ()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(tensors=bad_input.junk())
def test_junk_tensors(cls, tensors):
    bad_input.outcome(lambda: cls(1.0)(tensors), ["tensors"])
