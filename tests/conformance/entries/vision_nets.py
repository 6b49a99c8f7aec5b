"""Registry entries for the vision networks and vector quantizers in `snt.nets`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance import case
from tests.conformance.case import Case


def _images(shape: tuple[int, ...]) -> tuple[tf.Tensor]:
    n = 1
    for d in shape:
        n *= d
    return (tf.sin(tf.reshape(tf.range(n, dtype=tf.float32), shape)),)


def _train(module: Any, x: tf.Tensor) -> Any:
    return module(x, is_training=True)


def _eval(module: Any, x: tf.Tensor) -> Any:
    return module(x, is_training=False)


def _case(
    id: str,
    cls: type,
    kwargs: dict[str, Any],
    inputs: Callable[[], tuple[Any, ...]],
    call: Callable[..., Any] | None = _train,
) -> Case:
    return case.from_kwargs(id, cls, kwargs, inputs, call)


_SMALL_RESNET = {
    "blocks_per_group_list": [1, 1, 1, 1],
    "num_classes": 3,
    "channels_per_group_list": (4, 8, 8, 8),
}
_BLOCK = {"channels": 8, "stride": 2, "use_projection": True, "bn_config": {}}

CASES = [
    _case(
        "Cifar10ConvNet",
        snt.nets.Cifar10ConvNet,
        {"num_classes": 3, "output_channels": (2, 3), "strides": (1, 2)},
        lambda: _images((2, 6, 6, 3)),
    ),
    _case("ResNet-v1", snt.nets.ResNet, _SMALL_RESNET, lambda: _images((2, 16, 16, 3))),
    _case(
        "ResNet-v2-eval",
        snt.nets.ResNet,
        {**_SMALL_RESNET, "resnet_v2": True},
        lambda: _images((2, 16, 16, 3)),
        _eval,
    ),
    _case(
        "BottleNeckBlockV1",
        snt.nets.resnet.BottleNeckBlockV1,
        _BLOCK,
        lambda: _images((2, 4, 4, 3)),
    ),
    _case(
        "BottleNeckBlockV2",
        snt.nets.resnet.BottleNeckBlockV2,
        _BLOCK,
        lambda: _images((2, 4, 4, 3)),
    ),
    _case(
        "BlockGroup",
        snt.nets.resnet.BlockGroup,
        {"channels": 4, "num_blocks": 2, "stride": 1, "bn_config": {"decay_rate": 0.5}},
        lambda: _images((2, 3, 3, 4)),
    ),
    _case(
        "VectorQuantizer",
        snt.nets.VectorQuantizer,
        {"embedding_dim": 4, "num_embeddings": 6, "commitment_cost": 0.25},
        lambda: _images((2, 3, 4)),
    ),
    _case(
        "VectorQuantizerEMA-train",
        snt.nets.VectorQuantizerEMA,
        {"embedding_dim": 5, "num_embeddings": 7, "commitment_cost": 0.5, "decay": 0.9},
        lambda: _images((4, 5)),
    ),
]

# The vector quantizers take their dtype as a constructor argument. An
# untrained ResNet evaluated with its zero moving variances multiplies
# activations by ~300 per batch norm: beyond float16's range (not bfloat16's).
_PRECISIONS = {
    "VectorQuantizer": (),
    "VectorQuantizerEMA-train": (),
    "ResNet-v2-eval": ("bfloat16",),
}
CASES = [
    dataclasses.replace(c, precisions=_PRECISIONS[c.id]) if c.id in _PRECISIONS else c
    for c in CASES
]

NOT_REGISTERED = {
    # Building ResNet-50 (~25M parameters) in every suite would dominate the
    # conformance run; it is ResNet with fixed blocks and tests/test_resnet.py
    # covers its construction.
    snt.nets.ResNet50: "ResNet with blocks_per_group_list=[3, 4, 6, 3]",
}
