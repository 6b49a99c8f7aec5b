"""Sonnet 2.0.2's `sonnet.src.optimizers.momentum`: `Momentum` and its update rule."""

from __future__ import annotations

from typing import Any

from sonnet._src.optimizers.momentum import Momentum


def momentum_update(
    update: Any, learning_rate: Any, mu: Any, momentum: Any, use_nesterov: bool
) -> tuple[Any, Any]:
    """One momentum step for one parameter, for custom optimizers.

    Args:
      update: The gradient.
      learning_rate: Learning rate.
      mu: Decay of the accumulated momentum.
      momentum: The accumulated momentum before this step.
      use_nesterov: Whether to take Nesterov's look-ahead step.

    Returns:
      `(update, momentum)`: the amount to subtract from the parameter and the
      new momentum.

    >>> from sonnet.src.optimizers import momentum
    >>> momentum.momentum_update(2.0, 0.1, 0.9, 1.0, use_nesterov=False)
    (0.29, 2.9)
    """
    momentum = mu * momentum + update
    if use_nesterov:
        return learning_rate * (mu * momentum + update), momentum
    return learning_rate * momentum, momentum


__all__ = ["Momentum", "momentum_update"]
