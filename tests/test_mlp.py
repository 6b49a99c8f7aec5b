"""Tests for `snt.nets.MLP`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _random(*shape: int) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[5, 6])


def _numpy_mlp(mlp: snt.nets.MLP, x: np.ndarray, activation, activate_final: bool):
    layers = mlp._layers
    for i, layer in enumerate(layers):
        x = x @ layer.w.numpy()
        if layer.with_bias:
            x = x + layer.b.numpy()
        if i < len(layers) - 1 or activate_final:
            x = activation(x)
    return x


def test_repr():
    assert repr(snt.nets.MLP([1, 2, 3])) == "MLP(output_sizes=[1, 2, 3])"
    mlp = snt.nets.MLP([1, 2, 3], activate_final=True)
    assert repr(mlp) == "MLP(output_sizes=[1, 2, 3], activate_final=True)"
    assert [repr(layer) for layer in mlp._layers] == [
        "Linear(output_size=1, name='linear_0')",
        "Linear(output_size=2, name='linear_1')",
        "Linear(output_size=3, name='linear_2')",
    ]


def test_submodules_variables_and_checkpoint_paths(tmp_path):
    mlp = snt.nets.MLP([3, 4, 5])
    assert list(mlp.submodules) == list(mlp._layers)
    mlp(tf.ones([1, 3]))
    assert [(v.name, v.shape.as_list()) for v in mlp.variables] == [
        ("mlp/linear_0/b:0", [3]),
        ("mlp/linear_0/w:0", [3, 3]),
        ("mlp/linear_1/b:0", [4]),
        ("mlp/linear_1/w:0", [3, 4]),
        ("mlp/linear_2/b:0", [5]),
        ("mlp/linear_2/w:0", [4, 5]),
    ]
    path = tf.train.Checkpoint(module=mlp).write(str(tmp_path / "ckpt"))
    keys = {name for name, _ in tf.train.list_variables(path)}
    assert len(keys) == 6 + 1  # the six variables and the object graph
    for i in range(3):
        assert f"module/_layers/{i}/w/.ATTRIBUTES/VARIABLE_VALUE" in keys
        assert f"module/_layers/{i}/b/.ATTRIBUTES/VARIABLE_VALUE" in keys


def test_without_bias_variables():
    mlp = snt.nets.MLP([3, 4], with_bias=False)
    mlp(tf.ones([1, 2]))
    assert [v.name for v in mlp.variables] == ["mlp/linear_0/w:0", "mlp/linear_1/w:0"]


def test_initializers_are_shared():
    w_init, b_init = snt.initializers.Constant(0.5), snt.initializers.Ones()
    mlp = snt.nets.MLP([2, 2], w_init=w_init, b_init=b_init)
    mlp(tf.ones([1, 2]))
    for layer in mlp._layers:
        assert layer.w_init is w_init and layer.b_init is b_init
        np.testing.assert_array_equal(layer.w.numpy(), np.full([2, 2], 0.5))


@pytest.mark.parametrize("activate_final", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matches_numpy(activate_final, with_bias):
    mlp = snt.nets.MLP(
        [6, 5, 4],
        activation=tf.tanh,
        activate_final=activate_final,
        with_bias=with_bias,
        b_init=snt.initializers.RandomNormal() if with_bias else None,
    )
    x = _random(3, 7)
    y = mlp(x)
    expected = _numpy_mlp(mlp, x.numpy(), np.tanh, activate_final)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_default_activation_is_relu():
    mlp = snt.nets.MLP([8, 3])
    x = _random(4, 5)
    relu = lambda v: np.maximum(v, 0)
    np.testing.assert_allclose(
        mlp(x).numpy(), _numpy_mlp(mlp, x.numpy(), relu, False), rtol=1e-5, atol=1e-5
    )


def test_rank3_inputs_and_tf_function():
    mlp = snt.nets.MLP([4, 2])
    x = _random(2, 3, 5)
    y = mlp(x)
    assert y.shape == [2, 3, 2]
    f = tf.function(mlp)
    np.testing.assert_allclose(f(x).numpy(), y.numpy(), rtol=1e-6)
    cf = f.get_concrete_function(tf.TensorSpec([None, 5]))
    assert cf.output_shapes.as_list() == [None, 2]
    assert "mlp/linear_0/MatMul" in [op.name for op in cf.graph.get_operations()]


# Dropout ----------------------------------------------------------------------


def test_dropout_before_activation_and_not_after_last_layer():
    # Hidden pre-activations are all 3; dropout makes them 0 or 6 and the
    # activation adds 100, so each output is 50 * 100 + 6 * kept + 1. (Dropout
    # after the activation would give 206 * kept + 1 instead.) The final layer's
    # outputs are never dropped, so all 50 of them are equal.
    tf.random.set_seed(0)
    mlp = snt.nets.MLP(
        [50, 50],
        activation=lambda x: x + 100.0,
        dropout_rate=0.5,
        w_init=snt.initializers.Ones(),
        b_init=snt.initializers.Ones(),
    )
    x = tf.ones([1, 2])
    y = mlp(x, is_training=True).numpy()
    assert len(set(y.ravel().tolist())) == 1
    kept = (y[0, 0] - 5001) / 6
    assert kept == round(kept) and 5 < kept < 45
    np.testing.assert_array_equal(
        mlp(x, is_training=False).numpy(), np.full([1, 50], 50 * 103 + 1)
    )


def test_dropout_with_activate_final():
    tf.random.set_seed(1)
    mlp = snt.nets.MLP([200], dropout_rate=0.5, activate_final=True)
    y = mlp(tf.ones([1, 4]), is_training=True).numpy()
    assert (y == 0).mean() > 0.6  # relu zeros ~half, dropout another ~half


def test_dropout_is_training_tensor():
    mlp = snt.nets.MLP(
        [100], dropout_rate=0.5, activate_final=True, activation=tf.identity
    )
    x = tf.ones([1, 3])
    clean = mlp(x, is_training=False).numpy()
    np.testing.assert_array_equal(mlp(x, is_training=tf.constant(False)).numpy(), clean)
    training = tf.Variable(True)
    f = tf.function(lambda x: mlp(x, is_training=training))
    assert (f(x).numpy() == 0).any()
    training.assign(False)
    np.testing.assert_array_equal(f(x).numpy(), clean)


def test_is_training_rules():
    with pytest.raises(ValueError, match="`is_training` must be given"):
        snt.nets.MLP([2], dropout_rate=0.5)(tf.ones([1, 2]))
    with pytest.raises(ValueError, match="`is_training` must be None unless"):
        snt.nets.MLP([2])(tf.ones([1, 2]), is_training=True)
    with pytest.raises(ValueError, match="`is_training` must be None unless"):
        snt.nets.MLP([2], dropout_rate=0)(tf.ones([1, 2]), is_training=False)
    with pytest.raises(TypeError, match="`is_training` must be a bool"):
        snt.nets.MLP([2], dropout_rate=0.5)(tf.ones([1, 2]), is_training="yes")


# reverse() --------------------------------------------------------------------


def test_reverse():
    w_init = snt.initializers.Ones()
    mlp = snt.nets.MLP([4, 5, 3], w_init=w_init, activation=tf.tanh, dropout_rate=0.1)
    mlp(tf.ones([2, 6]), is_training=False)
    reverse = mlp.reverse()
    assert reverse.name == "mlp_reversed"
    text = repr(reverse)
    assert text.startswith("MLP(\n    output_sizes=[5, 4, 6],\n    w_init=Ones(),\n")
    assert text.endswith("    dropout_rate=0.1,\n    name='mlp_reversed',\n)")
    assert [layer.output_size for layer in reverse._layers] == [5, 4, 6]
    assert reverse._w_init is w_init and reverse._activation is tf.tanh
    assert reverse._dropout_rate == 0.1 and not reverse._activate_final
    y = reverse(tf.ones([2, 3]), is_training=False)
    assert y.shape == [2, 6]
    assert [v.name for v in reverse.variables][:2] == [
        "mlp/mlp_reversed/linear_0/b:0",
        "mlp/mlp_reversed/linear_0/w:0",
    ]
    # No weight sharing.
    assert not {id(v) for v in reverse.variables} & {id(v) for v in mlp.variables}
    other = mlp.reverse(activate_final=True, name="decoder")
    assert other.name == "decoder" and other._activate_final


def test_reverse_before_call():
    with pytest.raises(ValueError, match="`reverse\\(\\)` needs the input size"):
        snt.nets.MLP([2]).reverse()


# Bad arguments ----------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"output_sizes": 3}, TypeError, "`output_sizes` must be a sequence"),
        ({"output_sizes": "3"}, TypeError, "`output_sizes` must be a sequence"),
        (
            {"output_sizes": [3, -1]},
            ValueError,
            "`output_sizes` must contain only integers >= 0",
        ),
        (
            {"output_sizes": [3, 2.0]},
            TypeError,
            "`output_sizes` must be a sequence of integers",
        ),
        ({"output_sizes": [3], "w_init": 1}, TypeError, "`w_init` must be a callable"),
        (
            {"output_sizes": [3], "b_init": "x"},
            TypeError,
            "`b_init` must be a callable",
        ),
        (
            {
                "output_sizes": [3],
                "with_bias": False,
                "b_init": snt.initializers.Ones(),
            },
            ValueError,
            "`b_init` must be None when `with_bias=False`",
        ),
        (
            {"output_sizes": [3], "with_bias": "no"},
            TypeError,
            "`with_bias` must be a bool",
        ),
        (
            {"output_sizes": [3], "activation": "relu"},
            TypeError,
            "`activation` must be",
        ),
        ({"output_sizes": tf.constant(3)}, TypeError, "`output_sizes` must be a"),
        (
            {"output_sizes": [3], "dropout_rate": 1.0},
            ValueError,
            "`dropout_rate` must be in",
        ),
        (
            {"output_sizes": [3], "dropout_rate": "0.1"},
            TypeError,
            "`dropout_rate` must be a",
        ),
        (
            {"output_sizes": [3], "activate_final": "1"},
            TypeError,
            "`activate_final` must be",
        ),
    ],
)
def test_bad_constructor_arguments(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.nets.MLP(**kwargs)


def test_bad_sizes_are_also_invalid_argument_errors():
    # The original failed in the layers' TF ops.
    for sizes in ([3, -1], [2.0]):
        with pytest.raises(tf.errors.InvalidArgumentError):
            snt.nets.MLP(sizes)


def test_b_init_without_bias_checked_before_its_type():
    with pytest.raises(ValueError, match="`b_init` must be None"):
        snt.nets.MLP([1], with_bias=False, b_init=object())


def test_sizes_in_any_integer_spelling():
    mlp = snt.nets.MLP([tf.constant(4), np.int64(3), True], with_bias=1)
    assert mlp(tf.ones([2, 5])).shape == [2, 1]
    assert [v.shape.as_list() for v in mlp.trainable_variables][1::2] == [
        [5, 4],
        [4, 3],
        [3, 1],
    ]


def test_empty_mlp_is_the_identity():
    x = tf.random.normal([2, 3])
    np.testing.assert_array_equal(snt.nets.MLP([])(x), x)


def test_activation_none_is_accepted_for_one_layer():
    assert snt.nets.MLP([2], activation=None)(tf.ones([1, 3])).shape == [1, 2]


def test_bad_inputs():
    mlp = snt.nets.MLP([3, 2])
    mlp(tf.ones([2, 4]))
    with pytest.raises(ValueError, match="`inputs` must have last dimension 4"):
        mlp(tf.ones([2, 5]))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        mlp(tf.ones([2, 4], tf.float64))


def test_activation_none_rejected_where_it_would_be_applied():
    with pytest.raises(TypeError, match="`activation` must be a function"):
        snt.nets.MLP([2, 2], activation=None)
    with pytest.raises(TypeError, match="`activation` must be a function"):
        snt.nets.MLP([2], activation=None, activate_final=True)
