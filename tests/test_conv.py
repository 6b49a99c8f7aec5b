"""Tests for `snt.Conv1D/2D/3D` and their rank-generic base `ConvND`."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src import conv as conv_lib
from sonnet._src import conv_base
from tests.conformance import bad_input

CLASSES = {1: snt.Conv1D, 2: snt.Conv2D, 3: snt.Conv3D}
CHANNELS_FIRST = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
SPATIAL = {1: (7,), 2: (6, 5), 3: (4, 5, 3)}
KERNEL = {1: (3,), 2: (3, 2), 3: (2, 3, 2)}


# --------------------------------------------------------------------------
# NumPy references (shared with the transposed and depthwise tests).


def to_channels_first(x: np.ndarray) -> np.ndarray:
    n = x.ndim - 2
    return np.transpose(x, (0, n + 1, *range(1, n + 1)))


def to_channels_last(x: np.ndarray) -> np.ndarray:
    n = x.ndim - 2
    return np.transpose(x, (0, *range(2, n + 2), 1))


def same_padding(size: int, stride: int, k_eff: int) -> tuple[int, int]:
    """TensorFlow's "SAME" padding: the odd element goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k_eff - size, 0)
    return total // 2, total - total // 2


def np_conv(
    x: np.ndarray,
    w: np.ndarray,
    stride: tuple[int, ...],
    rate: tuple[int, ...],
    padding: Any,
) -> np.ndarray:
    """Channels-last N-D convolution by explicit loops over the kernel taps.

    `x` is `[B, *spatial, C]`, `w` is `[*kernel, C, O]`; `padding` is "SAME",
    "VALID" or a list of `(before, after)` per spatial dimension.
    """
    n = x.ndim - 2
    kernel = w.shape[:n]
    k_eff = [(k - 1) * r + 1 for k, r in zip(kernel, rate)]
    if padding == "SAME":
        pads = [same_padding(*a) for a in zip(x.shape[1:-1], stride, k_eff)]
    elif padding == "VALID":
        pads = [(0, 0)] * n
    else:
        pads = list(padding)
    xp = np.pad(x.astype(np.float64), [(0, 0), *pads, (0, 0)])
    out_sizes = [
        (size - k) // s + 1 for size, k, s in zip(xp.shape[1:-1], k_eff, stride)
    ]
    y = np.zeros([x.shape[0], *out_sizes, w.shape[-1]])
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = tuple(
            slice(t * r, t * r + (o - 1) * s + 1, s)
            for t, r, o, s in zip(tap, rate, out_sizes, stride)
        )
        y += xp[(slice(None), *window)] @ w[tap].astype(np.float64)
    return y


def randomize(module: Any, seed: int = 0) -> None:
    """Gives every variable of `module` random values (biases included)."""
    rng = np.random.default_rng(seed)
    for v in module.variables:
        v.assign(rng.normal(size=v.shape).astype(v.dtype.as_numpy_dtype))


