"""Tests for the single-step cores: VanillaRNN, LSTM and GRU."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests import recurrent_reference as ref
from tests.conformance import bad_input


def _ckpt_keys(module: snt.Module, tmp_path) -> list[str]:
    path = tf.train.Checkpoint(module=module).write(str(tmp_path / "ckpt"))
    return sorted(
        name[len("module/") : -len("/.ATTRIBUTES/VARIABLE_VALUE")]
        for name, _ in tf.train.list_variables(path)
        if name.startswith("module/")
    )


def _randomize(module: snt.Module, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for v in module.variables:
        v.assign(0.5 * rng.standard_normal(v.shape).astype(v.dtype.as_numpy_dtype))


# ---------------------------------------------------------------------------
# Numerics against NumPy.


@pytest.mark.parametrize("mode", ref.MODES)
def test_vanilla_rnn_matches_numpy(mode):
    rng = np.random.default_rng(1)
    core = snt.VanillaRNN(4, activation=tf.nn.relu)
    x, h = ref.random(rng, 3, 5), ref.random(rng, 3, 4)
    core(x, h)
    _randomize(core)
    out, state = ref.run(mode, core, x, h)
    w_i, w_h, b = core.input_to_hidden.numpy(), core.hidden_to_hidden.numpy(), core._b
    expected = np.maximum(x @ w_i + h @ w_h + b.numpy(), 0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("projection", [None, 3])
@pytest.mark.parametrize("mode", ref.MODES)
def test_lstm_matches_numpy(mode, projection):
    rng = np.random.default_rng(2)
    core = snt.LSTM(5, projection_size=projection)
    x = ref.random(rng, 2, 4)
    h, c = ref.random(rng, 2, projection or 5), ref.random(rng, 2, 5)
    core(x, snt.LSTMState(h, c))
    _randomize(core)
    out, state = ref.run(mode, core, x, snt.LSTMState(h, c))
    p = None if projection is None else core.projection.numpy()
    eh, ec = ref.lstm_step(
        x,
        h,
        c,
        core.input_to_hidden.numpy(),
        core.hidden_to_hidden.numpy(),
        core.b.numpy(),
        p,
    )
    assert isinstance(state, snt.LSTMState)
    np.testing.assert_allclose(out, eh, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state.hidden, eh, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state.cell, ec, rtol=1e-5, atol=1e-5)


def test_lstm_accepts_plain_tuple_state():
    core = snt.LSTM(3)
    out, state = core(tf.ones([2, 4]), (tf.zeros([2, 3]), tf.zeros([2, 3])))
    assert out.shape == [2, 3] and isinstance(state, snt.LSTMState)


@pytest.mark.parametrize(
    "cls", [snt.LSTM, snt.UnrolledLSTM], ids=["LSTM", "UnrolledLSTM"]
)
def test_lstm_forget_bias(cls):
    core = cls(2, forget_bias=2.5, b_init=snt.initializers.Ones())
    if cls is snt.LSTM:
        core(tf.ones([1, 3]), core.initial_state(1))
    else:
        core(tf.ones([1, 1, 3]), core.initial_state(1))
    np.testing.assert_allclose(core.b.numpy(), [1, 1, 3.5, 3.5, 1, 1, 1, 1])
    default = cls(2)
    x = tf.ones([1, 3]) if cls is snt.LSTM else tf.ones([1, 1, 3])
    default(x, default.initial_state(1))
    np.testing.assert_allclose(default.b.numpy(), [0, 0, 1, 1, 0, 0, 0, 0])


@pytest.mark.parametrize("mode", ref.MODES)
def test_gru_matches_numpy(mode):
    rng = np.random.default_rng(3)
    core = snt.GRU(4)
    x, h = ref.random(rng, 3, 2), ref.random(rng, 3, 4)
    core(x, h)
    _randomize(core)
    out, state = ref.run(mode, core, x, h)
    expected = ref.gru_step(
        x,
        h,
        core.input_to_hidden.numpy(),
        core.hidden_to_hidden.numpy(),
        core.b.numpy(),
    )
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, expected, rtol=1e-5, atol=1e-5)


def test_gru_gate_layout():
    # With z forced to 0 (first block of b very negative) the state is kept;
    # with z forced to 1 and r to 0, the output is tanh(x @ w_i_a + b_a).
    core = snt.GRU(2)
    x, h = tf.constant([[0.3, -0.2]]), tf.constant([[0.5, -0.7]])
    core(x, h)
    core.b.assign([-100.0, -100.0, 0, 0, 0.1, 0.2])
    np.testing.assert_allclose(core(x, h)[0], h, atol=1e-6)
    core.b.assign([100.0, 100.0, -100, -100, 0.1, 0.2])
    w_a = core.input_to_hidden.numpy()[:, 4:]
    expected = np.tanh(x.numpy() @ w_a + [0.1, 0.2])
    np.testing.assert_allclose(core(x, h)[0], expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# Variables, names, checkpoint paths, initializers.


def test_vanilla_rnn_variables(tmp_path):
    core = snt.VanillaRNN(8)
    core(tf.ones([1, 3]), core.initial_state(1))
    assert [(v.name, v.shape.as_list()) for v in core.variables] == [
        ("vanilla_rnn/b:0", [8]),
        ("vanilla_rnn/hidden_to_hidden/w:0", [8, 8]),
        ("vanilla_rnn/input_to_hidden/w:0", [3, 8]),
    ]
    assert _ckpt_keys(core, tmp_path) == [
        "_b",
        "_hidden_to_hidden/w",
        "_input_to_hidden/w",
    ]


def test_lstm_variables(tmp_path):
    core = snt.LSTM(8, projection_size=2)
    core(tf.ones([1, 3]), core.initial_state(1))
    assert [(v.name, v.shape.as_list()) for v in core.variables] == [
        ("lstm/w_h:0", [2, 32]),
        ("lstm/w_i:0", [3, 32]),
        ("lstm/b:0", [32]),
        ("lstm/projection:0", [8, 2]),
    ]
    assert _ckpt_keys(core, tmp_path) == ["_w_h", "_w_i", "b", "projection"]
    assert core.input_to_hidden is core._w_i
    assert core.hidden_to_hidden is core._w_h
    plain = snt.LSTM(2)
    plain(tf.ones([1, 3]), plain.initial_state(1))
    assert plain.projection is None and len(plain.variables) == 3


def test_gru_variables(tmp_path):
    core = snt.GRU(4)
    core(tf.ones([1, 3]), core.initial_state(1))
    assert [(v.name, v.shape.as_list()) for v in core.variables] == [
        ("gru/w_h:0", [4, 12]),
        ("gru/w_i:0", [3, 12]),
        ("gru/b:0", [12]),
    ]
    assert _ckpt_keys(core, tmp_path) == ["_w_h", "_w_i", "b"]


def test_default_initializers():
    lstm = snt.LSTM(16, projection_size=4)
    lstm(tf.ones([1, 100]), lstm.initial_state(1))
    assert lstm._w_i_init.stddev == pytest.approx(0.1)
    assert lstm._w_h_init.stddev == pytest.approx(0.5)
    assert lstm._projection_init.stddev == pytest.approx(0.25)
    # Truncated normals stay within two standard deviations.
    assert np.abs(lstm.input_to_hidden.numpy()).max() <= 0.2 + 1e-6
    gru = snt.GRU(10)
    gru(tf.ones([1, 20]), gru.initial_state(1))
    limit = np.sqrt(6 / (20 + 30))
    assert np.abs(gru.input_to_hidden.numpy()).max() <= limit
    assert np.abs(gru.input_to_hidden.numpy()).max() > 0.5 * limit
    np.testing.assert_array_equal(gru.b.numpy(), np.zeros(30))


def test_custom_initializers():
    ones = snt.initializers.Ones()
    core = snt.VanillaRNN(2, w_i_init=ones, w_h_init=ones, b_init=ones)
    out, _ = core(tf.ones([1, 3]), tf.ones([1, 2]))
    np.testing.assert_allclose(out, np.tanh([[6.0, 6.0]]), rtol=1e-6)


def test_variables_are_created_lazily():
    for core in (snt.LSTM(2), snt.GRU(2), snt.VanillaRNN(2)):
        with pytest.raises(ValueError, match="variables"):
            core.variables  # noqa: B018


# ---------------------------------------------------------------------------
# initial_state and dtypes.


@pytest.mark.parametrize(
    "core, expected",
    [
        (snt.VanillaRNN(3), 3),
        (snt.GRU(3), 3),
        (snt.LSTM(3), snt.LSTMState(3, 3)),
        (snt.LSTM(3, projection_size=2), snt.LSTMState(2, 3)),
        (snt.UnrolledLSTM(3), snt.LSTMState(3, 3)),
    ],
    ids=["VanillaRNN", "GRU", "LSTM", "LSTM-projected", "UnrolledLSTM"],
)
def test_initial_state(core, expected):
    for batch_size in (2, np.int64(2), tf.constant(2), tf.constant(2, tf.int64)):
        state = core.initial_state(batch_size)
        tf.nest.assert_same_structure(state, expected)
        for leaf, size in zip(tf.nest.flatten(state), tf.nest.flatten(expected)):
            assert leaf.shape == [2, size] and leaf.dtype == tf.float32
            np.testing.assert_array_equal(leaf, 0)

    @tf.function(input_signature=[tf.TensorSpec([None, 5])])
    def dynamic(x):
        return core.initial_state(tf.shape(x)[0])

    for leaf in tf.nest.flatten(dynamic(tf.ones([4, 5]))):
        assert leaf.shape[0] == 4


@pytest.mark.parametrize("dtype", [tf.float64, tf.float16, tf.bfloat16])
def test_core_dtype(dtype):
    for core in (
        snt.LSTM(3, dtype=dtype),
        snt.GRU(3, dtype=dtype),
        snt.VanillaRNN(3, dtype=dtype),
    ):
        state = core.initial_state(2)
        assert all(s.dtype == dtype for s in tf.nest.flatten(state))
        out, _ = core(tf.ones([2, 4], dtype), state)
        assert out.dtype == dtype
        assert all(v.dtype == dtype for v in core.variables)
        with pytest.raises(TypeError, match=f"`inputs` must have dtype {dtype.name}"):
            core(tf.ones([2, 4]), state)


# ---------------------------------------------------------------------------
# Errors.


@pytest.mark.parametrize(
    "make",
    [snt.LSTM, snt.GRU, snt.VanillaRNN],
    ids=["LSTM", "GRU", "VanillaRNN"],
)
def test_call_errors(make):
    core = make(3)
    state = core.initial_state(2)
    # VanillaRNN takes inputs of rank >= 2 (as `snt.Linear`), the others rank 2.
    wrong_rank = tf.ones([4]) if make is snt.VanillaRNN else tf.ones([2, 1, 4])
    with pytest.raises(ValueError, match="`inputs` must have rank 2"):
        core(wrong_rank, state)
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        core(tf.ones([2, 4], tf.float64), state)
    with pytest.raises(TypeError, match="`inputs` must be a tensor"):
        core(None, state)
    with pytest.raises(TypeError, match="`inputs` must be a tensor"):
        core("abc", state)
    # State errors are InvalidArgumentErrors (the original's matmul failed).
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`prev_state` must have the structure"
    ):
        core(tf.ones([2, 4]), (state, state))
    bad_dtype = tf.nest.map_structure(lambda s: tf.cast(s, tf.float64), state)
    with pytest.raises(TypeError, match="`prev_state` must have dtype float32"):
        core(tf.ones([2, 4]), bad_dtype)
    with pytest.raises(tf.errors.InvalidArgumentError, match="`prev_state` must have"):
        core(tf.ones([2, 4]), bad_dtype)
    wrong_batch = tf.nest.map_structure(lambda s: s[:1], state)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`prev_state` must have the shapes"
    ):
        core(tf.ones([2, 4]), wrong_batch)
    wrong_size = tf.nest.map_structure(lambda s: tf.pad(s, [[0, 0], [0, 1]]), state)
    with pytest.raises(ValueError, match="`prev_state` must have the shapes"):
        core(tf.ones([2, 4]), wrong_size)
    with pytest.raises(ValueError, match="variables"):
        core.variables  # noqa: B018  (the failed calls created nothing)
    core(tf.ones([2, 4]), state)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`inputs` must have last dimension 4"
    ):
        core(tf.ones([2, 5]), state)
    with pytest.raises(ValueError, match="`inputs` must have last dimension 4"):
        core(tf.ones([2, 5]), state)
    # After the first call a wrong dtype is also the original's op error.
    with pytest.raises(tf.errors.InvalidArgumentError, match="`inputs` must have"):
        core(tf.ones([2, 4], tf.float64), state)


def test_unknown_input_size_on_first_call():
    core = snt.LSTM(3)
    fn = tf.function(
        core,
        input_signature=[
            tf.TensorSpec([None, None]),
            snt.LSTMState(tf.TensorSpec([None, 3]), tf.TensorSpec([None, 3])),
        ],
    )
    with pytest.raises(ValueError, match="`inputs` must have a known last dimension"):
        fn.get_concrete_function()


def test_batch_size_errors():
    core = snt.LSTM(3)
    # The original handed `batch_size` to `tf.zeros`: a Python float is a
    # TypeError, a string or None a ValueError (TF's conversion errors).
    for value in (2.0, np.float32(2.0), "2", None, [2]):
        with pytest.raises((TypeError, ValueError), match="`batch_size` must be an"):
            core.initial_state(value)
    with pytest.raises(TypeError, match="`batch_size` must be an integer"):
        core.initial_state(2.0)
    with pytest.raises(ValueError, match="`batch_size` must be an integer"):
        core.initial_state("2")
    with pytest.raises(TypeError, match="`batch_size` must be an integer"):
        core.initial_state(tf.constant("2"))
    # Where the original's op failed: InvalidArgumentError (also ValueError).
    for value in (tf.constant([2]), -1, tf.constant(-1), tf.constant(np.inf)):
        with pytest.raises(tf.errors.InvalidArgumentError, match="`batch_size` must"):
            core.initial_state(value)
        with pytest.raises(ValueError, match="`batch_size` must"):
            core.initial_state(value)


def test_constructor_errors():
    with pytest.raises(ValueError, match="`hidden_size` must be a non-negative"):
        snt.LSTM(-1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="`hidden_size` must"):
        snt.GRU(-1)
    with pytest.raises(ValueError, match="`hidden_size` must be a positive"):
        snt.VanillaRNN(0)
    with pytest.raises(TypeError, match="`hidden_size` must be an integer"):
        snt.LSTM(3.0)
    with pytest.raises(ValueError, match="`hidden_size` must be an integer"):
        snt.GRU("3")
    with pytest.raises(ValueError, match="`projection_init` must be None"):
        snt.LSTM(3, projection_init=snt.initializers.Ones())
    # Without a projection any `projection_init` is a ValueError, as the original.
    with pytest.raises(ValueError, match="`projection_init` must be None"):
        snt.LSTM(3, projection_init="ones")
    with pytest.raises(TypeError, match="`projection_init` must be a callable"):
        snt.LSTM(3, projection_size=2, projection_init=0)
    with pytest.raises(ValueError, match="`projection_size` must be a positive"):
        snt.LSTM(3, projection_size=-2)
    # An empty projection made the state inconsistent after one step.
    with pytest.raises(ValueError, match="`projection_size` must be a positive"):
        snt.LSTM(3, projection_size=0)
    with pytest.raises(TypeError, match="`w_i_init` must be a callable"):
        snt.LSTM(3, w_i_init=3)
    with pytest.raises(TypeError, match="`w_i_init` must be a callable"):
        snt.VanillaRNN(3, w_i_init=0)  # Passed to `snt.Linear` as is.
    with pytest.raises(TypeError, match="`forget_bias` must be a real number"):
        snt.LSTM(3, forget_bias="1")
    with pytest.raises(ValueError, match="`forget_bias` must be finite"):
        snt.LSTM(3, forget_bias=float("nan"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="`forget_bias` must be"):
        snt.LSTM(3, forget_bias=[1.0, 2.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="`forget_bias` must be"):
        snt.UnrolledLSTM(3, forget_bias=[[1.0]])
    with pytest.raises(TypeError, match="`forget_bias` must be a real number"):
        snt.LSTM(3, forget_bias=["a", "b", "c"])
    with pytest.raises(TypeError, match="`dtype` must be a TensorFlow dtype"):
        snt.GRU(3, dtype="not a dtype")
    with pytest.raises(TypeError, match="`activation` must be callable"):
        snt.VanillaRNN(3, activation=None)
    with pytest.raises(TypeError, match="`b_init` must be a callable"):
        snt.VanillaRNN(3, b_init="zeros")
    with pytest.raises(TypeError, match="`b_init` must be a callable"):
        snt.GRU(3, b_init=snt.initializers.Zeros)  # The class, not an instance.


@pytest.mark.parametrize(
    "make",
    [
        lambda: snt.LSTM(3, dtype=tf.int32),
        lambda: snt.GRU(3, dtype=tf.int32),
        lambda: snt.VanillaRNN(3, dtype=tf.complex64),
        lambda: snt.UnrolledLSTM(3, dtype=tf.int32),
    ],
    ids=["LSTM", "GRU", "VanillaRNN", "UnrolledLSTM"],
)
def test_non_floating_dtype(make):
    # As the original: any dtype constructs and gives an initial state; the
    # weights (first call) need a floating point one, and the original's
    # initializers or ops failed there (ValueError or InvalidArgumentError).
    core = make()
    state = core.initial_state(2)
    dtype = tf.nest.flatten(state)[0].dtype
    assert not dtype.is_floating
    inputs = tf.ones([2, 4], dtype)
    if isinstance(core, snt.UnrolledLSTM):
        inputs = inputs[None]
    with pytest.raises(tf.errors.InvalidArgumentError, match="`dtype` must be a float"):
        core(inputs, state)
    with pytest.raises(ValueError, match="`dtype` must be a floating point dtype"):
        core(inputs, state)


def test_repr():
    assert (
        repr(snt.LSTM(3, projection_size=2)) == "LSTM(hidden_size=3, projection_size=2)"
    )
    assert repr(snt.GRU(4, name="g")) == "GRU(hidden_size=4, name='g')"


# ---------------------------------------------------------------------------
# Hypothesis: junk constructor arguments and inputs.

_FACTORIES = {
    "LSTM": snt.LSTM,
    "GRU": snt.GRU,
    "VanillaRNN": snt.VanillaRNN,
    "UnrolledLSTM": snt.UnrolledLSTM,
}


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(sorted(_FACTORIES)),
    st.sampled_from(["hidden_size", "w_i_init", "w_h_init", "b_init", "dtype", "name"]),
    bad_input.junk(),
)
def test_junk_constructor_arguments(kind, argument, value):
    factory = _FACTORIES[kind]
    kwargs = {"hidden_size": 2, argument: value}
    ok, module = bad_input.outcome(lambda: factory(**kwargs), [argument])
    if ok:
        # `UnrolledLSTM` takes `input_sequence` (2.0.2's name), the others `inputs`.
        if kind == "UnrolledLSTM":
            x, name = tf.ones([2, 1, 3]), "input_sequence"
        else:
            x, name = tf.ones([1, 3]), "inputs"
        bad_input.outcome(lambda: module(x, module.initial_state(1)), [name])


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["projection_size", "projection_init", "forget_bias"]),
    bad_input.junk(),
)
def test_junk_lstm_arguments(argument, value):
    ok, module = bad_input.outcome(lambda: snt.LSTM(2, **{argument: value}), [argument])
    if ok:
        module(tf.ones([1, 3]), module.initial_state(1))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(_FACTORIES)), bad_input.junk())
def test_junk_batch_size(kind, value):
    core = _FACTORIES[kind](2)
    bad_input.outcome(lambda: core.initial_state(value), ["batch_size"])


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["LSTM", "GRU", "VanillaRNN"]),
    st.sampled_from(["inputs", "hidden", "cell"]),
    st.sampled_from(["rank", "dtype", "resize", "junk"]),
    bad_input.junk(),
)
def test_bad_call_inputs(kind, target, change, junk):
    core = _FACTORIES[kind](3)
    x, state = tf.ones([2, 4]), core.initial_state(2)
    core(x, state)
    leaves = [x, *tf.nest.flatten(state)]
    index = {"inputs": 0, "hidden": 1, "cell": 2}[target] % len(leaves)
    leaf = leaves[index]
    if change == "rank":
        bad = bad_input.wrong_rank_variants(leaf)[0]
    elif change == "dtype":
        bad = bad_input.wrong_dtype_variants(leaf)[0]
    elif change == "resize":
        bad = bad_input.resized_variants(leaf)[-1]
    else:
        bad = junk
    leaves[index] = bad
    bad_x, bad_state = leaves[0], tf.nest.pack_sequence_as(state, leaves[1:])
    before = bad_input.snapshot(core)
    ok, _ = bad_input.outcome(lambda: core(bad_x, bad_state), ["inputs", "prev_state"])
    if not ok:
        bad_input.assert_unchanged(core, before)


def test_abstract_bases():
    with pytest.raises(TypeError, match="abstract"):
        snt.RNNCore()  # type: ignore[abstract]
    with pytest.raises(TypeError, match="abstract"):
        snt.UnrolledRNN()  # type: ignore[abstract]
    assert issubclass(snt.LSTM, snt.RNNCore)
    assert issubclass(snt.UnrolledLSTM, snt.UnrolledRNN)
    assert snt.LSTMState._fields == ("hidden", "cell")


def test_zero_input_size():
    for core in (snt.LSTM(2), snt.GRU(2), snt.VanillaRNN(2)):
        out, _ = core(tf.zeros([3, 0]), core.initial_state(3))
        assert out.shape == [3, 2]
    lstm = snt.UnrolledLSTM(2)
    out, _ = lstm(tf.zeros([4, 3, 0]), lstm.initial_state(3))
    assert out.shape == [4, 3, 2]
