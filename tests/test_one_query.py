"""One-query attention products of traced decoding steps (`one_query.py`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import attention, one_query, tf_compat


def _numpy_logits(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    if q.ndim == 4:
        return np.einsum("bthk,bshk->bhts", q, k)
    return np.einsum("btngk,bsnk->bngts", q, k)


def _numpy_values(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    if w.ndim == 4:
        return np.einsum("bhts,bshv->bthv", w, v)
    return np.einsum("bngts,bsnv->btngv", w, v)


SHAPES = {
    # (q, k, v): MHA, value size other than key size, grouped heads.
    "mha": ([3, 1, 4, 5], [3, 7, 4, 5], [3, 7, 4, 5]),
    "values": ([2, 1, 3, 4], [2, 6, 3, 4], [2, 6, 3, 2]),
    "grouped": ([2, 1, 2, 3, 4], [2, 5, 2, 4], [2, 5, 2, 6]),
    "one-head": ([1, 1, 1, 8], [1, 9, 1, 8], [1, 9, 1, 8]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_products_match_numpy_einsums(name):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=s) for s in SHAPES[name])
    logits = one_query.logits(tf.constant(q), tf.constant(k))
    np.testing.assert_allclose(logits, _numpy_logits(q, k), rtol=1e-12)
    w = rng.normal(size=logits.shape)
    heads = one_query.values(tf.constant(w), tf.constant(v))
    np.testing.assert_allclose(heads, _numpy_values(w, v), rtol=1e-12)


def test_products_of_an_empty_batch():
    q, k = tf.zeros([0, 1, 3, 4]), tf.zeros([0, 5, 3, 4])
    assert one_query.logits(q, k).shape == [0, 3, 1, 5]
    assert one_query.values(tf.zeros([0, 3, 1, 5]), k).shape == [0, 1, 3, 4]


def test_products_with_an_unknown_batch_and_in_bfloat16():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=s).astype(np.float32) for s in SHAPES["grouped"])
    spec = tf.TensorSpec([None, *q.shape[1:]], tf.bfloat16)

    @tf.function(input_signature=[spec])
    def logits(q: tf.Tensor) -> tf.Tensor:
        return one_query.logits(q, tf.cast(k, tf.bfloat16))

    result = logits(tf.cast(q, tf.bfloat16))
    assert result.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(result, tf.float32), _numpy_logits(q, k), rtol=0.05, atol=0.05
    )


def test_usable_only_for_one_known_position():
    q, k = tf.zeros([2, 1, 3, 4]), tf.zeros([2, 5, 3, 4])
    assert one_query.usable(q, k, k)
    assert not one_query.usable(tf.zeros([2, 2, 3, 4]), k, k)
    assert not one_query.usable(q, k[:, :0], k[:, :0])

    @tf.function(input_signature=[tf.TensorSpec([2, None, 3, 4])])
    def unknown(k: tf.Tensor) -> tf.Tensor:
        assert not one_query.usable(q, k, k)
        assert not one_query.usable(q, q, k)
        return k

    unknown(k)


@pytest.mark.parametrize(
    "onednn, length, expected",
    [(True, 1, True), (False, 511, False), (False, 512, True)],
)
def test_worthwhile_with_onednn_or_from_a_length(monkeypatch, onednn, length, expected):
    monkeypatch.setattr(tf_compat, "onednn_enabled", lambda: onednn)
    assert one_query.worthwhile(tf.zeros([1, length, 2, 3])) is expected


@pytest.fixture
def worthwhile(monkeypatch: Any) -> None:
    """The one-query products wherever they apply (the tests' short caches
    are below `MIN_KEYS_WITHOUT_ONEDNN` under the pinned Eigen kernels)."""
    monkeypatch.setattr(one_query, "worthwhile", lambda k: True)


def test_short_caches_keep_the_einsums_without_onednn(monkeypatch):
    monkeypatch.setattr(tf_compat, "onednn_enabled", lambda: False)
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([1, 3, 8], seed=6)
    mha(x)
    calls = []
    monkeypatch.setattr(one_query, "logits", lambda q, k: calls.append(1))
    tf.function(lambda x: _decode_steps(mha, x, 3))(x)
    assert not calls


def _decode_steps(mha: Any, x: tf.Tensor, steps: int) -> tf.Tensor:
    cache = mha.initial_cache(x.shape[0], steps)
    outputs = []
    for t in range(steps):
        y, cache = mha(x[:, t : t + 1], cache=cache)
        outputs.append(y)
    return tf.concat(outputs, 1)


def _einsum_products(monkeypatch: Any) -> None:
    monkeypatch.setattr(one_query, "usable", lambda q, k, v: False)


@pytest.mark.parametrize(
    "config",
    [
        dict(num_heads=3, key_size=4),
        dict(num_heads=4, key_size=2, num_kv_heads=2, value_size=3),
        dict(num_heads=2, key_size=4, rotary=True, window=3),
    ],
)
def test_traced_decoding_matches_eager_and_full_calls(config, monkeypatch, worthwhile):
    mha = snt.MultiHeadAttention(**config)
    x = tf.random.normal([2, 6, 8], seed=4)
    full = mha(x, causal=True)
    eager = _decode_steps(mha, x, 6)
    calls = []
    products = one_query.logits
    monkeypatch.setattr(
        one_query, "logits", lambda q, k: calls.append(q.shape) or products(q, k)
    )
    traced = tf.function(lambda x: _decode_steps(mha, x, 6))(x)
    assert len(calls) == 6  # Every traced step took the one-query products.
    np.testing.assert_allclose(traced, eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(traced, full, rtol=1e-5, atol=1e-6)
    _einsum_products(monkeypatch)
    einsums = tf.function(lambda x: _decode_steps(mha, x, 6))(x)
    np.testing.assert_allclose(traced, einsums, rtol=1e-5, atol=1e-6)


def test_eager_steps_and_prompts_keep_the_einsums(monkeypatch, worthwhile):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([1, 4, 8], seed=5)
    mha(x)
    calls = []
    monkeypatch.setattr(one_query, "logits", lambda q, k: calls.append(1))
    _decode_steps(mha, x, 4)
    cache = mha.initial_cache(1, 8)
    tf.function(lambda x: mha(x, cache=cache))(x)
    assert not calls
    assert attention.COMPILED_CORE is None
