"""Tests for `snt.LayerNorm` and `snt.InstanceNorm`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src import axis_norm
from tests.conformance import bad_input

EPS = 1e-5


def _data(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 3.0 + 1.0).astype(dtype)


def _normalize(x, axes):
    mean = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS)


@pytest.mark.parametrize(
    "axis, axes",
    [
        (-1, (3,)),
        (3, (3,)),
        ([1, 2], (1, 2)),
        ((2, -1), (2, 3)),
        (slice(1, None), (1, 2, 3)),
        (slice(1, -1), (1, 2)),
        (np.int64(1), (1,)),
        (range(1, 3), (1, 2)),
    ],
)
def test_layer_norm_axes(axis, axes):
    x = _data([2, 3, 4, 5])
    ln = snt.LayerNorm(axis, create_scale=False, create_offset=False)
    np.testing.assert_allclose(ln(x), _normalize(x, axes), rtol=1e-4, atol=1e-5)


def test_layer_norm_scale_and_offset():
    x = _data([2, 3, 4])
    ln = snt.LayerNorm(
        -1,
        create_scale=True,
        create_offset=True,
        scale_init=snt.initializers.Constant(2.0),
        offset_init=snt.initializers.Constant(0.5),
    )
    y = ln(x)
    np.testing.assert_allclose(y, _normalize(x, (2,)) * 2 + 0.5, rtol=1e-4, atol=1e-5)
    assert [(v.name, v.shape.as_list(), v.trainable) for v in ln.variables] == [
        ("layer_norm/offset:0", [4], True),
        ("layer_norm/scale:0", [4], True),
    ]


def test_layer_norm_call_time_parameters():
    x = _data([2, 3, 4])
    ln = snt.LayerNorm(1, create_scale=False, create_offset=False)
    scale = _data([4], seed=1)
    offset = _data([4], seed=2)
    y = ln(x, scale=scale, offset=offset)
    np.testing.assert_allclose(
        y, _normalize(x, (1,)) * scale + offset, rtol=1e-4, atol=1e-4
    )
    assert ln.scale is None and ln.offset is None
    with pytest.raises(ValueError, match="does not currently contain any variables"):
        ln.variables  # noqa: B018 - the property raises when empty


def test_layer_norm_channels_first_params():
    ln = snt.LayerNorm(slice(1, None), True, True, data_format="NCHW")
    x = _data([2, 3, 4, 5])
    y = ln(x)
    assert ln.scale.shape == [3, 1, 1] and ln.offset.shape == [3, 1, 1]
    np.testing.assert_allclose(y, _normalize(x, (1, 2, 3)), rtol=1e-4, atol=1e-5)


def test_layer_norm_other_dims_may_change():
    ln = snt.LayerNorm(1, True, True)
    ln(_data([2, 3, 4]))
    x = _data([5, 7, 4])
    np.testing.assert_allclose(ln(x), _normalize(x, (1,)), rtol=1e-4, atol=1e-5)


def test_layer_norm_float64_and_unknown_batch():
    ln = snt.LayerNorm(-1, True, True)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float64)])
    def f(x):
        return ln(x)

    x = _data([4, 3], dtype=np.float64)
    np.testing.assert_allclose(f(x), _normalize(x, (1,)), rtol=1e-6)
    assert ln.scale.dtype == tf.float64


@pytest.mark.parametrize(
    "fmt, shape, axes, params",
    [
        ("channels_last", (2, 4, 5, 3), (1, 2), [3]),
        ("NHWC", (2, 4, 5, 3), (1, 2), [3]),
        ("NCHW", (2, 3, 4, 5), (2, 3), [3, 1, 1]),
        ("channels_first", (2, 3, 4), (2,), [3, 1]),
        ("NWC", (2, 4, 3), (1,), [3]),
        ("NDHWC", (2, 2, 3, 4, 3), (1, 2, 3), [3]),
    ],
)
def test_instance_norm(fmt, shape, axes, params):
    norm = snt.InstanceNorm(True, True, data_format=fmt)
    x = _data(shape)
    np.testing.assert_allclose(norm(x), _normalize(x, axes), rtol=1e-4, atol=1e-5)
    assert norm.scale.shape == params
    assert [v.name for v in norm.variables] == [
        "instance_norm/offset:0",
        "instance_norm/scale:0",
    ]


def test_repr():
    assert repr(snt.LayerNorm(1, True, False)) == (
        "LayerNorm(axis=1, create_scale=True, create_offset=False)"
    )
    assert repr(snt.InstanceNorm(True, True, eps=1e-3)) == (
        "InstanceNorm(create_scale=True, create_offset=True, eps=0.001)"
    )


def test_instance_norm_is_a_layer_norm():
    assert issubclass(snt.InstanceNorm, snt.LayerNorm)


# Errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        # As in the original, a bad `axis` is a ValueError.
        ({"axis": "foo"}, ValueError, "`axis` must be an int, a slice or an iterable"),
        ({"axis": ["foo"]}, ValueError, "`axis` must be an int"),
        ({"axis": 1.5}, ValueError, "`axis`"),
        (
            {"create_scale": False, "scale_init": snt.initializers.Ones()},
            ValueError,
            "`scale_init` must be None when `create_scale=False`",
        ),
        (
            {"create_offset": False, "offset_init": snt.initializers.Ones()},
            ValueError,
            "`offset_init` must be None when `create_offset=False`",
        ),
        ({"scale_init": 1.0}, TypeError, "`scale_init` must be a callable"),
        # As in the original, the data format comes first, then an unused
        # initializer (before its type).
        ({"scale_init": 1.0, "create_scale": False}, ValueError, "`scale_init`"),
        ({"scale_init": 1.0, "data_format": "XYZ"}, ValueError, "`data_format`"),
        ({"eps": None}, ValueError, "`eps` must be a number"),
        ({"eps": "x"}, tf.errors.InvalidArgumentError, "`eps` must be a number"),
        ({"eps": float("nan")}, ValueError, "`eps` must be finite"),
        ({"data_format": "XYZ"}, ValueError, "`data_format`"),
        ({"create_scale": "yes"}, TypeError, "`create_scale` must be a bool"),
    ],
)
def test_layer_norm_constructor_errors(kwargs, error, match):
    args = {"axis": 1, "create_scale": True, "create_offset": True, **kwargs}
    with pytest.raises(error, match=match):
        snt.LayerNorm(**args)


@pytest.mark.parametrize(
    "axis, expected",
    [
        (True, (1,)),
        (np.int64(-1), (2,)),
        (np.array(1), (1,)),
        (tf.constant(2), (2,)),
        (np.array([1, 2]), (1, 2)),
        ([np.int32(1), True], None),
        (range(1, 3), (1, 2)),
    ],
)
def test_integer_spellings_of_axis(axis, expected):
    ln = snt.LayerNorm(axis, create_scale=np.bool_(True), create_offset=1)
    if expected is None:  # Axis 1 twice.
        with pytest.raises(ValueError, match="must not repeat"):
            ln(tf.ones([2, 3, 4]))
        return
    x = tf.random.normal([2, 3, 4])
    mean, variance = tf.nn.moments(x, expected, keepdims=True)
    np.testing.assert_allclose(
        ln(x), (x - mean) / np.sqrt(variance + 1e-5), rtol=1e-5, atol=1e-5
    )


def test_flags_are_read_by_truth_value():
    ln = snt.LayerNorm(-1, create_scale=None, create_offset=0, eps=np.float32(1e-3))
    ln(tf.ones([2, 3]))
    assert ln.scale is None and ln.offset is None


@pytest.mark.parametrize("autograph", [True, False])
def test_unknown_dims_without_parameters(autograph):
    ln = snt.LayerNorm((1, 2), create_scale=False, create_offset=False)
    spec = tf.TensorSpec([None, None, None, None])
    f = tf.function(ln, autograph=autograph).get_concrete_function(
        spec, tf.TensorSpec([None]), tf.TensorSpec([None])
    )
    x = tf.random.normal([2, 3, 4, 5])
    scale, offset = tf.fill([5], 0.5), tf.fill([5], 2.0)
    np.testing.assert_allclose(f(x, scale, offset), ln(x, scale, offset), atol=1e-5)


def test_unknown_channels_need_known_size_for_parameters():
    ln = snt.LayerNorm(-1, create_scale=True, create_offset=False)
    f = tf.function(ln)
    with pytest.raises(ValueError, match="statically known, non-zero number"):
        f.get_concrete_function(tf.TensorSpec([None, None]))


def test_instance_norm_constructor_errors():
    with pytest.raises(ValueError, match="`data_format`"):
        snt.InstanceNorm(True, True, data_format="nope")
    with pytest.raises(ValueError, match="`scale_init` must be None"):
        snt.InstanceNorm(False, True, scale_init=snt.initializers.Ones())


@pytest.mark.parametrize("axis", [3, -4, [0, 3], [1, 1], [1, -2]])
def test_invalid_axis_for_rank(axis):
    ln = snt.LayerNorm(axis, True, True)
    match = "`axis` must (name axes of the rank-3|not repeat)"
    with pytest.raises(ValueError, match=match):
        ln(tf.ones([2, 3, 4]))
    assert not hasattr(ln, "scale")  # No variables were created.
    ln2 = snt.LayerNorm(axis, True, True)
    if axis in (3, [0, 3]):
        ln2(tf.ones([2, 3, 4, 5]))  # Valid for a rank-4 input.


def test_call_errors():
    ln = snt.LayerNorm(-1, True, True)
    x = tf.ones([2, 3])
    with pytest.raises(ValueError, match="`scale` must be None when the module"):
        ln(x, scale=tf.ones([3]))
    with pytest.raises(ValueError, match="`offset` must be None when the module"):
        ln(x, offset=tf.ones([3]))
    with pytest.raises(ValueError, match="`inputs` must have a known rank >= 2"):
        ln(tf.ones([3]))
    with pytest.raises(TypeError, match="`inputs` must have a floating point"):
        ln(tf.ones([2, 3], tf.int32))
    ln(x)
    with pytest.raises(ValueError, match=r"must keep the rank of the first call \(2\)"):
        ln(tf.ones([2, 3, 3]))
    with pytest.raises(ValueError, match=r"number of channels of the first call \(3\)"):
        ln(tf.ones([2, 4]))
    with pytest.raises(TypeError, match=r"dtype of the first call \(float32\)"):
        ln(tf.ones([2, 3], tf.float16))


def test_unknown_channels():
    ln = snt.LayerNorm(-1, True, True)
    f = tf.function(ln, input_signature=[tf.TensorSpec([2, None])])
    with pytest.raises(
        ValueError, match="statically known, non-zero number of channels"
    ):
        f.get_concrete_function()


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["add", "drop", "dtype", "channels", "other"]),
    st.sampled_from([tf.float64, tf.int32, tf.bool, tf.string, tf.complex64]),
)
def test_bad_inputs(kind, dtype):
    norm = snt.InstanceNorm(True, True)
    x = tf.constant(_data([2, 3, 3, 4]))
    norm(x)
    if kind == "add":
        bad = x[None]
    elif kind == "drop":
        bad = x[0]
    elif kind == "dtype":
        bad = tf.fill(x.shape, "a") if dtype == tf.string else tf.cast(x, dtype)
    elif kind == "channels":
        bad = tf.pad(x, [[0, 0], [0, 0], [0, 0], [0, 1]])
    else:
        bad = tf.pad(x, [[0, 1], [0, 1], [0, 0], [0, 0]])
    before = bad_input.snapshot(norm)
    ok, _ = bad_input.outcome(lambda: norm(bad), ["inputs"])
    assert ok == (kind == "other")
    bad_input.assert_unchanged(norm, before)


def test_empty_channels_rejected():
    with pytest.raises(ValueError, match="non-zero number of channels"):
        snt.LayerNorm(-1, True, True)(tf.zeros([2, 0]))


def test_integer_tensor_eps_is_refused():
    # The original's op failed adding it to the float variance.
    with pytest.raises(tf.errors.InvalidArgumentError, match="`eps` must be") as info:
        snt.LayerNorm(-1, True, True, eps=tf.constant(1))
    assert isinstance(info.value, TypeError)
    assert snt.LayerNorm(-1, True, True, eps=tf.constant(1e-3))(tf.ones([2, 3])).shape


def test_negative_eps_accepted_as_the_original():
    x = tf.constant([[1.0, 3.0]])
    np.testing.assert_allclose(
        snt.LayerNorm(-1, False, False, eps=-0.5)(x),
        [[-np.sqrt(2), np.sqrt(2)]],
        rtol=1e-5,
    )


@pytest.mark.parametrize("inputs", [None, "x"])
def test_non_tensor_inputs_are_attribute_errors(inputs):
    for module in (snt.LayerNorm(-1, True, True), snt.GroupNorm(1)):
        with pytest.raises(AttributeError, match="`inputs` must be a tensor"):
            module(inputs)


def test_bad_axes_and_integer_inputs_are_invalid_argument_errors():
    with pytest.raises(tf.errors.InvalidArgumentError, match="`axis` must name"):
        snt.LayerNorm(5, True, True)(tf.ones([2, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="must not repeat"):
        snt.LayerNorm([1, -1], True, True)(tf.ones([2, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="floating point") as info:
        snt.LayerNorm(-1, True, True)(tf.ones([2, 3], tf.int32))
    assert isinstance(info.value, TypeError)


# The graph fast path (a hand-written gradient) against eager autodiff.


def _value_and_gradients(ln, x, dy, order2=False):
    """Outputs and gradients (w.r.t. inputs, scale, offset) of `ln(x)`; with
    `order2` the gradient of `sum(dx ** 2)` instead (second order)."""
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ln(x)
            loss = tf.reduce_sum(y * dy)
        grads = tape.gradient(loss, [x, ln.scale, ln.offset])
        penalty = tf.reduce_sum(tf.square(grads[0]))
    if order2:
        grads = outer.gradient(penalty, [x, ln.scale, ln.offset])
    return [y, *grads]


@pytest.mark.parametrize("shape", [[6, 8], [3, 5, 8], [2, 3, 4, 8]])
@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("order2", [False, True])
def test_graph_fast_path_matches_eager(shape, jit_compile, order2):
    ln = snt.LayerNorm(-1, create_scale=True, create_offset=True)
    x = tf.constant(_data(shape))
    dy = tf.constant(_data(shape, seed=1))
    ln(x)
    ln.scale.assign(_data([8], seed=2))
    ln.offset.assign(_data([8], seed=3))
    assert ln._fused
    eager = _value_and_gradients(ln, x, dy, order2)
    graph = tf.function(
        lambda x, dy: _value_and_gradients(ln, x, dy, order2),
        jit_compile=jit_compile,
    )(x, dy)
    for e, g in zip(eager, graph, strict=True):
        assert (e is None) == (g is None)  # d(dx)/d(offset) is None.
        if e is not None:
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=2e-5, atol=2e-5)


def test_graph_fast_path_values_are_those_of_batch_normalization():
    ln = snt.LayerNorm(-1, create_scale=True, create_offset=True)
    x = tf.constant(_data([4, 16, 32]))
    ln(x)
    ln.scale.assign(_data([32], seed=2))
    eager = ln(x)
    np.testing.assert_array_equal(tf.function(ln)(x).numpy(), eager.numpy())


def _compiled_calls(fn, *args):
    """The XLA-compiled functions a trace of `fn` calls."""
    graph = tf.function(fn).get_concrete_function(*args).graph
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}
    calls = 0
    for op in graph.get_operations():
        if op.type in ("PartitionedCall", "StatefulPartitionedCall"):
            calls += library[op.get_attr("f").name].attr["_XlaMustCompile"].b
    return calls


# 2 x 256 x 512 = 1 << 18 elements: the smallest compiled layer norm.
LARGE = [2, 256, 512]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("order2", [False, True])
def test_large_layer_norms_run_compiled_and_match_eager(dtype, jit_compile, order2):
    ln = snt.LayerNorm(-1, create_scale=True, create_offset=True)
    x = tf.constant(_data(LARGE, dtype=dtype))
    dy = tf.constant(_data(LARGE, seed=1, dtype=dtype))
    ln(x)
    ln.scale.assign(_data([512], seed=2, dtype=dtype))
    ln.offset.assign(_data([512], seed=3, dtype=dtype))
    assert _compiled_calls(ln, x) == 1
    assert _compiled_calls(lambda x: _value_and_gradients(ln, x, dy), x) == 2
    eager = _value_and_gradients(ln, x, dy, order2)
    graph = tf.function(
        lambda x, dy: _value_and_gradients(ln, x, dy, order2),
        jit_compile=jit_compile,
    )(x, dy)
    tolerance = 2e-5 if dtype == np.float32 else 1e-10
    for e, g in zip(eager, graph, strict=True):
        assert (e is None) == (g is None)  # d(dx)/d(offset) is None.
        if e is not None:
            scale = np.abs(e.numpy()).max()
            np.testing.assert_allclose(
                g.numpy(), e.numpy(), rtol=tolerance, atol=tolerance * scale
            )


def test_large_layer_norms_against_numpy():
    ln = snt.LayerNorm(-1, create_scale=True, create_offset=True)
    x = _data(LARGE)
    ln(x)
    scale, offset = _data([512], seed=2), _data([512], seed=3)
    ln.scale.assign(scale)
    ln.offset.assign(offset)
    y = tf.function(ln)(tf.constant(x))
    x64 = x.astype(np.float64)
    expected = _normalize(x64, -1) * scale + offset
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_small_unknown_shaped_or_switched_off_layer_norms_are_not_compiled():
    ln = snt.LayerNorm(-1, create_scale=True, create_offset=True)
    x = tf.ones(LARGE)
    ln(x)
    assert _compiled_calls(ln, tf.ones([2, 255, 512])) == 0
    spec = tf.TensorSpec([None, 256, 512])
    graph = tf.function(ln, input_signature=[spec]).get_concrete_function().graph
    assert "PartitionedCall" not in {op.type for op in graph.get_operations()}
    axis_norm.COMPILED = False
    try:
        assert _compiled_calls(ln, x) == 0
    finally:
        axis_norm.COMPILED = True


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(axis=-1, create_scale=False, create_offset=True),
        dict(axis=-1, create_scale=True, create_offset=False),
        dict(axis=(1, 2), create_scale=True, create_offset=True),
        dict(axis=-1, create_scale=True, create_offset=True, eps=tf.constant(1e-3)),
        dict(
            axis=1,
            create_scale=True,
            create_offset=True,
            data_format="channels_first",
        ),
    ],
)
def test_other_configurations_take_the_plain_path(kwargs):
    ln = snt.LayerNorm(**kwargs)
    ln(tf.ones([2, 3, 4]))
    assert not ln._fused
    half = snt.LayerNorm(-1, True, True)
    half(tf.ones([2, 3], tf.bfloat16))
    assert not half._fused
