"""Test helpers shared by the chunked-attention suites: a dense and a
chunked `snt.MultiHeadAttention` with the same weights, and one call's
outputs with the gradients of a fixed loss."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

import sonnet as snt


def pair(chunk_size: int = 4, **kwargs: Any) -> tuple[Any, Any]:
    """A dense and a chunked module of the same configuration (unbuilt)."""
    dense = snt.MultiHeadAttention(**kwargs, chunked=False)
    chunked = snt.MultiHeadAttention(**kwargs, chunked=True, chunk_size=chunk_size)
    return dense, chunked


def build(dense: Any, chunked: Any, x: tf.Tensor) -> None:
    """Builds both on `x` and gives the chunked one the dense one's weights."""
    dense(x)
    chunked(x)
    for a, b in zip(dense.variables, chunked.variables, strict=True):
        b.assign(a)


def outputs_and_grads(module: Any, x: tf.Tensor, **call: Any) -> tuple[Any, list[Any]]:
    """`module(x, **call)` and the gradients of `sum(y * sin(y))` with
    respect to `x` and the module's trainable variables."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = module(x, **call)
        loss = tf.reduce_sum(y * tf.sin(y))
    grads: list[Any] = tape.gradient(loss, [x, *module.trainable_variables])
    return y, grads
