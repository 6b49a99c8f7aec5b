"""Learning-rate schedules: `snt.optimizers.schedules`.

Callables `schedule(step) -> rate` for the `learning_rate` of any Sonnet
optimizer, which calls them in every `apply` with its `step`.
"""

from sonnet._src.optimizers.schedules import CosineDecay as CosineDecay
from sonnet._src.optimizers.schedules import ExponentialDecay as ExponentialDecay
from sonnet._src.optimizers.schedules import Join as Join
from sonnet._src.optimizers.schedules import LinearWarmup as LinearWarmup
from sonnet._src.optimizers.schedules import PiecewiseConstant as PiecewiseConstant
from sonnet._src.optimizers.schedules import WarmupCosine as WarmupCosine

__all__ = [
    "CosineDecay",
    "ExponentialDecay",
    "Join",
    "LinearWarmup",
    "PiecewiseConstant",
    "WarmupCosine",
]
