"""Keras 3 layers and variables inside Sonnet modules: tracked and trained."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _storage(weights) -> list[tf.Variable]:
    return [w.value for w in weights]


def _ids(variables) -> list[int]:
    return [id(v) for v in variables]


class Holder(snt.Module):
    """Holds whatever it is given, under the given attribute names."""

    def __init__(self, **attributes):
        super().__init__()
        for name, value in attributes.items():
            setattr(self, name, value)


# ---------------------------------------------------------------------------
# What `variables` and `trainable_variables` list.


def test_keras_layers_variables_and_containers_are_found():
    dense = keras.layers.Dense(3)
    dense.build((None, 2))
    bn = keras.layers.BatchNormalization()
    bn.build((None, 3))
    in_list = keras.layers.Dense(1)
    in_list.build((None, 3))
    frozen_value = keras.Variable(1.0, trainable=False)
    m = Holder(dense=dense, layers=[in_list], stats={"bn": bn}, scalar=frozen_value)
    expected = (
        _storage(dense.weights)
        + _storage(in_list.weights)
        + [frozen_value.value]
        + _storage(bn.weights)
    )
    assert _ids(m.variables) == _ids(expected)
    assert all(isinstance(v, tf.Variable) for v in m.variables)
    trainable = (
        _storage(dense.weights) + _storage(in_list.weights) + [bn.gamma, bn.beta]
    )
    trainable = [v.value if isinstance(v, keras.Variable) else v for v in trainable]
    assert _ids(m.trainable_variables) == _ids(trainable)
    assert id(bn.moving_mean.value) in _ids(m.variables)
    assert id(bn.moving_mean.value) not in _ids(m.trainable_variables)


def test_order_is_tf_modules_with_keras_objects_in_place():
    first = keras.layers.Dense(2)
    first.build((None, 2))
    last = keras.layers.Dense(2)
    last.build((None, 2))
    child = snt.Linear(2)
    child(tf.ones([1, 2]))
    m = Holder(a_dense=first, b=tf.Variable(1.0), c_child=child, d_dense=last)
    expected = (
        _storage(first.weights)  # `a_dense`
        + [m.b]
        + _storage(last.weights)  # `d_dense`; then the submodule `c_child`.
        + [child.b, child.w]
    )
    assert _ids(m.variables) == _ids(expected)


def test_layers_inside_keras_layers_and_models():
    inner = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3), inner])
    m = Holder(model=model)
    assert len(m.variables) == 4
    assert _ids(m.variables) == _ids(_storage(model.weights))


def test_sonnet_module_inside_keras_inside_sonnet():
    linear = snt.Linear(3)
    wrapped = keras.Sequential([keras.Input((2,)), snt.KerasLayer(linear)])
    m = Holder(wrapped=wrapped)
    assert sorted(_ids(m.variables)) == sorted(_ids(linear.variables))


def test_a_variable_reachable_twice_is_listed_once():
    linear = snt.Linear(3)
    layer = snt.KerasLayer(linear)
    layer.build((None, 2))
    m = Holder(layer=layer, linear=linear)
    assert len(m.variables) == 2
    assert sorted(_ids(m.variables)) == sorted(_ids(linear.variables))


def test_frozen_keras_layers_are_not_trainable():
    dense = keras.layers.Dense(3)
    dense.build((None, 2))
    dense.trainable = False
    m = Holder(dense=dense, w=tf.Variable(1.0))
    assert len(m.variables) == 3
    assert _ids(m.trainable_variables) == [id(m.w)]


def test_unbuilt_keras_layers_have_no_variables():
    m = Holder(dense=keras.layers.Dense(3), w=tf.Variable(1.0))
    assert _ids(m.variables) == [id(m.w)]
    empty = Holder(dense=keras.layers.Dense(3))
    for prop in ("variables", "trainable_variables"):
        with pytest.raises(ValueError, match="does not currently contain any"):
            getattr(empty, prop)
    assert snt.allow_empty_variables(empty).variables == ()


def test_plain_modules_are_unchanged():
    mlp = snt.nets.MLP([4, 2])
    mlp(tf.ones([1, 3]))
    assert mlp.variables == tf.Module.variables.fget(mlp)
    assert mlp.trainable_variables == tf.Module.trainable_variables.fget(mlp)
    assert isinstance(mlp.variables, tuple)


class _ReadsItsVariables(snt.Module):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)
        self.seen: list[tf.Variable] = []

    def __call__(self, x):
        y = self.dense(x)
        self.seen = list(self.trainable_variables)
        return y


def test_storage_is_found_inside_a_keras_autocast_scope():
    # Under a mixed precision policy Keras casts reads of float32 variables
    # (`keras.Variable.value` is then a float16 tensor, not the variable).
    module = _ReadsItsVariables()
    layer = snt.KerasLayer(module, dtype="mixed_float16")
    layer(tf.ones([1, 3]))
    assert len(module.seen) == 2
    assert all(isinstance(v, tf.Variable) for v in module.seen)
    assert all(v.dtype == tf.float32 for v in module.seen)


# ---------------------------------------------------------------------------
# Training the Sonnet way trains the Keras layers.


class Net(snt.Module):
    """Keras Dense, BatchNormalization and MultiHeadAttention, and snt.Linear."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(8)
        self.norm = keras.layers.BatchNormalization()
        self.attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
        self.head = snt.Linear(1)

    def __call__(self, x, is_training):
        h = tf.nn.relu(self.dense(x))
        h = self.norm(h, training=is_training)
        h = self.attention(h, h)
        return self.head(h)


