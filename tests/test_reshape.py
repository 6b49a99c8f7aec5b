"""Tests for `snt.Reshape`, `snt.Flatten`, `snt.reshape` and `snt.flatten`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _x(*shape: int) -> tf.Tensor:
    return tf.reshape(tf.range(int(np.prod(shape)), dtype=tf.float32), shape)


def test_repr():
    assert repr(snt.Reshape([2, -1])) == "Reshape(output_shape=[2, -1])"
    assert repr(snt.Reshape((3,), preserve_dims=2)) == (
        "Reshape(output_shape=(3,), preserve_dims=2)"
    )
    assert repr(snt.Flatten()) == "Flatten()"
    assert repr(snt.Flatten(preserve_dims=2)) == "Flatten(preserve_dims=2)"


@pytest.mark.parametrize(
    "input_shape, output_shape, preserve_dims, expected",
    [
        ([2, 3, 4], [12], 1, [2, 12]),
        ([2, 3, 4], [-1], 1, [2, 12]),
        ([2, 3, 4], [4, -1], 1, [2, 4, 3]),
        ([2, 3, 4], [2, 2], 2, [2, 3, 2, 2]),
        ([2, 3, 4], [1, -1, 1], 2, [2, 3, 1, 4, 1]),
        ([2, 3, 4], [1], 3, [2, 3, 4, 1]),
        ([2, 3, 4], [-1], 3, [2, 3, 4, 1]),
        ([2, 0, 4], [-1], 1, [2, 0]),
        ([0, 3], [3], 1, [0, 3]),
    ],
)
def test_reshape_matches_numpy(input_shape, output_shape, preserve_dims, expected):
    x = _x(*input_shape)
    y = snt.Reshape(output_shape, preserve_dims=preserve_dims)(x)
    assert y.shape == expected
    np.testing.assert_array_equal(y.numpy(), x.numpy().reshape(expected))


def test_function_forms():
    x = _x(2, 3, 4)
    assert snt.reshape(x, [3, 4, 1], preserve_dims=1).shape == [2, 3, 4, 1]
    assert snt.flatten(x).shape == [2, 12]
    np.testing.assert_array_equal(snt.flatten(x).numpy(), x.numpy().reshape([2, 12]))


@pytest.mark.parametrize(
    "input_shape, preserve_dims, expected",
    [
        ([2, 3, 4], 1, [2, 12]),
        ([2, 3, 4], 2, [2, 3, 4]),
        ([2, 3], 2, [2, 3, 1]),
        ([1, 0], 1, [1, 0]),
    ],
)
def test_flatten(input_shape, preserve_dims, expected):
    assert snt.Flatten(preserve_dims)(_x(*input_shape)).shape == expected


def test_unknown_dims_while_tracing():
    flatten = snt.Flatten()
    f = tf.function(flatten)
    cf = f.get_concrete_function(tf.TensorSpec([None, 3, 4]))
    assert cf.output_shapes.as_list() == [None, 12]
    assert f(_x(5, 3, 4)).shape == [5, 12]
    g = tf.function(snt.Reshape([2, -1]))
    cf = g.get_concrete_function(tf.TensorSpec([None, None, 4]))
    assert cf.output_shapes.as_list() == [None, 2, None]
    assert g(_x(3, 5, 4)).shape == [3, 2, 10]


def test_reversed():
    x = _x(2, 3, 4)
    reshape = snt.Reshape([-1], name="r")
    y = reshape(x)
    back = reshape.reversed()
    assert isinstance(back, snt.Reshape)
    assert back.name == "r_reversed"
    assert repr(back) == "Reshape(output_shape=TensorShape([3, 4]), name='r_reversed')"
    np.testing.assert_array_equal(back(y).numpy(), x.numpy())
    assert reshape.reversed(name="undo").name == "undo"
    flatten = snt.Flatten(preserve_dims=2)
    flatten(x)
    assert type(flatten.reversed()) is snt.Reshape
    assert flatten.reversed().name == "flatten_reversed"


def test_reversed_before_call():
    with pytest.raises(ValueError, match="`reversed\\(\\)` needs the input shape"):
        snt.Flatten().reversed()


def test_reversed_with_one_unknown_dim():
    reshape = snt.Reshape([-1])
    tf.function(reshape).get_concrete_function(tf.TensorSpec([2, None, 4]))
    back = reshape.reversed()
    assert back(_x(2, 12)).shape == [2, 3, 4]


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        (
            {"output_shape": [2], "preserve_dims": 0},
            ValueError,
            "`preserve_dims` must be a",
        ),
        (
            {"output_shape": [2], "preserve_dims": 1.0},
            TypeError,
            "`preserve_dims` must be an",
        ),
    ],
)
def test_bad_constructor_arguments(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.Reshape(**kwargs)


# As in the original, `output_shape` is only checked by the first call: a
# non-integer size is a ValueError, a bad size an InvalidArgumentError (ours
# is both a ValueError and a `tf.errors.InvalidArgumentError`).
@pytest.mark.parametrize(
    "output_shape, error, fragment",
    [
        (2, TypeError, "`output_shape` must be a sequence"),
        (None, TypeError, "`output_shape` must be a sequence"),
        ([2.0], tf.errors.InvalidArgumentError, "`output_shape` must contain only"),
        ([7, "string"], ValueError, "`output_shape` must contain only ints"),
        ([-2], tf.errors.InvalidArgumentError, "`output_shape` must contain sizes"),
        ([-1, -1], tf.errors.InvalidArgumentError, "`output_shape` must contain at"),
        ([0, -1], tf.errors.InvalidArgumentError, "`output_shape` must not contain"),
        (tf.TensorShape(None), ValueError, "`output_shape` must have a known rank"),
    ],
)
def test_bad_output_shape_fails_on_first_call(output_shape, error, fragment):
    reshape = snt.Reshape(output_shape)
    with pytest.raises(error, match=fragment) as info:
        reshape(_x(2, 3, 4))
    assert isinstance(info.value, (ValueError, TypeError))


@pytest.mark.parametrize(
    "output_shape", [np.array([12]), tf.constant([12]), tf.constant([-1], tf.int64)]
)
def test_output_shape_as_an_array_or_tensor(output_shape):
    assert snt.Reshape(output_shape)(_x(2, 3, 4)).shape == [2, 12]


@pytest.mark.parametrize("inputs", [None, "x"])
def test_inputs_that_are_not_tensors_are_attribute_errors(inputs):
    # The original read `inputs.shape`.
    for module in (snt.Reshape([-1]), snt.Linear(2), snt.Bias()):
        with pytest.raises(AttributeError, match="`inputs` must be a tensor") as info:
            module(inputs)
        assert isinstance(info.value, TypeError)


def test_size_mismatch_is_an_invalid_argument_error():
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have 24 elements"):
        snt.Reshape([6, 4])(_x(8, 2, 2, 4))


@pytest.mark.parametrize(
    "size", [np.int64(12), np.array(12), tf.constant(12), tf.constant(12, tf.int64)]
)
def test_integer_spellings_of_sizes(size):
    assert snt.Reshape([size])(_x(2, 3, 4)).shape == [2, 12]
    assert snt.Reshape([-1], preserve_dims=size // 12 + 1)(_x(2, 3, 4)).shape == [
        2,
        3,
        4,
    ]
    assert snt.Flatten(preserve_dims=True)(_x(2, 3, 4)).shape == [2, 12]


@pytest.mark.parametrize("autograph", [True, False])
@pytest.mark.parametrize("preserve", [(1,), (None,), (None, 5), (None, None)])
def test_unknown_preserved_dims_under_tf_function(autograph, preserve):
    spec = tf.TensorSpec([*preserve, 13, 84, 3, 2])
    reshape = snt.Reshape([13, 21, 3, 8], preserve_dims=len(preserve))
    f = tf.function(reshape, autograph=autograph).get_concrete_function(spec)
    assert f.outputs[0].shape.as_list() == [*preserve, 13, 21, 3, 8]


@pytest.mark.parametrize("autograph", [True, False])
def test_unknown_reshaped_dims_under_tf_function(autograph):
    flatten = tf.function(snt.Flatten(), autograph=autograph)
    f = flatten.get_concrete_function(tf.TensorSpec([None, None, None]))
    assert f.outputs[0].shape.as_list() == [None, None]
    assert flatten(_x(2, 3, 4)).shape == [2, 12]


def test_flatten_bad_preserve_dims():
    with pytest.raises(ValueError, match="`preserve_dims` must be a positive integer"):
        snt.Flatten(preserve_dims=-1)


@pytest.mark.parametrize(
    "output_shape, input_shape, fragment",
    [
        ([5], [2, 3, 4], "`inputs` must have 5 elements after the first 1"),
        ([5, -1], [2, 3, 4], "`inputs` must have a multiple of 5 elements"),
    ],
)
def test_size_mismatch(output_shape, input_shape, fragment):
    with pytest.raises(ValueError, match=fragment):
        snt.Reshape(output_shape)(_x(*input_shape))


def test_size_mismatch_after_build():
    reshape = snt.Reshape([12])
    reshape(_x(2, 3, 4))
    with pytest.raises(ValueError, match="`inputs` must have 12 elements"):
        reshape(_x(2, 3, 5))


@pytest.mark.parametrize("preserve_dims", [3, 4])
def test_rank_too_low(preserve_dims):
    reshape = snt.Reshape([-1], preserve_dims=preserve_dims)
    with pytest.raises(
        ValueError, match="`inputs` must have a known rank >= preserve_dims"
    ):
        reshape(_x(2, 3))


def test_rank_too_low_after_build():
    flatten = snt.Flatten(preserve_dims=2)
    flatten(_x(2, 3))
    with pytest.raises(
        ValueError, match="`inputs` must have a known rank >= preserve_dims"
    ):
        flatten(_x(6))


def test_not_a_tensor():
    with pytest.raises(TypeError, match="`inputs` must be convertible to a tensor"):
        snt.Flatten()(object())
