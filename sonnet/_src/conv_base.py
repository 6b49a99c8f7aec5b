"""What every convolution module shares: argument checks and one call path.

`snt.Conv1D/2D/3D` (`conv.py`), their transposes (`conv_transpose.py`) and
`snt.DepthwiseConv2D` (`depthwise_conv.py`) derive from `ConvBase`, which
owns `__call__`. A subclass checks its arguments in `__init__`; its
`@snt.once` `_initialize` creates the variables and hands `ConvBase._bind`
the op to run (a bound method taking the input and a `Layout`) and the
layouts it can run in. Every call then runs one sequence: convert the
inputs (and cast them to a `snt.precision` policy's compute dtype), build on
the first call, check the rank and the channels, check the spatial sizes,
build an empty output itself, get the kernel for this call from the weight
step (`weights.py`), run the op between its transposes and before its bias,
and explain a failure.

Layouts. TensorFlow's CPU kernels implement convolutions only for
channels-last layouts (and transposed ones without dilation), in graphs as
eagerly, so each module has a portable layout that every device runs:
channels-first inputs are transposed to channels-last around the op, and a
transposed convolution's dilation is written into its kernel. Graphs
(`tf.function`, and so SavedModels) always use it: a graph holds nothing of
the machine that built the module or traced the graph, and the layout is
chosen where it runs, by Grappler's layout optimizer. On GPUs before Ampere
that rewrites the ops to channels-first and the transposes cancel; from
Ampere on it keeps channels-last, so the transposes stay around each
channels-first module (channels-last modules run best there). Eager calls
run where the variables are: a module whose variables live on a GPU or TPU
runs eagerly in its native layout (the op channels-first, or dilated),
decided once, on the first call.

Input checks: most bad inputs make the op fail, and the error is then
explained in our words (the zero-cost `try`/`except` around the ops). A few
are checked before running the op because the kernels do not fail cleanly:
on a wrong rank oneDNN's CPU kernels abort the process, `Conv2D` runs a
multiple of the channel count as a grouped convolution (a wrong result), and
for an input whose output would be empty (an empty batch, or a "VALID" input
smaller than the kernel) oneDNN returns a tensor of the wrong shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    errors,
    initializers,
    precision,
    utils,
    weights,
)

# Channels-last and channels-first layouts for each number of spatial dims.
FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}

_BF16 = tf.bfloat16


def _to_f32(x: tf.Tensor) -> tf.Tensor:
    return tf.raw_ops.Cast(x=x, DstT=tf.float32)


def check_num_spatial_dims(num_spatial_dims: Any, kind: str) -> int:
    """Validates `num_spatial_dims` (1, 2 or 3) for a `kind` of convolution."""
    if isinstance(num_spatial_dims, bool) or not isinstance(
        num_spatial_dims, (int, np.integer)
    ):
        raise errors.bad_type(
            "num_spatial_dims", "must be an integer", num_spatial_dims
        )
    n = int(num_spatial_dims)
    if n not in FORMATS:
        raise errors.bad_value(
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
        raise errors.bad_type("data_format", expected, data_format)
    if data_format in (last, "channels_last"):
        return False
    if data_format in (first, "channels_first"):
        return True
    raise errors.bad_value(
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
    `errors.InvalidArgumentError`).

    A malformed value (a string, None, a sequence of the wrong length) raises
    `errors.InvalidArgumentTypeError`, both a `TypeError` and a `ValueError`:
    the original failed with either, depending on the module and argument.
    """
    expected = "must be a positive integer or a sequence of them"
    if value is None:
        if default is None:
            raise errors.invalid_argument_type(argument, expected, value)
        return (default,) * num_spatial_dims
    if isinstance(value, (str, bytes)):
        raise errors.invalid_argument_type(argument, expected, value)
    if arrays:
        value = _as_sequence(value)
    if isinstance(value, Sequence) and len(value) not in (1, num_spatial_dims):
        raise errors.invalid_argument_type(
            argument,
            f"must be a scalar or a sequence of length 1 or {num_spatial_dims}",
            value,
        )
    values = utils.replicate(value, num_spatial_dims, argument)
    try:
        return tuple(checks.whole_size(argument, v, allow_zero) for v in values)
    except errors.InvalidArgumentTypeError:
        raise
    except errors.InvalidArgumentError:
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
        raise errors.bad_value(
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
        raise errors.bad_value("b_init", "must be None when `with_bias=False`", b_init)
    return None


def on_accelerator(variable: tf.Variable) -> bool:
    """Whether `variable` (and so a module's eager ops) lives on a GPU or TPU.

    Decides only the layout of eager calls (see the module docstring):
    graphs always run in the portable layout.
    """
    if not utils.accelerator_present():
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
    return errors.bad_value(
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
        raise errors.bad_value(
            "inputs",
            f"must have a known number of channels (axis {channel_index % rank})",
            _shape_text(shape),
        )
    if channels == 0:
        raise errors.bad_value(
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
        raise errors.invalid_argument_type(
            "inputs",
            "must have a floating point dtype (or give a `w_init` for "
            f"{inputs.dtype.name} weights)",
            inputs,
        )


def to_inputs(inputs: Any) -> tf.Tensor:
    """A convolution's (non-tensor) `inputs` as a tensor (slow path only).

    The original read `inputs.shape`, so None or a string failed with
    `AttributeError`: the error is one too (`errors.AttributeTypeError`).
    """
    if inputs is None or isinstance(inputs, (str, bytes)):
        raise errors.lacks_attribute(
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


class OutputRule(NamedTuple):
    """What fixes a forward convolution's output shape (see `output_shape`)."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    rates: tuple[int, ...]
    padding: str  # "SAME" or "VALID".
    paddings: tuple[tuple[int, int], ...] | None  # Explicit, per spatial dim.
    channels: int  # Output channels.


def output_shape(
    dims: Sequence[int], channels_first: bool, rule: OutputRule
) -> list[int]:
    """A convolution's output shape for a fully known input shape `dims`."""
    first_axis = 2 if channels_first else 1
    spatial = []
    for d, (k, s, r) in enumerate(zip(rule.kernel, rule.strides, rule.rates)):
        size = dims[first_axis + d]
        if rule.padding == "SAME":
            spatial.append(-(-size // s))
        else:
            before, after = (0, 0) if rule.paddings is None else rule.paddings[d]
            k_eff = (k - 1) * r + 1
            spatial.append(max((size + before + after - k_eff) // s + 1, 0))
    if channels_first:
        return [dims[0], rule.channels, *spatial]
    return [dims[0], *spatial, rule.channels]


def empty_output(
    shape: Sequence[int], w: Any, b: Any, channels_first: bool
) -> tf.Tensor:
    """The (empty) output for an empty input or filter, connected to `w` and `b`.

    TensorFlow's oneDNN CPU kernels return a tensor of the *input's* shape
    for empty inputs and reject filters with no output channels (the default
    kernels accept both), so the modules build empty outputs themselves when
    the input shape is known and the input or the output is empty (eagerly,
    or traced with that shape; an empty batch fed to a function traced with
    an unknown batch size still reaches the op). The gradients with respect
    to `w` and `b` are zeros, as for the real op.
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
        return errors.invalid_argument_type(
            "inputs",
            f"must have dtype {dtype.name}, the dtype of the first input",
            inputs,
        )
    if not dtype.is_floating:
        # E.g. int32 inputs to a 3-D convolution: TensorFlow has 1-D and 2-D
        # integer convolutions only.
        return errors.invalid_argument_type(
            "inputs",
            "must have a floating point dtype for this convolution",
            inputs,
        )
    if shape.rank is not None and shape[channel_index] not in (None, input_channels):
        return errors.invalid_argument(
            "inputs",
            f"must have {input_channels} channels (axis {channel_index % rank}) "
            "as on the first call",
            _shape_text(shape),
        )
    text = str(error or "").strip()
    reason = f" ({text.splitlines()[0]})" if text else ""
    make = (
        errors.invalid_argument
        if isinstance(error, tf.errors.InvalidArgumentError)
        else errors.bad_value
    )
    return make("inputs", f"cannot be convolved by this module{reason}", inputs)


class Layout(NamedTuple):
    """How a module's op runs in one layout: its arguments, fixed on the first call.

    Tuples, not lists: a list attribute of a module is wrapped for checkpoint
    tracking, which makes every op call convert it slowly.
    """

    transpose: bool  # Channels-first inputs go to channels-last around the op.
    first: bool  # The op itself runs channels-first.
    data_format: str
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    padding: str
    bias_format: str | None  # `BiasAdd`'s data format; None: no bias.
    spatial_axes: tuple[int, ...]  # Of the op's input (after a 1-D expansion).
    expand_axis: int  # Where a 1-D op's input gets its unit height axis.
    paddings: tuple[tuple[int, int], ...] | None = None  # A `Pad` before the op.
    dilate_kernel: bool = False  # Dilation written into the kernel instead.

    def run(self, op: Callable[..., tf.Tensor], **tensors: Any) -> tf.Tensor:
        """Runs the raw convolution `op` on `tensors` with these arguments."""
        return op(
            **tensors,
            strides=self.strides,
            padding=self.padding,
            data_format=self.data_format,
            dilations=self.dilations,
        )


def layout(
    channels_first: bool,
    native: bool,
    strides: Sequence[int],
    dilations: Sequence[int],
    padding: str,
    with_bias: bool,
    *,
    raw: bool = True,
    paddings: tuple[tuple[int, int], ...] | None = None,
    dilate_kernel: bool = False,
) -> Layout:
    """The `Layout` of a convolution with these spatial strides and dilations.

    `native`: the op runs in the module's own layout, else channels-first
    inputs are transposed. `raw`: the op is a raw TensorFlow op (strides and
    dilations per axis, a 1-D convolution run as a 2-D one over a unit-height
    image, as `tf.nn.conv1d` does), else a `tf.nn` function (per spatial
    dimension, the module's rank).
    """
    n = len(strides)
    first = channels_first and native
    op_dims = n
    strides, dilations = tuple(strides), tuple(dilations)
    if raw:
        if n == 1:
            op_dims, strides, dilations = 2, (1, *strides), (1, *dilations)
        strides = (1, 1, *strides) if first else (1, *strides, 1)
        dilations = (1, 1, *dilations) if first else (1, *dilations, 1)
    first_axis = 2 if first else 1
    return Layout(
        transpose=channels_first and not native,
        first=first,
        data_format=FORMATS[op_dims][first],
        strides=strides,
        dilations=dilations,
        padding=padding,
        bias_format=("NCHW" if first else "NHWC") if with_bias else None,
        spatial_axes=tuple(range(first_axis, first_axis + op_dims)),
        expand_axis=first_axis,
        paddings=paddings,
        dilate_kernel=dilate_kernel,
    )


class ConvBase(base.Module):
    """The call path of every convolution module (see the module docstring).

    A subclass's constructor sets `_rank`, `_channels_first` and
    `_channel_index`. Its `@snt.once` `_initialize(inputs)` sets
    `input_channels`, creates `w` and `b` (`_create_variables`) and calls
    `_bind`. It may override `_rank_error` and, for checks of exact sizes
    (`_exact_sizes`), `_size_message` and `_size_error`.
    """

    # `(axis, spatial dim, size)`: the sizes `_check_sizes` checks the inputs
    # against, minimums or (`_exact_sizes`) exact sizes. `_bind` sets the
    # minimums of a forward convolution; others set their own.
    _size_checks: tuple[tuple[int, int, int], ...] = ()
    _exact_sizes = False

    # The kernel for each call (`weights.py`): `w`, in the policy's dtype.
    _weight_step: weights.WeightStep = weights.VariableKernel("w")

    # Set by subclasses (see the class docstring).
    _rank: int
    _channels_first: bool
    _channel_index: int
    input_channels: int
    w: tf.Variable
    b: tf.Variable
    _initialize: Callable[[tf.Tensor], None]

    def _create_variables(
        self,
        inputs: tf.Tensor,
        w_init: initializers.Initializer | None,
        w_shape: tuple[int, ...],
        fan_in: int,
        b_init: initializers.Initializer | None,
        b_size: int,
    ) -> initializers.Initializer:
        """Creates `w` (and `b` unless `b_init` is None) in the inputs' dtype.

        A `w_init` of None means `TruncatedNormal` with stddev
        `1 / sqrt(fan_in)`. Returns the weight initializer used.
        """
        # Under a `snt.precision` policy, float32 variables for bf16 inputs.
        dtype = precision.variable_dtype(self, inputs.dtype)
        if w_init is None:
            check_default_init_dtype(inputs)
            w_init = initializers.TruncatedNormal(stddev=1.0 / np.sqrt(fan_in))
        self.w = tf.Variable(w_init(w_shape, dtype), name="w")
        if b_init is not None:
            self.b = tf.Variable(b_init((b_size,), dtype), name="b")
        return w_init

    def _bind(
        self,
        op: Callable[[tf.Tensor, Layout, tf.Tensor], tf.Tensor],
        layouts: Callable[[bool], Layout],
        output_rule: OutputRule | None = None,
    ) -> None:
        """Fixes how calls run, once the variables exist.

        Args:
          op: Runs the convolution (without bias) on an input in a layout,
            with the kernel for this call (from the weight step: `w`, or `w`
            cast to a policy's compute dtype).
          layouts: Gives the portable layout (for False) and the native one
            (for True).
          output_rule: For a forward convolution: how empty outputs are
            built and, with "VALID" padding, the minimum input sizes. None:
            the op handles both itself.
        """
        n = self._rank - 2
        self._to_last = to_channels_last(n)
        self._to_first = to_channels_first(n)
        self._op = op
        portable, native = layouts(False), layouts(True)
        self._graph_layout = portable
        self._eager_layout = (
            native if native != portable and on_accelerator(self.w) else None
        )
        self._output_rule = output_rule
        if output_rule is not None and output_rule.padding == "VALID":
            first_axis = 2 if self._channels_first else 1
            self._size_checks = spatial_minimums(
                output_rule.kernel, output_rule.rates, output_rule.paddings, first_axis
            )

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        """Applies the convolution.

        Args:
          inputs: A tensor of rank `num_spatial_dims + 2` in `data_format`,
            with a floating point dtype (or the dtype of an integer `w_init`).

        Returns:
          The outputs: same rank, layout and dtype as the inputs (under a
          `snt.precision` policy: its compute or output dtype), with the
          module's number of output channels.
        """
        if not isinstance(inputs, tf.Tensor):
            inputs = to_inputs(inputs)
        # The policy's step: floating inputs in its compute dtype, which is
        # also the dtype the weight step gives the kernel in (None: as is).
        policy = self._precision
        dtype = None
        if policy is not None:
            dtype = policy.compute_dtype
            inputs = precision.cast(inputs, dtype)
        self._initialize(inputs)
        shape = inputs.shape
        # Checked before running the op: TF's CPU kernels abort the process
        # on some wrong-rank inputs instead of raising.
        if shape.rank != self._rank:
            raise self._rank_error(inputs)
        # Also checked first: TF's Conv2D treats a multiple of the channels
        # the kernel was built for as a grouped convolution (a wrong result).
        if shape[self._channel_index] not in (None, self.input_channels):
            raise self._input_error(inputs)
        if self._size_checks:
            inputs = self._check_sizes(inputs)
        if self._output_rule is not None:
            dims = shape.as_list()
            empty = 0 in dims or self._output_rule.channels == 0
            if empty and None not in dims:
                return self._empty_output(inputs, dims, policy)
        # A graph may run on another machine (a SavedModel) or device: it
        # gets the portable layout, which Grappler adapts where it runs.
        layout = self._graph_layout
        if self._eager_layout is not None and tf.executing_eagerly():
            layout = self._eager_layout
        # The weight step: the kernel for this call (`weights.py`).
        w = self._weight_step(self, dtype)
        try:
            x = inputs
            if layout.transpose:
                x = tf.raw_ops.Transpose(x=x, perm=self._to_last)
            if layout.paddings is not None:
                x = tf.raw_ops.Pad(input=x, paddings=layout.paddings)
            if dtype is _BF16 and precision.bfloat16_convolutions_in_float32():
                y = self._op(_to_f32(x), layout, _to_f32(w))
                y = precision.cast(y, dtype)
            else:
                y = self._op(x, layout, w)
            if layout.bias_format is not None:
                b = self.b if dtype is None else precision.cast(self.b, dtype)
                y = tf.raw_ops.BiasAdd(value=y, bias=b, data_format=layout.bias_format)
            if layout.transpose:
                y = tf.raw_ops.Transpose(x=y, perm=self._to_first)
        except errors.OP_ERRORS as e:
            raise self._input_error(inputs, e) from e
        return y if policy is None else precision.cast_outputs(policy, y)

    def _rank_error(self, inputs: tf.Tensor) -> Exception:
        return rank_error(inputs, self._rank)

    def _check_sizes(self, inputs: tf.Tensor) -> tf.Tensor:
        """Raises if `inputs` fail the `(axis, spatial dim, size)` checks.

        The input's size must reach each size (or, with `_exact_sizes`,
        equal it). The rank must have been checked. Sizes unknown while
        tracing are checked when the graph runs: the returned `inputs` then
        depend on those checks, so that they run before the convolution.
        """
        shape = inputs.shape
        exact = self._exact_sizes
        asserts = []
        for axis, d, size in self._size_checks:
            actual = shape[axis]
            if actual is None:
                check = (
                    tf.debugging.assert_equal
                    if exact
                    else tf.debugging.assert_greater_equal
                )
                message = self._size_message(d, size)
                asserts.append(check(tf.shape(inputs)[axis], size, message=message))
            elif actual < size or (exact and actual != size):
                raise self._size_error(inputs, d, size)
        return checks.after(asserts, inputs)

    def _size_message(self, d: int, size: int) -> str:
        """The message of a failed size check while the graph runs."""
        return f"`inputs` must have size >= {size} in spatial dimension {d}"

    def _size_error(self, inputs: tf.Tensor, d: int, size: int) -> Exception:
        """The error for an input too small in spatial dimension `d`."""
        return errors.bad_value(
            "inputs",
            f"must have size >= {size} in spatial dimension {d} (the effective "
            "kernel size minus the padding), otherwise the output would be empty",
            _shape_text(inputs.shape),
        )

    def _input_error(
        self, inputs: tf.Tensor, cause: Exception | None = None
    ) -> Exception:
        """The error for inputs this module cannot take (see `call_error`)."""
        return call_error(
            inputs,
            cause,
            rank=self._rank,
            channel_index=self._channel_index,
            input_channels=self.input_channels,
            dtype=self._compute_dtype(),
        )

    def _compute_dtype(self) -> tf.DType:
        """The dtype calls compute in: the policy's for floating variables."""
        policy = self._precision
        dtype = self.w.dtype
        if policy is None or not dtype.is_floating:
            return dtype
        return policy.compute_dtype

    def _empty_output(
        self, inputs: tf.Tensor, dims: list[Any], policy: precision.Policy | None
    ) -> tf.Tensor:
        dtype = self._compute_dtype()
        if inputs.dtype != dtype:
            raise self._input_error(inputs)
        assert self._output_rule is not None
        shape = output_shape(dims, self._channels_first, self._output_rule)
        step_dtype = None if policy is None else policy.compute_dtype
        w = self._weight_step(self, step_dtype)
        b = None
        if self._graph_layout.bias_format is not None:
            b = self.b if policy is None else precision.cast(self.b, step_dtype)
        y = empty_output(shape, w, b, self._channels_first)
        return y if policy is None else precision.cast_outputs(policy, y)
