"""`snt.Conv1DLSTM/Conv2DLSTM/Conv3DLSTM`: LSTMs with convolutional gates."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import tensorflow as tf

from sonnet._src import checks, conv, conv_base, errors, initializers, once, utils
from sonnet._src.recurrent import base as rnn_base

Initializer = Callable[[Any, Any], Any]


def _check_input_shape(input_shape: Any, num_spatial_dims: int) -> tuple[int, ...]:
    """`input_shape` (any iterable of sizes, e.g. a tuple, `tf.TensorShape` or
    NumPy array) as a tuple of non-negative ints."""
    try:
        dims = list(input_shape)
    except TypeError as e:
        raise errors.bad_type(
            "input_shape", "must be a sequence of integers", input_shape
        ) from e
    if len(dims) != num_spatial_dims + 1:
        raise errors.bad_value(
            "input_shape",
            f"must have {num_spatial_dims + 1} entries (the input shape without "
            "the batch dimension)",
            input_shape,
        )
    # The original put these sizes into a `tf.zeros` shape (which truncates
    # a float tensor); they must be known here, to size the state.
    sizes = tuple(checks.tensor_size("input_shape", d) for d in dims)
    if not all(isinstance(d, int) for d in sizes):
        raise errors.bad_value(
            "input_shape", "must have sizes known before running", input_shape
        )
    return sizes  # type: ignore[return-value]


class _ConvNDLSTM(rnn_base.RNNCore):
    """An LSTM whose gates are convolutions (Shi et al., 2015), any rank.

    With gates laid out `[i | f | g | o]` along the channel axis:

        gates = conv(inputs, W_i) + conv(prev_state.hidden, W_h) + b
        cell = sigmoid(f) * prev_state.cell + sigmoid(i) * tanh(g)
        hidden = sigmoid(o) * tanh(cell)

    Both convolutions are `"SAME"`-padded and bias-free, so the hidden and
    cell states have the spatial shape of the inputs with `output_channels`
    channels. `W_i`/`W_h` belong to two convolution submodules,
    `input_to_hidden` and `hidden_to_hidden`; `b` is created on the first
    call. The gates are split along the channel axis of `data_format` (the
    original Sonnet always split the last axis, which is wrong for
    channels-first layouts).

    Args:
      num_spatial_dims: 1, 2 or 3.
      input_shape: Shape of the inputs without the batch dimension, e.g.
        `(H, W, C)` for 2-D channels-last; its spatial dimensions size the
        initial state and must match the inputs' (the channels are free, as
        in the original).
      output_channels: Channels of the hidden and cell states (a positive
        integer).
      kernel_shape: Kernel size of both convolutions, an int or one per
        spatial dimension.
      data_format: Channels-last (e.g. "NHWC", the default for each rank) or
        channels-first (e.g. "NCHW").
      w_i_init: Initializer of `W_i`. Default truncated normal with
        `stddev = 1/sqrt(prod(kernel_shape) * input_channels)`.
      w_h_init: Initializer of `W_h`. Default truncated normal with
        `stddev = 1/sqrt(prod(kernel_shape) * output_channels)`.
      b_init: Initializer of `b` `[4 * output_channels]`. Default zeros (also
        for any other false value, as in the original).
      forget_bias: Added to the forget-gate quarter of the initial bias
        (default 1.0; a number, scalar tensor or `[output_channels]`).
      dtype: Dtype of the variables and of the expected inputs (default
        float32); creating the weights needs a floating point one.
      name: Module name.
    """

    def __init__(
        self,
        num_spatial_dims: int,
        input_shape: Sequence[int],
        output_channels: int,
        kernel_shape: int | Sequence[int],
        data_format: str,
        w_i_init: Initializer | None = None,
        w_h_init: Initializer | None = None,
        b_init: Initializer | None = None,
        forget_bias: float = 1.0,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(name)
        n = conv_base.check_num_spatial_dims(num_spatial_dims, "convolutional LSTMs")
        self._num_spatial_dims = n
        self._input_shape = _check_input_shape(input_shape, n)
        output_channels = checks.size("output_channels", output_channels)
        self._output_channels = output_channels
        # The original read `data_format.startswith` (AttributeError for a
        # non-string) and its convolutions refused None (TypeError).
        if data_format is None:
            raise errors.bad_type(
                "data_format", "must be a string such as 'NHWC'", data_format
            )
        if not isinstance(data_format, str):
            raise errors.lacks_attribute(
                "data_format", "must be a string such as 'NHWC'", data_format
            )
        channels_first = conv_base.check_data_format(data_format, n)
        self._channel_index = 1 if channels_first else -1
        self._data_format = data_format
        checks.initializer("w_i_init", w_i_init)
        checks.initializer("w_h_init", w_h_init)
        b_init = rnn_base.initializer_or_default("b_init", b_init)
        self._b_init = initializers.Zeros() if b_init is None else b_init
        self._forget_bias = rnn_base.check_forget_bias(forget_bias, output_channels)
        self._dtype = checks.dtype("dtype", dtype)
        # The gate convolutions: "SAME"-padded and bias-free.
        gate_conv = functools.partial(
            conv.ConvND,
            n,
            output_channels=4 * self._output_channels,
            kernel_shape=kernel_shape,
            padding="SAME",
            with_bias=False,
            data_format=data_format,
        )
        self._input_to_hidden = gate_conv(w_init=w_i_init, name="input_to_hidden")
        self._hidden_to_hidden = gate_conv(w_init=w_h_init, name="hidden_to_hidden")
        state_shape = list(self._input_shape)
        # `input_shape` has no batch dimension: channels are first or last.
        state_shape[0 if channels_first else -1] = self._output_channels
        # Tuples: a list attribute would be tracked by the checkpoint.
        self._state_shape = tuple(state_shape)
        spec = rnn_base.state_spec(self._state_shape, self._dtype)
        self._state_spec = rnn_base.LSTMState(hidden=spec, cell=spec)
        # Only the spatial dimensions of `input_shape` constrain the inputs
        # (they size the state); the channels are those of the first call.
        spatial = self._input_shape[1:] if channels_first else self._input_shape[:-1]
        self._spatial_shape = tf.TensorShape(spatial)
        self._input_channels: int | None = None
        self._bias_format: Literal["NC...", "N...C"] = (
            "NC..." if channels_first else "N...C"
        )

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        rnn_base.check_variable_dtype(self._dtype)
        self._input_channels = inputs.shape[self._channel_index]
        bias = self._b_init([4 * self._output_channels], self._dtype)
        self.b = tf.Variable(
            rnn_base.add_forget_bias(bias, self._forget_bias), name="b"
        )

    @utils.no_autograph
    def __call__(
        self, inputs: tf.Tensor, prev_state: rnn_base.LSTMState
    ) -> tuple[tf.Tensor, rnn_base.LSTMState]:
        """One step.

        Args:
          inputs: `[B, *input_shape]` tensor of the core's dtype.
          prev_state: `LSTMState(hidden, cell)`, both `[B, *state_shape]`
            (`input_shape` with `output_channels` channels).

        Returns:
          `(outputs, next_state)`: outputs are the new hidden state.

        Raises:
          TypeError: if `inputs` or `prev_state` has another dtype.
          ValueError: if `inputs` has the wrong rank, spatial dimensions other
            than `input_shape`'s or channels other than on the first call, or
            `prev_state` has the wrong structure or shapes. All but the rank
            error are also `tf.errors.InvalidArgumentError`s, as the
            original's op errors.
        """
        inputs = rnn_base.check_inputs(
            inputs,
            self._dtype,
            self._num_spatial_dims + 2,
        )
        shape = inputs.shape
        spatial = shape[2:] if self._channel_index == 1 else shape[1:-1]
        if not spatial.is_compatible_with(self._spatial_shape):
            raise errors.invalid_argument(
                "inputs",
                f"must have the spatial shape {tuple(self._spatial_shape.as_list())} "
                "of `input_shape`",
                tuple(shape.as_list()),
            )
        channels = shape[self._channel_index]
        if (
            self._input_channels is not None
            and channels is not None
            and channels != self._input_channels
        ):
            raise errors.invalid_argument(
                "inputs",
                f"must have {self._input_channels} channels, as on the first call "
                "(which created the weights)",
                tuple(shape.as_list()),
            )
        hidden, cell = rnn_base.check_state(
            prev_state, self._state_spec, rnn_base.batch_dim(inputs)
        )
        self._initialize(inputs)
        gates = self._input_to_hidden(inputs) + self._hidden_to_hidden(hidden)
        gates = tf.nn.bias_add(gates, self.b, data_format=self._bias_format)
        next_hidden, next_cell = rnn_base.lstm_update(
            gates, cell, axis=self._channel_index
        )
        return next_hidden, rnn_base.LSTMState(hidden=next_hidden, cell=next_cell)

    @utils.no_autograph
    def initial_state(self, batch_size: Any) -> rnn_base.LSTMState:
        """Zeros: `LSTMState` of two `[B, *state_shape]` tensors.

        Args:
          batch_size: An int or a scalar tensor (a float one is truncated).
        """
        return rnn_base.zero_state(batch_size, self._state_spec, self._dtype)

    @property
    def input_to_hidden(self) -> tf.Variable:
        """`W_i`, the input convolution's kernel."""
        return self._input_to_hidden.w

    @property
    def hidden_to_hidden(self) -> tf.Variable:
        """`W_h`, the recurrent convolution's kernel."""
        return self._hidden_to_hidden.w


