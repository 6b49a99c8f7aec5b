"""2.0.2's `sonnet.src.initializers` path (see `sonnet.src`)."""

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
