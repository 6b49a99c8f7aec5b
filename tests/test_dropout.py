"""Tests for `snt.Dropout`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def test_repr():
    assert repr(snt.Dropout(0.5)) == "Dropout(rate=0.5)"
    assert repr(snt.Dropout(0.5, seed=1)) == "Dropout(rate=0.5, seed=1)"


def test_no_variables_unless_rate_is_a_variable():
    with pytest.raises(ValueError, match="does not currently contain any variables"):
        snt.Dropout(0.5).variables  # noqa: B018
    rate = tf.Variable(0.5)
    dropout = snt.Dropout(rate)
    assert dropout.variables == (rate,)


def test_variable_rate_checkpoint_path(tmp_path):
    dropout = snt.Dropout(tf.Variable(0.5))
    path = tf.train.Checkpoint(module=dropout).write(str(tmp_path / "ckpt"))
    names = [name for name, _ in tf.train.list_variables(path)]
    assert "module/_rate/.ATTRIBUTES/VARIABLE_VALUE" in names


def test_not_training_returns_inputs():
    x = tf.ones([3, 4])
    assert snt.Dropout(0.9)(x, is_training=False) is x
    assert snt.Dropout(0.9)(x, False) is x
    # Not training, even a non-float input passes through.
    ids = tf.constant([1, 2])
    assert snt.Dropout(0.5)(ids, is_training=False) is ids


@pytest.mark.parametrize("rate", [0.2, 0.5, 0.8])
def test_training_statistics(rate):
    tf.random.set_seed(0)
    x = tf.ones([200, 200])
    y = snt.Dropout(rate)(x, is_training=True).numpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / (1 - rate), rtol=1e-6)
    assert kept.mean() == pytest.approx(1 - rate, abs=0.02)


def test_rate_zero_keeps_everything():
    x = tf.random.stateless_normal([4, 5], seed=[1, 1])
    np.testing.assert_allclose(snt.Dropout(0.0)(x, is_training=True).numpy(), x.numpy())


def test_seed_makes_masks_reproducible():
    x = tf.ones([10, 10])
    dropout = snt.Dropout(0.5, seed=7)
    tf.random.set_seed(1)
    a = dropout(x, is_training=True)
    tf.random.set_seed(1)
    b = dropout(x, is_training=True)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_noise_shape_drops_whole_rows():
    tf.random.set_seed(0)
    y = snt.Dropout(0.5, noise_shape=[50, 1])(tf.ones([50, 8]), is_training=True)
    y = y.numpy()
    for row in y:
        assert len(set(row.tolist())) == 1
    assert {0.0, 2.0} == set(y.ravel().tolist())


def test_variable_rate_can_change():
    rate = tf.Variable(0.5)
    dropout = snt.Dropout(rate)
    x = tf.ones([100, 100])
    assert (dropout(x, is_training=True).numpy() == 0).any()
    rate.assign(0.0)
    np.testing.assert_array_equal(dropout(x, is_training=True).numpy(), x.numpy())


def test_tensor_is_training_eager():
    x = tf.ones([100, 10])
    dropout = snt.Dropout(0.5)
    assert dropout(x, tf.constant(False)) is x
    assert (dropout(x, tf.constant(True)).numpy() == 0).any()


@pytest.mark.parametrize("autograph", [True, False])
def test_tensor_is_training_traced(autograph):
    dropout = snt.Dropout(0.5)
    training = tf.Variable(True)
    f = tf.function(lambda x: dropout(x, training), autograph=autograph)
    x = tf.ones([100, 10])
    assert (f(x).numpy() == 0).any()
    training.assign(False)
    np.testing.assert_array_equal(f(x).numpy(), x.numpy())


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"rate": -0.1}, ValueError, r"`rate` must be in \[0, 1\)"),
        ({"rate": 1.0}, ValueError, r"`rate` must be in \[0, 1\)"),
        ({"rate": float("nan")}, ValueError, "`rate` must be finite"),
        ({"rate": "0.5"}, ValueError, "`rate` must be a number in"),
        ({"rate": None}, ValueError, "`rate` must be a number in"),
        ({"rate": True}, ValueError, r"`rate` must be in \[0, 1\)"),
        ({"rate": tf.Variable(1)}, ValueError, "`rate` must be a number in"),
        ({"rate": tf.Variable([0.5])}, ValueError, "`rate` must be a scalar"),
        ({"rate": tf.constant(1.5)}, ValueError, r"`rate` must be in \[0, 1\)"),
        ({"rate": 0.5, "noise_shape": 3}, TypeError, "`noise_shape` must be None or"),
        ({"rate": 0.5, "noise_shape": [2.0]}, TypeError, "`noise_shape` must contain"),
        ({"rate": 0.5, "noise_shape": [-2]}, ValueError, "`noise_shape` must contain"),
        ({"rate": 0.5, "seed": 1.5}, TypeError, "`seed` must be an integer"),
        ({"rate": 0.5, "seed": "1"}, TypeError, "`seed` must be an integer"),
    ],
)
def test_bad_arguments_fail_on_the_first_training_call(kwargs, error, fragment):
    # As in the original: evaluation ignores them, training checks them.
    dropout = snt.Dropout(**kwargs)
    x = tf.ones([2, 4])
    assert dropout(x, is_training=False) is x
    with pytest.raises(error, match=fragment):
        dropout(x, is_training=True)
    with pytest.raises(error, match=fragment):  # Until they are fixed.
        dropout(x, is_training=True)


def test_bad_is_training():
    with pytest.raises(TypeError, match="`is_training` must be a bool"):
        snt.Dropout(0.5)(tf.ones([2]), "yes")


@pytest.mark.parametrize(
    "is_training, training",
    [
        (None, False),
        (0, False),
        (1, True),
        (np.bool_(True), True),
        (tf.constant(1.0), True),
    ],
)
def test_is_training_by_truth_value(is_training, training):
    # The original tested `if not is_training:`.
    x = tf.ones([1000])
    y = snt.Dropout(0.5)(x, is_training)
    assert bool((y.numpy() == 0).any()) == training


def test_integer_inputs_in_training():
    with pytest.raises(TypeError, match="`x` must be a floating point tensor"):
        snt.Dropout(0.5)(tf.constant([1, 2]), is_training=True)


@pytest.mark.parametrize("noise_shape", [[2, 1, 1], [3, 1], [1]])
def test_noise_shape_must_fit_inputs(noise_shape):
    dropout = snt.Dropout(0.5, noise_shape=noise_shape)
    with pytest.raises(ValueError, match="`noise_shape` must have one size per axis"):
        dropout(tf.ones([2, 4]), is_training=True)


@pytest.mark.parametrize("noise_shape", [[3, 4], [2, 2, 4]])
def test_tensor_noise_shape_mismatch(noise_shape):
    dropout = snt.Dropout(0.5, noise_shape=tf.constant(noise_shape))
    with pytest.raises(ValueError, match="`noise_shape` must broadcast"):
        dropout(tf.ones([2, 4]), is_training=True)


@pytest.mark.parametrize(
    "rate, seed", [(np.float32(0.5), 1.0), (np.array(0.5), np.int64(3)), (0.5, True)]
)
def test_numbers_in_any_spelling(rate, seed):
    dropout = snt.Dropout(rate, seed=seed)
    assert dropout._seed == int(seed)
    assert dropout(tf.ones([4]), is_training=True).shape == [4]
