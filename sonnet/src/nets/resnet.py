"""2.0.2's `sonnet.src.nets.resnet` path (see `sonnet.src`)."""

from sonnet._src.nets.resnet import (
    BlockGroup,
    BottleNeckBlockV1,
    BottleNeckBlockV2,
    ResNet,
    ResNet50,
)

__all__ = ["BlockGroup", "BottleNeckBlockV1", "BottleNeckBlockV2", "ResNet", "ResNet50"]
