"""Sonnet 2.0.2's `sonnet.src.utils`: the helpers code built on it used."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import initializers
from sonnet._src import utils as _utils
from sonnet._src.utils import (
    CompareById,
    get_channel_index,
    replicate,
    smart_autograph,
)
from sonnet._src.variable_table import format_variables, log_variables

_ZEROS = initializers.Zeros()


def _shaped(inputs: Any) -> Any:
    """`inputs`, or a tensor for NumPy arrays and lists (2.0.2 took both)."""
    return (
        inputs
        if isinstance(getattr(inputs, "shape", None), tf.TensorShape)
        else (tf.convert_to_tensor(inputs))
    )


def assert_rank(inputs: Any, rank: int) -> None:
    """Raises a `ValueError` unless `inputs` has exactly `rank` dimensions."""
    _utils.assert_rank(_shaped(inputs), rank)


def assert_minimum_rank(inputs: Any, rank: int) -> None:
    """Raises a `ValueError` unless `inputs` has at least `rank` dimensions."""
    _utils.assert_minimum_rank(_shaped(inputs), rank)


def variable_like(
    inputs: tf.Tensor | tf.Variable,
    initializer: initializers.Initializer = _ZEROS,
    trainable: bool | None = None,
    name: str | None = None,
) -> tf.Variable:
    """A variable with the shape, dtype and device of `inputs`, as 2.0.2 made it.

    Args:
      inputs: A tensor or variable.
      initializer: Its initial value (default zeros).
      trainable: Default None: a variable's own flag, True for a tensor.
      name: Default None: the name of `inputs` (without its `:0`).

    >>> from sonnet.src import utils
    >>> v = utils.variable_like(tf.Variable(tf.ones([2]), trainable=False))
    >>> v.numpy().tolist(), v.trainable
    ([0.0, 0.0], False)
    """
    if trainable is None:
        trainable = getattr(inputs, "trainable", True)
    if name is None:
        name = (getattr(inputs, "name", None) or "Variable").split(":")[0]
    with tf.device(inputs.device):
        return tf.Variable(
            initializer(inputs.shape, inputs.dtype), trainable=trainable, name=name
        )


__all__ = [
    "CompareById",
    "assert_minimum_rank",
    "assert_rank",
    "format_variables",
    "get_channel_index",
    "log_variables",
    "replicate",
    "smart_autograph",
    "variable_like",
]
