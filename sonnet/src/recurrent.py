"""2.0.2's `sonnet.src.recurrent` path (see `sonnet.src`)."""

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

__all__ = [
    "Conv1DLSTM",
    "Conv2DLSTM",
    "Conv3DLSTM",
    "DeepRNN",
    "GRU",
    "LSTM",
    "LSTMState",
    "RNNCore",
    "TrainableState",
    "UnrolledLSTM",
    "UnrolledRNN",
    "VanillaRNN",
    "deep_rnn_with_residual_connections",
    "deep_rnn_with_skip_connections",
    "dynamic_unroll",
    "lstm_with_recurrent_dropout",
    "static_unroll",
]
