"""`snt.Bias`: adds a learned bias, `outputs = inputs + b`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, errors, initializers, once, precision, tensors

_BIAS_ADD = tf.raw_ops.BiasAdd
_ADD = tf.raw_ops.AddV2


def _check_output_size(output_size: Any) -> tuple[int, ...] | None:
    if output_size is None:
        return None
    size = checks.as_index(output_size)
    if size is not None:
        output_size = (size,)
    return checks.integers("output_size", output_size, minimum=0)


def _covered_axes(rank: int, bias_dims: tuple[int, ...] | None) -> list[int]:
    """The (non-negative) input axes the bias varies along."""
    if bias_dims is None:
        return list(range(1, rank))
    axes = []
    for dim in bias_dims:
        if not -rank <= dim < rank:
            raise errors.bad_value(
                "bias_dims",
                f"must contain axes of the input, which has rank {rank}",
                list(bias_dims),
            )
        dim %= rank
        if dim == 0:
            raise errors.bad_value(
                "bias_dims",
                "must not contain the batch axis 0 (a bias is shared by all "
                "examples of a batch)",
                list(bias_dims),
            )
        axes.append(dim)
    return sorted(set(axes))


def calculate_bias_shape(
    input_shape: Sequence[int | None], bias_dims: Sequence[int] | None
) -> tuple[int, ...]:
    """The shape of a bias for inputs of `input_shape` along `bias_dims`.

    With `bias_dims=None` the bias covers every non-batch axis; with an empty
    sequence it is a scalar. Otherwise it has the input's size along each
    axis in `bias_dims` and 1 elsewhere, without leading 1s, so that it
    broadcasts against the inputs.

    Args:
      input_shape: The input shape, batch axis first (rank >= 2).
      bias_dims: Axes the bias varies along (negative values count from the
        end), or None.

    Returns:
      The bias shape as a tuple of ints.

    >>> from sonnet._src.bias import calculate_bias_shape
    >>> calculate_bias_shape([8, 4, 5, 3], [-1])
    (3,)
    >>> calculate_bias_shape([8, 4, 5, 3], [1])
    (4, 1, 1)
    """
    rank = len(input_shape)
    dims = None if bias_dims is None else checks.integers("bias_dims", bias_dims)
    if dims is not None and not dims:
        return ()
    axes = _covered_axes(rank, dims)
    for axis in axes:
        if input_shape[axis] is None:
            raise errors.bad_value(
                "inputs",
                f"must have a known size along axis {axis} (a bias axis) on the "
                "first call, which creates the bias",
                list(input_shape),
            )
    if dims is None:
        return tuple(int(d) for d in input_shape[1:])  # type: ignore[arg-type]
    shape = [1] * rank
    for axis in axes:
        shape[axis] = int(input_shape[axis])  # type: ignore[arg-type]
    start = next((i for i in range(1, rank) if shape[i] != 1), rank)
    return tuple(shape[start:])


class Bias(base.Module):
    """Adds a bias to the inputs: `outputs = inputs + b`.

    The bias is created on the first call. By default it covers every
    non-batch axis (`b` has shape `inputs.shape[1:]`); `bias_dims` restricts
    it to some axes and broadcasts it along the others.

    Args:
      output_size: Expected non-batch shape of the inputs (an int or a
        sequence of ints), checked on the first call; default None checks
        nothing. It is the same as the input shape: a bias does not change
        shapes.
      bias_dims: Axes the bias varies along, e.g. `[-1]` for one bias per
        channel of `[N, H, W, C]` inputs (then `b` has shape `[C]`), or `[]`
        for a single scalar bias. Default None means all non-batch axes.
        Axis 0 (the batch) is not allowed.
      b_init: Initializer for `b`, a callable `(shape, dtype) -> tensor`.
        Default None means zeros.
      name: Module name (default `bias`).

    Shapes:
      inputs `[N, ...]` (rank >= 2) -> outputs of the same shape and dtype.
      Later inputs must keep the sizes of the bias axes (other axes may change).

    >>> bias = snt.Bias(bias_dims=[-1])
    >>> bias(tf.ones([2, 4, 4, 3])).shape
    TensorShape([2, 4, 4, 3])
    >>> bias.b.shape
    TensorShape([3])
    """

    # The bias axes, as `(axis counted from the end, size)` pairs; None until
    # the module is built.
    _covered: tuple[tuple[int, int | None], ...] | None = None
    # Whether the bias is one axis, the last (`BiasAdd` then checks the
    # inputs itself); False until the module is built.
    _last_axis_only = False

    def __init__(
        self,
        output_size: int | Sequence[int] | None = None,
        bias_dims: Sequence[int] | None = None,
        b_init: tensors.Initializer | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.output_size = _check_output_size(output_size)
        self.bias_dims = (
            None if bias_dims is None else checks.integers("bias_dims", bias_dims)
        )
        checks.initializer("b_init", b_init)
        self.b_init = initializers.Zeros() if b_init is None else b_init

    @base.no_name_scope
    def _plan(self, inputs: Any) -> tuple[tf.TensorShape, tf.DType, tuple[int, ...]]:
        """Checks first-call `inputs`; returns their shape, dtype and the bias shape."""
        shape, dtype = tensors.shape_and_dtype(inputs)
        if shape.rank is None or shape.rank < 2:
            raise errors.bad_value("inputs", "must have rank >= 2", shape)
        if not (dtype.is_floating or dtype.is_integer):
            raise errors.bad_type(
                "inputs", "must have a floating point or integer dtype", inputs
            )
        if self.output_size is not None and tuple(shape[1:].as_list()) != tuple(
            self.output_size
        ):
            # The original failed on an int or list `output_size` with a
            # TypeError, on a mismatching tuple with a ValueError.
            raise errors.invalid_argument_type(
                "inputs",
                f"must have shape {[None, *self.output_size]} (from `output_size`)",
                shape,
            )
        return shape, dtype, calculate_bias_shape(shape.as_list(), self.bias_dims)

    @once.once
    def _initialize(self, inputs: Any) -> None:
        shape, dtype, bias_shape = self._plan(inputs)
        # Under a `snt.precision` policy, float32 variables for bf16 inputs.
        dtype = precision.variable_dtype(self, dtype)
        dims = shape.as_list()
        axes = [] if self.bias_dims == () else _covered_axes(shape.rank, self.bias_dims)
        self.b = tf.Variable(
            tensors.initial_value("b_init", self.b_init, list(bias_shape), dtype),
            name="b",
        )
        self.input_size = shape[1:]
        rank = shape.rank
        self._covered = tuple((axis - rank, dims[axis]) for axis in axes)
        # `BiasAdd` requires the last input axis to match the bias exactly,
        # so for one bias axis it is also the shape check.
        self._last_axis_only = bool(bias_shape) and self._covered == (
            (-1, bias_shape[0]),
        )
        tensors.eager_tensor_type()

    @base.no_name_scope
    def _check_multiplier(
        self, inputs: Any, multiplier: Any, compute_dtype: tf.DType | None = None
    ) -> tf.Tensor:
        """`multiplier` as a tensor, checked before anything is built.

        `compute_dtype`: that of the call's `snt.precision` policy, if any.
        """
        if self._covered is None:
            shape, dtype, bias_shape = self._plan(inputs)
        else:
            shape = self._check_inputs(inputs, compute_dtype=compute_dtype)
            dtype, bias_shape = compute_dtype or self.b.dtype, self.b.shape
        try:
            multiplier = tf.convert_to_tensor(multiplier, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise errors.bad_type(
                "multiplier",
                f"must be a number or tensor of dtype {dtype.name} (that of `inputs`)",
                multiplier,
            ) from e
        try:
            scaled = tf.broadcast_static_shape(
                tf.TensorShape(bias_shape), multiplier.shape
            )
            result = tf.broadcast_static_shape(shape, scaled)
            if result.rank != shape.rank or not result.is_compatible_with(shape):
                raise ValueError(f"the sum would have shape {result}")
        except ValueError as e:
            raise errors.bad_value(
                "multiplier",
                f"must broadcast against the bias (shape {list(bias_shape)}) and "
                f"`inputs` (shape {shape}) without changing the shape of `inputs`",
                multiplier,
            ) from e
        return multiplier

    @base.no_name_scope
    def __call__(self, inputs: tf.Tensor, multiplier: Any = None) -> tf.Tensor:
        """Adds the bias.

        Args:
          inputs: A tensor of rank >= 2.
          multiplier: Optional scale for the bias: `inputs + b * multiplier`.

        Returns:
          `inputs + b` (or `inputs + b * multiplier`).

        Raises:
          ValueError: if `inputs` has a different size than the first input
            along a bias axis, or too low a rank.
          TypeError: if `inputs` has a different dtype than the first input.
        """
        # Fast branch: an eager call of a built module without a policy whose
        # bias is the last axis; bad inputs make `BiasAdd` raise, and only
        # then do we work out what was wrong.
        if (
            multiplier is None
            and self._last_axis_only
            and type(inputs) is tensors.EAGER_TENSOR
            and self._precision is None
        ):
            try:
                return _BIAS_ADD(value=inputs, bias=self.b)
            except errors.OP_ERRORS as e:
                self._check_inputs(inputs, e)
                raise errors.bad_value(
                    "inputs", f"could not be added to the bias ({e})", inputs
                ) from e
        return self._call(inputs, multiplier)

    def _call(self, inputs: Any, multiplier: Any) -> tf.Tensor:
        """The call path: the policy's step (floating inputs and `b` in its
        compute dtype; nothing without a policy), checks, build, add, and the
        outputs in the policy's output dtype (if any)."""
        policy = self._precision
        dtype = None
        x = inputs
        if policy is not None:
            dtype = policy.compute_dtype
            if not isinstance(inputs, (tf.Tensor, tf.Variable)):
                tensors.shape_and_dtype(inputs)  # Our errors for None, strings.
                inputs = tf.convert_to_tensor(inputs)
            x = precision.cast(inputs, dtype)
        if multiplier is not None:
            multiplier = self._check_multiplier(x, multiplier, dtype)
        if self._covered is None:
            self._initialize(x)
        shape = self._check_inputs(x, compute_dtype=dtype)
        covered = self._covered or ()
        if shape.rank is not None and any(shape[a] is None for a, _ in covered):
            # Only while tracing: check the bias axes when the graph runs.
            expected: list[int | None] = [None] * shape.rank
            for axis, size in covered:
                expected[axis] = size
            x = tf.ensure_shape(x, expected)
        b = self.b if dtype is None else precision.cast(self.b, dtype)
        if multiplier is not None:
            b = b * multiplier
        try:
            y = tf.add(x, b)
        except errors.OP_ERRORS as e:
            raise errors.bad_value(
                "inputs", f"could not be added to the bias ({e})", x
            ) from e
        return y if policy is None else precision.cast_outputs(policy, y)

    @base.no_name_scope
    def _check_inputs(
        self,
        inputs: Any,
        error: Exception | None = None,
        compute_dtype: tf.DType | None = None,
    ) -> tf.TensorShape:
        """Raises our error unless `inputs` fits the bias (chained to `error`).

        `compute_dtype`: the dtype of the call's `snt.precision` policy (None:
        the inputs must have the bias' dtype).
        """
        try:
            shape, dtype = tensors.shape_and_dtype(inputs)
        except (TypeError, ValueError) as e:
            raise e from error
        if compute_dtype is not None:
            if dtype != compute_dtype:
                raise errors.bad_type(
                    "inputs",
                    "must have a floating point dtype (the module computes in "
                    f"{compute_dtype.name} under its `snt.precision` policy)",
                    inputs,
                ) from error
        elif dtype != self.b.dtype:
            raise errors.bad_type(
                "inputs",
                f"must have dtype {self.b.dtype.name}, the dtype of the first input",
                inputs,
            ) from error
        covered = self._covered or ()
        if shape.rank is None:
            if covered and not self._last_axis_only:
                raise errors.bad_value(
                    "inputs",
                    "must have a known rank to be checked against the bias",
                    shape,
                ) from error
            return shape
        needed = max([2] + [1 - axis for axis, _ in covered])
        if shape.rank < needed:
            raise errors.bad_value(
                "inputs", f"must have rank >= {needed} to match the bias", shape
            ) from error
        for axis, size in covered:
            if shape[axis] is not None and shape[axis] != size:
                raise errors.bad_value(
                    "inputs",
                    f"must have size {size} along axis {shape.rank + axis}, as on "
                    "the first call (a bias axis)",
                    shape,
                ) from error
        return shape
