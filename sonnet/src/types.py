"""Sonnet 2.0.2's `sonnet.src.types`: the type aliases of its signatures."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf

# An update for one parameter: a dense or sparse gradient, or None (skipped).
ParameterUpdate = tf.Tensor | tf.IndexedSlices | None
TensorLike = np.ndarray | tf.Tensor | tf.Variable
BoolLike = bool | np.bool_ | TensorLike
IntegerLike = int | np.integer | TensorLike
FloatLike = float | np.floating | TensorLike
ShapeLike = int | Sequence[int] | tf.TensorShape
TensorNest = TensorLike | Iterable["TensorNest"] | Mapping[str, "TensorNest"]
ActivationFn = Callable[[TensorLike], TensorLike]
Axis = int | slice | Sequence[int]
GradFn = Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor | None]]

__all__ = [
    "ActivationFn",
    "Axis",
    "BoolLike",
    "FloatLike",
    "GradFn",
    "IntegerLike",
    "ParameterUpdate",
    "ShapeLike",
    "TensorLike",
    "TensorNest",
]
