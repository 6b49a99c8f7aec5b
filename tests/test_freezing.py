"""`snt.freeze` / `snt.unfreeze` / `snt.is_frozen`."""

from __future__ import annotations

import copy
import pickle

import keras
import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _mlp() -> snt.nets.MLP:
    mlp = snt.nets.MLP([4, 3, 2])
    mlp(tf.ones([1, 5]))
    return mlp


def _layer(mlp: snt.nets.MLP, i: int) -> snt.Linear:
    return [m for m in mlp.submodules if isinstance(m, snt.Linear)][i]


def _names(variables) -> list[str]:
    return [v.name for v in variables]


def test_frozen_submodule_leaves_trainable_variables_of_enclosing_modules():
    mlp = _mlp()
    before = _names(mlp.trainable_variables)
    assert snt.freeze(_layer(mlp, 1)) is _layer(mlp, 1)
    assert _names(mlp.trainable_variables) == [n for n in before if "linear_1" not in n]
    # `variables`, names and trainable flags are unchanged.
    assert len(mlp.variables) == 6
    assert all(v.trainable for v in mlp.variables)
    # The frozen module's own list is empty, without the empty-module error.
    assert _layer(mlp, 1).trainable_variables == ()
    assert snt.is_frozen(_layer(mlp, 1)) and not snt.is_frozen(mlp)
    snt.unfreeze(_layer(mlp, 1))
    assert _names(mlp.trainable_variables) == before


def test_freezing_a_tree_marks_every_submodule_and_later_modules_are_not():
    mlp = _mlp()
    snt.freeze(mlp)
    assert all(snt.is_frozen(m) for m in (mlp, *mlp.submodules))
    assert mlp.trainable_variables == ()
    # A module added later is trainable (what LoRA adapters rely on).
    mlp.extra = snt.Bias()
    mlp.extra(tf.ones([1, 2]))
    assert _names(mlp.trainable_variables) == ["bias/b:0"]
    snt.unfreeze(mlp)
    assert len(mlp.trainable_variables) == 7


def test_training_leaves_frozen_variables_unchanged():
    mlp = _mlp()
    snt.freeze(_layer(mlp, 0))
    frozen = [v.numpy() for v in _layer(mlp, 0).variables]
    others = [v.numpy() for v in _layer(mlp, 2).variables]
    optimizer = snt.optimizers.SGD(0.1)
    x = tf.random.normal([8, 5], seed=0)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(mlp(x) ** 2)
        params = mlp.trainable_variables
        optimizer.apply(tape.gradient(loss, params), params)
    for v, value in zip(_layer(mlp, 0).variables, frozen):
        np.testing.assert_array_equal(v.numpy(), value)
    assert any(
        not np.array_equal(v.numpy(), value)
        for v, value in zip(_layer(mlp, 2).variables, others)
    )