def random_input(shape: tuple[int, ...], seed: int = 1, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def cpu_supports_channels_first() -> bool:
    """Whether this TF build runs channels-first convolutions on CPU (oneDNN)."""
    try:
        tf.raw_ops.Conv2D(
            input=tf.ones([1, 1, 2, 2]),
            filter=tf.ones([1, 1, 1, 1]),
            strides=[1, 1, 1, 1],
            padding="SAME",
            data_format="NCHW",
        )
    except (tf.errors.UnimplementedError, tf.errors.InvalidArgumentError):
        return False
    return True


# --------------------------------------------------------------------------
# Numerics.

STRING_CONFIGS = [
    # padding, stride, rate
    ("SAME", 1, 1),
    ("VALID", 1, 1),
    ("SAME", 2, 1),
    ("VALID", 2, 1),
    ("SAME", 1, 2),
    ("VALID", 1, 2),
    ("same", 3, 1),
    ("valid", 3, 1),
]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("padding,stride,rate", STRING_CONFIGS)
def test_matches_numpy(n: int, padding: str, stride: int, rate: int):
    x = random_input((2, *SPATIAL[n], 2))
    module = CLASSES[n](3, KERNEL[n], stride=stride, rate=rate, padding=padding)
    module(x)
    randomize(module)
    expected = (
        np_conv(x, module.w.numpy(), (stride,) * n, (rate,) * n, padding.upper())
        + module.b.numpy()
    )
    actual = module(x).numpy()
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_per_dimension_stride_and_rate():
    x = random_input((1, 7, 6, 2))
    strided = snt.Conv2D(2, (3, 2), stride=(2, 1), padding="VALID")
    strided(x)
    randomize(strided)
    expected = np_conv(x, strided.w.numpy(), (2, 1), (1, 1), "VALID")
    np.testing.assert_allclose(
        strided(x).numpy(), expected + strided.b.numpy(), rtol=1e-5, atol=1e-5
    )
    dilated = snt.Conv2D(2, 3, rate=(1, 2))
    dilated(x)
    randomize(dilated)
    expected = np_conv(x, dilated.w.numpy(), (1, 1), (1, 2), "SAME")
    np.testing.assert_allclose(
        dilated(x).numpy(), expected + dilated.b.numpy(), rtol=1e-5, atol=1e-5
    )


PADDING_FUNCTIONS = [
    snt.pad.causal,
    snt.pad.full,
    snt.pad.reverse_causal,
    snt.pad.same,
    snt.pad.valid,
]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("fn", PADDING_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("stride,rate", [(1, 1), (2, 1), (1, 2)])
def test_padding_functions_match_numpy(n: int, fn: Any, stride: int, rate: int):
    x = random_input((2, *SPATIAL[n], 2))
    module = CLASSES[n](3, KERNEL[n], stride=stride, rate=rate, padding=fn)
    module(x)
    randomize(module)
    pads = [fn((k - 1) * rate + 1) for k in KERNEL[n]]
    expected = np_conv(x, module.w.numpy(), (stride,) * n, (rate,) * n, pads)
    np.testing.assert_allclose(
        module(x).numpy(), expected + module.b.numpy(), rtol=1e-5, atol=1e-5
    )
    assert module.conv_padding == "VALID"
    assert module.padding_func is fn


def test_one_padding_function_per_dimension():
    x = random_input((1, 5, 4, 2))
    module = snt.Conv2D(2, 3, padding=[snt.pad.causal, snt.pad.full], rate=(2, 1))
    module(x)
    randomize(module)
    expected = np_conv(x, module.w.numpy(), (1, 1), (2, 1), [(4, 0), (2, 2)])
    np.testing.assert_allclose(
        module(x).numpy(), expected + module.b.numpy(), rtol=1e-5, atol=1e-5
    )
    assert module(x).shape == (1, 5, 6, 2)  # Full padding: 4 + 3 - 1.


def test_pad_same_equals_string_same_at_stride_1():
    x = random_input((2, 6, 7, 3))
    a = snt.Conv2D(4, (4, 3), rate=(1, 2), padding=snt.pad.same)
    b = snt.Conv2D(4, (4, 3), rate=(1, 2), padding="SAME")
    a(x)
    b(x)
    randomize(a)
    randomize(b)
    np.testing.assert_allclose(a(x).numpy(), b(x).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"stride": 2, "padding": "VALID"},
        {"rate": 2, "padding": snt.pad.causal},
        {"with_bias": False},
    ],
    ids=["same", "stride2-valid", "dilated-causal", "nobias"],
)
def test_channels_first_matches_channels_last(n: int, kwargs: dict[str, Any]):
    x = random_input((2, *SPATIAL[n], 3))
    last = CLASSES[n](4, KERNEL[n], **kwargs)
    first = CLASSES[n](4, KERNEL[n], data_format=CHANNELS_FIRST[n], **kwargs)
    last(x)
    first(to_channels_first(x))
    randomize(last)
    for a, b in zip(first.variables, last.variables):
        a.assign(b)
    expected = last(x).numpy()
    actual = first(to_channels_first(x)).numpy()
    np.testing.assert_allclose(to_channels_last(actual), expected, rtol=1e-5, atol=1e-5)
    # Graphs transpose around the op on every machine; eager calls run the
    # op channels-first where the variables are on an accelerator.
    assert first._graph_layout.transpose
    assert (first._eager_layout is None) == (not conv_base.on_accelerator(first.w))


def test_channels_first_and_last_aliases():
    x = random_input((1, 4, 4, 2))
    a = snt.Conv2D(2, 3, data_format="channels_last")
    b = snt.Conv2D(2, 3, data_format="channels_first")
    a(x)
    b(to_channels_first(x))
    b.w.assign(a.w)
    np.testing.assert_allclose(
        to_channels_last(b(to_channels_first(x)).numpy()), a(x).numpy(), atol=1e-6
    )
    assert b.data_format == "channels_first"


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("rate", [1, 2])
def test_native_channels_first_path(n: int, rate: int, monkeypatch):
    """The GPU code path (no transposes), run where the CPU can execute it."""
    if not cpu_supports_channels_first():
        pytest.skip("this TensorFlow build has no channels-first CPU kernels")
    monkeypatch.setattr(conv_base, "on_accelerator", lambda v: True)
    x = random_input((2, *SPATIAL[n], 3))
    last = CLASSES[n](4, KERNEL[n], rate=rate)
    first = CLASSES[n](4, KERNEL[n], rate=rate, data_format=CHANNELS_FIRST[n])
    last(x)
    first(to_channels_first(x))
    assert first._eager_layout is not None and not first._eager_layout.transpose
    randomize(last)
    for a, b in zip(first.variables, last.variables):
        a.assign(b)
    actual = to_channels_last(first(to_channels_first(x)).numpy())
    np.testing.assert_allclose(actual, last(x).numpy(), rtol=1e-5, atol=1e-5)


def test_on_accelerator_is_false_without_gpu():
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        pytest.skip("machine has an accelerator")
    assert not conv_base.on_accelerator(tf.Variable(1.0))


# --------------------------------------------------------------------------
# Layout decisions (`conv_base.ConvBase`, shared by every convolution): a
# graph never depends on the machine that built the module.

