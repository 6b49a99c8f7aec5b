"""Tests for `snt.MixtureOfExperts`: routing, outputs and losses against NumPy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import moe as moe_lib

# ---------------------------------------------------------------------------
# NumPy reference.

_erf = np.vectorize(math.erf)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _logsumexp(x: np.ndarray) -> np.ndarray:
    top = x.max(-1)
    return top + np.log(np.exp(x - top[..., None]).sum(-1))


def _np_activation(h: np.ndarray, activation: str) -> np.ndarray:
    if activation == "relu":
        return np.maximum(h, 0)
    if activation == "gelu_tanh":
        inner = math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)
        return 0.5 * h * (1 + np.tanh(inner))
    return 0.5 * h * (1 + _erf(h / math.sqrt(2)))


def _np_mlp(x: np.ndarray, p: dict[str, np.ndarray], activation: str, e: Any):
    """One expert's MLP (`e`: its index in stacked params, or None)."""

    def get(name: str) -> Any:
        value = p.get(name)
        return None if value is None else (value if e is None else value[e])

    def affine(x: np.ndarray, w: str, b: str) -> np.ndarray:
        y = x @ get(w)
        return y if get(b) is None else y + get(b)

    h = affine(x, "w_in", "b_in")
    if activation == "swiglu":
        g = affine(x, "w_gate", "b_gate")
        h = g / (1 + np.exp(-g)) * h
    else:
        h = _np_activation(h, activation)
    return affine(h, "w_out", "b_out")


def _np_route(logits: np.ndarray, top_k: int, gating: str, normalize: bool):
    if gating == "softmax":
        scores = _softmax(logits)
        probabilities = scores
    else:
        scores = 1 / (1 + np.exp(-logits))
        probabilities = scores / scores.sum(-1, keepdims=True)
    # Best first, ties to the lower index (as `tf.math.top_k`).
    experts = np.argsort(-scores, axis=-1, kind="stable")[:, :top_k]
    gates = np.take_along_axis(scores, experts, -1)
    if normalize:
        gates = gates / gates.sum(-1, keepdims=True)
    return experts, gates, probabilities


def _np_kept(experts: np.ndarray, num_experts: int, slots: int | None) -> np.ndarray:
    """Which assignments fit: first choices of every token, then second..."""
    tokens, top_k = experts.shape
    kept = np.ones_like(experts, dtype=bool)
    taken = np.zeros(num_experts, int)
    for j in range(top_k):
        for n in range(tokens):
            e = experts[n, j]
            if slots is not None and taken[e] >= slots:
                kept[n, j] = False
            taken[e] += 1
    return kept


def _params(module: snt.MixtureOfExperts, prefix: str = "") -> dict[str, np.ndarray]:
    names = ("w_in", "b_in", "w_gate", "b_gate", "w_out", "b_out")
    found = {n: getattr(module, prefix + n, None) for n in names}
    return {n: v.numpy().astype(np.float64) for n, v in found.items() if v is not None}


def _np_moe(module: snt.MixtureOfExperts, x: np.ndarray):
    """Outputs and aux losses of `module` for `x`, in float64 NumPy."""
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    logits = rows @ module.router.w.numpy().astype(np.float64)
    experts, gates, probabilities = _np_route(
        logits, module.top_k, module.gating, module.normalize_gates
    )
    e, n = module.num_experts, rows.shape[0]
    slots = None
    if module.capacity_factor is not None:
        slots = math.ceil(module.capacity_factor * n * module.top_k / e)
    kept = _np_kept(experts, e, slots)
    params = _params(module)
    y = np.zeros_like(rows)
    for token in range(n):
        for j in range(module.top_k):
            if kept[token, j]:
                expert = experts[token, j]
                out = _np_mlp(rows[token], params, module.activation, expert)
                y[token] += gates[token, j] * out
    if module.shared_expert:
        y += _np_mlp(rows, _params(module, "shared_"), module.activation, None)
    fraction = np.bincount(experts.ravel(), minlength=e) / (n * module.top_k)
    balance = e * np.sum(fraction * probabilities.mean(0))
    z = np.mean(_logsumexp(logits) ** 2)
    losses = {"load_balancing": balance, "router_z": z}
    return y.reshape(x.shape), losses, kept


