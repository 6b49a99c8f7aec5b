"""`snt.KerasLayer`: Sonnet modules trained and saved by Keras 3."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _data(n: int = 128) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


def _model(module: snt.Module) -> keras.Model:
    model = keras.Sequential([keras.Input((4,)), snt.KerasLayer(module)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model


def test_keras_sees_the_module_variables_themselves():
    mlp = snt.nets.MLP([8, 1])
    model = _model(mlp)
    assert len(model.trainable_variables) == 4
    ours = {id(v) for v in mlp.trainable_variables}
    assert {id(v.value) for v in model.trainable_variables} == ours


def test_fit_reduces_the_loss_and_trains_the_module():
    mlp = snt.nets.MLP([16, 1])
    model = _model(mlp)
    x, y = _data()
    before = [v.numpy() for v in mlp.variables]
    history = model.fit(x, y, epochs=4, batch_size=32, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    assert all(not np.array_equal(a, v.numpy()) for a, v in zip(before, mlp.variables))
    np.testing.assert_allclose(
        model.predict(x, verbose=0), mlp(x), rtol=1e-5, atol=1e-6
    )


def test_sonnet_checkpoint_reflects_keras_training(tmp_path):
    mlp = snt.nets.MLP([8, 1])
    model = _model(mlp)
    x, y = _data()
    model.fit(x, y, epochs=2, batch_size=32, verbose=0)
    path = tf.train.Checkpoint(module=mlp).write(str(tmp_path / "ckpt"))
    fresh = snt.nets.MLP([8, 1])
    tf.train.Checkpoint(module=fresh).read(path)
    np.testing.assert_allclose(
        fresh(x), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6
    )


def test_keras_weights_round_trip(tmp_path):
    mlp = snt.nets.MLP([8, 1])
    model = _model(mlp)
    path = str(tmp_path / "w.weights.h5")
    model.save_weights(path)
    saved = [v.numpy() for v in mlp.variables]
    for v in mlp.variables:
        v.assign(tf.zeros_like(v))
    model.load_weights(path)
    for a, v in zip(saved, mlp.variables):
        np.testing.assert_array_equal(a, v.numpy())


def test_training_flag_reaches_is_training():
    bn = snt.BatchNorm(create_scale=True, create_offset=True)
    layer = snt.KerasLayer(bn)
    x = tf.constant(_data(8)[0])
    layer(x, training=True)  # Updates the moving statistics.
    assert int(bn.moving_mean._counter.numpy()) >= 1
    moving = bn.moving_mean.value.numpy()
    layer(x, training=False)
    np.testing.assert_array_equal(bn.moving_mean.value.numpy(), moving)
    assert {id(v.value) for v in layer.non_trainable_variables} <= {
        id(v) for v in bn.variables
    }


def test_built_module_is_not_called_again():
    linear = snt.Linear(2)
    linear(tf.ones([1, 3]))
    w = linear.w
    layer = snt.KerasLayer(linear)
    layer.build((None, 3))
    assert (
        layer.trainable_variables[1].value is w
        or layer.trainable_variables[0].value is w
    )


def test_training_argument_forced_for_optional_is_training():
    mlp = snt.nets.MLP([8, 1], dropout_rate=0.5)
    layer = snt.KerasLayer(mlp, training_argument=True)
    x = tf.ones([4, 4])
    np.testing.assert_array_equal(layer(x, training=False), layer(x, training=False))
    assert not snt.KerasLayer(snt.nets.MLP([2]))._is_training


def test_rejects_bad_arguments():
    with pytest.raises(TypeError, match="`module` must be a callable tf.Module"):
        snt.KerasLayer(lambda x: x)
    with pytest.raises(ValueError, match="`training_argument` must be"):
        snt.KerasLayer(snt.Linear(1), training_argument="yes")
    with pytest.raises(ValueError, match="`training_argument` must have a single"):
        snt.KerasLayer(snt.Linear(1), training_argument=np.array([1, 2]))
