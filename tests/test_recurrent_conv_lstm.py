"""Tests for the convolutional LSTMs (Conv1DLSTM, Conv2DLSTM, Conv3DLSTM)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests import recurrent_reference as ref
from tests.conformance import bad_input

_CLASSES = {1: snt.Conv1DLSTM, 2: snt.Conv2DLSTM, 3: snt.Conv3DLSTM}
_SPATIAL = {1: (5,), 2: (4, 3), 3: (3, 3, 2)}
_FIRST = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _randomize(module: snt.Module, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for v in module.variables:
        v.assign(0.3 * rng.standard_normal(v.shape).astype(np.float32))


@pytest.mark.parametrize(
    "rank, mode",
    [(1, "eager"), (2, "eager"), (3, "eager"), (1, "function"), (2, "jit")],
)
def test_matches_numpy(rank, mode):
    rng = np.random.default_rng(rank)
    spatial = _SPATIAL[rank]
    core = _CLASSES[rank](input_shape=(*spatial, 2), output_channels=3, kernel_shape=3)
    x = ref.random(rng, 2, *spatial, 2)
    h, c = ref.random(rng, 2, *spatial, 3), ref.random(rng, 2, *spatial, 3)
    core(x, snt.LSTMState(h, c))
    _randomize(core)
    out, state = ref.run(mode, core, x, snt.LSTMState(h, c))
    gates = (
        ref.conv_same(x, core.input_to_hidden.numpy())
        + ref.conv_same(h, core.hidden_to_hidden.numpy())
        + core.b.numpy()
    )
    eh, ec = ref.lstm_gates_update(gates, c)
    np.testing.assert_allclose(out, eh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state.hidden, eh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state.cell, ec, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_channels_first_equals_channels_last(rank):
    spatial = _SPATIAL[rank]
    last = _CLASSES[rank]((*spatial, 2), 3, 3)
    first = _CLASSES[rank]((2, *spatial), 3, 3, data_format=_FIRST[rank])
    to_first = (0, rank + 1, *range(1, rank + 1))
    rng = np.random.default_rng(7)
    x = ref.random(rng, 2, *spatial, 2)
    state = snt.LSTMState(*(ref.random(rng, 2, *spatial, 3) for _ in range(2)))
    last(x, state)
    _randomize(last)
    first_state = first.initial_state(2)
    assert first_state.hidden.shape == [2, 3, *spatial]
    first(np.transpose(x, to_first), first_state)
    for a, b in zip(first.variables, last.variables):
        a.assign(b)
    out_last, s_last = last(x, state)
    out_first, s_first = first(
        np.transpose(x, to_first),
        tf.nest.map_structure(lambda s: tf.transpose(s, to_first), state),
    )
    np.testing.assert_allclose(
        tf.transpose(out_first, [0, *range(2, rank + 2), 1]), out_last, atol=1e-5
    )
    np.testing.assert_allclose(
        tf.transpose(s_first.cell, [0, *range(2, rank + 2), 1]), s_last.cell, atol=1e-5
    )


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_variables_and_paths(rank, tmp_path):
    core = _CLASSES[rank](
        input_shape=[2] * rank + [2], output_channels=3, kernel_shape=3
    )
    core(tf.ones([1] + [2] * rank + [2]), core.initial_state(1))
    prefix = f"conv{rank}_dlstm"
    assert [(v.name, v.shape.as_list()) for v in core.variables] == [
        (f"{prefix}/b:0", [12]),
        (f"{prefix}/hidden_to_hidden/w:0", [3] * rank + [3, 12]),
        (f"{prefix}/input_to_hidden/w:0", [3] * rank + [2, 12]),
    ]
    path = tf.train.Checkpoint(module=core).write(str(tmp_path / "ckpt"))
    keys = sorted(
        k for k, _ in tf.train.list_variables(path) if k.startswith("module/")
    )
    assert keys == [
        "module/_hidden_to_hidden/w/.ATTRIBUTES/VARIABLE_VALUE",
        "module/_input_to_hidden/w/.ATTRIBUTES/VARIABLE_VALUE",
        "module/b/.ATTRIBUTES/VARIABLE_VALUE",
    ]
    np.testing.assert_array_equal(core.b.numpy()[3:6], 1.0)
    assert core.input_to_hidden is core._input_to_hidden.w
    assert core.hidden_to_hidden is core._hidden_to_hidden.w


def test_initial_state_and_default_init():
    core = snt.Conv2DLSTM((4, 5, 2), output_channels=6, kernel_shape=(3, 1))
    state = core.initial_state(tf.constant(3))
    assert state.hidden.shape == [3, 4, 5, 6] and state.cell.shape == [3, 4, 5, 6]
    core(tf.ones([3, 4, 5, 2]), state)
    assert core.input_to_hidden.shape == [3, 1, 2, 24]
    # Default conv init: truncated normal with stddev 1/sqrt(fan_in).
    assert np.abs(core.hidden_to_hidden.numpy()).max() <= 2 / np.sqrt(3 * 6) + 1e-6


def test_dtype():
    core = snt.Conv1DLSTM((3, 2), 2, 3, dtype=tf.float64)
    out, state = core(tf.ones([1, 3, 2], tf.float64), core.initial_state(1))
    assert out.dtype == tf.float64 and state.cell.dtype == tf.float64
    with pytest.raises(TypeError, match="`inputs` must have dtype float64"):
        core(tf.ones([1, 3, 2]), state)


def test_errors():
    with pytest.raises(TypeError, match="`input_shape` must be a sequence of int"):
        snt.Conv2DLSTM(4, 3, 3)
    with pytest.raises(TypeError, match="`input_shape` must be an integer"):
        snt.Conv2DLSTM("abc", 3, 3)
    with pytest.raises(ValueError, match="`input_shape` must have 3 entries"):
        snt.Conv2DLSTM((4, 4), 3, 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="`input_shape` must be"):
        snt.Conv2DLSTM((4, -1, 2), 3, 3)
    with pytest.raises(TypeError, match="`input_shape` must be an integer"):
        snt.Conv2DLSTM((4, None, 2), 3, 3)
    with pytest.raises(ValueError, match="`input_shape` must have sizes known"):
        tf.function(
            lambda n: snt.Conv1DLSTM((n, 2), 3, 3).initial_state(1),
            input_signature=[tf.TensorSpec([], tf.int32)],
        ).get_concrete_function()
    with pytest.raises(ValueError, match="`output_channels` must be a positive"):
        snt.Conv2DLSTM((4, 4, 2), 0, 3)
    with pytest.raises(ValueError, match="`data_format`"):
        snt.Conv2DLSTM((4, 4, 2), 3, 3, data_format="NWC")
    with pytest.raises(TypeError, match="`w_h_init` must be a callable"):
        snt.Conv2DLSTM((4, 4, 2), 3, 3, w_h_init="x")
    with pytest.raises(tf.errors.InvalidArgumentError, match="`forget_bias` must be"):
        snt.Conv2DLSTM((4, 4, 2), 3, 3, forget_bias=[1.0, 2.0])
    core = snt.Conv2DLSTM((4, 4, 2), 3, 3)
    state = core.initial_state(2)
    with pytest.raises(ValueError, match="`inputs` must have rank 4"):
        core(tf.ones([2, 4, 2]), state)
    # The original's addition of gates and state failed: InvalidArgumentError.
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"`inputs` must have the spatial shape \(4, 4\) of `input_shape`",
    ):
        core(tf.ones([2, 4, 5, 2]), state)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`prev_state` must have the shapes"
    ):
        core(tf.ones([2, 4, 4, 2]), core.initial_state(3))
    with pytest.raises(ValueError, match="variables"):
        core.variables  # noqa: B018
    core(tf.ones([2, 4, 4, 2]), state)
    # More channels than the weights were made for: the original ran a grouped
    # convolution (a silently wrong result) or failed.
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`inputs` must have 2 channels"
    ):
        core(tf.ones([2, 4, 4, 4]), state)
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        core(tf.ones([2, 4, 4, 2], tf.float64), state)


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(
        [
            "input_shape",
            "output_channels",
            "kernel_shape",
            "data_format",
            "forget_bias",
            "dtype",
            "b_init",
        ]
    ),
    bad_input.junk(),
)
def test_junk_constructor_arguments(argument, value):
    kwargs = {"input_shape": (3, 2), "output_channels": 2, "kernel_shape": 3}
    kwargs[argument] = value
    ok, core = bad_input.outcome(lambda: snt.Conv1DLSTM(**kwargs), [argument])
    if ok:
        bad_input.outcome(
            lambda: core(tf.ones([1, 3, 2]), core.initial_state(1)), ["inputs"]
        )


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([0, 1, 2]),
    st.sampled_from(["rank", "dtype", "resize"]),
)
def test_bad_call_inputs(index, change):
    core = snt.Conv1DLSTM((3, 2), 2, 3)
    x, state = tf.ones([2, 3, 2]), core.initial_state(2)
    core(x, state)
    leaves = [x, *state]
    variants = {
        "rank": bad_input.wrong_rank_variants,
        "dtype": bad_input.wrong_dtype_variants,
        "resize": bad_input.resized_variants,
    }[change](leaves[index])
    for bad in variants:
        changed = list(leaves)
        changed[index] = bad
        before = bad_input.snapshot(core)
        ok, _ = bad_input.outcome(
            lambda c=changed: core(c[0], snt.LSTMState(*c[1:])),
            ["inputs", "prev_state"],
        )
        if not ok:
            bad_input.assert_unchanged(core, before)
