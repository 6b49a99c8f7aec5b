"""Memory writes of 2.0.2's DNC building blocks (`sonnet.src.nets.dnc.write`).

Shapes: memory `[batch, memory_size, word_size]`, write addresses `[batch,
num_writes, memory_size]`.
"""

from __future__ import annotations

import tensorflow as tf


def additive_write(
    memory: tf.Tensor, address: tf.Tensor, values: tf.Tensor
) -> tf.Tensor:
    """`memory + address^T values`: each head adds its `[batch, num_writes,
    word_size]` values to the rows it addresses."""
    with tf.name_scope("write_memory"):
        return memory + tf.matmul(address, values, adjoint_a=True)


def erase(memory: tf.Tensor, address: tf.Tensor, reset_weights: tf.Tensor) -> tf.Tensor:
    """Scales each memory entry by the product over heads of `1 - w(i) e_j`.

    `reset_weights` (`[batch, num_writes, word_size]`, in `[0, 1]`) say how
    much of each word position a head clears at the rows it addresses.
    """
    with tf.name_scope("erase_memory"):
        per_head = tf.expand_dims(address, 3) * tf.expand_dims(reset_weights, 2)
        return memory * tf.reduce_prod(1 - per_head, axis=1)


def erase_rows(
    memory: tf.Tensor, address: tf.Tensor, reset_row_weights: tf.Tensor
) -> tf.Tensor:
    """As `erase`, with one reset strength per head for whole rows
    (`reset_row_weights`: `[batch, num_writes]`)."""
    with tf.name_scope("erase_rows"):
        per_head = address * tf.expand_dims(reset_row_weights, -1)
        keep = tf.reduce_prod(1 - per_head, axis=1)
        return memory * tf.expand_dims(keep, -1)


def erase_and_write(
    memory: tf.Tensor, address: tf.Tensor, reset_weights: tf.Tensor, values: tf.Tensor
) -> tf.Tensor:
    """`erase` then `additive_write`: the Neural Turing Machine's write
    (Graves et al. 2014, arXiv:1410.5401, equations 3 and 4)."""
    return additive_write(erase(memory, address, reset_weights), address, values)
