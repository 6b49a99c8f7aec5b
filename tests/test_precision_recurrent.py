"""`snt.precision` policies on the recurrent cores and their unrolls.

The same built core, with `snt.precision.apply(core, "mixed_bfloat16")`,
computes within bfloat16 tolerance of its float32 outputs (one step, the
fused whole-sequence path of `snt.dynamic_unroll`, its generic loop and
`snt.static_unroll`), keeps float32 variables and gets float32 gradients for
every trainable variable; without a policy nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src.recurrent import sequence

BATCH, STEPS, FEATURES = 3, 5, 4

CORES: dict[str, Callable[[], Any]] = {
    "LSTM": lambda: snt.LSTM(6),
    "LSTM-projected": lambda: snt.LSTM(6, projection_size=3),
    "GRU": lambda: snt.GRU(5),
    "VanillaRNN": lambda: snt.VanillaRNN(5),
    "DeepRNN": lambda: snt.DeepRNN([snt.LSTM(4), tf.nn.relu, snt.GRU(3)]),
    "DeepRNN-fused": lambda: snt.DeepRNN([snt.LSTM(4), snt.GRU(3)]),
    "deep_rnn_with_skip_connections": lambda: snt.deep_rnn_with_skip_connections(
        [snt.LSTM(4), snt.GRU(3)]
    ),
    "deep_rnn_with_residual_connections": (
        lambda: snt.deep_rnn_with_residual_connections(
            [snt.LSTM(FEATURES), snt.GRU(FEATURES)]
        )
    ),
    "lstm_with_recurrent_dropout-eval": (
        lambda: snt.lstm_with_recurrent_dropout(4, dropout=0.5)[1]
    ),
}
# Cores `snt.dynamic_unroll` runs with their whole-sequence path.
FUSED = {"LSTM", "LSTM-projected", "GRU", "DeepRNN-fused"}


def _apply(core: Any, policy: Any) -> Any:
    """`snt.precision.apply`, typed as the core it returns."""
    return snt.precision.apply(core, policy)


def _sequence() -> tf.Tensor:
    return tf.random.stateless_normal([STEPS, BATCH, FEATURES], seed=(1, 2))


def _lengths() -> tf.Tensor:
    return tf.constant([STEPS, 2, 0])


def _step(core: Any, x: tf.Tensor) -> Any:
    outputs, state = core(x[0], core.initial_state(BATCH))
    return outputs, state


def _dynamic(core: Any, x: tf.Tensor) -> Any:
    return snt.dynamic_unroll(core, x, core.initial_state(BATCH))


def _dynamic_lengths(core: Any, x: tf.Tensor) -> Any:
    return snt.dynamic_unroll(
        core, x, core.initial_state(BATCH), sequence_length=_lengths()
    )


def _static(core: Any, x: tf.Tensor) -> Any:
    return snt.static_unroll(core, x, core.initial_state(BATCH))


RUNS = {
    "step": _step,
    "dynamic_unroll": _dynamic,
    "dynamic_unroll-lengths": _dynamic_lengths,
    "static_unroll": _static,
}


def _floats(structure: Any) -> list[tf.Tensor]:
    return [
        t
        for t in tf.nest.flatten(structure)
        if isinstance(t, tf.Tensor) and t.dtype.is_floating
    ]


def _assert_close(actual: Any, expected: Any) -> None:
    a_leaves, e_leaves = _floats(actual), _floats(expected)
    assert len(a_leaves) == len(e_leaves)
    for a, e in zip(a_leaves, e_leaves, strict=True):
        assert a.dtype == tf.bfloat16, a.dtype
        assert e.dtype == tf.float32, e.dtype
        np.testing.assert_allclose(
            tf.cast(a, tf.float32).numpy(), e.numpy(), rtol=5e-2, atol=5e-2
        )


def _built(name: str, run: Callable[..., Any]) -> tuple[Any, tf.Tensor, Any]:
    core = CORES[name]()
    x = _sequence()
    expected = run(core, x)
    return core, x, expected


@pytest.mark.parametrize("run", RUNS, ids=list(RUNS))
@pytest.mark.parametrize("name", CORES, ids=list(CORES))
def test_bf16_close_to_float32_variables_and_gradients(name, run):
    core, x, expected = _built(name, RUNS[run])
    snt.precision.apply(core, "mixed_bfloat16")
    state = core.initial_state(BATCH)
    assert all(t.dtype == tf.bfloat16 for t in _floats(state))
    with tf.GradientTape() as tape:
        actual = RUNS[run](core, x)
        loss = tf.add_n(
            [tf.reduce_sum(tf.cast(t, tf.float32)) for t in _floats(actual)]
        )
    _assert_close(actual, expected)
    assert core.variables
    assert all(v.dtype == tf.float32 for v in core.variables)
    params = core.trainable_variables
    for v, g in zip(params, tape.gradient(loss, params), strict=True):
        assert g is not None, v.name
        assert g.dtype == tf.float32, v.name


@pytest.mark.parametrize("name", CORES, ids=list(CORES))
def test_variables_created_float32_under_the_policy(name):
    core = _apply(CORES[name](), "mixed_bfloat16")
    outputs, _ = _dynamic(core, _sequence())
    assert outputs.dtype == tf.bfloat16
    assert core.variables
    assert all(v.dtype == tf.float32 for v in core.variables)


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_path_is_used_under_the_policy(name):
    core = _apply(CORES[name](), "mixed_bfloat16")
    assert sequence.can_unroll(core, core.initial_state(BATCH))


def _graph_ops(fn: Any, *args: Any) -> list[tf.Operation]:
    return fn.get_concrete_function(*args).graph.get_operations()


@pytest.mark.parametrize("name", ["LSTM", "LSTM-projected", "GRU"])
def test_fused_path_casts_each_variable_once_per_sequence(name):
    core = _apply(CORES[name](), "mixed_bfloat16")
    x = _sequence()
    _dynamic(core, x)
    fn = tf.function(lambda x: _dynamic(core, x), autograph=False)
    ops = _graph_ops(fn, x)
    reads = [op for op in ops if op.type == "ReadVariableOp"]
    assert len(reads) == len(core.variables)
    casts = [
        op
        for op in ops
        if op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp"
    ]
    assert len(casts) == len(core.variables)
    assert all(op.outputs[0].dtype == tf.bfloat16 for op in casts)


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("run", RUNS, ids=list(RUNS))
@pytest.mark.parametrize("name", ["LSTM-projected", "GRU", "VanillaRNN", "DeepRNN"])
def test_tf_function(name, run, jit_compile):
    core, x, expected = _built(name, RUNS[run])
    snt.precision.apply(core, "mixed_bfloat16")
    params = core.trainable_variables

    @tf.function(jit_compile=jit_compile)
    def train(x):
        with tf.GradientTape() as tape:
            outputs = RUNS[run](core, x)
            leaves = _floats(outputs)
            loss = tf.add_n([tf.reduce_sum(tf.cast(t, tf.float32)) for t in leaves])
        return outputs, tape.gradient(loss, params)

    actual, grads = train(x)
    _assert_close(actual, expected)
    for v, g in zip(params, grads, strict=True):
        assert g is not None and g.dtype == tf.float32, v.name


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_first_call_inside_tf_function_creates_float32_variables(name):
    core = _apply(CORES[name](), "mixed_bfloat16")
    outputs, _ = tf.function(lambda x: _dynamic(core, x))(_sequence())
    assert outputs.dtype == tf.bfloat16
    assert all(v.dtype == tf.float32 for v in core.variables)


@pytest.mark.parametrize("name", ["LSTM-projected", "GRU", "VanillaRNN", "DeepRNN"])
def test_float32_inputs_and_state_are_cast(name):
    core, x, expected = _built(name, _step)
    float32_state = core.initial_state(BATCH)
    snt.precision.apply(core, "mixed_bfloat16")
    actual = core(x[0], float32_state)
    _assert_close(actual, expected)
    bf16 = tf.nest.map_structure(lambda t: tf.cast(t, tf.bfloat16), float32_state)
    _assert_close(core(tf.cast(x[0], tf.bfloat16), bf16), expected)


@pytest.mark.parametrize("name", ["LSTM-projected", "GRU", "DeepRNN-fused"])
def test_fused_path_casts_a_float32_initial_state(name):
    core, x, expected = _built(name, _dynamic_lengths)
    float32_state = core.initial_state(BATCH)
    snt.precision.apply(core, "mixed_bfloat16")
    actual = snt.dynamic_unroll(core, x, float32_state, sequence_length=_lengths())
    _assert_close(actual, expected)


@pytest.mark.parametrize("name", CORES, ids=list(CORES))
def test_no_policy_is_unchanged(name):
    core, x, expected = _built(name, _dynamic)
    assert all(t.dtype == tf.float32 for t in _floats(expected))
    snt.precision.apply(core, "mixed_bfloat16")
    _dynamic(core, x)
    snt.precision.apply(core, None)
    assert all(vars(m).get("_precision") is None for m in (core, *core.submodules))
    again = _dynamic(core, x)
    for a, e in zip(_floats(again), _floats(expected), strict=True):
        assert a.dtype == tf.float32
        np.testing.assert_array_equal(a.numpy(), e.numpy())
    assert all(t.dtype == tf.float32 for t in _floats(core.initial_state(BATCH)))


def test_no_policy_keeps_the_dtype_argument():
    core = snt.LSTM(3, dtype=tf.float64)
    x = tf.cast(_sequence(), tf.float64)
    outputs, state = _dynamic(core, x)
    assert outputs.dtype == state.cell.dtype == tf.float64
    assert all(v.dtype == tf.float64 for v in core.variables)
    with pytest.raises(TypeError):
        core(_sequence()[0], core.initial_state(BATCH))


def test_policy_overrides_the_dtype_argument():
    core = _apply(snt.GRU(3, dtype=tf.float64), "mixed_bfloat16")
    outputs, state = _dynamic(core, tf.cast(_sequence(), tf.float64))
    assert outputs.dtype == state.dtype == tf.bfloat16
    assert all(v.dtype == tf.float32 for v in core.variables)


@pytest.mark.parametrize(
    "name",
    [
        "LSTM-projected",
        "GRU",
        "VanillaRNN",
        "DeepRNN",
        "deep_rnn_with_skip_connections",
        "deep_rnn_with_residual_connections",
    ],
)
def test_float16_policy_with_float32_outputs(name):
    core = CORES[name]()
    policy = snt.precision.Policy(tf.float16, tf.float32, tf.float32)
    snt.precision.apply(core, policy)
    x = _sequence()
    for run in RUNS.values():
        outputs, state = run(core, x)
        assert all(t.dtype == tf.float32 for t in _floats(outputs))
        assert all(t.dtype == tf.float16 for t in _floats(state))
    assert all(v.dtype == tf.float32 for v in core.variables)


def test_non_floating_inputs_are_rejected_under_a_policy():
    core = _apply(snt.LSTM(3), "mixed_bfloat16")
    with pytest.raises(TypeError):
        core(tf.ones([2, 4], tf.int32), core.initial_state(2))
    with pytest.raises(TypeError):
        snt.dynamic_unroll(core, tf.ones([3, 2, 4], tf.int32), core.initial_state(2))


def test_checkpoint_round_trip_bf16_to_float32(tmp_path):
    core = _apply(snt.LSTM(4), "mixed_bfloat16")
    x = _sequence()
    _dynamic(core, x)
    path = tf.train.Checkpoint(core=core).save(str(tmp_path / "ckpt"))
    restored = snt.LSTM(4)
    _dynamic(restored, x)
    tf.train.Checkpoint(core=restored).restore(path).assert_consumed()
    for a, b in zip(core.variables, restored.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("unroll", ["static", "dynamic"])
def test_stepped_unroll_with_lengths_and_a_float32_state(unroll):
    # Masking mixes the initial state with the first step's: both in bf16.
    core = snt.precision.apply(snt.VanillaRNN(3), "mixed_bfloat16")
    inputs = tf.random.normal([4, 2, 5], seed=0)
    state = tf.zeros([2, 3])  # float32, not the core's own initial_state.
    fn = snt.static_unroll if unroll == "static" else snt.dynamic_unroll
    outputs, final = fn(core, inputs, state, sequence_length=tf.constant([2, 4]))
    assert outputs.dtype == tf.bfloat16 and final.dtype == tf.bfloat16
    reference, _ = fn(snt.precision.apply(core, None), inputs, state)
    np.testing.assert_allclose(
        tf.cast(outputs[:2, 0], tf.float32), reference[:2, 0], atol=0.05
    )
