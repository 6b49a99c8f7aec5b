"""Optimizers: `snt.optimizers.SGD`, `Momentum`, `Adam`, `RMSProp`."""

from sonnet._src.optimizers.adam import Adam as Adam
from sonnet._src.optimizers.momentum import Momentum as Momentum
from sonnet._src.optimizers.rmsprop import RMSProp as RMSProp
from sonnet._src.optimizers.sgd import SGD as SGD

__all__ = ["Adam", "Momentum", "RMSProp", "SGD"]
