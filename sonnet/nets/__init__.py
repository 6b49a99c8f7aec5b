"""Networks built from Sonnet modules: `snt.nets`."""

from sonnet._src.nets.causal_lm import CausalLM as CausalLM
from sonnet._src.nets.cifar10_convnet import Cifar10ConvNet as Cifar10ConvNet
from sonnet._src.nets.mlp import MLP as MLP
from sonnet._src.nets.resnet import ResNet as ResNet
from sonnet._src.nets.resnet import ResNet50 as ResNet50
from sonnet._src.nets.transformer import Transformer as Transformer
from sonnet._src.nets.transformer import TransformerBlock as TransformerBlock
from sonnet._src.nets.transformer_weights import (
    copy_transformer_weights as copy_transformer_weights,
)
from sonnet._src.nets.vqvae import VectorQuantizer as VectorQuantizer
from sonnet._src.nets.vqvae import VectorQuantizerEMA as VectorQuantizerEMA
from sonnet.nets import resnet as resnet

__all__ = [
    "CausalLM",
    "Cifar10ConvNet",
    "MLP",
    "ResNet",
    "ResNet50",
    "Transformer",
    "TransformerBlock",
    "copy_transformer_weights",
    "VectorQuantizer",
    "VectorQuantizerEMA",
    "resnet",
]
