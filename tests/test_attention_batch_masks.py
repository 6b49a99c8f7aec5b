"""Per-example (and per-head) `mask_fn` results of `snt.MultiHeadAttention`:
document-causal and prefix-LM masks against NumPy, dense vs chunked outputs
and gradients, caches, and results of the wrong rank, shape or dtype."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.attention_pairs import build as _build
from tests.attention_pairs import numpy_attention as _numpy_attention
from tests.attention_pairs import outputs_and_grads as _outputs_and_grads
from tests.attention_pairs import pair as _pair

# Two examples of 10 tokens, each packed with its own documents.
_IDS = np.array([[0, 0, 0, 1, 1, 2, 2, 2, 2, 2], [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]])
_PREFIX = np.array([3, 6])


def _documents(ids):
    """Block-causal attention within each example's documents: `[B, 1, Tq, Sk]`."""
    ids = tf.constant(ids, tf.int32)

    def mask_fn(q, k):
        same = tf.gather(ids, q, axis=1) == tf.gather(ids, k, axis=1)
        return ((k <= q) & same)[:, None]

    return mask_fn


def _prefix_lm(prefix):
    """Each example sees its whole prefix, then causally: `[B, 1, Tq, Sk]`."""
    prefix = tf.constant(prefix, tf.int32)[:, None, None]
    return lambda q, k: ((k <= q) | (k < prefix))[:, None]


def _numpy_documents(ids, time, key_time):
    t, s = np.arange(time)[:, None], np.arange(key_time)[None]
    same = ids[:, :time, None] == ids[:, None, :key_time]
    return ((s <= t) & same)[:, None]


def _numpy_prefix_lm(prefix, time):
    t, s = np.arange(time)[:, None], np.arange(time)[None]
    return ((s <= t) | (s < prefix[:, None, None]))[:, None]


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_document_and_prefix_masks_per_example_match_numpy(chunked, kv_heads):
    mha = snt.MultiHeadAttention(
        num_heads=4, key_size=4, num_kv_heads=kv_heads, chunked=chunked, chunk_size=3
    )
    x = tf.random.stateless_normal([2, 10, 6], seed=(7, 8))
    for mask_fn, allowed in (
        (_documents(_IDS), _numpy_documents(_IDS, 10, 10)),
        (_prefix_lm(_PREFIX), _numpy_prefix_lm(_PREFIX, 10)),
    ):
        np.testing.assert_allclose(
            mha(x, mask_fn=mask_fn),
            _numpy_attention(mha, x, allowed),
            rtol=1e-5,
            atol=1e-5,
        )


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_masks_per_head_match_numpy(chunked, kv_heads):
    # Local attention of another width in each head: `[1, heads, Tq, Sk]`.
    widths = tf.constant([1, 2, 4, 8])[:, None, None]
    mha = snt.MultiHeadAttention(
        num_heads=4, key_size=4, num_kv_heads=kv_heads, chunked=chunked, chunk_size=3
    )
    x = tf.random.stateless_normal([2, 9, 6], seed=(7, 9))
    y = mha(x, mask_fn=lambda q, k: ((k <= q) & (k > q - widths))[None])
    t, s = np.arange(9)[:, None], np.arange(9)[None]
    allowed = (s <= t) & (s > t - np.array([1, 2, 4, 8])[:, None, None])
    np.testing.assert_allclose(
        y, _numpy_attention(mha, x, allowed), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("extra", [{}, {"window": 3}, {"mask": True}])
def test_gradients_equal_dense(kv_heads, extra):
    extra = dict(extra)
    dense, chunked = _pair(
        num_heads=4,
        key_size=8,
        num_kv_heads=kv_heads,
        rotary=True,
        window=extra.pop("window", None),
    )
    x = tf.random.stateless_normal([2, 10, 16], seed=(3, 1))
    if extra.pop("mask", False):
        extra["mask"] = tf.random.stateless_uniform([2, 1, 10, 10], (4, 4)) > 0.2
    _build(dense, chunked, x)
    for mask_fn in (_documents(_IDS), _prefix_lm(_PREFIX)):
        call = dict(extra, mask_fn=mask_fn)
        y_d, g_d = _outputs_and_grads(dense, x, **call)
        y_c, g_c = _outputs_and_grads(chunked, x, **call)
        np.testing.assert_allclose(y_c, y_d, rtol=1e-5, atol=1e-5)
        for a, b in zip(g_c, g_d, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_the_chunked_path_calls_it_per_block():
    seen = []
    ids = tf.constant(_IDS)

    def mask_fn(q, k):
        seen.append((q.shape[0], k.shape[1]))
        same = tf.gather(ids, q, axis=1) == tf.gather(ids, k, axis=1)
        return ((k <= q) & same)[:, None]

    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, chunked=True, chunk_size=4)
    tf.function(lambda x: mha(x, mask_fn=mask_fn))(tf.zeros([2, 10, 4]))
    # The probe of the checks ([2, 3]) and blocks of [4, 4]; nothing [10, 10].
    assert set(seen) <= {(2, 3), (4, 4)}


@pytest.mark.parametrize("chunked", [False, True])
def test_prefill_and_decode_with_a_cache(chunked):
    # The documents' ids cover the cache's positions.
    ids = np.concatenate([_IDS, np.full([2, 2], 3)], 1)
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, chunked=chunked, chunk_size=3)
    x = tf.random.stateless_normal([2, 10, 4], seed=(4, 4))
    full = mha(x, mask_fn=_documents(ids))
    allowed = _numpy_documents(ids, 10, 10)
    np.testing.assert_allclose(
        full, _numpy_attention(mha, x, allowed), rtol=1e-5, atol=1e-5
    )
    cache = mha.initial_cache(2, 12)
    y, cache = mha(x[:, :7], cache=cache, mask_fn=_documents(ids))
    steps = [y]
    for t in range(7, 10):
        y, cache = mha(x[:, t : t + 1], cache=cache, mask_fn=_documents(ids))
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chunked", [False, True])
def test_a_ring_cache_with_a_window(chunked):
    mha = snt.MultiHeadAttention(
        num_heads=2, key_size=4, window=4, chunked=chunked, chunk_size=3
    )
    x = tf.random.stateless_normal([2, 10, 4], seed=(5, 4))
    full = mha(x, causal=True, mask_fn=_documents(_IDS))
    window = (np.arange(10)[None] > np.arange(10)[:, None] - 4)[None, None]
    allowed = _numpy_documents(_IDS, 10, 10) & window
    np.testing.assert_allclose(
        full, _numpy_attention(mha, x, allowed), rtol=1e-5, atol=1e-5
    )
    cache = mha.initial_cache(2, 10)
    y, cache = mha(x[:, :6], cache=cache, mask_fn=_documents(_IDS))
    steps = [y]
    for t in range(6, 10):
        y, cache = mha(x[:, t : t + 1], cache=cache, mask_fn=_documents(_IDS))
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, rtol=1e-5, atol=1e-5)


