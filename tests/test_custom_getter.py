"""Tests for `snt.custom_variable_getter`."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input


class Holder(snt.Module):
    """A module with variables in several kinds of attributes."""

    def __init__(self, name: str | None = None):
        super().__init__(name=name)
        self.w = tf.Variable(2.0, name="w")
        self.pair = (tf.Variable(3.0, name="a"), 7)
        self.table = {"x": tf.Variable(4.0, name="x"), "y": "text"}
        self.numbers = [1, 2]
        self.count = 5

    @property
    def doubled_w(self) -> tf.Tensor:
        return self.w * 2

    @property
    def raw_w(self) -> tf.Variable:
        return self.w


class Other(snt.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(1.0, name="w")


class OwnLookup(snt.Module):
    """A module class that defines its own `__getattribute__`."""

    def __init__(self):
        super().__init__()
        self.w = tf.Variable(1.0, name="w")

    def __getattribute__(self, name: str):
        return super().__getattribute__(name)


def plus_ten(v: tf.Variable) -> tf.Tensor:
    return tf.convert_to_tensor(v) + 10.0


def times_two(v: tf.Variable) -> tf.Tensor:
    return tf.convert_to_tensor(v) * 2.0


def test_stop_gradient_blocks_gradients_only_inside():
    mod = snt.Linear(2)
    x = tf.ones([1, 3])
    mod(x)
    with tf.GradientTape(persistent=True) as tape:
        with snt.custom_variable_getter(tf.stop_gradient):
            inside = tf.reduce_sum(mod(x))
        outside = tf.reduce_sum(mod(x))
    assert tape.gradient(inside, mod.w) is None
    assert tape.gradient(inside, mod.b) is None
    assert tape.gradient(outside, mod.w) is not None


def test_getter_applies_to_variables_and_nests_only():
    mod = Holder()
    with snt.custom_variable_getter(plus_ten):
        assert float(mod.w) == 12.0
        first, second = mod.pair
        assert float(first) == 13.0 and second == 7
        assert float(mod.table["x"]) == 14.0 and mod.table["y"] == "text"
        assert float(mod.raw_w) == 12.0
        # A property computing from `self.w` sees the rewritten value.
        assert float(mod.doubled_w) == 24.0
        assert mod.count == 5
        numbers = mod.numbers
    assert isinstance(mod.w, tf.Variable)
    assert numbers is mod.numbers


def test_mutating_non_variable_attributes_hits_the_object():
    mod = Holder()
    with snt.custom_variable_getter(plus_ten):
        mod.numbers.append(3)
        mod.__dict__["extra"] = 1
    assert list(mod.numbers) == [1, 2, 3]
    assert mod.extra == 1


def test_dunder_attributes_are_untouched():
    mod = Holder()
    with snt.custom_variable_getter(plus_ten):
        assert vars(mod) is mod.__dict__
        assert isinstance(vars(mod)["w"], tf.Variable)
        # `tf.Module` finds variables through `vars()`, so they stay variables.
        assert all(isinstance(v, tf.Variable) for v in tf.Module.variables.fget(mod))


def test_lookup_is_restored_on_exit():
    assert "__getattribute__" not in snt.Module.__dict__
    with snt.custom_variable_getter(plus_ten):
        assert "__getattribute__" in snt.Module.__dict__
    assert "__getattribute__" not in snt.Module.__dict__
    assert isinstance(Holder().w, tf.Variable)


def test_lookup_is_restored_when_the_block_raises():
    mod = Holder()
    with pytest.raises(RuntimeError, match="boom"):
        with snt.custom_variable_getter(plus_ten):
            raise RuntimeError("boom")
    assert "__getattribute__" not in snt.Module.__dict__
    assert isinstance(mod.w, tf.Variable)


def test_own_getattribute_is_restored():
    own = OwnLookup.__dict__["__getattribute__"]
    mod = OwnLookup()
    with snt.custom_variable_getter(plus_ten, classes=[OwnLookup]):
        assert float(mod.w) == 11.0
    assert OwnLookup.__dict__["__getattribute__"] is own
    assert isinstance(mod.w, tf.Variable)


def test_classes_limits_the_effect():
    holder, other = Holder(), Other()
    with snt.custom_variable_getter(plus_ten, classes=[Other]):
        assert isinstance(holder.w, tf.Variable)
        assert float(other.w) == 11.0
    assert "__getattribute__" not in Other.__dict__


def test_single_class_is_accepted():
    other = Other()
    with snt.custom_variable_getter(plus_ten, classes=Other):
        assert float(other.w) == 11.0


def test_subclasses_of_listed_classes_are_affected_once():
    mod = Holder()
    with snt.custom_variable_getter(plus_ten, classes=[snt.Module, Holder]):
        assert float(mod.w) == 12.0


def test_instances_limits_the_effect():
    first, second = Holder(), Holder()
    with snt.custom_variable_getter(plus_ten, instances=[first]):
        assert float(first.w) == 12.0
        assert isinstance(second.w, tf.Variable)
    assert "__getattribute__" not in Holder.__dict__


def test_classes_and_instances_together():
    holder, other = Holder(), Other()
    with snt.custom_variable_getter(plus_ten, classes=[snt.Module], instances=[other]):
        assert isinstance(holder.w, tf.Variable)
        assert float(other.w) == 11.0


def test_nested_blocks_compose_outer_then_inner():
    mod = Holder()
    with snt.custom_variable_getter(plus_ten):
        with snt.custom_variable_getter(times_two):
            assert float(mod.w) == (2.0 + 10.0) * 2.0
            assert float(mod.pair[0]) == (3.0 + 10.0) * 2.0
        assert float(mod.w) == 12.0
    assert isinstance(mod.w, tf.Variable)


def test_nested_blocks_on_different_classes():
    mod = Holder()
    with snt.custom_variable_getter(plus_ten):
        with snt.custom_variable_getter(times_two, classes=[Holder]):
            assert float(mod.w) == 24.0
        assert "__getattribute__" not in Holder.__dict__
        assert float(mod.w) == 12.0
    assert "__getattribute__" not in snt.Module.__dict__


def test_context_manager_is_reusable_and_reentrant():
    mod = Holder()
    getter = snt.custom_variable_getter(plus_ten)
    with getter:
        with getter:
            assert float(mod.w) == 22.0
        assert float(mod.w) == 12.0
    with getter:
        assert float(mod.w) == 12.0
    assert isinstance(mod.w, tf.Variable)


def test_works_inside_tf_function():
    mod = snt.Linear(1, w_init=snt.initializers.Ones())
    x = tf.ones([1, 2])
    mod(x)

    @tf.function
    def f(x):
        with snt.custom_variable_getter(times_two):
            return mod(x)

    np.testing.assert_allclose(f(x).numpy(), [[4.0]])
    assert "__getattribute__" not in snt.Module.__dict__


def test_variables_are_visible_from_other_threads():
    # Patching is process-wide, like the class it patches.
    mod = Holder()
    seen = []
    with snt.custom_variable_getter(plus_ten):
        thread = threading.Thread(target=lambda: seen.append(float(mod.w)))
        thread.start()
        thread.join()
    assert seen == [12.0]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"getter": 3}, "getter"),
        ({"getter": tf.identity, "classes": 3}, "classes"),
        ({"getter": tf.identity, "classes": "Module"}, "classes"),
        ({"getter": tf.identity, "classes": [3]}, "classes"),
        ({"getter": tf.identity, "classes": [int]}, "classes"),
        ({"getter": tf.identity, "classes": [object]}, "classes"),
        ({"getter": tf.identity, "instances": 3}, "instances"),
        ({"getter": tf.identity, "instances": [3]}, "instances"),
    ],
)
def test_bad_arguments(kwargs, argument):
    with pytest.raises(TypeError, match=f"`{argument}`.*Received"):
        snt.custom_variable_getter(**kwargs)
    assert "__getattribute__" not in snt.Module.__dict__


@settings(max_examples=25, deadline=None)
@given(
    getter=st.one_of(st.just(tf.identity), bad_input.junk()),
    classes=bad_input.junk(),
    instances=bad_input.junk(),
)
def test_junk_arguments(getter, classes, instances):
    def build():
        with snt.custom_variable_getter(getter, classes=classes, instances=instances):
            pass

    bad_input.outcome(build, ["getter", "classes", "instances"])
    assert "__getattribute__" not in snt.Module.__dict__
