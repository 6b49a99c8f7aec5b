"""Regularizers: callables mapping a list of tensors to a scalar penalty."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import checks, errors, utils

__all__ = ["L1", "L2", "OffDiagonalOrthogonal", "Regularizer"]


class Regularizer(abc.ABC):
    """Base class: a regularizer maps a sequence of tensors to a scalar loss.

    >>> class Count(snt.regularizers.Regularizer):
    ...   def __call__(self, tensors):
    ...     return tf.add_n([tf.size(t) for t in tensors])
    >>> int(Count()([tf.zeros([2, 3]), tf.zeros([4])]))
    10
    """

    @abc.abstractmethod
    def __call__(self, tensors: Sequence[Any]) -> tf.Tensor:
        """Returns the penalty for `tensors` (a scalar tensor)."""


def _check_scale(scale: Any) -> Any:
    if isinstance(scale, (tf.Tensor, tf.Variable)):
        if not scale.dtype.is_floating or scale.shape.rank not in (0, None):
            raise errors.bad_type("scale", "must be a floating point scalar", scale)
        return scale
    # Numbers in any spelling (NumPy scalars, 0-d arrays), kept as given (the
    # repr shows them); NaN or infinite scales only give NaN/inf losses.
    checks.real("scale", scale, minimum=0)
    return scale


def _check_tensors(tensors: Any) -> list[tf.Tensor]:
    if isinstance(tensors, (tf.Tensor, tf.Variable, np.ndarray, str)) or not (
        isinstance(tensors, Sequence)
    ):
        # Also a `ValueError`, as the original's `if not tensors:` raised for
        # a tensor (or a TF op for other values).
        raise errors.invalid_argument_type(
            "tensors", "must be a list or tuple of floating point tensors", tensors
        )
    result = []
    for t in tensors:
        t = utils.to_tensor("tensors", t)
        if not t.dtype.is_floating:
            raise errors.bad_type("tensors", "must hold floating point tensors", t)
        result.append(t)
    dtypes = {t.dtype for t in result}
    if len(dtypes) > 1:
        # The original's `tf.add_n` failed (`InvalidArgumentError`).
        raise errors.invalid_argument_type(
            "tensors",
            "must all have the same dtype",
            sorted(d.name for d in dtypes),
        )
    return result


class _ScaledSum(Regularizer):
    """`scale * sum(penalty(t) for t in tensors)`."""

    _penalty: Callable[[tf.Tensor], tf.Tensor]
    _repr_name: str

    def __init__(self, scale: Any):
        self.scale = _check_scale(scale)

    def __repr__(self) -> str:
        return f"{self._repr_name}(scale={self.scale})"

    __str__ = __repr__

    def __call__(self, tensors: Sequence[Any]) -> tf.Tensor:
        checked = _check_tensors(tensors)
        if not checked:
            return tf.zeros_like(self.scale)
        total = tf.add_n([self._penalty(t) for t in checked])
        scale = self.scale
        if isinstance(scale, (tf.Tensor, tf.Variable)):
            scale = tf.cast(scale, total.dtype)
        return scale * total


class L1(_ScaledSum):
    """L1 penalty: `scale * sum(|t|)` over all elements of all tensors.

    Args:
      scale: Non-negative multiplier of the penalty.

    >>> float(snt.regularizers.L1(0.5)([tf.constant([1.0, -2.0])]))
    1.5
    """

    _repr_name = "L1"

    @staticmethod
    def _penalty(t: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.abs(t))


class L2(_ScaledSum):
    """L2 penalty: `scale * sum(t**2)` over all elements (no factor 1/2).

    Args:
      scale: Non-negative multiplier of the penalty.

    >>> float(snt.regularizers.L2(0.5)([tf.constant([1.0, -2.0])]))
    2.5
    """

    _repr_name = "L2"

    @staticmethod
    def _penalty(t: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.square(t))


class OffDiagonalOrthogonal(_ScaledSum):
    """Penalises non-orthogonal columns: squared off-diagonal entries of `WᵀW`.

    Each tensor (rank >= 2) is viewed as a matrix `W` of shape
    `[-1, t.shape[-1]]`; the penalty is the sum of the squared off-diagonal
    entries of `WᵀW`, which is zero exactly when the columns are orthogonal.
    The repr is `Orthogonal(scale=...)`, as in the original Sonnet 2.

    Args:
      scale: Non-negative multiplier of the penalty.

    >>> reg = snt.regularizers.OffDiagonalOrthogonal(1.0)
    >>> float(reg([tf.eye(3)])), float(reg([tf.ones([2, 2])]))
    (0.0, 8.0)
    """

    _repr_name = "Orthogonal"

    @staticmethod
    def _penalty(t: tf.Tensor) -> tf.Tensor:
        if t.shape.rank is None or t.shape.rank < 2:
            raise errors.bad_value("tensors", "must hold tensors of rank >= 2", t)
        w = tf.reshape(t, [-1, tf.shape(t)[-1]])
        gram = tf.square(tf.matmul(w, w, transpose_a=True))
        return tf.reduce_sum(gram) - tf.linalg.trace(gram)
