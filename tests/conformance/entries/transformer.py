"""Registry entries for `snt.nets.Transformer` and `snt.nets.TransformerBlock`."""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance import case

_case = case.from_kwargs


_sequence = case.sequence


def _train(module: Any, x: tf.Tensor) -> tf.Tensor:
    return module(x, is_training=True)


def _masked(module: Any, x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    return module(x, mask=mask)


def _decode(module: Any, x: tf.Tensor, cache: Any) -> Any:
    return module(x, cache=cache)


def _with_aux_losses(module: Any, x: tf.Tensor) -> Any:
    outputs, losses = module(x, return_aux_losses=True)
    # The losses stay float32 under a `snt.precision` policy (the routers
    # compute in float32; tests/test_transformer_moe.py checks that): here
    # they take the outputs' dtype, which the policy suite expects of every
    # output.
    return outputs, {k: tf.cast(v, outputs.dtype) for k, v in losses.items()}


def _padding_mask() -> tf.Tensor:
    # The second sequence has 2 real positions of 4.
    lengths = tf.constant([4, 2])
    return (tf.range(4)[None, :] < lengths[:, None])[:, None, None, :]


def _cache(heads: int, key_size: int) -> snt.AttentionCache:
    # Three of eight positions filled (keys and values of earlier positions).
    filled = tf.cast(tf.range(8) < 3, tf.float32)[None, :, None, None]
    return snt.AttentionCache(
        key=_sequence(2, 8, heads, key_size, seed=1) * filled,
        value=_sequence(2, 8, heads, key_size, seed=2) * filled,
        index=tf.constant(3),
    )


_T = snt.nets.Transformer
_SMALL = {"num_layers": 2, "num_heads": 2, "model_size": 8}

CASES = [
    _case("Transformer", _T, _SMALL, lambda: (_sequence(2, 4, 8),)),
    _case(
        "Transformer-causal-rotary-swiglu-rms-GQA",
        _T,
        {
            "num_layers": 1,
            "num_heads": 4,
            "model_size": 8,
            "num_kv_heads": 2,
            "activation": "swiglu",
            "norm": "rms",
            "causal": True,
            "rotary": True,
            "with_bias": False,
        },
        lambda: (_sequence(2, 4, 8),),
    ),
    _case(
        "Transformer-mask",
        _T,
        {**_SMALL, "num_layers": 1},
        lambda: (_sequence(2, 4, 8), _padding_mask()),
        _masked,
    ),
    # Dropout in training: random outputs, only their structure is compared.
    dataclasses.replace(
        _case(
            "Transformer-dropout-train",
            _T,
            {**_SMALL, "num_layers": 1, "dropout_rate": 0.25, "activation": "relu"},
            lambda: (_sequence(2, 4, 8),),
            _train,
        ),
        deterministic=False,
    ),
    _case(
        "Transformer-cache",
        _T,
        {**_SMALL, "num_layers": 1, "causal": True, "rotary": True},
        lambda: (_sequence(2, 2, 8), (_cache(2, 4),)),
        _decode,
    ),
    # Mixture-of-experts MLPs: a capacity factor compiles with XLA, dropless
    # routing does not (a clean error naming `capacity_factor`).
    dataclasses.replace(
        _case(
            "Transformer-experts-capacity-swiglu-shared-aux-losses",
            _T,
            {
                **_SMALL,
                "activation": "swiglu",
                "num_experts": 4,
                "capacity_factor": 1.5,
                "shared_expert": True,
            },
            lambda: (_sequence(2, 4, 8),),
            _with_aux_losses,
        ),
        # Not bfloat16: router scores within its rounding (2^-8) of each other
        # pick another expert, or with a capacity drop the token, for some
        # random weights (1 output in 64 off by 0.17 in a full run), a
        # different but valid result that no tolerance separates from a bug.
        precisions=("float16",),
    ),
    dataclasses.replace(
        _case(
            "Transformer-experts-pattern-dropless",
            _T,
            {**_SMALL, "num_experts": [None, 3], "top_k": 1, "causal": True},
            lambda: (_sequence(2, 4, 8),),
        ),
        xla=False,
    ),
    _case(
        "Transformer-stacked-experts-aux-losses",
        _T,
        {**_SMALL, "stacked": True, "num_experts": 3, "capacity_factor": 2.0},
        lambda: (_sequence(2, 4, 8),),
        _with_aux_losses,
    ),
    _case(
        "Transformer-chunked",
        _T,
        {**_SMALL, "num_layers": 1, "causal": True, "chunked": True, "chunk_size": 2},
        lambda: (_sequence(2, 5, 8),),
    ),
    _case(
        "TransformerBlock",
        snt.nets.TransformerBlock,
        {"num_heads": 2, "model_size": 8, "key_size": 3, "mlp_hidden_size": 12},
        lambda: (_sequence(2, 4, 8),),
    ),
    _case(
        "TransformerBlock-cache",
        snt.nets.TransformerBlock,
        {"num_heads": 2, "model_size": 8, "causal": True, "norm": "rms"},
        lambda: (_sequence(2, 2, 8), _cache(2, 4)),
        _decode,
    ),
]

NOT_REGISTERED: dict[type, str] = {}
