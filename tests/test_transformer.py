"""Tests for `snt.nets.Transformer` and `snt.nets.TransformerBlock`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _random(*shape: int, seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[seed, 7])


# ---------------------------------------------------------------------------
# NumPy references.

_erf = np.vectorize(math.erf)


def _np_gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _np_silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _np_linear(linear: snt.Linear, x: np.ndarray) -> np.ndarray:
    y = x @ linear.w.numpy()
    return y + linear.b.numpy() if linear.with_bias else y


def _np_norm(norm: snt.Module, x: np.ndarray) -> np.ndarray:
    if isinstance(norm, snt.LayerNorm):
        mean = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        y = (x - mean) / np.sqrt(var + 1e-5)
        return y * norm.scale.numpy() + norm.offset.numpy()
    y = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6)
    return y * norm.scale.numpy()


def _np_attention(mha: snt.MultiHeadAttention, x: np.ndarray, causal: bool):
    """Self-attention with grouped key/value heads, no rotary embedding."""
    batch, time, _ = x.shape
    heads, kv_heads, key_size = mha.num_heads, mha.num_kv_heads, mha.key_size
    q = _np_linear(mha.query, x).reshape(batch, time, heads, key_size)
    k = _np_linear(mha.key, x).reshape(batch, time, kv_heads, key_size)
    v = _np_linear(mha.value, x).reshape(batch, time, kv_heads, -1)
    k = np.repeat(k, heads // kv_heads, axis=2)
    v = np.repeat(v, heads // kv_heads, axis=2)
    logits = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(key_size)
    if causal:
        future = np.triu(np.ones([time, time], bool), k=1)
        logits = np.where(future, -np.inf, logits)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhts,bshv->bthv", weights, v).reshape(batch, time, -1)
    return _np_linear(mha.output, out)


def _np_block(block: snt.nets.TransformerBlock, x: np.ndarray) -> np.ndarray:
    x = x + _np_attention(
        block.attention, _np_norm(block.attention_norm, x), block.causal
    )
    h = _np_norm(block.mlp_norm, x)
    if block.activation == "swiglu":
        h = _np_silu(_np_linear(block.mlp_gate, h)) * _np_linear(block.mlp_in, h)
    elif block.activation == "gelu":
        h = _np_gelu(_np_linear(block.mlp_in, h))
    else:
        h = np.maximum(_np_linear(block.mlp_in, h), 0.0)
    return x + _np_linear(block.mlp_out, h)


# ---------------------------------------------------------------------------
# Construction, shapes and variables.


def test_repr_and_resolved_sizes():
    t = snt.nets.Transformer(2, 4, model_size=32)
    assert repr(t) == "Transformer(num_layers=2, num_heads=4, model_size=32)"
    block = t.blocks[0]
    assert (block.model_size, block.key_size, block.mlp_hidden_size) == (32, 8, 128)
    assert [b.name for b in t.blocks] == ["block_0", "block_1"]
    # `model_size` from `key_size`.
    t = snt.nets.Transformer(1, 3, key_size=5, mlp_hidden_size=7)
    assert t.model_size == 15
    assert (t.blocks[0].key_size, t.blocks[0].mlp_hidden_size) == (5, 7)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"activation": "swiglu", "norm": "rms"},
        {"activation": "relu", "num_kv_heads": 1, "with_bias": False},
        {"rotary": True, "key_size": 6},
    ],
    ids=["gelu-layer", "swiglu-rms", "relu-gqa-nobias", "rotary"],
)
def test_output_shape_and_dtype(kwargs, causal):
    t = snt.nets.Transformer(2, 2, model_size=8, causal=causal, **kwargs)
    y = t(_random(3, 5, 8))
    assert y.shape == [3, 5, 8] and y.dtype == tf.float32
    assert bool(tf.reduce_all(tf.math.is_finite(y)))


def test_variable_names_and_checkpoint_paths(tmp_path):
    t = snt.nets.Transformer(1, 2, model_size=4)
    t(_random(1, 2, 4))
    names = [v.name for v in t.variables]
    assert names[0].startswith("transformer/block_0/attention/")
    assert names[-2:] == [
        "transformer/final_norm/offset:0",
        "transformer/final_norm/scale:0",
    ]
    block_names = {
        n.split("/")[2] for n in names if n.startswith("transformer/block_0")
    }
    assert block_names == {
        "attention",
        "attention_norm",
        "mlp_in",
        "mlp_norm",
        "mlp_out",
    }
    path = tf.train.Checkpoint(model=t).write(str(tmp_path / "ckpt"))
    keys = {name for name, _ in tf.train.list_variables(path)}
    assert "model/blocks/0/mlp_in/w/.ATTRIBUTES/VARIABLE_VALUE" in keys
    assert "model/final_norm/scale/.ATTRIBUTES/VARIABLE_VALUE" in keys


def _num_variables(**kwargs) -> int:
    block = snt.nets.TransformerBlock(num_heads=2, model_size=8, **kwargs)
    block(_random(1, 3, 8))
    return len(block.variables)


def test_swiglu_and_gelu_variable_counts():
    gelu = _num_variables()
    swiglu = _num_variables(activation="swiglu")
    # Two layer norms (scale, offset), attention (query, key, value, output
    # projections with biases), the MLP's two projections.
    assert gelu == 4 + 8 + 4
    assert swiglu == gelu + 2  # SwiGLU's gate projection: `mlp_gate/{w,b}`.
    assert _num_variables(activation="swiglu", with_bias=False, norm="rms") == 2 + 4 + 3
    block = snt.nets.TransformerBlock(2, 8, mlp_hidden_size=16, activation="swiglu")
    block(_random(1, 3, 8))
    assert block.mlp_gate.w.shape == [8, 16] and block.mlp_in.w.shape == [8, 16]
    assert block.mlp_out.w.shape == [16, 8]
    assert not hasattr(snt.nets.TransformerBlock(2, 8), "mlp_gate")


# ---------------------------------------------------------------------------
# Numerics.


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"activation": "swiglu", "norm": "rms"},
        {"activation": "relu", "num_kv_heads": 1, "key_size": 3},
    ],
    ids=["gelu-layer", "swiglu-rms", "relu-gqa"],
)
def test_block_matches_numpy(kwargs, causal):
    block = snt.nets.TransformerBlock(
        num_heads=2, model_size=6, causal=causal, **kwargs
    )
    x = _random(2, 5, 6)
    y = block(x)
    # Non-trivial norm parameters and biases, so that every term is checked.
    for v in block.variables:
        v.assign(v + 0.1 * _random(*v.shape, seed=len(v.name)))
    y = block(x).numpy()
    np.testing.assert_allclose(y, _np_block(block, x.numpy()), rtol=1e-4, atol=1e-5)


def test_transformer_is_blocks_then_final_norm():
    t = snt.nets.Transformer(3, 2, model_size=6, norm="rms", causal=True)
    x = _random(2, 4, 6)
    y = t(x).numpy()
    expected = x.numpy()
    for block in t.blocks:
        expected = _np_block(block, expected)
    expected = _np_norm(t.final_norm, expected)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


def test_causal_outputs_do_not_depend_on_later_inputs():
    t = snt.nets.Transformer(2, 2, model_size=8, causal=True, rotary=True)
    x = _random(2, 6, 8)
    changed = tf.concat([x[:, :3], _random(2, 3, 8, seed=1)], axis=1)
    y, y_changed = t(x).numpy(), t(changed).numpy()
    np.testing.assert_allclose(y[:, :3], y_changed[:, :3], rtol=1e-5, atol=1e-6)
    assert np.abs(y[:, 3:] - y_changed[:, 3:]).min() > 0
    # Gradients agree: no path from position 4 back to position 2.
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = t(x)[:, 2]
    grad = tape.gradient(out, x).numpy()
    assert np.all(grad[:, 3:] == 0) and np.any(grad[:, :3] != 0)


def test_encoder_outputs_depend_on_every_input():
    t = snt.nets.Transformer(1, 2, model_size=8, causal=False)
    x = _random(2, 6, 8)
    # A random read-out: the plain sum of a layer-normalized vector is
    # constant, so its gradient would be zero.
    readout = _random(2, 8, seed=5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = tf.reduce_sum(t(x)[:, 0] * readout)
    grad = tape.gradient(out, x).numpy()
    assert np.all(np.abs(grad).sum(axis=(0, 2)) > 1e-4)


def test_mask_is_passed_to_every_layer():
    t = snt.nets.Transformer(2, 2, model_size=8)
    x = _random(1, 4, 8)
    # Position 3 may not be attended to (nor attend to anything but itself).
    allowed = np.ones([4, 4], bool)
    allowed[:, 3] = False
    allowed[3, 3] = True
    mask = tf.constant(allowed)[None, None]
    changed = tf.concat([x[:, :3], _random(1, 1, 8, seed=3)], axis=1)
    np.testing.assert_allclose(
        t(x, mask=mask)[:, :3], t(changed, mask=mask)[:, :3], rtol=1e-5, atol=1e-6
    )
    assert not np.allclose(t(x)[:, :3], t(changed)[:, :3])


# ---------------------------------------------------------------------------
# Decoding with the cache.


class _LanguageModel(snt.Module):
    def __init__(self, vocab_size: int, **kwargs):
        super().__init__(name="language_model")
        self.embed = snt.Embed(vocab_size, 16)
        self.transformer = snt.nets.Transformer(
            num_layers=2, num_heads=4, model_size=16, causal=True, **kwargs
        )
        self.head = snt.Linear(vocab_size)

    def __call__(self, tokens, cache=None):
        if cache is None:
            return self.head(self.transformer(self.embed(tokens)))
        y, cache = self.transformer(self.embed(tokens), cache=cache)
        return self.head(y), cache


@pytest.mark.parametrize(
    "kwargs",
    [{"rotary": True}, {"num_kv_heads": 2, "rotary": True}, {}],
    ids=["rotary", "rotary-gqa", "no-positions"],
)
def test_greedy_decoding_with_cache_matches_recomputing_the_prefix(kwargs):
    vocab, prompt_length, steps = 11, 3, 8
    model = _LanguageModel(vocab, **kwargs)
    prompt = tf.constant([[1, 2, 3], [4, 5, 6]], tf.int32)

    @tf.function
    def decode(prompt):
        cache = model.transformer.initial_cache(2, prompt_length + steps)
        logits, cache = model(prompt, cache=cache)
        next_logits = logits[:, -1]
        tokens = tf.TensorArray(tf.int32, size=steps)
        all_logits = tf.TensorArray(tf.float32, size=steps)
        for i in tf.range(steps):
            all_logits = all_logits.write(i, next_logits)
            token = tf.argmax(next_logits, axis=-1, output_type=tf.int32)
            tokens = tokens.write(i, token)
            logits, cache = model(token[:, None], cache=cache)
            next_logits = logits[:, -1]
        return tf.transpose(tokens.stack()), tf.transpose(all_logits.stack(), [1, 0, 2])

    tokens, cached_logits = decode(prompt)

    # Without the cache: the whole prefix again for every new token.
    @tf.function(input_signature=[tf.TensorSpec([2, None], tf.int32)])
    def last_logits(prefix):
        return model(prefix)[:, -1]

    sequence = prompt
    for i in range(steps):
        expected = last_logits(sequence)
        np.testing.assert_allclose(cached_logits[:, i], expected, rtol=1e-4, atol=1e-5)
        token = tf.argmax(expected, axis=-1, output_type=tf.int32)
        np.testing.assert_array_equal(tokens[:, i], token)
        sequence = tf.concat([sequence, token[:, None]], axis=1)


def test_cache_structure_and_chunked_prefill():
    t = snt.nets.Transformer(2, 2, model_size=8, causal=True, rotary=True)
    cache = t.initial_cache(3, 7)
    assert isinstance(cache, tuple) and len(cache) == 2
    assert all(isinstance(c, snt.AttentionCache) for c in cache)
    assert int(cache[0].index) == 0
    x = _random(3, 7, 8)
    full = t(x)
    first, cache = t(x[:, :4], cache=cache)
    second, cache = t(x[:, 4:], cache=cache)
    assert [int(c.index) for c in cache] == [7, 7]
    np.testing.assert_allclose(
        tf.concat([first, second], axis=1), full, rtol=1e-4, atol=1e-5
    )


def test_cache_in_another_dtype():
    t = snt.nets.Transformer(1, 2, model_size=4, causal=True)
    x = tf.cast(_random(1, 2, 4), tf.float64)
    cache = t.initial_cache(1, 2, tf.float64)
    assert cache[0].key.dtype == tf.float64
    y, cache = t(x, cache=cache)
    assert y.dtype == tf.float64 and cache[0].value.dtype == tf.float64


def test_decoding_step_compiles_with_xla():
    t = snt.nets.Transformer(2, 2, model_size=8, causal=True, rotary=True)
    x = _random(2, 4, 8)
    full = t(x)
    step = tf.function(lambda x, cache: t(x, cache=cache), jit_compile=True)
    cache = t.initial_cache(2, 4)
    outputs = []
    for i in range(4):
        y, cache = step(x[:, i : i + 1], cache)
        outputs.append(y)
    np.testing.assert_allclose(tf.concat(outputs, 1), full, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# Dropout and training.


def test_dropout_only_in_training():
    t = snt.nets.Transformer(1, 2, model_size=8, dropout_rate=0.5)
    x = _random(2, 4, 8)
    evaluation = t(x)
    np.testing.assert_array_equal(evaluation, t(x, is_training=False))
    trained = t(x, is_training=True)
    assert not np.allclose(trained, evaluation)
    # A boolean tensor decides at run time, also inside `tf.function`.
    for autograph in (True, False):
        f = tf.function(
            lambda x, training: t(x, is_training=training), autograph=autograph
        )
        np.testing.assert_allclose(
            f(x, tf.constant(False)), evaluation, rtol=1e-5, atol=1e-6
        )
        assert not np.allclose(f(x, tf.constant(True)), evaluation)


def test_without_dropout_training_changes_nothing():
    t = snt.nets.Transformer(1, 2, model_size=8)
    x = _random(2, 4, 8)
    np.testing.assert_array_equal(t(x, is_training=True), t(x))


def _optimizer():
    optimizers = snt.optimizers
    if hasattr(optimizers, "AdamW"):
        return optimizers.AdamW(3e-3, weight_decay=0.01)
    return optimizers.Adam(3e-3)


def test_training_reduces_the_loss():
    tf.random.set_seed(0)
    model = _LanguageModel(8, rotary=True)
    optimizer = _optimizer()
    # Learn to repeat the previous token shifted by one: next = (token + 1) % 8.
    tokens = tf.math.floormod(tf.range(9)[None, :] + tf.range(16)[:, None], 8)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = model(tokens[:, :-1])
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(tokens[:, 1:], logits)
            )
        params = model.trainable_variables
        optimizer.apply(tape.gradient(loss, params), params)
        return loss

    first = float(step())
    for _ in range(60):
        last = float(step())
    assert last < 0.5 * first


# ---------------------------------------------------------------------------
# Errors: one test per raise.


_LAYER_ERRORS = [
    ({"num_layers": 0}, ValueError, "`num_layers` must be a positive integer"),
    ({"num_layers": 1.5}, TypeError, "`num_layers` must be an integer"),
]
_BLOCK_ERRORS = [
    ({"num_heads": 0}, ValueError, "`num_heads` must be a positive integer"),
    ({"model_size": None}, ValueError, "`model_size` must be given, or `key_size`"),
    (
        {"model_size": 10},
        ValueError,
        r"`model_size` must be a multiple of `num_heads` \(4\)",
    ),
    ({"key_size": -1}, ValueError, "`key_size` must be a positive integer"),
    ({"mlp_hidden_size": 0}, ValueError, "`mlp_hidden_size` must be a positive"),
    ({"activation": tf.nn.relu}, TypeError, '`activation` must be one of "gelu"'),
    ({"activation": "tanh"}, ValueError, '`activation` must be one of .*"swiglu"'),
    ({"norm": "batch"}, ValueError, '`norm` must be one of "layer", "rms"'),
    ({"dropout_rate": 1.0}, ValueError, r"`dropout_rate` must be in \[0, 1\)"),
    ({"causal": "yes"}, TypeError, "`causal` must be a bool"),
    ({"with_bias": "no"}, TypeError, "`with_bias` must be a bool"),
    ({"w_init": snt.initializers.Ones}, TypeError, "`w_init` must be a callable"),
]


@pytest.mark.parametrize("kwargs, error, fragment", _LAYER_ERRORS + _BLOCK_ERRORS)
def test_transformer_constructor_errors(kwargs, error, fragment):
    arguments = {"num_layers": 2, "num_heads": 4, "model_size": 16, **kwargs}
    with pytest.raises(error, match=f"{fragment}.*Received"):
        snt.nets.Transformer(**arguments)


@pytest.mark.parametrize("kwargs, error, fragment", _BLOCK_ERRORS)
def test_block_constructor_errors(kwargs, error, fragment):
    arguments = {"num_heads": 4, "model_size": 16, **kwargs}
    with pytest.raises(error, match=f"{fragment}.*Received"):
        snt.nets.TransformerBlock(**arguments)


@pytest.mark.parametrize("cls", ["Transformer", "TransformerBlock"])
@pytest.mark.parametrize(
    "inputs, error, fragment",
    [
        (None, TypeError, "`inputs` must be a float tensor"),
        ("abc", TypeError, "`inputs` must be a float tensor"),
        ([[[1.0, "a"]]], TypeError, "`inputs` must be convertible to a tensor"),
        (tf.ones([2, 3, 8], tf.int32), TypeError, "`inputs` must be a floating point"),
        (tf.ones([2, 8]), ValueError, r"`inputs` must have rank 3: \[batch, time"),
        (tf.ones([2, 3, 7]), ValueError, r"last dimension of `model_size` \(8\)"),
    ],
)
def test_bad_inputs(cls, inputs, error, fragment):
    if cls == "Transformer":
        module = snt.nets.Transformer(1, 2, model_size=8)
    else:
        module = snt.nets.TransformerBlock(2, model_size=8)
    with pytest.raises(error, match=f"{fragment}.*Received"):
        module(inputs)


def test_bad_is_training():
    t = snt.nets.Transformer(1, 2, model_size=8, dropout_rate=0.1)
    with pytest.raises(TypeError, match="`is_training` must be a bool.*Received"):
        t(_random(1, 2, 8), is_training="yes")


def test_cache_must_be_a_sequence_of_caches():
    t = snt.nets.Transformer(2, 2, model_size=8, causal=True)
    cache = t.initial_cache(1, 4)
    with pytest.raises(TypeError, match="`cache` must be a sequence of .*Received"):
        t(_random(1, 1, 8), cache=cache[0])
    with pytest.raises(TypeError, match="`cache` must be a sequence of .*Received"):
        t(_random(1, 1, 8), cache=3)


def test_cache_needs_one_entry_per_block():
    t = snt.nets.Transformer(2, 2, model_size=8, causal=True)
    cache = t.initial_cache(1, 4)
    with pytest.raises(ValueError, match=r"one `snt.AttentionCache` per block \(2\)"):
        t(_random(1, 1, 8), cache=cache[:1])


def test_failed_call_builds_nothing():
    t = snt.nets.Transformer(1, 2, model_size=8)
    with pytest.raises(ValueError):
        t(tf.ones([1, 2, 5]))
    t(tf.ones([1, 2, 8]))
    assert t.blocks[0].mlp_in.w.shape == [8, 32]


@pytest.mark.parametrize("cls", ["Transformer", "TransformerBlock"])
def test_cache_needs_a_causal_model(cls):
    if cls == "Transformer":
        module = snt.nets.Transformer(1, 2, model_size=8)
        cache = module.initial_cache(1, 4)
    else:
        module = snt.nets.TransformerBlock(2, model_size=8)
        cache = module.initial_cache(1, 4)
    with pytest.raises(
        ValueError, match=r"`cache` is only for .*causal=True.*Received"
    ):
        module(_random(1, 1, 8), cache=cache)


# Traced blocks use a GELU with a hand-written gradient (and the layer norms'
# and attention's graph paths): the same values and derivatives as eagerly.


def test_traced_gelu_matches_tf_nn_gelu_to_second_order():
    from sonnet._src import mlp_activation

    x = tf.constant(np.linspace(-6.0, 6.0, 101, dtype=np.float32))

    def derivatives(gelu, x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = gelu(x)
            dy = inner.gradient(y, x)
        return y, dy, outer.gradient(dy, x)

    expected = derivatives(tf.nn.gelu, x)
    for jit_compile in (False, True):
        traced = tf.function(
            lambda x: derivatives(mlp_activation.gelu, x), jit_compile=jit_compile
        )
        for e, g in zip(expected, traced(x), strict=True):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)
    # The forward values are tf.nn.gelu's, bit for bit.
    values = tf.function(mlp_activation.gelu)(x)
    np.testing.assert_array_equal(values.numpy(), tf.nn.gelu(x).numpy())


@pytest.fixture
def calls(monkeypatch):
    """The activations that took the compiled path (`mlp_activation._compiled`),
    in the order they were traced."""
    from sonnet._src import mlp_activation

    names = []
    compiled = mlp_activation._compiled
    monkeypatch.setattr(
        mlp_activation, "_compiled", lambda name: names.append(name) or compiled(name)
    )
    return names


def _hidden(activation, pre, gate=None):
    from sonnet._src import mlp_activation

    return mlp_activation.hidden(activation, pre, gate)


def _activation_derivatives(activation, inputs):
    """Values, first and second derivatives (summed over the outputs) of
    `mlp_activation.hidden(activation, *inputs)` for every input."""

    with tf.GradientTape(persistent=True) as outer:
        outer.watch(inputs)
        with tf.GradientTape() as inner:
            inner.watch(inputs)
            y = _hidden(activation, *inputs)
        first = inner.gradient(y, inputs)
    second = [outer.gradient(d, inputs) for d in first]
    return [y, *first, *(g for row in second for g in row)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "swiglu"])
def test_traced_activation_compiled_for_large_known_shapes(
    activation, dtype, monkeypatch, calls
):
    # Activations of at least `_COMPILED_MIN_SIZE` elements and known shape
    # take the XLA-compiled formula: TensorFlow's values and derivatives to
    # rounding, to second order; smaller or unknown shapes its kernels.
    from sonnet._src import mlp_activation

    size = mlp_activation._COMPILED_MIN_SIZE
    pre = tf.cast(tf.linspace(-7.0, 7.0, size), dtype)
    gate = tf.reverse(pre, [0]) if activation == "swiglu" else None
    inputs = [pre] if gate is None else [pre, gate]

    got = tf.function(lambda *x: _activation_derivatives(activation, [*x]))(*inputs)
    assert calls == [activation]
    monkeypatch.setattr(mlp_activation, "COMPILED", False)
    plain = tf.function(lambda *x: _activation_derivatives(activation, [*x]))(*inputs)
    exact = _activation_derivatives(
        activation, [tf.cast(x, tf.float64) for x in inputs]
    )
    # As accurate as TensorFlow's kernels in the same dtype (both against
    # float64), up to a few units in the last place of the largest value.
    eps = float(np.finfo(np.float32).eps) if dtype == "float32" else 2.0**-7
    for e, g, p in zip(exact, got, plain, strict=True):
        assert g.dtype == pre.dtype
        if e is None:  # SwiGLU is linear in `pre`: TensorFlow says None.
            e, p = tf.zeros_like(exact[0]), tf.zeros_like(g)
        e = e.numpy()
        error = np.abs(tf.cast(g, tf.float64).numpy() - e).max()
        plain_error = np.abs(tf.cast(p, tf.float64).numpy() - e).max()
        assert error <= 2 * plain_error + 4 * eps * max(1.0, np.abs(e).max())
    # One element fewer, or an unknown dimension: TensorFlow's kernels.
    monkeypatch.setattr(mlp_activation, "COMPILED", True)
    tf.function(lambda *x: _hidden(activation, *x))(*(x[1:] for x in inputs))
    spec = [tf.TensorSpec([None], pre.dtype)] * len(inputs)
    tf.function(
        lambda *x: _hidden(activation, *x), input_signature=spec
    ).get_concrete_function()
    assert calls == [activation]
    if gate is None:
        tf.function(mlp_activation.hidden)(activation, pre, None)
        assert calls == [activation] * 2


def test_traced_gelu_plain_path_is_the_oracle(monkeypatch):
    # With the switch off the same call traces the plain ops: tf.nn.gelu's
    # values bit for bit, and the compiled path agrees with it to rounding.
    from sonnet._src import mlp_activation

    x = tf.random.normal([64, 1024], stddev=3.0, seed=2)
    compiled = tf.function(mlp_activation.gelu)(x)
    monkeypatch.setattr(mlp_activation, "COMPILED", False)
    plain = tf.function(mlp_activation.gelu)(x)
    np.testing.assert_array_equal(plain.numpy(), tf.nn.gelu(x).numpy())
    np.testing.assert_allclose(compiled.numpy(), plain.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_traced_train_step_gradients_match_eager(jit_compile):
    transformer = snt.nets.Transformer(2, 2, 16, causal=True)
    x, target = _random(3, 6, 16), _random(3, 6, 16, seed=1)

    def gradients(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(transformer(x) - target))
        return [loss, *tape.gradient(loss, transformer.trainable_variables)]

    eager = gradients(x)
    graph = tf.function(gradients, jit_compile=jit_compile)(x)
    for e, g in zip(eager, graph, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


def _large_enough_transformer():
    # Hidden activations `[2 * 128, 256]`: at the compiled activations'
    # threshold, so a replica's half batch and a whole batch both take it.
    return snt.nets.Transformer(1, 2, 32, mlp_hidden_size=256, causal=True)


def test_compiled_paths_under_two_replicas(calls):
    x = _random(4, 128, 32, seed=3)
    reference = _large_enough_transformer()
    reference(x[:1])
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    replicator = snt.distribute.Replicator(devices)
    with replicator.scope():
        module = _large_enough_transformer()

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(module(x)))
        grads = tape.gradient(loss, module.trainable_variables)
        return tf.distribute.get_replica_context().all_reduce("sum", grads)

    shards = tf.split(x, 2)
    distributed = replicator.experimental_distribute_values_from_function(
        lambda ctx: shards[ctx.replica_id_in_sync_group]
    )
    run = tf.function(lambda x: replicator.run(step, args=(x,)))
    run(distributed)  # Builds the module.
    assert calls  # The replicas' activations took the compiled path.
    for v, r in zip(module.variables, reference.variables, strict=True):
        v.assign(r)
    grads = run(distributed)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(reference(x)))
    expected = tape.gradient(loss, reference.trainable_variables)
    scale = max(float(tf.reduce_max(tf.abs(e))) for e in expected)
    for g, e in zip(grads, expected, strict=True):
        local = replicator.experimental_local_results(g)
        for g_replica in local:
            np.testing.assert_allclose(g_replica, e, rtol=0, atol=1e-5 * scale)


def test_compiled_paths_in_a_saved_model(tmp_path, calls):
    x = _random(2, 128, 32, seed=4)
    module = _large_enough_transformer()
    module(x)
    holder = tf.Module()
    holder.module = module
    holder.call = tf.function(
        lambda x: module(x), input_signature=[tf.TensorSpec([2, 128, 32])]
    )
    holder.call.get_concrete_function()
    assert calls
    tf.saved_model.save(holder, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))

    def value_and_gradient(f):
        inputs = tf.Variable(x)
        with tf.GradientTape() as tape:
            y = f(inputs)
            loss = tf.reduce_sum(tf.square(y))
        return y, tape.gradient(loss, inputs)

    for got, expected in zip(
        value_and_gradient(loaded.call), value_and_gradient(module), strict=True
    ):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stacked", [False, True])
def test_compiled_paths_in_stacked_and_unrolled_blocks(stacked, calls):
    # Inside the layer stack's loop the activations' shapes are known too:
    # the traced step takes the compiled path and gives the eager gradients.
    x = _random(2, 128, 32, seed=5)
    module = snt.nets.Transformer(
        2, 2, 32, mlp_hidden_size=256, causal=True, stacked=stacked
    )
    module(x)

    def gradients(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(module(x)))
        return tape.gradient(loss, module.trainable_variables)

    eager = gradients(x)
    traced = tf.function(gradients)(x)
    assert calls
    scale = max(float(tf.reduce_max(tf.abs(e))) for e in eager)
    for g, e in zip(traced, eager, strict=True):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-5 * scale)
