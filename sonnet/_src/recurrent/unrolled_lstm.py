"""`snt.UnrolledLSTM`: an LSTM that processes a whole sequence in one call."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import checks, once, utils
from sonnet._src.recurrent import base as rnn_base
from sonnet._src.recurrent import lstm as lstm_lib
from sonnet._src.recurrent import lstm_sequence, sequence


class UnrolledLSTM(rnn_base.UnrolledRNN):
    """An LSTM over a whole time-major sequence, numerically equal to `snt.LSTM`.

    It has the variables of `snt.LSTM` without projection (same names, shapes
    and checkpoint paths), so checkpoints move freely between the two. The
    input projection of all time steps is one matmul; the recurrence runs in a
    `tf.while_loop` with a hand-written gradient, which also compiles with
    XLA (`jit_compile=True`).

    Args:
      hidden_size: Size of the cell and of the outputs (a non-negative
        integer: Python, NumPy or a scalar integer tensor).
      w_i_init: Initializer of `w_i` `[input_size, 4 * hidden]`. Default
        truncated normal with `stddev = 1/sqrt(input_size)`.
      w_h_init: Initializer of `w_h` `[hidden, 4 * hidden]`. Default
        truncated normal with `stddev = 1/sqrt(hidden)`.
      b_init: Initializer of `b` `[4 * hidden]` (gates `[i|f|g|o]`). Default
        zeros.
      forget_bias: Added to the forget-gate quarter of the initial bias
        (default 1.0, as `snt.LSTM`; a number, scalar tensor or `[hidden]`).
      dtype: Dtype of the variables and of the expected inputs (default
        float32); creating the weights needs a floating point one.
      name: Module name (default `unrolled_lstm`).

    Shapes:
      input_sequence `[T, B, input_size]`; state `LSTMState([B, hidden],
      [B, hidden])`; output_sequence `[T, B, hidden]`.

    >>> lstm = snt.UnrolledLSTM(4)
    >>> outputs, state = lstm(tf.ones([5, 2, 3]), lstm.initial_state(2))
    >>> outputs.shape, state.hidden.shape
    (TensorShape([5, 2, 4]), TensorShape([2, 4]))
    """

    def __init__(
        self,
        hidden_size: int,
        w_i_init: lstm_lib.Initializer | None = None,
        w_h_init: lstm_lib.Initializer | None = None,
        b_init: lstm_lib.Initializer | None = None,
        forget_bias: float = 1.0,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(name)
        # Zero is allowed, as in the original (the state is then empty).
        self._hidden_size = checks.size("hidden_size", hidden_size, allow_zero=True)
        self._w_i_init, self._w_h_init, self._b_init = rnn_base.gate_initializers(
            w_i_init, w_h_init, b_init
        )
        self._forget_bias = rnn_base.check_forget_bias(forget_bias, self._hidden_size)
        self._dtype = checks.dtype("dtype", dtype)
        spec = rnn_base.state_spec([self._hidden_size], self._dtype)
        self._state_spec = rnn_base.LSTMState(hidden=spec, cell=spec)
        self._input_size: int | None = None

    @once.once
    def _initialize(self, input_sequence: tf.Tensor) -> None:
        weights = lstm_lib.create_weights(
            self, input_sequence, self._hidden_size, self._dtype, "input_sequence"
        )
        self._w_i, self._w_h, self.b, self._input_size = weights

    @utils.no_autograph
    def __call__(
        self, input_sequence: tf.Tensor, initial_state: rnn_base.LSTMState
    ) -> tuple[tf.Tensor, rnn_base.LSTMState]:
        """Runs the LSTM over `input_sequence`.

        Args:
          input_sequence: `[T, B, input_size]` tensor of the core's dtype.
          initial_state: `LSTMState([B, hidden], [B, hidden])` (or a 2-tuple).

        Returns:
          `(output_sequence [T, B, hidden], final LSTMState)`.

        Raises:
          TypeError: if `input_sequence` or `initial_state` has another dtype.
          ValueError: if `input_sequence` is not rank 3, has no time steps or
            changed its last dimension since the first call, or
            `initial_state` has the wrong structure or shapes. All but the
            rank error are also `tf.errors.InvalidArgumentError`s, as the
            original's op errors.
        """
        input_sequence, initial_state = rnn_base.prepare_call(
            self, input_sequence, initial_state, sequence=True
        )
        xw = sequence.input_projection(input_sequence, self._w_i, self.b)
        return lstm_sequence.lstm_sequence(
            xw, rnn_base.LSTMState(*initial_state), self._w_h
        )

    @utils.no_autograph
    def initial_state(self, batch_size: Any) -> rnn_base.LSTMState:
        """Zeros: `LSTMState([B, hidden], [B, hidden])`.

        Args:
          batch_size: An int or a scalar tensor (a float one is truncated).
        """
        return rnn_base.zero_state(batch_size, self._state_spec, self._dtype)

    @property
    def input_to_hidden(self) -> tf.Variable:
        """`w_i`, the `[input_size, 4 * hidden]` input weights."""
        return self._w_i

    @property
    def hidden_to_hidden(self) -> tf.Variable:
        """`w_h`, the `[hidden, 4 * hidden]` recurrent weights."""
        return self._w_h
