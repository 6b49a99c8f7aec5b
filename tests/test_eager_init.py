"""Variables created by modules while a `tf.function` is traced."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


class _Spy(snt.initializers.Initializer):
    """Ones, recording whether each call ran eagerly."""

    def __init__(self) -> None:
        self.eagerly: list[bool] = []

    def __call__(self, shape, dtype):
        self.eagerly.append(tf.executing_eagerly())
        return tf.ones(shape, dtype)


@contextlib.contextmanager
def _where_created() -> Iterator[dict[str, bool]]:
    """Records, by variable name, whether each variable was created eagerly."""
    seen: dict[str, bool] = {}

    def spy(next_creator, **kwargs):
        seen[kwargs["name"]] = tf.executing_eagerly()
        return next_creator(**kwargs)

    with tf.variable_creator_scope(spy):
        yield seen


class TwoLayers(snt.Module):
    def __init__(self, w_init: snt.initializers.Initializer):
        super().__init__()
        self.linear = snt.Linear(3, w_init=w_init)
        self.norm = snt.BatchNorm(True, True)
        self.out = snt.Linear(2, w_init=snt.initializers.Constant(0.5))

    def __call__(self, x):
        return self.out(self.norm(self.linear(x), is_training=True))


def test_first_call_traces_once_with_eager_initial_values():
    w_init = _Spy()
    net = TwoLayers(w_init)
    step = tf.function(net)
    x = tf.reshape(tf.range(8, dtype=tf.float32), [2, 4])
    step(x)
    # No variable needed a conditional initializer in the graph, so
    # TensorFlow did not trace a second time.
    assert step.experimental_get_tracing_count() == 1
    assert w_init.eagerly == [True]
    names = [v.name for v in net.variables]
    assert "two_layers/linear/w:0" in names
    assert "two_layers/batch_norm/moving_mean/hidden:0" in names
    # Same maths (and state updates) as the module run eagerly.
    eager = TwoLayers(_Spy())
    eager(x)
    for _ in range(2):
        np.testing.assert_allclose(step(x), eager(x), rtol=1e-6)
    for a, b in zip(eager.variables, net.variables, strict=True):
        assert a.name == b.name
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_input_dependent_initial_values_stay_in_the_graph():
    class FromInput(snt.Module):
        @snt.once
        def _initialize(self, x):
            self.v = tf.Variable(x * 2, name="v")

        def __call__(self, x):
            self._initialize(x)
            return self.v + x

    module = FromInput()
    step = tf.function(module)
    np.testing.assert_array_equal(step(tf.constant([1.0, 2.0])), [3.0, 6.0])
    assert step.experimental_get_tracing_count() == 2  # TensorFlow's usual way.


def test_initializer_with_a_graph_shape_falls_back_to_the_graph():
    w_init = _Spy()

    class DynamicShape(snt.Module):
        @snt.once
        def _initialize(self, x):
            self.v = tf.Variable(w_init(tf.shape(x), tf.float32), shape=[None])

        def __call__(self, x):
            self._initialize(x)
            return self.v

    module = DynamicShape()
    out = tf.function(module)(tf.zeros([3]))
    np.testing.assert_array_equal(out, [1.0, 1.0, 1.0])
    assert w_init.eagerly[-1] is False


def test_device_scope_keeps_variables_in_the_graph():
    lin = snt.Linear(2, w_init=_Spy())

    @tf.function
    def step(x):
        with tf.device("CPU:0"):
            return lin(x)

    with _where_created() as seen:
        step(tf.ones([1, 3]))
    assert seen == {"w": False, "b": False}


def test_user_creator_scopes_still_see_every_variable():
    seen = []

    def spy(next_creator, **kwargs):
        seen.append(kwargs["name"])
        return next_creator(**kwargs)

    lin = snt.Linear(2)
    with tf.variable_creator_scope(spy):
        tf.function(lin)(tf.ones([1, 3]))
    assert sorted(seen) == ["b", "w"]


def test_module_first_built_in_a_later_trace():
    first, second = snt.Linear(2), snt.Linear(2)

    @tf.function
    def step(x):
        out = first(x)
        if x.shape[0] == 2:  # Only seen by the second trace.
            out += second(x)
        return out

    step(tf.ones([1, 3]))
    out = step(tf.ones([2, 3]))
    expected = first(tf.ones([2, 3])) + second(tf.ones([2, 3]))
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_restore_on_create_inside_the_first_trace(tmp_path):
    source = snt.Linear(2)
    source(tf.ones([1, 3]))
    path = tf.train.Checkpoint(model=source).write(str(tmp_path / "ckpt"))
    target = snt.Linear(2)
    tf.train.Checkpoint(model=target).read(path).assert_existing_objects_matched()
    out = tf.function(target)(tf.ones([1, 3]))
    np.testing.assert_array_equal(target.w.numpy(), source.w.numpy())
    np.testing.assert_allclose(out, source(tf.ones([1, 3])))


def test_seeded_initial_values_are_reproducible():
    def build() -> np.ndarray:
        tf.random.set_seed(7)
        lin = snt.Linear(3)
        tf.function(lin)(tf.ones([1, 4]))
        return lin.w.numpy()

    np.testing.assert_array_equal(build(), build())


def test_functional_jit_init_keeps_fresh_values_per_call():
    # Its initial values stay in the traced graph (not computed once, eagerly).
    f = snt.functional.transform(snt.Linear(3))
    init = snt.functional.jit(f.init)
    x = tf.ones([1, 4])
    a, b = (sorted(init(x).values(), key=lambda v: v.shape.rank) for _ in "ab")
    assert a[1].shape == [4, 3]
    assert not np.array_equal(a[1], b[1])


def test_create_variables_eagerly_also_traces_once():
    lin = snt.Linear(2)
    step = tf.function(snt.distribute.create_variables_eagerly(lin))
    step(tf.ones([1, 3]))
    assert step.experimental_get_tracing_count() == 1


class Doubled(snt.Module):
    """A user module that derives its initial value from an initializer."""

    def __init__(self, init):
        super().__init__()
        self._init = init

    @snt.once
    def _initialize(self, x):
        self.w = tf.Variable(self._init([x.shape[-1], 2], tf.float32) * 2, name="w")

    def __call__(self, x):
        self._initialize(x)
        return tf.matmul(x, self.w)


@pytest.mark.parametrize(
    "init",
    [
        snt.initializers.Constant(1.5),
        lambda shape, dtype: tf.fill(shape, tf.constant(1.5, dtype)),
    ],
    ids=["Initializer", "function"],
)
def test_derived_initial_value_is_created_outside_the_trace(init):
    module = Doubled(init)
    optimizer = snt.optimizers.SGD(0.1)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(module(x))
        grads = tape.gradient(loss, module.trainable_variables)
        optimizer.apply(grads, module.trainable_variables)
        return loss

    x = tf.ones([1, 3])
    with _where_created() as seen:
        loss = step(x)
    assert seen == {"w": True}
    assert step.experimental_get_tracing_count() == 1
    np.testing.assert_allclose(loss, 3 * 2 * 3.0)
    # One SGD step from 3.0: the gradient of the sum is x for every weight.
    np.testing.assert_allclose(module.w.numpy(), np.full([3, 2], 3.0 - 0.1))
    step(x)
    np.testing.assert_allclose(module.w.numpy(), np.full([3, 2], 3.0 - 0.2))


def test_user_initializers_are_not_rewritten():
    ran_eagerly = []

    class Halves(snt.initializers.Initializer):
        def __call__(self, shape, dtype):
            ran_eagerly.append(tf.executing_eagerly())
            return tf.fill(shape, tf.constant(0.5, dtype))

    assert Halves.__call__.__qualname__.endswith("Halves.__call__")
    # Called in a trace outside module initialisation, it runs in the graph.
    tf.function(lambda: Halves()([1], tf.float32))()
    assert ran_eagerly == [False]


def test_only_module_initialisation_moves_out_of_the_trace():
    eagerly = []

    class Plain:
        @snt.once
        def setup(self):
            eagerly.append(tf.executing_eagerly())

    @snt.once
    def setup():
        eagerly.append(tf.executing_eagerly())

    tf.function(lambda: Plain().setup() or setup())()
    assert eagerly == [False, False]


def test_submodule_moves_out_when_its_parent_needs_the_graph():
    class Parent(snt.Module):
        def __init__(self):
            super().__init__()
            self.linear = snt.Linear(2, w_init=snt.initializers.Ones())

        @snt.once
        def _initialize(self, x):
            self.scale = tf.Variable(tf.reduce_mean(x), name="scale")
            self.linear(x)  # Built in the graph's retry of this method.

        def __call__(self, x):
            self._initialize(x)
            return self.scale * self.linear(x)

    module = Parent()
    with _where_created() as seen:
        out = tf.function(module)(tf.fill([1, 3], 2.0))
    np.testing.assert_allclose(out, [[12.0, 12.0]])
    assert seen == {"scale": False, "w": True, "b": True}


class _LazyParts(snt.Module):
    """Makes its submodules, a name scope and a variable on its first call."""

    @snt.once
    def _initialize(self, x: tf.Tensor) -> None:
        self.first = snt.Linear(3)
        self.second = snt.Linear(3)
        with tf.name_scope("inner"):
            self.inner = snt.Linear(2)
        self.scale = tf.Variable(tf.ones([x.shape[-1]]), name="scale")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        self._initialize(x)
        y = self.first(x * self.scale) + self.second(x)
        return y + tf.reduce_sum(self.inner(x))


def _scopes(module: _LazyParts) -> list[str]:
    return [m.name_scope.name for m in (module.first, module.second, module.inner)]


def test_scopes_made_in_a_moved_initialisation_are_named_as_in_the_trace():
    # In the trace (as in Sonnet 2.0.2, whose initialisation ran there) a
    # scope name is made unique within the graph; variables' own names are not.
    a, b = _LazyParts(name="parts"), _LazyParts(name="parts")
    x = tf.ones([2, 4])
    with _where_created() as seen:
        tf.function(lambda x: a(x) + b(x))(x)
    assert all(seen.values())  # Created eagerly, outside the trace.
    assert _scopes(a) == ["parts/linear/", "parts/linear_1/", "parts/inner/linear/"]
    assert _scopes(b) == [
        "parts/linear_2/",
        "parts/linear_3/",
        "parts/inner_1/linear/",
    ]
    assert sorted(v.name for v in b.variables) == [
        "parts/inner_1/linear/b:0",
        "parts/inner_1/linear/w:0",
        "parts/linear_2/b:0",
        "parts/linear_2/w:0",
        "parts/linear_3/b:0",
        "parts/linear_3/w:0",
        "parts/scale:0",
    ]
    # Eagerly, names repeat.
    c = _LazyParts(name="parts")
    c(x)
    assert _scopes(c) == ["parts/linear/", "parts/linear/", "parts/inner/linear/"]


def test_scope_names_are_given_back_when_the_initialisation_needs_the_graph():
    class FromValues(snt.Module):
        @snt.once
        def _initialize(self, x: tf.Tensor) -> None:
            self.linear = snt.Linear(3)
            self.start = tf.Variable(x[0], name="start")  # Needs the graph.

        def __call__(self, x: tf.Tensor) -> tf.Tensor:
            self._initialize(x)
            return self.linear(x) * self.start

    module = FromValues()
    tf.function(module)(tf.ones([2, 3]))
    # Taken outside the trace first, then given back: not `linear_1`.
    assert module.linear.name_scope.name == "from_values/linear/"


def test_other_threads_name_scopes_are_unchanged_during_a_moved_initialisation():
    import threading

    entered = threading.Event()
    release = threading.Event()
    names: list[str] = []

    class Slow(snt.Module):
        @snt.once
        def _initialize(self, x: tf.Tensor) -> None:
            del x
            entered.set()
            release.wait(10)
            self.linear = snt.Linear(2)

        def __call__(self, x: tf.Tensor) -> tf.Tensor:
            self._initialize(x)
            return self.linear(x)

    def other() -> None:
        entered.wait(10)
        for _ in range(2):
            with tf.name_scope("other") as scope:
                names.append(scope)
        release.set()

    thread = threading.Thread(target=other)
    thread.start()
    tf.function(Slow())(tf.ones([1, 2]))
    thread.join()
    assert names == ["other/", "other/"]
