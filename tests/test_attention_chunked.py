"""Chunked (memory-efficient) attention of `snt.MultiHeadAttention`: outputs and
gradients equal to the dense path, masks per block, choice of kernel, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import attention as attention_lib
from sonnet._src import chunked_attention
from tests.attention_pairs import build as _build
from tests.attention_pairs import numpy_attention as _numpy_attention
from tests.attention_pairs import outputs_and_grads as _outputs_and_grads
from tests.attention_pairs import pair as _pair


def _assert_same(dense, chunked, x, call_fn=None, **call):
    _build(dense, chunked, x)
    run = call_fn or (lambda m: _outputs_and_grads(m, x, **call))
    y_d, g_d = run(dense)
    y_c, g_c = run(chunked)
    np.testing.assert_allclose(y_c, y_d, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_c, g_d, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [None, 3])
def test_outputs_and_gradients_equal_dense(kv_heads, causal, window):
    dense, chunked = _pair(
        num_heads=4, key_size=8, num_kv_heads=kv_heads, rotary=True, window=window
    )
    x = tf.random.stateless_normal([2, 11, 16], seed=(1, 2))
    _assert_same(dense, chunked, x, causal=causal)


@pytest.mark.parametrize("rank", [2, 3, 4])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_user_mask_is_sliced_per_block(rank, kv_heads):
    dense, chunked = _pair(num_heads=4, key_size=8, num_kv_heads=kv_heads)
    x = tf.random.stateless_normal([2, 10, 16], seed=(3, 4))
    shape = [2, 4, 10, 10][-rank:]
    mask = tf.random.stateless_uniform(shape, seed=(5, 6)) > 0.5
    # Rows with every key masked get the mean of the values in both paths.
    mask = tf.tensor_scatter_nd_update(
        mask, [[0] * (rank - 2) + [1]], tf.zeros([1, 10], tf.bool)
    )
    _assert_same(dense, chunked, x, mask=mask, causal=True)


def test_cross_attention_with_other_lengths():
    dense, chunked = _pair(num_heads=2, key_size=4)
    x = tf.random.stateless_normal([1, 9, 6], seed=(1, 1))
    memory = tf.random.stateless_normal([1, 6, 5], seed=(1, 2))
    dense(x, memory)
    chunked(x, memory)
    for a, b in zip(dense.variables, chunked.variables, strict=True):
        b.assign(a)
    np.testing.assert_allclose(
        chunked(x, memory, causal=True), dense(x, memory, causal=True), atol=1e-5
    )


def _documents(ids):
    ids = tf.constant(ids)

    def mask_fn(q, k):
        return (k <= q) & (tf.gather(ids, q) == tf.gather(ids, k))

    return mask_fn


@pytest.mark.parametrize("chunked", [False, True])
def test_mask_functions_match_numpy(chunked):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, chunked=chunked, chunk_size=3)
    x = tf.random.stateless_normal([1, 8, 6], seed=(7, 8))
    ids = [0, 0, 0, 1, 1, 2, 2, 2]
    t = np.arange(8)
    document = (t[None] <= t[:, None]) & (np.array(ids)[:, None] == np.array(ids))
    np.testing.assert_allclose(
        mha(x, mask_fn=_documents(ids)),
        _numpy_attention(mha, x, document),
        rtol=1e-5,
        atol=1e-5,
    )
    prefix = (t[None] <= t[:, None]) | (t[None] < 3)
    np.testing.assert_allclose(
        mha(x, mask_fn=lambda q, k: (k <= q) | (k < 3)),
        _numpy_attention(mha, x, prefix),
        rtol=1e-5,
        atol=1e-5,
    )


def test_mask_function_gradients_equal_dense():
    dense, chunked = _pair(num_heads=2, key_size=4, num_kv_heads=1)
    x = tf.random.stateless_normal([2, 10, 6], seed=(9, 9))
    _assert_same(dense, chunked, x, mask_fn=_documents([0] * 4 + [1] * 6))


def test_mask_function_never_sees_the_full_square_when_chunked():
    seen = []

    def mask_fn(q, k):
        seen.append((q.shape[0], k.shape[1]))
        return k <= q

    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, chunked=True, chunk_size=4)
    tf.function(lambda x: mha(x, mask_fn=mask_fn))(tf.zeros([1, 12, 4]))
    # The probe of the checks ([2, 3]) and blocks of [4, 4]; nothing [12, 12].
    assert set(seen) <= {(2, 3), (4, 4)}


def test_graphs_and_xla_compile_and_match():
    dense, chunked = _pair(num_heads=4, key_size=8, num_kv_heads=2, rotary=True)
    x = tf.random.stateless_normal([2, 10, 16], seed=(2, 3))
    _build(dense, chunked, x)
    expected = _outputs_and_grads(dense, x, causal=True)
    for jit in (False, True):
        step = tf.function(
            lambda x: _outputs_and_grads(chunked, x, causal=True), jit_compile=jit
        )
        y, grads = step(x)
        np.testing.assert_allclose(y, expected[0], rtol=1e-5, atol=1e-5)
        for a, b in zip(grads, expected[1], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_prefill_with_a_cache_then_decode():
    dense, chunked = _pair(num_heads=2, key_size=4, rotary=True)
    x = tf.random.stateless_normal([1, 9, 4], seed=(4, 4))
    _build(dense, chunked, x)
    full = dense(x, causal=True)
    cache = chunked.initial_cache(1, 12)
    y, cache = chunked(x[:, :7], cache=cache)
    z, cache = chunked(x[:, 7:], cache=cache)
    np.testing.assert_allclose(tf.concat([y, z], 1), full, rtol=1e-5, atol=1e-5)


def test_half_precision_policy_keeps_float32_statistics():
    dense, chunked = _pair(num_heads=2, key_size=8)
    x = tf.random.stateless_normal([1, 10, 8], seed=(6, 6))
    _build(dense, chunked, x)
    for m in (dense, chunked):
        snt.precision.apply(m, "mixed_bfloat16")
    y_d, y_c = dense(x, causal=True), chunked(x, causal=True)
    assert y_c.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(y_c, tf.float32), tf.cast(y_d, tf.float32), rtol=0.05, atol=0.05
    )


def test_automatic_choice_from_static_shapes(monkeypatch):
    calls = []
    original = chunked_attention.attend
    monkeypatch.setattr(
        chunked_attention, "attend", lambda *a: calls.append(1) or original(*a)
    )
    monkeypatch.setattr(attention_lib, "_AUTO_CHUNK_PAIRS", 64)
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    mha(tf.zeros([1, 8, 4]))
    assert not calls  # 8 x 8 = 64 pairs: dense.
    mha(tf.zeros([1, 9, 4]))
    assert calls == [1]
    snt.MultiHeadAttention(num_heads=2, key_size=4, chunked=False)(tf.zeros([1, 9, 4]))
    assert calls == [1]
    # Unknown lengths stay dense unless chunking is asked for.
    spec = tf.TensorSpec([1, None, 4])
    tf.function(mha, input_signature=[spec])(tf.zeros([1, 9, 4]))
    assert calls == [1]


def test_chunked_with_unknown_lengths():
    dense, chunked = _pair(num_heads=2, key_size=4)
    x = tf.random.stateless_normal([2, 10, 4], seed=(1, 5))
    _build(dense, chunked, x)
    spec = tf.TensorSpec([None, None, 4])
    run = tf.function(lambda x: chunked(x, causal=True), input_signature=[spec])
    np.testing.assert_allclose(run(x), dense(x, causal=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size", [0, -3])
def test_chunk_size_must_be_positive(size):
    with pytest.raises(ValueError, match="chunk_size"):
        snt.MultiHeadAttention(num_heads=2, key_size=4, chunk_size=size)


def test_chunked_must_be_a_flag():
    with pytest.raises(TypeError, match="chunked"):
        snt.MultiHeadAttention(num_heads=2, key_size=4, chunked="yes")


@pytest.mark.parametrize(
    ("mask_fn", "error", "fragment"),
    [
        (3, TypeError, "callable"),
        (lambda q: q > 0, TypeError, "two arguments"),
        (lambda q, k, b: q > k, TypeError, "two arguments"),
        (lambda q, k: q - k, TypeError, "boolean"),
        (lambda q, k: [[True]], TypeError, "boolean tensor"),
        (lambda q, k: tf.zeros([4, 5], tf.bool), ValueError, "broadcastable"),
        (lambda q, k: tf.zeros([1, 2, 3], tf.bool), ValueError, "broadcastable"),
    ],
)
def test_bad_mask_functions_change_nothing(mask_fn, error, fragment):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, chunked=True)
    with pytest.raises(error, match=f"(?s)mask_fn.*{fragment}"):
        mha(tf.zeros([1, 5, 4]), mask_fn=mask_fn)
    assert mha._dtype is None  # The failed first call built nothing.
