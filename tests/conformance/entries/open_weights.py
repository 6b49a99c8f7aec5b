"""Registry entries for open-weight models (issue 33): `snt.nets.CausalLM` and
the Transformer and attention options their checkpoints need."""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance import case

_sequence = case.sequence


def _tokens() -> tuple[tf.Tensor]:
    return (tf.constant([[1, 2, 9, 4], [0, 3, 3, 7]]),)


def _decode(module: Any, tokens: tf.Tensor) -> Any:
    # The same tokens twice: positions 0-3, then 4-7 over the filled cache.
    cache = module.initial_cache(batch_size=2, max_length=8)
    _, cache = module(tokens, cache=cache)
    return module(tokens, cache=cache)


def _causal(module: Any, x: tf.Tensor) -> tf.Tensor:
    return module(x, causal=True)


def _lm_case(id: str, transformer: dict[str, Any], **kwargs: Any) -> case.Case:
    def factory() -> snt.nets.CausalLM:
        return snt.nets.CausalLM(
            vocab_size=10, transformer=snt.nets.Transformer(**transformer), **kwargs
        )

    return case.Case(
        id=id,
        cls=snt.nets.CausalLM,
        factory=factory,
        inputs=_tokens,
        # Integer inputs: the low-precision suites have nothing to cast.
        precisions=(),
        ctor_kwargs=None,
    )


_LLAMA = {
    "num_layers": 1,
    "num_heads": 4,
    "model_size": 8,
    "num_kv_heads": 2,
    "activation": "swiglu",
    "norm": "rms",
    "causal": True,
    "rotary": True,
    "with_bias": False,
}
_GPT2 = {
    "num_layers": 1,
    "num_heads": 2,
    "model_size": 8,
    "activation": "gelu_tanh",
    "causal": True,
    "norm_eps": 1e-5,
}

CASES = [
    _lm_case("CausalLM-llama", _LLAMA),
    _lm_case("CausalLM-gpt2-tied", _GPT2, max_positions=8, tie_embeddings=True),
    dataclasses.replace(
        _lm_case(
            "CausalLM-qwen3-window-cache",
            {
                **_LLAMA,
                "qk_norm": True,
                "window": 2,
                "attention_bias": True,
                "attention_output_bias": False,
                "rotary_scaling": {"rope_type": "linear", "factor": 2.0},
            },
        ),
        call=_decode,
    ),
    case.from_kwargs(
        "MultiHeadAttention-qk-norm-window-scaling",
        snt.MultiHeadAttention,
        {
            "num_heads": 2,
            "key_size": 4,
            "rotary": True,
            "rotary_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 4,
            },
            "output_bias": False,
            "qk_norm": True,
            "qk_norm_eps": 1e-5,
            "window": 2,
        },
        lambda: (_sequence(2, 5, 6),),
        _causal,
    ),
    case.from_kwargs(
        "Transformer-open-weight-options",
        snt.nets.Transformer,
        {
            "num_layers": 1,
            "num_heads": 2,
            "model_size": 8,
            "activation": "gelu_tanh",
            "norm_eps": 1e-5,
            "attention_bias": False,
            "mlp_bias": True,
            "window": 3,
        },
        lambda: (_sequence(2, 4, 8),),
    ),
]

NOT_REGISTERED: dict[type, str] = {}