LAYOUT_CASES = {
    "conv1d-ncw": (lambda: snt.Conv1D(4, 3, data_format="NCW"), [2, 3, 8]),
    "conv2d-nchw-causal": (
        lambda: snt.Conv2D(4, 3, padding=snt.pad.causal, data_format="NCHW"),
        [2, 3, 6, 6],
    ),
    "conv3d-ncdhw-dilated": (
        lambda: snt.Conv3D(2, 2, rate=2, data_format="NCDHW"),
        [1, 3, 5, 5, 5],
    ),
    "transpose-nhwc-dilated": (
        lambda: snt.Conv2DTranspose(4, 3, rate=2),
        [2, 5, 5, 3],
    ),
    "transpose-ncw": (
        lambda: snt.Conv1DTranspose(4, 3, stride=2, data_format="NCW"),
        [2, 3, 5],
    ),
    "depthwise-nchw": (
        lambda: snt.DepthwiseConv2D(3, 2, data_format="NCHW"),
        [2, 3, 6, 6],
    ),
}


def built_as_on_an_accelerator(
    factory: Any, shape: list[int], monkeypatch: pytest.MonkeyPatch
) -> Any:
    """A module built as on a GPU machine (its variables on the GPU).

    It is built while tracing, since eagerly it would run its native layout,
    which TensorFlow's CPU kernels may not implement.
    """
    with monkeypatch.context() as patch:
        patch.setattr(conv_base, "on_accelerator", lambda v: True)
        module = factory()
        tf.function(module).get_concrete_function(tf.TensorSpec(shape))
    return module


def graph_ops(module: Any, shape: list[int]) -> list[tuple[str, str]]:
    """The ops (and their layout attributes) of a fresh trace of `module`."""
    graph = tf.function(module).get_concrete_function(tf.TensorSpec(shape)).graph
    keys = ("data_format", "strides", "dilations", "padding")
    return [
        (node.op, " ".join(f"{k}={node.attr[k]}" for k in keys if k in node.attr))
        for node in graph.as_graph_def().node
    ]


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_graphs_do_not_depend_on_the_machine_that_built_the_module(
    case: str, monkeypatch: pytest.MonkeyPatch
):
    factory, shape = LAYOUT_CASES[case]
    here = factory()
    here(tf.ones(shape))
    elsewhere = built_as_on_an_accelerator(factory, shape, monkeypatch)
    # Eager calls there would run the op in its native layout...
    layout = elsewhere._eager_layout
    assert layout is not None and not layout.transpose and not layout.dilate_kernel
    assert (here._eager_layout is None) == (not conv_base.on_accelerator(here.w))
    # ... but graphs, traced there or here, are the same portable ones: ops
    # channels-last (between transposes), no dilated transposed convolution.
    ops = graph_ops(elsewhere, shape)
    assert ops == graph_ops(here, shape)
    assert not any("NC" in attrs for _, attrs in ops)
    assert ("Transpose" in dict(ops)) == elsewhere._channels_first


