"""Attention-weight dropout of `snt.MultiHeadAttention`: a NumPy reference of
the stateless mask, the dense and chunked paths dropping the same weights
(outputs and gradients), the rate, seeds, training flags and bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import chunked_attention
from tests.attention_pairs import build as _build
from tests.attention_pairs import numpy_attention as _numpy_attention
from tests.attention_pairs import outputs_and_grads as _outputs_and_grads
from tests.attention_pairs import pair as _pair


def _mix(h: np.ndarray) -> np.ndarray:
    """The 32-bit hash of the library, in NumPy (uint32 products wrap)."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x7FEB352D)
    h = h ^ (h >> np.uint32(15))
    h = h * np.uint32(0x846CA68B)
    return h ^ (h >> np.uint32(16))


def _numpy_keep(seed, rate, batch, heads, time, key_time):
    """`[B, heads, T, S]` factors: `1 / (1 - rate)` where the weight of query
    `t` on key `s` in head `h` of example `b` is kept, else 0."""
    s0, s1 = (np.array([v], np.uint32) for v in seed)  # Arrays wrap quietly.
    h = _mix(_mix(s0 ^ np.uint32(0x9E3779B9)) ^ s1)
    for axis, size in enumerate((batch, heads, time)):
        shape = [1, 1, 1, 1]
        shape[axis] = size
        h = _mix(h ^ np.arange(size, dtype=np.uint32).reshape(shape))
    # Keys: the row's state xor the key's hash, then two multiplies.
    h = h ^ _mix(np.arange(key_time, dtype=np.uint32))
    h = h * np.uint32(0x7FEB352D)
    h = (h ^ (h >> np.uint32(15))) * np.uint32(0x846CA68B)
    kept = h.astype(np.float32) >= np.float32(rate) * np.float32(2.0**32)
    return np.where(kept, 1 / (1 - np.float32(rate)), 0).astype(np.float32)


