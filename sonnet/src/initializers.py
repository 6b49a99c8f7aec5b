"""2.0.2's `sonnet.src.initializers` path (see `sonnet.src`)."""

from typing import Any

from sonnet._src import initializers as _initializers
from sonnet._src.initializers import (
    Constant,
    Identity,
    Initializer,
    Ones,
    Orthogonal,
    RandomNormal,
    RandomUniform,
    TruncatedNormal,
    VarianceScaling,
    Zeros,
    check_initializers,
)

__all__ = [
    "Constant",
    "Identity",
    "Initializer",
    "Ones",
    "Orthogonal",
    "RandomNormal",
    "RandomUniform",
    "TruncatedNormal",
    "VarianceScaling",
    "Zeros",
    "check_initializers",
]


def _compute_fans(shape: Any) -> tuple[Any, Any]:
    """(fan_in, fan_out) of a weight of shape `shape` (a sequence of sizes or a
    `tf.TensorShape`), as `VarianceScaling` counts them: 2.0.2's private helper,
    which code written against it (and its tests) called."""
    return _initializers._compute_fans(list(shape))