@pytest.mark.parametrize(
    "case", ["conv2d-nchw-causal", "transpose-nhwc-dilated", "depthwise-nchw"]
)
def test_saved_model_of_an_accelerator_built_module_runs_on_cpu(
    case: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
):
    factory, shape = LAYOUT_CASES[case]
    module = built_as_on_an_accelerator(factory, shape, monkeypatch)
    randomize(module)
    x = tf.constant(random_input(tuple(shape)))
    reference = factory()
    reference(x)
    for a, b in zip(reference.variables, module.variables):
        a.assign(b)
    holder = tf.Module()
    holder.module = module
    holder.call = tf.function(
        lambda inputs: module(inputs), input_signature=[tf.TensorSpec(shape)]
    )
    tf.saved_model.save(holder, str(tmp_path))
    loaded: Any = tf.saved_model.load(str(tmp_path))
    with tf.device("CPU:0"):
        actual = loaded.call(x)
    np.testing.assert_allclose(actual, reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_gradients_match_tf_nn_convolution(data_format: str):
    x = tf.constant(random_input((2, 5, 6, 3)))
    module = snt.Conv2D(4, 3, stride=2, data_format=data_format)
    xin = x if data_format == "NHWC" else tf.transpose(x, [0, 3, 1, 2])
    module(xin)
    randomize(module)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(xin)
        tape.watch(x)
        ours = module(xin)
        if data_format == "NCHW":
            ours = tf.transpose(ours, [0, 2, 3, 1])
        loss = tf.reduce_sum(ours**2)
        ref = tf.nn.bias_add(
            tf.nn.convolution(x, module.w, strides=2, padding="SAME"), module.b
        )
        ref_loss = tf.reduce_sum(ref**2)
    got = tape.gradient(loss, [xin, module.w, module.b])
    want = tape.gradient(ref_loss, [x, module.w, module.b])
    if data_format == "NCHW":
        got[0] = tf.transpose(got[0], [0, 2, 3, 1])
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------
# Shapes, variables, attributes.


@pytest.mark.parametrize(
    "padding,stride,rate,expected",
    [
        ("SAME", 2, 1, [1, 3, 3, 4]),
        ("VALID", 2, 1, [1, 2, 2, 4]),
        ("VALID", 1, 2, [1, 1, 1, 4]),
        ("SAME", 1, 2, [1, 5, 5, 4]),
    ],
)
def test_output_shape(padding: str, stride: int, rate: int, expected: list[int]):
    module = snt.Conv2D(4, 3, stride=stride, rate=rate, padding=padding)
    assert module(tf.ones([1, 5, 5, 2])).shape.as_list() == expected


@pytest.mark.parametrize("n", [1, 2, 3])
def test_unknown_batch_and_spatial_dims(n: int):
    module = CLASSES[n](2, 2, stride=2)
    spec = tf.TensorSpec([None] * (n + 1) + [3])
    traced = tf.function(module).get_concrete_function(spec)
    assert traced.output_shapes.as_list() == [None] * (n + 1) + [2]
    for size in (4, 7):
        x = random_input((3, *[size] * n, 3))
        np.testing.assert_allclose(traced(x), module(x), rtol=1e-6)
        assert module(x).shape[1] == -(-size // 2)


@pytest.mark.parametrize(
    "n,name,w_shape",
    [
        (1, "conv1_d", [3, 2, 3]),
        (2, "conv2_d", [3, 3, 2, 3]),
        (3, "conv3_d", [3, 3, 3, 2, 3]),
    ],
)
def test_variables(n: int, name: str, w_shape: list[int]):
    module = CLASSES[n](3, 3)
    module(tf.ones([1, *[2] * n, 2]))
    assert [(v.name, v.shape.as_list()) for v in module.variables] == [
        (f"{name}/b:0", [3]),
        (f"{name}/w:0", w_shape),
    ]
    assert all(v.trainable for v in module.variables)
    assert module.input_channels == 2


def test_variables_follow_input_dtype():
    module = snt.Conv1D(2, 3)
    out = module(tf.ones([1, 4, 2], tf.float64))
    assert out.dtype == tf.float64
    assert {v.dtype for v in module.variables} == {tf.float64}
    half = snt.Conv2D(2, 3)
    assert half(tf.ones([1, 4, 4, 2], tf.float16)).dtype == tf.float16


def test_without_bias():
    module = snt.Conv2D(3, 3, with_bias=False)
    x = random_input((1, 4, 4, 2))
    out = module(x)
    assert [v.name for v in module.variables] == ["conv2_d/w:0"]
    assert not hasattr(module, "b") and module.b_init is None
    expected = np_conv(x, module.w.numpy(), (1, 1), (1, 1), "SAME")
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_default_initializers():
    module = snt.Conv2D(8, (3, 2))
    assert module.w_init is None
    module(tf.ones([1, 4, 4, 5]))
    assert isinstance(module.w_init, snt.initializers.TruncatedNormal)
    stddev = 1 / np.sqrt(3 * 2 * 5)
    assert module.w_init.stddev == pytest.approx(stddev)
    assert np.abs(module.w.numpy()).max() <= 2 * stddev + 1e-6
    assert isinstance(module.b_init, snt.initializers.Zeros)
    np.testing.assert_array_equal(module.b.numpy(), np.zeros(8))


def test_custom_initializers():
    module = snt.Conv1D(
        1,
        3,
        padding="VALID",
        w_init=snt.initializers.Ones(),
        b_init=snt.initializers.Constant(2.0),
    )
    out = module(tf.constant([[[1.0], [2.0], [3.0], [4.0]]]))
    np.testing.assert_allclose(out.numpy()[0, :, 0], [8.0, 11.0])


def test_attributes_are_stored_as_given():
    fn = [snt.pad.causal, snt.pad.full]
    module = snt.Conv2D(4, [3, 2], stride=(1, 2), rate=1, padding=fn, name="c")
    assert module.output_channels == 4
    assert module.kernel_shape == [3, 2]
    assert module.stride == (1, 2)
    assert module.rate == 1
    assert list(module.padding_func) == fn
    assert module.conv_padding == "VALID"
    assert module.data_format == "NHWC"
    assert module.with_bias is True
    assert module._padding == ((0, 0), (2, 0), (1, 1), (0, 0))
    assert snt.Conv2D(4, 3, padding="same").conv_padding == "SAME"
    assert snt.Conv1D(4, 3, padding="Valid").padding_func is None


def test_repr():
    assert (
        repr(
            snt.Conv2D(
                output_channels=16, kernel_shape=(3, 3), stride=2, padding="VALID"
            )
        )
        == "Conv2D(output_channels=16, kernel_shape=(3, 3), stride=2, padding='VALID')"
    )
    assert repr(snt.Conv1D(3, 3)) == "Conv1D(output_channels=3, kernel_shape=3)"
    assert (
        repr(snt.Conv3D(2, 1, data_format="NCDHW", name="c3"))
        == "Conv3D(output_channels=2, kernel_shape=1, data_format='NCDHW', name='c3')"
    )


@pytest.mark.parametrize("n", [1, 2, 3])
def test_convnd_base(n: int):
    module = conv_lib.ConvND(n, 2, 3)
    out = module(tf.ones([1, *[4] * n, 3]))
    assert out.shape.as_list() == [1, *[4] * n, 2]
    assert module.name == "conv_nd"
    assert module.data_format is None


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("first", [False, True])
@pytest.mark.parametrize("rate", [1, 2])
def test_empty_batch(n: int, first: bool, rate: int):
    module = CLASSES[n](
        4,
        2,
        rate=rate,
        padding="VALID",
        data_format=CHANNELS_FIRST[n] if first else None,
    )
    spatial = [5] * n
    shape = [0, 3, *spatial] if first else [0, *spatial, 3]
    expected = [0, 4, *[5 - rate] * n] if first else [0, *[5 - rate] * n, 4]
    x = tf.zeros(shape)
    with tf.GradientTape() as tape:
        y = module(x)
        loss = tf.reduce_sum(y)
    assert y.shape.as_list() == expected
    grads = tape.gradient(loss, [module.w, module.b])
    for g, v in zip(grads, [module.w, module.b]):
        assert g is not None
        np.testing.assert_array_equal(g.numpy(), np.zeros(v.shape))
    static = tf.function(module)(x)
    assert static.shape.as_list() == expected
    batch_agnostic = tf.function(module).get_concrete_function(
        tf.TensorSpec([None, *shape[1:]])
    )
    assert batch_agnostic(tf.ones([2, *shape[1:]])).shape[0] == 2


def test_empty_spatial_dims_with_same_padding():
    module = snt.Conv2D(3, 3, stride=2)
    assert module(tf.ones([2, 0, 5, 2])).shape == (2, 0, 3, 3)
    with pytest.raises(ValueError, match="`inputs` must have 2 channels"):
        module(tf.ones([2, 0, 5, 4]))


def test_works_inside_tf_function_and_creates_variables_there():
    module = snt.Conv2D(2, 3, data_format="NCHW")
    x = random_input((2, 3, 4, 4))

    @tf.function
    def f(x):
        return module(x)

    traced = f(x)
    np.testing.assert_allclose(traced.numpy(), module(x).numpy(), rtol=1e-6)
    assert [v.name for v in module.variables] == ["conv2_d/b:0", "conv2_d/w:0"]


# --------------------------------------------------------------------------
# Errors.


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"output_channels": -1}, ValueError, "`output_channels` must be a non-neg"),
        ({"output_channels": 2.5}, TypeError, "`output_channels` must be an integer"),
        ({"kernel_shape": 0}, ValueError, "`kernel_shape` must be a positive"),
        ({"kernel_shape": [1, 2, 3]}, TypeError, "`kernel_shape` must be a scalar"),
        ({"kernel_shape": "ab"}, TypeError, "`kernel_shape` must be a positive"),
        ({"stride": 0}, ValueError, "`stride` must be a positive"),
        ({"stride": (1, 0)}, ValueError, "`stride` must be a positive"),
        ({"rate": -1}, ValueError, "`rate` must be a positive"),
        ({"rate": "ab"}, TypeError, "`rate` must be a positive"),
        ({"stride": 2, "rate": 2}, ValueError, "`rate` must be 1 when `stride`"),
        ({"padding": "full"}, ValueError, "`padding` must be 'SAME', 'VALID'"),
        ({"padding": "EXPLICIT"}, ValueError, "`padding` must be 'SAME', 'VALID'"),
        ({"padding": b"SAME"}, TypeError, "`padding` must be 'SAME', 'VALID'"),
        ({"padding": 3}, TypeError, "`padding` must be 'SAME', 'VALID'"),
        ({"padding": [snt.pad.same] * 3}, TypeError, "`padding` must be a scalar"),
        ({"padding": ["SAME"]}, TypeError, "`padding` must be a padding function"),
        ({"padding": lambda k: [k]}, ValueError, "two non-negative integers"),
        ({"padding": lambda k: [-1, 0]}, ValueError, "two non-negative integers"),
        ({"padding": lambda k: [0.5, 0]}, ValueError, "two non-negative integers"),
        ({"data_format": "NCW"}, ValueError, "`data_format` must be 'NHWC'"),
        ({"data_format": "NDHWC"}, ValueError, "`data_format` must be 'NHWC'"),
        ({"data_format": "nhwc"}, ValueError, "`data_format` must be 'NHWC'"),
        ({"data_format": 4}, TypeError, "`data_format` must be 'NHWC'"),
        ({"with_bias": "yes"}, TypeError, "`with_bias` must be a bool"),
        (
            {"with_bias": False, "b_init": snt.initializers.Zeros()},
            ValueError,
            "`b_init` must be None when `with_bias=False`",
        ),
        ({"w_init": 1.0}, TypeError, "`w_init` must be a callable"),
        ({"b_init": "zeros"}, TypeError, "`b_init` must be a callable"),
        ({"name": "a b"}, ValueError, "`name` must be a valid Python identifier"),
    ],
)
def test_constructor_errors(kwargs: dict[str, Any], error: type, match: str):
    args = {"output_channels": 2, "kernel_shape": (3, 3), **kwargs}
    with pytest.raises(error, match=match) as info:
        snt.Conv2D(**args)
    bad_input.check_error(info.value, [next(iter(kwargs))] + list(kwargs))