def _batch() -> tuple[tf.Tensor, tf.Tensor]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 3, 4)).astype("float32")
    return tf.constant(x), tf.constant(x.sum(axis=-1, keepdims=True))


def _loss(net: Net, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    return tf.reduce_mean((net(x, is_training=True) - y) ** 2)


def _train_step(net: Net, optimizer: snt.Optimizer):
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = _loss(net, x, y)
        params = net.trainable_variables
        grads = tape.gradient(loss, params)
        optimizer.apply(grads, params)
        return loss

    return step


def _assert_trained(net: Net, before: dict[str, np.ndarray]) -> None:
    # Dense 2, BatchNormalization 4, attention 8 (4 projections), Linear 2;
    assert len(net.variables) == len(before) == 16
    # all but the 2 batch-norm statistics are trainable.
    assert len(net.trainable_variables) == 14
    unchanged = [
        name
        for name, value in before.items()
        if np.array_equal(value, _value(net, name))
    ]
    assert not unchanged
    statistics = {v.name for v in net.variables} - {
        v.name for v in net.trainable_variables
    }
    assert len(statistics) == 2 and all("moving" in n for n in statistics)


def _value(net: Net, name: str) -> np.ndarray:
    (variable,) = [v for v in net.variables if v.name == name]
    return variable.numpy()


def _snapshot(net: Net) -> dict[str, np.ndarray]:
    return {v.name: v.numpy().copy() for v in net.variables}


@pytest.mark.parametrize("mode", ["eager", "tf_function", "xla"])
def test_training_loop_updates_keras_layers(mode):
    tf.random.set_seed(0)
    net, optimizer = Net(), snt.optimizers.Adam(0.01)
    x, y = _batch()
    step = _train_step(net, optimizer)
    if mode != "eager":
        step = tf.function(step, jit_compile=mode == "xla")
    net(x, is_training=False)
    before = _snapshot(net)
    losses = [float(step(x, y)) for _ in range(10)]
    assert losses[-1] < losses[0]
    _assert_trained(net, before)


def test_keras_layers_built_inside_the_first_trace_are_trained():
    net, optimizer = Net(), snt.optimizers.SGD(0.01)
    x, y = _batch()
    step = tf.function(_train_step(net, optimizer))
    first = float(step(x, y))
    before = _snapshot(net)
    step(x, y)
    _assert_trained(net, before)
    assert float(step(x, y)) < first


def test_training_loop_under_a_two_replica_replicator():
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    replicator = snt.distribute.Replicator(devices)
    with replicator.scope():
        net, optimizer = Net(), snt.optimizers.Adam(0.01)
    x, y = _batch()

    @tf.function
    def build(x):
        replicator.run(lambda x: net(x, is_training=False), (x,))

    @tf.function
    def step(x, y):
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = _loss(net, x, y)
            params = net.trainable_variables
            grads = tape.gradient(loss, params)
            context = tf.distribute.get_replica_context()
            grads = context.all_reduce("mean", grads)  # pyright: ignore
            optimizer.apply(grads, params)
            return loss

        losses = replicator.run(replica_step, (x, y))
        return replicator.reduce("mean", losses, axis=None)

    build(x)
    assert all(len(v.values) == 2 for v in net.variables)  # pyright: ignore
    before = _snapshot(net)
    losses = [float(step(x, y)) for _ in range(5)]
    assert losses[-1] < losses[0]
    _assert_trained(net, before)


def test_keras_fit_trains_keras_layers_inside_a_wrapped_module():
    class Block(snt.Module):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(4)
            self.head = snt.Linear(1)

        def __call__(self, x):
            return self.head(tf.nn.relu(self.dense(x)))

    block = Block()
    model = keras.Sequential([keras.Input((4,)), snt.KerasLayer(block)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    assert len(model.trainable_variables) == 4
    x, y = _batch()
    before = block.dense.kernel.numpy()
    model.fit(x[:, 0], y[:, 0], epochs=2, batch_size=4, verbose=0)
    assert not np.array_equal(before, block.dense.kernel.numpy())


def test_sonnet_checkpoints_are_unchanged(tmp_path):
    # The Keras layer was always in the checkpoint (it is a trackable
    # attribute); only `variables` changed.
    net = Net()
    x, _ = _batch()
    net(x, is_training=False)
    path = tf.train.Checkpoint(net=net).write(str(tmp_path / "ckpt"))
    names = [name for name, _ in tf.train.list_variables(path)]
    assert "net/dense/_kernel/.ATTRIBUTES/VARIABLE_VALUE" in names
    assert "net/norm/moving_mean/.ATTRIBUTES/VARIABLE_VALUE" in names
    fresh = Net()
    fresh(x, is_training=False)
    tf.train.Checkpoint(net=fresh).read(path).assert_consumed()
    np.testing.assert_allclose(
        fresh(x, is_training=False), net(x, is_training=False), rtol=1e-6
    )


def test_summary_counts_keras_parameters():
    class Block(snt.Module):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(5)
            self.norm = keras.layers.BatchNormalization()

        def __call__(self, x):
            return self.norm(self.dense(x), training=False)

    result = snt.summary(Block(), tf.TensorSpec([2, 3]))
    # Dense 3 * 5 + 5; batch norm: gamma and beta trainable, statistics not.
    assert (result.trainable, result.non_trainable) == (20 + 10, 10)
    assert (result.rows[0].trainable, result.rows[0].non_trainable) == (30, 10)
