"""The module options open-weight models need (issue 33), against NumPy:
`snt.MultiHeadAttention`'s `window`, `qk_norm`, `output_bias`,
`rotary_scaling`; the Transformer's `gelu_tanh`, `norm_eps` and bias flags;
`snt.nets.CausalLM`; rotary frequency scaling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import rotary

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}


def _data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


# Rotary scaling.


def _llama3_frequencies(size: int, base: float) -> np.ndarray:
    """Llama 3.1's published formula, written out per frequency."""
    result = []
    for i in range(size // 2):
        freq = base ** (-2 * i / size)
        wavelength = 2 * math.pi / freq
        if wavelength < 16 / 4.0:
            result.append(freq)
        elif wavelength > 16 / 1.0:
            result.append(freq / 8.0)
        else:
            smooth = (16 / wavelength - 1.0) / (4.0 - 1.0)
            result.append((1 - smooth) * freq / 8.0 + smooth * freq)
    return np.array(result)


def test_llama3_scaling_matches_formula():
    frequencies = rotary.check_frequencies(500000.0, LLAMA3)
    table = rotary._frequencies(16, frequencies, "float64")
    np.testing.assert_allclose(table[8:], _llama3_frequencies(16, 500000.0))
    plain = rotary._frequencies(16, 500000.0, "float64")[8:]
    ratio = table[8:] / plain
    assert ratio[-1] == 1 / 8 and ((ratio > 1 / 8) & (ratio < 1)).any()


def test_linear_scaling_divides_positions():
    x = _data(1, 6, 2, 8)
    scaled = snt.apply_rotary_embedding(
        x, scaling={"rope_type": "linear", "factor": 2.0}
    )
    halved = snt.apply_rotary_embedding(x, positions=np.arange(6) / 2.0)
    np.testing.assert_allclose(scaled, halved, rtol=1e-5, atol=1e-6)
    module = snt.RotaryEmbedding(scaling={"type": "linear", "factor": 2.0})
    np.testing.assert_allclose(module(x), scaled, rtol=1e-6, atol=1e-6)
    assert module.scaling == {"rope_type": "linear", "factor": 2.0}


@pytest.mark.parametrize(
    "scaling,error,message",
    [
        ([1], TypeError, "`scaling` must be None or a mapping"),
        ({"rope_type": "yarn", "factor": 2.0}, ValueError, "must have a `rope_type`"),
        ({"factor": 2.0}, ValueError, "must have a `rope_type`"),
        ({"rope_type": "linear"}, ValueError, "must have exactly the parameters"),
        (
            {"rope_type": "linear", "factor": 2.0, "beta": 1.0},
            ValueError,
            "must have exactly the parameters",
        ),
        ({"rope_type": "linear", "factor": 0.0}, ValueError, "must be positive"),
        (
            {**LLAMA3, "original_max_position_embeddings": 16.5},
            ValueError,
            "must be a whole number",
        ),
        ({**LLAMA3, "high_freq_factor": 0.5}, ValueError, "`high_freq_factor` >"),
    ],
)
def test_scaling_errors(scaling, error, message):
    with pytest.raises(error, match=message):
        snt.apply_rotary_embedding(tf.ones([1, 2, 1, 4]), scaling=scaling)


def test_scaling_needs_a_known_size():
    f = tf.function(
        lambda x: snt.apply_rotary_embedding(x, scaling=LLAMA3),
        input_signature=[tf.TensorSpec([1, 2, 1, None])],
    )
    with pytest.raises(ValueError, match="statically known last dimension"):
        f.get_concrete_function()


# Attention options.


def _numpy_attention(mha, x, allowed, norm=False):
    """Causal multi-head attention in NumPy (no rotary), with `allowed` [T, S]."""
    w = {n: getattr(mha, n).w.numpy() for n in ("query", "key", "value", "output")}
    b = {
        n: getattr(mha, n).b.numpy() if getattr(mha, n).with_bias else 0
        for n in ("query", "key", "value", "output")
    }
    heads, size = mha.num_heads, mha.key_size
    q = (x @ w["query"] + b["query"]).reshape(*x.shape[:2], heads, size)
    k = (x @ w["key"] + b["key"]).reshape(*x.shape[:2], heads, size)
    v = (x @ w["value"] + b["value"]).reshape(*x.shape[:2], heads, size)
    if norm:
        eps = mha.query_norm._eps

        def rms(t, scale):
            return t / np.sqrt(np.mean(t**2, -1, keepdims=True) + eps) * scale

        q = rms(q, mha.query_norm.scale.numpy())
        k = rms(k, mha.key_norm.scale.numpy())
    logits = np.einsum("bthd,bshd->bhts", q, k) / math.sqrt(size)
    logits = np.where(allowed, logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads_out = np.einsum("bhts,bshd->bthd", weights, v).reshape(*x.shape[:2], -1)
    return heads_out @ w["output"] + b["output"]


def test_window_matches_numpy():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, window=3)
    x = _data(2, 7, 5)
    outputs = mha(x, causal=True)
    t = np.arange(7)
    allowed = (t[:, None] >= t[None, :]) & (t[None, :] > t[:, None] - 3)
    np.testing.assert_allclose(
        outputs, _numpy_attention(mha, x, allowed), rtol=1e-5, atol=1e-5
    )
    # Non-causal: a band |i - j| < window.
    band = np.abs(t[:, None] - t[None, :]) < 3
    np.testing.assert_allclose(
        mha(x), _numpy_attention(mha, x, band), rtol=1e-5, atol=1e-5
    )


def test_window_in_graphs_and_when_decoding():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, window=2, rotary=True)
    x = _data(1, 6, 4)
    full = mha(x, causal=True)
    np.testing.assert_allclose(
        tf.function(lambda x: mha(x, causal=True))(x), full, rtol=1e-5, atol=1e-5
    )
    cache = mha.initial_cache(batch_size=1, max_length=6)
    steps = []
    for t in range(6):
        y, cache = mha(x[:, t : t + 1], cache=cache)
        steps.append(y)
    np.testing.assert_allclose(np.concatenate(steps, 1), full, rtol=1e-5, atol=1e-5)


