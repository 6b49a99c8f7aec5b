"""Tests for `snt.GroupNorm`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input

EPS = 1e-5


def _data(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 2.0 - 1.0).astype(dtype)


def _group_norm(x, groups, channels_first=False, spatial_only=False):
    """NumPy group norm: stats per (example, group) over space and the group."""
    if channels_first:
        x = np.moveaxis(x, 1, -1)
    c = x.shape[-1]
    grouped = x.reshape(*x.shape[:-1], groups, c // groups)
    # Axes: spatial axes (1..rank-2) and the within-group channel axis.
    axes = tuple(range(1, x.ndim - 1))
    if not spatial_only:
        axes += (x.ndim,)
    mean = grouped.mean(axes, keepdims=True)
    var = grouped.var(axes, keepdims=True)
    out = ((grouped - mean) / np.sqrt(var + EPS)).reshape(x.shape)
    return np.moveaxis(out, -1, 1) if channels_first else out


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize(
    "shape, fmt",
    [
        ((2, 3, 3, 4), "NHWC"),
        ((2, 4, 3, 3), "NCHW"),
        ((3, 5, 4), "channels_last"),
        ((3, 4, 5), "channels_first"),
        ((2, 4), "channels_last"),
        ((2, 2, 2, 3, 4), "NDHWC"),
    ],
)
def test_matches_numpy(groups, shape, fmt):
    gn = snt.GroupNorm(groups, data_format=fmt)
    x = _data(shape)
    expected = _group_norm(x, groups, channels_first=fmt in ("NCHW", "channels_first"))
    np.testing.assert_allclose(gn(x), expected, rtol=1e-4, atol=1e-4)


def test_axis_restricted_to_channels_gives_per_position_groups():
    # Normalizing only within each group of channels (axis = channel axis).
    x = _data([2, 3, 4])
    gn = snt.GroupNorm(2, axis=-1, create_scale=False, create_offset=False)
    grouped = x.reshape(2, 3, 2, 2)
    mean = grouped.mean(-1, keepdims=True)
    var = grouped.var(-1, keepdims=True)
    expected = ((grouped - mean) / np.sqrt(var + EPS)).reshape(x.shape)
    np.testing.assert_allclose(gn(x), expected, rtol=1e-4, atol=1e-4)
    gn = snt.GroupNorm(2, axis=[1], create_scale=False, create_offset=False)
    np.testing.assert_allclose(
        gn(x), _group_norm(x, 2, spatial_only=True), rtol=1e-4, atol=1e-4
    )


def test_scale_offset_and_variables():
    gn = snt.GroupNorm(
        2,
        scale_init=snt.initializers.Constant(3.0),
        offset_init=snt.initializers.Constant(-1.0),
    )
    x = _data([2, 3, 4])
    np.testing.assert_allclose(gn(x), _group_norm(x, 2) * 3 - 1, rtol=1e-4, atol=1e-4)
    assert [(v.name, v.shape.as_list()) for v in gn.variables] == [
        ("group_norm/offset:0", [4]),
        ("group_norm/scale:0", [4]),
    ]
    gn = snt.GroupNorm(2, data_format="NCHW")
    gn(_data([2, 4, 3, 3]))
    assert gn.scale.shape == [4, 1, 1]


def test_call_time_parameters():
    gn = snt.GroupNorm(2, create_scale=False, create_offset=False)
    x = _data([2, 3, 4])
    scale, offset = _data([4], seed=1), _data([4], seed=2)
    np.testing.assert_allclose(
        gn(x, scale=scale, offset=offset),
        _group_norm(x, 2) * scale + offset,
        rtol=1e-4,
        atol=1e-4,
    )
    assert gn.scale is None and gn.offset is None


def test_spatial_size_may_change_and_be_unknown():
    gn = snt.GroupNorm(2)
    gn(_data([2, 3, 3, 4]))
    x = _data([1, 5, 2, 4])
    np.testing.assert_allclose(gn(x), _group_norm(x, 2), rtol=1e-4, atol=1e-4)

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 4])])
    def f(x):
        return gn(x)

    np.testing.assert_allclose(f(x), _group_norm(x, 2), rtol=1e-4, atol=1e-4)

    gn_first = snt.GroupNorm(2, data_format="NCHW")
    g = tf.function(gn_first, input_signature=[tf.TensorSpec([None, 4, None, None])])
    x = _data([2, 4, 3, 2])
    np.testing.assert_allclose(
        g(x), _group_norm(x, 2, channels_first=True), rtol=1e-4, atol=1e-4
    )


def test_repr():
    assert repr(snt.GroupNorm(2)) == "GroupNorm(groups=2)"
    assert repr(snt.GroupNorm(4, axis=-1, create_offset=False)) == (
        "GroupNorm(groups=4, axis=-1, create_offset=False)"
    )


# Errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"groups": 0}, ValueError, "`groups` must be a positive integer"),
        ({"groups": 1.5}, TypeError, "`groups` must be an integer"),
        ({"axis": "x"}, ValueError, "`axis` must be an int, a slice or an iterable"),
        ({"axis": ["x"]}, ValueError, "`axis` must be an int, a slice or an iterable"),
        (
            {"create_scale": False, "scale_init": snt.initializers.Ones()},
            ValueError,
            "`scale_init` must be None",
        ),
        (
            {"create_offset": False, "offset_init": snt.initializers.Ones()},
            ValueError,
            "`offset_init` must be None",
        ),
        # As in the original, the unused-initializer check comes first.
        ({"create_offset": False, "offset_init": "x"}, ValueError, "`offset_init`"),
        ({"eps": "x"}, TypeError, "`eps`"),
        ({"data_format": "WHAT"}, ValueError, "`data_format`"),
    ],
)
def test_constructor_errors(kwargs, error, match):
    args = {"groups": 2, **kwargs}
    with pytest.raises(error, match=match):
        snt.GroupNorm(**args)


def test_positional_bool_axis_is_axis_one():
    # `GroupNorm(2, True, True)` is axis 1 and create_scale=True in the original.
    gn = snt.GroupNorm(2, True, True)
    x = np.random.RandomState(0).randn(3, 4, 6).astype(np.float32)
    grouped = x.reshape([3, 4, 2, 3])  # Axis 1 only, as the original.
    mean = grouped.mean(axis=1, keepdims=True)
    variance = grouped.var(axis=1, keepdims=True)
    expected = ((grouped - mean) / np.sqrt(variance + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(gn(tf.constant(x)), expected, atol=1e-5)
    assert gn.scale.shape == [6] and gn.offset is not None


def test_group_norm_sizes_as_tensors():
    gn = snt.GroupNorm(tf.constant(2), eps=np.float32(1e-3))
    assert gn(tf.random.normal([2, 4])).shape == [2, 4]


def test_unknown_channels_rejected():
    gn = snt.GroupNorm(2, create_scale=False, create_offset=False)
    with pytest.raises(ValueError, match="statically known number of channels"):
        tf.function(gn).get_concrete_function(tf.TensorSpec([None, None]))


def test_groups_must_divide_channels():
    gn = snt.GroupNorm(3)
    with pytest.raises(ValueError, match=r"divisible by `groups` \(3\)"):
        gn(tf.ones([2, 3, 4]))
    assert not hasattr(gn, "scale")  # Nothing was created.
    gn(tf.ones([2, 3, 6]))  # The module is still usable.


def test_call_errors():
    gn = snt.GroupNorm(2)
    x = tf.ones([2, 3, 4])
    with pytest.raises(ValueError, match="`scale` must be None when the module"):
        gn(x, scale=tf.ones([4]))
    with pytest.raises(ValueError, match="`offset` must be None when the module"):
        gn(x, offset=tf.ones([4]))
    with pytest.raises(ValueError, match="`axis` must name axes"):
        snt.GroupNorm(2, axis=5)(x)
    with pytest.raises(TypeError, match="floating point"):
        gn(tf.ones([2, 3, 4], tf.int64))
    gn(x)
    with pytest.raises(ValueError, match=r"rank of the first call \(3\)"):
        gn(tf.ones([2, 4]))
    with pytest.raises(ValueError, match=r"number of channels of the first call \(4\)"):
        gn(tf.ones([2, 3, 6]))
    with pytest.raises(TypeError, match=r"dtype of the first call"):
        gn(tf.ones([2, 3, 4], tf.float64))


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["add", "drop", "dtype", "channels", "spatial"]),
    st.sampled_from([tf.float64, tf.int32, tf.bool, tf.string]),
)
def test_bad_inputs(kind, dtype):
    gn = snt.GroupNorm(2)
    x = tf.constant(_data([2, 3, 3, 4]))
    gn(x)
    if kind == "add":
        bad = x[None]
    elif kind == "drop":
        bad = x[0]
    elif kind == "dtype":
        bad = tf.fill(x.shape, "a") if dtype == tf.string else tf.cast(x, dtype)
    elif kind == "channels":
        bad = tf.pad(x, [[0, 0], [0, 0], [0, 0], [0, 2]])
    else:
        bad = tf.pad(x, [[0, 0], [0, 2], [0, 1], [0, 0]])
    ok, _ = bad_input.outcome(lambda: gn(bad), ["inputs"])
    assert ok == (kind == "spatial")
