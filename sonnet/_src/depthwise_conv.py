"""Depthwise 2-D convolution (`snt.DepthwiseConv2D`).

Each input channel is convolved with its own `channel_multiplier` filters.
The op is `DepthwiseConv2dNative` (what `tf.nn.depthwise_conv2d` runs), called
with argument lists computed on the first call; a dilated convolution goes
through `tf.nn.depthwise_conv2d`'s space-to-batch implementation, which works
on every device. On CPU, channels-first inputs are transposed to
channels-last around the op (TensorFlow's CPU kernel is channels-last only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, conv, initializers, once, utils


def _rank_error(inputs: tf.Tensor) -> Exception:
    """The error for inputs not of rank 4: the original's op failed with
    `InvalidArgumentError`, so this is one too (and an `IndexError` for a
    scalar)."""
    message = str(conv.rank_error(inputs, 4))
    if inputs.shape.rank == 0:
        # The original read the channels off the shape: `IndexError`.
        return checks.InvalidArgumentIndexError(None, None, message)
    return checks.InvalidArgumentError(None, None, message)


class DepthwiseConv2D(base.Module):
    """A depthwise 2-D convolution: a separate filter bank per input channel.

    Maps `[batch, height, width, channels]` ("NHWC") or `[batch, channels,
    height, width]` ("NCHW") to `channels * channel_multiplier` output
    channels; output channel `c * channel_multiplier + m` is input channel
    `c` convolved with filter `w[:, :, c, m]`. Spatial output sizes follow
    the padding as for `snt.Conv2D`.

    Variables (created on the first call, with the input's dtype): `w` of
    shape `kernel_shape + [input_channels, channel_multiplier]` and, if
    `with_bias`, `b` of shape `[input_channels * channel_multiplier]`.

    Args:
      kernel_shape: Kernel size, an int or `(height, width)`.
      channel_multiplier: Filters per input channel (positive int). Default 1.
      stride: Stride, an int or `(height, width)`. Default 1.
      rate: Dilation rate, an int or `(height, width)`. Default 1. Cannot be
        combined with a stride > 1.
      padding: "SAME" or "VALID" (any case). Default "SAME".
      with_bias: Whether to add a bias. Default True.
      w_init: Weight initializer. Default `TruncatedNormal` with stddev
        `1 / sqrt(prod(kernel_shape))`: each output sees one input channel.
      b_init: Bias initializer. Default `Zeros()`; must be None without bias.
      data_format: "NHWC" (default) or "NCHW"; "channels_last" and
        "channels_first" also work.
      name: Module name.

    >>> conv = snt.DepthwiseConv2D(kernel_shape=3, channel_multiplier=2)
    >>> conv(tf.ones([1, 8, 8, 3])).shape
    TensorShape([1, 8, 8, 6])
    >>> conv.w.shape
    TensorShape([3, 3, 3, 2])
    """

    def __init__(
        self,
        kernel_shape: int | Sequence[int],
        channel_multiplier: int = 1,
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str = "SAME",
        with_bias: bool = True,
        w_init: initializers.Initializer | None = None,
        b_init: initializers.Initializer | None = None,
        data_format: str = "NHWC",
        name: str | None = None,
    ):
        super().__init__(name=name)
        # No filters give an empty output, as in the original.
        self.channel_multiplier = checks.whole_size(
            "channel_multiplier", channel_multiplier, allow_zero=True
        )
        self.kernel_shape = kernel_shape
        self._kernel = conv.check_sizes("kernel_shape", kernel_shape, 2)
        strides = conv.check_sizes("stride", stride, 2)
        self.rate = conv.check_sizes("rate", rate, 2)
        conv.check_no_stride_with_rate(strides, self.rate)
        self._channels_first = conv.check_data_format(data_format, 2)
        self._channel_index = 1 if self._channels_first else -1
        self.data_format = data_format
        self.stride = (1, 1, *strides) if self._channels_first else (1, *strides, 1)
        self._strides = strides
        if isinstance(padding, bytes):
            padding = padding.decode(errors="replace")  # The op took bytes.
        # The original's op failed with `TypeError` for a non-string and
        # `InvalidArgumentError` for another string.
        if not isinstance(padding, str):
            raise utils.bad_type(
                "padding", "must be 'SAME' or 'VALID' (any case)", padding
            )
        if padding.upper() not in ("SAME", "VALID"):
            raise checks.invalid_argument(
                "padding", "must be 'SAME' or 'VALID' (any case)", padding
            )
        self.padding = padding
        self._conv_padding = padding.upper()
        self.with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        self.w_init = w_init
        self.b_init = conv.bias_initializer(self.with_bias, b_init)

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        """Creates `w` (and `b`) and fixes the op arguments from the first input."""
        if inputs.shape.rank != 4:
            raise _rank_error(inputs)
        self.input_channels = conv.check_build_inputs(inputs, 4, self._channel_index)
        dtype = inputs.dtype
        weight_shape = (*self._kernel, self.input_channels, self.channel_multiplier)
        if self.w_init is None:
            conv.check_default_init_dtype(inputs)
            fan_in = int(np.prod(self._kernel))
            self.w_init = initializers.TruncatedNormal(stddev=1.0 / np.sqrt(fan_in))
        self.w = tf.Variable(self.w_init(weight_shape, dtype), name="w")
        if self.with_bias:
            b_init = self.b_init
            self.b = tf.Variable(
                b_init((self.input_channels * self.channel_multiplier,), dtype),
                name="b",
            )
        self._transpose = self._channels_first and not conv.on_accelerator(self.w)
        op_first = self._channels_first and not self._transpose
        self._to_last = conv.to_channels_last(2)
        self._to_first = conv.to_channels_first(2)
        self._op_format = "NCHW" if op_first else "NHWC"
        s = self._strides
        self._op_strides = (1, 1, *s) if op_first else (1, *s, 1)
        self._dilated = any(r > 1 for r in self.rate)
        # TF's depthwise kernels (except oneDNN's) need equal strides: other
        # strides run at stride 1 on explicitly padded inputs and subsample.
        self._subsample = s[0] != s[1]
        self._spatial_axes = (2, 3) if op_first else (1, 2)
        self._minimums = (
            conv.spatial_minimums(
                self._kernel, self.rate, None, 2 if self._channels_first else 1
            )
            if self._conv_padding == "VALID"
            else ()
        )

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        """Applies the depthwise convolution.

        Args:
          inputs: A rank-4 tensor in `data_format` with a floating point dtype.

        Returns:
          The outputs, same layout and dtype, with
          `input_channels * channel_multiplier` channels.
        """
        if not isinstance(inputs, tf.Tensor):
            inputs = conv.to_inputs(inputs)
        self._initialize(inputs)
        # Checked before running the op: TF's CPU kernels abort the process
        # on some wrong-rank inputs instead of raising.
        shape = inputs.shape
        if shape.rank != 4:
            raise _rank_error(inputs)
        if self._minimums:
            inputs = conv.check_spatial_sizes(inputs, self._minimums)
        dims = shape.as_list()
        if 0 in dims and None not in dims:
            return self._empty_output(inputs, dims)
        try:
            x = inputs
            if self._transpose:
                x = tf.raw_ops.Transpose(x=x, perm=self._to_last)
            if self._subsample:
                y = self._subsampled(x)
            elif self._dilated:
                y = tf.nn.depthwise_conv2d(
                    x,
                    self.w,
                    strides=(1, 1, 1, 1),
                    padding=self._conv_padding,
                    data_format=self._op_format,
                    dilations=self.rate,
                )
            else:
                y = tf.raw_ops.DepthwiseConv2dNative(
                    input=x,
                    filter=self.w,
                    strides=self._op_strides,
                    padding=self._conv_padding,
                    data_format=self._op_format,
                    dilations=(1, 1, 1, 1),
                )
            if self.with_bias:
                y = tf.raw_ops.BiasAdd(
                    value=y, bias=self.b, data_format=self._op_format
                )
            if self._transpose:
                y = tf.raw_ops.Transpose(x=y, perm=self._to_first)
        except checks.OP_ERRORS as e:
            raise conv.call_error(
                inputs,
                e,
                rank=4,
                channel_index=self._channel_index,
                input_channels=self.input_channels,
                dtype=self.w.dtype,
            ) from e
        return y

    def _subsampled(self, x: tf.Tensor) -> tf.Tensor:
        """The strided convolution as a stride-1 one followed by subsampling."""
        if self._conv_padding == "SAME":
            static = x.shape.as_list()
            dynamic = None
            paddings: list[Any] = [[0, 0]] * 4
            for axis, k, s in zip(self._spatial_axes, self._kernel, self._strides):
                size = static[axis]
                if size is None:
                    if dynamic is None:
                        dynamic = tf.shape(x)
                    size = dynamic[axis]
                    total = tf.maximum(((size + s - 1) // s - 1) * s + k - size, 0)
                else:
                    total = max((-(-size // s) - 1) * s + k - size, 0)
                paddings[axis] = [total // 2, total - total // 2]
            x = tf.pad(x, paddings)
        y = tf.raw_ops.DepthwiseConv2dNative(
            input=x,
            filter=self.w,
            strides=(1, 1, 1, 1),
            padding="VALID",
            data_format=self._op_format,
            dilations=(1, 1, 1, 1),
        )
        window = [slice(None)] * 4
        for axis, s in zip(self._spatial_axes, self._strides):
            window[axis] = slice(None, None, s)
        return y[tuple(window)]

    def _empty_output(self, inputs: tf.Tensor, dims: list[Any]) -> tf.Tensor:
        if inputs.dtype != self.w.dtype or dims[self._channel_index] != (
            self.input_channels
        ):
            raise conv.call_error(
                inputs,
                None,
                rank=4,
                channel_index=self._channel_index,
                input_channels=self.input_channels,
                dtype=self.w.dtype,
            )
        shape = conv.output_shape(
            dims,
            self._channels_first,
            self._kernel,
            self._strides,
            self.rate,
            self._conv_padding,
            None,
            self.input_channels * self.channel_multiplier,
        )
        return conv.empty_output(
            shape, self.w, self.b if self.with_bias else None, self._channels_first
        )
