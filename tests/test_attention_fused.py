"""Traced self-attention's training fast paths against the plain version.

`snt.MultiHeadAttention` traced without a cache projects the query, key and
value of self-attention with one matmul (`attention._project_together`,
switched by `attention.FUSE_PROJECTIONS`) and applies a `[T, S]` mask as an
additive bias. The oracles: the same module traced with the switch off
(three products), eager calls (three products, a select for the mask) and
NumPy.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import attention


@pytest.fixture
def unfused() -> Iterator[None]:
    """Traces made inside see three separate projections."""
    attention.FUSE_PROJECTIONS = False
    try:
        yield
    finally:
        attention.FUSE_PROJECTIONS = True


def _loss_and_grads(
    module: Callable[..., tf.Tensor], variables: Any, x: tf.Tensor, **kwargs: Any
) -> tuple[tf.Tensor, Any]:
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = module(x, **kwargs)
        # A fixed projection of the outputs: every output element matters.
        weights = tf.cast(tf.reshape(tf.range(tf.size(y)), y.shape), y.dtype)
        loss = tf.reduce_sum(y * tf.sin(weights))
    return y, tape.gradient(loss, [x, *variables])


def _traced(
    module: Any, fused: bool, x: tf.Tensor, **kwargs: Any
) -> Callable[..., Any]:
    attention.FUSE_PROJECTIONS = fused
    try:
        step = tf.function(
            lambda x: _loss_and_grads(module, module.trainable_variables, x, **kwargs)
        )
        step.get_concrete_function(x)  # Traced under the switch.
    finally:
        attention.FUSE_PROJECTIONS = True
    return step


CONFIGS = [
    dict(num_heads=3, key_size=4),
    dict(num_heads=3, key_size=4, value_size=6, model_size=10),
    dict(num_heads=4, key_size=3, num_kv_heads=2),
    dict(num_heads=2, key_size=4, with_bias=False),
    dict(num_heads=2, key_size=4, rotary=True, window=2),
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("causal", [False, True])
def test_fused_projections_match_separate_ones(config, causal):
    mha = snt.MultiHeadAttention(**config)
    x = tf.random.normal([2, 5, 12], seed=3)
    mha(x)
    fused = _traced(mha, True, x, causal=causal)
    separate = _traced(mha, False, x, causal=causal)
    y1, g1 = fused(x)
    y2, g2 = separate(x)
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # And the eager call (separate products, the mask as a select).
    y3, g3 = _loss_and_grads(mha, mha.trainable_variables, x, causal=causal)
    np.testing.assert_allclose(y1, y3, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g3, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _numpy_causal_attention(mha: snt.MultiHeadAttention, x: np.ndarray) -> np.ndarray:
    def project(linear: snt.Linear, inputs: np.ndarray) -> np.ndarray:
        return inputs @ linear.w.numpy() + linear.b.numpy()

    batch, time, _ = x.shape
    heads, size = mha.num_heads, mha.key_size
    q = project(mha.query, x).reshape(batch, time, heads, size) / np.sqrt(size)
    k = project(mha.key, x).reshape(batch, time, heads, size)
    v = project(mha.value, x).reshape(batch, time, heads, size)
    logits = np.einsum("bthk,bshk->bhts", q, k)
    logits = np.where(np.tril(np.ones([time, time], bool)), logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads_out = np.einsum("bhts,bshv->bthv", weights, v).reshape(batch, time, -1)
    return project(mha.output, heads_out)


def test_traced_causal_self_attention_matches_numpy():
    mha = snt.MultiHeadAttention(num_heads=3, key_size=4)
    x = tf.random.normal([2, 6, 12], seed=1)
    y = tf.function(lambda x: mha(x, causal=True))(x)
    expected = _numpy_causal_attention(mha, x.numpy().astype(np.float64))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def _op_counts(fn: Callable[..., Any], *args: Any) -> collections.Counter:
    graph = tf.function(fn).get_concrete_function(*args).graph
    return collections.Counter(op.type for op in graph.get_operations())


def test_one_product_for_the_three_projections():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, 5, 8])
    mha(x)
    counts = _op_counts(lambda x: mha(x, causal=True), x)
    assert counts["MatMul"] == 2  # Query, key and value together; the output.
    assert counts["SplitV"] == 1
    # Cross-attention keeps three products.
    counts = _op_counts(lambda x, m: mha(x, m), x, x + 1)
    assert counts["MatMul"] == 4 and counts["SplitV"] == 0


def test_unfused_switch_gives_three_products(unfused):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, 5, 8])
    mha(x)
    counts = _op_counts(lambda x: mha(x, causal=True), x)
    assert counts["MatMul"] == 4 and counts["SplitV"] == 0


def test_causal_mask_is_an_additive_bias_in_traced_training_calls():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, 5, 8])
    mha(x)
    step = tf.function(
        lambda x: _loss_and_grads(mha, mha.trainable_variables, x, causal=True)
    )
    # The plain ops (`test_compiled_attention.py` covers the compiled core).
    attention.COMPILED_CORE = False
    try:
        graph = step.get_concrete_function(x).graph
    finally:
        attention.COMPILED_CORE = None
    selects = [op for op in graph.get_operations() if op.type == "SelectV2"]
    # One select makes the `[T, S]` bias; none on `[B, heads, T, S]`, forward
    # or backward.
    assert [op.outputs[0].shape.rank for op in selects] == [2]


def test_lora_adapted_projections_stay_separate():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, 5, 8], seed=2)
    mha(x)
    snt.lora.add(mha, rank=2)
    for module in mha.submodules:
        if isinstance(module, snt.lora.LoRA):
            for variable in module.trainable_variables:
                variable.assign(tf.random.normal(variable.shape, seed=5))
    counts = _op_counts(lambda x: mha(x, causal=True), x)
    assert counts["SplitV"] == 0
    traced = tf.function(lambda x: mha(x, causal=True))(x)
    np.testing.assert_allclose(traced, mha(x, causal=True), rtol=1e-5, atol=1e-6)


def test_transformer_train_step_gradients_match_separate_projections():
    model = snt.nets.Transformer(num_layers=2, num_heads=2, model_size=16, causal=True)
    x = tf.random.normal([2, 7, 16], seed=4)
    model(x)
    variables = model.trainable_variables

    def step(x: tf.Tensor) -> Any:
        return _loss_and_grads(model, variables, x)

    fused = tf.function(step)
    fused.get_concrete_function(x)
    attention.FUSE_PROJECTIONS = False
    try:
        separate = tf.function(step)
        separate.get_concrete_function(x)
    finally:
        attention.FUSE_PROJECTIONS = True
    (y1, g1), (y2, g2) = fused(x), separate(x)
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-5)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_mixed_precision_fused_projections_match_separate_ones():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    snt.precision.apply(mha, "mixed_bfloat16")
    x = tf.random.normal([2, 5, 8], seed=6)
    mha(x)
    fused = _traced(mha, True, x, causal=True)
    separate = _traced(mha, False, x, causal=True)
    y1, g1 = fused(x)
    y2, g2 = separate(x)
    np.testing.assert_allclose(
        tf.cast(y1, tf.float32), tf.cast(y2, tf.float32), rtol=2e-2, atol=2e-2
    )
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(
            tf.cast(a, tf.float32), tf.cast(b, tf.float32), rtol=5e-2, atol=5e-2
        )
