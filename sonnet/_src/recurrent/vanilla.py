"""`snt.VanillaRNN`: the basic recurrent core `h' = activation(x W + h U + b)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src import (
    checks,
    errors,
    initializers,
    linear,
    once,
    precision,
    utils,
)
from sonnet._src.recurrent import base as rnn_base

Initializer = Callable[[Any, Any], Any]


def _check_broadcast_state(inputs: tf.Tensor, state: tf.Tensor, hidden: int) -> None:
    """A state for inputs of rank > 2: `[..., hidden]`, broadcasting against
    `[..., hidden]` shaped as the inputs."""
    outputs = inputs.shape[:-1].concatenate([hidden])
    try:
        if state.shape.rank is not None:
            if state.shape.rank < 1 or not state.shape[-1:].is_compatible_with(
                [hidden]
            ):
                raise ValueError("hidden size")
        tf.broadcast_static_shape(outputs, state.shape)
    except ValueError as e:
        raise errors.invalid_argument(
            "prev_state",
            f"must have shape [..., {hidden}] broadcasting against the outputs "
            f"{outputs}",
            state.shape,
        ) from e


class VanillaRNN(rnn_base.RNNCore):
    """Basic recurrent core: `h' = activation(inputs @ W_i + h @ W_h + b)`.

    The output and the next state are both `h'`. `W_i` and `W_h` are the `w`
    of two bias-free `snt.Linear` submodules, `input_to_hidden` and
    `hidden_to_hidden`; `b` belongs to the core. All are created on the first
    call.

    Args:
      hidden_size: Size of the hidden state (a positive integer: Python,
        NumPy or a scalar integer tensor).
      activation: Elementwise nonlinearity (default `tf.tanh`).
      w_i_init: Initializer of `W_i` `[input_size, hidden]`. Default
        None: `snt.Linear`'s truncated normal, `stddev = 1/sqrt(input_size)`.
      w_h_init: Initializer of `W_h` `[hidden, hidden]`. Default None:
        truncated normal with `stddev = 1/sqrt(hidden)`.
      b_init: Initializer of `b` `[hidden]`. Default zeros.
      dtype: Dtype of the state and of the expected inputs (default float32);
        creating the weights needs a floating point one. Under a
        `snt.precision` policy (which reaches the `snt.Linear` submodules
        too) the variables are created in the policy's variable dtype,
        floating inputs and states are cast to its compute dtype, which the
        step computes in and `initial_state` returns.
      name: Module name (default `vanilla_rnn`).

    Shapes:
      inputs `[B, input_size]`, state `[B, hidden]`, outputs `[B, hidden]`.

    >>> rnn = snt.VanillaRNN(4)
    >>> outputs, state = rnn(tf.ones([2, 3]), rnn.initial_state(2))
    >>> outputs.shape
    TensorShape([2, 4])
    >>> for v in rnn.variables:
    ...   print(v.name)
    vanilla_rnn/b:0
    vanilla_rnn/hidden_to_hidden/w:0
    vanilla_rnn/input_to_hidden/w:0
    """

    def __init__(
        self,
        hidden_size: int,
        activation: Callable[[tf.Tensor], tf.Tensor] = tf.tanh,
        w_i_init: Initializer | None = None,
        w_h_init: Initializer | None = None,
        b_init: Initializer | None = None,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(name)
        self._hidden_size = checks.size("hidden_size", hidden_size, allow_zero=True)
        if self._hidden_size == 0:
            # The original's default initializers divided by it.
            raise errors.invalid_argument_zero(
                "hidden_size", "must be a positive integer", hidden_size
            )
        if not callable(activation):
            raise errors.bad_type("activation", "must be callable", activation)
        checks.initializer("w_i_init", w_i_init)
        checks.initializer("w_h_init", w_h_init)
        b_init = rnn_base.initializer_or_default("b_init", b_init)
        self._activation = activation
        self._b_init = initializers.Zeros() if b_init is None else b_init
        self._dtype = checks.dtype("dtype", dtype)
        self._input_to_hidden = linear.Linear(
            self._hidden_size, with_bias=False, w_init=w_i_init, name="input_to_hidden"
        )
        self._hidden_to_hidden = linear.Linear(
            self._hidden_size, with_bias=False, w_init=w_h_init, name="hidden_to_hidden"
        )
        self._state_spec = rnn_base.state_spec([self._hidden_size], self._dtype)
        # Inputs of rank > 2 (as `snt.Linear` takes) meet a state that
        # broadcasts against them.
        unknown_rank = tf.TensorShape(None)  # type: ignore[arg-type]
        self._broadcast_state_spec = tf.TensorSpec(unknown_rank, self._dtype)
        self._input_size: int | None = None

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        # Under a `snt.precision` policy: its variable dtype.
        dtype = precision.variable_dtype(self, self._dtype)
        rnn_base.check_variable_dtype(dtype)
        input_size = rnn_base.check_input_size(inputs, None)
        self._b = tf.Variable(self._b_init([self._hidden_size], dtype), name="b")
        self._input_size = input_size

    @utils.no_autograph
    def __call__(
        self, inputs: tf.Tensor, prev_state: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """One step.

        Args:
          inputs: `[B, input_size]` tensor of the core's dtype (or of higher
            rank `[..., input_size]`, as `snt.Linear` takes, with a state that
            broadcasts against `[..., hidden]`).
          prev_state: `[B, hidden]` tensor.

        Returns:
          `(outputs, next_state)`, both the new `[B, hidden]` hidden state.

        Raises:
          TypeError: if `inputs` or `prev_state` has another dtype.
          ValueError: if `inputs` has rank < 2, changed its last dimension
            since the first call, or `prev_state` has the wrong shape. The
            errors for a wrong dtype, last dimension or state are also
            `tf.errors.InvalidArgumentError`s, as the original's op errors.
        """
        # Under a `snt.precision` policy: inputs, state and `b` in its compute
        # dtype (the `snt.Linear`s cast their own `w`); nothing without one.
        policy = self._precision
        dtype, cast = self._dtype, policy is not None
        if policy is not None:
            dtype = policy.compute_dtype
        inputs = rnn_base.check_inputs(inputs, dtype, 2, exact_rank=False, cast=cast)
        matrix = inputs.shape.rank == 2
        spec = self._state_spec if matrix else self._broadcast_state_spec
        if cast:
            spec = rnn_base.spec_in(spec, dtype)
        if matrix:
            batch = rnn_base.batch_dim(inputs)
            prev_state = rnn_base.check_state(prev_state, spec, batch, cast=cast)
        else:
            prev_state = rnn_base.check_state(prev_state, spec, None, cast=cast)
            _check_broadcast_state(inputs, prev_state, self._hidden_size)
        rnn_base.check_input_size(inputs, self._input_size)
        self._initialize(inputs)
        x_w = self._input_to_hidden(inputs)
        h_w = self._hidden_to_hidden(prev_state)
        b = self._b
        if policy is not None:
            # The submodules' outputs are in the policy's output dtype, if any.
            x_w, h_w, b = (precision.cast(t, dtype) for t in (x_w, h_w, b))
        state = self._activation(x_w + h_w + b)
        return rnn_base.cast_outputs(policy, state), state

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
        """`W_i`, the `[input_size, hidden]` input weights."""
        return self._input_to_hidden.w

    @property
    def hidden_to_hidden(self) -> tf.Variable:
        """`W_h`, the `[hidden, hidden]` recurrent weights."""
        return self._hidden_to_hidden.w
