"""Memory reads of 2.0.2's DNC building blocks (`sonnet.src.nets.dnc.read`)."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf


def read(
    memory: tf.Tensor,
    weights: tf.Tensor,
    squash_op: Callable[[tf.Tensor], tf.Tensor] = tf.nn.tanh,
    squash_before_access: bool = True,
    squash_after_access: bool = False,
) -> tf.Tensor:
    """Reads words from memory: the read weights times the memory.

    Args:
      memory: `[batch, memory_size, word_size]`.
      weights: `[batch, num_reads, memory_size]` read weights.
      squash_op: Applied to the read words with `squash_after_access`.
      squash_before_access: Kept for 2.0.2's signature; as there, it changes
        nothing (2.0.2 computed `squash_op(weights)` and dropped the result).
      squash_after_access: Whether to squash the words read (default False).

    Returns:
      `[batch, num_reads, word_size]`.
    """
    del squash_before_access  # No effect in 2.0.2 either (see above).
    with tf.name_scope("read_memory"):
        words = tf.matmul(weights, memory)
        return squash_op(words) if squash_after_access else words
