"""Tests for the module machinery: names, scopes, repr, variables, once."""

from __future__ import annotations

import abc
import copy
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import base


class Scale(snt.Module):
    """Multiplies by a lazily created scalar variable."""

    def __init__(self, init: float = 2.0, name: str | None = None):
        super().__init__(name=name)
        self.init = init

    @snt.once
    def _initialize(self, x):
        self.w = tf.Variable(tf.fill([x.shape[-1]], self.init), name="w")

    def __call__(self, x):
        self._initialize(x)
        return x * self.w


class Tree(snt.Module):
    def __init__(self, name: str | None = None):
        super().__init__(name=name)
        self.b_child = Scale(name="b_child")
        self.a_child = Scale(name="a_child")
        self.z = tf.Variable(0.0, name="z")
        self._y = tf.Variable(0.0, name="y")

    def __call__(self, x):
        return self.a_child(self.b_child(x))


# Names and scopes -----------------------------------------------------------


@pytest.mark.parametrize(
    "cls_name, expected",
    [
        ("Linear", "linear"),
        ("Conv2D", "conv2_d"),
        ("Conv2DLSTM", "conv2_dlstm"),
        ("BatchNorm", "batch_norm"),
        ("ResNet50", "res_net50"),
        ("MLP", "mlp"),
        ("Cifar10ConvNet", "cifar10_conv_net"),
    ],
)
def test_default_name_is_snake_case_class_name(cls_name, expected):
    cls = type(cls_name, (snt.Module,), {})
    assert cls().name == expected


def test_explicit_name_and_scope():
    m = Scale(name="foo")
    assert m.name == "foo"
    assert m.name_scope.name == "foo/"


@pytest.mark.parametrize("name", ["1abc", "a b", "a-b", "", "a/b"])
def test_invalid_name_raises(name):
    with pytest.raises(ValueError, match=r"`name`.*Received: "):
        Scale(name=name)


def test_non_string_name_raises():
    with pytest.raises(TypeError, match=r"`name`.*Received: 3"):
        snt.Module(name=3)  # type: ignore[arg-type]


def test_module_in_outer_name_scope():
    with tf.name_scope("outer"):
        m = Scale()
    assert m.name == "scale"
    assert m.name_scope.name == "outer/scale/"
    m(tf.ones([1, 2]))
    assert m.w.name == "outer/scale/w:0"


def test_method_runs_in_name_scope():
    m = Scale()
    m(tf.ones([1, 2]))
    assert m.w.name == "scale/w:0"


