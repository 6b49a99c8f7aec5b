"""Tests for `snt.Conv1DTranspose/2DTranspose/3DTranspose` (`ConvNDTranspose`)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src import conv_base
from sonnet._src import conv_transpose as conv_transpose_lib
from tests.conformance import bad_input
from tests.test_conv import (
    CHANNELS_FIRST,
    cpu_supports_channels_first,
    random_input,
    randomize,
    to_channels_first,
    to_channels_last,
)

CLASSES = {1: snt.Conv1DTranspose, 2: snt.Conv2DTranspose, 3: snt.Conv3DTranspose}
SPATIAL = {1: (4,), 2: (3, 4), 3: (2, 3, 2)}
KERNEL = {1: (3,), 2: (3, 2), 3: (2, 3, 2)}


def default_output_size(size: int, stride: int, k: int, rate: int, padding: str) -> int:
    """The spec's output size: `in * stride` (+ `(k - 1) * rate` for VALID)."""
    return size * stride + (0 if padding == "SAME" else (k - 1) * rate)


def np_conv_transpose(
    x: np.ndarray,
    w: np.ndarray,
    stride: tuple[int, ...],
    rate: tuple[int, ...],
    padding: str,
    output_spatial: tuple[int, ...],
) -> np.ndarray:
    """Channels-last transposed convolution as an explicit scatter.

    Every input position `p` adds `x[p] @ w[tap].T` at `p * stride + tap *
    rate` of a full-size canvas, which is then cropped by the padding the
    matching forward convolution (input size `output_spatial`) would use.
    `x` is `[B, *spatial, C_in]`, `w` is `[*kernel, C_out, C_in]`.
    """
    n = x.ndim - 2
    kernel = w.shape[:n]
    k_eff = [(k - 1) * r + 1 for k, r in zip(kernel, rate)]
    befores = []
    for out, size, s, k in zip(output_spatial, x.shape[1:-1], stride, k_eff):
        total = max((size - 1) * s + k - out, 0) if padding == "SAME" else 0
        befores.append(total // 2)
    canvas = [
        max((size - 1) * s + k, b + out)
        for size, s, k, b, out in zip(
            x.shape[1:-1], stride, k_eff, befores, output_spatial
        )
    ]
    y = np.zeros([x.shape[0], *canvas, w.shape[-2]])
    for position in itertools.product(*(range(size) for size in x.shape[1:-1])):
        for tap in itertools.product(*(range(k) for k in kernel)):
            target = tuple(
                p * s + t * r for p, s, t, r in zip(position, stride, tap, rate)
            )
            y[(slice(None), *target)] += x[(slice(None), *position)].astype(
                np.float64
            ) @ w[tap].T.astype(np.float64)
    crop = tuple(slice(b, b + out) for b, out in zip(befores, output_spatial))
    return y[(slice(None), *crop)]


# --------------------------------------------------------------------------
# Numerics.

CONFIGS = [
    # padding, stride, rate
    ("SAME", 1, 1),
    ("VALID", 1, 1),
    ("SAME", 2, 1),
    ("VALID", 2, 1),
    ("SAME", 1, 2),
    ("VALID", 1, 2),
    ("SAME", 2, 2),
    ("VALID", 3, 2),
]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("padding,stride,rate", CONFIGS)
def test_matches_numpy(n: int, padding: str, stride: int, rate: int):
    x = random_input((2, *SPATIAL[n], 2))
    module = CLASSES[n](3, KERNEL[n], stride=stride, rate=rate, padding=padding)
    module(x)
    randomize(module)
    out_spatial = tuple(
        default_output_size(size, stride, k, rate, padding)
        for size, k in zip(SPATIAL[n], KERNEL[n])
    )
    expected = np_conv_transpose(
        x, module.w.numpy(), (stride,) * n, (rate,) * n, padding, out_spatial
    )
    actual = module(x).numpy()
    assert actual.shape == (2, *out_spatial, 3)
    np.testing.assert_allclose(
        actual, expected + module.b.numpy(), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    "padding,stride,output_shape",
    [
        ("SAME", 2, (5, 8)),
        ("SAME", 2, (6, 7)),
        ("VALID", 2, (7, 9)),
        ("VALID", 2, (8, 10)),
        ("SAME", (1, 3), (3, 10)),
    ],
)
def test_given_output_shape_matches_numpy(
    padding: str, stride: Any, output_shape: tuple[int, int]
):
    x = random_input((2, 3, 4, 2))
    module = snt.Conv2DTranspose(
        3, 3, output_shape=output_shape, stride=stride, padding=padding
    )
    module(x)
    randomize(module)
    strides = stride if isinstance(stride, tuple) else (stride, stride)
    expected = np_conv_transpose(
        x, module.w.numpy(), strides, (1, 1), padding, output_shape
    )
    actual = module(x).numpy()
    assert actual.shape == (2, *output_shape, 3)
    np.testing.assert_allclose(
        actual, expected + module.b.numpy(), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("padding,stride,rate", CONFIGS[:6])
def test_is_the_adjoint_of_conv(n: int, padding: str, stride: int, rate: int):
    """<conv(x), y> == <x, conv_transpose(y)> with the same weights."""
    size = (6, 5, 4)[:n]
    forward = snt.Conv1D if n == 1 else snt.Conv2D if n == 2 else snt.Conv3D
    conv = forward(
        3, KERNEL[n], stride=stride, rate=rate, padding=padding, with_bias=False
    )
    x = random_input((2, *size, 2))
    y_shape = conv(x).shape
    randomize(conv)
    transpose = CLASSES[n](
        2,
        KERNEL[n],
        output_shape=size,
        stride=stride,
        rate=rate,
        padding=padding,
        with_bias=False,
    )
    y = random_input(tuple(y_shape), seed=3)
    transpose(y)
    transpose.w.assign(conv.w)
    lhs = np.sum(conv(x).numpy().astype(np.float64) * y)
    rhs = np.sum(x.astype(np.float64) * transpose(y).numpy())
    np.testing.assert_allclose(lhs, rhs, rtol=1e-4)


def test_all_ones_valid_counts_overlaps():
    module = snt.Conv2DTranspose(
        1, 3, padding="VALID", w_init=snt.initializers.Ones(), with_bias=False
    )
    out = module(tf.ones([1, 3, 3, 1])).numpy()[0, :, :, 0]
    counts = np.array([1, 2, 3, 2, 1])
    np.testing.assert_allclose(out, np.outer(counts, counts))


@pytest.mark.parametrize(
    "padding,expected", [("SAME", [1, 10, 10, 4]), ("VALID", [1, 12, 12, 4])]
)
def test_spec_output_shapes(padding: str, expected: list[int]):
    module = snt.Conv2DTranspose(4, 3, stride=2, padding=padding)
    assert module(tf.ones([1, 5, 5, 2])).shape.as_list() == expected


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize(
    "kwargs",
    [{"stride": 2}, {"padding": "VALID", "rate": 2}, {"output_shape": "given"}],
    ids=["stride2", "valid-dilated", "output_shape"],
)
def test_channels_first_matches_channels_last(n: int, kwargs: dict[str, Any]):
    kwargs = dict(kwargs)
    if kwargs.get("output_shape") == "given":
        kwargs.update(output_shape=[2 * s - 1 for s in SPATIAL[n]], stride=2)
    x = random_input((2, *SPATIAL[n], 3))
    last = CLASSES[n](4, KERNEL[n], **kwargs)
    first = CLASSES[n](4, KERNEL[n], data_format=CHANNELS_FIRST[n], **kwargs)
    last(x)
    first(to_channels_first(x))
    randomize(last)
    for a, b in zip(first.variables, last.variables):
        a.assign(b)
    actual = to_channels_last(first(to_channels_first(x)).numpy())
    np.testing.assert_allclose(actual, last(x).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("rate", [1, 2])
def test_native_paths(n: int, rate: int, monkeypatch):
    """The GPU code path (channels-first and dilation in the op), on CPU."""
    if not cpu_supports_channels_first():
        pytest.skip("this TensorFlow build has no channels-first CPU kernels")
    x = random_input((2, *SPATIAL[n], 3))
    reference = CLASSES[n](4, KERNEL[n], rate=rate, stride=2 // rate)
    reference(x)
    randomize(reference)
    monkeypatch.setattr(conv_base, "on_accelerator", lambda v: True)
    native = CLASSES[n](
        4, KERNEL[n], rate=rate, stride=2 // rate, data_format=CHANNELS_FIRST[n]
    )
    native(to_channels_first(x))
    layout = native._eager_layout
    assert layout is not None
    assert not layout.transpose and not layout.dilate_kernel
    for a, b in zip(native.variables, reference.variables):
        a.assign(b)
    actual = to_channels_last(native(to_channels_first(x)).numpy())
    np.testing.assert_allclose(actual, reference(x).numpy(), rtol=1e-5, atol=1e-5)


def test_dilate_kernel():
    w = np.arange(6, dtype=np.float32).reshape([2, 3, 1, 1])
    dilated = conv_transpose_lib.dilate_kernel(tf.constant(w), (2, 3)).numpy()
    expected = np.zeros([3, 7, 1, 1], np.float32)
    expected[::2, ::3] = w
    np.testing.assert_array_equal(dilated, expected)
    assert conv_transpose_lib.dilate_kernel(tf.constant(w), (1, 1)).shape == w.shape


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_gradients_match_tf_nn_conv_transpose(data_format: str):
    x = tf.constant(random_input((2, 3, 4, 3)))
    module = snt.Conv2DTranspose(2, 3, stride=2, data_format=data_format)
    xin = x if data_format == "NHWC" else tf.transpose(x, [0, 3, 1, 2])
    module(xin)
    randomize(module)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([xin, x])
        ours = module(xin)
        if data_format == "NCHW":
            ours = tf.transpose(ours, [0, 2, 3, 1])
        loss = tf.reduce_sum(ours**2)
        ref = tf.nn.conv_transpose(
            x, module.w, output_shape=[2, 6, 8, 2], strides=2, padding="SAME"
        )
        ref_loss = tf.reduce_sum(tf.nn.bias_add(ref, module.b) ** 2)
    got = tape.gradient(loss, [xin, module.w, module.b])
    want = tape.gradient(ref_loss, [x, module.w, module.b])
    if data_format == "NCHW":
        got[0] = tf.transpose(got[0], [0, 2, 3, 1])
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------
# Shapes, variables, attributes.


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_unknown_batch_and_spatial_dims(n: int, padding: str):
    module = CLASSES[n](2, 2, stride=2, padding=padding)
    fn = tf.function(module)
    dynamic = fn.get_concrete_function(tf.TensorSpec([None] * (n + 1) + [3]))
    assert dynamic.output_shapes.as_list() == [None] * (n + 1) + [2]
    # A separate tf.function: the first would reuse its more general trace.
    batch_only = tf.function(module).get_concrete_function(
        tf.TensorSpec([None, *[3] * n, 3])
    )
    size = default_output_size(3, 2, 2, 1, padding)
    assert batch_only.output_shapes.as_list() == [None, *[size] * n, 2]
    for s in (3, 4):
        x = random_input((2, *[s] * n, 3))
        np.testing.assert_allclose(dynamic(x), module(x), rtol=1e-6)
        assert module(x).shape[1] == default_output_size(s, 2, 2, 1, padding)


def test_given_output_shape_with_unknown_batch():
    module = snt.Conv2DTranspose(2, 3, output_shape=[7, 8], stride=2)
    traced = tf.function(module).get_concrete_function(tf.TensorSpec([None, 4, 4, 3]))
    assert traced.output_shapes.as_list() == [None, 7, 8, 2]
    assert traced(tf.ones([5, 4, 4, 3])).shape == (5, 7, 8, 2)


@pytest.mark.parametrize(
    "n,name,w_shape",
    [
        (1, "conv1_d_transpose", [3, 3, 2]),
        (2, "conv2_d_transpose", [3, 3, 3, 2]),
        (3, "conv3_d_transpose", [3, 3, 3, 3, 2]),
    ],
)
def test_variables(n: int, name: str, w_shape: list[int]):
    module = CLASSES[n](3, 3)
    module(tf.ones([1, *[2] * n, 2]))
    assert [(v.name, v.shape.as_list()) for v in module.variables] == [
        (f"{name}/b:0", [3]),
        (f"{name}/w:0", w_shape),
    ]
    assert module.input_channels == 2


def test_private_attributes():
    module = snt.Conv2DTranspose(
        4, [3, 2], output_shape=(6, 4), stride=(2, 1), rate=1, padding="VALID"
    )
    assert module._output_channels == 4
    assert module._kernel_shape == [3, 2]
    assert module._output_shape == (6, 4)
    assert module._stride == (2, 1)
    assert module._rate == 1
    assert module._padding == "VALID"
    assert module._data_format == "NHWC"
    assert module._with_bias is True
    assert module._w_init is None
    assert isinstance(module._b_init, snt.initializers.Zeros)
    module(tf.ones([1, 2, 3, 5]))
    assert module._output_shape == [6, 4, 4]
    first = snt.Conv2DTranspose(4, 3, output_shape=(6, 6), stride=2, data_format="NCHW")
    first(tf.ones([1, 5, 3, 3]))
    assert first._output_shape == [4, 6, 6]


def test_default_initializer():
    module = snt.Conv2DTranspose(8, (3, 2))
    module(tf.ones([1, 4, 4, 5]))
    stddev = 1 / np.sqrt(3 * 2 * 5)  # Fan-in uses the *input* channels.
    assert isinstance(module._w_init, snt.initializers.TruncatedNormal)
    assert module._w_init.stddev == pytest.approx(stddev)
    assert np.abs(module.w.numpy()).max() <= 2 * stddev + 1e-6
    np.testing.assert_array_equal(module.b.numpy(), np.zeros(8))


def test_without_bias_and_dtype():
    module = snt.Conv1DTranspose(2, 3, with_bias=False)
    out = module(tf.ones([1, 4, 3], tf.float64))
    assert out.dtype == tf.float64
    assert [v.name for v in module.variables] == ["conv1_d_transpose/w:0"]
    assert not hasattr(module, "b") and module._b_init is None


def test_repr():
    assert (
        repr(snt.Conv2DTranspose(4, 3, stride=2, padding="VALID"))
        == "Conv2DTranspose(output_channels=4, kernel_shape=3, stride=2, "
        "padding='VALID')"
    )
    assert (
        repr(snt.Conv1DTranspose(2, 3, output_shape=[8]))
        == "Conv1DTranspose(output_channels=2, kernel_shape=3, output_shape=[8])"
    )


@pytest.mark.parametrize("n", [1, 2, 3])
def test_convnd_transpose_base(n: int):
    module = conv_transpose_lib.ConvNDTranspose(n, 2, 3, stride=2)
    assert module(tf.ones([1, *[3] * n, 1])).shape.as_list() == [1, *[6] * n, 2]
    assert module.name == "conv_nd_transpose"


def test_empty_batch():
    module = snt.Conv2DTranspose(2, 3, stride=2)
    assert module(tf.ones([0, 3, 3, 1])).shape == (0, 6, 6, 2)


# --------------------------------------------------------------------------
# Errors.


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"padding": "same"}, TypeError, "`padding` must be 'SAME' or 'VALID'"),
        ({"padding": snt.pad.causal}, TypeError, "`padding` must be 'SAME' or"),
        ({"padding": None}, TypeError, "`padding` must be 'SAME' or 'VALID'"),
        ({"output_channels": -1}, ValueError, "`output_channels` must be a positive"),
        ({"kernel_shape": [2, 2, 2]}, TypeError, "`kernel_shape` must be a scalar"),
        ({"stride": 0}, ValueError, "`stride` must be a positive"),
        ({"rate": "x"}, TypeError, "`rate` must be a positive integer or a seq"),
        ({"data_format": "NCDHW"}, ValueError, "`data_format` must be 'NHWC'"),
        ({"with_bias": "no"}, TypeError, "`with_bias` must be a bool"),
        (
            {"with_bias": False, "b_init": snt.initializers.Ones()},
            ValueError,
            "`b_init` must be None when `with_bias=False`",
        ),
        ({"w_init": "ones"}, TypeError, "`w_init` must be a callable"),
    ],
)
def test_constructor_errors(kwargs: dict[str, Any], error: type, match: str):
    args = {"output_channels": 2, "kernel_shape": 3, **kwargs}
    with pytest.raises(error, match=match) as info:
        snt.Conv2DTranspose(**args)
    bad_input.check_error(info.value, list(kwargs))


