"""2.0.2's `sonnet.src.optimizers.sgd` path (see `sonnet.src`)."""

from sonnet._src.optimizers.sgd import SGD

__all__ = ["SGD"]