def _inputs(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def _built(x: Any, **kwargs: Any) -> snt.MixtureOfExperts:
    kwargs = {"num_experts": 4, "hidden_size": 6, **kwargs}
    module = snt.MixtureOfExperts(**kwargs)
    module(x)
    # Non-zero biases, so that they are checked too.
    for v in module.variables:
        if "/b_" in v.name or "/shared_b_" in v.name:
            v.assign(tf.random.stateless_normal(v.shape, (1, 2), dtype=v.dtype) * 0.1)
    return module


# ---------------------------------------------------------------------------
# Routing and outputs against the reference.


@pytest.mark.parametrize("gating", ["softmax", "sigmoid"])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("capacity_factor", [None, 0.5, 1.0, 2.0])
def test_outputs_and_losses_match_numpy(gating, normalize, capacity_factor):
    x = _inputs(3, 10, 5)
    module = _built(
        x,
        top_k=2,
        gating=gating,
        normalize_gates=normalize,
        capacity_factor=capacity_factor,
    )
    outputs, losses = module(x, return_aux_losses=True)
    expected, expected_losses, kept = _np_moe(module, x)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    for name in ("load_balancing", "router_z"):
        np.testing.assert_allclose(losses[name], expected_losses[name], rtol=1e-5)
    if capacity_factor == 0.5:
        assert not kept.all()  # Something was dropped.


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu", "swiglu"])
@pytest.mark.parametrize("capacity_factor", [None, 1.0])
def test_activations_and_shared_expert_match_numpy(activation, capacity_factor):
    x = _inputs(2, 7, 5, seed=1)
    module = _built(
        x,
        top_k=3,
        activation=activation,
        capacity_factor=capacity_factor,
        shared_expert=True,
        shared_hidden_size=3,
    )
    expected, _, _ = _np_moe(module, x)
    np.testing.assert_allclose(module(x), expected, rtol=1e-5, atol=1e-5)
    assert module.shared_w_in.shape == [5, 3]


def test_top_1_switch_routing_keeps_the_probability_as_gate():
    x = _inputs(12, 4, seed=2)
    module = _built(x, top_k=1)
    assert not module.normalize_gates
    expected, _, _ = _np_moe(module, x)
    np.testing.assert_allclose(module(x), expected, rtol=1e-5, atol=1e-5)
    assert snt.MixtureOfExperts(4, 6, top_k=2).normalize_gates


def test_without_bias_and_float64():
    x = _inputs(9, 3, seed=3, dtype=np.float64)
    module = _built(x, with_bias=False, activation="swiglu", shared_expert=True)
    assert not hasattr(module, "b_in") and not hasattr(module, "shared_b_out")
    assert module.w_in.dtype == tf.float64 and module.router.w.dtype == tf.float64
    outputs, losses = module(x, return_aux_losses=True)
    expected, expected_losses, _ = _np_moe(module, x)
    np.testing.assert_allclose(outputs, expected, rtol=1e-10, atol=1e-12)
    assert losses["router_z"].dtype == tf.float64
    np.testing.assert_allclose(losses["router_z"], expected_losses["router_z"])


def test_routing_helpers_match_numpy():
    logits = tf.constant(_inputs(20, 6, seed=4))
    for gating in ("softmax", "sigmoid"):
        routing = moe_lib.route(logits, 3, gating, normalize=True)
        experts, gates, probabilities = _np_route(logits.numpy(), 3, gating, True)
        np.testing.assert_array_equal(routing.experts, experts)
        np.testing.assert_allclose(routing.gates, gates, rtol=1e-6)
        np.testing.assert_allclose(routing.probabilities, probabilities, rtol=1e-6)


def test_slot_positions_first_choices_first_then_token_order():
    experts = tf.constant([[0, 1], [0, 2], [1, 0], [0, 1]])
    positions = moe_lib.slot_positions(experts, 3)
    # Expert 0: first choices of tokens 0, 1, 3, then token 2's second choice.
    # Expert 1: token 2's first choice, then second choices of 0 and 3.
    np.testing.assert_array_equal(positions, [[0, 1], [1, 0], [0, 3], [2, 2]])
    kept = _np_kept(experts.numpy(), 3, 2)
    np.testing.assert_array_equal(positions.numpy() < 2, kept)


def test_capacity_drops_later_tokens_and_second_choices():
    # A router that sends every token to expert 0 first, expert 1 second.
    x = np.ones([6, 2], np.float32)
    module = snt.MixtureOfExperts(
        3,
        4,
        top_k=2,
        capacity_factor=1.0,
        w_init=snt.initializers.Ones(),
    )
    module(x)
    module.router.w.assign([[2.0, 1.0, 0.0], [2.0, 1.0, 0.0]])
    # Capacity ceil(1.0 * 6 * 2 / 3) = 4: tokens 0-3 keep both choices.
    outputs = module(x).numpy()
    np.testing.assert_allclose(outputs[4:], 0.0)
    assert np.all(np.abs(outputs[:4]) > 0)
    assert moe_lib.capacity(1.0, 6, 2, 3) == 4
    assert int(moe_lib.capacity(1.0, tf.constant(6), 2, 3)) == 4


def test_capacity_rounds_up_and_matches_in_graphs():
    for factor, tokens in [(1.25, 2048), (0.1, 3), (1.1, 10), (2.0, 0)]:
        expected = math.ceil(factor * tokens * 2 / 8)
        assert moe_lib.capacity(factor, tokens, 2, 8) == expected
        assert int(moe_lib.capacity(factor, tf.constant(tokens), 2, 8)) == expected


# ---------------------------------------------------------------------------
# Gradients.


class _DenseReference:
    """The same maths with every expert on every token (a mask-weighted sum):
    what the routed computation must equal, gradients included."""

    def __init__(self, module: snt.MixtureOfExperts):
        self.module = module

    def __call__(self, x: tf.Tensor) -> Any:
        m = self.module
        rows = tf.reshape(x, [-1, m.model_size])
        logits = tf.matmul(rows, m.router.w)
        routing = moe_lib.route(logits, m.top_k, m.gating, m.normalize_gates)
        kept = tf.ones_like(routing.experts, tf.bool)
        if m.capacity_factor is not None:
            slots = moe_lib.capacity(m.capacity_factor, rows.shape[0], m.top_k, 4)
            kept = moe_lib.slot_positions(routing.experts, m.num_experts) < slots
        weights = tf.reduce_sum(
            tf.one_hot(routing.experts, m.num_experts)
            * tf.expand_dims(routing.gates * tf.cast(kept, rows.dtype), -1),
            axis=1,
        )  # [N, E]
        w = moe_lib._Weights(  # noqa: SLF001
            m.w_in, m.b_in[:, None], None, None, m.w_out, m.b_out[:, None]
        )
        every = moe_lib._mlp(  # noqa: SLF001
            tf.broadcast_to(rows, [m.num_experts, *rows.shape]), w, m.activation
        )  # [E, N, D]
        y = tf.einsum("ne,end->nd", weights, every)
        return tf.reshape(y, x.shape), moe_lib.aux_losses(logits, routing)


@pytest.mark.parametrize("capacity_factor", [None, 0.75])
def test_gradients_reach_router_and_experts(capacity_factor):
    x = tf.constant(_inputs(4, 6, 5, seed=5))
    module = _built(x, capacity_factor=capacity_factor)
    reference = _DenseReference(module)
    target = tf.constant(_inputs(4, 6, 5, seed=6))

    def loss_of(fn: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs, losses = fn(x)
            loss = (
                tf.reduce_sum(tf.square(outputs - target))
                + losses["load_balancing"]
                + losses["router_z"]
            )
        return tape.gradient(loss, [x, *module.trainable_variables])

    grads = loss_of(lambda x: module(x, return_aux_losses=True))
    expected = loss_of(reference)
    for g, e, v in zip(grads[1:], expected[1:], module.trainable_variables):
        assert g is not None, v.name
        assert float(tf.reduce_max(tf.abs(g))) > 0, v.name
        np.testing.assert_allclose(tf.convert_to_tensor(g), e, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tf.convert_to_tensor(grads[0]), expected[0], atol=1e-5)


@pytest.mark.parametrize("capacity_factor", [None, 1.0])
def test_input_gradients_match_finite_differences(capacity_factor):
    x = tf.constant(_inputs(5, 3, seed=7, dtype=np.float64))
    module = _built(
        x, activation="swiglu", gating="sigmoid", capacity_factor=capacity_factor
    )

    def loss(x: tf.Tensor) -> tf.Tensor:
        outputs, losses = module(x, return_aux_losses=True)
        return tf.reduce_sum(tf.sin(outputs)) + losses["router_z"]

    # Small steps do not change the routing (piecewise smooth).
    theoretical, numerical = tf.test.compute_gradient(loss, [x], delta=1e-6)
    np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# Eager, tf.function, XLA.


@pytest.mark.parametrize("capacity_factor", [None, 1.25])
def test_tf_function_matches_eager(capacity_factor):
    x = tf.constant(_inputs(3, 8, 6, seed=8))
    module = _built(x, capacity_factor=capacity_factor, shared_expert=True)
    expected = module(x, return_aux_losses=True)
    traced = tf.function(lambda x: module(x, return_aux_losses=True))
    unknown = tf.function(
        lambda x: module(x, return_aux_losses=True),
        input_signature=[tf.TensorSpec([None, None, 6])],
    )
    for fn in (traced, unknown):
        actual = fn(x)
        np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5, atol=1e-6)
        for name in expected[1]:
            np.testing.assert_allclose(actual[1][name], expected[1][name], rtol=1e-5)


def test_xla_matches_eager_with_a_capacity():
    x = tf.constant(_inputs(2, 16, 6, seed=9))
    module = _built(x, capacity_factor=1.0, activation="swiglu")
    expected = module(x, return_aux_losses=True)
    compiled = tf.function(
        lambda x: module(x, return_aux_losses=True), jit_compile=True
    )
    actual = compiled(x)
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        actual[1]["load_balancing"], expected[1]["load_balancing"], rtol=1e-5
    )

    def step(x: tf.Tensor) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(module(x)))
        return tape.gradient(loss, module.trainable_variables)

    for g, e in zip(tf.function(step, jit_compile=True)(x), step(x)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_dropless_under_xla_is_refused():
    x = tf.constant(_inputs(2, 4, 6))
    module = _built(x)
    compiled = tf.function(lambda x: module(x), jit_compile=True)
    with pytest.raises(ValueError, match="`capacity_factor` must not be None.*XLA"):
        compiled(x)
    module(x)  # Still usable.


# ---------------------------------------------------------------------------
# Distribution, checkpoints, precision, empty batches.


def test_two_replicas_match_one_device():
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    replicator = snt.distribute.Replicator(devices)
    x = tf.constant(_inputs(8, 5, 6, seed=10))
    reference = _built(x, shared_expert=True)
    with replicator.scope():
        module = snt.MixtureOfExperts(4, 6, shared_expert=True)

    def step(x: tf.Tensor) -> Any:
        with tf.GradientTape() as tape:
            outputs, losses = module(x, return_aux_losses=True)
            loss = tf.reduce_sum(tf.square(outputs)) + losses["load_balancing"]
        grads = tape.gradient(loss, module.trainable_variables)
        grads = tf.distribute.get_replica_context().all_reduce("sum", grads)
        return outputs, losses, grads

    shards = tf.split(x, 2)
    distributed = replicator.experimental_distribute_values_from_function(
        lambda ctx: shards[ctx.replica_id_in_sync_group]
    )
    run = tf.function(lambda x: replicator.run(step, args=(x,)))
    run(distributed)  # Builds the module.
    for v, r in zip(module.variables, reference.variables):
        assert v.name == r.name
        v.assign(r)  # Every replica's copy.
    outputs, losses, grads = run(distributed)

    expected_grads = [tf.zeros_like(v) for v in reference.trainable_variables]
    for i, shard in enumerate(shards):
        with tf.GradientTape() as tape:
            out, aux = reference(shard, return_aux_losses=True)
            loss = tf.reduce_sum(tf.square(out)) + aux["load_balancing"]
        shard_grads = tape.gradient(loss, reference.trainable_variables)
        expected_grads = [
            a + tf.convert_to_tensor(b) for a, b in zip(expected_grads, shard_grads)
        ]
        local = replicator.experimental_local_results
        np.testing.assert_allclose(local(outputs)[i], out, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            local(losses["load_balancing"])[i], aux["load_balancing"], rtol=1e-5
        )
        for g, e in zip(grads, expected_grads if i == 1 else []):
            np.testing.assert_allclose(local(g)[i], e, rtol=1e-4, atol=1e-5)


def test_checkpoint_round_trip_and_restore_on_create(tmp_path):
    x = tf.constant(_inputs(2, 3, 6, seed=11))
    module = _built(x, activation="swiglu", shared_expert=True, capacity_factor=2.0)
    path = tf.train.Checkpoint(module=module).write(str(tmp_path / "ckpt"))
    fresh = snt.MixtureOfExperts(
        4, 6, activation="swiglu", shared_expert=True, capacity_factor=2.0
    )
    status = tf.train.Checkpoint(module=fresh).read(path)
    np.testing.assert_allclose(fresh(x), module(x), rtol=1e-6)
    status.assert_consumed()
    names = sorted(v.name.split("/", 1)[1] for v in fresh.variables)
    assert names == sorted(
        [
            f"{p}{k}_{part}:0"
            for p in ("", "shared_")
            for k in "wb"
            for part in ("in", "gate", "out")
        ]
        + ["router/w:0"]
    )
    assert fresh.w_in.shape == [4, 6, 6] and fresh.b_out.shape == [4, 6]
    assert fresh.w_out.shape == [4, 6, 6] and fresh.router.w.shape == [6, 4]


def test_experts_draw_their_own_initial_values():
    module = snt.MixtureOfExperts(3, 8)
    module(tf.ones([2, 8]))
    w = module.w_in.numpy()
    assert not np.allclose(w[0], w[1])
    assert 0.2 < np.std(w) * math.sqrt(8) < 1.2  # stddev 1 / sqrt(fan_in).


def test_precision_policy_float32_variables_bfloat16_experts():
    x = tf.constant(_inputs(4, 8, 6, seed=12))
    module = _built(x, capacity_factor=2.0, activation="swiglu")
    low = snt.MixtureOfExperts(4, 6, capacity_factor=2.0, activation="swiglu")
    snt.precision.apply(low, "mixed_bfloat16")
    outputs, losses = low(x, return_aux_losses=True)
    assert all(v.dtype == tf.float32 for v in low.variables)
    assert outputs.dtype == tf.bfloat16
    assert losses["router_z"].dtype == tf.float32
    for v, r in zip(low.variables, module.variables):
        v.assign(r)
    np.testing.assert_allclose(
        tf.cast(low(x), tf.float32), module(x), rtol=5e-2, atol=5e-2
    )


@pytest.mark.parametrize("capacity_factor", [None, 1.0])
def test_empty_batch(capacity_factor):
    x = tf.constant(_inputs(2, 3, 6))
    module = _built(x, capacity_factor=capacity_factor)
    outputs, losses = module(tf.zeros([0, 3, 6]), return_aux_losses=True)
    assert outputs.shape == [0, 3, 6]
    assert float(losses["load_balancing"]) == 0.0 and float(losses["router_z"]) == 0.0


def test_nan_inputs_give_nan_outputs_for_those_tokens_only():
    x = _inputs(4, 6, seed=13)
    module = _built(x, capacity_factor=4.0)
    x[1] = np.nan
    outputs = module(x).numpy()
    assert np.all(np.isnan(outputs[1]))
    assert np.all(np.isfinite(np.delete(outputs, 1, axis=0)))


# ---------------------------------------------------------------------------
# Bad arguments (every raise of the module).


@pytest.mark.parametrize(
    "kwargs, argument, fragment",
    [
        ({"num_experts": 0}, "num_experts", "positive integer"),
        ({"num_experts": 2.5}, "num_experts", "integer"),
        ({"hidden_size": 0}, "hidden_size", "positive integer"),
        ({"top_k": 0}, "top_k", "positive integer"),
        ({"top_k": 5}, "top_k", r"at most `num_experts` \(4\)"),
        ({"activation": "tanh"}, "activation", "must be one of"),
        ({"activation": 3}, "activation", "must be one of"),
        ({"gating": "hard"}, "gating", "must be one of"),
        ({"normalize_gates": "yes"}, "normalize_gates", "bool"),
        ({"capacity_factor": 0.0}, "capacity_factor", "must be > 0"),
        ({"capacity_factor": -1}, "capacity_factor", "must be > 0"),
        ({"capacity_factor": "1"}, "capacity_factor", "real number"),
        ({"capacity_factor": float("inf")}, "capacity_factor", "finite"),
        ({"shared_hidden_size": 3}, "shared_hidden_size", "shared_expert=False"),
        ({"shared_expert": True, "shared_hidden_size": 0}, "shared_hidden_size", ""),
        ({"w_init": snt.initializers.Ones}, "w_init", "callable"),
    ],
)
def test_bad_constructor_arguments(kwargs, argument, fragment):
    kwargs = {"num_experts": 4, "hidden_size": 6, **kwargs}
    with pytest.raises((ValueError, TypeError), match=f"`{argument}`.*{fragment}"):
        snt.MixtureOfExperts(**kwargs)


def test_bad_inputs_raise_and_change_nothing():
    module = snt.MixtureOfExperts(4, 6)
    with pytest.raises(ValueError, match="`inputs` must have rank >= 2"):
        module(tf.ones([6]))
    with pytest.raises(TypeError, match="`inputs` must have a floating point dtype"):
        module(tf.ones([2, 6], tf.int32))
    unknown = tf.function(
        lambda x: module(x), input_signature=[tf.TensorSpec([2, None])]
    )
    with pytest.raises(ValueError, match="`inputs` must have a known last dim"):
        unknown.get_concrete_function()
    assert module._dtype is None  # noqa: SLF001 (nothing was built)
    x = tf.constant(_inputs(2, 6))
    expected = module(x)
    with pytest.raises(ValueError, match="`inputs` must have last dimension 6"):
        module(tf.ones([2, 5]))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        module(tf.ones([2, 6], tf.float64))
    with pytest.raises(TypeError, match="`return_aux_losses` must be a bool"):
        module(x, return_aux_losses="yes")
    np.testing.assert_array_equal(module(x), expected)


def test_stacked_layers_collect_the_losses_per_layer():
    class Block(snt.Module):
        def __init__(self) -> None:
            super().__init__()
            self.moe = snt.MixtureOfExperts(4, 6, capacity_factor=1.5)

        def __call__(self, x: tf.Tensor) -> Any:
            y, losses = self.moe(x, return_aux_losses=True)
            return x + y, losses

    stack = snt.LayerStack(Block, num_layers=3)
    x = tf.constant(_inputs(2, 5, 8, seed=14))
    outputs, per_layer = stack(x, per_layer={})
    assert stack.variables[2].shape == [3, 4, 8, 6]  # [layers, experts, ...]
    assert per_layer["load_balancing"].shape == [3]
    # The same as the unrolled layers with each layer's slice of the weights.
    h = x
    for i in range(3):
        layer = Block()
        layer(h)
        for v, stacked in zip(layer.variables, stack.variables):
            v.assign(stacked[i])
        h, losses = layer(h)
        np.testing.assert_allclose(
            per_layer["router_z"][i], losses["router_z"], rtol=1e-5
        )
    np.testing.assert_allclose(outputs, h, rtol=1e-5, atol=1e-5)
    traced = tf.function(lambda x: stack(x, per_layer={}), jit_compile=True)
    np.testing.assert_allclose(traced(x)[0], outputs, rtol=1e-4, atol=1e-5)