def test_output_shape_accepts_a_tensor_shape():
    module = snt.Conv2DTranspose(2, 3, output_shape=tf.TensorShape([5, 6]), stride=2)
    assert module(tf.ones([1, 3, 3, 1])).shape == (1, 5, 6, 2)


@pytest.mark.parametrize("n", [0, 4])
def test_num_spatial_dims_out_of_range(n: int):
    with pytest.raises(ValueError, match="`num_spatial_dims` must be 1, 2 or 3"):
        conv_transpose_lib.ConvNDTranspose(n, 2, 3)


def test_output_shape_that_does_not_fit_the_input():
    module = snt.Conv2DTranspose(2, 3, output_shape=[10, 10], stride=2)
    with pytest.raises(ValueError, match="`inputs` must have spatial size 5 in dim"):
        module(tf.ones([1, 3, 5, 2]))
    with pytest.raises(ValueError):
        _ = module.variables  # Nothing was created.
    module(tf.ones([1, 5, 5, 2]))
    before = bad_input.snapshot(module)
    with pytest.raises(ValueError, match="`inputs` must have spatial size 5 in dim"):
        module(tf.ones([1, 5, 7, 2]))
    bad_input.assert_unchanged(module, before)


def test_output_shape_checked_at_run_time_for_unknown_sizes():
    module = snt.Conv2DTranspose(2, 3, output_shape=[6, 6], stride=2)
    traced = tf.function(module).get_concrete_function(
        tf.TensorSpec([None, None, None, 1])
    )
    assert traced(tf.ones([1, 3, 3, 1])).shape == (1, 6, 6, 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have spatial siz"):
        traced(tf.ones([1, 4, 3, 1]))


def test_call_errors():
    module = snt.Conv2DTranspose(2, 3)
    with pytest.raises(ValueError, match="`inputs` must have rank 4"):
        module(tf.ones([1, 3, 3]))
    with pytest.raises(TypeError, match="`inputs` must have a floating point dtype"):
        module(tf.ones([1, 3, 3, 2], tf.int32))
    module(tf.ones([1, 3, 3, 2]))
    with pytest.raises(ValueError, match="`inputs` must have rank 4"):
        module(tf.ones([1, 1, 3, 3, 2]))
    with pytest.raises(ValueError, match="`inputs` must have 2 channels"):
        module(tf.ones([1, 3, 3, 4]))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        module(tf.ones([1, 3, 3, 2], tf.float16))


def test_unknown_channels():
    traced = tf.function(snt.Conv1DTranspose(2, 3))
    with pytest.raises(ValueError, match="`inputs` must have a known number of ch"):
        traced.get_concrete_function(tf.TensorSpec([None, None, None]))


# --------------------------------------------------------------------------
# Bad input fuzzing.

CTOR_ARGUMENTS = bad_input.parameter_names(snt.Conv2DTranspose)


@settings(max_examples=25, deadline=None)
@given(
    n=st.sampled_from([1, 2, 3]),
    argument=st.sampled_from(CTOR_ARGUMENTS),
    value=bad_input.junk(),
)
def test_junk_constructor_arguments(n: int, argument: str, value: Any):
    kwargs = {"output_channels": 2, "kernel_shape": 2, argument: value}
    ok, module = bad_input.outcome(lambda: CLASSES[n](**kwargs), [argument])
    if ok:
        x = tf.ones([1, *[3] * n, 2])
        bad_input.outcome(lambda: module(x), [argument, "inputs"])


@settings(max_examples=25, deadline=None)
@given(
    n=st.sampled_from([1, 2, 3]),
    first=st.booleans(),
    fixed=st.booleans(),
    variant=st.integers(0, 5),
    build_with_bad=st.booleans(),
)
def test_bad_inputs(
    n: int, first: bool, fixed: bool, variant: int, build_with_bad: bool
):
    module = CLASSES[n](
        2,
        2,
        stride=2,
        output_shape=[6] * n if fixed else None,
        data_format=CHANNELS_FIRST[n] if first else None,
    )
    x = tf.ones([1, 2, *[3] * n]) if first else tf.ones([1, *[3] * n, 2])
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
    assert module(x).shape[1 if first else -1] == 2  # Still usable.


# --------------------------------------------------------------------------
# Spellings and error classes of the original (tests/differential/).


@pytest.mark.parametrize(
    "kwargs",
    [
        {"output_channels": 4.0},
        {"output_channels": tf.constant(4, tf.int64)},
        {"kernel_shape": (3.0, np.float32(3))},
        {"stride": np.array(2)},
        {"stride": 2.0},
        {"rate": None},
        {"rate": tf.constant([1])},
        {"rate": np.array(1)},
        {"output_shape": np.array([8, 8])},
        {"output_shape": tf.constant([8, 8])},
    ],
    ids=lambda kwargs: f"{next(iter(kwargs))}={next(iter(kwargs.values()))!r}",
)
def test_spellings(kwargs: dict[str, Any]):
    x = tf.random.stateless_normal([2, 4, 4, 3], seed=[1, 2])
    ones = snt.initializers.Ones()
    args = {"output_channels": 4, "kernel_shape": 3, "stride": 2, **kwargs}
    expected = snt.Conv2DTranspose(4, 3, stride=2, w_init=ones)(x)
    actual = snt.Conv2DTranspose(**args, w_init=ones)(x)
    assert actual.shape == (2, 8, 8, 4)
    np.testing.assert_allclose(actual, expected)


@pytest.mark.parametrize("kernel_shape", [0, -3, (3, 0)])
def test_empty_kernel_is_internal_error(kernel_shape: Any):
    # oneDNN's CPU kernel failed with `InternalError` in the original.
    with pytest.raises(tf.errors.InternalError, match="`kernel_shape` must") as info:
        snt.Conv2DTranspose(2, kernel_shape)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("kwargs", [{"stride": None}, {"stride": "x"}], ids=str)
def test_malformed_stride(kwargs: dict[str, Any]):
    with pytest.raises(TypeError, match="`stride` must be") as info:
        snt.Conv2DTranspose(2, 3, **kwargs)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "output_shape,error,match",
    [
        ([4], ValueError, "`output_shape` must have length 2"),
        ([4, 4, 4], ValueError, "`output_shape` must have length"),
        (4, TypeError, "`output_shape` must be None or a sequence"),
        ("ab", TypeError, "`output_shape` must be None or a seq"),
        ([0, 3], ValueError, "`output_shape` must be a positive"),
        ([2.5, 3], TypeError, "`output_shape` must be an integer"),
        (tf.TensorShape([None, 3]), ValueError, "`output_shape` must be fully defined"),
    ],
)
def test_bad_output_shape_fails_on_the_first_call(output_shape, error, match):
    # As in the original: construction keeps it, the first call checks it.
    module = snt.Conv2DTranspose(2, 3, output_shape=output_shape)
    with pytest.raises(error, match=match) as info:
        module(tf.ones([1, 4, 4, 1]))
    bad_input.check_error(info.value, ["output_shape"])
    assert not hasattr(module, "w")


