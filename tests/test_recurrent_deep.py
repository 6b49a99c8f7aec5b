"""Tests for DeepRNN (and factories), recurrent dropout and TrainableState."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests import recurrent_reference as ref
from tests.conformance import bad_input


def _ckpt_keys(module, tmp_path) -> list[str]:
    path = tf.train.Checkpoint(module=module).write(str(tmp_path / "ckpt"))
    return sorted(
        name[len("module/") : -len("/.ATTRIBUTES/VARIABLE_VALUE")]
        for name, _ in tf.train.list_variables(path)
        if name.startswith("module/")
    )


# ---------------------------------------------------------------------------
# DeepRNN and the factories.


@pytest.mark.parametrize("mode", ref.MODES)
def test_deep_rnn_is_the_composition(mode):
    lstm, gru = snt.LSTM(3), snt.GRU(2)
    deep = snt.DeepRNN([lstm, tf.nn.relu, gru])
    x = ref.random(np.random.default_rng(0), 2, 4)
    state = deep.initial_state(2)
    out, next_state = ref.run(mode, deep, x, state)
    h1, s1 = lstm(x, state[0])
    h2, s2 = gru(tf.nn.relu(h1), state[1])
    np.testing.assert_allclose(out, h2, rtol=1e-5, atol=1e-6)
    assert len(next_state) == 2 and isinstance(next_state[0], snt.LSTMState)
    np.testing.assert_allclose(next_state[0].cell, s1.cell, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(next_state[1], s2, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("concat", [True, False])
def test_skip_connections(concat):
    a, b, c = snt.GRU(3), snt.GRU(2), snt.VanillaRNN(4)
    deep = snt.deep_rnn_with_skip_connections([a, b, c], concat_final_output=concat)
    x = ref.random(np.random.default_rng(1), 2, 5)
    state = deep.initial_state(2)
    out, _ = deep(x, state)
    o1, _ = a(x, state[0])
    o2, _ = b(tf.concat([x, o1], -1), state[1])
    o3, _ = c(tf.concat([x, o2], -1), state[2])
    expected = tf.concat([o1, o2, o3], -1) if concat else o3
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert deep.name == "deep_rnn_with_skip_connections"


def test_residual_connections(tmp_path):
    a, b = snt.LSTM(4), snt.GRU(4)
    deep = snt.deep_rnn_with_residual_connections([a, b])
    x = ref.random(np.random.default_rng(2), 2, 4)
    state = deep.initial_state(2)
    out, next_state = deep(x, state)
    o1, s1 = a(x, state[0])
    o2, _ = b(x + o1, state[1])
    np.testing.assert_allclose(out, x + o1 + o2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(next_state[0].hidden, s1.hidden, rtol=1e-5)
    assert deep.name == "deep_rnn_with_residual_connections"
    assert [layer.name for layer in deep._layers] == ["lstm_residual", "gru_residual"]
    assert _ckpt_keys(deep, tmp_path) == [
        "_layers/0/_base_core/_w_h",
        "_layers/0/_base_core/_w_i",
        "_layers/0/_base_core/b",
        "_layers/1/_base_core/_w_h",
        "_layers/1/_base_core/_w_i",
        "_layers/1/_base_core/b",
    ]


def test_deep_rnn_variables_and_paths(tmp_path):
    deep = snt.DeepRNN([snt.LSTM(3), snt.GRU(2)])
    deep(tf.ones([1, 3]), deep.initial_state(1))
    assert [v.name for v in deep.variables] == [
        "lstm/w_h:0",
        "lstm/w_i:0",
        "lstm/b:0",
        "gru/w_h:0",
        "gru/w_i:0",
        "gru/b:0",
    ]
    assert _ckpt_keys(deep, tmp_path) == [
        "_layers/0/_w_h",
        "_layers/0/_w_i",
        "_layers/0/b",
        "_layers/1/_w_h",
        "_layers/1/_w_i",
        "_layers/1/b",
    ]
    assert deep.name == "deep_rnn"


def test_deep_rnn_initial_state_forwards_kwargs():
    class Core(snt.RNNCore):
        def __call__(self, inputs, prev_state):
            return inputs, prev_state

        def initial_state(self, batch_size, scale=1.0):
            return tf.fill([batch_size, 1], scale)

    deep = snt.DeepRNN([Core(), tf.identity, Core()])
    state = deep.initial_state(2, scale=3.0)
    assert len(state) == 2
    np.testing.assert_array_equal(state[1], [[3.0], [3.0]])
    assert snt.DeepRNN([tf.identity]).initial_state(2) == ()


def test_deep_rnn_errors():
    # The original accepted these and failed on the first call (TypeError).
    with pytest.raises(TypeError, match="`layers` must be a sequence"):
        snt.DeepRNN(snt.LSTM(2))
    with pytest.raises(TypeError, match="`layers` must be a sequence"):
        snt.DeepRNN("ab")
    with pytest.raises(TypeError, match="`layers` must contain only RNN cores"):
        snt.DeepRNN([snt.LSTM(2), 3])
    deep = snt.DeepRNN([snt.LSTM(2), snt.GRU(2)])
    with pytest.raises(ValueError, match="`prev_state` must be a tuple of 2 states"):
        deep(tf.ones([1, 2]), deep.initial_state(1)[:1])
    with pytest.raises(TypeError, match="`prev_state` must be a tuple of 2 states"):
        deep(tf.ones([1, 2]), None)
    # The factories raise ValueErrors for layers that are not cores, as the
    # original (its own tests check this).
    with pytest.raises(ValueError, match="`layers` must contain only `snt.RNNCore`s"):
        snt.deep_rnn_with_skip_connections([snt.LSTM(2), tf.nn.relu])
    with pytest.raises(ValueError, match="`layers` must contain only `snt.RNNCore`s"):
        snt.deep_rnn_with_residual_connections([tf.nn.relu])
    with pytest.raises(ValueError, match="`layers` must contain only `snt.RNNCore`s"):
        snt.deep_rnn_with_skip_connections("ab")
    with pytest.raises(TypeError, match="`layers` must be a sequence of `snt.RNN"):
        snt.deep_rnn_with_residual_connections(None)
    with pytest.raises(TypeError, match="`layers` must be a sequence of `snt.RNN"):
        snt.deep_rnn_with_skip_connections(3)
    with pytest.raises(TypeError, match="`concat_final_output` must be a bool"):
        snt.deep_rnn_with_skip_connections([snt.LSTM(2)], concat_final_output="no")
    with pytest.raises(TypeError, match="`skip_connections` must be a bool"):
        type(snt.deep_rnn_with_skip_connections([snt.LSTM(2)]))([], "yes")
    # Skip connections concatenate the layers' outputs: none is an error at
    # the call (the original's `tf.nest` failed there with a ValueError).
    empty = snt.deep_rnn_with_skip_connections([])
    with pytest.raises(ValueError, match="`layers` must not be empty"):
        empty(tf.ones([1, 2]), ())
    out, state = snt.deep_rnn_with_skip_connections([], concat_final_output=False)(
        tf.ones([1, 2]), ()
    )
    assert out.shape == [1, 2] and state == ()
    residual = snt.deep_rnn_with_residual_connections([snt.LSTM(3)])
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="`inputs` must broadcast against the wrapped core's outputs",
    ):
        residual(tf.ones([1, 2]), residual.initial_state(1))

    class Image(snt.RNNCore):
        def __call__(self, inputs, prev_state):
            return tf.zeros([1, 2, 3]), prev_state

        def initial_state(self, batch_size):
            return tf.zeros([batch_size])

    skip = snt.deep_rnn_with_skip_connections([Image(), Image()])
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`inputs` could not be concatenated"
    ):
        skip(tf.ones([1, 2]), skip.initial_state(1))

    class Nested(snt.RNNCore):
        def __call__(self, inputs, prev_state):
            return (inputs, inputs), prev_state

        def initial_state(self, batch_size):
            return tf.zeros([batch_size])

    with pytest.raises(ValueError, match="`inputs` must have the nested structure"):
        skip = snt.deep_rnn_with_skip_connections([Nested(), Nested()])
        skip(tf.ones([1, 2]), skip.initial_state(1))


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["DeepRNN", "skip", "residual"]),
    bad_input.junk(),
)
def test_junk_deep_rnn_arguments(kind, value):
    make = {
        "DeepRNN": snt.DeepRNN,
        "skip": snt.deep_rnn_with_skip_connections,
        "residual": snt.deep_rnn_with_residual_connections,
    }[kind]
    ok, deep = bad_input.outcome(lambda: make(value), ["layers"])
    if ok:
        bad_input.outcome(
            lambda: deep(tf.ones([1, 2]), deep.initial_state(1)),
            ["inputs", "prev_state", "layers"],
        )


@settings(max_examples=25, deadline=None)
@given(bad_input.junk(), st.integers(0, 2))
def test_junk_deep_rnn_state(value, position):
    deep = snt.DeepRNN([snt.LSTM(2), snt.GRU(2)])
    state = list(deep.initial_state(1))
    deep(tf.ones([1, 3]), tuple(state))
    if position < 2:
        state[position] = value
        bad = tuple(state)
    else:
        bad = value
    before = bad_input.snapshot(deep)
    ok, _ = bad_input.outcome(
        lambda: deep(tf.ones([1, 3]), bad), ["inputs", "prev_state"]
    )
    if not ok:
        bad_input.assert_unchanged(deep, before)


# ---------------------------------------------------------------------------
# Recurrent dropout.


def test_recurrent_dropout_masks_and_sharing(tmp_path):
    train, test = snt.lstm_with_recurrent_dropout(50, dropout=0.4, seed=3)
    assert isinstance(test, snt.LSTM) and train.name == "lstm_recurrent_dropout"
    core_state, masks = train.initial_state(8)
    assert masks.cell is None
    values = np.unique(masks.hidden.numpy())
    np.testing.assert_allclose(values, [0.0, 1 / 0.6], rtol=1e-6)
    assert 0.2 < np.mean(masks.hidden.numpy() == 0) < 0.6
    x = ref.random(np.random.default_rng(0), 8, 3)
    prev = snt.LSTMState(*ref.random(np.random.default_rng(1), 2, 8, 50))
    out, (next_state, next_masks) = train(x, (prev, masks))
    assert next_masks is masks
    expected, _ = test(x, snt.LSTMState(prev.hidden * masks.hidden, prev.cell))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert train.trainable_variables == test.trainable_variables
    assert _ckpt_keys(train, tmp_path) == [
        "_base_core/_w_h",
        "_base_core/_w_i",
        "_base_core/b",
    ]


def test_recurrent_dropout_masks_constant_over_time():
    train, _ = snt.lstm_with_recurrent_dropout(4, dropout=0.5)
    state = train.initial_state(2)
    _, (_, masks) = snt.dynamic_unroll(train, tf.ones([3, 2, 2]), state)
    np.testing.assert_array_equal(masks.hidden, state[1].hidden)


def test_recurrent_dropout_inside_tf_function():
    # A global seed makes the test independent of earlier tests. With one,
    # TensorFlow's first two calls of a function that created variables give
    # the same random values (also without Sonnet); later calls differ.
    tf.random.set_seed(1)
    train, _ = snt.lstm_with_recurrent_dropout(64, dropout=0.5)

    @tf.function
    def step(x):
        state = train.initial_state(4)
        return train(x, state), state[1].hidden

    @tf.function
    def other(x):
        return train(x, train.initial_state(4))

    (out, (_, masks)), _ = step(tf.ones([4, 3]))
    _, second = step(tf.ones([4, 3]))
    other(tf.ones([4, 3]))
    eager_state = train.initial_state(4)
    train(tf.ones([4, 3]), eager_state)
    _, third = step(tf.ones([4, 3]))
    # Fresh masks on every call (nothing cached from an earlier trace).
    assert not np.array_equal(second, third)
    assert out.shape == [4, 64]


def test_recurrent_dropout_errors():
    with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\)"):
        snt.lstm_with_recurrent_dropout(3, dropout=1.0)
    with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\)"):
        snt.lstm_with_recurrent_dropout(3, dropout=True)
    with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\)"):
        snt.lstm_with_recurrent_dropout(3, dropout=tf.Variable(1.0))
    with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\)"):
        snt.lstm_with_recurrent_dropout(3, dropout=np.array(1.0))
    with pytest.raises(ValueError, match="`dropout` must be >= 0"):
        snt.lstm_with_recurrent_dropout(3, dropout=-0.1)
    with pytest.raises(TypeError, match="`dropout` must be a real number"):
        snt.lstm_with_recurrent_dropout(3, dropout="0.5")
    with pytest.raises(TypeError, match="`dropout` must be a real number"):
        snt.lstm_with_recurrent_dropout(3, dropout=None)
    with pytest.raises(TypeError, match="`seed` must be an integer or None"):
        snt.lstm_with_recurrent_dropout(3, seed=1.5)
    with pytest.raises(ValueError, match="`hidden_size` must be a non-negative"):
        snt.lstm_with_recurrent_dropout(-1)
    train, _ = snt.lstm_with_recurrent_dropout(3)
    with pytest.raises(ValueError, match="`prev_state` must be a pair"):
        train(tf.ones([1, 2]), (*train.initial_state(1), None))
    core_state, masks = train.initial_state(1)
    with pytest.raises(ValueError, match="`prev_state` must hold dropout masks"):
        train(tf.ones([1, 2]), (core_state, masks.hidden))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["hidden_size", "dropout", "seed"]), bad_input.junk())
def test_junk_recurrent_dropout_arguments(argument, value):
    kwargs = {"hidden_size": 2, argument: value}
    ok, cores = bad_input.outcome(
        lambda: snt.lstm_with_recurrent_dropout(**kwargs), [argument]
    )
    if ok:
        train, _ = cores
        train(tf.ones([1, 2]), train.initial_state(1))


# ---------------------------------------------------------------------------
# TrainableState.


def test_trainable_state_for_core(tmp_path):
    state_module = snt.TrainableState.for_core(snt.LSTM(3, projection_size=2))
    assert [(v.name, v.shape.as_list()) for v in state_module.variables] == [
        ("trainable_state/hidden:0", [1, 2]),
        ("trainable_state/cell:0", [1, 3]),
    ]
    assert _ckpt_keys(state_module, tmp_path) == ["_template/cell", "_template/hidden"]
    state_module._template.cell.assign([[1.0, 2.0, 3.0]])
    state = state_module(4)
    assert isinstance(state, snt.LSTMState)
    np.testing.assert_array_equal(state.cell, np.tile([[1.0, 2.0, 3.0]], [4, 1]))
    np.testing.assert_array_equal(state.hidden, np.zeros([4, 2]))


def test_trainable_state_single_tensor_and_mask(tmp_path):
    single = snt.TrainableState(tf.constant([1.0, 2.0]))
    assert [v.name for v in single.variables] == ["trainable_state/state:0"]
    assert _ckpt_keys(single, tmp_path / "a") == ["_template"]
    np.testing.assert_array_equal(single(2), [[1.0, 2.0], [1.0, 2.0]])

    nested = snt.TrainableState(
        (tf.zeros([2]), {"b": tf.ones([]), "a": tf.zeros([1, 3])}),
        mask=(False, {"a": True, "b": False}),
        name="init",
    )
    assert [(v.name, v.trainable) for v in nested.variables] == [
        ("init/0:0", False),
        ("init/1/a:0", True),
        ("init/1/b:0", False),
    ]
    assert [v.name for v in nested.trainable_variables] == ["init/1/a:0"]
    assert _ckpt_keys(nested, tmp_path / "b") == [
        "_template/0",
        "_template/1/a",
        "_template/1/b",
    ]
    zero, rest = nested(3)
    assert type(rest) is dict and rest["a"].shape == [3, 1, 3]
    assert zero.shape == [3, 2] and rest["b"].shape == [3]


def test_trainable_state_gradient_and_tensor_batch():
    state_module = snt.TrainableState.for_core(snt.GRU(2))

    @tf.function
    def loss(x):
        with tf.GradientTape() as tape:
            state = state_module(tf.shape(x)[0])
            value = tf.reduce_sum(state * 2.0)
        return state.shape, tape.gradient(value, state_module.trainable_variables)

    shape, grads = loss(tf.ones([5, 1]))
    np.testing.assert_array_equal(grads[0], [[10.0, 10.0]])


def test_trainable_state_errors():
    # None (and anything else TF cannot convert) was the original's
    # conversion ValueError.
    with pytest.raises(ValueError, match="`initial_values` must contain tensors"):
        snt.TrainableState([None])
    with pytest.raises(ValueError, match="`initial_values` must contain values"):
        snt.TrainableState([object()])
    with pytest.raises(ValueError, match="`mask` must have the structure"):
        snt.TrainableState((tf.zeros([1]), tf.zeros([1])), mask=(True,))
    with pytest.raises(TypeError, match="`mask` must be a bool"):
        snt.TrainableState(tf.zeros([1]), mask="yes")
    with pytest.raises(TypeError, match="`core` must have an `initial_state"):
        snt.TrainableState.for_core(tf.nn.relu)
    state_module = snt.TrainableState(tf.zeros([1]))
    with pytest.raises(TypeError, match="`batch_size` must be an integer"):
        state_module(1.0)
    with pytest.raises(ValueError, match="`batch_size` must be an integer"):
        state_module("1")
    with pytest.raises(tf.errors.InvalidArgumentError, match="`batch_size` must be"):
        state_module(-1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="`batch_size` must be"):
        state_module(tf.constant([1, 2]))


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["initial_values", "mask", "name", "batch_size"]), bad_input.junk()
)
def test_junk_trainable_state_arguments(argument, value):
    if argument == "batch_size":
        state_module = snt.TrainableState(tf.zeros([2]))
        bad_input.outcome(lambda: state_module(value), ["batch_size"])
        return
    kwargs = {"initial_values": tf.zeros([2]), argument: value}
    ok, state_module = bad_input.outcome(
        lambda: snt.TrainableState(**kwargs), [argument]
    )
    if ok:
        state_module(2)