def test_qk_norm_and_output_bias_match_numpy():
    mha = snt.MultiHeadAttention(
        num_heads=2, key_size=4, qk_norm=True, qk_norm_eps=1e-3, output_bias=False
    )
    x = _data(2, 5, 6)
    outputs = mha(x, causal=True)
    mha.query_norm.scale.assign(_data(4, seed=1))
    mha.key_norm.scale.assign(_data(4, seed=2))
    outputs = mha(x, causal=True)
    t = np.arange(5)
    expected = _numpy_attention(mha, x, t[:, None] >= t[None, :], norm=True)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    names = sorted(v.name for v in mha.variables)
    assert "multi_head_attention/query_norm/scale:0" in names
    assert "multi_head_attention/output/b:0" not in names
    assert "multi_head_attention/query/b:0" in names


def test_qk_norm_grouped_queries_under_a_policy():
    mha = snt.MultiHeadAttention(num_heads=4, num_kv_heads=2, key_size=4, qk_norm=True)
    x = _data(2, 3, 8)
    expected = mha(x)
    snt.precision.apply(mha, "mixed_bfloat16")
    outputs = mha(x)
    assert outputs.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(outputs, tf.float32), expected, rtol=0.1, atol=0.1
    )


def test_default_attention_is_unchanged():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    assert repr(mha) == "MultiHeadAttention(num_heads=2, key_size=4)"
    assert (mha.output_bias, mha.qk_norm, mha.window, mha.rotary_scaling) == (
        True,
        False,
        None,
        None,
    )
    mha(tf.ones([1, 2, 3]))
    assert len(mha.variables) == 8


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"window": 0}, ValueError, "window"),
        ({"window": 1.5}, TypeError, "window"),
        ({"output_bias": "yes"}, TypeError, "output_bias"),
        ({"qk_norm": "yes"}, TypeError, "qk_norm"),
        ({"qk_norm": True, "qk_norm_eps": -1.0}, ValueError, "eps"),
        (
            {"rotary_scaling": {"rope_type": "linear", "factor": 2.0}},
            ValueError,
            "`rotary_scaling` must be None without `rotary=True`",
        ),
        (
            {"rotary": True, "rotary_scaling": {"rope_type": "yarn"}},
            ValueError,
            "`rotary_scaling` must have a `rope_type`",
        ),
    ],
)
def test_attention_option_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        snt.MultiHeadAttention(num_heads=2, key_size=4, **kwargs)


# Transformer options.


def test_gelu_tanh_matches_formula():
    block = snt.nets.TransformerBlock(
        num_heads=2, model_size=4, activation="gelu_tanh", norm_eps=1e-3
    )
    x = _data(1, 3, 4)
    block(x)
    h = np.linspace(-4, 4, 9, dtype=np.float32)[None]
    block.mlp_in.w.assign(np.eye(4, 16, dtype=np.float32))
    expected = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    from sonnet._src.nets import transformer

    assert "gelu_tanh" in transformer._ACTIVATIONS
    np.testing.assert_allclose(
        tf.nn.gelu(h, approximate=True), expected, rtol=1e-6, atol=1e-6
    )
    assert block.attention_norm._eps == 1e-3 and block.mlp_norm._eps == 1e-3


