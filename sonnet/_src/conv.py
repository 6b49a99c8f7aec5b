"""Convolutions over 1, 2 or 3 spatial dimensions (`snt.Conv1D/2D/3D`).

All the logic lives in the rank-generic `ConvND`; the public classes only fix
`num_spatial_dims` and the default `data_format`. The helpers at the top are
shared with `conv_transpose.py` and `depthwise_conv.py`.

Kernels: the module calls the raw TensorFlow ops (`Conv2D`, `Conv3D`,
`BiasAdd`, ...) with argument lists computed once on the first call, which is
what `tf.nn.convolution` ends up running but without its per-call Python. A
1-D convolution runs as a 2-D one over a unit-height image (as
`tf.nn.conv1d` does); a dilated convolution goes through
`tf.nn.convolution`, whose space-to-batch implementation works on every
device. TensorFlow's CPU kernels only implement channels-last layouts, so
channels-first modules placed on a CPU transpose to channels-last around the
op (decided once, when the variables are created); on GPU/TPU they run
natively.

Input checks: most bad inputs make the op fail, and the error is then
explained in our words (the zero-cost `try`/`except` around the ops). A few
are checked before running the op because TensorFlow's oneDNN CPU kernels do
not fail cleanly: a wrong rank aborts the process, and an input whose output
would be empty (an empty batch, or a "VALID" input smaller than the kernel)
comes back as a tensor of the wrong shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, initializers, once, pad, utils

# Channels-last and channels-first layouts for each number of spatial dims.
FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}

Padding = Callable[[int], Sequence[int]]

_PADDING_EXPECTED = (
    "must be 'SAME', 'VALID' (any case), a padding function such as "
    "snt.pad.causal, or a sequence of them (one per spatial dimension)"
)


def check_num_spatial_dims(num_spatial_dims: Any, kind: str) -> int:
    """Validates `num_spatial_dims` (1, 2 or 3) for a `kind` of convolution."""
    if isinstance(num_spatial_dims, bool) or not isinstance(
        num_spatial_dims, (int, np.integer)
    ):
        raise utils.bad_type("num_spatial_dims", "must be an integer", num_spatial_dims)
    n = int(num_spatial_dims)
    if n not in FORMATS:
        raise utils.bad_value(
            "num_spatial_dims",
            f"must be 1, 2 or 3 ({kind} exist for 1-D, 2-D and 3-D inputs)",
            num_spatial_dims,
        )
    return n


def check_data_format(data_format: Any, num_spatial_dims: int) -> bool:
    """Validates `data_format` for `num_spatial_dims`; True if channels-first.

    Accepts the TensorFlow layout names for that rank (e.g. "NHWC"/"NCHW"),
    "channels_last"/"channels_first", and None (channels-last).
    """
    last, first = FORMATS[num_spatial_dims]
    if data_format is None:
        return False
    expected = f"must be {last!r} (channels last) or {first!r} (channels first)"
    if not isinstance(data_format, str):
        raise utils.bad_type("data_format", expected, data_format)
    if data_format in (last, "channels_last"):
        return False
    if data_format in (first, "channels_first"):
        return True
    raise utils.bad_value(
        "data_format",
        f"{expected} for {num_spatial_dims} spatial dimension(s)",
        data_format,
    )


def check_sizes(
    argument: str,
    value: Any,
    num_spatial_dims: int,
    *,
    default: int | None = None,
    arrays: bool = False,
    allow_zero: bool = False,
    invalid: Callable[[str, str, Any], Exception] | None = None,
) -> tuple[int, ...]:
    """An int or a sequence of 1 or `num_spatial_dims` sizes, as a tuple.

    Each size may be spelled as `checks.whole_size` takes (NumPy integers,
    scalar tensors, whole floats). `default`: the size None stands for (the
    original passed None on to TensorFlow, which read it so); without one
    None is refused. `arrays`: also take a 1-D array, tensor or
    `tf.TensorShape` (where the original passed the value to a TensorFlow
    op). `invalid` makes the error for a size below the minimum (default:
    `checks.InvalidArgumentError`).

    A malformed value (a string, None, a sequence of the wrong length) raises
    `checks.InvalidArgumentTypeError`, both a `TypeError` and a `ValueError`:
    the original failed with either, depending on the module and argument.
    """
    expected = "must be a positive integer or a sequence of them"
    if value is None:
        if default is None:
            raise checks.invalid_argument_type(argument, expected, value)
        return (default,) * num_spatial_dims
    if isinstance(value, (str, bytes)):
        raise checks.invalid_argument_type(argument, expected, value)
    if arrays:
        value = _as_sequence(value)
    if isinstance(value, Sequence) and len(value) not in (1, num_spatial_dims):
        raise checks.invalid_argument_type(
            argument,
            f"must be a scalar or a sequence of length 1 or {num_spatial_dims}",
            value,
        )
    values = utils.replicate(value, num_spatial_dims, argument)
    try:
        return tuple(checks.whole_size(argument, v, allow_zero) for v in values)
    except checks.InvalidArgumentTypeError:
        raise
    except checks.InvalidArgumentError:
        if invalid is None:
            raise
        kind = "non-negative" if allow_zero else "positive"
        raise invalid(argument, f"must contain only {kind} integers", value) from None


def _as_sequence(value: Any) -> Any:
    """A 1-D array, tensor or `tf.TensorShape` as a list; other values as is."""
    if isinstance(value, tf.TensorShape):
        return value.as_list() if value.rank is not None else value
    if isinstance(value, (tf.Tensor, tf.Variable)):
        if value.shape.rank != 1:
            return value
        static = tf.get_static_value(value)
        return value if static is None else list(static)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return list(value)
    return value


def check_no_stride_with_rate(stride: Sequence[int], rate: Sequence[int]) -> None:
    """TensorFlow's dilated convolutions need stride 1: reject both > 1."""
    if any(s > 1 for s in stride) and any(r > 1 for r in rate):
        raise utils.bad_value(
            "rate",
            f"must be 1 when `stride` is larger than 1 (stride={tuple(stride)}); "
            "strided dilated convolutions are not supported",
            rate,
        )