def test_output_shape_string():
    module = snt.Conv2DTranspose(2, 3, output_shape="x")
    with pytest.raises(ValueError, match="`output_shape` must be None or") as info:
        module(tf.ones([1, 4, 4, 1]))
    assert isinstance(info.value, TypeError)


def test_output_shape_not_matching_inputs_is_invalid_argument():
    module = snt.Conv2DTranspose(2, 3, output_shape=(3, 3), stride=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="spatial size 2"):
        module(tf.ones([1, 4, 4, 3]))


def test_integer_inputs_with_an_initializer():
    module = snt.Conv2DTranspose(2, 3, w_init=snt.initializers.Ones())
    y = module(tf.ones([1, 4, 4, 3], tf.int32))
    assert y.dtype == tf.int32 and y.shape == (1, 4, 4, 2)
    assert int(y.numpy()[0, 1, 1, 0]) == 27


def test_integer_inputs_3d_are_invalid_argument():
    module = snt.Conv3DTranspose(2, 3, w_init=snt.initializers.Ones())
    with pytest.raises(tf.errors.InvalidArgumentError, match="floating point"):
        module(tf.ones([1, 4, 4, 4, 3], tf.int32))


@pytest.mark.parametrize("inputs", [None, "x"])
def test_inputs_without_shape_are_attribute_errors(inputs: Any):
    with pytest.raises(AttributeError, match="`inputs` must be a tensor"):
        snt.Conv2DTranspose(2, 3)(inputs)
