"""Tests for `snt.pad`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src import pad as pad_lib
from tests.conformance import bad_input

FUNCTIONS = [snt.pad.valid, snt.pad.same, snt.pad.full, snt.pad.causal]
FUNCTIONS.append(snt.pad.reverse_causal)


def test_public_names():
    assert set(snt.pad.__all__) == {
        "causal",
        "create",
        "full",
        "reverse_causal",
        "same",
        "valid",
    }
    for name in snt.pad.__all__:
        assert getattr(snt.pad, name) is getattr(pad_lib, name)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 7])
def test_functions(k):
    assert snt.pad.valid(k) == [0, 0]
    assert snt.pad.same(k) == [(k - 1) // 2, k // 2]
    assert snt.pad.full(k) == [k - 1, k - 1]
    assert snt.pad.causal(k) == [k - 1, 0]
    assert snt.pad.reverse_causal(k) == [0, k - 1]


SIZED = [f for f in FUNCTIONS if f is not snt.pad.valid]


@pytest.mark.parametrize("fn", SIZED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("k", [0, -1])
def test_functions_reject_non_positive(fn, k):
    # The original returned negative paddings.
    with pytest.raises(ValueError, match="`effective_kernel_size` must be a positive"):
        fn(k)


@pytest.mark.parametrize("fn", SIZED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("k", [2.5, "3", None, [3]])
def test_functions_reject_non_integers(fn, k):
    with pytest.raises(TypeError, match="`effective_kernel_size` must be an integer"):
        fn(k)


def test_functions_reject_1d_tensors():
    # The original returned paddings made of 1-element tensors.
    with pytest.raises(TypeError, match="`effective_kernel_size` must be an integer"):
        snt.pad.same(tf.constant([3]))


@pytest.mark.parametrize("fn", SIZED, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "k",
    [np.int64(4), np.array(4), tf.constant(4), 4.0, np.float32(4), tf.constant(4.0)],
    ids=["np.int64", "np0d", "tensor", "float", "np.float32", "tensor_float"],
)
def test_functions_accept_integer_spellings(fn, k):
    result = fn(k)
    assert result == fn(4)
    assert all(type(p) is int for p in result)


@pytest.mark.parametrize("k", [3, 0, -1, None, "3", 2.5, [3]])
def test_valid_ignores_its_argument(k):
    assert snt.pad.valid(k) == [0, 0]


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ([snt.pad.causal, snt.pad.full], [3], [1, 1], 2, -1),
            [[0, 0], [2, 0], [2, 2], [0, 0]],
        ),
        ((snt.pad.full, 3, 1, 1, 1), [[0, 0], [0, 0], [2, 2]]),
        ((snt.pad.same, 4, 3, 2, -1), [[0, 0], [4, 5], [4, 5], [0, 0]]),
        ((snt.pad.same, 4, 3, 2, 1), [[0, 0], [0, 0], [4, 5], [4, 5]]),
        ((snt.pad.valid, [2, 3, 4], 1, 3, -1), [[0, 0]] * 5),
        (
            ((snt.pad.reverse_causal,), (2, 3), (3, 1), 2, -1),
            [[0, 0], [0, 3], [0, 2], [0, 0]],
        ),
    ],
)
def test_create(args, expected):
    assert snt.pad.create(*args) == expected


@pytest.mark.parametrize(
    "args, error, fragment",
    [
        ((snt.pad.same, [3, 3, 3], 1, 2, -1), TypeError, "`kernel`"),
        ((snt.pad.same, 3, [1, 2, 3], 2, -1), TypeError, "`rate`"),
        (([snt.pad.same] * 3, 3, 1, 2, -1), TypeError, "`padding`"),
        (("SAME", 3, 1, 2, -1), TypeError, "`padding`"),
        (("SAME", 3, 1, 4, -1), TypeError, "`padding` must be a padding function"),
        ((None, 3, 1, 2, -1), TypeError, "`padding` must be a padding function"),
        ((snt.pad.same, 0, 1, 2, -1), ValueError, "`kernel` must be a positive"),
        ((snt.pad.same, 3, 0, 2, -1), ValueError, "`rate` must be a positive"),
        ((snt.pad.same, 3.5, 1, 2, -1), TypeError, "`kernel` must be an integer"),
        ((snt.pad.same, None, 1, 2, -1), TypeError, "`kernel` must be a positive"),
        ((snt.pad.same, "3", 1, 2, -1), TypeError, "`kernel` must be a positive"),
        ((snt.pad.same, 3, None, 2, -1), TypeError, "`rate` must be a positive"),
        # Arrays: the original padded every dimension for all the sizes.
        ((snt.pad.same, np.array([3, 5]), 1, 2, -1), TypeError, "`kernel` must"),
        ((snt.pad.same, 3, 1, -1, -1), ValueError, "`n` must be a non-negative"),
        # The original padded any index but 1 as channels-last.
        ((snt.pad.same, 3, 1, 2, 0), ValueError, "`channel_index` must be 1 \\("),
        ((snt.pad.same, 3, 1, 2, -3), ValueError, "`channel_index` must be 1 \\("),
        ((snt.pad.same, 3, 1, 2, 2), ValueError, "`channel_index` must be 1 \\("),
        ((snt.pad.same, 3, 1, 2, [3]), TypeError, "`channel_index` must be 1, -1 or 3"),
        ((snt.pad.same, 3, 1, 2, None), TypeError, "`channel_index` must be 1, -1"),
        ((snt.pad.same, 3, 1, 2, "1"), TypeError, "`channel_index` must be 1, -1"),
        ((snt.pad.same, 3, 1, 2, 1.5), TypeError, "`channel_index` must be 1, -1"),
    ],
)
def test_create_errors(args, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.pad.create(*args)


@pytest.mark.parametrize(
    "channel_index", [3, np.int64(3), tf.constant(3), 3.0, -1, np.array(-1)]
)
def test_create_channels_last_spellings(channel_index):
    # `n + 1` is the last axis of an `n + 2`-D input, as -1 is.
    expected = [[0, 0], [1, 1], [1, 1], [0, 0]]
    assert snt.pad.create(snt.pad.same, 3, 1, 2, channel_index) == expected


@pytest.mark.parametrize("channel_index", [1, True, np.int32(1), 1.0, tf.constant(1)])
def test_create_channels_first_spellings(channel_index):
    expected = [[0, 0], [0, 0], [1, 1], [1, 1]]
    assert snt.pad.create(snt.pad.same, 3, 1, 2, channel_index) == expected


@pytest.mark.parametrize(
    "kernel, rate",
    [
        (3.0, 1),
        (np.int64(3), np.float32(1)),
        (tf.constant(3), tf.constant(1.0)),
        ((3.0, 3.0), [1]),
        ([np.int32(3)], (1, 1)),
    ],
)
def test_create_size_spellings(kernel, rate):
    result = snt.pad.create(snt.pad.same, kernel, rate, 2, -1)
    assert result == [[0, 0], [1, 1], [1, 1], [0, 0]]
    assert all(type(p) is int for pair in result for p in pair)


def test_create_size_spellings_of_n():
    # No spatial dimensions: any channel axis gives the same result.
    assert snt.pad.create(snt.pad.same, 3, 1, 0, 3) == [[0, 0], [0, 0]]
    for n in (np.int64(2), np.array(2), tf.constant(2)):
        assert snt.pad.create(snt.pad.same, 3, 1, n, -1) == [
            [0, 0],
            [1, 1],
            [1, 1],
            [0, 0],
        ]


@pytest.mark.parametrize("kernel", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("rate", [1, 2, 3])
def test_same_reproduces_tf_same_padding(kernel, rate):
    x = tf.random.stateless_normal([1, 9, 8, 2], seed=[1, 2])
    w = tf.random.stateless_normal([kernel, kernel, 2, 3], seed=[3, 4])
    expected = tf.nn.conv2d(x, w, 1, "SAME", dilations=rate)
    paddings = snt.pad.create(snt.pad.same, kernel, rate, 2, -1)
    actual = tf.nn.conv2d(tf.pad(x, paddings), w, 1, "VALID", dilations=rate)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_causal_output_only_sees_the_past():
    # A 1-D causal convolution: output t must not change when input t+1 does.
    x = np.arange(1.0, 7.0, dtype=np.float32).reshape(1, 6, 1)
    w = tf.ones([3, 1, 1])
    paddings = snt.pad.create(snt.pad.causal, 3, 1, 1, -1)
    y = tf.nn.conv1d(tf.pad(x, paddings), w, 1, "VALID").numpy()[0, :, 0]
    np.testing.assert_array_equal(y, [1, 3, 6, 9, 12, 15])


@settings(max_examples=25, deadline=None)
@given(
    value=bad_input.junk(),
    position=st.integers(0, 4),
)
def test_create_junk_arguments(value, position):
    args = [snt.pad.same, 3, 1, 2, -1]
    names = ["padding", "kernel", "rate", "n", "channel_index"]
    args[position] = value
    ok, result = bad_input.outcome(lambda: snt.pad.create(*args), [names[position]])
    if ok:
        assert all(len(pair) == 2 for pair in result)