class Conv1DLSTM(_ConvNDLSTM):
    """1-D convolutional LSTM: inputs `[B, W, C]` ("NWC") or `[B, C, W]` ("NCW").

    The arguments (with `num_spatial_dims=1` fixed, default `data_format` "NWC")
    and the maths are documented on the rank-generic base class,
    `snt.Conv1DLSTM.__base__`.

    >>> lstm = snt.Conv1DLSTM(input_shape=(8, 2), output_channels=3, kernel_shape=3)
    >>> outputs, state = lstm(tf.ones([4, 8, 2]), lstm.initial_state(4))
    >>> outputs.shape
    TensorShape([4, 8, 3])
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        output_channels: int,
        kernel_shape: int | Sequence[int],
        data_format: str = "NWC",
        w_i_init: Initializer | None = None,
        w_h_init: Initializer | None = None,
        b_init: Initializer | None = None,
        forget_bias: float = 1.0,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(
            1,
            input_shape,
            output_channels,
            kernel_shape,
            data_format=data_format,
            w_i_init=w_i_init,
            w_h_init=w_h_init,
            b_init=b_init,
            forget_bias=forget_bias,
            dtype=dtype,
            name=name,
        )


class Conv2DLSTM(_ConvNDLSTM):
    """2-D convolutional LSTM: inputs `[B, H, W, C]` ("NHWC") or "NCHW".

    The arguments (with `num_spatial_dims=2` fixed, default `data_format` "NHWC")
    and the maths are documented on the rank-generic base class,
    `snt.Conv2DLSTM.__base__`.

    >>> lstm = snt.Conv2DLSTM(input_shape=(5, 5, 2), output_channels=3,
    ...                       kernel_shape=3)
    >>> outputs, state = lstm(tf.ones([4, 5, 5, 2]), lstm.initial_state(4))
    >>> outputs.shape, lstm.input_to_hidden.shape
    (TensorShape([4, 5, 5, 3]), TensorShape([3, 3, 2, 12]))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        output_channels: int,
        kernel_shape: int | Sequence[int],
        data_format: str = "NHWC",
        w_i_init: Initializer | None = None,
        w_h_init: Initializer | None = None,
        b_init: Initializer | None = None,
        forget_bias: float = 1.0,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(
            2,
            input_shape,
            output_channels,
            kernel_shape,
            data_format=data_format,
            w_i_init=w_i_init,
            w_h_init=w_h_init,
            b_init=b_init,
            forget_bias=forget_bias,
            dtype=dtype,
            name=name,
        )


class Conv3DLSTM(_ConvNDLSTM):
    """3-D convolutional LSTM: inputs `[B, D, H, W, C]` ("NDHWC") or "NCDHW".

    The arguments (with `num_spatial_dims=3` fixed, default `data_format` "NDHWC")
    and the maths are documented on the rank-generic base class,
    `snt.Conv3DLSTM.__base__`.

    >>> lstm = snt.Conv3DLSTM(input_shape=(3, 3, 3, 1), output_channels=2,
    ...                       kernel_shape=3)
    >>> outputs, state = lstm(tf.ones([2, 3, 3, 3, 1]), lstm.initial_state(2))
    >>> outputs.shape
    TensorShape([2, 3, 3, 3, 2])
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        output_channels: int,
        kernel_shape: int | Sequence[int],
        data_format: str = "NDHWC",
        w_i_init: Initializer | None = None,
        w_h_init: Initializer | None = None,
        b_init: Initializer | None = None,
        forget_bias: float = 1.0,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(
            3,
            input_shape,
            output_channels,
            kernel_shape,
            data_format=data_format,
            w_i_init=w_i_init,
            w_h_init=w_h_init,
            b_init=b_init,
            forget_bias=forget_bias,
            dtype=dtype,
            name=name,
        )
