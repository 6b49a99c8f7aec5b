"""`snt.Reshape` / `snt.Flatten`: reshape all but the leading dimensions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, errors, once, tensors, utils


def _check_output_shape(output_shape: Any) -> tuple[int, ...]:
    """Validates `output_shape` on the first call, as the original's reshape did.

    The original checked nothing when constructed and let `tf.reshape` fail:
    a non-integer size is a `ValueError`, a bad size or wildcard an
    `InvalidArgumentError`. Ours fail at the same call, with those types.
    """
    if isinstance(output_shape, tf.TensorShape):
        if output_shape.rank is None:
            raise errors.bad_value(
                "output_shape", "must have a known rank", output_shape
            )
        output_shape = [-1 if d is None else d for d in output_shape.as_list()]
    elif isinstance(output_shape, (tf.Tensor, tf.Variable, np.ndarray)):
        # A 1-D array or tensor of sizes, as `tf.reshape` takes.
        static = tf.get_static_value(output_shape)
        if static is not None and np.ndim(static) == 1:
            output_shape = list(static)
    if isinstance(output_shape, (str, bytes)) or not isinstance(output_shape, Sequence):
        # The original iterated it (a TypeError) or, for a string, failed
        # converting it to a tensor (a ValueError): ours is both.
        raise errors.invalid_argument_type(
            "output_shape",
            "must be a sequence of sizes (ints, at most one -1)",
            output_shape,
        )
    shape = tuple(checks.as_index(d) for d in output_shape)
    if any(d is None for d in shape):
        floats = all(isinstance(d, (float, np.floating)) for d in output_shape)
        # Floats reached `tf.reshape` (InvalidArgumentError); others failed
        # converting to a shape (ValueError).
        make = errors.invalid_argument_type if floats else errors.bad_value
        raise make(
            "output_shape", "must contain only ints (at most one -1)", output_shape
        )
    if any(d < -1 for d in shape):  # type: ignore[operator]
        raise errors.invalid_argument(
            "output_shape", "must contain sizes >= 0 or a single -1", output_shape
        )
    if shape.count(-1) > 1:
        raise errors.invalid_argument(
            "output_shape", "must contain at most one -1 (inferred size)", output_shape
        )
    if -1 in shape and 0 in shape:
        raise errors.invalid_argument(
            "output_shape",
            "must not contain both -1 and 0 (the -1 could not be inferred)",
            output_shape,
        )
    return shape  # type: ignore[return-value]


class Reshape(base.Module):
    """Reshapes inputs, keeping the first `preserve_dims` dimensions.

    The dimensions after the first `preserve_dims` are reshaped to
    `output_shape`, in which one entry may be -1 (inferred from the size of
    the input). For example inputs `[B, H, W, C]` with `output_shape=[-1]`
    become `[B, H * W * C]`, and with `preserve_dims=2` and
    `output_shape=[W * C]` become `[B, H, W * C]`.

    Args:
      output_shape: The new shape of the non-preserved dimensions: a sequence
        of ints >= 0 with at most one -1.
      preserve_dims: Number of leading dimensions kept as they are (default 1,
        the batch dimension), a positive int.
      name: Module name (default `reshape`).

    Shapes:
      inputs `P + S` (`len(P) == preserve_dims`) -> outputs `P + output_shape`,
      where `prod(S) == prod(output_shape)`.

    >>> reshape = snt.Reshape([2, -1])
    >>> reshape(tf.zeros([8, 3, 4])).shape
    TensorShape([8, 2, 6])
    >>> reshape.reversed()(tf.zeros([8, 2, 6])).shape
    TensorShape([8, 3, 4])
    """

    def __init__(
        self,
        output_shape: Sequence[int],
        preserve_dims: int = 1,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self._output_shape = output_shape
        self._preserve_dims = checks.size("preserve_dims", preserve_dims)

    @once.once
    def _initialize(self, inputs: Any) -> None:
        shape, _ = tensors.shape_and_dtype(inputs)
        self._check_rank(shape)
        self._shape = _check_output_shape(self._output_shape)
        self._input_shape = shape

    @base.no_name_scope
    def _check_rank(self, shape: tf.TensorShape) -> None:
        if shape.rank is None or shape.rank < self._preserve_dims:
            raise errors.bad_value(
                "inputs",
                f"must have a known rank >= preserve_dims={self._preserve_dims}",
                shape,
            )

    @utils.no_autograph
    def __call__(self, inputs: Any) -> tf.Tensor:
        """Reshapes `inputs`.

        Args:
          inputs: A tensor of rank >= `preserve_dims`.

        Returns:
          The reshaped tensor.

        Raises:
          ValueError: if `inputs` has too low a rank, or `output_shape` is not
            a sequence of ints (checked on the first call, as the original).
          InvalidArgumentError: (also a `ValueError`) if `output_shape` has a
            size below -1 or more than one -1, or does not fit the size of
            `inputs`.
        """
        self._initialize(inputs)
        if not isinstance(inputs, (tf.Tensor, tf.Variable)):
            inputs = utils.to_tensor("inputs", inputs)
        shape = inputs.shape
        self._check_rank(shape)
        p = self._preserve_dims
        output_shape = list(self._shape)
        trailing = shape[p:]
        if trailing.is_fully_defined():
            size = trailing.num_elements()
            known = int(np.prod([d for d in output_shape if d != -1], dtype=np.int64))
            if -1 in output_shape:
                fits, expected = size % known == 0, f"a multiple of {known}"
            else:
                fits, expected = size == known, str(known)
            if not fits:
                raise errors.invalid_argument(
                    "inputs",
                    f"must have {expected} elements after the first {p} "
                    f"dimension(s) to be reshaped to {list(self._shape)}",
                    shape,
                )
            if -1 in output_shape:
                output_shape[output_shape.index(-1)] = size // known
        leading = shape[:p]
        if leading.is_fully_defined():
            target = leading.as_list() + output_shape
        else:
            target = tf.concat([tf.shape(inputs)[:p], output_shape], axis=0)
        return tf.reshape(inputs, target)

    @base.no_name_scope
    def reversed(self, name: str | None = None) -> Reshape:
        """A `Reshape` that undoes this one (needs a prior call).

        Args:
          name: Name of the new module; default `<this name>_reversed`.

        Returns:
          `Reshape(output_shape=<non-preserved input shape>, preserve_dims)`.
        """
        input_shape = getattr(self, "_input_shape", None)
        if input_shape is None:
            raise ValueError(
                "`reversed()` needs the input shape, which is known only after "
                f"the module has been called. Received: {self!r}, not called yet."
            )
        if name is None:
            name = f"{self.name}_reversed"
        return Reshape(
            output_shape=input_shape[self._preserve_dims :],
            preserve_dims=self._preserve_dims,
            name=name,
        )


class Flatten(Reshape):
    """Flattens all but the first `preserve_dims` dimensions into one.

    As `snt.Reshape` with `output_shape=[-1]`. With `preserve_dims` equal to
    the input rank a dimension of size 1 is appended.

    Args:
      preserve_dims: Number of leading dimensions kept (default 1).
      name: Module name (default `flatten`).

    >>> snt.Flatten()(tf.zeros([8, 3, 4])).shape
    TensorShape([8, 12])
    """

    def __init__(self, preserve_dims: int = 1, name: str | None = None):
        super().__init__(output_shape=(-1,), preserve_dims=preserve_dims, name=name)


def reshape(
    inputs: Any,
    output_shape: Sequence[int],
    preserve_dims: int = 1,
    name: str | None = None,
) -> tf.Tensor:
    """Reshapes `inputs` with a fresh `snt.Reshape(output_shape, preserve_dims)`.

    >>> snt.reshape(tf.zeros([8, 6]), output_shape=[2, 3]).shape
    TensorShape([8, 2, 3])
    """
    return Reshape(output_shape=output_shape, preserve_dims=preserve_dims, name=name)(
        inputs
    )


def flatten(inputs: Any, name: str = "flatten") -> tf.Tensor:
    """Flattens all but the first dimension of `inputs` (see `snt.Flatten`).

    >>> snt.flatten(tf.zeros([8, 3, 4])).shape
    TensorShape([8, 12])
    """
    return Flatten(name=name)(inputs)
