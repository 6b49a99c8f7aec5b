"""Tests for `snt.static_unroll`, `snt.dynamic_unroll` and `snt.UnrolledLSTM`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src.recurrent import sequence
from tests import recurrent_reference as ref
from tests.conformance import bad_input

T, B, D = 5, 3, 4


def _randomize(module: snt.Module, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for v in module.variables:
        v.assign(0.5 * rng.standard_normal(v.shape).astype(np.float32))


def _lstm(hidden: int = 3, projection: int | None = None) -> snt.LSTM:
    core = snt.LSTM(hidden, projection_size=projection)
    core(tf.zeros([B, D]), core.initial_state(B))
    _randomize(core)
    return core


def _numpy_lstm_unroll(core: snt.LSTM, xs: np.ndarray, lengths=None):
    """Outputs and the final state, in NumPy: past a row's length its outputs
    repeat the last valid ones (zeros for length 0), as in the original."""
    p = None if core.projection is None else core.projection.numpy()
    h = np.zeros([B, p.shape[1] if p is not None else core._hidden_size], np.float32)
    c = np.zeros([B, core._hidden_size], np.float32)
    outputs = []
    previous = np.zeros_like(h)
    for t, x in enumerate(xs):
        nh, nc = ref.lstm_step(
            x,
            h,
            c,
            core.input_to_hidden.numpy(),
            core.hidden_to_hidden.numpy(),
            core.b.numpy(),
            p,
        )
        if lengths is not None:
            alive = (t < lengths)[:, None]
            previous = np.where(alive, nh, previous)
            outputs.append(previous)
            h, c = np.where(alive, nh, h), np.where(alive, nc, c)
        else:
            outputs.append(nh)
            h, c = nh, nc
    return np.stack(outputs), snt.LSTMState(h, c)


@pytest.fixture(params=["one_matmul", "per_gate"])
def gate_split(request, monkeypatch):
    """Runs a test with the fused LSTM loop's recurrent product as one matmul
    and as four per-gate matmuls (normally chosen by size and device)."""
    per_gate = request.param == "per_gate"
    monkeypatch.setattr(sequence, "_cpu_only", True)
    monkeypatch.setattr(sequence, "_SPLIT_MIN", 0 if per_gate else 2**62)
    return per_gate


class _Plain:
    """A non-module callable core (forces the generic unroll loop)."""

    def __init__(self, core):
        self.core = core

    def __call__(self, inputs, state):
        return self.core(inputs, state)


# ---------------------------------------------------------------------------
# Numerics.


@pytest.mark.parametrize("unroll", ["static", "dynamic"])
@pytest.mark.parametrize("projection", [None, 2])
@pytest.mark.parametrize("mode", ref.MODES)
def test_lstm_unroll_matches_numpy(unroll, projection, mode, gate_split):
    core = _lstm(projection=projection)
    xs = ref.random(np.random.default_rng(0), T, B, D)
    fn = snt.static_unroll if unroll == "static" else snt.dynamic_unroll
    out, state = ref.run(mode, lambda x: fn(core, x, core.initial_state(B)), xs)
    expected_out, expected_state = _numpy_lstm_unroll(core, xs)
    np.testing.assert_allclose(out, expected_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state.hidden, expected_state.hidden, atol=1e-5)
    np.testing.assert_allclose(state.cell, expected_state.cell, atol=1e-5)


@pytest.mark.parametrize("mode", ref.MODES)
def test_unrolled_lstm_equals_unrolling_lstm(mode):
    lstm = _lstm(hidden=4)
    unrolled = snt.UnrolledLSTM(4)
    xs = ref.random(np.random.default_rng(1), T, B, D)
    initial = snt.LSTMState(*ref.random(np.random.default_rng(2), 2, B, 4))
    unrolled(xs, initial)
    for a, b in zip(unrolled.variables, lstm.variables):
        assert a.name.split("/")[-1] == b.name.split("/")[-1]
        a.assign(b)
    out, state = ref.run(mode, unrolled, xs, initial)
    expected_out, expected_state = snt.static_unroll(lstm, xs, initial)
    np.testing.assert_allclose(out, expected_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state.cell, expected_state.cell, atol=1e-5)
    assert isinstance(state, snt.LSTMState)


def _gradients(fn, core, xs, initial):
    xs = tf.convert_to_tensor(xs)
    initial = tf.nest.map_structure(tf.convert_to_tensor, initial)
    with tf.GradientTape() as tape:
        tape.watch([xs, initial])
        out, state = fn(xs, initial)
        loss = (
            tf.reduce_sum(out * tf.sin(out))
            + tf.reduce_sum(state.hidden * 3.0)
            + tf.reduce_sum(tf.square(state.cell))
        )
    return tape.gradient(loss, [xs, initial, list(core.trainable_variables)])


@pytest.mark.parametrize("projection", [None, 2])
@pytest.mark.parametrize("lengths", [None, [0, 2, 5], [5, 5, 5]])
@pytest.mark.parametrize("mode", ["eager", "function", "jit"])
def test_fused_gradient_matches_autodiff(mode, lengths, projection, gate_split):
    # dynamic_unroll(LSTM) and UnrolledLSTM use a hand-written gradient (also
    # with sequence lengths and a projection); a plain callable wrapper goes
    # through automatic differentiation.
    core = _lstm(hidden=4, projection=projection)
    xs = ref.random(np.random.default_rng(3), T, B, D)
    h0, c0 = ref.random(np.random.default_rng(4), 2, B, 4)
    initial = snt.LSTMState(h0[:, : projection or 4], c0)
    n = None if lengths is None else tf.constant(lengths)

    def fused(x, s):
        return _gradients(
            lambda a, b: snt.dynamic_unroll(core, a, b, sequence_length=n),
            core,
            x,
            s,
        )

    def generic(x, s):
        return _gradients(
            lambda a, b: snt.dynamic_unroll(_Plain(core), a, b, sequence_length=n),
            core,
            x,
            s,
        )

    expected = ref.run("eager", generic, xs, initial)
    actual = ref.run(mode, fused, xs, initial)
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_unrolled_lstm_gradients_match_lstm():
    lstm = _lstm(hidden=4)
    unrolled = snt.UnrolledLSTM(4)
    xs = ref.random(np.random.default_rng(5), T, B, D)
    initial = snt.LSTMState(*ref.random(np.random.default_rng(6), 2, B, 4))
    unrolled(xs, initial)
    for a, b in zip(unrolled.variables, lstm.variables):
        a.assign(b)
    actual = _gradients(unrolled, unrolled, xs, initial)
    expected = _gradients(lambda a, b: snt.static_unroll(lstm, a, b), lstm, xs, initial)
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("projection", [None, 1])
@pytest.mark.parametrize("lengths", [None, [0, 1, 3]])
@pytest.mark.parametrize("mode", ["eager", "function"])
def test_second_order_gradients_through_fused_lstm(
    mode, lengths, projection, gate_split
):
    core = snt.LSTM(2, projection_size=projection, dtype=tf.float64)
    xs = tf.constant(ref.random(np.random.default_rng(7), 3, B, D), tf.float64)
    core(xs[0], core.initial_state(B))
    _randomize(core)
    n = None if lengths is None else tf.constant(lengths)

    def second_order(core_fn):
        def run(xs):
            with tf.GradientTape() as outer:
                outer.watch(xs)
                with tf.GradientTape() as inner:
                    inner.watch(xs)
                    out, state = snt.dynamic_unroll(
                        core_fn, xs, core.initial_state(B), sequence_length=n
                    )
                    loss = tf.reduce_sum(out**2) + tf.reduce_sum(state.cell**2)
                grad = inner.gradient(loss, [xs, core.trainable_variables])
                grad_norm = tf.add_n(
                    [tf.reduce_sum(g**2) for g in tf.nest.flatten(grad)]
                )
            return outer.gradient(grad_norm, [xs, core.trainable_variables])

        return ref.run(mode, run, xs)

    # The generic loop (a plain callable core) is differentiated automatically.
    actual = second_order(core)
    expected = second_order(_Plain(core))
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        np.testing.assert_allclose(a, e, rtol=1e-9, atol=1e-12)
        assert np.abs(e).max() > 1e-3


def _assert_matches_finite_differences(weight: tf.Variable, loss) -> None:
    """The tape gradient of `loss()` w.r.t. `weight` (float64) against central
    differences, entry by entry."""
    with tf.GradientTape() as tape:
        value = loss()
    analytic = tape.gradient(value, weight).numpy()
    base, eps = weight.numpy(), 1e-6
    numeric = np.zeros_like(base)
    for index in np.ndindex(*base.shape):
        for sign in (1.0, -1.0):
            moved = base.copy()
            moved[index] += sign * eps
            weight.assign(moved)
            numeric[index] += sign * float(loss()) / (2 * eps)
    weight.assign(base)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("projection", [None, 2])
@pytest.mark.parametrize("lengths", [None, [1, 3, 2]])
def test_fused_lstm_gradients_match_finite_differences(lengths, projection, gate_split):
    # The original's CPU kernel (BlockLSTMV2) disagrees with finite differences
    # on recent TensorFlow; ours must not.
    core = snt.LSTM(3, projection_size=projection, dtype=tf.float64)
    xs = tf.constant(ref.random(np.random.default_rng(11), 3, B, D), tf.float64)
    core(xs[0], core.initial_state(B))
    _randomize(core)
    n = None if lengths is None else tf.constant(lengths)

    def loss(x: tf.Tensor) -> tf.Tensor:
        out, state = snt.dynamic_unroll(
            core, x, core.initial_state(B), sequence_length=n
        )
        return tf.reduce_sum(out[1] ** 2) + tf.reduce_sum(tf.sin(state.cell))

    theoretical, numerical = tf.test.compute_gradient(loss, [xs], delta=1e-6)
    np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-5, atol=1e-8)

    weights = [core.hidden_to_hidden]
    if projection is not None:
        weights.append(core.projection)
    for weight in weights:
        _assert_matches_finite_differences(weight, lambda: loss(xs))


def _gru(hidden: int = 4, dtype: tf.DType = tf.float32) -> snt.GRU:
    core = snt.GRU(hidden, dtype=dtype)
    core(tf.zeros([B, D], dtype), core.initial_state(B))
    _randomize(core)
    return core


def _gru_loss(core_fn, xs, h0, lengths):
    out, state = snt.dynamic_unroll(core_fn, xs, h0, sequence_length=lengths)
    return tf.reduce_sum(out * tf.sin(out)) + tf.reduce_sum(tf.square(state))


@pytest.mark.parametrize("lengths", [None, [0, 2, 5]])
@pytest.mark.parametrize("mode", ["eager", "function", "jit"])
def test_fused_gru_gradient_matches_autodiff(mode, lengths, gate_split):
    # dynamic_unroll(GRU) uses a hand-written gradient; a plain callable
    # wrapper goes through automatic differentiation.
    core = _gru()
    xs = tf.constant(ref.random(np.random.default_rng(12), T, B, D))
    h0 = tf.constant(ref.random(np.random.default_rng(13), B, 4))
    n = None if lengths is None else tf.constant(lengths)

    def gradients(core_fn):
        def run(x, h):
            with tf.GradientTape() as tape:
                tape.watch([x, h])
                loss = _gru_loss(core_fn, x, h, n)
            return loss, tape.gradient(loss, [x, h, list(core.trainable_variables)])

        return run

    expected = ref.run("eager", gradients(_Plain(core)), xs, h0)
    actual = ref.run(mode, gradients(core), xs, h0)
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lengths", [None, [1, 3, 2]])
def test_fused_gru_gradients_match_finite_differences(lengths, gate_split):
    core = _gru(3, tf.float64)
    xs = tf.constant(ref.random(np.random.default_rng(14), 3, B, D), tf.float64)
    h0 = tf.constant(ref.random(np.random.default_rng(15), B, 3), tf.float64)
    n = None if lengths is None else tf.constant(lengths)

    def loss(x: tf.Tensor, h: tf.Tensor) -> tf.Tensor:
        return _gru_loss(core, x, h, n)

    theoretical, numerical = tf.test.compute_gradient(loss, [xs, h0], delta=1e-6)
    for a, e in zip(theoretical, numerical):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-8)

    _assert_matches_finite_differences(core.hidden_to_hidden, lambda: loss(xs, h0))


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_second_order_gradients_through_fused_gru(mode, gate_split):
    core = _gru(2, tf.float64)
    xs = tf.constant(ref.random(np.random.default_rng(16), 3, B, D), tf.float64)
    n = tf.constant([0, 1, 3])

    def second_order(core_fn):
        def run(xs):
            with tf.GradientTape() as outer:
                outer.watch(xs)
                with tf.GradientTape() as inner:
                    inner.watch(xs)
                    loss = _gru_loss(core_fn, xs, core.initial_state(B), n)
                grad = inner.gradient(loss, [xs, core.trainable_variables])
                norm = tf.add_n([tf.reduce_sum(g**2) for g in tf.nest.flatten(grad)])
            return outer.gradient(norm, [xs, core.trainable_variables])

        return ref.run(mode, run, xs)

    actual, expected = second_order(core), second_order(_Plain(core))
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        np.testing.assert_allclose(a, e, rtol=1e-9, atol=1e-12)
        assert np.abs(e).max() > 1e-3


@pytest.mark.parametrize("lengths", [None, [0, 2, 5]])
@pytest.mark.parametrize("mode", ["eager", "function", "jit"])
def test_deep_rnn_of_lstm_and_gru_unrolls_layer_by_layer(mode, lengths, monkeypatch):
    deep = snt.DeepRNN(
        [snt.LSTM(4), snt.GRU(3), snt.LSTM(5, projection_size=2)], name="deep"
    )
    deep(tf.zeros([B, D]), deep.initial_state(B))
    _randomize(deep)
    xs = tf.constant(ref.random(np.random.default_rng(17), T, B, D))
    n = None if lengths is None else tf.constant(lengths)
    calls = []
    layer_unroll = snt.GRU._unroll_sequence
    monkeypatch.setattr(
        snt.GRU,
        "_unroll_sequence",
        lambda self, *a: calls.append(1) or layer_unroll(self, *a),
    )

    def run(core_fn):
        def fn(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                out, state = snt.dynamic_unroll(
                    core_fn, x, deep.initial_state(B), sequence_length=n
                )
                loss = tf.reduce_sum(out * tf.sin(out)) + tf.add_n(
                    [tf.reduce_sum(tf.square(s)) for s in tf.nest.flatten(state)]
                )
            grads = tape.gradient(loss, [x, list(deep.trainable_variables)])
            return out, state, grads

        return ref.run(mode, fn, xs)

    expected = run(_Plain(deep))  # Steps the stack, differentiated automatically.
    assert not calls
    actual = run(deep)
    assert calls  # The GRU layer ran its fused loop over the whole sequence.
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [lambda: snt.LSTM(3), lambda: snt.Conv1DLSTM([4, 2], 2, 3)],
    ids=["LSTM", "Conv1DLSTM"],
)
def test_lstm_bias_created_outside_the_trace_with_the_other_variables(make):
    # The forget bias is added eagerly: a bias created inside the graph next to
    # weights created outside it made TensorFlow fall back to conditional
    # initialization, which intermittently broke dynamic_unroll's gradient
    # ("AddN must have the same size and shape") for stacked LSTMs.
    core = make()
    eager = {}

    def spy(next_creator, **kwargs):
        variable = next_creator(**kwargs)
        eager[kwargs["name"]] = tf.executing_eagerly()
        return variable

    shape = [B, D] if isinstance(core, snt.LSTM) else [B, 4, 2]

    @tf.function
    def step(x):
        return core(x, core.initial_state(B))

    with tf.variable_creator_scope(spy):
        step(tf.ones(shape))
    assert "b" in eager and all(eager.values()), eager
    assert step.experimental_get_tracing_count() == 1
    np.testing.assert_allclose(
        np.split(core.b.numpy(), 4)[1], np.ones(core.b.shape[0] // 4)
    )


def test_deep_rnn_with_other_layers_steps_the_stack():
    deep = snt.DeepRNN([snt.LSTM(3), tf.nn.relu, snt.GRU(2)])
    xs = tf.ones([T, B, D])
    assert not sequence.can_unroll(deep, deep.initial_state(B))
    skip = snt.deep_rnn_with_skip_connections([snt.LSTM(3), snt.GRU(2)])
    assert not sequence.can_unroll(skip, skip.initial_state(B))
    out, _ = snt.dynamic_unroll(deep, xs, deep.initial_state(B))
    assert out.shape == [T, B, 2]


class _ScaledLSTM(snt.LSTM):
    """Changes the step: the whole-sequence path must not be taken."""

    def __call__(self, inputs, prev_state):
        outputs, state = super().__call__(inputs, prev_state)
        return 2 * outputs, state


class _RenamedLSTM(snt.LSTM):
    """Keeps the step (only adds a method): the fast path still applies."""

    def describe(self):
        return self.name


class _Doubler(snt.RNNCore):
    """A user core with its own whole-sequence path (outputs `2 * inputs`,
    counts its steps); `calls` records which path ran."""

    def __init__(self):
        super().__init__(name="doubler")
        self.calls = []

    def __call__(self, inputs, prev_state):
        self.calls.append("step")
        return 2 * inputs, prev_state + 1

    def initial_state(self, batch_size):
        return tf.zeros([batch_size])

    def _unrolls_sequence(self, initial_state):
        return isinstance(initial_state, tf.Tensor)

    def _unroll_sequence(self, input_sequence, initial_state, sequence_length):
        self.calls.append("sequence")
        steps = tf.cast(tf.shape(input_sequence)[0], initial_state.dtype)
        if sequence_length is not None:
            steps = tf.minimum(steps, tf.cast(sequence_length, steps.dtype))
        return 2 * input_sequence, initial_state + steps


class _UnchangedDoubler(_Doubler):
    def initial_state(self, batch_size):
        return tf.ones([batch_size])


class _ChangedDoubler(_Doubler):
    def __call__(self, inputs, prev_state):
        return super().__call__(inputs, prev_state)


def test_unroll_protocol_decides_by_the_class_that_defines_the_step():
    state = snt.LSTM(2).initial_state(B)
    assert sequence.can_unroll(snt.LSTM(2), state)
    assert sequence.can_unroll(_RenamedLSTM(2), state)
    assert not sequence.can_unroll(_ScaledLSTM(2), state)
    assert sequence.can_unroll(_UnchangedDoubler(), tf.zeros([B]))
    assert not sequence.can_unroll(_ChangedDoubler(), tf.zeros([B]))
    # The core's own answer, and anything that is not an `snt.RNNCore`.
    assert not sequence.can_unroll(_Doubler(), [tf.zeros([B])])
    assert not sequence.can_unroll(_Plain(snt.LSTM(2)), state)
    assert not sequence.can_unroll(_Counting(), (tf.zeros([]), tf.zeros([B, 2])))

    # A changed step is what `dynamic_unroll` runs, step by step.
    core = _ScaledLSTM(3)
    xs = ref.random(np.random.default_rng(3), T, B, D)
    out, _ = snt.dynamic_unroll(core, xs, core.initial_state(B))
    expected, _ = snt.static_unroll(core, xs, core.initial_state(B))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_user_core_whole_sequence_path(mode):
    core = _Doubler()
    xs = tf.ones([T, B, 2])
    lengths = tf.constant([0, 2, 7])

    def both(x):
        plain = snt.dynamic_unroll(core, x, core.initial_state(B))
        deep = snt.DeepRNN([core, core])
        stacked = snt.dynamic_unroll(
            deep, x, deep.initial_state(B), sequence_length=lengths
        )
        return plain, stacked

    (out, state), (deep_out, deep_state) = ref.run(mode, both, xs)
    assert set(core.calls) == {"sequence"}
    np.testing.assert_array_equal(out, 2 * np.ones([T, B, 2]))
    np.testing.assert_array_equal(state, [T] * B)
    np.testing.assert_array_equal(deep_out, 4 * np.ones([T, B, 2]))
    for s in deep_state:
        np.testing.assert_array_equal(s, [0, 2, T])


def test_nested_deep_rnn_unrolls_layer_by_layer():
    inner = snt.DeepRNN([snt.LSTM(3), snt.GRU(2)])
    outer = snt.DeepRNN([inner, snt.LSTM(4)])
    assert sequence.can_unroll(outer, outer.initial_state(B))
    xs = ref.random(np.random.default_rng(4), T, B, D)
    fused = snt.dynamic_unroll(outer, xs, outer.initial_state(B))
    stepped = snt.dynamic_unroll(_Plain(outer), xs, outer.initial_state(B))
    for a, e in zip(tf.nest.flatten(fused), tf.nest.flatten(stepped), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("batch", "hidden", "cpu_only", "expected"),
    [
        (32, 256, True, True),  # 32 * 256 * 1024 = 2**23 multiply-adds.
        (None, 256, True, True),  # An unknown batch counts as 32.
        (8, 64, True, False),  # Too small: per-op overhead dominates.
        (256, 256, True, False),  # Large enough to use all threads already.
        (32, 256, False, False),  # A GPU or other accelerator is visible.
    ],
)
def test_gate_split_choice(batch, hidden, cpu_only, expected, monkeypatch):
    monkeypatch.setattr(sequence, "_cpu_only", cpu_only)
    w_h = tf.zeros([hidden, 4 * hidden])
    assert sequence.split_gates(batch, w_h) is expected


def test_gate_split_agrees_with_one_matmul(monkeypatch):
    core = snt.UnrolledLSTM(256)
    xs = tf.random.normal([4, 32, 8], seed=1)
    state = core.initial_state(32)
    monkeypatch.setattr(sequence, "_cpu_only", True)
    assert sequence.split_gates(32, tf.zeros([256, 1024]))

    def gradients():
        with tf.GradientTape() as tape:
            out, final = core(xs, state)
            loss = tf.reduce_sum(out * tf.sin(out)) + tf.reduce_sum(final.cell**2)
        return out, tape.gradient(loss, core.trainable_variables)

    per_gate = gradients()
    monkeypatch.setattr(sequence, "_SPLIT_MIN", 2**62)
    one_matmul = gradients()
    # Equal up to float rounding (the matmuls may block their sums differently).
    for a, b in zip(tf.nest.flatten(per_gate), tf.nest.flatten(one_matmul)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: snt.GRU(3),
        lambda: snt.VanillaRNN(3),
        lambda: snt.DeepRNN([snt.LSTM(3), tf.nn.relu, snt.GRU(2)]),
        lambda: snt.deep_rnn_with_skip_connections([snt.LSTM(3), snt.GRU(2)]),
    ],
    ids=["GRU", "VanillaRNN", "DeepRNN", "skip"],
)
@pytest.mark.parametrize("mode", ref.MODES)
def test_static_equals_dynamic(make, mode):
    core = make()
    xs = ref.random(np.random.default_rng(8), T, B, D)
    lengths = tf.constant([0, 2, 5])

    def both(x):
        state = core.initial_state(B)
        return (
            snt.static_unroll(core, x, state),
            snt.dynamic_unroll(core, x, state),
            snt.static_unroll(core, x, state, sequence_length=lengths),
            snt.dynamic_unroll(core, x, state, sequence_length=lengths),
        )

    static, dynamic, static_len, dynamic_len = ref.run(mode, both, xs)
    for a, b in ((static, dynamic), (static_len, dynamic_len)):
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("unroll", [snt.static_unroll, snt.dynamic_unroll])
@pytest.mark.parametrize("projection", [None, 2])
@pytest.mark.parametrize("mode", ["eager", "function"])
def test_sequence_length_lstm(unroll, projection, mode, gate_split):
    core = _lstm(projection=projection)
    xs = ref.random(np.random.default_rng(9), T, B, D)
    lengths = np.array([0, 2, 7], np.int32)
    out, state = ref.run(
        mode,
        lambda x, n: unroll(core, x, core.initial_state(B), sequence_length=n),
        xs,
        lengths,
    )
    expected_out, expected_state = _numpy_lstm_unroll(core, xs, lengths)
    np.testing.assert_allclose(out, expected_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state.hidden, expected_state.hidden, atol=1e-5)
    np.testing.assert_allclose(state.cell, expected_state.cell, atol=1e-5)
    # A zero-length row outputs zeros and keeps the initial state; past its
    # length a row repeats its last valid output, so the last time step holds
    # every row's final output.
    assert np.all(out[:, 0] == 0)
    np.testing.assert_array_equal(state.cell[0], 0)
    np.testing.assert_array_equal(
        out[2:, 1], np.broadcast_to(out[1, 1], out[2:, 1].shape)
    )
    np.testing.assert_array_equal(out[-1, 1:], state.hidden[1:])


def test_sequence_length_matches_truncated_sequences():
    core = snt.GRU(3)
    xs = ref.random(np.random.default_rng(10), T, B, D)
    lengths = [1, 3, 5]
    out, state = snt.dynamic_unroll(
        core, xs, core.initial_state(B), sequence_length=tf.constant(lengths, tf.uint8)
    )
    for b, n in enumerate(lengths):
        o, s = snt.dynamic_unroll(core, xs[:n, b : b + 1], core.initial_state(1))
        np.testing.assert_allclose(out[:n, b], o[:, 0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(state[b], s[0], rtol=1e-5, atol=1e-6)


class _Counting(snt.RNNCore):
    """Outputs `inputs * 2`; its state counts steps (a scalar) and sums."""

    def __call__(self, inputs, prev_state):
        count, total = prev_state
        return {"double": inputs["x"] * 2, "step": count}, (
            count + 1,
            total + inputs["x"],
        )

    def initial_state(self, batch_size):
        return tf.constant(0.0), tf.zeros([batch_size, 2])


@pytest.mark.parametrize("unroll", [snt.static_unroll, snt.dynamic_unroll])
def test_nested_inputs_outputs_and_scalar_state(unroll):
    core = _Counting()
    xs = {"x": tf.ones([4, 3, 2])}
    out, (count, total) = unroll(
        core, xs, core.initial_state(3), sequence_length=tf.constant([1, 2, 4])
    )
    np.testing.assert_allclose(out["double"][:, 2], 2 * np.ones([4, 2]))
    # Past its length (1) row 0 repeats its last output.
    np.testing.assert_allclose(out["double"][1:, 0], 2 * np.ones([3, 2]))
    # Scalar leaves are never masked: outputs and state always advance.
    np.testing.assert_allclose(out["step"], [0, 1, 2, 3])
    assert float(count) == 4
    np.testing.assert_allclose(total[:, 0], [1, 2, 4])


def test_dynamic_unroll_unknown_length():
    core = _lstm()
    fn = tf.function(
        lambda x: snt.dynamic_unroll(core, x, core.initial_state(tf.shape(x)[1])),
        input_signature=[tf.TensorSpec([None, None, D])],
    )
    generic = tf.function(
        lambda x: snt.dynamic_unroll(
            _Plain(core), x, core.initial_state(tf.shape(x)[1])
        ),
        input_signature=[tf.TensorSpec([None, None, D])],
    )
    for steps in (1, 6):
        xs = ref.random(np.random.default_rng(steps), steps, B, D)
        out, _ = fn(xs)
        expected, _ = _numpy_lstm_unroll(core, xs)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(generic(xs)[0], expected, rtol=1e-5, atol=1e-5)


def test_dynamic_unroll_single_step_and_loop_options():
    core = snt.GRU(2)
    out, state = snt.dynamic_unroll(
        core,
        tf.ones([1, 2, 3]),
        core.initial_state(2),
        parallel_iterations=4,
        swap_memory=True,
    )
    assert out.shape == [1, 2, 2] and state.shape == [2, 2]


def test_none_state_leaves_in_dynamic_unroll():
    train, test = snt.lstm_with_recurrent_dropout(3, dropout=0.5, seed=1)

    @tf.function
    def run(x):
        return snt.dynamic_unroll(train, x, train.initial_state(B))

    out, (core_state, masks) = run(tf.ones([T, B, D]))
    assert out.shape == [T, B, 3] and masks.cell is None
    assert isinstance(core_state, snt.LSTMState)


# ---------------------------------------------------------------------------
# Errors.


@pytest.mark.parametrize("unroll", [snt.static_unroll, snt.dynamic_unroll])
def test_unroll_errors(unroll):
    core = snt.GRU(2)
    state = core.initial_state(B)
    xs = tf.ones([T, B, D])
    with pytest.raises(TypeError, match="`core` must be callable"):
        unroll(3, xs, state)
    with pytest.raises(ValueError, match="`input_sequence` must contain at least"):
        unroll(core, [], state)
    with pytest.raises(ValueError, match="`input_sequence` must be time-major"):
        unroll(core, tf.constant(1.0), state)
    with pytest.raises(ValueError, match="same number of time steps"):
        unroll(core, (xs, tf.ones([T + 1, B, D])), state)
    with pytest.raises(ValueError, match="at least one time step"):
        unroll(core, tf.ones([0, B, D]), state)
    with pytest.raises(TypeError, match="`input_sequence` must contain tensors"):
        unroll(core, "abc", state)
    with pytest.raises(TypeError, match="`sequence_length` must be an integer"):
        unroll(core, xs, state, sequence_length=tf.ones([B], tf.bool))
    with pytest.raises(TypeError, match="`sequence_length` must be a tensor"):
        unroll(core, xs, state, sequence_length="abc")
    # The original's `tf.where` failed on these: InvalidArgumentError.
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"`sequence_length` must have shape \[B\]"
    ):
        unroll(core, xs, state, sequence_length=tf.ones([B, 1], tf.int32))
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`sequence_length` must have one length"
    ):
        unroll(core, xs, state, sequence_length=tf.ones([B + 1], tf.int32))
    with pytest.raises(ValueError, match="`sequence_length` must have one length"):
        unroll(core, xs, state, sequence_length=tf.ones([B + 1], tf.int32))
    with pytest.raises(ValueError, match="`initial_state` must have the structure"):
        unroll(lambda x, s: (x, (s, s)), xs, state)
    # dynamic_unroll checks a GRU's state once, as its own argument.
    name = "initial_state" if unroll is snt.dynamic_unroll else "prev_state"
    with pytest.raises(ValueError, match=f"`{name}` must have the structure"):
        unroll(core, xs, (state, state))


def test_unroll_output_structure_must_not_change():
    calls = []

    def core(x, s):
        calls.append(None)
        return (x,) * len(calls), s

    with pytest.raises(ValueError, match="`core` must return outputs of the same"):
        snt.static_unroll(core, tf.ones([3, 2]), tf.zeros([2]))
    calls.clear()

    @tf.function
    def run(x):
        return snt.dynamic_unroll(core, x, tf.zeros([2]))

    with pytest.raises(ValueError, match="`core` must return outputs of the same"):
        run(tf.ones([3, 2]))


def test_static_unroll_needs_known_length():
    core = snt.GRU(2)
    fn = tf.function(
        lambda x: snt.static_unroll(core, x, core.initial_state(B)),
        input_signature=[tf.TensorSpec([None, B, D])],
    )
    with pytest.raises(ValueError, match="statically known number of time steps"):
        fn.get_concrete_function()


@pytest.mark.parametrize(
    "make", [lambda: snt.GRU(2), lambda: _Plain(snt.GRU(2))], ids=["fused", "generic"]
)
def test_dynamic_unroll_loop_options(make):
    core = make()
    xs, state = tf.ones([2, 1, 1]), snt.GRU(2).initial_state(1)
    # Eagerly the original ran a Python loop and ignored both options.
    for parallel_iterations, swap_memory in ((0, "x"), (None, None), ("1", 2)):
        out, _ = snt.dynamic_unroll(
            core,
            xs,
            state,
            parallel_iterations=parallel_iterations,
            swap_memory=swap_memory,
        )
        assert out.shape == [2, 1, 2]

    def traced(parallel_iterations, swap_memory=False):
        return tf.function(
            lambda: snt.dynamic_unroll(
                core,
                xs,
                state,
                parallel_iterations=parallel_iterations,
                swap_memory=swap_memory,
            )
        )()

    # Traced, `tf.while_loop` accepts what compares >= 1; swap_memory is free.
    for parallel_iterations in (4, np.int64(2), 1.0, 2.5, True):
        assert traced(parallel_iterations, swap_memory=1)[0].shape == [2, 1, 2]
    # ... and raises TypeError otherwise, as `tf.while_loop` did.
    for parallel_iterations in (0, -1, None, "1"):
        with pytest.raises(TypeError, match="`parallel_iterations` must be a positive"):
            traced(parallel_iterations)


def test_lstm_fast_path_errors_name_the_unroll_arguments():
    core = snt.LSTM(3)
    state = core.initial_state(B)
    with pytest.raises(TypeError, match="`input_sequence` must have dtype float32"):
        snt.dynamic_unroll(core, tf.ones([T, B, D], tf.float64), state)
    with pytest.raises(ValueError, match="`input_sequence` must have rank 3"):
        snt.dynamic_unroll(core, tf.ones([T, B, D, 1]), state)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`initial_state` must have the shapes"
    ):
        snt.dynamic_unroll(core, tf.ones([T, B, D]), core.initial_state(B + 1))
    snt.dynamic_unroll(core, tf.ones([T, B, D]), state)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="`input_sequence` must have last dimension",
    ):
        snt.dynamic_unroll(core, tf.ones([T, B, D + 1]), state)


def test_unrolled_lstm_errors():
    lstm = snt.UnrolledLSTM(3)
    state = lstm.initial_state(B)
    with pytest.raises(ValueError, match="`input_sequence` must have rank 3"):
        lstm(tf.ones([B, D]), state)
    with pytest.raises(TypeError, match="`input_sequence` must have dtype float32"):
        lstm(tf.ones([T, B, D], tf.float16), state)
    with pytest.raises(ValueError, match="`initial_state` must have the structure"):
        lstm(tf.ones([T, B, D]), state.hidden)
    with pytest.raises(ValueError, match="variables"):
        lstm.variables  # noqa: B018
    # Where the original's kernel failed: InvalidArgumentError.
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`input_sequence` must have at least one"
    ):
        lstm(tf.ones([0, B, D]), state)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`initial_state` must have the shapes"
    ):
        lstm(tf.ones([T, B, D]), lstm.initial_state(B + 1))
    lstm(tf.ones([T, B, D]), state)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="`input_sequence` must have last dimension",
    ):
        lstm(tf.ones([T, B, D + 2]), state)
    fn = tf.function(
        snt.UnrolledLSTM(3),
        input_signature=[
            tf.TensorSpec([None, None, None]),
            (tf.TensorSpec([None, 3]),) * 2,
        ],
    )
    with pytest.raises(ValueError, match="`input_sequence` must have a known last"):
        fn.get_concrete_function()


def test_unrolled_lstm_variables():
    lstm = snt.UnrolledLSTM(4)
    lstm(tf.ones([2, 1, 3]), lstm.initial_state(1))
    assert [(v.name, v.shape.as_list()) for v in lstm.variables] == [
        ("unrolled_lstm/w_h:0", [4, 16]),
        ("unrolled_lstm/w_i:0", [3, 16]),
        ("unrolled_lstm/b:0", [16]),
    ]
    assert lstm.input_to_hidden is lstm._w_i and lstm.hidden_to_hidden is lstm._w_h


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([snt.static_unroll, snt.dynamic_unroll]),
    st.sampled_from(["core", "input_sequence", "initial_state", "sequence_length"]),
    bad_input.junk(),
)
def test_junk_unroll_arguments(unroll, argument, value):
    core = snt.LSTM(2)
    kwargs = {
        "core": core,
        "input_sequence": tf.ones([2, 3, 4]),
        "initial_state": core.initial_state(3),
        "sequence_length": None,
    }
    kwargs[argument] = value
    bad_input.outcome(
        lambda: unroll(**kwargs),
        [
            "core",
            "input_sequence",
            "initial_state",
            "sequence_length",
            "inputs",
            "prev_state",
        ],
    )


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([snt.static_unroll, snt.dynamic_unroll]),
    st.sampled_from(["LSTM", "GRU"]),
    st.sampled_from(["rank", "dtype", "resize"]),
)
def test_bad_input_sequences(unroll, kind, change):
    core = snt.LSTM(2) if kind == "LSTM" else snt.GRU(2)
    xs = tf.ones([2, 3, 4])
    unroll(core, xs, core.initial_state(3))
    if change == "rank":
        variants = bad_input.wrong_rank_variants(xs)
    elif change == "dtype":
        variants = bad_input.wrong_dtype_variants(xs)
    else:
        variants = bad_input.resized_variants(xs)
    for bad in variants:
        before = bad_input.snapshot(core)
        ok, _ = bad_input.outcome(
            lambda bad=bad: unroll(core, bad, core.initial_state(3)),
            ["input_sequence", "inputs", "initial_state", "prev_state"],
        )
        if not ok:
            bad_input.assert_unchanged(core, before)


class BranchingCore(snt.RNNCore):
    """A user core with Python control flow on a tensor (needs AutoGraph)."""

    def __call__(self, inputs, prev_state):
        if tf.reduce_sum(prev_state) > 2.0:
            next_state = prev_state
        else:
            next_state = prev_state + tf.reduce_sum(inputs, axis=1)
        return next_state, next_state

    def initial_state(self, batch_size):
        return tf.zeros([batch_size])


@pytest.mark.parametrize("autograph", [True, False])
def test_dynamic_unroll_converts_user_cores(autograph):
    core = BranchingCore()
    fn = tf.function(
        lambda x: snt.dynamic_unroll(core, x, core.initial_state(1)),
        autograph=autograph,
    )
    out, state = fn(tf.ones([5, 1, 1]))
    np.testing.assert_allclose(out[:, 0], [1, 2, 3, 3, 3])
