"""Registry entries for attention and its companions (RMS norm, rotary)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance import case

_case = case.from_kwargs


_sequence = case.sequence


def _causal(module: Any, x: tf.Tensor) -> tf.Tensor:
    return module(x, causal=True)


def _masked(module: Any, x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    return module(x, mask=mask)


def _cross(module: Any, query: tf.Tensor, key: tf.Tensor, value: tf.Tensor) -> Any:
    return module(query, key, value)


def _decode(module: Any, x: tf.Tensor, cache: snt.AttentionCache) -> Any:
    return module(x, cache=cache)


def _mask() -> tf.Tensor:
    # Per-example key padding: the second example sees only 3 keys.
    lengths = tf.constant([5, 3])
    return (tf.range(5)[None, :] < lengths[:, None])[:, None, None, :]


def _cache() -> snt.AttentionCache:
    # Three of eight positions filled; the call adds two more.
    return snt.AttentionCache(
        key=_sequence(2, 8, 2, 4, seed=1)
        * tf.cast(tf.range(8) < 3, tf.float32)[None, :, None, None],
        value=_sequence(2, 8, 2, 3, seed=2),
        index=tf.constant(3),
    )


_MHA = snt.MultiHeadAttention

CASES = [
    _case("RMSNorm", snt.RMSNorm, {}, lambda: (_sequence(2, 3, 4),)),
    _case(
        "RMSNorm-slice-no-scale",
        snt.RMSNorm,
        {"axis": slice(1, None), "create_scale": False, "eps": 1e-3},
        lambda: (_sequence(2, 3, 4),),
    ),
    _case("RotaryEmbedding", snt.RotaryEmbedding, {}, lambda: (_sequence(2, 5, 3, 4),)),
    _case(
        "MultiHeadAttention",
        _MHA,
        {"num_heads": 2, "key_size": 4},
        lambda: (_sequence(2, 5, 6),),
    ),
    _case(
        "MultiHeadAttention-causal",
        _MHA,
        {"num_heads": 2, "key_size": 4, "model_size": 5, "with_bias": False},
        lambda: (_sequence(2, 5, 6),),
        _causal,
    ),
    _case(
        "MultiHeadAttention-mask",
        _MHA,
        {"num_heads": 2, "key_size": 4},
        lambda: (_sequence(2, 5, 6), _mask()),
        _masked,
    ),
    _case(
        "MultiHeadAttention-cross",
        _MHA,
        {"num_heads": 2, "key_size": 4, "value_size": 3, "model_size": 7},
        lambda: (_sequence(2, 5, 6), _sequence(2, 4, 3, seed=1), _sequence(2, 4, 2)),
        _cross,
    ),
    _case(
        "MultiHeadAttention-GQA-mask",
        _MHA,
        {"num_heads": 4, "key_size": 4, "num_kv_heads": 2},
        lambda: (_sequence(2, 5, 6), _mask()),
        _masked,
    ),
    _case(
        "MultiHeadAttention-MQA-rotary-causal",
        _MHA,
        {"num_heads": 4, "key_size": 4, "num_kv_heads": 1, "rotary": True},
        lambda: (_sequence(2, 5, 6),),
        _causal,
    ),
    _case(
        "MultiHeadAttention-GQA-rotary-cache",
        _MHA,
        {
            "num_heads": 4,
            "key_size": 4,
            "value_size": 3,
            "num_kv_heads": 2,
            "rotary": True,
        },
        lambda: (_sequence(2, 2, 6), _cache()),
        _decode,
    ),
]

NOT_REGISTERED: dict[type, str] = {}