def test_transformer_options_reach_every_block():
    transformer = snt.nets.Transformer(
        num_layers=2,
        num_heads=2,
        model_size=8,
        norm="rms",
        norm_eps=1e-5,
        attention_bias=True,
        attention_output_bias=False,
        mlp_bias=False,
        qk_norm=True,
        window=4,
        rotary=True,
        rotary_scaling={"rope_type": "linear", "factor": 4.0},
        causal=True,
    )
    transformer(tf.ones([1, 3, 8]))
    for block in transformer.blocks:
        attention = block.attention
        assert attention.query.with_bias and not attention.output.with_bias
        assert not block.mlp_in.with_bias and not block.mlp_out.with_bias
        assert attention.query_norm._eps == 1e-5 and block.mlp_norm._eps == 1e-5
        assert attention.window == 4
        assert attention.rotary_scaling == {"rope_type": "linear", "factor": 4.0}
    assert transformer.final_norm._eps == 1e-5


def test_default_transformer_is_unchanged():
    transformer = snt.nets.Transformer(num_layers=1, num_heads=2, model_size=8)
    assert repr(transformer.blocks[0]) == (
        "TransformerBlock(\n    num_heads=2,\n    model_size=8,\n    key_size=4,\n"
        "    mlp_hidden_size=32,\n    activation='gelu',\n    norm='layer',\n"
        "    dropout_rate=0.0,\n    causal=False,\n    rotary=False,\n"
        "    rotary_base=10000.0,\n    w_init=None,\n    with_bias=True,\n"
        "    name='block_0',\n)"
    ) or "norm_eps" not in repr(transformer.blocks[0])
    assert "eps" not in repr(transformer.final_norm)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"norm_eps": -1.0}, ValueError, "`norm_eps` must not be negative"),
        ({"norm_eps": "x"}, TypeError, "norm_eps"),
        ({"attention_bias": "x"}, TypeError, "attention_bias"),
        ({"mlp_bias": "x"}, TypeError, "mlp_bias"),
        ({"activation": "gelu_fast"}, ValueError, "gelu_tanh"),
        ({"window": -2}, ValueError, "window"),
    ],
)
def test_transformer_option_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        snt.nets.Transformer(num_layers=1, num_heads=2, model_size=8, **kwargs)


# CausalLM.


def _lm(**kwargs):
    transformer = snt.nets.Transformer(
        num_layers=1, num_heads=2, model_size=8, causal=True, rotary=True
    )
    return snt.nets.CausalLM(vocab_size=11, transformer=transformer, **kwargs)


def test_causal_lm_matches_its_parts():
    lm = _lm()
    tokens = tf.constant([[1, 2, 3, 10]])
    logits = lm(tokens)
    expected = lm.head(lm.transformer(lm.embed(tokens)))
    np.testing.assert_allclose(logits, expected, rtol=1e-6, atol=1e-6)
    tied = _lm(tie_embeddings=True)
    h = tied.transformer(tied.embed(tokens))
    np.testing.assert_allclose(
        tied(tokens),
        tf.matmul(h, tied.embed.embeddings, transpose_b=True),
        rtol=1e-5,
        atol=1e-5,
    )
    assert not hasattr(tied, "head") and len(tied.variables) == len(lm.variables) - 1


def test_causal_lm_learned_positions_and_cache():
    transformer = snt.nets.Transformer(
        num_layers=2, num_heads=2, model_size=8, causal=True
    )
    lm = snt.nets.CausalLM(11, transformer, max_positions=6)
    tokens = tf.constant([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])
    full = lm(tokens)
    positions = lm.positions(tf.range(5))
    np.testing.assert_allclose(
        full,
        lm.head(lm.transformer(lm.embed(tokens) + positions)),
        rtol=1e-5,
        atol=1e-5,
    )
    cache = lm.initial_cache(batch_size=2, max_length=6)
    first, cache = lm(tokens[:, :2], cache=cache)
    rest, cache = lm(tokens[:, 2:], cache=cache)
    np.testing.assert_allclose(tf.concat([first, rest], 1), full, rtol=1e-5, atol=1e-5)
    stacked = snt.nets.CausalLM(
        11,
        snt.nets.Transformer(
            num_layers=2, num_heads=2, model_size=8, causal=True, stacked=True
        ),
        max_positions=6,
    )
    cache = stacked.initial_cache(batch_size=2, max_length=6)
    _, cache = stacked(tokens[:, :2], cache=cache)
    assert int(cache.index[0]) == 2


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"transformer": snt.Linear(2)}, TypeError, "`transformer` must be an"),
        (
            {"transformer": snt.nets.Transformer(1, 2, 8)},
            ValueError,
            "`transformer` must be causal",
        ),
        ({"vocab_size": 0}, ValueError, "vocab_size"),
        ({"max_positions": 0}, ValueError, "max_positions"),
        ({"tie_embeddings": "x"}, TypeError, "tie_embeddings"),
        ({"embed_init": 3}, TypeError, "embed_init"),
    ],
)
def test_causal_lm_constructor_errors(kwargs, error, message):
    arguments = {
        "vocab_size": 5,
        "transformer": snt.nets.Transformer(1, 2, 8, causal=True),
        **kwargs,
    }
    with pytest.raises(error, match=message):
        snt.nets.CausalLM(**arguments)


