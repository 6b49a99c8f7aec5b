"""Sonnet: composable neural-network modules for TensorFlow 2.

Use as `import sonnet as snt`. Everything public is re-exported here from the
private implementation package `sonnet._src`.
"""

# First, before anything runs a TensorFlow op: TensorFlow's pooled CPU
# allocator (see `sonnet/_src/tf_compat.py`; `TF_CPU_ALLOCATOR_USE_BFC=false`
# opts out).
from sonnet._src import tf_compat as _tf_compat

_tf_compat.prefer_pooled_allocator()

from sonnet import distribute as distribute
from sonnet import functional as functional
from sonnet import hf as hf
from sonnet import initializers as initializers
from sonnet import int8 as int8
from sonnet import lora as lora
from sonnet import mixed_precision as mixed_precision
from sonnet import nets as nets
from sonnet import optimizers as optimizers
from sonnet import pad as pad
from sonnet import precision as precision
from sonnet import regularizers as regularizers
from sonnet import spectral_norm as spectral_norm
from sonnet import surgery as surgery
from sonnet import weight_norm as weight_norm
from sonnet._src.attention import AttentionCache, MultiHeadAttention
from sonnet._src.averaging import AveragedWeights
from sonnet._src.axis_norm import InstanceNorm, LayerNorm
from sonnet._src.base import Module, Optimizer, allow_empty_variables, no_name_scope
from sonnet._src.batch_apply import BatchApply, merge_leading_dims, split_leading_dim
from sonnet._src.batch_norm import BaseBatchNorm, BatchNorm
from sonnet._src.bias import Bias
from sonnet._src.build import build
from sonnet._src.checkpoint_utils import restore_checkpoint
from sonnet._src.conv import Conv1D, Conv2D, Conv3D
from sonnet._src.conv_transpose import Conv1DTranspose, Conv2DTranspose, Conv3DTranspose
from sonnet._src.custom_getter import custom_variable_getter
from sonnet._src.deferred import Deferred
from sonnet._src.depthwise_conv import DepthwiseConv2D
from sonnet._src.drop_path import DropPath, drop_path
from sonnet._src.dropout import Dropout
from sonnet._src.embed import Embed
from sonnet._src.freezing import freeze, is_frozen, unfreeze
from sonnet._src.gradient_ops import leaky_clip_by_value, scale_gradient
from sonnet._src.group_norm import GroupNorm
from sonnet._src.keras_layer import KerasLayer
from sonnet._src.layer_stack import LayerStack
from sonnet._src.linear import Linear
from sonnet._src.metrics import Mean, Metric, Sum
from sonnet._src.moe import MixtureOfExperts
from sonnet._src.moving_averages import ExponentialMovingAverage
from sonnet._src.once import once
from sonnet._src.recurrent.base import LSTMState, RNNCore, UnrolledRNN
from sonnet._src.recurrent.conv_lstm import Conv1DLSTM, Conv2DLSTM, Conv3DLSTM
from sonnet._src.recurrent.deep import (
    DeepRNN,
    deep_rnn_with_residual_connections,
    deep_rnn_with_skip_connections,
)
from sonnet._src.recurrent.dropout_wrapper import lstm_with_recurrent_dropout
from sonnet._src.recurrent.gru import GRU
from sonnet._src.recurrent.lstm import LSTM
from sonnet._src.recurrent.trainable_state import TrainableState
from sonnet._src.recurrent.unroll import dynamic_unroll, static_unroll
from sonnet._src.recurrent.unrolled_lstm import UnrolledLSTM
from sonnet._src.recurrent.vanilla import VanillaRNN
from sonnet._src.remat import remat
from sonnet._src.reshape import Flatten, Reshape, flatten, reshape
from sonnet._src.rms_norm import RMSNorm
from sonnet._src.rotary import RotaryEmbedding, apply_rotary_embedding
from sonnet._src.sequential import Sequential
from sonnet._src.summary import summary
from sonnet._src.variable_table import format_variables, log_variables

__version__ = "2.1.0.dev0"

__all__ = [
    "AttentionCache",
    "AveragedWeights",
    "BaseBatchNorm",
    "BatchApply",
    "BatchNorm",
    "Bias",
    "Conv1D",
    "Conv1DLSTM",
    "Conv1DTranspose",
    "Conv2D",
    "Conv2DLSTM",
    "Conv2DTranspose",
    "Conv3D",
    "Conv3DLSTM",
    "Conv3DTranspose",
    "DeepRNN",
    "Deferred",
    "DepthwiseConv2D",
    "DropPath",
    "Dropout",
    "Embed",
    "ExponentialMovingAverage",
    "Flatten",
    "GRU",
    "GroupNorm",
    "InstanceNorm",
    "KerasLayer",
    "LSTM",
    "LSTMState",
    "LayerNorm",
    "LayerStack",
    "Linear",
    "Mean",
    "Metric",
    "MixtureOfExperts",
    "Module",
    "MultiHeadAttention",
    "Optimizer",
    "RMSNorm",
    "RNNCore",
    "Reshape",
    "RotaryEmbedding",
    "Sequential",
    "Sum",
    "TrainableState",
    "UnrolledLSTM",
    "UnrolledRNN",
    "VanillaRNN",
    "allow_empty_variables",
    "apply_rotary_embedding",
    "build",
    "custom_variable_getter",
    "deep_rnn_with_residual_connections",
    "deep_rnn_with_skip_connections",
    "distribute",
    "drop_path",
    "dynamic_unroll",
    "flatten",
    "freeze",
    "format_variables",
    "functional",
    "hf",
    "initializers",
    "int8",
    "is_frozen",
    "leaky_clip_by_value",
    "log_variables",
    "lora",
    "lstm_with_recurrent_dropout",
    "merge_leading_dims",
    "nets",
    "no_name_scope",
    "once",
    "optimizers",
    "pad",
    "precision",
    "regularizers",
    "remat",
    "reshape",
    "restore_checkpoint",
    "scale_gradient",
    "spectral_norm",
    "split_leading_dim",
    "static_unroll",
    "summary",
    "surgery",
    "unfreeze",
    "weight_norm",
]

# Keep the implementation package out of `snt`'s attributes (importing a
# submodule binds it on its parent package).
globals().pop("_src", None)