@pytest.mark.parametrize("n", [0, 4, -1])
def test_num_spatial_dims_out_of_range(n: int):
    with pytest.raises(ValueError, match="`num_spatial_dims` must be"):
        conv_lib.ConvND(n, 2, 3)


def test_num_spatial_dims_type():
    with pytest.raises(TypeError, match="`num_spatial_dims` must be an integer"):
        conv_lib.ConvND(2.0, 2, 3)


def test_conv1d_rejects_two_d_format():
    with pytest.raises(ValueError, match="'NWC'.*'NCW'.*Received: 'NHWC'"):
        snt.Conv1D(2, 3, data_format="NHWC")


def test_wrong_rank_on_first_call():
    module = snt.Conv2D(2, 3)
    with pytest.raises(ValueError, match=r"`inputs` must have rank 4.*\(1, 4, 2\)"):
        module(tf.ones([1, 4, 2]))
    with pytest.raises(ValueError):
        _ = module.variables  # Nothing was created.
    assert module(tf.ones([1, 4, 4, 2])).shape == (1, 4, 4, 2)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_wrong_rank_after_build(data_format: str):
    module = snt.Conv2D(2, 3, data_format=data_format)
    module(tf.ones([1, 4, 4, 4]))
    for shape in ([4, 4, 4], [1, 1, 4, 4, 4]):
        with pytest.raises(ValueError, match="`inputs` must have rank 4"):
            module(tf.ones(shape))


