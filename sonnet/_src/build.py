"""`snt.build`: create a module's variables from input specs without running it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf


def _as_spec(arg: Any) -> Any:
    if isinstance(arg, (list, tuple)) and all(
        d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in arg
    ):
        return tf.TensorSpec(arg)
    return arg


def build(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Traces `f` on abstract inputs, creating its variables; returns output specs.

    Positional arguments that are lists/tuples of ints and `None`s become
    float32 `tf.TensorSpec`s of that shape; `tf.TensorSpec`s are used as they
    are. Stateful updates inside `f` are traced but not run.

    Args:
      f: A function or module to build.
      *args: Shapes (lists of ints/None), `tf.TensorSpec`s or other values.
      **kwargs: Passed to `f` unchanged.

    Returns:
      The structure of `f`'s outputs as `tf.TensorSpec`s (`None` stays `None`).

    >>> mlp = snt.nets.MLP([16, 10])
    >>> snt.build(mlp, [None, 28])
    TensorSpec(shape=(None, 10), dtype=tf.float32, name=None)
    >>> [v.shape.as_list() for v in mlp.trainable_variables]
    [[16], [28, 16], [10], [16, 10]]
    """
    specs = tuple(_as_spec(a) for a in args)
    concrete = tf.function(f).get_concrete_function(*specs, **kwargs)
    return tf.nest.map_structure(
        lambda s: None if s is None else tf.TensorSpec(s.shape, s.dtype),
        concrete.structured_outputs,
    )
