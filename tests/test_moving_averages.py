"""Tests for `snt.ExponentialMovingAverage`."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src import moving_averages
from tests.conformance import bad_input


def _reference(values: list[np.ndarray], decay: float) -> list[np.ndarray]:
    """Debiased EMA written out in NumPy (float64)."""
    hidden = np.zeros_like(values[0], dtype=np.float64)
    out = []
    for t, v in enumerate(values, start=1):
        hidden = decay * hidden + (1 - decay) * v
        out.append(hidden / (1 - decay**t))
    return out


@pytest.mark.parametrize("decay", [0.0, 0.5, 0.9, 0.99])
def test_matches_numpy(decay):
    rng = np.random.default_rng(1)
    values = [rng.normal(size=[2, 3]).astype(np.float32) for _ in range(10)]
    ema = snt.ExponentialMovingAverage(decay)
    for value, expected in zip(values, _reference(values, decay), strict=True):
        np.testing.assert_allclose(ema(tf.constant(value)), expected, rtol=1e-4)
    np.testing.assert_allclose(ema.value, _reference(values, decay)[-1], rtol=1e-4)


def test_documented_example_and_first_update_is_exact():
    ema = snt.ExponentialMovingAverage(decay=0.5)
    assert float(ema(3.0)) == 3.0
    assert float(ema(6.0)) == 5.0
    ema = snt.ExponentialMovingAverage(decay=0.999)
    np.testing.assert_allclose(ema(tf.constant([1.25, -7.0])), [1.25, -7.0], 1e-4)


def test_hidden_is_biased_and_average_debiased():
    ema = snt.ExponentialMovingAverage(decay=0.9)
    ema(tf.constant(10.0))
    np.testing.assert_allclose(ema._hidden.numpy(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(ema.average.numpy(), 10.0, rtol=1e-6)
    assert int(ema._counter) == 1


def test_variables_names_order_and_checkpoint_paths(tmp_path):
    ema = snt.ExponentialMovingAverage(0.9)
    # `_counter` exists from the constructor; the rest after the first update.
    assert [v.name for v in ema.variables] == ["exponential_moving_average/counter:0"]
    assert ema._hidden is None and ema.average is None
    ema(tf.ones([2]))
    assert [v.name for v in ema.variables] == [
        "exponential_moving_average/counter:0",
        "exponential_moving_average/hidden:0",
        "exponential_moving_average/average:0",
    ]
    assert [(v.shape, v.dtype) for v in ema.variables] == [
        ((), tf.int64),
        ((2,), tf.float32),
        ((2,), tf.float32),
    ]
    assert not any(v.trainable for v in ema.variables)
    path = tf.train.Checkpoint(module=ema).write(str(tmp_path / "ckpt"))
    keys = sorted(
        name.split("/")[1]
        for name, _ in tf.train.list_variables(path)
        if name.startswith("module/")
    )
    assert keys == ["_counter", "_hidden", "average"]


def test_custom_name():
    ema = snt.ExponentialMovingAverage(0.9, name="moving_mean")
    ema(1.0)
    assert ema.average.name == "moving_mean/average:0"


def test_initialize_creates_zero_state_without_counting():
    ema = snt.ExponentialMovingAverage(0.9)
    ema.initialize(tf.ones([1, 3]))
    assert int(ema._counter) == 0
    np.testing.assert_array_equal(ema.value, np.zeros([1, 3]))
    np.testing.assert_allclose(ema(tf.fill([1, 3], 2.0)), np.full([1, 3], 2.0), 1e-5)


def test_reset():
    ema = snt.ExponentialMovingAverage(0.5)
    ema(tf.constant([4.0]))
    ema(tf.constant([8.0]))
    ema.reset()
    assert int(ema._counter) == 0
    np.testing.assert_array_equal(ema._hidden, [0.0])
    np.testing.assert_array_equal(ema.average, [0.0])
    np.testing.assert_allclose(ema(tf.constant([1.0])), [1.0], 1e-6)


def test_reset_before_update():
    ema = snt.ExponentialMovingAverage(0.5)
    ema._counter.assign(3)
    ema.reset()
    assert int(ema._counter) == 0 and ema.average is None


def test_value_before_update():
    with pytest.raises(ValueError, match="has no value before its first `update"):
        _ = snt.ExponentialMovingAverage(0.5).value
    # The original failed reading the missing state (`AttributeError`).
    with pytest.raises(AttributeError):
        _ = snt.ExponentialMovingAverage(0.5).value


def test_python_integers_become_float32():
    ema = snt.ExponentialMovingAverage(0.5)
    assert float(ema(3)) == 3.0
    assert ema.average.dtype == tf.float32
    assert float(ema(5)) == pytest.approx(13 / 3)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float64])
def test_follows_first_value_dtype(dtype):
    ema = snt.ExponentialMovingAverage(0.5)
    out = ema(tf.constant([2.0], dtype))
    assert out.dtype == dtype and ema._hidden.dtype == dtype


def test_tensor_decay():
    decay = tf.Variable(0.5)
    ema = snt.ExponentialMovingAverage(decay)
    ema(tf.constant(3.0, tf.float64))
    assert float(ema(tf.constant(6.0, tf.float64))) == 5.0
    decay.assign(0.0)
    assert float(ema(tf.constant(1.0, tf.float64))) == 1.0


def test_in_tf_function_creates_variables_on_first_trace():
    ema = snt.ExponentialMovingAverage(0.5)
    step = tf.function(ema)
    step(tf.constant([3.0]))
    np.testing.assert_array_equal(step(tf.constant([6.0])), [5.0])
    assert len(ema.variables) == 3


def _graph_op_types(function, *args) -> set[str]:
    graph = function.get_concrete_function(*args).graph
    return {op.type for op in graph.get_operations()}


@pytest.mark.parametrize(
    "decay",
    [0.9, tf.constant(0.75), tf.Variable(0.6)],
    ids=["float", "tensor", "variable"],
)
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_update_in_tf_function_is_one_call_and_bit_identical_to_eager(decay, dtype):
    rng = np.random.default_rng(3)
    values = [tf.constant(rng.normal(size=[4]), dtype) for _ in range(5)]
    eager = snt.ExponentialMovingAverage(decay)
    traced = snt.ExponentialMovingAverage(decay)
    step = tf.function(traced.update)
    for value in values:
        eager.update(value)
        step(value)
        for a, b in zip(eager.variables, traced.variables, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    # Inside a function the update is a single call, not a dozen ops.
    op_types = _graph_op_types(tf.function(traced.update), values[0])
    assert "StatefulPartitionedCall" in op_types
    assert not op_types & {"Pow", "AssignSubVariableOp", "AssignAddVariableOp"}


def _call_count(fn: Any, *args: Any) -> int:
    graph = tf.function(fn).get_concrete_function(*args).graph
    return sum(op.type == "StatefulPartitionedCall" for op in graph.get_operations())


@pytest.mark.parametrize("decay", [0.9, tf.constant(0.75)], ids=["float", "tensor"])
def test_update_together_is_one_call_and_matches_separate_updates(decay):
    rng = np.random.default_rng(4)
    pairs = [
        (tf.constant(rng.normal(size=[3])), tf.constant(rng.normal(size=[1, 3])))
        for _ in range(4)
    ]
    separate = [snt.ExponentialMovingAverage(decay) for _ in range(2)]
    joint = [snt.ExponentialMovingAverage(decay) for _ in range(2)]

    def update_separately(a, b):
        separate[0].update(a)
        separate[1].update(b)

    def update_jointly(a, b):
        moving_averages.update_together(joint, (a, b))

    step_separate = tf.function(update_separately)
    step_joint = tf.function(update_jointly)
    for a, b in pairs:
        step_separate(a, b)
        step_joint(a, b)
        for x, y in zip(separate, joint, strict=True):
            for u, v in zip(x.variables, y.variables, strict=True):
                assert u.numpy().tobytes() == v.numpy().tobytes()
    assert joint[1].average.shape == [1, 3]
    assert _call_count(update_jointly, *pairs[0]) == 1
    assert _call_count(update_separately, *pairs[0]) == 2
    moving_averages.update_together(joint, pairs[0])  # Eagerly: plain ops.
    separate[0].update(pairs[0][0])
    separate[1].update(pairs[0][1])
    assert joint[1].value.numpy().tobytes() == separate[1].value.numpy().tobytes()


class _Doubling(snt.ExponentialMovingAverage):
    def update(self, value):
        super().update(value * 2)


def test_update_together_updates_one_by_one_what_it_cannot_join():
    value = tf.constant([1.0, 3.0])
    for averages in (
        [snt.ExponentialMovingAverage(0.5), snt.ExponentialMovingAverage(0.25)],
        [snt.ExponentialMovingAverage(0.5), _Doubling(0.5, name="doubling")],
        [snt.ExponentialMovingAverage(0.5), snt.Mean()],
        [snt.ExponentialMovingAverage(decay) for decay in [tf.Variable(0.5)] * 2],
    ):
        fresh = [copy.deepcopy(a) for a in averages]
        step = tf.function(
            lambda v, a=averages: moving_averages.update_together(a, (v, v))
        )
        step(value)
        for average, reference in zip(averages, fresh, strict=True):
            reference.update(value)
            assert average.value.numpy().tolist() == reference.value.numpy().tolist()


def test_update_with_a_variable_value_in_tf_function():
    value = tf.Variable([2.0, 4.0])
    ema = snt.ExponentialMovingAverage(0.5)
    tf.function(ema.update)(value)
    np.testing.assert_array_equal(ema.value, [2.0, 4.0])


def test_functions_outlive_the_averages_they_were_first_traced_with():
    # The shared update function must not hold on to (or require) the
    # variables of the first moving average it was traced with.
    for _ in range(3):
        ema = snt.ExponentialMovingAverage(0.5)
        step = tf.function(ema)
        step(tf.constant([1.0, 2.0]))
        np.testing.assert_allclose(step(tf.constant([3.0, 4.0])), [7 / 3, 10 / 3], 1e-6)
        del ema, step


def test_update_in_tf_function_under_a_strategy_uses_plain_ops():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        ema = snt.ExponentialMovingAverage(0.5)
        ema.initialize(tf.zeros([2]))
    step = tf.function(lambda v: strategy.run(ema.update, (v,)))
    step(tf.constant([2.0, 4.0]))
    step(tf.constant([4.0, 8.0]))
    np.testing.assert_allclose(ema.value, [10 / 3, 20 / 3])


def test_update_in_tf_function_with_custom_getter_uses_plain_ops():
    ema = snt.ExponentialMovingAverage(0.5)
    ema.initialize(tf.zeros([2]))
    seen = []

    def getter(v):
        seen.append(v.name)
        return v

    @tf.function
    def step(v):
        with snt.custom_variable_getter(getter):
            ema.update(v)

    step(tf.constant([2.0, 4.0]))
    assert seen
    np.testing.assert_array_equal(ema.value, [2.0, 4.0])


@pytest.mark.parametrize(
    "decay, error",
    [
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        ("0.9", TypeError),
        (None, TypeError),
        ([0.9], TypeError),
        (tf.constant(True), TypeError),
        (np.array(["a"]), TypeError),
        (tf.constant(["a", "b"]), TypeError),
    ],
)
def test_bad_decay(decay, error):
    with pytest.raises(error, match="`decay` must be"):
        snt.ExponentialMovingAverage(decay)


# The original took any real number (and gave the formula's result).
@pytest.mark.parametrize(
    "decay",
    [0, 1, 0.5, np.float32(0.9), np.array(0.5), True, -0.5, 1.5, tf.constant(1)],
)
def test_decay_spellings_accepted(decay):
    ema = snt.ExponentialMovingAverage(decay)
    d = float(decay)
    values = [np.float32([1.0, 2.0]), np.float32([3.0, 5.0])]
    for value in values:
        out = ema(tf.constant(value))
    if d == 1:
        assert np.all(np.isnan(out))
    else:
        np.testing.assert_allclose(out, _reference(values, d)[-1], rtol=1e-5)


def test_decay_per_element():
    # An array (or tensor) decay is broadcast against the values.
    for decay in (np.float32([0.0, 0.5]), tf.constant([0.0, 0.5])):
        ema = snt.ExponentialMovingAverage(decay)
        ema(tf.constant([1.0, 1.0]))
        np.testing.assert_allclose(ema(tf.constant([3.0, 3.0])), [3.0, 7 / 3])
    # Values it does not fit are refused (the original's op failed).
    ema = snt.ExponentialMovingAverage(np.zeros([2, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="`value`.*decay"):
        ema(2.0)
    assert ema.average is None


def test_complex_values():
    ema = snt.ExponentialMovingAverage(0.5)
    ema(tf.constant([1j]))
    np.testing.assert_allclose(ema(tf.constant([4j])), [3j])


def test_value_broadcasting_to_the_state():
    # The original's maths broadcast a value against the state.
    ema = snt.ExponentialMovingAverage(0.5)
    ema(tf.constant([1.0, 3.0]))
    np.testing.assert_allclose(ema(tf.constant(4.0)), [3.0, 11 / 3])
    assert ema.average.shape == [2]


IAE = tf.errors.InvalidArgumentError


# Each error is an instance of what the original's ops raised.
@pytest.mark.parametrize(
    "bad, error, fragment",
    [
        (tf.ones([3]), IAE, "must have the shape of the first value"),
        (tf.ones([2, 2]), IAE, "must have the shape of the first value"),
        (tf.ones([2], tf.float64), IAE, "must have the dtype of the first"),
        (tf.constant([1, 2]), IAE, "must have the dtype of the first"),
        (tf.constant([True, False]), IAE, "must have the dtype of the first"),
        ("ab", tf.errors.UnimplementedError, "must have a floating point dtype"),
        (None, ValueError, "must be convertible to a float32 tensor"),
    ],
)
def test_bad_value_after_build_leaves_state_unchanged(bad, error, fragment):
    ema = snt.ExponentialMovingAverage(0.9)
    ema(tf.ones([2]))
    before = bad_input.snapshot(ema)
    with pytest.raises(error, match=fragment) as info:
        ema(bad)
    assert isinstance(info.value, (ValueError, TypeError))
    bad_input.assert_unchanged(ema, before)


@pytest.mark.parametrize(
    "bad, error",
    [
        (tf.constant([1, 2]), TypeError),
        (tf.constant([True]), IAE),
        (tf.constant(["a"]), tf.errors.UnimplementedError),
        ("a", tf.errors.UnimplementedError),
        (None, ValueError),
    ],
)
def test_bad_first_value(bad, error):
    ema = snt.ExponentialMovingAverage(0.9)
    with pytest.raises(error, match="`value`") as info:
        ema(bad)
    assert isinstance(info.value, (ValueError, TypeError))
    assert int(ema._counter) == 0 and ema.average is None
    np.testing.assert_allclose(ema(tf.ones([2])), np.ones(2), 1e-5)


def test_initialize_takes_any_tensor():
    ema = snt.ExponentialMovingAverage(0.9)
    ema.initialize(tf.constant([1, 2]))
    assert ema.average.dtype == tf.int32
    with pytest.raises(TypeError, match="`value`.*floating"):
        ema(tf.constant([1, 2]))


@settings(max_examples=25, deadline=None)
@given(decay=bad_input.junk())
def test_junk_decay(decay):
    ok, ema = bad_input.outcome(lambda: snt.ExponentialMovingAverage(decay), ["decay"])
    if ok:
        # An array decay may not fit a scalar value.
        done, out = bad_input.outcome(lambda: np.asarray(ema(2.0)), ["value"])
        # The first update gives the value exactly, except with decay 1 (0/0).
        assert not done or np.all(np.isclose(out, 2.0) | np.isnan(out))


@settings(max_examples=25, deadline=None)
@given(value=bad_input.junk(), built=st.booleans())
def test_junk_values(value, built):
    ema = snt.ExponentialMovingAverage(0.9)
    if built:
        ema(tf.zeros([2, 2]))
    before = bad_input.snapshot(ema)
    ok, _ = bad_input.outcome(lambda: ema(value), ["value"])
    if not ok:
        bad_input.assert_unchanged(ema, before)