def test_unknown_channels():
    module = snt.Conv2D(2, 3)
    spec = tf.TensorSpec([None, None, None, None])
    with pytest.raises(ValueError, match="`inputs` must have a known number of chan"):
        tf.function(module).get_concrete_function(spec)


def test_unknown_rank():
    module = snt.Conv2D(2, 3)
    with pytest.raises(ValueError, match="`inputs` must have rank 4.*unknown rank"):
        tf.function(module).get_concrete_function(tf.TensorSpec(None))


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("first", [False, True])
def test_changed_channels_after_build(n: int, first: bool):
    module = CLASSES[n](2, 2, data_format=CHANNELS_FIRST[n] if first else None)
    shape = [1, 3, *[4] * n] if first else [1, *[4] * n, 3]
    module(tf.ones(shape))
    before = bad_input.snapshot(module)
    shape[1 if first else -1] = 5
    with pytest.raises(ValueError, match="`inputs` must have 3 channels"):
        module(tf.ones(shape))
    bad_input.assert_unchanged(module, before)


def test_changed_channels_while_tracing():
    module = snt.Conv2D(2, 3)
    module(tf.ones([1, 4, 4, 3]))
    with pytest.raises(ValueError, match="`inputs` must have 3 channels"):
        tf.function(module).get_concrete_function(tf.TensorSpec([None, 4, 4, 5]))


def test_non_float_inputs():
    module = snt.Conv2D(2, 3)
    with pytest.raises(TypeError, match="`inputs` must have a floating point dtype"):
        module(tf.ones([1, 4, 4, 3], tf.int32))
    module(tf.ones([1, 4, 4, 3]))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        module(tf.ones([1, 4, 4, 3], tf.float64))


@pytest.mark.parametrize(
    "kwargs,height",
    [
        ({}, 1),  # TF would report a negative output size.
        ({}, 2),  # An empty output: oneDNN kernels return a wrong shape here.
        ({"rate": 2}, 4),
        ({"data_format": "NCHW"}, 2),
    ],
)
def test_valid_input_smaller_than_kernel(kwargs: dict[str, Any], height: int):
    module = snt.Conv2D(2, 3, padding=kwargs.pop("padding", "VALID"), **kwargs)
    first = kwargs.get("data_format") == "NCHW"
    shape = [1, 3, 8, 8] if first else [1, 8, 8, 3]
    module(tf.ones(shape))
    shape[2 if first else 1] = height
    with pytest.raises(ValueError, match="`inputs` must have size >= .* in spatial"):
        module(tf.ones(shape))


def test_causal_padding_accepts_any_size():
    module = snt.Conv1D(2, 3, rate=2, padding=snt.pad.causal)
    assert module(tf.ones([1, 1, 3])).shape == (1, 1, 2)
    assert module(tf.ones([1, 0, 3])).shape == (1, 0, 2)


