"""Sonnet 2.0.2's `sonnet.src.optimizers.adam`: `Adam` and its update rule."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src.optimizers.adam import Adam


def adam_update(
    g: Any, alpha: Any, beta_1: Any, beta_2: Any, epsilon: Any, t: Any, m: Any, v: Any
) -> tuple[Any, Any, Any]:
    """One Adam step for one parameter (Kingma and Ba, arXiv:1412.6980,
    Algorithm 1), for custom optimizers that build on it.

    Args:
      g: The gradient.
      alpha: Learning rate.
      beta_1: Decay of the first moment.
      beta_2: Decay of the second moment.
      epsilon: Added to the root of the second moment.
      t: The step, counted from 1.
      m: The first moment before this step.
      v: The second moment before this step.

    Returns:
      `(update, m, v)`: the amount to subtract from the parameter and the new
      moments.

    >>> from sonnet.src.optimizers import adam
    >>> update, m, v = adam.adam_update(
    ...     g=tf.constant(2.0), alpha=0.1, beta_1=0.9, beta_2=0.999,
    ...     epsilon=0.0, t=1.0, m=tf.constant(0.0), v=tf.constant(0.0))
    >>> round(float(update), 4)  # The first step moves by the learning rate.
    0.1
    """
    m = beta_1 * m + (1.0 - beta_1) * g
    v = beta_2 * v + (1.0 - beta_2) * g * g
    m_hat = m / (1.0 - tf.pow(beta_1, t))
    v_hat = v / (1.0 - tf.pow(beta_2, t))
    return alpha * m_hat / (tf.sqrt(v_hat) + epsilon), m, v


__all__ = ["Adam", "adam_update"]