def _assert_same(first, second):
    np.testing.assert_allclose(first[0], second[0], rtol=1e-5, atol=1e-5)
    for a, b in zip(first[1], second[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


_SEED = tf.constant([12, 34])


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_outputs_match_a_numpy_reference_of_the_mask(chunked, causal):
    mha = snt.MultiHeadAttention(
        num_heads=3, key_size=4, dropout_rate=0.4, chunked=chunked, chunk_size=3
    )
    x = tf.random.stateless_normal([2, 7, 6], seed=(1, 3))
    y = mha(x, causal=causal, is_training=True, dropout_seed=_SEED)
    t = np.arange(7)
    allowed = t[None] <= t[:, None] if causal else np.ones([7, 7], bool)
    factors = _numpy_keep((12, 34), 0.4, 2, 3, 7, 7)
    assert 0.3 < np.mean(factors == 0) < 0.5  # Something is dropped.
    expected = _numpy_attention(mha, x, allowed, factors)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize(
    "options",
    [{}, {"causal": True}, {"causal": True, "window": 3}, {"mask": "random"}],
    ids=["full", "causal", "window", "mask"],
)
def test_dense_and_chunked_drop_the_same_weights(kv_heads, options):
    options = dict(options)
    window = options.pop("window", None)
    dense, chunked = _pair(
        num_heads=4,
        key_size=8,
        num_kv_heads=kv_heads,
        rotary=True,
        window=window,
        dropout_rate=0.25,
    )
    x = tf.random.stateless_normal([2, 11, 16], seed=(2, 5))
    if options.get("mask") == "random":
        options["mask"] = tf.random.stateless_uniform([2, 4, 11, 11], (1, 1)) > 0.3
    _build(dense, chunked, x)
    call = dict(options, is_training=True, dropout_seed=_SEED)
    _assert_same(
        _outputs_and_grads(chunked, x, **call), _outputs_and_grads(dense, x, **call)
    )


def test_the_mask_does_not_depend_on_the_chunk_size():
    x = tf.random.stateless_normal([1, 10, 8], seed=(4, 4))
    results = []
    for size in (3, 4, 10):
        mha = snt.MultiHeadAttention(
            num_heads=2,
            key_size=4,
            dropout_rate=0.5,
            chunked=True,
            chunk_size=size,
            w_init=snt.initializers.Constant(0.1),
        )
        results.append(mha(x, is_training=True, dropout_seed=_SEED))
    for y in results[1:]:
        np.testing.assert_allclose(y, results[0], rtol=1e-5, atol=1e-6)


def test_graphs_and_xla_compile_and_match_eager():
    dense, chunked = _pair(num_heads=4, key_size=8, num_kv_heads=2, dropout_rate=0.3)
    x = tf.random.stateless_normal([2, 10, 16], seed=(2, 3))
    _build(dense, chunked, x)
    call = {"causal": True, "is_training": True, "dropout_seed": _SEED}
    expected = _outputs_and_grads(dense, x, **call)
    for jit in (False, True):
        step = tf.function(
            lambda x: _outputs_and_grads(chunked, x, **call), jit_compile=jit
        )
        _assert_same(step(x), expected)


def test_dropout_with_a_cache_equals_the_dense_path():
    dense, chunked = _pair(num_heads=2, key_size=4, dropout_rate=0.3)
    x = tf.random.stateless_normal([1, 9, 4], seed=(4, 8))
    _build(dense, chunked, x)
    outputs = []
    for module in (dense, chunked):
        cache = module.initial_cache(1, 12)
        call = {"is_training": True, "dropout_seed": _SEED}
        y, cache = module(x[:, :7], cache=cache, **call)
        z, _ = module(x[:, 7:], cache=cache, **call)
        outputs.append(tf.concat([y, z], 1))
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)


def test_dropout_with_a_ring_cache_equals_the_dense_path():
    dense, chunked = _pair(num_heads=2, key_size=4, window=3, dropout_rate=0.3)
    x = tf.random.stateless_normal([1, 8, 4], seed=(5, 8))
    _build(dense, chunked, x)
    outputs = []
    for module in (dense, chunked):
        cache = module.initial_cache(1, 8)
        call = {"is_training": True, "dropout_seed": _SEED}
        y, cache = module(x[:, :5], cache=cache, **call)
        z, _ = module(x[:, 5:], cache=cache, **call)
        outputs.append(tf.concat([y, z], 1))
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)


def test_half_precision_policy():
    dense, chunked = _pair(num_heads=2, key_size=8, dropout_rate=0.3)
    x = tf.random.stateless_normal([1, 10, 8], seed=(6, 6))
    _build(dense, chunked, x)
    for m in (dense, chunked):
        snt.precision.apply(m, "mixed_bfloat16")
    call = {"causal": True, "is_training": True, "dropout_seed": _SEED}
    y_d, y_c = dense(x, **call), chunked(x, **call)
    assert y_c.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(y_c, tf.float32), tf.cast(y_d, tf.float32), rtol=0.05, atol=0.05
    )


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_the_rate_of_dropped_weights_and_their_scale(rate):
    dropout = chunked_attention.Dropout(
        chunked_attention.seed_state(tf.constant([7, 9])),
        tf.constant(rate * 2.0**32, tf.float32),
        tf.constant(1 / (1 - rate), tf.float32),
    )
    factors = chunked_attention.dense_keep_scale(dropout, 4, 2, 4, 64, 64).numpy()
    assert set(np.unique(factors)) == {0, np.float32(1 / (1 - rate))}
    dropped = factors == 0
    # Overall and along every axis (a broken index would show up as rows,
    # keys, heads or examples all kept or all dropped): 131072 draws.
    assert abs(dropped.mean() - rate) < 0.01
    for axis in range(5):
        others = tuple(a for a in range(5) if a != axis)
        assert np.all(np.abs(dropped.mean(others) - rate) < 0.06)
    # Neighbouring keys and queries are independent, also in 2 x 2 blocks.
    for pair in (
        dropped[..., 1:] & dropped[..., :-1],
        dropped[..., 1:, :] & dropped[..., :-1, :],
        dropped[..., 1:, 1:] & dropped[..., :-1, :-1],
    ):
        assert abs(pair.mean() - rate**2) < 0.01
    parity = (
        dropped[..., 1:, 1:]
        ^ dropped[..., :-1, 1:]
        ^ dropped[..., 1:, :-1]
        ^ dropped[..., :-1, :-1]
    )
    assert abs(parity.mean() - (1 - (1 - 2 * rate) ** 4) / 2) < 0.01
    # The mean of the kept weights' factors is 1: unbiased outputs.
    assert abs(factors.mean() - 1) < 0.02 / (1 - rate)


