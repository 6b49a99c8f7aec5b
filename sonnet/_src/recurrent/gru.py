"""`snt.GRU`: gated recurrent unit core."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src import checks, initializers, once, precision, utils
from sonnet._src.recurrent import base as rnn_base
from sonnet._src.recurrent import gru_sequence, sequence

Initializer = Callable[[Any, Any], Any]


def _step(
    inputs: tf.Tensor, prev_state: tf.Tensor, w_i: Any, w_h: Any, b: Any, two_h: int
) -> tf.Tensor:
    """The GRU update `h'` (gates `[z | r | a]`, `two_h` twice the hidden size)."""
    gates_x = tf.nn.bias_add(tf.matmul(inputs, w_i), b)
    zr = tf.sigmoid(gates_x[:, :two_h] + tf.matmul(prev_state, w_h[:, :two_h]))
    z, r = tf.split(zr, 2, axis=1)
    a = tf.tanh(gates_x[:, two_h:] + tf.matmul(r * prev_state, w_h[:, two_h:]))
    return (1 - z) * prev_state + z * a


class GRU(rnn_base.RNNCore):
    """Gated recurrent unit core (Cho et al., 2014).

    With gates laid out `[z | r | a]` in `w_i`, `w_h` and `b`:

        z, r = sigmoid(x @ w_i[:, :2h] + h @ w_h[:, :2h] + b[:2h])
        a = tanh(x @ w_i[:, 2h:] + (r * h) @ w_h[:, 2h:] + b[2h:])
        h' = (1 - z) * h + z * a

    and the step returns `(h', h')`. Variables are created on the first call.

    Args:
      hidden_size: Size of the hidden state (a non-negative integer: Python,
        NumPy or a scalar integer tensor).
      w_i_init: Initializer of `w_i` `[input_size, 3 * hidden]`. Default
        Glorot uniform (`VarianceScaling(1.0, "fan_avg", "uniform")`), as in
        the paper's reference setup.
      w_h_init: Initializer of `w_h` `[hidden, 3 * hidden]`. Default Glorot
        uniform.
      b_init: Initializer of `b` `[3 * hidden]`. Default zeros. For each
        initializer any false value (None, 0) selects the default.
      dtype: Dtype of the variables and of the expected inputs (default
        float32); creating the weights needs a floating point one. Under a
        `snt.precision` policy the variables are created in the policy's
        variable dtype, floating inputs and states are cast to its compute
        dtype, which the step (and the whole-sequence path of
        `snt.dynamic_unroll`) computes in and `initial_state` returns.
      name: Module name (default `gru`).

    Shapes:
      inputs `[B, input_size]`, state `[B, hidden]`, outputs `[B, hidden]`.

    >>> gru = snt.GRU(4)
    >>> outputs, state = gru(tf.ones([2, 3]), gru.initial_state(2))
    >>> outputs.shape
    TensorShape([2, 4])
    >>> [v.name for v in gru.variables]
    ['gru/w_h:0', 'gru/w_i:0', 'gru/b:0']
    """

    def __init__(
        self,
        hidden_size: int,
        w_i_init: Initializer | None = None,
        w_h_init: Initializer | None = None,
        b_init: Initializer | None = None,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(name)
        # Zero is allowed, as in the original (the state is then empty).
        self._hidden_size = checks.size("hidden_size", hidden_size, allow_zero=True)
        w_i_init, w_h_init, b_init = rnn_base.gate_initializers(
            w_i_init, w_h_init, b_init
        )
        glorot = initializers.VarianceScaling(mode="fan_avg", distribution="uniform")
        self._w_i_init = glorot if w_i_init is None else w_i_init
        self._w_h_init = glorot if w_h_init is None else w_h_init
        self._b_init = b_init
        self._dtype = checks.dtype("dtype", dtype)
        self._state_spec = rnn_base.state_spec([self._hidden_size], self._dtype)
        self._input_size: int | None = None

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        # Under a `snt.precision` policy: its variable dtype.
        dtype = precision.variable_dtype(self, self._dtype)
        rnn_base.check_variable_dtype(dtype)
        input_size = rnn_base.check_input_size(inputs, None)
        gates = 3 * self._hidden_size
        w_i = tf.Variable(self._w_i_init([input_size, gates], dtype), name="w_i")
        w_h = tf.Variable(self._w_h_init([self._hidden_size, gates], dtype), name="w_h")
        b = tf.Variable(self._b_init([gates], dtype), name="b")
        self._w_i, self._w_h, self.b = w_i, w_h, b
        self._input_size = input_size

    @utils.no_autograph
    def __call__(
        self, inputs: tf.Tensor, prev_state: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """One step.

        Args:
          inputs: `[B, input_size]` tensor of the core's dtype.
          prev_state: `[B, hidden]` tensor.

        Returns:
          `(outputs, next_state)`, both the new `[B, hidden]` hidden state.

        Raises:
          TypeError: if `inputs` or `prev_state` has another dtype.
          ValueError: if `inputs` is not rank 2 or changed its last dimension
            since the first call, or `prev_state` is not one `[B, hidden]`
            tensor. The errors for a wrong dtype, last dimension or state are
            also `tf.errors.InvalidArgumentError`s, as the original's op
            errors.
        """
        policy = self._precision
        inputs, prev_state = rnn_base.prepare_call(self, inputs, prev_state, policy)
        w_i, w_h, b = rnn_base.cast_variables(policy, self._w_i, self._w_h, self.b)
        next_state = _step(inputs, prev_state, w_i, w_h, b, 2 * self._hidden_size)
        return rnn_base.cast_outputs(policy, next_state), next_state

    @utils.no_autograph
    def _unroll_sequence(
        self,
        input_sequence: tf.Tensor,
        initial_state: Any,
        sequence_length: tf.Tensor | None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """The whole-sequence path of `dynamic_unroll` (`recurrent/sequence.py`):
        one input matmul for all steps, then the fused loop of `gru_sequence`,
        in the compute dtype of a `snt.precision` policy if there is one."""
        policy = self._precision
        input_sequence, initial_state = rnn_base.prepare_call(
            self, input_sequence, initial_state, policy, sequence=True
        )
        w_i, w_h, b = rnn_base.cast_variables(policy, self._w_i, self._w_h, self.b)
        xw = sequence.input_projection(input_sequence, w_i, b)
        outputs, state = gru_sequence.gru_sequence(
            xw, initial_state, w_h, sequence_length=sequence_length
        )
        return rnn_base.cast_outputs(policy, outputs), state

    @utils.no_autograph
    def initial_state(self, batch_size: Any) -> tf.Tensor:
        """Zeros of shape `[batch_size, hidden]`.

        Args:
          batch_size: An int or a scalar tensor (a float one is truncated).
        """
        dtype = rnn_base.state_dtype(self, self._dtype)
        return rnn_base.zero_state(batch_size, self._state_spec, dtype)

    @property
    def input_to_hidden(self) -> tf.Variable:
        """`w_i`, the `[input_size, 3 * hidden]` input weights."""
        return self._w_i

    @property
    def hidden_to_hidden(self) -> tf.Variable:
        """`w_h`, the `[hidden, 3 * hidden]` recurrent weights."""
        return self._w_h
