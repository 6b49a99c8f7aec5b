"""Small tensor helpers shared by the layers (below them: no module imports them back).

`initial_value` (an initializer's output as a tensor, failures naming the
argument), `shape_and_dtype` (of a tensor-like input, with the original's
errors), the eager tensor type that hot paths compare against, and the
`Initializer` type alias.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import errors, utils

# An initializer: any callable `(shape, dtype) -> tensor`.
Initializer = Callable[[Any, Any], Any]


# The type of eager tensors, looked up by `eager_tensor_type()` when a module is
# first built (creating a tensor at import time would initialise TF's runtime
# before users can configure devices). Hot paths compare `type(x) is` it.
EAGER_TENSOR: type | None = None


def eager_tensor_type() -> type:
    """Returns (and caches in `EAGER_TENSOR`) the type of eager tensors."""
    global EAGER_TENSOR
    if EAGER_TENSOR is None:
        with tf.init_scope():
            EAGER_TENSOR = type(tf.constant(0))
    return EAGER_TENSOR


def initial_value(
    argument: str, initializer: Initializer, shape: list[int], dtype: tf.DType
) -> tf.Tensor:
    """`initializer(shape, dtype)` as a tensor; failures name `argument`."""
    try:
        value = initializer(shape, dtype)
        # A tensor stays as it is: converting an eager one (e.g. made by
        # `snt.distribute.create_variables_eagerly`) inside a `tf.function`
        # would capture it into the graph, and the variable could no longer
        # be created eagerly.
        if not (isinstance(value, tf.Tensor) and value.dtype == dtype):
            value = tf.convert_to_tensor(value, dtype=dtype)
    except errors.OP_ERRORS as e:
        # Whatever the initializer raised (a `ValueError` for a dtype it does
        # not support, a `TypeError` for wrong arguments), ours is an instance.
        raise errors.invalid_argument_type(
            argument,
            f"must create a {dtype.name} tensor of shape {list(shape)} when called "
            f"as `{argument}(shape, dtype)` ({e})",
            initializer,
        ) from e
    if not value.shape.is_compatible_with(shape):
        raise errors.bad_value(
            argument,
            f"must create a tensor of the requested shape {list(shape)}, not "
            f"{value.shape.as_list()}",
            initializer,
        )
    return value


def shape_and_dtype(inputs: Any, argument: str = "inputs") -> tuple[Any, tf.DType]:
    """The static `tf.TensorShape` and `tf.DType` of a tensor-like `inputs`.

    None or a string is refused with an error that is also an
    `AttributeError`, as the original's `inputs.shape` raised.
    """
    if inputs is None or isinstance(inputs, (str, bytes)):
        raise errors.lacks_attribute(argument, "must be a tensor", inputs)
    if not isinstance(inputs, (tf.Tensor, tf.Variable, np.ndarray)):
        inputs = utils.to_tensor(argument, inputs)
    try:
        return tf.TensorShape(inputs.shape), tf.as_dtype(inputs.dtype)
    except TypeError as e:
        raise errors.bad_type(argument, "must have a TensorFlow dtype", inputs) from e
