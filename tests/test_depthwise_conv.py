"""Tests for `snt.DepthwiseConv2D`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src import conv_base
from tests.conformance import bad_input
from tests.test_conv import (
    cpu_supports_channels_first,
    np_conv,
    random_input,
    randomize,
    to_channels_first,
    to_channels_last,
)


def np_depthwise_conv(
    x: np.ndarray,
    w: np.ndarray,
    stride: tuple[int, int],
    rate: tuple[int, int],
    padding: str,
) -> np.ndarray:
    """Output channel `c * multiplier + m`: channel `c` convolved with `w[..., c, m]`.

    Built from per-channel calls of the plain convolution reference.
    """
    channels, multiplier = w.shape[2:]
    outputs = []
    for c in range(channels):
        for m in range(multiplier):
            kernel = w[:, :, c : c + 1, m : m + 1]
            outputs.append(np_conv(x[..., c : c + 1], kernel, stride, rate, padding))
    return np.concatenate(outputs, axis=-1)


CONFIGS = [
    # padding, stride, rate
    ("SAME", 1, 1),
    ("VALID", 1, 1),
    ("SAME", 2, 1),
    ("VALID", (2, 1), 1),
    ("SAME", 1, 2),
    ("VALID", 1, (1, 2)),
    ("same", 3, 1),
    ("SAME", (1, 2), 1),
    ("SAME", (3, 2), 1),
    ("VALID", (1, 3), 1),
]


@pytest.mark.parametrize("padding,stride,rate", CONFIGS)
@pytest.mark.parametrize("multiplier", [1, 3])
def test_matches_numpy(padding: str, stride: Any, rate: Any, multiplier: int):
    x = random_input((2, 7, 6, 3))
    module = snt.DepthwiseConv2D(
        (3, 2),
        channel_multiplier=multiplier,
        stride=stride,
        rate=rate,
        padding=padding,
    )
    module(x)
    randomize(module)
    pair = lambda v: v if isinstance(v, tuple) else (v, v)
    expected = np_depthwise_conv(
        x, module.w.numpy(), pair(stride), pair(rate), padding.upper()
    )
    actual = module(x).numpy()
    assert actual.shape == expected.shape
    np.testing.assert_allclose(
        actual, expected + module.b.numpy(), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"stride": 2, "padding": "VALID"}, {"rate": 2}],
    ids=["same", "stride2-valid", "dilated"],
)
def test_channels_first_matches_channels_last(kwargs: dict[str, Any]):
    x = random_input((2, 6, 5, 3))
    last = snt.DepthwiseConv2D(3, channel_multiplier=2, **kwargs)
    first = snt.DepthwiseConv2D(3, channel_multiplier=2, data_format="NCHW", **kwargs)
    last(x)
    first(to_channels_first(x))
    randomize(last)
    for a, b in zip(first.variables, last.variables):
        a.assign(b)
    actual = to_channels_last(first(to_channels_first(x)).numpy())
    np.testing.assert_allclose(actual, last(x).numpy(), rtol=1e-5, atol=1e-5)


def test_native_channels_first_path(monkeypatch):
    if not cpu_supports_channels_first():
        pytest.skip("this TensorFlow build has no channels-first CPU kernels")
    monkeypatch.setattr(conv_base, "on_accelerator", lambda v: True)
    x = random_input((2, 6, 5, 3))
    last = snt.DepthwiseConv2D(3, channel_multiplier=2, stride=2)
    first = snt.DepthwiseConv2D(3, channel_multiplier=2, stride=2, data_format="NCHW")
    last(x)
    first(to_channels_first(x))
    assert first._eager_layout is not None and not first._eager_layout.transpose
    randomize(last)
    for a, b in zip(first.variables, last.variables):
        a.assign(b)
    actual = to_channels_last(first(to_channels_first(x)).numpy())
    np.testing.assert_allclose(actual, last(x).numpy(), rtol=1e-5, atol=1e-5)


def test_gradients_match_tf_nn_depthwise_conv2d():
    x = tf.constant(random_input((2, 5, 6, 3)))
    module = snt.DepthwiseConv2D(3, channel_multiplier=2, data_format="NCHW")
    xin = tf.transpose(x, [0, 3, 1, 2])
    module(xin)
    randomize(module)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, xin])
        loss = tf.reduce_sum(tf.transpose(module(xin), [0, 2, 3, 1]) ** 2)
        ref = tf.nn.depthwise_conv2d(x, module.w, [1, 1, 1, 1], "SAME")
        ref_loss = tf.reduce_sum(tf.nn.bias_add(ref, module.b) ** 2)
    got = tape.gradient(loss, [xin, module.w, module.b])
    want = tape.gradient(ref_loss, [x, module.w, module.b])
    got[0] = tf.transpose(got[0], [0, 2, 3, 1])
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------
# Shapes, variables, attributes.


def test_variables_and_default_initializer():
    module = snt.DepthwiseConv2D((3, 2), channel_multiplier=2)
    module(tf.ones([1, 4, 4, 5]))
    assert [(v.name, v.shape.as_list()) for v in module.variables] == [
        ("depthwise_conv2_d/b:0", [10]),
        ("depthwise_conv2_d/w:0", [3, 2, 5, 2]),
    ]
    stddev = 1 / np.sqrt(3 * 2)  # Fan-in excludes the channels.
    assert isinstance(module.w_init, snt.initializers.TruncatedNormal)
    assert module.w_init.stddev == pytest.approx(stddev)
    assert isinstance(module.b_init, snt.initializers.Zeros)
    assert module.input_channels == 5


def test_attributes():
    last = snt.DepthwiseConv2D(3, stride=(2, 1), rate=1, padding="valid")
    assert last.stride == (1, 2, 1, 1)
    assert last.rate == (1, 1)
    assert last.padding == "valid"
    assert last.kernel_shape == 3
    assert last.channel_multiplier == 1
    assert last.data_format == "NHWC"
    first = snt.DepthwiseConv2D(3, stride=2, rate=1, data_format="NCHW")
    assert first.stride == (1, 1, 2, 2)
    assert snt.DepthwiseConv2D(3, rate=2).rate == (2, 2)


def test_without_bias_and_dtype():
    module = snt.DepthwiseConv2D(3, with_bias=False)
    out = module(tf.ones([1, 4, 4, 2], tf.float64))
    assert out.dtype == tf.float64
    assert [v.name for v in module.variables] == ["depthwise_conv2_d/w:0"]
    assert not hasattr(module, "b") and module.b_init is None


@pytest.mark.parametrize("stride", [2, (2, 3)])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_unknown_batch_and_spatial_dims(stride: Any, data_format: str):
    module = snt.DepthwiseConv2D(
        3, channel_multiplier=2, stride=stride, data_format=data_format
    )
    first = data_format == "NCHW"
    spec = [None, 3, None, None] if first else [None, None, None, 3]
    traced = tf.function(module).get_concrete_function(tf.TensorSpec(spec))
    channels = traced.output_shapes.as_list()[1 if first else -1]
    assert channels == 6
    for size in (4, 7):
        x = random_input((2, 3, size, size) if first else (2, size, size, 3))
        np.testing.assert_allclose(traced(x), module(x), rtol=1e-6)


def test_empty_batch():
    module = snt.DepthwiseConv2D(3, channel_multiplier=2, padding="VALID")
    with tf.GradientTape() as tape:
        y = module(tf.zeros([0, 5, 5, 3]))
        loss = tf.reduce_sum(y)
    assert y.shape == (0, 3, 3, 6)
    grad = tape.gradient(loss, module.w)
    np.testing.assert_array_equal(grad.numpy(), np.zeros(module.w.shape))
    with pytest.raises(ValueError, match="`inputs` must have 3 channels"):
        module(tf.zeros([0, 5, 5, 4]))


def test_repr():
    assert (
        repr(snt.DepthwiseConv2D(3, channel_multiplier=2))
        == "DepthwiseConv2D(kernel_shape=3, channel_multiplier=2)"
    )
    assert (
        repr(snt.DepthwiseConv2D((3, 3), data_format="NCHW"))
        == "DepthwiseConv2D(kernel_shape=(3, 3), data_format='NCHW')"
    )


# --------------------------------------------------------------------------
# Errors.


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"kernel_shape": 0}, ValueError, "`kernel_shape` must be a positive"),
        ({"kernel_shape": (1, 2, 3)}, TypeError, "`kernel_shape` must be a scalar"),
        ({"channel_multiplier": -1}, ValueError, "`channel_multiplier` must be a non"),
        ({"channel_multiplier": 1.5}, TypeError, "`channel_multiplier` must be an"),
        ({"stride": -2}, ValueError, "`stride` must be a positive"),
        ({"rate": 0}, ValueError, "`rate` must be a positive"),
        ({"stride": 2, "rate": 2}, ValueError, "`rate` must be 1 when `stride`"),
        ({"padding": "full"}, ValueError, "`padding` must be 'SAME' or 'VALID'"),
        ({"padding": snt.pad.same}, TypeError, "`padding` must be 'SAME' or 'VALID'"),
        ({"data_format": "NCW"}, ValueError, "`data_format` must be 'NHWC'"),
        ({"data_format": "channels_middle"}, ValueError, "`data_format` must be"),
        ({"with_bias": "1"}, TypeError, "`with_bias` must be a bool"),
        (
            {"with_bias": False, "b_init": snt.initializers.Zeros()},
            ValueError,
            "`b_init` must be None when `with_bias=False`",
        ),
        ({"w_init": 3}, TypeError, "`w_init` must be a callable"),
    ],
)
def test_constructor_errors(kwargs: dict[str, Any], error: type, match: str):
    args = {"kernel_shape": 3, **kwargs}
    with pytest.raises(error, match=match) as info:
        snt.DepthwiseConv2D(**args)
    bad_input.check_error(info.value, list(kwargs))


def test_call_errors():
    module = snt.DepthwiseConv2D(3, padding="VALID")
    with pytest.raises(ValueError, match="`inputs` must have rank 4"):
        module(tf.ones([4, 4, 3]))
    with pytest.raises(TypeError, match="`inputs` must have a floating point dtype"):
        module(tf.ones([1, 4, 4, 3], tf.int32))
    module(tf.ones([1, 4, 4, 3]))
    before = bad_input.snapshot(module)
    with pytest.raises(ValueError, match="`inputs` must have rank 4"):
        module(tf.ones([1, 1, 4, 4, 3]))
    with pytest.raises(ValueError, match="`inputs` must have 3 channels"):
        module(tf.ones([1, 4, 4, 2]))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        module(tf.ones([1, 4, 4, 3], tf.float64))
    with pytest.raises(ValueError, match="`inputs` must have size >= 3 in spatial"):
        module(tf.ones([1, 2, 4, 3]))
    bad_input.assert_unchanged(module, before)


def test_unknown_channels():
    traced = tf.function(snt.DepthwiseConv2D(3))
    with pytest.raises(ValueError, match="`inputs` must have a known number of ch"):
        traced.get_concrete_function(tf.TensorSpec([None, 4, 4, None]))


# --------------------------------------------------------------------------
# Bad input fuzzing.

CTOR_ARGUMENTS = bad_input.parameter_names(snt.DepthwiseConv2D)


@settings(max_examples=25, deadline=None)
@given(argument=st.sampled_from(CTOR_ARGUMENTS), value=bad_input.junk())
def test_junk_constructor_arguments(argument: str, value: Any):
    kwargs = {"kernel_shape": 2, argument: value}
    ok, module = bad_input.outcome(lambda: snt.DepthwiseConv2D(**kwargs), [argument])
    if ok:
        x = tf.ones([1, 3, 3, 2])
        bad_input.outcome(lambda: module(x), [argument, "inputs"])


@settings(max_examples=25, deadline=None)
@given(
    first=st.booleans(),
    padding=st.sampled_from(["SAME", "VALID"]),
    variant=st.integers(0, 5),
    build_with_bad=st.booleans(),
)
def test_bad_inputs(first: bool, padding: str, variant: int, build_with_bad: bool):
    module = snt.DepthwiseConv2D(
        2,
        channel_multiplier=2,
        padding=padding,
        data_format="NCHW" if first else "NHWC",
    )
    x = tf.ones([1, 2, 3, 3]) if first else tf.ones([1, 3, 3, 2])
    variants = (
        bad_input.wrong_rank_variants(x)
        + bad_input.wrong_dtype_variants(x)
        + bad_input.resized_variants(x)
    )
    bad = variants[variant % len(variants)]
    if build_with_bad:
        ok, _ = bad_input.outcome(lambda: module(bad), ["inputs"])
        if not ok:
            with pytest.raises(ValueError):
                _ = module.variables
        return
    module(x)
    before = bad_input.snapshot(module)
    bad_input.outcome(lambda: module(bad), ["inputs"])
    bad_input.assert_unchanged(module, before)
    assert module(x).shape[1 if first else -1] == 4  # Still usable.


# --------------------------------------------------------------------------
# Spellings and error classes of the original (tests/differential/).


@pytest.mark.parametrize(
    "kwargs",
    [
        {"channel_multiplier": 2.0},
        {"channel_multiplier": tf.constant(2.0)},
        {"kernel_shape": 3.0},
        {"stride": (2.0, 2.0)},
        {"stride": tf.constant(2.0)},
        {"padding": b"SAME"},
        {"padding": "same"},
    ],
    ids=lambda kwargs: f"{next(iter(kwargs))}={next(iter(kwargs.values()))!r}",
)
def test_spellings(kwargs: dict[str, Any]):
    x = tf.random.stateless_normal([2, 6, 6, 3], seed=[1, 2])
    ones = snt.initializers.Ones()
    args = {"kernel_shape": 3, "channel_multiplier": 2, "stride": 2, **kwargs}
    expected = snt.DepthwiseConv2D(3, 2, stride=2, w_init=ones)(x)
    actual = snt.DepthwiseConv2D(**args, w_init=ones)(x)
    np.testing.assert_allclose(actual, expected)


def test_rate_spellings():
    x = tf.random.stateless_normal([1, 9, 9, 2], seed=[1, 2])
    ones = snt.initializers.Ones()
    expected = snt.DepthwiseConv2D(3, rate=2, w_init=ones)(x)
    for rate in (2.0, np.float32(2), (2.0, 2.0)):
        actual = snt.DepthwiseConv2D(3, rate=rate, w_init=ones)(x)
        np.testing.assert_allclose(actual, expected)


def test_zero_channel_multiplier():
    y = snt.DepthwiseConv2D(3, channel_multiplier=0)(tf.ones([2, 5, 5, 3]))
    assert y.shape == (2, 5, 5, 0)


@pytest.mark.parametrize("padding", [None, 1])
def test_non_string_padding_is_type_error(padding: Any):
    with pytest.raises(TypeError, match="`padding` must be 'SAME' or 'VALID'"):
        snt.DepthwiseConv2D(3, padding=padding)


def test_bad_padding_string_is_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError, match="`padding` must be"):
        snt.DepthwiseConv2D(3, padding="bogus")


@pytest.mark.parametrize("shape", [[5, 5, 3], [1, 2, 5, 5, 3]])
def test_wrong_rank_is_invalid_argument(shape: list[int]):
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have rank 4"):
        snt.DepthwiseConv2D(3)(tf.ones(shape))


def test_scalar_inputs_are_index_errors():
    # The original read the channels off the (empty) shape.
    with pytest.raises(IndexError, match="must have rank 4") as info:
        snt.DepthwiseConv2D(3)(tf.constant(1.0))
    assert isinstance(info.value, ValueError)


def test_integer_inputs_are_invalid_argument():
    module = snt.DepthwiseConv2D(3, w_init=snt.initializers.Ones())
    with pytest.raises(tf.errors.InvalidArgumentError, match="floating point"):
        module(tf.ones([1, 4, 4, 3], tf.int32))


@pytest.mark.parametrize("inputs", [None, "x"])
def test_inputs_without_shape_are_attribute_errors(inputs: Any):
    with pytest.raises(AttributeError, match="`inputs` must be a tensor"):
        snt.DepthwiseConv2D(3)(inputs)
