"""`snt.precision` policies in attention, Transformers and the layer norms.

A module built in float32, then given the "mixed_bfloat16" policy, computes
in bfloat16 (within bfloat16's tolerance of float32) with its variables
still float32, and gradients reach every variable in float32; the same in
`tf.function` and under XLA, and when decoding with a bfloat16 cache.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import precision

BF16 = "mixed_bfloat16"
# bfloat16 has 8 significant bits: relative steps of 2^-8 per rounding.
TOLERANCE = dict(rtol=0.05, atol=0.05)


def _random(*shape: int, seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[seed, 3])


def _check_variables(module: snt.Module) -> None:
    assert module.variables
    for v in module.variables:
        assert v.dtype == tf.float32, v.name


def _check_gradients(module: snt.Module, loss_fn, *args) -> None:
    with tf.GradientTape() as tape:
        loss = loss_fn(*args)
    grads = tape.gradient(loss, module.trainable_variables)
    for v, g in zip(module.trainable_variables, grads, strict=True):
        assert g is not None, v.name
        assert g.dtype == tf.float32, v.name
        assert np.all(np.isfinite(g.numpy())), v.name


def _modules():
    return {
        "mha": lambda: snt.MultiHeadAttention(num_heads=2, key_size=8),
        "gqa_rotary": lambda: snt.MultiHeadAttention(
            num_heads=4, key_size=4, num_kv_heads=2, rotary=True
        ),
        "block": lambda: snt.nets.TransformerBlock(2, 16, causal=True),
        "transformer": lambda: snt.nets.Transformer(2, 2, 16, causal=True),
        "swiglu_rms": lambda: snt.nets.Transformer(
            2, 2, 16, causal=True, activation="swiglu", norm="rms", rotary=True
        ),
    }


def _call(module, x):
    if isinstance(module, snt.MultiHeadAttention):
        return module(x, causal=True)
    return module(x)


@pytest.mark.parametrize("name", list(_modules()))
@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_bfloat16_close_to_float32_with_float32_variables(name, mode):
    module = _modules()[name]()
    x = _random(2, 6, 16)
    expected = _call(module, x)
    precision.apply(module, BF16)
    call = lambda x: _call(module, x)  # noqa: E731
    if mode != "eager":
        call = tf.function(call, jit_compile=mode == "xla")
    actual = call(x)
    assert actual.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(actual, tf.float32).numpy(), expected.numpy(), **TOLERANCE
    )
    _check_variables(module)

    def loss(x):
        return tf.reduce_mean(tf.square(tf.cast(call(x), tf.float32)))

    _check_gradients(module, loss, x)
    if mode != "eager":
        step = tf.function(
            lambda x: tf.reduce_mean(tf.square(tf.cast(_call(module, x), tf.float32))),
            jit_compile=mode == "xla",
        )
        with tf.GradientTape() as tape:
            value = step(x)
        grads = tape.gradient(value, module.trainable_variables)
        assert all(g is not None and g.dtype == tf.float32 for g in grads)


def test_built_under_the_policy_creates_float32_variables():
    transformer = precision.apply(snt.nets.Transformer(1, 2, 16, causal=True), BF16)
    y = transformer(_random(2, 5, 16))
    assert y.dtype == tf.bfloat16
    _check_variables(transformer)
    mha = precision.apply(snt.MultiHeadAttention(2, 4), BF16)
    assert mha(_random(2, 5, 16)).dtype == tf.bfloat16
    _check_variables(mha)
    # bfloat16 inputs to a module built in float32 are accepted too.
    assert transformer(tf.cast(_random(2, 5, 16), tf.bfloat16)).dtype == tf.bfloat16


def test_output_dtype_and_removing_the_policy():
    transformer = snt.nets.Transformer(2, 2, 16, causal=True)
    x = _random(2, 5, 16)
    expected = transformer(x)
    policy = snt.precision.Policy(tf.bfloat16, tf.float32, tf.float32)
    precision.apply(transformer, policy)
    y = tf.function(transformer)(x)
    assert y.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), expected.numpy(), **TOLERANCE)
    mha = precision.apply(snt.MultiHeadAttention(2, 4), policy)
    assert mha(x).dtype == tf.float32
    # Without the policy: float32 again, the same values as before.
    precision.apply(transformer, None)
    np.testing.assert_array_equal(transformer(x).numpy(), expected.numpy())


def test_softmax_stays_float32():
    mha = precision.apply(snt.MultiHeadAttention(2, 4), BF16)
    x = _random(2, 5, 8)
    trace = tf.function(lambda x: mha(x, causal=True)).get_concrete_function(x)
    # The trace's ops and those of the functions it calls (the compiled
    # attention core's).
    graph_def = trace.graph.as_graph_def()
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes += function.node_def

    def dtypes(op_types: tuple[str, ...]) -> set[tf.DType]:
        return {tf.as_dtype(n.attr["T"].type) for n in nodes if n.op in op_types}

    assert dtypes(("Softmax",)) == {tf.float32}
    assert dtypes(("MatMul", "BatchMatMulV2")) == {tf.bfloat16}


@pytest.mark.parametrize("jit_compile", [False, True])
def test_decoding_with_a_bfloat16_cache(jit_compile):
    transformer = snt.nets.Transformer(2, 2, 16, causal=True, rotary=True)
    x = _random(2, 6, 16)
    transformer(x)
    precision.apply(transformer, BF16)
    full = transformer(x)
    cache = transformer.initial_cache(batch_size=2, max_length=6)
    assert all(c.key.dtype == tf.bfloat16 for c in cache)

    @tf.function(jit_compile=jit_compile)
    def step(x_t, cache):
        return transformer(x_t, cache=cache)

    outputs = []
    for t in range(6):
        y, cache = step(x[:, t : t + 1], cache)
        assert y.dtype == tf.bfloat16
        outputs.append(y)
    np.testing.assert_allclose(
        tf.cast(tf.concat(outputs, 1), tf.float32).numpy(),
        tf.cast(full, tf.float32).numpy(),
        **TOLERANCE,
    )
    # A float32 cache is cast, like the other inputs.
    y, cache = transformer(x[:, :1], cache=transformer.initial_cache(2, 6, tf.float32))
    assert y.dtype == tf.bfloat16
    assert all(c.key.dtype == tf.bfloat16 for c in cache)
    np.testing.assert_allclose(
        tf.cast(y, tf.float32).numpy(),
        tf.cast(outputs[0], tf.float32).numpy(),
        **TOLERANCE,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: snt.LayerNorm(-1, create_scale=True, create_offset=True),
        lambda: snt.RMSNorm(),
    ],
)
@pytest.mark.parametrize("mode", ["eager", "function"])
def test_norm_statistics_in_float32(make, mode):
    norm = make()
    x = _random(3, 4, 16) * 50.0 + 200.0  # float16/bfloat16 sums would lose this.
    norm(x)
    for v in norm.variables:
        v.assign(tf.random.stateless_uniform(v.shape, [1, 2], 0.5, 1.5))
    # float32 arithmetic on the bfloat16-rounded inputs, rounded at the end.
    x16 = tf.cast(x, tf.bfloat16)
    expected = tf.cast(norm(tf.cast(x16, tf.float32)), tf.bfloat16)
    precision.apply(norm, BF16)
    call = norm if mode == "eager" else tf.function(norm)
    actual = call(x16)
    assert actual.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(actual, tf.float32).numpy(),
        tf.cast(expected, tf.float32).numpy(),
        rtol=1e-2,
        atol=1e-2,
    )
    _check_variables(norm)
    _check_gradients(
        norm, lambda x: tf.reduce_sum(tf.cast(call(x), tf.float32) ** 2), x16
    )


def test_no_policy_keeps_the_inputs_dtype():
    for module in (
        snt.LayerNorm(-1, True, True),
        snt.RMSNorm(),
        snt.MultiHeadAttention(2, 4),
        snt.nets.Transformer(1, 2, 8),
    ):
        assert module._precision is None
        assert module(tf.ones([1, 3, 8], tf.float64)).dtype == tf.float64
