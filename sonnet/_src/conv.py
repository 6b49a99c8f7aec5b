"""Convolutions over 1, 2 or 3 spatial dimensions (`snt.Conv1D/2D/3D`).

All the logic lives in the rank-generic `ConvND`; the public classes only fix
`num_spatial_dims` and the default `data_format`. The call path (checks,
layouts, bias, errors) is `conv_base.ConvBase`'s.

Kernels: the module calls the raw TensorFlow ops (`Conv2D`, `Conv3D`,
`BiasAdd`, ...) with argument lists computed once on the first call, which is
what `tf.nn.convolution` ends up running but without its per-call Python. A
1-D convolution runs as a 2-D one over a unit-height image (as
`tf.nn.conv1d` does); a dilated convolution goes through
`tf.nn.convolution`, whose space-to-batch implementation works on every
device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, conv_base, errors, initializers, once, pad

Padding = Callable[[int], Sequence[int]]

_PADDING_EXPECTED = (
    "must be 'SAME', 'VALID' (any case), a padding function such as "
    "snt.pad.causal, or a sequence of them (one per spatial dimension)"
)


class ConvND(conv_base.ConvBase):
    """A convolution over `num_spatial_dims` (1, 2 or 3) spatial dimensions.

    Maps inputs `[batch, *spatial, input_channels]` (channels-last) or
    `[batch, input_channels, *spatial]` (channels-first) to outputs with
    `output_channels` channels. With `padding="SAME"` each output spatial size
    is `ceil(input_size / stride)`, with "VALID" it is
    `ceil((input_size - (kernel - 1) * rate) / stride)`; batch and spatial
    sizes may be unknown and may change between calls, the channel count is
    fixed by the first call.

    Variables (created on the first call, with the input's dtype):
    `w` of shape `kernel_shape + [input_channels, output_channels]` and, if
    `with_bias`, `b` of shape `[output_channels]`.

    Args:
      num_spatial_dims: 1, 2 or 3.
      output_channels: Number of output channels (a positive int; 0 gives an
        empty output for 1-D and 2-D convolutions).
      kernel_shape: Kernel size, an int or one per spatial dimension. Sizes
        may be NumPy integers, scalar tensors or whole floats (`3.0`).
      stride: Stride, an int or one per spatial dimension (a sequence, 1-D
        array or tensor). Default 1; None also means 1.
      rate: Dilation rate, as `stride`. Default 1 (an ordinary convolution).
        Cannot be combined with a stride > 1.
      padding: "SAME" or "VALID" (any case), or a padding function from
        `snt.pad` (e.g. `snt.pad.causal`) or a sequence of one per spatial
        dimension: the input is then padded explicitly and convolved with
        "VALID". Default "SAME" (output size = input size at stride 1).
        None means "VALID" (no padding).
      with_bias: Whether to add a bias. Default True.
      w_init: Weight initializer. Default `TruncatedNormal` with stddev
        `1 / sqrt(fan_in)`, `fan_in = prod(kernel_shape) * input_channels`,
        which keeps the output variance close to the input's.
      b_init: Bias initializer. Default `Zeros()`; must be None without bias.
      data_format: The layout, e.g. "NHWC" (channels last) or "NCHW"
        (channels first) for 2-D; "channels_last"/"channels_first" also work.
        None means channels last.
      name: Module name.

    >>> from sonnet._src.conv import ConvND
    >>> conv = ConvND(2, output_channels=4, kernel_shape=3)
    >>> conv(tf.ones([1, 8, 8, 3])).shape
    TensorShape([1, 8, 8, 4])
    """

    def __init__(
        self,
        num_spatial_dims: int,
        output_channels: int,
        kernel_shape: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str | Padding | Sequence[Padding] = "SAME",
        with_bias: bool = True,
        w_init: initializers.Initializer | None = None,
        b_init: initializers.Initializer | None = None,
        data_format: str | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        n = conv_base.check_num_spatial_dims(num_spatial_dims, "convolutions")
        self._num_spatial_dims = n
        self._rank = n + 2
        # No output channels give an empty output, as in the original (whose
        # 3-D op failed on an empty filter).
        self.output_channels = checks.whole_size(
            "output_channels", output_channels, allow_zero=n != 3
        )
        self.kernel_shape = kernel_shape
        self.stride = stride
        self.rate = rate
        self._kernel = conv_base.check_sizes("kernel_shape", kernel_shape, n)
        # The original passed these to `tf.nn.convolution`, which takes None
        # (for 1) and 1-D arrays or tensors.
        self._strides = conv_base.check_sizes(
            "stride", stride, n, default=1, arrays=True
        )
        self._rates = conv_base.check_sizes("rate", rate, n, default=1, arrays=True)
        conv_base.check_no_stride_with_rate(self._strides, self._rates)
        self._channels_first = conv_base.check_data_format(data_format, n)
        self._channel_index = 1 if self._channels_first else -1
        self.data_format = data_format
        self.with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        self.w_init = w_init
        self.b_init = conv_base.bias_initializer(self.with_bias, b_init)

        if padding is None:
            padding = "VALID"  # No padding function: the original's meaning.
        if isinstance(padding, str):
            self.conv_padding = padding.upper()
            if self.conv_padding not in ("SAME", "VALID"):
                # The original's op failed with `InvalidArgumentError`.
                raise errors.invalid_argument("padding", _PADDING_EXPECTED, padding)
            self.padding_func = None
            self._padding = None
            self._spatial_pads = None
            self._op_padding = self.conv_padding
        else:
            self.conv_padding = "VALID"
            self.padding_func = padding
            self._padding = self._explicit_padding(padding)
            first_axis = 2 if self._channels_first else 1
            self._spatial_pads = self._padding[first_axis : first_axis + n]
            self._op_padding = "VALID"
            self._skip_pad_op()

    def _skip_pad_op(self) -> None:
        """Drops the explicit `Pad` op where the kernel's own padding is equal.

        No padding at all is a plain VALID convolution; with stride and rate 1,
        `snt.pad.same`'s `((k - 1) // 2, k // 2)` is exactly what TensorFlow's
        SAME adds. Either way the graph has one op fewer per call (and its
        gradient), and no copy of the input is made.
        """
        assert self._padding is not None and self._spatial_pads is not None
        if not any(any(pair) for pair in self._padding):
            self._padding = None
            return
        first_axis = 2 if self._channels_first else 1
        n = self._num_spatial_dims
        others = self._padding[:first_axis] + self._padding[first_axis + n :]
        same = tuple(((k - 1) // 2, k // 2) for k in self._kernel)
        if (
            self._spatial_pads == same
            and not any(any(pair) for pair in others)
            and all(s == 1 for s in self._strides)
            and all(r == 1 for r in self._rates)
        ):
            self._padding = None
            self._op_padding = "SAME"

    def _explicit_padding(self, padding: Any) -> tuple[tuple[int, int], ...]:
        """`tf.pad` paddings for padding function(s), in the input's layout."""
        if not (callable(padding) or isinstance(padding, (list, tuple))):
            raise errors.bad_type("padding", _PADDING_EXPECTED, padding)
        pairs = pad.create(
            cast(Any, padding),
            self._kernel,
            self._rates,
            self._num_spatial_dims,
            self._channel_index,
        )
        for pair in pairs:
            if (
                len(pair) != 2
                or any(
                    isinstance(p, bool) or not isinstance(p, (int, np.integer))
                    for p in pair
                )
                or min(pair) < 0
            ):
                raise errors.bad_value(
                    "padding",
                    "functions must return [before, after]: two non-negative "
                    f"integers (got {pair!r})",
                    padding,
                )
        return tuple((int(a), int(b)) for a, b in pairs)

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        """Creates `w` (and `b`) and fixes the op arguments from the first input."""
        n = self._num_spatial_dims
        self.input_channels = conv_base.check_build_inputs(
            inputs, n + 2, self._channel_index
        )
        weight_shape = (*self._kernel, self.input_channels, self.output_channels)
        self.w_init = self._create_variables(
            inputs,
            self.w_init,
            weight_shape,
            int(np.prod(weight_shape[:-1])),
            self.b_init,
            self.output_channels,
        )
        if any(r > 1 for r in self._rates):
            op = self._dilated  # tf.nn.convolution (space-to-batch).
        elif n == 2 and self._kernel == (1, 1) and self._strides == (1, 1):
            op = self._pointwise  # A matmul in graphs (see there).
        else:
            op = (self._conv1d, self._conv2d, self._conv3d)[n - 1]
        rule = conv_base.OutputRule(
            self._kernel,
            self._strides,
            self._rates,
            self.conv_padding,
            self._spatial_pads,
            self.output_channels,
        )
        self._bind(op, self._layout, rule)

    def _layout(self, native: bool) -> conv_base.Layout:
        paddings = self._padding
        if paddings is not None and self._channels_first and not native:
            # Padded after the transpose to channels-last.
            paddings = tuple(paddings[axis] for axis in self._to_last)
        return conv_base.layout(
            self._channels_first,
            native,
            self._strides,
            self._rates,
            self._op_padding,
            self.with_bias,
            raw=all(r == 1 for r in self._rates),
            paddings=paddings,
        )

    @base.no_name_scope
    def _conv1d(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        # [N, W, C] -> [N, 1, W, C] (or [N, C, W] -> [N, C, 1, W]).
        axis = layout.expand_axis
        x = tf.raw_ops.ExpandDims(input=x, axis=axis)
        w = tf.raw_ops.ExpandDims(input=w, axis=0)
        y = layout.run(tf.raw_ops.Conv2D, input=x, filter=w)
        return tf.raw_ops.Squeeze(input=y, axis=(axis,))

    @base.no_name_scope
    def _conv2d(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        return layout.run(tf.raw_ops.Conv2D, input=x, filter=w)

    @base.no_name_scope
    def _pointwise(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        # A 1x1 stride-1 convolution multiplies each pixel's channels by the
        # kernel: as one MatMul of `[N*H*W, C]` rows, forward and backward
        # run 15-35% faster than Conv2D on CPU (ResNet bottlenecks). Only in
        # graphs and channels-last: eagerly the two reshapes cost more than
        # they save on small inputs.
        if layout.first or not x.dtype.is_floating or tf.executing_eagerly():
            return layout.run(tf.raw_ops.Conv2D, input=x, filter=w)
        channels, outputs = self.input_channels, self.output_channels
        rows = tf.raw_ops.Reshape(tensor=x, shape=(-1, channels))
        kernel = tf.raw_ops.Reshape(tensor=w, shape=(channels, outputs))
        y = tf.raw_ops.MatMul(a=rows, b=kernel)
        shape = x.shape
        if shape.is_fully_defined():
            out_shape: Any = (*shape[:-1], outputs)
        else:
            out_shape = tf.raw_ops.ConcatV2(
                values=[tf.shape(x)[:-1], tf.constant([outputs])], axis=0
            )
        return tf.raw_ops.Reshape(tensor=y, shape=out_shape)

    @base.no_name_scope
    def _conv3d(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        return layout.run(tf.raw_ops.Conv3D, input=x, filter=w)

    @base.no_name_scope
    def _dilated(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        # Space-to-batch around a plain convolution: works on every device.
        return layout.run(tf.nn.convolution, input=x, filters=w)


class Conv1D(ConvND):
    """A 1-D convolution: `ConvND` with `num_spatial_dims=1`.

    Inputs are `[batch, width, channels]` ("NWC", default) or
    `[batch, channels, width]` ("NCW"). See `ConvND` for the arguments.

    >>> conv = snt.Conv1D(output_channels=4, kernel_shape=3, padding=snt.pad.causal)
    >>> conv(tf.ones([2, 10, 3])).shape
    TensorShape([2, 10, 4])
    """

    def __init__(
        self,
        output_channels: int,
        kernel_shape: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str | Padding | Sequence[Padding] = "SAME",
        with_bias: bool = True,
        w_init: initializers.Initializer | None = None,
        b_init: initializers.Initializer | None = None,
        data_format: str = "NWC",
        name: str | None = None,
    ):
        super().__init__(
            1,
            output_channels,
            kernel_shape,
            stride=stride,
            rate=rate,
            padding=padding,
            with_bias=with_bias,
            w_init=w_init,
            b_init=b_init,
            data_format=data_format,
            name=name,
        )


class Conv2D(ConvND):
    """A 2-D convolution: `ConvND` with `num_spatial_dims=2`.

    Inputs are `[batch, height, width, channels]` ("NHWC", default) or
    `[batch, channels, height, width]` ("NCHW"). See `ConvND` for the
    arguments.

    >>> conv = snt.Conv2D(output_channels=16, kernel_shape=3, stride=2)
    >>> conv(tf.ones([1, 28, 28, 1])).shape
    TensorShape([1, 14, 14, 16])
    >>> conv.w.shape
    TensorShape([3, 3, 1, 16])
    """

    def __init__(
        self,
        output_channels: int,
        kernel_shape: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str | Padding | Sequence[Padding] = "SAME",
        with_bias: bool = True,
        w_init: initializers.Initializer | None = None,
        b_init: initializers.Initializer | None = None,
        data_format: str = "NHWC",
        name: str | None = None,
    ):
        super().__init__(
            2,
            output_channels,
            kernel_shape,
            stride=stride,
            rate=rate,
            padding=padding,
            with_bias=with_bias,
            w_init=w_init,
            b_init=b_init,
            data_format=data_format,
            name=name,
        )


class Conv3D(ConvND):
    """A 3-D convolution: `ConvND` with `num_spatial_dims=3`.

    Inputs are `[batch, depth, height, width, channels]` ("NDHWC", default)
    or `[batch, channels, depth, height, width]` ("NCDHW"). See `ConvND` for
    the arguments.

    >>> conv = snt.Conv3D(output_channels=2, kernel_shape=3, padding="VALID")
    >>> conv(tf.ones([1, 5, 5, 5, 1])).shape
    TensorShape([1, 3, 3, 3, 2])
    """

    def __init__(
        self,
        output_channels: int,
        kernel_shape: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str | Padding | Sequence[Padding] = "SAME",
        with_bias: bool = True,
        w_init: initializers.Initializer | None = None,
        b_init: initializers.Initializer | None = None,
        data_format: str = "NDHWC",
        name: str | None = None,
    ):
        super().__init__(
            3,
            output_channels,
            kernel_shape,
            stride=stride,
            rate=rate,
            padding=padding,
            with_bias=with_bias,
            w_init=w_init,
            b_init=b_init,
            data_format=data_format,
            name=name,
        )
