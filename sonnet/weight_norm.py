"""Weight normalisation: `snt.weight_norm.add(model)`."""

from sonnet._src.weight_norm import WeightNorm as WeightNorm
from sonnet._src.weight_norm import add as add
from sonnet._src.weight_norm import remove as remove

__all__ = ["WeightNorm", "add", "remove"]
