"""Registry entries for deep models: `snt.LayerStack` and stacked Transformers."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance import case
from tests.conformance.entries.transformer import _cache, _decode, _padding_mask

_case = case.from_kwargs
_sequence = case.sequence


def _mlp_block() -> snt.Module:
    # A module-level function, so that the stack pickles.
    return snt.nets.MLP([6, 4], activate_final=True)


def _stacked_cache() -> snt.AttentionCache:
    one = _cache(2, 4)
    return snt.AttentionCache(*[tf.stack([t, t]) for t in one])


def _masked(module, x, mask):
    return module(x, mask=mask)


_STACKED = {"num_layers": 2, "num_heads": 2, "model_size": 8, "stacked": True}

CASES = [
    _case(
        "LayerStack",
        snt.LayerStack,
        {"make_layer": _mlp_block, "num_layers": 3},
        lambda: (_sequence(2, 4),),
    ),
    _case(
        "LayerStack-remat",
        snt.LayerStack,
        {"make_layer": _mlp_block, "num_layers": 2, "remat": True},
        lambda: (_sequence(2, 4),),
    ),
    _case(
        "Transformer-stacked",
        snt.nets.Transformer,
        _STACKED,
        lambda: (_sequence(2, 4, 8),),
    ),
    _case(
        "Transformer-stacked-mask",
        snt.nets.Transformer,
        _STACKED,
        lambda: (_sequence(2, 4, 8), _padding_mask()),
        _masked,
    ),
    _case(
        "Transformer-stacked-cache",
        snt.nets.Transformer,
        {**_STACKED, "causal": True, "rotary": True},
        lambda: (_sequence(2, 2, 8), _stacked_cache()),
        _decode,
    ),
]

NOT_REGISTERED: dict[type, str] = {}
