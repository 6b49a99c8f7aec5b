"""Initializers: callables `(shape, dtype) -> tf.Tensor` used for variables."""

from sonnet._src.initializers import Constant as Constant
from sonnet._src.initializers import Identity as Identity
from sonnet._src.initializers import Initializer as Initializer
from sonnet._src.initializers import Ones as Ones
from sonnet._src.initializers import Orthogonal as Orthogonal
from sonnet._src.initializers import RandomNormal as RandomNormal
from sonnet._src.initializers import RandomUniform as RandomUniform
from sonnet._src.initializers import TruncatedNormal as TruncatedNormal
from sonnet._src.initializers import VarianceScaling as VarianceScaling
from sonnet._src.initializers import Zeros as Zeros

__all__ = (
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
)