def bias_initializer(with_bias: bool, b_init: Any) -> Any:
    """The bias initializer to store: `b_init`, `Zeros()` or None without bias."""
    checks.initializer("b_init", b_init)
    if with_bias:
        return initializers.Zeros() if b_init is None else b_init
    if b_init is not None:
        raise utils.bad_value("b_init", "must be None when `with_bias=False`", b_init)
    return None


def on_accelerator(variable: tf.Variable) -> bool:
    """Whether `variable` (and so the module's ops) lives on a GPU or TPU.

    TensorFlow's CPU kernels implement convolutions only for channels-last
    layouts (and transposed ones without dilation), so on CPU the modules
    transpose (or dilate the kernel) around the op instead.
    """
    accelerators = tf.config.list_logical_devices(
        "GPU"
    ) or tf.config.list_logical_devices("TPU")
    if not accelerators:
        return False
    return "CPU" not in (getattr(variable, "device", "") or "").upper()


def to_channels_last(n: int) -> tuple[int, ...]:
    """Permutation taking `[N, C, *spatial]` to `[N, *spatial, C]`."""
    return (0, *range(2, n + 2), 1)


def to_channels_first(n: int) -> tuple[int, ...]:
    """Permutation taking `[N, *spatial, C]` to `[N, C, *spatial]`."""
    return (0, n + 1, *range(1, n + 1))


def rank_error(inputs: tf.Tensor, rank: int) -> ValueError:
    """The error for inputs whose rank is not (known to be) `rank`."""
    return utils.bad_value(
        "inputs",
        f"must have rank {rank} (batch, spatial dims, channels)",
        _shape_text(inputs.shape),
    )


def check_build_inputs(inputs: tf.Tensor, rank: int, channel_index: int) -> int:
    """First-call checks shared by the convolutions; returns the channel count."""
    shape = inputs.shape
    if shape.rank != rank:
        raise rank_error(inputs, rank)
    channels = shape[channel_index]
    if channels is None:
        raise utils.bad_value(
            "inputs",
            f"must have a known number of channels (axis {channel_index % rank})",
            _shape_text(shape),
        )
    if channels == 0:
        raise utils.bad_value(
            "inputs",
            f"must have at least one channel (axis {channel_index % rank})",
            _shape_text(shape),
        )
    return channels


def check_default_init_dtype(inputs: tf.Tensor) -> None:
    """Rejects non-float inputs to a module about to make its default `w_init`.

    Integer convolutions work with a user initializer; the default truncated
    normal needs a floating point dtype (the original's failed with
    `ValueError`; ours is also a `TypeError`).
    """
    if not inputs.dtype.is_floating:
        raise checks.invalid_argument_type(
            "inputs",
            "must have a floating point dtype (or give a `w_init` for "
            f"{inputs.dtype.name} weights)",
            inputs,
        )


