"""Registry entries for the vision networks and vector quantizers in `snt.nets`."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance.registry import Case


def _images(shape: tuple[int, ...]) -> tuple[tf.Tensor]:
    n = 1
    for d in shape:
        n *= d
    return (tf.sin(tf.reshape(tf.range(n, dtype=tf.float32), shape)),)


def _train(module, x):
    return module(x, is_training=True)


def _eval(module, x):
    return module(x, is_training=False)


def _small_resnet(resnet_v2: bool):
    return lambda: snt.nets.ResNet(
        [1, 1, 1, 1], 3, channels_per_group_list=(4, 8, 8, 8), resnet_v2=resnet_v2
    )


def _block_factory(cls):
    return lambda: cls(channels=8, stride=2, use_projection=True, bn_config={})


CASES = [
    Case(
        id="Cifar10ConvNet",
        cls=snt.nets.Cifar10ConvNet,
        factory=lambda: snt.nets.Cifar10ConvNet(
            num_classes=3, output_channels=(2, 3), strides=(1, 2)
        ),
        inputs=lambda: _images((2, 6, 6, 3)),
        call=_train,
    ),
    Case(
        id="ResNet-v1",
        cls=snt.nets.ResNet,
        factory=_small_resnet(False),
        inputs=lambda: _images((2, 16, 16, 3)),
        call=_train,
    ),
    Case(
        id="ResNet-v2-eval",
        cls=snt.nets.ResNet,
        factory=_small_resnet(True),
        inputs=lambda: _images((2, 16, 16, 3)),
        call=_eval,
    ),
    Case(
        id="BottleNeckBlockV1",
        cls=snt.nets.resnet.BottleNeckBlockV1,
        factory=_block_factory(snt.nets.resnet.BottleNeckBlockV1),
        inputs=lambda: _images((2, 4, 4, 3)),
        call=_train,
    ),
    Case(
        id="BottleNeckBlockV2",
        cls=snt.nets.resnet.BottleNeckBlockV2,
        factory=_block_factory(snt.nets.resnet.BottleNeckBlockV2),
        inputs=lambda: _images((2, 4, 4, 3)),
        call=_train,
    ),
    Case(
        id="BlockGroup",
        cls=snt.nets.resnet.BlockGroup,
        factory=lambda: snt.nets.resnet.BlockGroup(
            channels=4, num_blocks=2, stride=1, bn_config={"decay_rate": 0.5}
        ),
        inputs=lambda: _images((2, 3, 3, 4)),
        call=_train,
    ),
    Case(
        id="VectorQuantizer",
        cls=snt.nets.VectorQuantizer,
        factory=lambda: snt.nets.VectorQuantizer(
            embedding_dim=4, num_embeddings=6, commitment_cost=0.25
        ),
        inputs=lambda: _images((2, 3, 4)),
        call=_train,
    ),
    Case(
        id="VectorQuantizerEMA-train",
        cls=snt.nets.VectorQuantizerEMA,
        factory=lambda: snt.nets.VectorQuantizerEMA(
            embedding_dim=5, num_embeddings=7, commitment_cost=0.5, decay=0.9
        ),
        inputs=lambda: _images((4, 5)),
        call=_train,
    ),
]

NOT_REGISTERED = {
    # ResNet50 is ResNet with fixed blocks; building it per suite costs ~25M
    # parameters. It is covered by tests/test_resnet.py.
    snt.nets.ResNet50: "ResNet with blocks_per_group_list=[3, 4, 6, 3]",
}
