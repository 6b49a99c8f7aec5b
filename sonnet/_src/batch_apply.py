"""`snt.BatchApply`: apply a module to inputs with several leading batch dims."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, errors


def _is_tensor(x: Any) -> bool:
    return isinstance(x, (tf.Tensor, tf.Variable))


def _num_dims(value: Any) -> int:
    """`num_dims`: a non-zero integer; a negative one counts from the end.

    The original sliced `shape[:num_dims]`, so `-1` merges all but the last
    dimension; zero left nothing to merge (its `TypeError`, also ours).
    """
    result = checks.integer("num_dims", value)
    if result == 0:
        raise errors.invalid_argument_type("num_dims", "must be non-zero", value)
    return result


def _resolve(num_dims: int, rank: int) -> int:
    """A negative `num_dims` as a count of leading dimensions of a `rank` tensor."""
    if num_dims > 0:
        return num_dims
    if rank + num_dims <= 0:
        raise errors.invalid_argument_type(
            "num_dims",
            f"must leave at least one leading dimension of the rank-{rank} input",
            num_dims,
        )
    return rank + num_dims


def merge_leading_dims(x: Any, num_dims: int) -> Any:
    """Merges the first `num_dims` dimensions of `x` into one.

    Non-tensors, and tensors with fewer than `num_dims` dimensions, are
    returned unchanged.

    Args:
      x: A tensor of shape `[d_0, ..., d_{n-1}] + S` (or any other value).
      num_dims: Number of leading dimensions to merge, a non-zero int; a
        negative one counts from the end (`-1`: all but the last).

    Returns:
      `x` reshaped to `[d_0 * ... * d_{n-1}] + S`.

    Raises:
      ValueError: if `x` has an unknown rank.

    >>> snt.merge_leading_dims(tf.zeros([2, 3, 4]), num_dims=2).shape
    TensorShape([6, 4])
    """
    num_dims = _num_dims(num_dims)
    if not _is_tensor(x):
        return x
    shape = x.shape
    if shape.rank is None:
        raise errors.bad_value(
            "x", "must have a known rank to merge its leading dimensions", x
        )
    num_dims = _resolve(num_dims, shape.rank)
    if num_dims > shape.rank:
        return x
    if shape.is_fully_defined():
        dims = shape.as_list()
        return tf.reshape(x, [int(np.prod(dims[:num_dims]))] + dims[num_dims:])
    dynamic = tf.shape(x)
    merged = tf.reshape(
        x,
        tf.concat([[tf.reduce_prod(dynamic[:num_dims])], dynamic[num_dims:]], axis=0),
    )
    leading = shape[:num_dims]
    size = leading.num_elements() if leading.is_fully_defined() else None
    merged.set_shape(tf.TensorShape([size]).concatenate(shape[num_dims:]))
    return merged


def split_leading_dim(x: Any, example: Any, num_dims: int) -> Any:
    """Splits the first dimension of `x` into the first `num_dims` of `example`.

    The inverse of `merge_leading_dims`. Non-tensors are returned unchanged.

    Args:
      x: A tensor of shape `[N] + S` (or any other value; scalars are also
        returned unchanged).
      example: A tensor whose first `num_dims` dimensions (with product `N`)
        give the new leading dimensions.
      num_dims: Number of leading dimensions, a positive int.

    Returns:
      `x` reshaped to `example.shape[:num_dims] + S`.

    >>> x = tf.zeros([6, 5])
    >>> snt.split_leading_dim(x, tf.zeros([2, 3, 4]), num_dims=2).shape
    TensorShape([2, 3, 5])
    """
    num_dims = checks.size("num_dims", num_dims)
    if not _is_tensor(x) or x.shape.rank == 0:
        return x
    try:
        example_shape = tf.TensorShape(example.shape)
    except (AttributeError, TypeError, ValueError) as e:
        raise errors.bad_type("example", "must be a tensor or array", example) from e
    if example_shape.rank is not None and example_shape.rank < num_dims:
        raise errors.bad_value(
            "example", f"must have at least `num_dims`={num_dims} dimensions", example
        )
    leading = example_shape[:num_dims]
    trailing = x.shape[1:]
    try:
        if leading.is_fully_defined() and trailing.is_fully_defined():
            return tf.reshape(x, leading.as_list() + trailing.as_list())
        new_shape = tf.concat([tf.shape(example)[:num_dims], tf.shape(x)[1:]], axis=0)
        result = tf.reshape(x, new_shape)
    except (tf.errors.InvalidArgumentError, ValueError) as e:
        # The original let the reshape fail: `InvalidArgumentError`.
        raise errors.invalid_argument(
            "x",
            f"must have a first dimension equal to the product of the first "
            f"{num_dims} dimensions of `example` (shape {example.shape}) ({e})",
            x,
        ) from e
    result.set_shape(leading.concatenate(trailing))
    return result


class BatchApply(base.Module):
    """Applies a module to inputs with several leading batch dimensions.

    Every tensor argument has its first `num_dims` dimensions merged into one
    before calling `module`, and every tensor output has its first dimension
    split back. Useful for modules that take `[B, ...]` inputs (e.g.
    `snt.Linear` on `[T, B, D]` sequences, or convolutions on videos).
    NumPy arrays are treated as tensors; other values (Python numbers,
    strings, None) are passed through unchanged.

    Args:
      module: The module (or any callable) to apply.
      num_dims: Number of leading dimensions to merge (default 2), a positive
        int.
      name: Module name (default `batch_apply`).

    Shapes:
      inputs `[d_0, ..., d_{num_dims-1}] + S` -> module gets `[prod(d)] + S`;
      outputs `[prod(d)] + S'` -> `[d_0, ..., d_{num_dims-1}] + S'`.

    >>> apply = snt.BatchApply(snt.Linear(4))
    >>> apply(tf.zeros([5, 3, 2])).shape
    TensorShape([5, 3, 4])
    """

    def __init__(
        self, module: Callable[..., Any], num_dims: int = 2, name: str | None = None
    ):
        super().__init__(name=name)
        checks.function("module", module, "must be a module or function (not a class)")
        self.module = module
        self.num_dims = _num_dims(num_dims)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls `module` on the merged inputs and splits its outputs.

        Args:
          *args: Positional arguments for `module` (nests of tensors allowed).
          **kwargs: Keyword arguments for `module`.

        Returns:
          The outputs of `module`, with their leading dimension split.

        Raises:
          ValueError: if there is no tensor among the arguments, or the first
            one has fewer than `num_dims` dimensions.
        """
        to_tensor = lambda x: (
            tf.convert_to_tensor(x) if isinstance(x, np.ndarray) else x
        )
        args = tf.nest.map_structure(to_tensor, args)
        kwargs = tf.nest.map_structure(to_tensor, kwargs)
        example = next(
            (x for x in tf.nest.flatten((args, kwargs)) if _is_tensor(x)), None
        )
        if example is None:
            # The original read `.shape` of the first argument.
            raise errors.lacks_attribute_value(
                "args",
                "must contain at least one tensor (whose leading dimensions are "
                "merged)",
                (args, kwargs),
            )
        num_dims = self.num_dims
        if num_dims < 0 and example.shape.rank is not None:
            num_dims = _resolve(num_dims, example.shape.rank)
        if example.shape.rank is not None and example.shape.rank < num_dims:
            raise errors.bad_value(
                "args",
                f"must start with a tensor of rank >= num_dims={num_dims}",
                example,
            )
        merge = lambda x: merge_leading_dims(x, num_dims)
        outputs = self.module(
            *tf.nest.map_structure(merge, args), **tf.nest.map_structure(merge, kwargs)
        )
        return tf.nest.map_structure(
            lambda y: split_leading_dim(y, example, num_dims), outputs
        )
