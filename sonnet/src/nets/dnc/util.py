"""Helpers of 2.0.2's DNC building blocks (`sonnet.src.nets.dnc.util`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf


def segment_dim(
    inputs: tf.Tensor, dim: int, shapes: Sequence[tf.TensorShape]
) -> tuple[tf.Tensor, ...]:
    """Splits axis `dim` of `inputs` into consecutive pieces of the given shapes.

    Piece `i` takes the next `shapes[i].num_elements()` entries of that axis
    and has the axis replaced by `shapes[i]`: `[2, 14, 3]` cut along axis 1
    into `[3, 3]` and `[5]` gives `[2, 3, 3, 3]` and `[2, 5, 3]`. Unknown
    sizes of the other axes are read at run time.

    Args:
      inputs: The tensor to cut.
      dim: The axis, in `[-rank, rank)`.
      shapes: The `tf.TensorShape` of each piece along that axis.

    Returns:
      The pieces, in order.

    Raises:
      ValueError: if `dim` is not an axis of `inputs`.
    """
    rank = inputs.shape.rank
    if not -rank <= dim < rank:
        raise ValueError(
            f"`dim` must be an axis of `inputs` (of rank {rank}). Received: {dim}."
        )
    axis = dim % rank
    sizes = [
        size if size is not None else tf.shape(inputs)[i]
        for i, size in enumerate(inputs.shape.as_list())
    ]
    pieces = []
    start = 0
    for shape in shapes:
        count = shape.num_elements()
        begin = [0] * rank
        size = [-1] * rank
        begin[axis], size[axis] = start, count
        piece = tf.slice(inputs, begin, size)
        new_shape = sizes[:axis] + shape.as_list() + sizes[axis + 1 :]
        pieces.append(tf.reshape(piece, new_shape))
        start += count
    return tuple(pieces)


def batch_invert_permutation(permutations: tf.Tensor) -> tf.Tensor:
    """`tf.math.invert_permutation` of each row of `[batch, n]` `permutations`."""
    return tf.stack(
        [tf.math.invert_permutation(row) for row in tf.unstack(permutations)]
    )


def batch_gather(values: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """`tf.gather(values[b], indices[b])` for each leading index `b`."""
    rows = zip(tf.unstack(values), tf.unstack(indices), strict=True)
    return tf.stack([tf.gather(v, i) for v, i in rows])


def one_hot(length: int, index: Any) -> np.ndarray:
    """A float64 NumPy vector of `length` zeros with a one at `index`."""
    vector = np.zeros(length)
    vector[index] = 1
    return vector


def apply_linear(
    inputs: Any,
    linear_modules: Any,
    activation: Callable[[tf.Tensor], tf.Tensor] = tf.identity,
) -> tf.Tensor:
    """`activation(linear_modules(inputs))`, or for a pair of inputs and a pair
    of modules the activation of the sum of each module applied to its input.

    Args:
      inputs: A tensor, or a list/tuple of two tensors.
      linear_modules: A module, or a list/tuple of two (as `inputs`).
      activation: Applied to the result; default identity.
    """
    tf.nest.assert_same_structure(inputs, linear_modules)
    if isinstance(inputs, (list, tuple)):
        if not len(inputs) == len(linear_modules) == 2:
            raise AssertionError(
                "`inputs` and `linear_modules` must be one each or two each. "
                f"Received: {len(inputs)} inputs."
            )
        first, second = linear_modules
        return apply_split_linear(
            first, second, inputs[0], inputs[1], activation=activation
        )
    return activation(linear_modules(inputs))


def apply_split_linear(
    lin_module_1: Callable[[tf.Tensor], tf.Tensor],
    lin_module_2: Callable[[tf.Tensor], tf.Tensor],
    input1: tf.Tensor,
    input2: tf.Tensor,
    activation: Callable[[tf.Tensor], tf.Tensor] | None = None,
) -> tf.Tensor:
    """`lin_module_1(input1) + lin_module_2(input2)`, then `activation` if given."""
    total = lin_module_1(input1) + lin_module_2(input2)
    return total if activation is None else activation(total)
