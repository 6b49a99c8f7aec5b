"""ResNet building blocks: `snt.nets.resnet`."""

from sonnet._src.nets.resnet import BlockGroup as BlockGroup
from sonnet._src.nets.resnet import BottleNeckBlockV1 as BottleNeckBlockV1
from sonnet._src.nets.resnet import BottleNeckBlockV2 as BottleNeckBlockV2

__all__ = ["BlockGroup", "BottleNeckBlockV1", "BottleNeckBlockV2"]
