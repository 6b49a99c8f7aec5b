"""2.0.2's `sonnet.src.nets.cifar10_convnet` path (see `sonnet.src`)."""

from sonnet._src.nets.cifar10_convnet import Cifar10ConvNet

__all__ = ["Cifar10ConvNet"]
