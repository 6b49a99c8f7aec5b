"""`snt.LSTM`: long short-term memory core, with optional projection."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src import checks, errors, initializers, once, precision, utils
from sonnet._src.recurrent import base as rnn_base
from sonnet._src.recurrent import lstm_sequence, sequence

Initializer = Callable[[Any, Any], Any]


def create_weights(
    core: Any,
    inputs: tf.Tensor,
    recurrent_size: int,
    dtype: tf.DType,
    argument: str = "inputs",
) -> tuple[tf.Variable, tf.Variable, tf.Variable, int]:
    """Creates `w_i`, `w_h` and `b` of an LSTM core for its first `inputs`.

    For `snt.LSTM` and `snt.UnrolledLSTM`, in the core's name scope, after
    checking `dtype` and the input size (`inputs` is named `argument` in
    errors). Returns the variables and the input size. The resolved `w_i`/`w_h`
    initializers are stored on the core; the defaults are truncated normals
    with `stddev = 1 / sqrt(fan_in)`.
    """
    rnn_base.check_variable_dtype(dtype)
    input_size = rnn_base.check_input_size(inputs, None, argument)
    # Input and hidden sizes of 0 are allowed (the weights are then empty).
    w_i_init, w_h_init = core._w_i_init, core._w_h_init
    if w_i_init is None:
        stddev = 1.0 / math.sqrt(max(input_size, 1))
        w_i_init = initializers.TruncatedNormal(stddev=stddev)
    if w_h_init is None:
        w_h_init = initializers.TruncatedNormal(
            stddev=1.0 / math.sqrt(max(recurrent_size, 1))
        )
    gates = 4 * core._hidden_size
    w_i = tf.Variable(w_i_init([input_size, gates], dtype), name="w_i")
    w_h = tf.Variable(w_h_init([recurrent_size, gates], dtype), name="w_h")
    bias = rnn_base.add_forget_bias(core._b_init([gates], dtype), core._forget_bias)
    b = tf.Variable(bias, name="b")
    core._w_i_init, core._w_h_init = w_i_init, w_h_init
    return w_i, w_h, b, input_size


class LSTM(rnn_base.RNNCore):
    """Long short-term memory core (Hochreiter & Schmidhuber, 1997).

    With gates laid out `[i | f | g | o]` in `w_i`, `w_h` and `b`:

        gates = inputs @ w_i + prev_state.hidden @ w_h + b
        cell = sigmoid(f) * prev_state.cell + sigmoid(i) * tanh(g)
        hidden = sigmoid(o) * tanh(cell)       # then `@ projection` if used

    and the step returns `(hidden, LSTMState(hidden, cell))`. The weights are
    created on the first call. Under `snt.dynamic_unroll` an `LSTM` computes
    the input projection of all time steps in one matmul.

    Args:
      hidden_size: Size of the cell (a non-negative integer: Python, NumPy or
        a scalar integer tensor).
      projection_size: Optional size of a linear projection of the hidden
        output (Sak et al., 2014); the projected hidden is both the output and
        the recurrent input. Default None: no projection.
      projection_init: Initializer of `projection`; must be None without
        `projection_size`. Default truncated normal, `stddev=1/sqrt(hidden)`.
      w_i_init: Initializer of `w_i` `[input_size, 4 * hidden]`. Default
        truncated normal with `stddev = 1/sqrt(input_size)` (unit fan-in
        variance).
      w_h_init: Initializer of `w_h` `[projection or hidden, 4 * hidden]`.
        Default truncated normal with `stddev = 1/sqrt(projection or hidden)`.
      b_init: Initializer of `b` `[4 * hidden]`. Default zeros. For `w_i_init`,
        `w_h_init` and `b_init` any false value (None, 0) selects the default.
      forget_bias: Added to the forget-gate quarter of the initial bias
        (default 1.0, so the cell remembers by default early in training;
        Gers et al., 2000): a number, a scalar tensor, or one value per unit
        (shape `[hidden]`).
      dtype: Dtype of the variables and of the expected inputs (default
        float32); creating the weights needs a floating point one. Under a
        `snt.precision` policy the variables are created in the policy's
        variable dtype, floating inputs and states are cast to its compute
        dtype, which the step (and the whole-sequence path of
        `snt.dynamic_unroll`) computes in and `initial_state` returns; the
        cell state is in the compute dtype too.
      name: Module name (default `lstm`).

    Shapes:
      inputs `[B, input_size]`; state `LSTMState([B, projection or hidden],
      [B, hidden])`; outputs `[B, projection or hidden]`.

    >>> lstm = snt.LSTM(4)
    >>> outputs, state = lstm(tf.ones([2, 3]), lstm.initial_state(2))
    >>> outputs.shape, state.cell.shape
    (TensorShape([2, 4]), TensorShape([2, 4]))
    >>> [v.name for v in lstm.variables]
    ['lstm/w_h:0', 'lstm/w_i:0', 'lstm/b:0']
    """

    def __init__(
        self,
        hidden_size: int,
        projection_size: int | None = None,
        projection_init: Initializer | None = None,
        w_i_init: Initializer | None = None,
        w_h_init: Initializer | None = None,
        b_init: Initializer | None = None,
        forget_bias: float = 1.0,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(name)
        # Zero is allowed, as in the original (the state is then empty).
        self._hidden_size = checks.size("hidden_size", hidden_size, allow_zero=True)
        projection_size = checks.optional_size("projection_size", projection_size)
        if projection_init is not None and projection_size is None:
            raise errors.bad_value(
                "projection_init",
                "must be None when `projection_size` is None (there is no projection)",
                projection_init,
            )
        checks.initializer("projection_init", projection_init)
        w_i_init, w_h_init, b_init = rnn_base.gate_initializers(
            w_i_init, w_h_init, b_init
        )
        self._projection_size = projection_size
        self._eff_hidden_size = projection_size or self._hidden_size
        self._projection_init = projection_init
        self._w_i_init, self._w_h_init, self._b_init = w_i_init, w_h_init, b_init
        self._forget_bias = rnn_base.check_forget_bias(forget_bias, self._hidden_size)
        self._dtype = checks.dtype("dtype", dtype)
        self._state_spec = rnn_base.LSTMState(
            hidden=rnn_base.state_spec([self._eff_hidden_size], self._dtype),
            cell=rnn_base.state_spec([self._hidden_size], self._dtype),
        )
        self._input_size: int | None = None
        self.projection: tf.Variable | None = None

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        # Under a `snt.precision` policy: its variable dtype.
        dtype = precision.variable_dtype(self, self._dtype)
        w_i, w_h, b, input_size = create_weights(
            self, inputs, self._eff_hidden_size, dtype
        )
        projection = None
        if self._projection_size is not None:
            if self._projection_init is None:
                self._projection_init = initializers.TruncatedNormal(
                    stddev=1.0 / math.sqrt(max(self._hidden_size, 1))
                )
            projection = tf.Variable(
                self._projection_init(
                    [self._hidden_size, self._projection_size], dtype
                ),
                name="projection",
            )
        self._w_i, self._w_h, self.b = w_i, w_h, b
        self.projection = projection
        self._input_size = input_size

    @utils.no_autograph
    def __call__(
        self, inputs: tf.Tensor, prev_state: rnn_base.LSTMState
    ) -> tuple[tf.Tensor, rnn_base.LSTMState]:
        """One LSTM step.

        Args:
          inputs: `[B, input_size]` tensor of the core's dtype.
          prev_state: `LSTMState(hidden [B, projection or hidden],
            cell [B, hidden])` (or a 2-tuple).

        Returns:
          `(outputs, next_state)`: outputs `[B, projection or hidden]` and
          the next `LSTMState`.

        Raises:
          TypeError: if `inputs` or `prev_state` has another dtype.
          ValueError: if `inputs` is not rank 2 or changed its last dimension
            since the first call, or `prev_state` is not a pair
            `(hidden, cell)` of the shapes above. Except for the rank error
            these (and the dtype error) are also
            `tf.errors.InvalidArgumentError`s, as the original's op errors.
        """
        policy = self._precision
        inputs, (hidden, cell) = rnn_base.prepare_call(self, inputs, prev_state, policy)
        w_i, w_h, b, projection = rnn_base.cast_variables(
            policy, self._w_i, self._w_h, self.b, self.projection
        )
        gates = tf.matmul(inputs, w_i) + tf.matmul(hidden, w_h)
        next_hidden, next_cell = rnn_base.lstm_update(tf.nn.bias_add(gates, b), cell)
        if projection is not None:
            next_hidden = tf.matmul(next_hidden, projection)
        state = rnn_base.LSTMState(hidden=next_hidden, cell=next_cell)
        return rnn_base.cast_outputs(policy, next_hidden), state

    @utils.no_autograph
    def initial_state(self, batch_size: Any) -> rnn_base.LSTMState:
        """Zeros: `LSTMState([B, projection or hidden], [B, hidden])`.

        Args:
          batch_size: An int or a scalar tensor, e.g. `tf.shape(x)[0]` (a
            float one is truncated).
        """
        dtype = rnn_base.state_dtype(self, self._dtype)
        return rnn_base.zero_state(batch_size, self._state_spec, dtype)

    @property
    def input_to_hidden(self) -> tf.Variable:
        """`w_i`, the `[input_size, 4 * hidden]` input weights."""
        return self._w_i

    @property
    def hidden_to_hidden(self) -> tf.Variable:
        """`w_h`, the `[projection or hidden, 4 * hidden]` recurrent weights."""
        return self._w_h

    @utils.no_autograph
    def _unroll_sequence(
        self,
        input_sequence: tf.Tensor,
        initial_state: rnn_base.LSTMState,
        sequence_length: tf.Tensor | None,
    ) -> tuple[tf.Tensor, rnn_base.LSTMState]:
        """The whole-sequence path of `dynamic_unroll` (`recurrent/sequence.py`):
        one input matmul for all steps, then the fused loop of `lstm_sequence`
        (which applies the projection, if any), in the compute dtype of a
        `snt.precision` policy if there is one."""
        policy = self._precision
        input_sequence, initial_state = rnn_base.prepare_call(
            self, input_sequence, initial_state, policy, sequence=True
        )
        w_i, w_h, b, projection = rnn_base.cast_variables(
            policy, self._w_i, self._w_h, self.b, self.projection
        )
        xw = sequence.input_projection(input_sequence, w_i, b)
        outputs, state = lstm_sequence.lstm_sequence(
            xw,
            rnn_base.LSTMState(*initial_state),
            w_h,
            projection=projection,
            sequence_length=sequence_length,
        )
        return rnn_base.cast_outputs(policy, outputs), state
