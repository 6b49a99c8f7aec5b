"""Optimizers: `snt.optimizers.SGD`, `Momentum`, `Adam`, `AdamW`, `RMSProp`,
and learning-rate `schedules`."""

from sonnet._src.optimizers.accumulate import Accumulator as Accumulator
from sonnet._src.optimizers.adam import Adam as Adam
from sonnet._src.optimizers.adamw import AdamW as AdamW
from sonnet._src.optimizers.momentum import Momentum as Momentum
from sonnet._src.optimizers.muon import Muon as Muon
from sonnet._src.optimizers.muon import muon_route as muon_route
from sonnet._src.optimizers.rmsprop import RMSProp as RMSProp
from sonnet._src.optimizers.sgd import SGD as SGD
from sonnet.optimizers import schedules as schedules

__all__ = [
    "Accumulator",
    "Adam",
    "AdamW",
    "Momentum",
    "Muon",
    "RMSProp",
    "SGD",
    "muon_route",
    "schedules",
]