def test_causal_lm_call_errors():
    lm = _lm(max_positions=4)
    with pytest.raises(TypeError, match="`tokens` must be an integer tensor"):
        lm(None)
    with pytest.raises(TypeError, match="`tokens` must be int32 or int64"):
        lm(tf.ones([1, 2]))
    with pytest.raises(ValueError, match="`tokens` must have rank 2"):
        lm(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="`max_length` must be at most"):
        lm.initial_cache(1, 5)
    with pytest.raises(TypeError, match="`cache` must be the cache of"):
        lm(tf.constant([[1]]), cache=3)


# The tied head and `logits_to_keep` (decoding speed).


def _graph_ops(f, *args) -> set[str]:
    graph = tf.function(f).get_concrete_function(*args).graph.as_graph_def()
    ops = {node.op for node in graph.node}
    for function in graph.library.function:  # Nested (while loop) bodies.
        ops |= {node.op for node in function.node_def}
    return ops


def test_tied_head_reads_the_table_densely_once():
    # A sparse read (ResourceGather) would make TensorFlow copy the whole
    # table on every later dense read: the tied model gathers from its one
    # dense read instead; an untied model's embedding stays a sparse read.
    tokens = tf.constant([[1, 2, 3]])
    tied = _lm(tie_embeddings=True)
    ops = _graph_ops(lambda t: tied(t), tokens)
    assert "ResourceGather" not in ops and "GatherV2" in ops
    untied = _lm()
    assert "ResourceGather" in _graph_ops(lambda t: untied(t), tokens)
    with pytest.raises(tf.errors.InvalidArgumentError, match="`inputs` must contain"):
        tied(tf.constant([[11]]))


def test_tied_head_gradients_match_a_sparse_lookup():
    tied = _lm(tie_embeddings=True)
    tokens = tf.constant([[1, 2, 3, 2]])
    table = tied.embed.embeddings
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tied(tokens) ** 2)
    grad = tape.gradient(loss, table)
    with tf.GradientTape() as tape:
        h = tied.transformer(tf.nn.embedding_lookup(table, tokens))
        expected_loss = tf.reduce_sum(tf.matmul(h, table, transpose_b=True) ** 2)
    expected = tf.convert_to_tensor(tape.gradient(expected_loss, table))
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-6)
    np.testing.assert_allclose(
        tf.convert_to_tensor(grad), expected, rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("rows", [1, 3, 600, None])
def test_tied_logits_match_numpy(rows):
    from sonnet._src.nets.causal_lm import tied_logits

    table = _data(13, 8, seed=1)
    h = _data(rows or 5, 8, seed=2)
    if rows is None:  # Rows not known statically: the plain product.
        f = tf.function(
            tied_logits,
            input_signature=[tf.TensorSpec([None, 8]), tf.TensorSpec([13, 8])],
        )
        actual = f(h, table)
    else:
        actual = tied_logits(tf.constant(h), tf.constant(table))
    np.testing.assert_allclose(actual, h @ table.T, rtol=1e-5, atol=1e-5)


def test_logits_to_keep():
    lm = _lm(tie_embeddings=True)
    tokens = tf.constant([[1, 2, 3, 4], [4, 3, 2, 1]])
    full = lm(tokens)
    np.testing.assert_allclose(lm(tokens, logits_to_keep=1), full[:, -1:], atol=1e-6)
    np.testing.assert_allclose(lm(tokens, logits_to_keep=np.int64(4)), full, atol=1e-6)
    cache = lm.initial_cache(2, 6)
    last, cache = lm(tokens[:, :3], cache=cache, logits_to_keep=2)
    np.testing.assert_allclose(last, full[:, 1:3], atol=1e-5)
    step, _ = lm(tokens[:, 3:], cache=cache, logits_to_keep=1)
    np.testing.assert_allclose(step, full[:, 3:], atol=1e-5)
    f = tf.function(lambda t: lm(t, logits_to_keep=2))
    np.testing.assert_allclose(f(tokens), full[:, 2:], atol=1e-6)


@pytest.mark.parametrize(
    "keep,error,message",
    [
        (0, ValueError, "`logits_to_keep` must be"),
        (5, ValueError, "`logits_to_keep` must be at most the number of positions"),
        (1.5, TypeError, "`logits_to_keep`"),
    ],
)
def test_logits_to_keep_errors(keep, error, message):
    with pytest.raises(error, match=message):
        _lm()(tf.constant([[1, 2, 3, 4]]), logits_to_keep=keep)
