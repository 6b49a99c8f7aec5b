"""Registry entries for fine-tuning and compact inference: `snt.lora`, `snt.int8`.

An adapted or quantized module must be built before it is changed, so those
factories build it on a fixed example, then add adapters (with a non-zero
`b`, so that the adapters' term shows in the outputs) or convert to int8.
"""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance import case

_sequence = case.sequence


def _with_adapters(module: snt.Module, *inputs: tf.Tensor, **kwargs) -> snt.Module:
    module(*inputs)
    for i, adapter in enumerate(snt.lora.add(module, rank=2, **kwargs).values()):
        adapter.b.assign(_sequence(*adapter.b.shape, seed=i) * 0.1)
    return module


def _linear_lora() -> snt.Module:
    return _with_adapters(snt.Linear(3), _sequence(2, 4))


def _mlp_lora() -> snt.Module:
    return _with_adapters(snt.nets.MLP([5, 3]), _sequence(2, 4))


def _attention_lora() -> snt.Module:
    return _with_adapters(snt.MultiHeadAttention(2, 4), _sequence(2, 3, 6))


def _transformer_lora() -> snt.Module:
    model = snt.nets.Transformer(num_layers=1, model_size=8, num_heads=2)
    return _with_adapters(model, _sequence(2, 4, 8), pattern="attention")


def _stacked_transformer_lora() -> snt.Module:
    # Stacked adapters (`[num_layers, ...]`) on every Linear of the blocks.
    model = snt.nets.Transformer(num_layers=2, model_size=8, num_heads=2, stacked=True)
    return _with_adapters(model, _sequence(2, 4, 8))


def _quantized(module: snt.Module, *inputs: tf.Tensor) -> snt.Module:
    module(*inputs)
    snt.int8.quantize(module)
    return module


def _mlp_int8() -> snt.Module:
    return _quantized(snt.nets.MLP([5, 3]), _sequence(2, 4))


def _embed_int8() -> snt.Module:
    return _quantized(snt.Embed(6, 4), tf.constant([[0, 5]]))


def _transformer_int8() -> snt.Module:
    model = snt.nets.Transformer(num_layers=1, model_size=8, num_heads=2)
    return _quantized(model, _sequence(2, 4, 8))


def _stacked_transformer_int8() -> snt.Module:
    # Per-layer, per-output-channel scales (`w_scale: [num_layers, out]`).
    model = snt.nets.Transformer(num_layers=2, model_size=8, num_heads=2, stacked=True)
    return _quantized(model, _sequence(2, 4, 8))


# The low-precision suite builds modules on float16/bfloat16 inputs; these
# factories build in float32 (`snt.precision` policies are tested in
# tests/test_lora.py and tests/test_int8.py).
_BUILT_IN_FLOAT32: tuple[str, ...] = ()

CASES = [
    case.from_kwargs(
        "LoRA",
        snt.lora.LoRA,
        {"input_size": 4, "output_size": 3, "rank": 2, "alpha": 4.0},
        lambda: (_sequence(2, 4),),
    ),
    case.Case(
        "Linear-lora",
        snt.Linear,
        _linear_lora,
        lambda: (_sequence(2, 4),),
        precisions=_BUILT_IN_FLOAT32,
    ),
    case.Case(
        "MLP-lora",
        snt.nets.MLP,
        _mlp_lora,
        lambda: (_sequence(2, 4),),
        precisions=_BUILT_IN_FLOAT32,
    ),
    case.Case(
        "MultiHeadAttention-lora",
        snt.MultiHeadAttention,
        _attention_lora,
        lambda: (_sequence(2, 3, 6),),
        precisions=_BUILT_IN_FLOAT32,
    ),
    case.Case(
        "Transformer-lora",
        snt.nets.Transformer,
        _transformer_lora,
        lambda: (_sequence(2, 4, 8),),
        precisions=_BUILT_IN_FLOAT32,
    ),
    case.Case(
        "Transformer-stacked-lora",
        snt.nets.Transformer,
        _stacked_transformer_lora,
        lambda: (_sequence(2, 4, 8),),
        precisions=_BUILT_IN_FLOAT32,
    ),
    # int8 weights are not trainable: the training-step suite skips them.
    case.Case(
        "MLP-int8",
        snt.nets.MLP,
        _mlp_int8,
        lambda: (_sequence(2, 4),),
        trainable=False,
        precisions=_BUILT_IN_FLOAT32,
    ),
    case.Case(
        "Embed-int8",
        snt.Embed,
        _embed_int8,
        lambda: (tf.constant([[1, 2], [5, 0]]),),
        trainable=False,
        precisions=(),
    ),
    case.Case(
        "Transformer-int8",
        snt.nets.Transformer,
        _transformer_int8,
        lambda: (_sequence(2, 4, 8),),
        trainable=False,
        precisions=_BUILT_IN_FLOAT32,
    ),
    case.Case(
        "Transformer-stacked-int8",
        snt.nets.Transformer,
        _stacked_transformer_int8,
        lambda: (_sequence(2, 4, 8),),
        trainable=False,
        precisions=_BUILT_IN_FLOAT32,
    ),
]

NOT_REGISTERED: dict[type, str] = {}
