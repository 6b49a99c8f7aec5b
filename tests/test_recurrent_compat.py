"""Drop-in fidelity of the recurrent family with Sonnet 2.0.2 (issue 12).

Every spelling of an argument the original accepted works here (sizes as
NumPy integers or scalar tensors, batch sizes as float tensors, falsy
initializers, per-unit forget biases, ...), rejections carry the original's
exception classes, `sequence_length` outputs repeat the last valid step as in
the original, and every public API runs under an AutoGraph `tf.function` with
known and unknown batch sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests import recurrent_reference as ref

B, D = 3, 4

# Sizes as the original's `tf.zeros`/`tf.Variable` shapes took them.
SIZE_SPELLINGS = [
    pytest.param(lambda: np.int64(2), id="np.int64"),
    pytest.param(lambda: np.int32(2), id="np.int32"),
    pytest.param(lambda: np.array(2), id="np0d"),
    pytest.param(lambda: tf.constant(2), id="tensor"),
    pytest.param(lambda: tf.constant(2, tf.int64), id="tensor_int64"),
]

CORES = {
    "LSTM": lambda n: snt.LSTM(n),
    "LSTM-projection": lambda n: snt.LSTM(5, projection_size=n),
    "GRU": lambda n: snt.GRU(n),
    "VanillaRNN": lambda n: snt.VanillaRNN(n),
    "Conv1DLSTM": lambda n: snt.Conv1DLSTM((5, 2), n, 3),
    "recurrent_dropout": lambda n: snt.lstm_with_recurrent_dropout(n, seed=1)[0],
}


def _inputs(kind: str, batch: int = B) -> tf.Tensor:
    return tf.ones([batch, 5, 2]) if kind == "Conv1DLSTM" else tf.ones([batch, D])


# ---------------------------------------------------------------------------
# Sizes.


@pytest.mark.parametrize("size", SIZE_SPELLINGS)
@pytest.mark.parametrize("kind", sorted(CORES))
def test_sizes_in_any_integer_spelling(kind, size):
    core = CORES[kind](size())
    out, _ = core(_inputs(kind), core.initial_state(B))
    assert out.shape[-1] == 2


@pytest.mark.parametrize("size", SIZE_SPELLINGS)
def test_unrolled_lstm_size_spellings(size):
    lstm = snt.UnrolledLSTM(size())
    out, state = lstm(tf.ones([4, B, D]), lstm.initial_state(B))
    assert out.shape == [4, B, 2] and state.cell.shape == [B, 2]


def test_true_is_a_size_of_one():
    core = snt.GRU(True)
    out, _ = core(tf.ones([B, D]), core.initial_state(B))
    assert out.shape == [B, 1]


@pytest.mark.parametrize(
    "make",
    [
        lambda: snt.LSTM(0),
        lambda: snt.GRU(0),
        lambda: snt.lstm_with_recurrent_dropout(0)[0],
    ],
    ids=["LSTM", "GRU", "recurrent_dropout"],
)
@pytest.mark.parametrize("unroll", ["step", "static", "dynamic"])
def test_zero_hidden_size(make, unroll):
    # The original accepted an empty state (LSTM, GRU, UnrolledLSTM).
    core = make()
    if unroll == "step":
        out, state = core(tf.ones([B, D]), core.initial_state(B))
    else:
        fn = snt.static_unroll if unroll == "static" else snt.dynamic_unroll
        out, state = fn(core, tf.ones([4, B, D]), core.initial_state(B))
    assert out.shape[-1] == 0
    assert all(s.shape[-1] == 0 for s in tf.nest.flatten(state) if s is not None)


def test_zero_hidden_unrolled_lstm():
    lstm = snt.UnrolledLSTM(0)
    out, state = lstm(tf.ones([4, B, D]), lstm.initial_state(B))
    assert out.shape == [4, B, 0] and state.hidden.shape == [B, 0]


@pytest.mark.parametrize(
    "input_shape",
    [
        pytest.param(lambda: np.array([5, 2]), id="ndarray"),
        pytest.param(lambda: tf.constant([5, 2]), id="tensor"),
        pytest.param(lambda: tf.TensorShape([5, 2]), id="TensorShape"),
        pytest.param(lambda: [np.int64(5), tf.constant(2)], id="mixed"),
        pytest.param(lambda: (tf.constant(5.0), 2), id="float_tensor"),
        pytest.param(lambda: (tf.Variable(5), 2), id="variable"),
    ],
)
def test_conv_lstm_input_shape_spellings(input_shape):
    core = snt.Conv1DLSTM(input_shape(), tf.constant(3), 3)
    state = core.initial_state(B)
    assert state.hidden.shape == [B, 5, 3]
    out, _ = core(tf.ones([B, 5, 2]), state)
    assert out.shape == [B, 5, 3]


def test_conv_lstm_input_shape_channels_are_free():
    # The original sized only the state from `input_shape`: its channels did
    # not have to match the inputs'.
    core = snt.Conv1DLSTM((5, 7), 3, 3)
    out, _ = core(tf.ones([B, 5, 2]), core.initial_state(B))
    assert out.shape == [B, 5, 3] and core.input_to_hidden.shape == [3, 2, 12]
    empty = snt.Conv1DLSTM((0, 2), 3, 3).initial_state(B)
    assert empty.hidden.shape == [B, 0, 3]


def test_conv_lstm_channels_first_state():
    # The gates split along the channel axis of `data_format`; the original
    # put `output_channels` at the wrong axis of a channels-first state.
    core = snt.Conv1DLSTM((2, 5), 3, 3, data_format="NCW")
    state = core.initial_state(B)
    assert state.hidden.shape == [B, 3, 5]
    out, _ = core(tf.ones([B, 2, 5]), state)
    assert out.shape == [B, 3, 5]


def test_conv_lstm_data_format_errors():
    # The original called `data_format.startswith` (AttributeError) and its
    # convolutions refused None (TypeError).
    with pytest.raises(AttributeError, match="`data_format` must be a string"):
        snt.Conv1DLSTM((5, 2), 3, 3, data_format=1)
    with pytest.raises(TypeError, match="`data_format` must be a string"):
        snt.Conv1DLSTM((5, 2), 3, 3, data_format=1)
    with pytest.raises(TypeError, match="`data_format` must be a string"):
        snt.Conv2DLSTM((5, 5, 2), 3, 3, data_format=None)
    with pytest.raises(ValueError, match="`input_shape` must be an integer"):
        snt.Conv2DLSTM("abc", 3, 3)  # The original's `tf.zeros` ValueError.


# ---------------------------------------------------------------------------
# Batch sizes.

BATCH_SPELLINGS = [
    pytest.param(lambda: np.int64(3), 3, id="np.int64"),
    pytest.param(lambda: np.array(3), 3, id="np0d"),
    pytest.param(lambda: True, 1, id="True"),
    pytest.param(lambda: tf.constant(3, tf.int64), 3, id="tensor_int64"),
    pytest.param(lambda: tf.constant(3, tf.uint8), 3, id="tensor_uint8"),
    pytest.param(lambda: tf.constant(3.0), 3, id="tensor_float"),
    pytest.param(lambda: tf.constant(3.7, tf.float64), 3, id="tensor_float64"),
    pytest.param(lambda: tf.constant(3.0, tf.float16), 3, id="tensor_float16"),
    pytest.param(lambda: tf.constant(True), 1, id="tensor_bool"),
    pytest.param(lambda: tf.Variable(3), 3, id="variable"),
    pytest.param(lambda: tf.Variable(3.0), 3, id="variable_float"),
]

STATE_MAKERS = {
    "LSTM": lambda: snt.LSTM(2),
    "GRU": lambda: snt.GRU(2),
    "VanillaRNN": lambda: snt.VanillaRNN(2),
    "UnrolledLSTM": lambda: snt.UnrolledLSTM(2),
    "Conv2DLSTM": lambda: snt.Conv2DLSTM((4, 4, 1), 2, 3),
    "DeepRNN": lambda: snt.DeepRNN([snt.LSTM(2), tf.nn.relu, snt.GRU(2)]),
    "recurrent_dropout": lambda: snt.lstm_with_recurrent_dropout(2, seed=1)[0],
    "TrainableState": lambda: snt.TrainableState(tf.zeros([2])),
}


def _initial_state(module, batch_size):
    if isinstance(module, snt.TrainableState):
        return module(batch_size)
    return module.initial_state(batch_size)


@pytest.mark.parametrize(("batch_size", "expected"), BATCH_SPELLINGS)
@pytest.mark.parametrize("kind", sorted(STATE_MAKERS))
def test_batch_size_spellings(kind, batch_size, expected):
    state = _initial_state(STATE_MAKERS[kind](), batch_size())
    leaves = [s for s in tf.nest.flatten(state) if s is not None]
    assert leaves and all(s.shape[0] == expected for s in leaves)


@pytest.mark.parametrize("kind", sorted(STATE_MAKERS))
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.float32])
def test_traced_batch_size_tensors(kind, dtype):
    # A float batch size tensor is what `snt.TrainableState`'s conformance
    # tests in the original pass; unknown values come out as int32 tensors.
    module = STATE_MAKERS[kind]()
    fn = tf.function(
        lambda b: tf.nest.map_structure(
            lambda s: None if s is None else tf.shape(s)[0],
            _initial_state(module, b),
        ),
        input_signature=[tf.TensorSpec([], dtype)],
    )
    leaves = [s for s in tf.nest.flatten(fn(tf.constant(4, dtype))) if s is not None]
    assert leaves and all(int(s) == 4 for s in leaves)


def test_trainable_state_float_batch_under_xla():
    module = snt.TrainableState(tf.zeros([1]))
    out = tf.function(module, jit_compile=True)(tf.constant(2.0))
    assert out.shape == [2, 1]


# ---------------------------------------------------------------------------
# Other constructor arguments.


@pytest.mark.parametrize(
    "forget_bias",
    [
        pytest.param(lambda: np.array(2.0), id="np0d"),
        pytest.param(lambda: np.float32(2.0), id="np.float32"),
        pytest.param(lambda: tf.constant(2.0), id="tensor"),
        pytest.param(lambda: tf.constant(2.0, tf.float64), id="tensor_float64"),
        pytest.param(lambda: tf.Variable(2.0), id="variable"),
        pytest.param(lambda: 2, id="int"),
        pytest.param(lambda: [2.0], id="list1"),
        pytest.param(lambda: tf.constant([2.0]), id="tensor1"),
    ],
)
@pytest.mark.parametrize("kind", ["LSTM", "UnrolledLSTM", "Conv1DLSTM"])
def test_forget_bias_spellings(kind, forget_bias):
    core = _forget_bias_core(kind, forget_bias())
    np.testing.assert_allclose(np.split(core.b.numpy(), 4)[1], [2.0] * 3)


def test_per_unit_forget_bias():
    # The original added `forget_bias` to the forget-gate biases by
    # broadcasting, so one value per unit worked.
    for kind in ("LSTM", "UnrolledLSTM", "Conv1DLSTM"):
        for value in ([1.0, 2.0, 3.0], np.array([1.0, 2.0, 3.0], np.float32)):
            core = _forget_bias_core(kind, value)
            np.testing.assert_allclose(np.split(core.b.numpy(), 4)[1], [1, 2, 3])
    assert _forget_bias_core("LSTM", True).b.numpy()[3] == 1.0


def _forget_bias_core(kind, forget_bias):
    if kind == "LSTM":
        core = snt.LSTM(3, forget_bias=forget_bias)
        core(tf.ones([B, D]), core.initial_state(B))
    elif kind == "UnrolledLSTM":
        core = snt.UnrolledLSTM(3, forget_bias=forget_bias)
        core(tf.ones([2, B, D]), core.initial_state(B))
    else:
        core = snt.Conv1DLSTM((5, 2), 3, 3, forget_bias=forget_bias)
        core(tf.ones([B, 5, 2]), core.initial_state(B))
    return core


def test_forget_bias_errors():
    for value in ([[1.0], [1.0, 2.0]], ["a", "b", "c"], tf.constant(["a"] * 3)):
        with pytest.raises(TypeError, match="`forget_bias` must be a real number"):
            snt.LSTM(3, forget_bias=value)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \[1\] or \[3\]"):
        snt.LSTM(3, forget_bias=tf.zeros([2]))


def test_forget_bias_errors_have_the_original_classes():
    # None: the original's conversion ValueError; a string: its addition's
    # InvalidArgumentError. Both are also TypeErrors.
    for value in (None, "1"):
        for error in (ValueError, TypeError, tf.errors.InvalidArgumentError):
            with pytest.raises(error, match="`forget_bias` must be a real number"):
                snt.LSTM(3, forget_bias=value)


@pytest.mark.parametrize("falsy", [0, False, "", ()], ids=["0", "False", "str", "()"])
def test_false_initializers_select_the_default(falsy):
    # The original read `w_i_init or default` (and `b_init or Zeros()`).
    cores = [
        (snt.LSTM(3, w_i_init=falsy, w_h_init=falsy, b_init=falsy), [B, D]),
        (snt.GRU(3, w_i_init=falsy, w_h_init=falsy, b_init=falsy), [B, D]),
        (snt.UnrolledLSTM(3, w_i_init=falsy, b_init=falsy), [2, B, D]),
        (snt.VanillaRNN(3, b_init=falsy), [B, D]),
        (snt.Conv1DLSTM((5, 2), 3, 3, b_init=falsy), [B, 5, 2]),
    ]
    for core, shape in cores:
        core(tf.ones(shape), core.initial_state(B))
        bias = core.b if hasattr(core, "b") else core._b
        assert np.count_nonzero(bias.numpy()) <= bias.shape[0] // 4  # forget bias
        assert np.any(core.input_to_hidden.numpy() != 0)


@pytest.mark.parametrize(
    "dtype",
    [
        pytest.param("float64", id="str"),
        pytest.param(np.float64, id="np.float64"),
        pytest.param(np.dtype("float64"), id="np.dtype"),
    ],
)
def test_dtype_spellings(dtype):
    for core, shape in (
        (snt.LSTM(3, dtype=dtype), [B, D]),
        (snt.GRU(3, dtype=dtype), [B, D]),
        (snt.VanillaRNN(3, dtype=dtype), [B, D]),
        (snt.UnrolledLSTM(3, dtype=dtype), [2, B, D]),
        (snt.Conv1DLSTM((5, 2), 3, 3, dtype=dtype), [B, 5, 2]),
    ):
        out, _ = core(tf.ones(shape, tf.float64), core.initial_state(B))
        assert out.dtype == tf.float64


@pytest.mark.parametrize(
    "dropout",
    [
        pytest.param(lambda: np.array(0.25), id="np0d"),
        pytest.param(lambda: np.float32(0.25), id="np.float32"),
        pytest.param(lambda: tf.constant(0.25), id="tensor"),
        pytest.param(lambda: tf.constant(0.25, tf.float64), id="tensor_float64"),
        pytest.param(lambda: tf.Variable(0.25), id="variable"),
        pytest.param(lambda: 0, id="zero"),
    ],
)
def test_recurrent_dropout_rate_spellings(dropout):
    train, _ = snt.lstm_with_recurrent_dropout(3, dropout=dropout(), seed=True)
    out, (_, masks) = train(tf.ones([B, D]), train.initial_state(B))
    assert out.shape == [B, 3]
    values = np.unique(masks.hidden.numpy())
    assert np.isclose(values[:, None], [0.0, 1.0, 1 / 0.75]).any(axis=1).all()


@pytest.mark.parametrize("seed", [1, np.int64(1), 1.0, np.float32(1.0), True])
def test_recurrent_dropout_seed_spellings(seed):
    train, _ = snt.lstm_with_recurrent_dropout(3, seed=seed)
    assert train.initial_state(B)[1].hidden.shape == [B, 3]


# ---------------------------------------------------------------------------
# Call arguments.


@pytest.mark.parametrize("kind", sorted(CORES))
def test_non_tensor_inputs_raise_the_original_attribute_error(kind):
    # The original read `inputs.shape`/`inputs.dtype`: AttributeError (ours
    # is also a TypeError).
    core = CORES[kind](2)
    for value in ("x", None, object()):
        with pytest.raises(AttributeError, match="`inputs` must be a tensor"):
            core(value, core.initial_state(B))
        with pytest.raises(TypeError, match="`inputs` must be a tensor"):
            core(value, core.initial_state(B))


def test_arrays_and_lists_as_inputs():
    for kind in sorted(CORES):
        core = CORES[kind](2)
        x = _inputs(kind).numpy()
        a, _ = core(x, core.initial_state(B))
        b, _ = core(x.tolist(), core.initial_state(B))
        np.testing.assert_array_equal(a, b)


def test_vanilla_rnn_takes_higher_rank_inputs():
    # As `snt.Linear` (which the original used), over the last dimension,
    # with a state that broadcasts.
    core = snt.VanillaRNN(2)
    out, state = core(tf.ones([5, B, D]), tf.zeros([5, B, 2]))
    assert out.shape == [5, B, 2] and state.shape == [5, B, 2]
    out, _ = core(tf.ones([5, B, D]), core.initial_state(B))
    assert out.shape == [5, B, 2]
    out, _ = snt.dynamic_unroll(core, tf.ones([4, 5, B, D]), tf.zeros([5, B, 2]))
    assert out.shape == [4, 5, B, 2]
    # A state that does not broadcast: the original's addition failed.
    for state in (tf.zeros([4, B, 2]), tf.zeros([5, B, 3]), tf.zeros([])):
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"`prev_state` must have shape \[\.\.\., 2\]",
        ):
            core(tf.ones([5, B, D]), state)


def test_state_leaves_must_be_tensors():
    core = snt.LSTM(3)
    for error in (TypeError, tf.errors.InvalidArgumentError):
        with pytest.raises(error, match="`prev_state` must contain tensors"):
            core(tf.ones([B, D]), (None, "x"))


def test_lstm_state_as_tuple_but_not_dict():
    core = snt.LSTM(3)
    state = core.initial_state(B)
    out, _ = core(tf.ones([B, D]), tuple(state))
    expected, _ = core(tf.ones([B, D]), state)
    np.testing.assert_array_equal(out, expected)
    # A dict flattens in another order: refused (the original raised
    # AttributeError; the error is InvalidArgumentError like other states).
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`prev_state` must have the structure"
    ):
        core(tf.ones([B, D]), {"hidden": state.hidden, "cell": state.cell})


def test_deep_rnn_layer_and_state_spellings():
    # None is no layers, as in the original; any iterable is read once.
    assert snt.DeepRNN(None)(tf.ones([B, D]), None)[1] == ()
    deep = snt.DeepRNN(iter([snt.LSTM(3), tf.nn.relu]))
    out, _ = deep(tf.ones([B, D]), deep.initial_state(B))
    assert out.shape == [B, 3] and len(deep.initial_state(B)) == 1
    skip = snt.deep_rnn_with_skip_connections(c for c in [snt.GRU(2), snt.GRU(3)])
    out, _ = skip(tf.ones([B, D]), skip.initial_state(B))
    assert out.shape == [B, 5]
    # The original indexed the state: extra entries and lists are fine.
    deep = snt.DeepRNN([snt.LSTM(3), snt.GRU(2)])
    state = deep.initial_state(B)
    a, _ = deep(tf.ones([B, D]), state)
    b, _ = deep(tf.ones([B, D]), [*state, "ignored"])
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("value", [0, 1, 2, None, np.bool_(False), tf.constant(True)])
def test_skip_connections_concat_final_output_truth_value(value):
    skip = snt.deep_rnn_with_skip_connections(
        [snt.GRU(2), snt.GRU(3)], concat_final_output=value
    )
    out, _ = skip(tf.ones([B, D]), skip.initial_state(B))
    assert out.shape == [B, 5 if bool(value) else 3]


def test_residual_connections_broadcast():
    # The original added inputs and outputs with broadcasting.
    deep = snt.deep_rnn_with_residual_connections([snt.GRU(1)])
    out, _ = deep(tf.ones([B, D]), deep.initial_state(B))
    assert out.shape == [B, D]


def test_trainable_state_spellings():
    # Empty structures give a module without variables.
    for empty in ([], (), {}):
        module = snt.TrainableState(empty)
        assert module(4) == empty
        with pytest.raises(ValueError, match="variables"):
            module.variables  # noqa: B018
    # Arrays, strings and nested lists convert; a mask entry of None is
    # trainable (`tf.Variable`'s default), numbers read as bools.
    module = snt.TrainableState(
        (np.ones([2], np.float32), tf.constant(["a"]), [0.0]),
        mask=(None, np.bool_(False), [0]),
    )
    state = module(tf.constant(2.0))
    assert [s.shape.as_list() for s in tf.nest.flatten(state)] == [[2, 2], [2, 1], [2]]
    assert [v.trainable for v in module.variables] == [True, False, False]
    # A tuple mask for a namedtuple state (the original's `tree` refused it).
    module = snt.TrainableState.for_core(snt.LSTM(3), mask=(True, tf.constant(False)))
    assert [v.trainable for v in module.variables] == [True, False]


# ---------------------------------------------------------------------------
# Unrolls: argument spellings.


@pytest.mark.parametrize("unroll", [snt.static_unroll, snt.dynamic_unroll])
@pytest.mark.parametrize(
    "lengths",
    [
        pytest.param(lambda: [1, 3, 2], id="list"),
        pytest.param(lambda: (1, 3, 2), id="tuple"),
        pytest.param(lambda: np.array([1, 3, 2]), id="ndarray"),
        pytest.param(lambda: tf.constant([1, 3, 2], tf.int64), id="int64"),
        pytest.param(lambda: tf.constant([1, 3, 2], tf.uint8), id="uint8"),
        pytest.param(lambda: tf.constant([0.5, 2.5, 1.2]), id="float"),
    ],
)
@pytest.mark.parametrize("core", ["LSTM", "generic"])
def test_sequence_length_spellings(unroll, lengths, core):
    # A float length `l` keeps the steps `t < l`, as the original's `t >= l`.
    lstm = snt.LSTM(2)
    target = lstm if core == "LSTM" else _Plain(lstm)
    xs = tf.random.normal([4, B, D], seed=1)
    out, state = unroll(target, xs, lstm.initial_state(B), sequence_length=lengths())
    expected_out, expected_state = unroll(
        target, xs, lstm.initial_state(B), sequence_length=tf.constant([1, 3, 2])
    )
    np.testing.assert_allclose(out, expected_out, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(state.cell, expected_state.cell, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("unroll", [snt.static_unroll, snt.dynamic_unroll])
def test_scalar_sequence_length_applies_to_every_row(unroll):
    core = snt.GRU(2)
    xs = tf.random.normal([4, B, D], seed=2)
    for scalar in (2, tf.constant(2), np.int64(2)):
        out, state = unroll(core, xs, core.initial_state(B), sequence_length=scalar)
        expected = unroll(core, xs, core.initial_state(B), sequence_length=[2] * B)
        np.testing.assert_allclose(out, expected[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(state, expected[1], rtol=1e-6, atol=1e-6)
    # Also with a batch known only when running.
    fn = tf.function(
        lambda x: unroll(core, x, core.initial_state(tf.shape(x)[1]), 2),
        input_signature=[tf.TensorSpec([4, None, D])],
    )
    np.testing.assert_allclose(fn(xs)[0], expected[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("unroll", [snt.static_unroll, snt.dynamic_unroll])
def test_non_tensor_sequences_raise_the_original_attribute_error(unroll):
    core = snt.GRU(2)
    # The original read each leaf's `.shape`.
    for value in ([1.0, 2.0], "x", None, tf.ones([4, B, D]).numpy().tolist()):
        with pytest.raises(AttributeError, match="`input_sequence` must contain"):
            unroll(core, value, core.initial_state(B))
        with pytest.raises(TypeError, match="`input_sequence` must"):
            unroll(core, value, core.initial_state(B))
    out, _ = unroll(core, np.ones([4, B, D], np.float32), core.initial_state(B))
    assert out.shape == [4, B, 2]


# ---------------------------------------------------------------------------
# Unrolls: outputs past a sequence's end repeat its last valid step.


class _Plain:
    """A non-module callable core (forces the generic unroll loop)."""

    def __init__(self, core):
        self.core = core

    def __call__(self, inputs, state):
        return self.core(inputs, state)


UNROLLED = {
    "LSTM": lambda: snt.LSTM(3),
    "LSTM-projection": lambda: snt.LSTM(4, projection_size=2),
    "GRU": lambda: snt.GRU(3),
    "VanillaRNN": lambda: snt.VanillaRNN(3),
    "DeepRNN": lambda: snt.DeepRNN([snt.LSTM(3), snt.GRU(2)]),
    "DeepRNN-mixed": lambda: snt.DeepRNN([snt.LSTM(3), tf.nn.relu, snt.GRU(2)]),
    "skip": lambda: snt.deep_rnn_with_skip_connections([snt.LSTM(3), snt.GRU(2)]),
}


def _built(kind):
    core = UNROLLED[kind]()
    core(tf.zeros([4, D]), core.initial_state(4))
    rng = np.random.default_rng(0)
    for v in core.variables:
        v.assign(0.5 * rng.standard_normal(v.shape).astype(np.float32))
    return core


def _eager_step(core):
    def step(x, state):
        out, next_state = core(tf.constant(x), state)
        return np.asarray(out), tf.nest.map_structure(np.asarray, next_state)

    return step


@pytest.mark.parametrize("plain", [False, True], ids=["direct", "generic"])
@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("unroll", ["static", "dynamic"])
@pytest.mark.parametrize("kind", sorted(UNROLLED))
def test_sequence_length_outputs_match_the_original(kind, unroll, mode, plain):
    core = _built(kind)
    rng = np.random.default_rng(1)
    xs = ref.random(rng, 6, 4, D)
    initial = tf.nest.map_structure(
        lambda s: 0.3 * rng.standard_normal(s.shape).astype(np.float32),
        core.initial_state(4),
    )
    lengths = np.array([0, 2, 6, 9], np.int32)
    fn = snt.static_unroll if unroll == "static" else snt.dynamic_unroll
    target = _Plain(core) if plain else core
    out, state = ref.run(
        mode, lambda x, s, n: fn(target, x, s, sequence_length=n), xs, initial, lengths
    )
    expected_out, expected_state = ref.unroll(_eager_step(core), xs, initial, lengths)
    np.testing.assert_allclose(out, expected_out, rtol=1e-5, atol=1e-5)
    for a, e in zip(tf.nest.flatten(state), tf.nest.flatten(expected_state)):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
    # The last time step holds each row's final output (zeros if empty).
    np.testing.assert_array_equal(out[-1, 0], 0)
    np.testing.assert_allclose(out[-1, 1], out[1, 1])


@pytest.mark.parametrize("mode", ["eager", "function", "jit"])
@pytest.mark.parametrize("kind", ["LSTM", "LSTM-projection", "GRU", "DeepRNN"])
def test_gradients_through_repeated_outputs(kind, mode):
    # The repeated outputs are the last valid step's: their gradients reach
    # that step. Reading the last time step with lengths equals reading each
    # row's last valid step without them (fused and generic loops).
    core = _built(kind)
    xs = tf.constant(ref.random(np.random.default_rng(2), 5, 4, D))
    lengths = [1, 3, 5, 2]
    rows = tf.range(4)

    def gradients(core_fn, with_lengths):
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                n = tf.constant(lengths) if with_lengths else None
                out, _ = snt.dynamic_unroll(
                    core_fn, x, core.initial_state(4), sequence_length=n
                )
                if with_lengths:
                    last = out[-1]
                else:
                    last = tf.gather_nd(
                        out, tf.stack([tf.constant(lengths) - 1, rows], axis=1)
                    )
                loss = tf.reduce_sum(last * tf.sin(last))
            return loss, tape.gradient(loss, [x, core.trainable_variables])

        return ref.run(mode, run, xs)

    expected = gradients(_Plain(core), with_lengths=False)
    for core_fn in (core, _Plain(core)):
        actual = gradients(core_fn, with_lengths=True)
        for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------
# AutoGraph: every public API under `tf.function` (autograph on, the
# default), with known and unknown batch sizes.


def _one_step(make, x_shape):
    def fn(x):
        core = make()
        return core(x, core.initial_state(tf.shape(x)[0]))

    return fn, x_shape


AUTOGRAPH_CASES = {
    "LSTM": _one_step(lambda: snt.LSTM(3, projection_size=2), [None, D]),
    "GRU": _one_step(lambda: snt.GRU(3), [None, D]),
    "VanillaRNN": _one_step(lambda: snt.VanillaRNN(3), [None, D]),
    "Conv2DLSTM": _one_step(lambda: snt.Conv2DLSTM((4, 4, 2), 3, 3), [None, 4, 4, 2]),
    "DeepRNN": _one_step(
        lambda: snt.DeepRNN([snt.LSTM(3), tf.nn.relu, snt.GRU(2)]), [None, D]
    ),
    "skip": _one_step(
        lambda: snt.deep_rnn_with_skip_connections([snt.LSTM(3), snt.GRU(2)]),
        [None, D],
    ),
    "residual": _one_step(
        lambda: snt.deep_rnn_with_residual_connections([snt.LSTM(D), snt.GRU(D)]),
        [None, D],
    ),
    "recurrent_dropout": _one_step(
        lambda: snt.lstm_with_recurrent_dropout(3, seed=1)[0], [None, D]
    ),
}


def _unrolled_lstm(xs):
    lstm = snt.UnrolledLSTM(3)
    return lstm(xs, lstm.initial_state(tf.shape(xs)[1]))


def _trainable_state(x):
    state = snt.TrainableState.for_core(snt.LSTM(3))
    return state(tf.shape(x)[0]), snt.TrainableState(tf.ones([2]))(
        tf.cast(tf.shape(x)[0], tf.float32)
    )


def _unroll_fn(unroll, core_fn, with_lengths):
    def fn(xs):
        core = core_fn()
        batch = tf.shape(xs)[1]
        lengths = tf.range(batch) if with_lengths else None
        return unroll(core, xs, core.initial_state(batch), sequence_length=lengths)

    return fn


for _name, _unroll in (("static", snt.static_unroll), ("dynamic", snt.dynamic_unroll)):
    for _core in ("LSTM", "GRU", "VanillaRNN", "DeepRNN"):
        _make = {
            "LSTM": lambda: snt.LSTM(3),
            "GRU": lambda: snt.GRU(3),
            "VanillaRNN": lambda: snt.VanillaRNN(3),
            "DeepRNN": lambda: snt.DeepRNN([snt.LSTM(3), snt.GRU(2)]),
        }[_core]
        AUTOGRAPH_CASES[f"{_name}_unroll-{_core}"] = (
            _unroll_fn(_unroll, _make, True),
            [5, None, D],
        )
AUTOGRAPH_CASES["UnrolledLSTM"] = (_unrolled_lstm, [5, None, D])
AUTOGRAPH_CASES["TrainableState"] = (_trainable_state, [None, D])


def _shapes(structure):
    return [
        None if t is None else tuple(np.shape(t)) for t in tf.nest.flatten(structure)
    ]


@pytest.mark.parametrize("batch", ["known", "unknown"])
@pytest.mark.parametrize("name", sorted(AUTOGRAPH_CASES))
def test_autograph_tf_function(name, batch):
    fn, shape = AUTOGRAPH_CASES[name]
    x = tf.constant(
        ref.random(np.random.default_rng(3), *[2 if d is None else d for d in shape])
    )
    eager = fn(x)
    tf.random.set_seed(0)  # Fresh modules: compare shapes, not values.
    if batch == "known":
        traced = tf.function(fn)
    else:
        traced = tf.function(fn, input_signature=[tf.TensorSpec(shape)])
    assert _shapes(traced(x)) == _shapes(eager)
