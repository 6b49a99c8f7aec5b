"""2.0.2's `sonnet.src.regularizers` path (see `sonnet.src`)."""

from sonnet._src.regularizers import L1, L2, OffDiagonalOrthogonal, Regularizer

__all__ = ["L1", "L2", "OffDiagonalOrthogonal", "Regularizer"]