def test_evaluation_and_zero_rates_drop_nothing():
    x = tf.random.stateless_normal([2, 6, 8], seed=(1, 9))
    plain = snt.MultiHeadAttention(num_heads=2, key_size=4)
    expected = plain(x, causal=True)
    for rate in (0.5, 0.0, tf.constant(0.0)):
        for chunked in (False, True):
            mha = snt.MultiHeadAttention(
                num_heads=2, key_size=4, dropout_rate=rate, chunked=chunked
            )
            mha(x)
            for a, b in zip(plain.variables, mha.variables, strict=True):
                b.assign(a)
            np.testing.assert_allclose(mha(x, causal=True), expected, atol=1e-6)
            if rate == 0.5:
                continue
            y = mha(x, causal=True, is_training=True)
            np.testing.assert_allclose(y, expected, atol=1e-6)
    assert not snt.MultiHeadAttention(2, 4, dropout_rate=0.0)._dropout


def test_seeds():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, dropout_rate=0.5)
    x = tf.random.stateless_normal([2, 6, 8], seed=(1, 2))
    first = mha(x, is_training=True, dropout_seed=[1, 2])
    np.testing.assert_array_equal(mha(x, is_training=True, dropout_seed=[1, 2]), first)
    assert np.abs(mha(x, is_training=True, dropout_seed=[1, 3]) - first).max() > 1e-3
    # Without a seed, each call draws one; `tf.random.set_seed` repeats them.
    tf.random.set_seed(5)
    drawn = [mha(x, is_training=True) for _ in range(2)]
    assert np.abs(drawn[0] - drawn[1]).max() > 1e-3
    tf.random.set_seed(5)
    np.testing.assert_array_equal(mha(x, is_training=True), drawn[0])
    # A graph draws a new seed per run.
    step = tf.function(lambda x: mha(x, is_training=True))
    assert np.abs(step(x) - step(x)).max() > 1e-3


def test_training_flag_as_a_tensor():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, dropout_rate=0.5)
    x = tf.random.stateless_normal([2, 6, 8], seed=(3, 2))
    evaluation = mha(x, causal=True)
    training = mha(x, causal=True, is_training=True, dropout_seed=_SEED)
    for chunked in (False, True):
        mha.chunked = chunked
        step = tf.function(
            lambda x, t: mha(x, causal=True, is_training=t, dropout_seed=_SEED)
        )
        np.testing.assert_allclose(step(x, tf.constant(False)), evaluation, atol=1e-5)
        np.testing.assert_allclose(step(x, tf.constant(True)), training, atol=1e-5)


def test_rate_as_a_variable_changes_during_training():
    rate = tf.Variable(0.0)
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, dropout_rate=rate)
    x = tf.random.stateless_normal([1, 6, 8], seed=(3, 3))
    expected = mha(x)
    np.testing.assert_allclose(
        mha(x, is_training=True, dropout_seed=_SEED), expected, atol=1e-6
    )
    rate.assign(0.5)
    assert np.abs(mha(x, is_training=True, dropout_seed=_SEED) - expected).max() > 1e-3


def test_ignored_without_a_rate():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.stateless_normal([1, 6, 8], seed=(3, 4))
    np.testing.assert_array_equal(
        mha(x, is_training=True, dropout_seed="unused"), mha(x)
    )


