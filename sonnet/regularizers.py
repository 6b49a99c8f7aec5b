"""Regularizers: callables mapping a list of tensors to a scalar penalty."""

from sonnet._src.regularizers import L1 as L1
from sonnet._src.regularizers import L2 as L2
from sonnet._src.regularizers import OffDiagonalOrthogonal as OffDiagonalOrthogonal
from sonnet._src.regularizers import Regularizer as Regularizer

# A list, not a tuple, as in the original Sonnet 2.
__all__ = ["L1", "L2", "OffDiagonalOrthogonal", "Regularizer"]
