"""Sonnet 2.0.2's `sonnet.src.optimizers.rmsprop`: `RMSProp` and its update rule."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src.optimizers.rmsprop import RMSProp


def rmsprop_update(
    update: Any,
    decay: Any,
    learning_rate: Any,
    epsilon: Any,
    mu: Any,
    mom: Any,
    ms: Any,
    mg: Any,
) -> tuple[Any, Any, Any]:
    """One RMSProp step for one parameter, for custom optimizers.

    Args:
      update: The gradient.
      decay: Decay of the mean square (and mean) of the gradient.
      learning_rate: Learning rate.
      epsilon: Added to the mean square before the root.
      mu: Decay of the momentum.
      mom: The momentum before this step (also the amount to subtract).
      ms: The mean square of the gradient before this step.
      mg: The mean of the gradient before this step, or None (not centered).

    Returns:
      `(mom, ms, mg)`: the new momentum (the amount to subtract from the
      parameter), mean square and mean (None if not centered).

    >>> from sonnet.src.optimizers import rmsprop
    >>> mom, ms, mg = rmsprop.rmsprop_update(
    ...     tf.constant(2.0), decay=0.5, learning_rate=0.1, epsilon=0.0,
    ...     mu=0.0, mom=0.0, ms=tf.constant(0.0), mg=None)
    >>> round(float(mom), 6), float(ms), mg
    (0.141421, 2.0, None)
    """
    ms = tf.square(update) * (1.0 - decay) + ms * decay
    if mg is None:
        denominator = ms + epsilon
    else:
        mg = update * (1.0 - decay) + mg * decay
        denominator = ms - tf.square(mg) + epsilon
    mom = mu * mom + learning_rate * update * tf.math.rsqrt(denominator)
    return mom, ms, mg


__all__ = ["RMSProp", "rmsprop_update"]
