"""Tests for `snt.Metric`, `snt.Sum` and `snt.Mean`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input


def _stream(n: int = 5, shape: tuple[int, ...] = (2, 3)) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.normal(size=shape).astype(np.float32) for _ in range(n)]


def _ckpt_keys(module: snt.Module) -> list[str]:
    ckpt = tf.train.Checkpoint(module=module)
    prefix = "module/"
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    return sorted(
        name[len(prefix) : -len(suffix)]
        for name, _ in tf.train.list_variables(ckpt.write(_tmp("ckpt")))
        if name.startswith(prefix)
    )


_TMP: list[str] = []


def _tmp(name: str) -> str:
    return f"{_TMP[0]}/{name}"


@pytest.fixture(autouse=True)
def _tmp_dir(tmp_path):
    _TMP[:] = [str(tmp_path)]


# Metric -----------------------------------------------------------------------


def test_metric_is_abstract():
    with pytest.raises(TypeError):
        snt.Metric()  # type: ignore[abstract]


class _NoValue(snt.Metric):
    def initialize(self, value):
        pass

    def update(self, value):
        pass

    def reset(self):
        pass


def test_metric_without_value_property():
    # As in the original, only `initialize`, `update` and `reset` are
    # abstract; `value` is None unless a subclass defines it.
    assert sorted(snt.Metric.__abstractmethods__) == ["initialize", "reset", "update"]
    m = _NoValue()
    assert m.value is None
    assert m(1.0) is None


class _Last(snt.Metric):
    def __init__(self):
        super().__init__()
        self.last = None
        self.calls: list[str] = []

    def initialize(self, value):
        self.calls.append("initialize")

    def update(self, value):
        self.calls.append("update")
        self.last = value

    @property
    def value(self):
        self.calls.append("value")
        return self.last

    def reset(self):
        self.last = None


def test_metric_call_updates_then_returns_value():
    m = _Last()
    assert m(3) == 3
    assert m.calls == ["update", "value"]


# Sum --------------------------------------------------------------------------


def test_sum_matches_numpy():
    values = _stream()
    total = snt.Sum()
    for i, v in enumerate(values):
        out = total(tf.constant(v))
        np.testing.assert_allclose(out, np.sum(values[: i + 1], axis=0), rtol=1e-6)
    np.testing.assert_allclose(total.value, np.sum(values, axis=0), rtol=1e-6)


def test_sum_variables():
    total = snt.Sum()
    assert total.sum is None
    assert total.name == "sum"
    total.update(tf.ones([2, 2]))
    assert [v.name for v in total.variables] == ["sum/sum:0"]
    assert total.sum.shape == (2, 2) and total.sum.dtype == tf.float32
    assert not total.sum.trainable
    assert tf.Module.trainable_variables.fget(total) == ()  # type: ignore[attr-defined]
    assert _ckpt_keys(total) == ["sum"]


def test_sum_custom_name():
    total = snt.Sum(name="loss_total")
    total(1.0)
    assert total.sum.name == "loss_total/sum:0"


def test_sum_initialize_does_not_accumulate():
    total = snt.Sum()
    total.initialize(tf.fill([3], 5.0))
    np.testing.assert_array_equal(total.value, np.zeros(3))
    total.initialize(tf.fill([3], 5.0))
    total.update(tf.fill([3], 2.0))
    np.testing.assert_array_equal(total.value, np.full(3, 2.0))


def test_sum_reset():
    total = snt.Sum()
    total(tf.ones([2]))
    total.reset()
    np.testing.assert_array_equal(total.value, np.zeros(2))
    np.testing.assert_array_equal(total(tf.ones([2])), np.ones(2))


def test_sum_reset_before_first_update_is_a_no_op():
    total = snt.Sum()
    total.reset()
    assert total.sum is None


def test_sum_python_numbers_and_integers():
    total = snt.Sum()
    total(3)
    assert total.sum.dtype == tf.int32
    assert int(total(4)) == 7
    floats = snt.Sum()
    floats(1.5)
    assert float(floats(np.float32(2.0))) == 3.5


def test_sum_in_tf_function():
    total = snt.Sum()
    step = tf.function(total)
    for _ in range(3):
        out = step(tf.ones([2]))
    np.testing.assert_array_equal(out, np.full(2, 3.0))


@pytest.mark.parametrize("cls", [snt.Sum, snt.Mean])
def test_value_before_update(cls):
    with pytest.raises(ValueError, match="has no value before its first `update"):
        _ = cls().value
    # The original failed on the missing state: `AttributeError` (`Mean`).
    with pytest.raises(AttributeError):
        _ = cls().value
    assert not hasattr(cls(), "value")


# Mean -------------------------------------------------------------------------


def test_mean_matches_numpy():
    values = _stream()
    mean = snt.Mean()
    for i, v in enumerate(values):
        out = mean(tf.constant(v))
        np.testing.assert_allclose(out, np.mean(values[: i + 1], axis=0), rtol=1e-5)


def test_mean_variables():
    mean = snt.Mean()
    # `count` is created in the constructor, `sum` by the first update.
    assert mean.sum is None
    assert [v.name for v in mean.variables] == ["mean/count:0"]
    assert mean.count.dtype == tf.int64 and mean.count.shape == ()
    mean.update(tf.ones([2, 2]))
    assert [v.name for v in mean.variables] == ["mean/count:0", "mean/sum:0"]
    assert [v.shape for v in mean.variables] == [(), (2, 2)]
    assert not any(v.trainable for v in mean.variables)
    assert _ckpt_keys(mean) == ["count", "sum"]


def test_mean_initialize_and_reset():
    mean = snt.Mean()
    mean.initialize(tf.ones([2]))
    assert int(mean.count) == 0
    mean(tf.fill([2], 4.0))
    mean(tf.fill([2], 2.0))
    assert int(mean.count) == 2
    mean.reset()
    assert int(mean.count) == 0
    np.testing.assert_array_equal(mean.sum, np.zeros(2))
    np.testing.assert_array_equal(mean(tf.fill([2], 6.0)), np.full(2, 6.0))


def test_mean_reset_before_update_resets_count():
    mean = snt.Mean()
    mean.count.assign(5)
    mean.reset()
    assert int(mean.count) == 0 and mean.sum is None


def test_mean_of_integers_is_true_division():
    mean = snt.Mean()
    mean(tf.constant([1, 2]))
    out = mean(tf.constant([2, 2]))
    np.testing.assert_array_equal(out, [1.5, 2.0])


def test_mean_float64():
    mean = snt.Mean()
    out = mean(tf.constant([1.0], tf.float64))
    assert out.dtype == tf.float64


# Bad values -------------------------------------------------------------------


IAE = tf.errors.InvalidArgumentError


# Each error is an instance of what the original raised (its ops failed with
# `InvalidArgumentError` on a shape change, `ValueError` on a dtype change).
@pytest.mark.parametrize("cls", [snt.Sum, snt.Mean])
@pytest.mark.parametrize(
    "bad, errors, fragment",
    [
        (tf.ones([3]), (ValueError, IAE), "must have the shape of the first value"),
        (tf.ones([1, 2]), (ValueError, IAE), "must have the shape of the first"),
        (tf.ones([2], tf.float64), (ValueError,), "must have the dtype of the first"),
        (tf.constant([1, 2]), (ValueError,), "must have the dtype of the first"),
        (tf.constant(["a", "b"]), (ValueError,), "must have the dtype of the first"),
        ("ab", (TypeError,), "must be convertible to a float32 tensor"),
        (None, (ValueError,), "must be convertible to a float32 tensor"),
    ],
)
def test_bad_value_after_build_leaves_state_unchanged(cls, bad, errors, fragment):
    metric = cls()
    metric(tf.ones([2]))
    before = bad_input.snapshot(metric)
    with pytest.raises(errors[0], match=fragment) as info:
        metric(bad)
    assert all(isinstance(info.value, e) for e in errors)
    assert "`value`" in str(info.value)
    bad_input.assert_unchanged(metric, before)


@pytest.mark.parametrize("cls", [snt.Sum, snt.Mean])
@pytest.mark.parametrize(
    "bad, error",
    [
        (tf.constant(["a"]), IAE),
        (tf.constant([True]), IAE),
        ("a", IAE),
        (None, ValueError),
        (object(), ValueError),
    ],
)
def test_bad_first_value(cls, bad, error):
    metric = cls()
    with pytest.raises(error) as info:
        metric(bad)
    assert "`value`" in str(info.value)
    assert isinstance(info.value, (TypeError, ValueError))
    # Nothing was half-built: a good value still works.
    np.testing.assert_array_equal(metric(tf.ones([2])), np.ones(2))


@pytest.mark.parametrize("cls", [snt.Sum, snt.Mean])
def test_initialize_takes_any_tensor(cls):
    # As in the original: `initialize` only uses the shape and dtype.
    metric = cls()
    metric.initialize(tf.constant(["a", "b"]))
    assert metric.sum.dtype == tf.string and metric.sum.shape == [2]
    with pytest.raises(IAE, match="`value`.*numeric"):
        metric(tf.constant(["c", "d"]))
    with pytest.raises(ValueError, match="`value`"):
        cls().initialize(None)


@pytest.mark.parametrize("cls", [snt.Sum, snt.Mean])
@pytest.mark.parametrize("name", [3, "not valid", ""])
def test_bad_name(cls, name):
    with pytest.raises((TypeError, ValueError), match="`name`"):
        cls(name=name)


@pytest.mark.parametrize("cls", [snt.Sum, snt.Mean])
@settings(max_examples=25, deadline=None)
@given(value=bad_input.junk(), built=st.booleans())
def test_junk_values(cls, value, built):
    metric = cls()
    if built:
        metric(tf.zeros([2, 2], tf.float64))
    before = bad_input.snapshot(metric) if built else None
    ok, _ = bad_input.outcome(lambda: metric(value), ["value"])
    if not ok and before is not None:
        bad_input.assert_unchanged(metric, before)


@pytest.mark.parametrize("cls", [snt.Sum, snt.Mean])
@settings(max_examples=25, deadline=None)
@given(name=bad_input.junk())
def test_junk_names(cls, name):
    bad_input.outcome(lambda: cls(name=name), ["name"])