@pytest.mark.parametrize(
    ("rate", "error"),
    [(1.0, ValueError), (-0.1, ValueError), ("0.1", TypeError), ([0.1], TypeError)],
)
def test_bad_rates(rate, error):
    with pytest.raises(error, match="dropout_rate.*Received"):
        snt.MultiHeadAttention(num_heads=2, key_size=4, dropout_rate=rate)


@pytest.mark.parametrize(
    ("call", "error", "fragment"),
    [
        ({"is_training": "yes"}, TypeError, "is_training"),
        ({"is_training": tf.zeros([2], tf.bool)}, ValueError, "is_training"),
        ({"dropout_seed": "seed"}, TypeError, "dropout_seed.*integer"),
        ({"dropout_seed": [1.0, 2.0]}, TypeError, "dropout_seed.*integer"),
        ({"dropout_seed": [1, 2, 3]}, ValueError, r"dropout_seed.*\[2\]"),
        ({"dropout_seed": 7}, ValueError, r"dropout_seed.*\[2\]"),
    ],
)
def test_bad_calls_change_nothing(call, error, fragment):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, dropout_rate=0.1)
    call = {"is_training": True, **call}
    with pytest.raises(error, match=f"(?s){fragment}.*Received"):
        mha(tf.zeros([1, 5, 4]), **call)
    assert mha._dtype is None  # The failed first call built nothing.


# Through `snt.nets.Transformer` (`attention_dropout_rate`).


def _transformer(**kwargs: Any) -> snt.nets.Transformer:
    return snt.nets.Transformer(
        num_layers=2, num_heads=2, model_size=8, causal=True, **kwargs
    )


def test_transformer_attention_dropout_reaches_every_block():
    model = _transformer(attention_dropout_rate=0.5)
    plain = _transformer()
    x = tf.random.normal([2, 6, 8], seed=1)
    model(x)
    plain(x)
    for source, target in zip(model.variables, plain.variables, strict=True):
        target.assign(source)
    assert all(b.attention.dropout_rate == 0.5 for b in model.blocks)
    assert all(b.attention.dropout_rate is None for b in plain.blocks)
    # Not training: the same model as without the option.
    np.testing.assert_allclose(model(x), plain(x), rtol=1e-6, atol=1e-6)
    # Training: weights are dropped (a block's attention alone differs).
    block = model.blocks[0]
    dropped = block(x, is_training=True)
    assert not np.allclose(dropped, block(x), atol=1e-4)
    # A run-time flag decides in a graph; decoding with a cache passes it on.
    f = tf.function(lambda x, t: model(x, is_training=t))
    np.testing.assert_allclose(f(x, tf.constant(False)), plain(x), atol=1e-6)
    assert not np.allclose(f(x, tf.constant(True)), plain(x), atol=1e-4)
    cache = model.initial_cache(2, 6)
    y, _ = model(x[:, :3], cache=cache)
    np.testing.assert_allclose(y, plain(x)[:, :3], rtol=1e-5, atol=1e-5)
    assert "attention_dropout_rate=0.5" in repr(model.blocks[0])
    assert "attention_dropout_rate" not in repr(plain.blocks[0])


def test_transformer_attention_dropout_stacked_and_remat():
    stacked = _transformer(attention_dropout_rate=0.25, stacked=True)
    x = tf.random.normal([2, 4, 8], seed=2)
    np.testing.assert_allclose(stacked(x), stacked(x))
    assert not np.allclose(stacked(x, is_training=True), stacked(x), atol=1e-4)
    remat = _transformer(attention_dropout_rate=0.25, remat=True)
    remat(x)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(remat(x, is_training=True))
        return tape.gradient(loss, remat.trainable_variables)

    # A recomputed forward pass would draw another mask: refused.
    with pytest.raises(ValueError, match="random"):
        step()


@pytest.mark.parametrize("rate", [1.0, -0.1, "x"])
def test_transformer_attention_dropout_rate_errors(rate):
    error = TypeError if isinstance(rate, str) else ValueError
    with pytest.raises(error, match="`attention_dropout_rate`"):
        _transformer(attention_dropout_rate=rate)