def test_constructor_runs_in_name_scope():
    class CtorVar(snt.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(1.0, name="v")

    assert CtorVar().v.name == "ctor_var/v:0"


def test_no_name_scope_on_init():
    class NoScopeCtor(snt.Module):
        @snt.no_name_scope
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(1.0, name="v")

    assert NoScopeCtor().v.name == "v:0"


def test_no_name_scope_on_method_and_property():
    class Mixed(snt.Module):
        @snt.no_name_scope
        def make(self):
            return tf.Variable(1.0, name="plain")

        def scoped(self):
            return tf.Variable(1.0, name="scoped")

        @property
        def prop(self):
            return tf.Variable(1.0, name="prop")

        @property
        @snt.no_name_scope
        def plain_prop(self):
            return tf.Variable(1.0, name="plain_prop")

    m = Mixed()
    assert m.make().name == "plain:0"
    assert m.scoped().name == "mixed/scoped:0"
    assert m.prop.name == "mixed/prop:0"
    assert m.plain_prop.name == "plain_prop:0"


def test_dunder_methods_other_than_call_not_scoped():
    class Dunder(snt.Module):
        def __len__(self):
            self.v = tf.Variable(1.0, name="v")
            return 1

    d = Dunder()
    len(d)
    assert d.v.name == "v:0"


def test_static_and_class_methods_left_alone():
    class Static(snt.Module):
        @staticmethod
        def s(x):
            return x + 1

        @classmethod
        def c(cls, x):
            return x + 2

    assert Static.s(1) == 2
    assert Static.c(1) == 3
    assert Static().s(1) == 2


def test_wrapped_methods_keep_name_and_signature():
    assert Scale.__call__.__name__ == "__call__"
    import inspect

    assert list(inspect.signature(Scale.__call__).parameters) == ["self", "x"]


def test_wrapt_decorated_method_sees_its_instance():
    wrapt = pytest.importorskip("wrapt")
    seen = []

    @wrapt.decorator
    def square_result(method, instance, args, kwargs):
        seen.append(instance)
        scope, y = method(*args, **kwargs)
        return scope, y**2

    class WraptModule(snt.Module):
        @square_result
        def __call__(self, x):
            return tf.get_current_name_scope(), x**2

    mod = WraptModule()
    assert mod(3) == ("wrapt_module", 81)
    assert seen == [mod]
    scope, y = tf.function(mod)(tf.constant(2))
    assert scope == "wrapt_module" and int(y) == 16


def test_missing_super_init_raises():
    class NoSuper(snt.Module):
        def __init__(self):
            pass

    with pytest.raises(ValueError, match=r"super\(\).__init__\(\)"):
        NoSuper()


def test_method_before_super_init_raises():
    class Early(snt.Module):
        def __init__(self):
            self.helper()
            super().__init__()

        def helper(self):
            pass

    with pytest.raises(AttributeError, match="super constructor"):
        Early()


def test_ctor_scope_closed_on_exception():
    class Failing(snt.Module):
        def __init__(self):
            super().__init__()
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        Failing()
    assert tf.Variable(1.0, name="after").name == "after:0"


def test_tf_function_method_enters_scope():
    class Traced(snt.Module):
        @tf.function
        def __call__(self, x):
            if not hasattr(self, "v"):
                self.v = tf.Variable(2.0, name="v")
            return x * self.v

    m = Traced()
    assert float(m(tf.constant(3.0))) == 6.0
    assert m.v.name == "traced/v:0"
    assert m.__call__.get_concrete_function(tf.TensorSpec([])) is not None


def test_env_var_disables_method_scopes():
    code = (
        "import os, tensorflow as tf, sonnet as snt\n"
        "class M(snt.Module):\n"
        "  def f(self):\n"
        "    return tf.Variable(1.0, name='v')\n"
        "print(M().f().name)\n"
    )
    env = dict(os.environ, SNT_MODULE_NAME_SCOPES="false", TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "v:0"


# repr ------------------------------------------------------------------------


def test_repr_omits_defaults():
    assert repr(Scale()) == "Scale()"
    assert repr(Scale(3.0)) == "Scale(init=3.0)"
    assert repr(Scale(name="x")) == "Scale(name='x')"
    assert repr(Scale(2.0, "x")) == "Scale(name='x')"
    assert str(Scale(name="x")) == "Scale(name='x')"


def test_repr_wildcards():
    class WildcardInit(snt.Module):
        def __init__(self, a, b, *args, **kwargs):
            super().__init__()

    assert (
        repr(WildcardInit(1, 2, 3, foo="bar")) == "WildcardInit(a=1, b=2, 3, foo='bar')"
    )


def test_repr_unequal_defaults_compare_safely():
    class ArrayArg(snt.Module):
        def __init__(self, value=None):
            super().__init__()

    assert repr(ArrayArg(np.zeros([2]))) == "ArrayArg(value=array([0., 0.]))"


def test_repr_multiline():
    class Holder(snt.Module):
        def __init__(self, layers=None, name=None):
            super().__init__(name=name)

    text = repr(
        Holder(
            layers=[
                Scale(name="a_very_long_name_for_this"),
                Scale(name="another_long_name_here_too"),
            ]
        )
    )
    assert text == (
        "Holder(\n"
        "    layers=[Scale(name='a_very_long_name_for_this'),\n"
        "            Scale(name='another_long_name_here_too')],\n"
        ")"
    )


def test_custom_repr_kept():
    class Custom(snt.Module):
        def __repr__(self):
            return "custom!"

    assert repr(Custom()) == "custom!"


def test_auto_repr_function():
    assert base.auto_repr(Scale, 2.0) == "Scale()"


# variables -------------------------------------------------------------------


def test_variables_order_and_submodules():
    t = Tree()
    t(tf.ones([1, 2]))
    # Own attributes sorted by name (`_y` before `a_child`...), then submodules
    # in the order they were found.
    assert [v.name for v in t.variables] == [
        "tree/y:0",
        "tree/z:0",
        "tree/a_child/w:0",
        "tree/b_child/w:0",
    ]
    assert [m.name for m in t.submodules] == ["a_child", "b_child"]
    assert len(t.trainable_variables) == 4
    assert t.non_trainable_variables == ()


def test_trainable_split():
    class Both(snt.Module):
        def __init__(self):
            super().__init__()
            self.t = tf.Variable(1.0)
            self.n = tf.Variable(1.0, trainable=False)

    b = Both()
    assert b.trainable_variables == (b.t,)
    assert b.non_trainable_variables == (b.n,)


def test_empty_variables_raise():
    m = Scale()
    with pytest.raises(ValueError, match="does not currently contain any variables"):
        _ = m.variables
    with pytest.raises(ValueError, match="trainable_variables"):
        _ = m.trainable_variables
    assert m.non_trainable_variables == ()
    assert m.submodules == ()


def test_allow_empty_variables_instance_and_class():
    assert snt.allow_empty_variables(Scale()).variables == ()

    @snt.allow_empty_variables
    class Stateless(snt.Module):
        pass

    assert Stateless().trainable_variables == ()


# once ------------------------------------------------------------------------


def test_once_per_instance():
    calls = []

    class C:
        @snt.once
        def f(self):
            calls.append(self)

    a, b = C(), C()
    a.f()
    a.f()
    b.f()
    assert calls == [a, b]


def test_once_retries_after_exception():
    attempts = []

    @snt.once
    def f():
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first")

    with pytest.raises(RuntimeError):
        f()
    f()
    f()
    assert len(attempts) == 2


def test_once_rejects_return_values():
    @snt.once
    def f():
        return 1

    with pytest.raises(ValueError, match="must return None. Received: 1"):
        f()


def test_once_of_a_non_callable():
    # The original failed with `AttributeError`; ours is a `TypeError` too.
    with pytest.raises(TypeError, match="`f` must be callable") as info:
        snt.once(3)
    assert isinstance(info.value, AttributeError)


def test_once_bound_method_and_callable():
    calls = []

    class C:
        def f(self):
            calls.append("f")

        def __call__(self):
            calls.append("call")

    c = C()
    g = snt.once(c.f)
    g()
    g()
    h = snt.once(c)
    h()
    h()
    assert calls == ["f", "call"]
    assert g.__snt_once_wrapped__ == c.f
    assert h.__snt_once_wrapped__ is c


def test_once_survives_copy_and_pickle():
    m = Scale()
    m(tf.ones([1, 2]))
    for clone in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        w = clone.w
        clone(tf.ones([1, 2]))
        assert clone.w is w


# Optimizer -----------------------------------------------------------------


def test_optimizer_is_abstract():
    with pytest.raises(TypeError):
        snt.Optimizer()  # type: ignore[abstract]

    class Plain(snt.Optimizer):
        def apply(self, updates, parameters):
            for u, p in zip(updates, parameters):
                p.assign_sub(u)

    v = tf.Variable(1.0)
    Plain().apply([tf.constant(0.5)], [v])
    assert float(v) == 0.5


def test_abstract_methods_on_modules():
    class Abstract(snt.Module):
        @abc.abstractmethod
        def f(self):
            pass

    with pytest.raises(TypeError):
        Abstract()  # type: ignore[abstract]


# Copy, pickle, SavedModel ----------------------------------------------------


def test_deepcopy_and_pickle_give_independent_equal_modules():
    t = Tree()
    x = tf.ones([1, 2])
    y = t(x)
    for clone in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert [v.name for v in clone.variables] == [v.name for v in t.variables]
        assert all(a is not b for a, b in zip(clone.variables, t.variables))
        np.testing.assert_array_equal(clone(x), y)
        clone.a_child.w.assign([5.0, 5.0])
        assert t.a_child.w.numpy().tolist() == [2.0, 2.0]


def test_saved_model_export(tmp_path):
    t = Tree()
    x = tf.ones([1, 2])
    t(x)
    export = snt.Module(name="export")
    export.tree = t
    export.all_variables = list(t.variables)
    export.inference = tf.function(
        t.__call__, input_signature=[tf.TensorSpec([None, 2])]
    )
    tf.saved_model.save(export, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    np.testing.assert_array_equal(loaded.inference(x), t(x))
    assert [v.name for v in loaded.all_variables] == [v.name for v in t.variables]


def test_src_not_reachable():
    code = (
        "import importlib, sonnet as snt\n"
        "assert not hasattr(snt, '_src') and not hasattr(snt, 'src')\n"
        "importlib.reload(snt)\n"
        "assert not hasattr(snt, '_src') and not hasattr(snt, 'src')\n"
        "print('ok')\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_version():
    assert snt.__version__ == "2.1.0.dev0"


def test_format_variables_matches_original_layout():
    with tf.device("/cpu:0"):
        with tf.name_scope("m1"):
            v1 = tf.Variable(tf.zeros([3, 4]), name="v1")
        with tf.name_scope("m2"):
            v2 = tf.Variable(tf.zeros([5], tf.int32), name="v2", trainable=False)
    assert snt.format_variables([v2, v1]) == (
        "| Variable   | Spec     | Trainable   | Device   |\n"
        "|------------+----------+-------------+----------|\n"
        "| m1/v1      | f32[3,4] | True        | CPU      |\n"
        "| m2/v2      | i32[5]   | False       | CPU      |"
    )


def test_format_variables_groups_by_scope_and_rank():
    a = tf.Variable(tf.zeros([2]), name="s/a")
    b = tf.Variable(tf.zeros([2, 2]), name="s/b")
    c = tf.Variable(tf.zeros([], tf.bfloat16), name="t/c")
    lines = snt.format_variables([c, a, b], tablefmt="plain").splitlines()[1:]
    assert [line.split()[0] for line in lines] == ["s/b", "s/a", "t/c"]
    assert "bf16[]" in lines[2]


def test_log_variables(caplog):
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    with caplog.at_level("INFO"):
        snt.log_variables([tf.Variable(1.0, name="logged")])
    assert any("logged" in r.getMessage() for r in caplog.records)


def test_deferred_builds_once_in_caller_scope_and_forwards():
    with tf.name_scope("outer"):
        d = snt.Deferred(lambda: snt.Linear(2), call_methods=("__call__",))
    assert "Deferred" not in d.__dict__
    y = d(tf.ones([1, 3]))
    assert y.shape == [1, 2]
    assert d.target is d.target
    assert d.w.name == "linear/w:0"
    assert d.output_size == 2
    d.output_size = 7
    assert d.target.output_size == 7
    assert repr(d) == "Deferred(Linear(output_size=2))"


def test_deferred_errors():
    with pytest.raises(TypeError, match="`constructor`.*Received: 3"):
        snt.Deferred(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`call_methods`.*Received: 'f'"):
        snt.Deferred(lambda: snt.Linear(1), call_methods="f")
    d = snt.Deferred(lambda: snt.Linear(1))
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = d.missing


def test_deferred_call_methods():
    class Target(snt.Module):
        def double(self, x):
            return 2 * x

    d = snt.Deferred(Target, call_methods=("double",))
    assert d.double(3) == 6


def test_build_returns_output_specs_and_creates_variables():
    lin = snt.Linear(4)
    spec = snt.build(lin, [None, 3])
    assert spec == tf.TensorSpec([None, 4], tf.float32)
    assert [v.shape.as_list() for v in lin.variables] == [[4], [3, 4]]
    assert snt.build(lambda x: None, [1]) is None
    assert snt.build(lambda x: (x, None), tf.TensorSpec([2], tf.int32)) == (
        tf.TensorSpec([2], tf.int32),
        None,
    )


class ConstantAndRandom(snt.Module):
    def __init__(self, device: str | None = None):
        super().__init__()
        self._device = device

    @snt.once
    def _initialize(self, x):
        with tf.device(self._device):
            self.zeros = tf.Variable(tf.zeros([3]), name="zeros")
            self.random = tf.Variable(tf.random.normal([3]), name="random")

    def __call__(self, x):
        self._initialize(x)
        return x + self.zeros + self.random


@pytest.mark.parametrize("device", [None, "CPU:0"])
def test_once_creates_variables_eagerly_while_tracing(device):
    # A module's `once` method runs outside the trace, with the device scopes
    # it opens itself; the creator stack sees every variable.
    eagerly = {}

    def spy(next_creator, **kwargs):
        eagerly[kwargs["name"]] = tf.executing_eagerly()
        return next_creator(**kwargs)

    module = ConstantAndRandom(device)
    with tf.variable_creator_scope(spy):
        fn = tf.function(module)
        out = fn(tf.ones([3]))
    assert eagerly == {"zeros": True, "random": True}
    if device is not None:
        assert module.zeros.device.endswith(device)
    assert module.zeros.name == "constant_and_random/zeros:0"
    np.testing.assert_array_equal(module.zeros.numpy(), np.zeros([3]))
    np.testing.assert_allclose(out.numpy(), 1 + module.random.numpy())


def test_repr_during_construction_does_not_raise():
    seen = []

    class Early(snt.Module):
        def __init__(self):
            seen.append(repr(self))  # Before `super().__init__()`.
            super().__init__()
            seen.append(repr(self))  # Before the constructor returns.

    module = Early()
    assert all(text.startswith("<") and "Early" in text for text in seen)
    assert repr(module) == "Early()"