def to_inputs(inputs: Any) -> tf.Tensor:
    """A convolution's (non-tensor) `inputs` as a tensor (slow path only).

    The original read `inputs.shape`, so None or a string failed with
    `AttributeError`: the error is one too (`checks.AttributeTypeError`).
    """
    if inputs is None or isinstance(inputs, (str, bytes)):
        raise checks.lacks_attribute(
            "inputs", "must be a tensor (or convertible to one)", inputs
        )
    return utils.to_tensor("inputs", inputs)


def _shape_text(shape: tf.TensorShape) -> Any:
    return "<unknown rank>" if shape.rank is None else tuple(shape.as_list())


def spatial_minimums(
    kernel: Sequence[int],
    rates: Sequence[int],
    paddings: Sequence[Sequence[int]] | None,
    first_axis: int,
) -> tuple[tuple[int, int, int], ...]:
    """`(axis, spatial dim, minimum size)` for dims an input could be too small in.

    Below `effective kernel - padding` a "VALID" convolution's output would
    be empty, and TensorFlow's oneDNN CPU kernels then return a tensor of the
    wrong shape instead of failing, so the modules check these sizes.
    `paddings` are the explicit `(before, after)` per spatial dim (None: none).
    """
    result = []
    for d, (k, r) in enumerate(zip(kernel, rates)):
        before, after = (0, 0) if paddings is None else paddings[d]
        minimum = (k - 1) * r + 1 - before - after
        if minimum > 1:
            result.append((first_axis + d, d, minimum))
    return tuple(result)


def check_spatial_sizes(
    inputs: tf.Tensor, minimums: Sequence[tuple[int, int, int]]
) -> tf.Tensor:
    """Raises if `inputs` is smaller than `minimums` (see `spatial_minimums`).

    The rank must have been checked. Sizes unknown while tracing are checked
    when the graph runs: the returned `inputs` then depend on those checks,
    so that they run before the convolution.
    """
    shape = inputs.shape
    checks = []
    for axis, d, minimum in minimums:
        size = shape[axis]
        if size is None:
            checks.append(
                tf.debugging.assert_greater_equal(
                    tf.shape(inputs)[axis],
                    minimum,
                    message=f"`inputs` must have size >= {minimum} in spatial "
                    f"dimension {d}",
                )
            )
        elif size < minimum:
            raise utils.bad_value(
                "inputs",
                f"must have size >= {minimum} in spatial dimension {d} (the "
                "effective kernel size minus the padding), otherwise the "
                "output would be empty",
                _shape_text(shape),
            )
    return after(checks, inputs)


def after(checks: Sequence[Any], inputs: tf.Tensor) -> tf.Tensor:
    """`inputs`, made to depend on the graph-mode assertion ops `checks`."""
    checks = [c for c in checks if c is not None]  # None: ran eagerly.
    if not checks:
        return inputs
    with tf.control_dependencies(checks):
        return tf.identity(inputs)