def test_valid_size_check_for_unknown_sizes_runs_in_graph():
    module = snt.Conv2D(2, 3, padding="VALID")
    traced = tf.function(module).get_concrete_function(
        tf.TensorSpec([None, None, None, 3])
    )
    assert traced(tf.ones([1, 3, 3, 3])).shape == (1, 1, 1, 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have size >= 3"):
        traced(tf.ones([1, 2, 3, 3]))


def test_unexplained_op_errors_name_the_inputs():
    error = conv_base.call_error(
        tf.ones([1, 4, 4, 3]),
        RuntimeError("first line\nsecond line"),
        rank=4,
        channel_index=-1,
        input_channels=3,
        dtype=tf.float32,
    )
    assert isinstance(error, ValueError)
    assert "`inputs` cannot be convolved by this module (first line)" in str(error)
    bad_input.check_error(error, ["inputs"])


def test_non_tensor_inputs_are_converted():
    module = snt.Conv1D(2, 3)
    assert module(np.ones([1, 4, 2], np.float32)).shape == (1, 4, 2)
    with pytest.raises(TypeError, match="`inputs` must be convertible to a tensor"):
        module(object())


# --------------------------------------------------------------------------
# Bad input fuzzing.

CTOR_ARGUMENTS = bad_input.parameter_names(snt.Conv2D)


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
        ok, out = bad_input.outcome(lambda: module(x), [argument, "inputs"])
        if ok:
            assert out.shape[-1] == module.output_channels


@settings(max_examples=25, deadline=None)
@given(
    n=st.sampled_from([1, 2, 3]),
    first=st.booleans(),
    padding=st.sampled_from(["SAME", "VALID", snt.pad.causal]),
    variant=st.integers(0, 5),
    build_with_bad=st.booleans(),
)
def test_bad_inputs(
    n: int, first: bool, padding: Any, variant: int, build_with_bad: bool
):
    module = CLASSES[n](
        2, 2, padding=padding, data_format=CHANNELS_FIRST[n] if first else None
    )
    x = tf.ones([1, *[3] * n, 2])
    if first:
        x = tf.ones([1, 2, *[3] * n])
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
    channel_axis = 1 if first else -1
    assert module(x).shape[channel_axis] == 2  # Still usable.


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_zero_input_channels_rejected(data_format):
    shape = [1, 3, 3, 0] if data_format == "NHWC" else [1, 0, 3, 3]
    conv = snt.Conv2D(2, 3, data_format=data_format)
    with pytest.raises(
        ValueError, match=r"`inputs` must have at least one channel.*Received"
    ):
        conv(tf.zeros(shape))


@pytest.mark.parametrize("traced", [False, True])
def test_inputs_unlike_the_first_are_invalid_argument_errors(traced):
    # The original's convolution op raised InvalidArgumentError for these.
    conv = snt.Conv2D(3, 3)
    conv(tf.ones([1, 5, 5, 2]))
    call = tf.function(conv) if traced else conv
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have 2 channels"):
        call(tf.ones([1, 5, 5, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        call(tf.ones([1, 5, 5, 2], tf.float64))
    assert isinstance(info.value, TypeError)


def test_sizes_as_scalar_tensors_and_numpy_integers():
    conv = snt.Conv2D(tf.constant(3), [tf.constant(3), np.int64(2)], stride=np.int32(1))
    assert conv(tf.ones([1, 5, 5, 2])).shape == [1, 5, 5, 3]
    assert conv.w.shape == [3, 2, 2, 3]


# --------------------------------------------------------------------------
# Spellings the original accepted (see tests/differential/allowed_conv.py).


@pytest.mark.parametrize(
    "kwargs",
    [
        {"output_channels": 4.0},
        {"output_channels": np.float32(4)},
        {"output_channels": tf.constant(4.0)},
        {"kernel_shape": 3.0},
        {"kernel_shape": np.float32(3)},
        {"kernel_shape": tf.constant(3.0)},
        {"kernel_shape": (3.0, 3.0)},
        {"stride": np.array([2, 2])},
        {"stride": tf.constant([2, 2])},
        {"stride": tf.TensorShape([2, 2])},
        {"stride": tf.constant([2])},
        {"stride": np.array(2)},
        {"stride": tf.constant(2, tf.int64)},
        {"stride": 2.0},
        {"stride": tf.constant(2.0)},
    ],
    ids=lambda kwargs: f"{next(iter(kwargs))}={next(iter(kwargs.values()))!r}",
)
def test_size_spellings(kwargs: dict[str, Any]):
    x = tf.random.stateless_normal([2, 9, 9, 3], seed=[1, 2])
    ones = snt.initializers.Ones()
    args = {"output_channels": 4, "kernel_shape": 3, "stride": 2, **kwargs}
    expected = snt.Conv2D(4, 3, stride=2, w_init=ones)(x)
    np.testing.assert_allclose(snt.Conv2D(**args, w_init=ones)(x), expected)


@pytest.mark.parametrize(
    "rate", [np.array([2, 2]), tf.constant([2]), np.array(2), 2.0, tf.constant(2.0)]
)
def test_rate_spellings(rate: Any):
    x = tf.random.stateless_normal([1, 9, 9, 2], seed=[1, 2])
    ones = snt.initializers.Ones()
    expected = snt.Conv2D(3, 3, rate=2, w_init=ones)(x)
    np.testing.assert_allclose(snt.Conv2D(3, 3, rate=rate, w_init=ones)(x), expected)


def test_stride_and_rate_none_mean_one():
    x = tf.random.stateless_normal([1, 6, 6, 2], seed=[1, 2])
    ones = snt.initializers.Ones()
    expected = snt.Conv2D(3, 3, w_init=ones)(x)
    actual = snt.Conv2D(3, 3, stride=None, rate=None, w_init=ones)(x)
    np.testing.assert_allclose(actual, expected)


def test_padding_none_means_valid():
    x = tf.random.stateless_normal([1, 6, 6, 2], seed=[1, 2])
    ones = snt.initializers.Ones()
    expected = snt.Conv2D(3, 3, padding="VALID", w_init=ones)(x)
    actual = snt.Conv2D(3, 3, padding=None, w_init=ones)(x)
    assert actual.shape == (1, 4, 4, 3)
    np.testing.assert_allclose(actual, expected)


@pytest.mark.parametrize(
    "cls,shape", [(snt.Conv1D, [2, 5, 3]), (snt.Conv2D, [2, 5, 5, 3])]
)
def test_zero_output_channels(cls: Any, shape: list[int]):
    y = cls(0, 3)(tf.ones(shape))
    assert y.shape == (*shape[:-1], 0)


def test_zero_output_channels_3d():
    # The original's Conv3D op refused an empty filter.
    with pytest.raises(tf.errors.InvalidArgumentError, match="`output_channels`"):
        snt.Conv3D(0, 3)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_shape": "x"},
        {"stride": "x"},
        {"rate": "x"},
        {"stride": (2, 2, 1)},
        {"rate": (2, 2, 1)},
        {"kernel_shape": None},
    ],
    ids=str,
)
def test_malformed_sizes_are_type_and_value_errors(kwargs: dict[str, Any]):
    # The original raised `TypeError` or `ValueError` depending on the path.
    args = {"output_channels": 2, "kernel_shape": 3, **kwargs}
    with pytest.raises(TypeError, match=f"`{next(iter(kwargs))}` must") as info:
        snt.Conv2D(**args)
    assert isinstance(info.value, ValueError)


def test_malformed_sizes_too_short():
    with pytest.raises(ValueError, match="`stride` must be a scalar or a sequence"):
        snt.Conv3D(2, 3, stride=(2, 2))


@pytest.mark.parametrize("padding", ["bogus", ""])
def test_bad_padding_string_is_invalid_argument(padding: str):
    with pytest.raises(tf.errors.InvalidArgumentError, match="`padding` must be"):
        snt.Conv2D(2, 3, padding=padding)


@pytest.mark.parametrize("cls,rank", [(snt.Conv1D, 3), (snt.Conv2D, 4)])
def test_integer_inputs_with_an_initializer(cls: Any, rank: int):
    module = cls(2, 3, w_init=snt.initializers.Ones())
    x = tf.ones([1] + [4] * (rank - 2) + [3], tf.int32)
    y = module(x)
    assert y.dtype == tf.int32
    expected = module.w.shape.num_elements() // 2  # A full window of ones.
    assert int(y.numpy().max()) == expected


def test_integer_inputs_3d_are_invalid_argument():
    module = snt.Conv3D(2, 3, w_init=snt.initializers.Ones())
    with pytest.raises(tf.errors.InvalidArgumentError, match="floating point"):
        module(tf.ones([1, 4, 4, 4, 3], tf.int32))


def test_integer_inputs_need_an_initializer():
    with pytest.raises(ValueError, match="or give a `w_init`") as info:
        snt.Conv2D(2, 3)(tf.ones([1, 4, 4, 3], tf.int32))
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("inputs", [None, "x"])
def test_inputs_without_shape_are_attribute_errors(inputs: Any):
    # The original read `inputs.shape`.
    with pytest.raises(AttributeError, match="`inputs` must be a tensor") as info:
        snt.Conv2D(2, 3)(inputs)
    assert isinstance(info.value, TypeError)


def test_list_inputs():
    x = tf.random.stateless_normal([1, 4, 4, 2], seed=[1, 2])
    module = snt.Conv2D(2, 3)
    np.testing.assert_allclose(module(x.numpy().tolist()), module(x))


@pytest.mark.parametrize(
    ("data_format", "shape", "spec"),
    [
        ("NHWC", [2, 5, 6, 7], [2, 5, 6, 7]),
        ("NHWC", [2, 5, 6, 7], [None, None, None, 7]),
        ("NCHW", [2, 7, 5, 6], [None, 7, 5, 6]),
    ],
)
def test_pointwise_conv2d_runs_as_a_matmul_in_graphs(data_format, shape, spec):
    conv = snt.Conv2D(4, 1, data_format=data_format)
    x = tf.random.normal(shape, seed=3)
    conv(x)

    def loss_and_grads(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.square(conv(x)))
        return conv(x), tape.gradient(loss, [x, conv.w, conv.b])

    expected = loss_and_grads(x)  # Eager: the Conv2D kernel.
    step = tf.function(loss_and_grads)
    graph = step.get_concrete_function(tf.TensorSpec(spec)).graph
    types = {op.type for op in graph.get_operations()}
    assert "MatMul" in types and "Conv2D" not in types
    actual = step(x)
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5, atol=1e-5)
    for a, e in zip(actual[1], expected[1], strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4)