def test_unknown_batch_and_lengths_in_a_graph():
    dense, chunked = _pair(num_heads=2, key_size=4)
    x = tf.random.stateless_normal([2, 10, 4], seed=(1, 5))
    _build(dense, chunked, x)
    mask_fn = _documents(_IDS)
    spec = tf.TensorSpec([None, None, 4])
    for module in (dense, chunked):
        np.testing.assert_allclose(
            _graph(module, mask_fn, spec)(x),
            _numpy_attention(module, x, _numpy_documents(_IDS, 10, 10)),
            rtol=1e-5,
            atol=1e-5,
        )


def _graph(module, mask_fn, spec):
    return tf.function(lambda x: module(x, mask_fn=mask_fn), input_signature=[spec])


@pytest.mark.parametrize(
    ("result", "error", "fragment"),
    [
        (tf.zeros([2, 2, 3], tf.bool), ValueError, r"rank 4.*result\[:, None\]"),
        (tf.zeros([3, 1, 2, 3], tf.bool), ValueError, r"\[B, num_heads, Tq, Sk\]"),
        (tf.zeros([2, 3, 2, 3], tf.bool), ValueError, r"\[2, 4, 2, 3\]"),
        (tf.zeros([2, 1, 2, 4], tf.bool), ValueError, "broadcastable"),
        (tf.zeros([1, 2, 1, 2, 3], tf.bool), ValueError, "rank 2"),
        (tf.zeros([3], tf.bool), ValueError, "rank 2"),
        (tf.zeros([2, 1, 2, 3]), TypeError, "boolean"),
    ],
)
@pytest.mark.parametrize("chunked", [False, True])
def test_bad_results_change_nothing(result, error, fragment, chunked):
    mha = snt.MultiHeadAttention(num_heads=4, key_size=4, chunked=chunked)
    with pytest.raises(error, match=f"(?s)mask_fn.*{fragment}.*Received"):
        mha(tf.zeros([2, 5, 4]), mask_fn=lambda q, k: result)
    assert mha._dtype is None  # The failed first call built nothing.