def output_shape(
    dims: Sequence[int],
    channels_first: bool,
    kernel: Sequence[int],
    strides: Sequence[int],
    rates: Sequence[int],
    padding: str,
    paddings: Sequence[Sequence[int]] | None,
    channels: int,
) -> list[int]:
    """A convolution's output shape for a fully known input shape `dims`."""
    n = len(kernel)
    first_axis = 2 if channels_first else 1
    spatial = []
    for d in range(n):
        size, s = dims[first_axis + d], strides[d]
        if padding == "SAME":
            spatial.append(-(-size // s))
        else:
            before, after = (0, 0) if paddings is None else paddings[d]
            k_eff = (kernel[d] - 1) * rates[d] + 1
            spatial.append(max((size + before + after - k_eff) // s + 1, 0))
    if channels_first:
        return [dims[0], channels, *spatial]
    return [dims[0], *spatial, channels]


def empty_output(
    shape: Sequence[int], w: tf.Variable, b: tf.Variable | None, channels_first: bool
) -> tf.Tensor:
    """The (empty) output for an empty input, connected to `w` and `b`.

    TensorFlow's oneDNN CPU kernels return a tensor of the *input's* shape
    for empty inputs, so the modules build empty outputs themselves when the
    input shape is known to be empty (eagerly, or traced with that shape; an
    empty batch fed to a function traced with an unknown batch size still
    reaches the op). The gradients with respect to `w` and `b` are zeros, as
    for the real op.
    """
    y = tf.zeros(shape, w.dtype) * tf.reduce_sum(w)
    if b is not None:
        n = len(shape) - 2
        y += tf.reshape(b, [-1] + [1] * n) if channels_first else b
    return y


def call_error(
    inputs: tf.Tensor,
    error: Exception | None,
    *,
    rank: int,
    channel_index: int,
    input_channels: int,
    dtype: tf.DType,
) -> Exception:
    """Explains why a convolution op rejected `inputs` (slow path only).

    Where the original's op failed with `InvalidArgumentError` (wrong dtype
    or channels), the error is one too.
    """
    shape = inputs.shape
    if shape.rank != rank:
        return rank_error(inputs, rank)
    if inputs.dtype != dtype:
        return checks.invalid_argument_type(
            "inputs",
            f"must have dtype {dtype.name}, the dtype of the first input",
            inputs,
        )
    if not dtype.is_floating:
        # E.g. int32 inputs to a 3-D convolution: TensorFlow has 1-D and 2-D
        # integer convolutions only.
        return checks.invalid_argument_type(
            "inputs",
            "must have a floating point dtype for this convolution",
            inputs,
        )
    if shape.rank is not None and shape[channel_index] not in (None, input_channels):
        return checks.invalid_argument(
            "inputs",
            f"must have {input_channels} channels (axis {channel_index % rank}) "
            "as on the first call",
            _shape_text(shape),
        )
    text = str(error or "").strip()
    reason = f" ({text.splitlines()[0]})" if text else ""
    make = (
        checks.invalid_argument
        if isinstance(error, tf.errors.InvalidArgumentError)
        else utils.bad_value
    )
    return make("inputs", f"cannot be convolved by this module{reason}", inputs)


class ConvND(base.Module):
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
        n = check_num_spatial_dims(num_spatial_dims, "convolutions")
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
        self._kernel = check_sizes("kernel_shape", kernel_shape, n)
        # The original passed these to `tf.nn.convolution`, which takes None
        # (for 1) and 1-D arrays or tensors.
        self._strides = check_sizes("stride", stride, n, default=1, arrays=True)
        self._rates = check_sizes("rate", rate, n, default=1, arrays=True)
        check_no_stride_with_rate(self._strides, self._rates)
        self._channels_first = check_data_format(data_format, n)
        self._channel_index = 1 if self._channels_first else -1
        self.data_format = data_format
        self.with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        self.w_init = w_init
        self.b_init = bias_initializer(self.with_bias, b_init)

        if padding is None:
            padding = "VALID"  # No padding function: the original's meaning.
        if isinstance(padding, str):
            self.conv_padding = padding.upper()
            if self.conv_padding not in ("SAME", "VALID"):
                # The original's op failed with `InvalidArgumentError`.
                raise checks.invalid_argument("padding", _PADDING_EXPECTED, padding)
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
            raise utils.bad_type("padding", _PADDING_EXPECTED, padding)
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
                raise utils.bad_value(
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
        self.input_channels = check_build_inputs(inputs, n + 2, self._channel_index)
        dtype = inputs.dtype
        weight_shape = (*self._kernel, self.input_channels, self.output_channels)
        if self.w_init is None:
            check_default_init_dtype(inputs)
            fan_in = int(np.prod(weight_shape[:-1]))
            self.w_init = initializers.TruncatedNormal(stddev=1.0 / np.sqrt(fan_in))
        self.w = tf.Variable(self.w_init(weight_shape, dtype), name="w")
        if self.with_bias:
            b_init = self.b_init
            self.b = tf.Variable(b_init((self.output_channels,), dtype), name="b")

        self._transpose = self._channels_first and not on_accelerator(self.w)
        op_first = self._channels_first and not self._transpose
        self._to_last = to_channels_last(n)
        self._to_first = to_channels_first(n)
        self._minimums = (
            spatial_minimums(
                self._kernel,
                self._rates,
                self._spatial_pads,
                2 if self._channels_first else 1,
            )
            if self.conv_padding == "VALID"
            else ()
        )
        self._bias_format = "NCHW" if op_first else "NHWC"
        if any(r > 1 for r in self._rates):
            self._kind = 0  # Dilated: tf.nn.convolution (space-to-batch).
            self._op_format = FORMATS[n][1 if op_first else 0]
            return
        self._kind = n
        # Tuples, not lists: a list attribute of a module is wrapped for
        # checkpoint tracking, which makes every op call convert it slowly.
        self._dilations = (1,) * (max(n, 2) + 2)
        if n == 1:
            # [N, W, C] -> [N, 1, W, C] (or [N, C, W] -> [N, C, 1, W]).
            self._expand_axis = 2 if op_first else 1
            strides = (1, *self._strides)
        else:
            strides = self._strides
        fmt = FORMATS[max(n, 2)][1 if op_first else 0]
        self._op_format = fmt
        self._op_strides = (1, 1, *strides) if op_first else (1, *strides, 1)

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        """Applies the convolution.

        Args:
          inputs: A tensor of rank `num_spatial_dims + 2` in `data_format`,
            with a floating point dtype.

        Returns:
          The outputs, same rank, layout and dtype, `output_channels` channels.
        """
        if not isinstance(inputs, tf.Tensor):
            inputs = to_inputs(inputs)
        self._initialize(inputs)
        shape = inputs.shape
        # Checked before running the op: TF's CPU kernels abort the process
        # on some wrong-rank inputs instead of raising.
        if shape.rank != self._rank:
            raise rank_error(inputs, self._rank)
        # Also checked first: TF's Conv2D treats a multiple of the channels
        # the kernel was built for as a grouped convolution (a wrong result).
        if shape[self._channel_index] not in (None, self.input_channels):
            raise self._input_error(inputs)
        if self._minimums:
            inputs = check_spatial_sizes(inputs, self._minimums)
        dims = shape.as_list()
        if 0 in dims and None not in dims:
            return self._empty_output(inputs, dims)
        try:
            x = inputs
            if self._padding is not None:
                x = tf.raw_ops.Pad(input=x, paddings=self._padding)
            if self._transpose:
                x = tf.raw_ops.Transpose(x=x, perm=self._to_last)
            kind = self._kind
            if kind == 2:
                y = tf.raw_ops.Conv2D(
                    input=x,
                    filter=self.w,
                    strides=self._op_strides,
                    padding=self._op_padding,
                    data_format=self._op_format,
                    dilations=self._dilations,
                )
            elif kind == 1:
                axis = self._expand_axis
                y = tf.raw_ops.Conv2D(
                    input=tf.raw_ops.ExpandDims(input=x, axis=axis),
                    filter=tf.raw_ops.ExpandDims(input=self.w, axis=0),
                    strides=self._op_strides,
                    padding=self._op_padding,
                    data_format=self._op_format,
                    dilations=self._dilations,
                )
                y = tf.raw_ops.Squeeze(input=y, axis=(axis,))
            elif kind == 3:
                y = tf.raw_ops.Conv3D(
                    input=x,
                    filter=self.w,
                    strides=self._op_strides,
                    padding=self._op_padding,
                    data_format=self._op_format,
                    dilations=self._dilations,
                )
            else:
                y = tf.nn.convolution(
                    x,
                    self.w,
                    strides=self._strides,
                    padding=cast(Any, self._op_padding),
                    dilations=self._rates,
                    data_format=cast(Any, self._op_format),
                )
            if self.with_bias:
                y = tf.raw_ops.BiasAdd(
                    value=y, bias=self.b, data_format=self._bias_format
                )
            if self._transpose:
                y = tf.raw_ops.Transpose(x=y, perm=self._to_first)
        except checks.OP_ERRORS as e:
            raise self._input_error(inputs, e) from e
        return y

    def _input_error(
        self, inputs: tf.Tensor, cause: Exception | None = None
    ) -> Exception:
        """The error for inputs this convolution cannot take (see `call_error`)."""
        return call_error(
            inputs,
            cause,
            rank=self._rank,
            channel_index=self._channel_index,
            input_channels=self.input_channels,
            dtype=self.w.dtype,
        )

    def _empty_output(self, inputs: tf.Tensor, dims: list[Any]) -> tf.Tensor:
        if inputs.dtype != self.w.dtype or dims[self._channel_index] != (
            self.input_channels
        ):
            raise self._input_error(inputs)
        shape = output_shape(
            dims,
            self._channels_first,
            self._kernel,
            self._strides,
            self._rates,
            self.conv_padding,
            self._spatial_pads,
            self.output_channels,
        )
        return empty_output(
            shape, self.w, self.b if self.with_bias else None, self._channels_first
        )


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
