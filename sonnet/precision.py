"""Mixed precision, the fast path: `snt.precision.apply(module, "mixed_bfloat16")`."""

from sonnet._src.precision import DynamicLossScale as DynamicLossScale
from sonnet._src.precision import Policy as Policy
from sonnet._src.precision import apply as apply
from sonnet._src.precision import cast as cast
from sonnet._src.precision import compute_dtype as compute_dtype
from sonnet._src.precision import get_policy as get_policy
from sonnet._src.precision import variable_dtype as variable_dtype

__all__ = [
    "DynamicLossScale",
    "Policy",
    "apply",
    "cast",
    "compute_dtype",
    "get_policy",
    "variable_dtype",
]
