"""Test helpers shared by the attention suites: a dense and a chunked
`snt.MultiHeadAttention` with the same weights, one call's outputs with the
gradients of a fixed loss, and multi-head attention in NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
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


def numpy_attention(mha: Any, x: tf.Tensor, allowed: Any, factors: Any = None) -> Any:
    """`mha(x)` in NumPy (grouped-query heads repeated), with `allowed`
    broadcasting to `[B, heads, T, S]` and optional dropout `factors` of the
    same shape on the weights."""
    names = ("query", "key", "value", "output")
    w = {n: getattr(mha, n).w.numpy() for n in names}
    b = {n: getattr(mha, n).b.numpy() for n in names}
    x = x.numpy()
    heads, kv_heads, size = mha.num_heads, mha.num_kv_heads, mha.key_size
    q = (x @ w["query"] + b["query"]).reshape(*x.shape[:2], heads, size)
    k, v = (
        np.repeat(
            (x @ w[n] + b[n]).reshape(*x.shape[:2], kv_heads, size),
            heads // kv_heads,
            axis=2,
        )
        for n in ("key", "value")
    )
    logits = np.einsum("bthd,bshd->bhts", q, k) / np.sqrt(size)
    logits = np.where(allowed, logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    if factors is not None:
        weights = weights * factors
    out = np.einsum("bhts,bshd->bthd", weights, v).reshape(*x.shape[:2], -1)
    return out @ w["output"] + b["output"]
