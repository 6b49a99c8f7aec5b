"""Local attention: the ring-buffer decoding cache of windowed
`snt.MultiHeadAttention`, per-layer window patterns of `snt.nets.Transformer`,
and their bad input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.attention_pairs import numpy_attention as _numpy_attention


def _data(*shape, seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape), tf.float32)


def _window(time, window):
    t = np.arange(time)
    return (t[None] <= t[:, None]) & (t[None] > t[:, None] - window)


def test_initial_cache_is_bounded_by_the_window():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, num_kv_heads=1, window=4)
    assert mha.initial_cache(2, 100).key.shape == [2, 4, 1, 4]
    assert mha.initial_cache(2, 3).value.shape == [2, 3, 1, 4]
    assert snt.MultiHeadAttention(2, 4).initial_cache(1, 100).key.shape[1] == 100


@pytest.mark.parametrize("chunked", [False, True])
def test_ring_decoding_matches_numpy_and_full_attention(chunked):
    mha = snt.MultiHeadAttention(
        num_heads=2, key_size=4, window=3, chunked=chunked, chunk_size=2
    )
    x = _data(1, 10, 6)
    full = mha(x, causal=True)
    np.testing.assert_allclose(
        full, _numpy_attention(mha, x, _window(10, 3)), rtol=1e-5, atol=1e-5
    )
    cache = mha.initial_cache(1, 10)
    steps = []
    for t in range(10):
        y, cache = mha(x[:, t : t + 1], cache=cache)
        steps.append(y)
        assert cache.key.shape == [1, 3, 2, 4]  # Constant after 3 positions.
    np.testing.assert_allclose(tf.concat(steps, 1), full, rtol=1e-5, atol=1e-5)
    assert int(cache.index) == 10


@pytest.mark.parametrize("splits", [(7, 3), (2, 5, 3), (1, 1, 8)])
def test_ring_prefill_longer_or_shorter_than_the_window(splits):
    mha = snt.MultiHeadAttention(
        num_heads=4, key_size=4, num_kv_heads=2, window=4, rotary=True
    )
    x = _data(2, 10, 5, seed=1)
    full = mha(x, causal=True)
    cache, outputs, start = mha.initial_cache(2, 64), [], 0
    for size in splits:
        y, cache = mha(x[:, start : start + size], cache=cache)
        outputs.append(y)
        start += size
    np.testing.assert_allclose(tf.concat(outputs, 1), full, rtol=1e-5, atol=1e-5)


def test_ring_decoding_step_compiles_once_under_xla():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, window=3, rotary=True)
    x = _data(1, 8, 4, seed=2)
    full = mha(x, causal=True)
    step = tf.function(lambda x, cache: mha(x, cache=cache), jit_compile=True)
    cache = mha.initial_cache(1, 8)
    steps = []
    for t in range(8):
        y, cache = step(x[:, t : t + 1], cache)
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, rtol=1e-5, atol=1e-5)
    assert step.experimental_get_tracing_count() == 1


def test_ring_with_a_mask_function_and_a_query_mask():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, window=4)
    x = _data(1, 6, 4, seed=3)

    def mask_fn(q, k):  # Also skip the position just before.
        return k != q - 1

    full = mha(x, causal=True, mask_fn=mask_fn)
    allowed = _window(6, 4) & (np.arange(6)[None] != np.arange(6)[:, None] - 1)
    np.testing.assert_allclose(
        full, _numpy_attention(mha, x, allowed), rtol=1e-5, atol=1e-5
    )
    cache = mha.initial_cache(1, 6)
    steps = []
    for t in range(6):
        y, cache = mha(
            x[:, t : t + 1], cache=cache, mask_fn=mask_fn, mask=tf.ones([1, 1], tf.bool)
        )
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, rtol=1e-5, atol=1e-5)


def test_ring_refuses_masks_over_slots():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, window=3)
    cache = mha.initial_cache(1, 10)
    x = _data(1, 1, 4)
    with pytest.raises(ValueError, match="mask"):
        mha(x, cache=cache, mask=tf.ones([1, 3], tf.bool))
    assert mha._dtype is None


@pytest.mark.parametrize("window", [0, -1])
def test_window_must_be_positive(window):
    with pytest.raises(ValueError, match="window"):
        snt.MultiHeadAttention(num_heads=2, key_size=4, window=window)
    with pytest.raises(ValueError, match="window"):
        snt.nets.Transformer(num_layers=2, num_heads=2, model_size=4, window=window)
    with pytest.raises(ValueError, match="window"):
        snt.nets.Transformer(
            num_layers=2, num_heads=2, model_size=4, window=[4, window]
        )


def test_window_pattern_is_cycled_over_layers():
    model = snt.nets.Transformer(
        num_layers=5, num_heads=2, model_size=8, causal=True, window=[3, None]
    )
    assert [b.attention.window for b in model.blocks] == [3, None, 3, None, 3]
    x = _data(2, 9, 8, seed=4)
    full = model(x)
    cache = model.initial_cache(2, 9)
    assert [c.key.shape[1] for c in cache] == [3, 9, 3, 9, 3]
    steps = []
    for t in range(9):
        y, cache = model(x[:, t : t + 1], cache=cache)
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, rtol=1e-4, atol=1e-4)


def test_uniform_pattern_is_one_window_and_works_stacked():
    model = snt.nets.Transformer(
        num_layers=2, num_heads=2, model_size=8, causal=True, window=[4], stacked=True
    )
    x = _data(1, 6, 8, seed=5)
    full = model(x)
    cache = model.initial_cache(1, 6)
    assert cache.key.shape[:2] == [2, 1] and cache.key.shape[2] == 4
    steps = []
    for t in range(6):
        y, cache = model(x[:, t : t + 1], cache=cache)
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("window", "fragment"),
    [([4, None], "same window with `stacked=True`"), ([], "non-empty")],
)
def test_bad_window_patterns(window, fragment):
    with pytest.raises(ValueError, match=f"window.*{fragment}"):
        snt.nets.Transformer(
            num_layers=2, num_heads=2, model_size=8, window=window, stacked=True
        )
