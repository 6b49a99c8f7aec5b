"""Transposed convolutions (`snt.Conv1DTranspose/2DTranspose/3DTranspose`).

All the logic lives in the rank-generic `ConvNDTranspose`; the public classes
only fix `num_spatial_dims` and the default `data_format`. The op is the
gradient of a convolution with respect to its input (`Conv2DBackpropInput`,
`Conv3DBackpropInputV2`), as in `tf.nn.conv_transpose`, called with argument
lists computed on the first call. TensorFlow's CPU kernels implement neither
channels-first layouts nor dilation for these ops, so in the portable layout
(see `conv_base`) channels-first inputs are transposed to channels-last
around the op and a dilated kernel is expanded explicitly (zeros between the
taps), which gives the same result. The call path is `conv_base.ConvBase`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, conv_base, errors, initializers, once


def dilate_kernel(w: tf.Tensor, rates: Sequence[int]) -> tf.Tensor:
    """Inserts `rate - 1` zeros between the taps of each spatial kernel axis.

    A kernel of size `k` becomes one of size `(k - 1) * rate + 1`; convolving
    with it equals convolving with `w` at dilation `rate`.
    """
    for axis, rate in enumerate(rates):
        if rate == 1:
            continue
        shape: list[Any] = w.shape.as_list()  # Fully defined (a variable).
        k = shape[axis]
        # [..., k, ...] -> [..., k, rate, ...] (taps followed by zeros), then
        # merge the two axes and drop the zeros after the last tap.
        paddings = [[0, 0]] * (len(shape) + 1)
        paddings[axis + 1] = [0, rate - 1]
        w = tf.pad(tf.expand_dims(w, axis + 1), paddings)
        w = tf.reshape(w, [*shape[:axis], k * rate, *shape[axis + 1 :]])
        w = w[(slice(None),) * axis + (slice(0, (k - 1) * rate + 1),)]
    return w


def _check_output_shape(output_shape: Any, n: int) -> tuple[int, ...] | None:
    """`output_shape` as a tuple of `n` sizes (or None).

    As in the original, it may be any sequence, a 1-D array or a tensor of
    known value (the original passed it to the op). A string raises
    `errors.InvalidArgumentTypeError` (also a `ValueError`, the original's
    error for one).
    """
    if output_shape is None:
        return None
    if isinstance(output_shape, tf.TensorShape):
        if not output_shape.is_fully_defined():
            raise errors.bad_value(
                "output_shape", "must be fully defined", output_shape
            )
        output_shape = output_shape.as_list()
    if isinstance(output_shape, (np.ndarray, tf.Tensor, tf.Variable)):
        static = tf.get_static_value(output_shape)
        if static is not None and np.ndim(static) == 1:
            output_shape = list(static)
    if not isinstance(output_shape, (list, tuple)):
        raise errors.invalid_argument_type(
            "output_shape",
            f"must be None or a sequence of {n} positive integers (the output's "
            "spatial shape)",
            output_shape,
        )
    if len(output_shape) != n:
        raise errors.bad_value(
            "output_shape",
            f"must have length {n} (one size per spatial dimension)",
            output_shape,
        )
    return tuple(checks.size("output_shape", d) for d in output_shape)


def _input_size(output_size: int, stride: int, k: int, rate: int, padding: str) -> int:
    """The input size from which a convolution produces `output_size`."""
    if padding == "SAME":
        return -(-output_size // stride)
    return max(-(-(output_size - (k - 1) * rate) // stride), 0)


class ConvNDTranspose(conv_base.ConvBase):
    """A transposed convolution over 1, 2 or 3 spatial dimensions.

    The transpose (gradient with respect to the input) of a `ConvND` with the
    same kernel, stride, rate and padding: it maps `[batch, *spatial,
    input_channels]` (channels-last) or `[batch, input_channels, *spatial]`
    (channels-first) to `output_channels` channels and, with a stride,
    upsamples. Unless `output_shape` is given, each output spatial size is
    `input_size * stride` ("SAME") or
    `input_size * stride + (kernel - 1) * rate` ("VALID"), computed
    statically when the input shape is known. Batch and spatial sizes may be
    unknown; the channel count is fixed by the first call.

    Variables (created on the first call, with the input's dtype): `w` of
    shape `kernel_shape + [output_channels, input_channels]` (output before
    input, as the convolution it transposes) and, if `with_bias`, `b` of
    shape `[output_channels]`.

    Args:
      num_spatial_dims: 1, 2 or 3.
      output_channels: Number of output channels (positive int).
      kernel_shape: Kernel size, an int or one per spatial dimension.
      output_shape: Spatial output shape, a sequence of `num_spatial_dims`
        ints, or None (the default) to derive it from the input as above.
        It must be one the matching convolution maps back to the input's
        spatial shape.
      stride: Stride, an int or one per spatial dimension. Default 1.
      rate: Dilation rate, an int or one per spatial dimension. Default 1.
      padding: "SAME" or "VALID" (exactly; padding functions are not
        supported). Default "SAME".
      with_bias: Whether to add a bias. Default True.
      w_init: Weight initializer. Default `TruncatedNormal` with stddev
        `1 / sqrt(prod(kernel_shape) * input_channels)`.
      b_init: Bias initializer. Default `Zeros()`; must be None without bias.
      data_format: The layout, e.g. "NHWC" or "NCHW" for 2-D;
        "channels_last"/"channels_first" also work. None means channels last.
      name: Module name.

    >>> from sonnet._src.conv_transpose import ConvNDTranspose
    >>> up = ConvNDTranspose(2, output_channels=4, kernel_shape=3, stride=2)
    >>> up(tf.ones([1, 5, 5, 2])).shape
    TensorShape([1, 10, 10, 4])
    """

    def __init__(
        self,
        num_spatial_dims: int,
        output_channels: int,
        kernel_shape: int | Sequence[int],
        output_shape: Sequence[int] | None = None,
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str = "SAME",
        with_bias: bool = True,
        w_init: initializers.Initializer | None = None,
        b_init: initializers.Initializer | None = None,
        data_format: str | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        n = conv_base.check_num_spatial_dims(
            num_spatial_dims, "transposed convolutions"
        )
        self._num_spatial_dims = n
        self._rank = n + 2
        self._output_channels = checks.whole_size("output_channels", output_channels)
        self._kernel_shape = kernel_shape
        # oneDNN's CPU kernel failed on an empty filter with `InternalError`.
        self._kernel = conv_base.check_sizes(
            "kernel_shape", kernel_shape, n, invalid=errors.internal
        )
        # As in the original, `output_shape` is checked by the first call.
        self._output_shape_argument = output_shape
        self._output_shape = output_shape
        self._stride = stride
        self._strides = conv_base.check_sizes("stride", stride, n)
        self._rate = rate
        # The original passed `rate` to the op, which reads None as 1 and
        # takes 1-D arrays and tensors.
        self._rates = conv_base.check_sizes("rate", rate, n, default=1, arrays=True)
        if not (isinstance(padding, str) and padding in ("SAME", "VALID")):
            raise errors.bad_type(
                "padding",
                "must be 'SAME' or 'VALID' (upper case; transposed convolutions "
                "take no padding functions)",
                padding,
            )
        self._padding = padding
        self._channels_first = conv_base.check_data_format(data_format, n)
        self._channel_index = 1 if self._channels_first else -1
        self._data_format = data_format
        self._with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        self._w_init = w_init
        self._b_init = conv_base.bias_initializer(self._with_bias, b_init)

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        """Creates `w` (and `b`) and fixes the op arguments from the first input."""
        n = self._num_spatial_dims
        self._fixed_spatial = _check_output_shape(self._output_shape_argument, n)
        # (axis, spatial dim, size) the inputs must have for `output_shape`.
        if self._fixed_spatial is not None:
            first_axis = 2 if self._channels_first else 1
            self._size_checks = tuple(
                (first_axis + d, d, _input_size(size, s, k, r, self._padding))
                for d, (size, s, k, r) in enumerate(
                    zip(self._fixed_spatial, self._strides, self._kernel, self._rates)
                )
            )
        self.input_channels = conv_base.check_build_inputs(
            inputs, n + 2, self._channel_index
        )
        if self._fixed_spatial is not None:
            spatial = list(self._fixed_spatial)
            channels = [self._output_channels]
            self._output_shape = (
                channels + spatial if self._channels_first else spatial + channels
            )
            self._check_sizes(inputs)
        self._w_init = self._create_variables(
            inputs,
            self._w_init,
            (*self._kernel, self._output_channels, self.input_channels),
            int(np.prod(self._kernel)) * self.input_channels,
            self._b_init,
            self._output_channels,
        )
        # How each output size of the op follows from its input size,
        # `size * stride + extra`, and the output's fixed sizes (if any); a
        # 1-D op runs over a unit-height image.
        growth = tuple(
            (s, 0 if self._padding == "SAME" else (k - 1) * r)
            for s, k, r in zip(self._strides, self._kernel, self._rates)
        )
        fixed = self._fixed_spatial
        self._kernel_rates = self._rates
        if n == 1:
            growth = ((1, 0), *growth)
            fixed = None if fixed is None else (1, *fixed)
            self._kernel_rates = (1, *self._rates)
        self._growth = growth
        self._fixed_op_spatial = fixed
        op = (self._conv1d, self._conv2d, self._conv3d)[n - 1]
        self._bind(op, self._layout)

    def _layout(self, native: bool) -> conv_base.Layout:
        dilate_kernel = not native and any(r > 1 for r in self._rates)
        return conv_base.layout(
            self._channels_first,
            native,
            self._strides,
            (1,) * self._num_spatial_dims if dilate_kernel else self._rates,
            self._padding,
            self._with_bias,
            dilate_kernel=dilate_kernel,
        )

    # Each input must have exactly the size that maps to `output_shape`:
    # otherwise the op would fail (or, in oneDNN's CPU kernels, raise an
    # unrelated error).
    _exact_sizes = True

    def _size_message(self, d: int, size: int) -> str:
        return (
            f"`inputs` must have spatial size {size} in dimension {d} for "
            f"output_shape={list(self._fixed_spatial or ())}"
        )

    def _size_error(self, inputs: tf.Tensor, d: int, size: int) -> Exception:
        # The original's op failed with `InvalidArgumentError`.
        return errors.invalid_argument(
            "inputs",
            f"must have spatial size {size} in dimension {d} for "
            f"output_shape={list(self._fixed_spatial or ())} with stride "
            f"{self._strides[d]} and {self._padding} padding",
            tuple(inputs.shape.as_list()),
        )

    @base.no_name_scope
    def _operands(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> dict[str, Any]:
        """The op's tensors for its input `x` (for 1-D, already expanded)."""
        if self._num_spatial_dims == 1:
            w = tf.raw_ops.ExpandDims(input=w, axis=0)
        if layout.dilate_kernel:
            w = dilate_kernel(w, self._kernel_rates)
        return {
            "input_sizes": self._input_sizes(x, layout),
            "filter": w,
            "out_backprop": x,
        }

    @base.no_name_scope
    def _input_sizes(self, x: tf.Tensor, layout: conv_base.Layout) -> Any:
        """The output shape in the op's layout (the op's `input_sizes`)."""
        shape: list[Any] = x.shape.as_list()
        batch = shape[0]
        axes = layout.spatial_axes
        fixed = self._fixed_op_spatial
        if fixed is not None:
            spatial: list[Any] = list(fixed)
        else:
            spatial = [
                None if shape[a] is None else shape[a] * s + extra
                for a, (s, extra) in zip(axes, self._growth)
            ]
        dynamic = batch is None or None in spatial
        if dynamic:
            runtime = tf.shape(x)
            if batch is None:
                batch = runtime[0]
            spatial = [
                runtime[a] * s + extra if size is None else size
                for size, a, (s, extra) in zip(spatial, axes, self._growth)
            ]
        channels = self._output_channels
        if layout.first:
            sizes = [batch, channels, *spatial]
        else:
            sizes = [batch, *spatial, channels]
        return tf.stack(sizes) if dynamic else sizes

    @base.no_name_scope
    def _conv1d(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        # A 2-D transposed convolution over a unit-height image.
        axis = layout.expand_axis
        x = tf.raw_ops.ExpandDims(input=x, axis=axis)
        y = layout.run(tf.raw_ops.Conv2DBackpropInput, **self._operands(x, layout, w))
        return tf.raw_ops.Squeeze(input=y, axis=(axis,))

    @base.no_name_scope
    def _conv2d(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        return layout.run(
            tf.raw_ops.Conv2DBackpropInput, **self._operands(x, layout, w)
        )

    @base.no_name_scope
    def _conv3d(
        self, x: tf.Tensor, layout: conv_base.Layout, w: tf.Tensor
    ) -> tf.Tensor:
        return layout.run(
            tf.raw_ops.Conv3DBackpropInputV2, **self._operands(x, layout, w)
        )


class Conv1DTranspose(ConvNDTranspose):
    """A 1-D transposed convolution: `ConvNDTranspose` with `num_spatial_dims=1`.

    Inputs are `[batch, width, channels]` ("NWC", default) or
    `[batch, channels, width]` ("NCW"). See `ConvNDTranspose` for the
    arguments.

    >>> up = snt.Conv1DTranspose(output_channels=3, kernel_shape=3, stride=2)
    >>> up(tf.ones([2, 4, 5])).shape
    TensorShape([2, 8, 3])
    """

    def __init__(
        self,
        output_channels: int,
        kernel_shape: int | Sequence[int],
        output_shape: Sequence[int] | None = None,
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str = "SAME",
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
            output_shape=output_shape,
            stride=stride,
            rate=rate,
            padding=padding,
            with_bias=with_bias,
            w_init=w_init,
            b_init=b_init,
            data_format=data_format,
            name=name,
        )


class Conv2DTranspose(ConvNDTranspose):
    """A 2-D transposed convolution: `ConvNDTranspose` with `num_spatial_dims=2`.

    Inputs are `[batch, height, width, channels]` ("NHWC", default) or
    `[batch, channels, height, width]` ("NCHW"). See `ConvNDTranspose` for the
    arguments.

    >>> up = snt.Conv2DTranspose(output_channels=4, kernel_shape=3, stride=2,
    ...                          padding="VALID")
    >>> up(tf.ones([1, 5, 5, 2])).shape
    TensorShape([1, 12, 12, 4])
    >>> up.w.shape
    TensorShape([3, 3, 4, 2])
    """

    def __init__(
        self,
        output_channels: int,
        kernel_shape: int | Sequence[int],
        output_shape: Sequence[int] | None = None,
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str = "SAME",
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
            output_shape=output_shape,
            stride=stride,
            rate=rate,
            padding=padding,
            with_bias=with_bias,
            w_init=w_init,
            b_init=b_init,
            data_format=data_format,
            name=name,
        )


class Conv3DTranspose(ConvNDTranspose):
    """A 3-D transposed convolution: `ConvNDTranspose` with `num_spatial_dims=3`.

    Inputs are `[batch, depth, height, width, channels]` ("NDHWC", default)
    or `[batch, channels, depth, height, width]` ("NCDHW"). See
    `ConvNDTranspose` for the arguments.

    >>> up = snt.Conv3DTranspose(output_channels=2, kernel_shape=2, stride=2)
    >>> up(tf.ones([1, 3, 3, 3, 1])).shape
    TensorShape([1, 6, 6, 6, 2])
    """

    def __init__(
        self,
        output_channels: int,
        kernel_shape: int | Sequence[int],
        output_shape: Sequence[int] | None = None,
        stride: int | Sequence[int] = 1,
        rate: int | Sequence[int] = 1,
        padding: str = "SAME",
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
            output_shape=output_shape,
            stride=stride,
            rate=rate,
            padding=padding,
            with_bias=with_bias,
            w_init=w_init,
            b_init=b_init,
            data_format=data_format,
            name=name,
        )
