"""Depthwise 2-D convolution (`snt.DepthwiseConv2D`).

Each input channel is convolved with its own `channel_multiplier` filters.
The op is `DepthwiseConv2dNative` (what `tf.nn.depthwise_conv2d` runs), called
with argument lists computed on the first call; a dilated convolution goes
through `tf.nn.depthwise_conv2d`'s space-to-batch implementation, which works
on every device. The call path (layouts, checks, bias, errors) is
`conv_base.ConvBase`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, conv_base, errors, initializers, once


class DepthwiseConv2D(conv_base.ConvBase):
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
        self._kernel = conv_base.check_sizes("kernel_shape", kernel_shape, 2)
        strides = conv_base.check_sizes("stride", stride, 2)
        self.rate = conv_base.check_sizes("rate", rate, 2)
        conv_base.check_no_stride_with_rate(strides, self.rate)
        self._channels_first = conv_base.check_data_format(data_format, 2)
        self._channel_index = 1 if self._channels_first else -1
        self._rank = 4
        self.data_format = data_format
        self.stride = (1, 1, *strides) if self._channels_first else (1, *strides, 1)
        self._strides = strides
        if isinstance(padding, bytes):
            padding = padding.decode(errors="replace")  # The op took bytes.
        # The original's op failed with `TypeError` for a non-string and
        # `InvalidArgumentError` for another string.
        if not isinstance(padding, str):
            raise errors.bad_type(
                "padding", "must be 'SAME' or 'VALID' (any case)", padding
            )
        if padding.upper() not in ("SAME", "VALID"):
            raise errors.invalid_argument(
                "padding", "must be 'SAME' or 'VALID' (any case)", padding
            )
        self.padding = padding
        self._conv_padding = padding.upper()
        self.with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        self.w_init = w_init
        self.b_init = conv_base.bias_initializer(self.with_bias, b_init)

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        """Creates `w` (and `b`) and fixes the op arguments from the first input."""
        if inputs.shape.rank != 4:
            raise self._rank_error(inputs)
        self.input_channels = conv_base.check_build_inputs(
            inputs, 4, self._channel_index
        )
        channels = self.input_channels * self.channel_multiplier
        self.w_init = self._create_variables(
            inputs,
            self.w_init,
            (*self._kernel, self.input_channels, self.channel_multiplier),
            int(np.prod(self._kernel)),
            self.b_init,
            channels,
        )
        s = self._strides
        # TF's depthwise kernels (except oneDNN's) need equal strides: other
        # strides run at stride 1 on explicitly padded inputs and subsample.
        if s[0] != s[1]:
            op = self._subsampled
        elif any(r > 1 for r in self.rate):
            op = self._dilated
        else:
            op = self._depthwise
        rule = conv_base.OutputRule(
            self._kernel, s, self.rate, self._conv_padding, None, channels
        )
        self._bind(op, self._layout, rule)

    def _layout(self, native: bool) -> conv_base.Layout:
        return conv_base.layout(
            self._channels_first,
            native,
            self._strides,
            (1, 1),
            self._conv_padding,
            self.with_bias,
        )

    def _rank_error(self, inputs: tf.Tensor) -> Exception:
        """Inputs not of rank 4: the original's op failed with
        `InvalidArgumentError`, so this is one too (and an `IndexError` for a
        scalar, whose channels the original read off the shape)."""
        message = str(conv_base.rank_error(inputs, 4))
        if inputs.shape.rank == 0:
            return errors.InvalidArgumentIndexError(None, None, message)
        return errors.InvalidArgumentError(None, None, message)

    @base.no_name_scope
    def _depthwise(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        return layout.run(tf.raw_ops.DepthwiseConv2dNative, input=x, filter=w)

    @base.no_name_scope
    def _dilated(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        # Space-to-batch around a plain depthwise convolution (at stride 1:
        # dilation excludes a stride): works on every device.
        return tf.nn.depthwise_conv2d(
            x, w, (1, 1, 1, 1), layout.padding, layout.data_format, self.rate
        )

    @base.no_name_scope
    def _subsampled(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        """The strided convolution as a stride-1 one followed by subsampling."""
        if layout.padding == "SAME":
            static = x.shape.as_list()
            dynamic = None
            paddings: list[Any] = [[0, 0]] * 4
            for axis, k, s in zip(layout.spatial_axes, self._kernel, self._strides):
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
            filter=w,
            strides=(1, 1, 1, 1),
            padding="VALID",
            data_format=layout.data_format,
            dilations=(1, 1, 1, 1),
        )
        window = [slice(None)] * 4
        for axis, s in zip(layout.spatial_axes, self._strides):
            window[axis] = slice(None, None, s)
        return y[tuple(window)]