def test_checkpoints_and_names_do_not_change(tmp_path):
    mlp = _mlp()
    path = tf.train.Checkpoint(model=mlp).write(str(tmp_path / "plain"))
    snt.freeze(mlp)
    frozen_path = tf.train.Checkpoint(model=mlp).write(str(tmp_path / "frozen"))
    assert tf.train.list_variables(path) == tf.train.list_variables(frozen_path)
    fresh = _mlp()
    tf.train.Checkpoint(model=fresh).read(frozen_path).assert_consumed()
    for a, b in zip(mlp.variables, fresh.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_shared_variable_is_frozen_if_a_frozen_module_holds_it():
    shared = tf.Variable(1.0, name="shared")

    class Holder(snt.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.v = shared

        def __call__(self, x):
            return x * self.v

    a, b = Holder(name="a"), Holder(name="b")
    parent = snt.Sequential([a, b])
    snt.freeze(b)
    assert _names(parent.variables) == ["shared:0"]
    assert parent.trainable_variables == ()
    snt.unfreeze(b)
    assert _names(parent.trainable_variables) == ["shared:0"]


def test_keras_layers_held_by_a_frozen_module_are_frozen():
    class Head(snt.Module):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)
            self.scale = tf.Variable(1.0, name="scale")

        def __call__(self, x):
            return self.dense(x) * self.scale

    head = Head()
    head(tf.ones([1, 3]))
    outer = snt.Sequential([head, snt.Linear(2)])
    outer(tf.ones([1, 3]))
    snt.freeze(head)
    names = _names(outer.trainable_variables)
    assert len(names) == 2 and all(n.startswith("linear/") for n in names)
    assert len(outer.variables) == 5


def test_summary_counts_frozen_parameters_as_non_trainable():
    mlp = _mlp()
    snt.freeze(_layer(mlp, 0))
    result = snt.summary(mlp, tf.TensorSpec([1, 5]))
    assert result.trainable == 4 * 3 + 3 + 3 * 2 + 2
    assert result.non_trainable == 5 * 4 + 4
    rows = {row.path: row for row in result.rows}
    assert rows["mlp/linear_0"].trainable == 0


@pytest.mark.parametrize("clone", [pickle.loads, copy.deepcopy])
def test_pickle_and_copy_keep_the_mark(clone):
    mlp = _mlp()
    snt.freeze(_layer(mlp, 0))
    other = clone(pickle.dumps(mlp)) if clone is pickle.loads else clone(mlp)
    assert snt.is_frozen(_layer(other, 0)) and not snt.is_frozen(_layer(other, 1))
    assert len(other.trainable_variables) == 4


def test_tf_function_step_trains_only_unfrozen():
    mlp = _mlp()
    snt.freeze(_layer(mlp, 1))
    before = _layer(mlp, 1).w.numpy()
    optimizer = snt.optimizers.Adam(0.1)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(mlp(x) ** 2)
        params = mlp.trainable_variables
        optimizer.apply(tape.gradient(loss, params), params)
        return loss

    step(tf.ones([2, 5]))
    np.testing.assert_array_equal(_layer(mlp, 1).w.numpy(), before)
    assert len(optimizer.m) == 4


@pytest.mark.parametrize("function", [snt.freeze, snt.unfreeze, snt.is_frozen])
def test_bad_module(function):
    with pytest.raises(TypeError, match=r"`module` must be a `tf.Module`.*Received: "):
        function([snt.Linear(2)])


def test_walk_keeps_tf_module_order_with_shared_modules_and_containers():
    shared = snt.Linear(2, name="shared")

    class Tree(snt.Module):
        def __init__(self):
            super().__init__()
            self.z = [snt.Linear(3, name="z0"), {"b": shared, "a": snt.Linear(2)}]
            self.m = shared
            self.scale = tf.Variable(1.0, name="scale")
            self.fixed = tf.Variable(2.0, trainable=False, name="fixed")

        def __call__(self, x):
            y = self.z[0](x)
            return self.m(y) + self.z[1]["a"](y) + shared(y) * self.scale * self.fixed

    tree = Tree()
    tree(tf.ones([1, 4]))
    from sonnet._src import freezing, keras_variables

    plain = keras_variables.trainable_variables(tree)
    walked, dropped = freezing.trainable_variables(tree)
    assert [v.name for v in walked] == [v.name for v in plain] and not dropped
    assert len(plain) == 7
    # Frozen through one holder is frozen everywhere (`shared` is also `m`).
    snt.freeze(shared)
    assert [v.name for v in tree.trainable_variables] == [
        v.name for v in plain if not v.name.startswith("shared/")
    ]


# ---------------------------------------------------------------------------
# Keras 3 layers: frozen the Keras way, so Keras sees it too.


class KerasHead(snt.Module):
    """An `snt.Module` holding a Keras layer (with a sublayer) and a Linear."""

    def __init__(self):
        super().__init__()
        self.dense = keras.Sequential([keras.layers.Dense(3), keras.layers.Dense(2)])
        self.linear = snt.Linear(2)

    def __call__(self, x):
        return self.dense(x) + self.linear(x)


def _head() -> KerasHead:
    head = KerasHead()
    head(tf.ones([1, 4]))
    return head


def test_a_keras_layer_can_be_frozen_and_unfrozen():
    head = _head()
    layer = snt.KerasLayer(head)
    layer.build((None, 4))
    assert not snt.is_frozen(head.dense)
    assert snt.freeze(head.dense) is head.dense
    assert snt.is_frozen(head.dense) and not head.dense.trainable
    assert _names(head.trainable_variables) == [
        "keras_head/linear/b:0",
        "keras_head/linear/w:0",
    ]
    assert len(layer.trainable_weights) == 2 and len(layer.weights) == 6
    snt.unfreeze(head.dense)
    assert not snt.is_frozen(head.dense)
    assert len(head.trainable_variables) == 6
    assert len(layer.trainable_weights) == 6


def test_training_leaves_a_frozen_keras_layer_unchanged():
    head = _head()
    snt.freeze(head.dense)
    before = [w.numpy() for w in head.dense.weights]
    optimizer = snt.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(head(tf.ones([2, 4])) ** 2)
    params = head.trainable_variables
    optimizer.apply(tape.gradient(loss, params), params)
    for w, value in zip(head.dense.weights, before):
        np.testing.assert_array_equal(w.numpy(), value)


def test_unfreezing_a_keras_layer_restores_the_users_flags():
    head = _head()
    inner = head.dense.layers[1]
    inner.trainable = False  # The user's.
    snt.freeze(head.dense)
    snt.freeze(head.dense)  # Again: keeps what the first freeze found.
    snt.unfreeze(head.dense)
    assert head.dense.trainable and not inner.trainable
    assert len(head.trainable_variables) == 4
    head.dense.trainable = False  # Frozen by the user, not by `snt.freeze`:
    snt.unfreeze(head.dense)  # left alone.
    assert snt.is_frozen(head.dense)


def test_a_keras_layer_frozen_before_it_is_built():
    dense = keras.layers.Dense(2)
    snt.freeze(dense)
    holder = snt.Sequential([dense])
    holder(tf.ones([1, 3]))
    assert len(holder.variables) == 2 and holder.trainable_variables == ()
    snt.unfreeze(dense)
    assert len(holder.trainable_variables) == 2


def test_freezing_a_keras_layer_after_a_traced_read_warns():
    head = _head()
    tf.function(lambda: head.trainable_variables)()
    with pytest.warns(UserWarning, match=r"keras_head.trainable_variables.*traced"):
        snt.freeze(head.dense)
