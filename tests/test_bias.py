"""Tests for `snt.Bias` and its shape rule `calculate_bias_shape`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src.bias import calculate_bias_shape
from tests.conformance import bad_input


def _random(*shape: int) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[3, 4])


def test_repr():
    assert repr(snt.Bias()) == "Bias()"
    assert repr(snt.Bias(bias_dims=[-1])) == "Bias(bias_dims=[-1])"
    assert (
        repr(snt.Bias(output_size=(3,), name="b")) == "Bias(output_size=(3,), name='b')"
    )


@pytest.mark.parametrize(
    "input_shape, bias_dims, expected",
    [
        ([8, 4, 5, 3], None, (4, 5, 3)),
        ([8, 4, 5, 3], [], ()),
        ([8, 4, 5, 3], [-1], (3,)),
        ([8, 4, 5, 3], [3], (3,)),
        ([8, 4, 5, 3], [1], (4, 1, 1)),
        ([8, 4, 5, 3], [1, 3], (4, 1, 3)),
        ([8, 4, 5, 3], [2, -1], (5, 3)),
        ([8, 4, 5], [-1, -2], (4, 5)),
        ([8, 1, 5], [1], ()),  # only size-1 axes: the leading 1s are dropped
        ([None, 6], [-1], (6,)),
    ],
)
def test_calculate_bias_shape(input_shape, bias_dims, expected):
    assert calculate_bias_shape(input_shape, bias_dims) == expected


@pytest.mark.parametrize(
    "bias_dims, fragment",
    [
        ([0], "must not contain the batch axis"),
        ([-4], "must not contain the batch axis"),
        ([4], "must contain axes of the input, which has rank 4"),
        ([-5], "must contain axes of the input, which has rank 4"),
    ],
)
def test_calculate_bias_shape_bad_dims(bias_dims, fragment):
    with pytest.raises(ValueError, match=fragment):
        calculate_bias_shape([8, 4, 5, 3], bias_dims)
    with pytest.raises(ValueError, match=fragment):
        snt.Bias(bias_dims=bias_dims)(tf.ones([1, 4, 5, 3]))


def test_calculate_bias_shape_unknown_bias_axis():
    with pytest.raises(ValueError, match="must have a known size along axis 1"):
        calculate_bias_shape([8, None, 3], [1])


def test_variable_and_numerics():
    x = _random(2, 3, 4)
    bias = snt.Bias(b_init=snt.initializers.RandomNormal())
    y = bias(x)
    assert [(v.name, v.shape.as_list()) for v in bias.variables] == [
        ("bias/b:0", [3, 4])
    ]
    assert bias.input_size == tf.TensorShape([3, 4])
    np.testing.assert_allclose(y.numpy(), x.numpy() + bias.b.numpy(), rtol=1e-6)


@pytest.mark.parametrize("bias_dims", [[-1], [1], [], [1, 2]])
def test_bias_dims_numerics(bias_dims):
    x = _random(2, 3, 4)
    bias = snt.Bias(bias_dims=bias_dims, b_init=snt.initializers.RandomNormal())
    y = bias(x)
    assert bias.b.shape == calculate_bias_shape([2, 3, 4], bias_dims)
    np.testing.assert_allclose(y.numpy(), x.numpy() + bias.b.numpy(), rtol=1e-6)
    y2 = bias(x, multiplier=-2.0)
    np.testing.assert_allclose(y2.numpy(), x.numpy() - 2 * bias.b.numpy(), rtol=1e-6)


def test_per_example_multiplier():
    bias = snt.Bias(bias_dims=[-1], b_init=snt.initializers.Ones())
    y = bias(tf.zeros([2, 3]), multiplier=tf.constant([[1.0], [3.0]]))
    np.testing.assert_array_equal(y.numpy(), [[1, 1, 1], [3, 3, 3]])


@pytest.mark.parametrize(
    "multiplier, error, fragment",
    [
        ("foo", TypeError, "`multiplier` must be a number or tensor of dtype float32"),
        (
            tf.constant(2, tf.int32),
            TypeError,
            "`multiplier` must be a number or tensor",
        ),
        (tf.ones([4]), ValueError, r"`multiplier` must broadcast against the bias"),
        (tf.ones([3, 1, 1]), ValueError, r"`multiplier` must broadcast against the"),
    ],
)
@pytest.mark.parametrize("built", [False, True])
def test_bad_multiplier(multiplier, error, fragment, built):
    bias = snt.Bias()
    if built:
        bias(tf.ones([2, 3]))
    with pytest.raises(error, match=fragment):
        bias(tf.ones([2, 3]), multiplier=multiplier)
    # A failed first call builds nothing.
    assert hasattr(bias, "b") == built


def test_multiplier_checked_before_building():
    bias = snt.Bias(b_init=snt.initializers.Ones())
    with pytest.raises(TypeError, match="`multiplier` must be a number or tensor"):
        bias(tf.ones([2, 3], tf.int32), multiplier=0.5)
    assert not hasattr(bias, "b")
    np.testing.assert_array_equal(
        bias(tf.zeros([1, 3]), multiplier=0.5).numpy(), [[0.5] * 3]
    )


@pytest.mark.parametrize("dtype", [tf.float16, tf.float64, tf.int32])
def test_dtypes(dtype):
    bias = snt.Bias(b_init=snt.initializers.Ones())
    y = bias(tf.ones([2, 3], dtype))
    assert y.dtype == bias.b.dtype == dtype
    np.testing.assert_array_equal(np.asarray(y, np.float64), np.full([2, 3], 2.0))


def test_gradients():
    bias = snt.Bias(bias_dims=[-1])
    x = _random(2, 3, 4)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(bias(x) * x)
    np.testing.assert_allclose(
        tape.gradient(loss, bias.b).numpy(), x.numpy().sum((0, 1)), rtol=1e-5
    )


def test_output_size():
    bias = snt.Bias(output_size=(3, 4))
    assert bias.output_size == (3, 4)
    bias(tf.ones([2, 3, 4]))
    assert snt.Bias(output_size=3)(tf.ones([2, 3])).shape == [2, 3]
    with pytest.raises(ValueError, match=r"`inputs` must have shape \[None, 3, 5\]"):
        snt.Bias(output_size=[3, 5])(tf.ones([2, 3, 4]))


def test_integer_spellings():
    bias = snt.Bias(output_size=np.int64(3), bias_dims=[tf.constant(-1)])
    assert bias(tf.ones([2, 3])).shape == [2, 3]
    assert bias.b.shape == [3]
    assert snt.Bias(output_size=[np.int32(2), 3])(tf.ones([1, 2, 3])).shape == [1, 2, 3]


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"output_size": "3"}, TypeError, "`output_size` must be a sequence"),
        (
            {"output_size": [-1]},
            ValueError,
            "`output_size` must contain only integers >= 0",
        ),
        ({"bias_dims": 1}, TypeError, "`bias_dims` must be a sequence of integers"),
        ({"bias_dims": [1.0]}, TypeError, "`bias_dims` must be a sequence of integers"),
        ({"b_init": 1}, TypeError, "`b_init` must be a callable"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.Bias(**kwargs)


def test_first_call_bad_dtype_and_initializer():
    with pytest.raises(
        TypeError, match="`inputs` must have a floating point or integer"
    ):
        snt.Bias()(tf.fill([2, 3], "a"))
    bias = snt.Bias(b_init=lambda shape, dtype: tf.zeros([1, *shape], dtype))
    with pytest.raises(
        ValueError, match="`b_init` must create a tensor of the requested"
    ):
        bias(tf.ones([2, 3]))
    assert not hasattr(bias, "b")


def test_first_call_rank_too_low():
    with pytest.raises(ValueError, match="`inputs` must have rank >= 2"):
        snt.Bias()(tf.ones([3]))


# Inputs that would broadcast silently against the bias are rejected.


@pytest.mark.parametrize(
    "bias_dims, build_shape, bad_shape",
    [
        (None, [2, 3], [2, 1]),
        (None, [2, 3], [2, 4]),
        (None, [2, 1], [2, 5]),  # b has shape [1] but covers a real axis
        (None, [2, 3, 3, 3], [3, 3]),
        (None, [2, 3, 3, 3], [2, 3, 1, 3]),
        ([-1], [2, 4, 4, 3], [2, 4, 4, 1]),
        ([-1], [2, 4, 1], [2, 4, 6]),  # b is a scalar here
        ([1], [2, 4, 5], [2, 1, 5]),
        ([1], [2, 4, 5], [4, 5]),
    ],
)
def test_changed_bias_axes_rejected(bias_dims, build_shape, bad_shape):
    bias = snt.Bias(bias_dims=bias_dims, b_init=snt.initializers.RandomNormal())
    bias(tf.ones(build_shape))
    before = bad_input.snapshot(bias)
    with pytest.raises(ValueError, match="`inputs` must have"):
        bias(tf.ones(bad_shape))
    with pytest.raises(ValueError, match="`inputs` must have"):
        tf.function(bias)(tf.ones(bad_shape))
    bad_input.assert_unchanged(bias, before)


@pytest.mark.parametrize(
    "bias_dims, build_shape, other_shape",
    [
        ([-1], [2, 4, 4, 3], [5, 2, 7, 3]),
        ([-1], [2, 4, 4, 3], [5, 3]),
        ([1], [2, 4, 5], [7, 4, 9]),
        ([], [2, 3], [4, 5, 6]),
        (None, [2, 3], [6, 3]),
    ],
)
def test_other_axes_may_change(bias_dims, build_shape, other_shape):
    bias = snt.Bias(bias_dims=bias_dims, b_init=snt.initializers.RandomNormal())
    bias(tf.ones(build_shape))
    x = _random(*other_shape)
    np.testing.assert_allclose(bias(x).numpy(), x.numpy() + bias.b.numpy(), rtol=1e-6)


def test_unknown_sizes_are_checked_when_the_graph_runs():
    bias = snt.Bias()
    bias(tf.ones([2, 3, 4]))
    f = tf.function(bias, input_signature=[tf.TensorSpec([None, None, None])])
    assert f(tf.ones([5, 3, 4])).shape == [5, 3, 4]
    with pytest.raises(tf.errors.InvalidArgumentError):
        f(tf.ones([5, 1, 4]))


def test_unknown_rank_traced_inputs():
    channel_bias = snt.Bias(bias_dims=[-1])
    channel_bias(tf.ones([2, 3]))
    f = tf.function(channel_bias, input_signature=[tf.TensorSpec(None)])
    assert f(tf.ones([2, 5, 3])).shape == [2, 5, 3]
    full_bias = snt.Bias()
    full_bias(tf.ones([2, 3, 4]))
    g = tf.function(full_bias, input_signature=[tf.TensorSpec(None)])
    with pytest.raises(ValueError, match="`inputs` must have a known rank"):
        g.get_concrete_function()


def test_wrong_dtype_after_build():
    bias = snt.Bias()
    bias(tf.ones([2, 3]))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        bias(tf.ones([2, 3], tf.float64))
    multi = snt.Bias(bias_dims=[1, 2])
    multi(tf.ones([2, 3, 3]))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        multi(tf.ones([2, 3, 3], tf.int32))
