"""Controllers of 2.0.2's DNC building blocks (`sonnet.src.nets.dnc.control`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet import (
    GRU,
    LSTM,
    DeepRNN,
    Linear,
    RNNCore,
    deep_rnn_with_skip_connections,
)


def get_controller_ctor(controller_name: str) -> Any:
    """The controller class named `controller_name`: `"LSTM"`, `"GRU"` or a
    class of this module (e.g. `"FeedForward"`)."""
    known = {"LSTM": LSTM, "GRU": GRU}
    if controller_name in known:
        return known[controller_name]
    return getattr(sys.modules[__name__], controller_name)


class FeedForward(RNNCore):
    """A linear layer and an activation as an RNN core whose state never changes.

    Outputs `activation(linear(inputs))`; the state (`[batch, 1]` zeros from
    `initial_state`) is passed through.

    Args:
      hidden_size: Output size of the linear layer.
      activation: Applied to its output (default tanh; None for none).
      dtype: Dtype of the state (default float32).
      name: Module name (default `"feed_forward"`).
    """

    def __init__(
        self,
        hidden_size: int,
        activation: Callable[[tf.Tensor], tf.Tensor] | None = tf.nn.tanh,
        dtype: tf.DType = tf.float32,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.linear = Linear(hidden_size)
        self.dtype = dtype
        self._activation = activation

    def __call__(self, inputs: tf.Tensor, prev_state: Any) -> tuple[tf.Tensor, Any]:
        outputs = self.linear(inputs)
        if self._activation is not None:
            outputs = self._activation(outputs)
        return outputs, prev_state

    def initial_state(self, batch_size: Any) -> tf.Tensor:
        return tf.zeros([batch_size, 1], dtype=self.dtype)


def deep_core(
    control_name: str,
    control_config: dict[str, Any],
    num_layers: int = 1,
    skip_connections: bool = True,
    name: str | None = None,
) -> Any:
    """A deep RNN of `num_layers` controllers `control_name(**control_config)`,
    named `f"{control_name}_{i}"`, with skip connections by default
    (`snt.deep_rnn_with_skip_connections`, else `snt.DeepRNN`)."""
    ctor = get_controller_ctor(control_name)
    cores = [
        ctor(name=f"{control_name}_{i}", **control_config) for i in range(num_layers)
    ]
    if skip_connections:
        # None as 2.0.2 passed it (the module's default name follows).
        return deep_rnn_with_skip_connections(cores, name=name)  # pyright: ignore[reportArgumentType]
    return DeepRNN(cores, name=name)
