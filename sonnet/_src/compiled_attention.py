"""The attention core of traced training steps as XLA-compiled functions.

`snt.MultiHeadAttention` traced without a cache (or writing a prompt into
one) computes, per batch element and head, `softmax(q k^T + bias) v` from
`[B, T, heads, size]` operands.
TensorFlow's CPU kernels run its batch matmuls of small matrices (`[T, 64]`
by `[64, T]`, one per batch element and head) at about a third of the
machine's matmul rate and the mask, softmax and their gradients as separate
passes over `[B, heads, T, S]`; the same maths compiled by XLA fuses the
elementwise work into the products (bench Transformer, `[16, 4, 128, 64]`
per layer: forward 9.7 -> 4.6 ms, forward and backward 17.9 -> 12.7 ms; a
train step about 6% faster). The operands stay in the projections' layout:
XLA reads them across the heads inside its products instead of TensorFlow
transposing each to `[B, heads, T, size]` and back (forward and backward
8.3 + 16.6 -> 7.9 + 12.9 ms per layer).

`core(q, k, v, attend, softmax_dtype)` is that core with a hand-written
gradient, both directions compiled (`forward`, `backward`); `usable` says
whether a call can take it. The plain ops in `MultiHeadAttention` stay the
oracle (`attention.COMPILED_CORE = False` traces them) and the path for
eager calls, caches, dropout, grouped heads and masks other than `[T, S]`.

Shapes must be known when the step is traced: XLA compiles one program per
shape, and a `None` dimension would compile a new one for every length the
trace meets at run time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import tensorflow as tf

# Dtypes whose products XLA compiles on every device.
_DTYPES = frozenset([tf.float32, tf.float16, tf.bfloat16, tf.float64])


def usable(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, attend: Any) -> bool:
    """Whether `core` can run these operands: known shapes, a float dtype
    XLA compiles, and no mask or a `[T, S]` boolean one."""
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    if attend is not None and (
        attend.shape.rank != 2 or not attend.shape.is_fully_defined()
    ):
        return False
    return (
        q.shape.is_fully_defined()
        and k.shape.is_fully_defined()
        and v.shape.is_fully_defined()
    )


def core(
    q: tf.Tensor,
    k: tf.Tensor,
    v: tf.Tensor,
    attend: tf.Tensor | None,
    softmax_dtype: tf.DType,
) -> tf.Tensor:
    """`softmax(q k^T, masked) v` with the products and softmax compiled.

    Args:
      q: Scaled queries `[B, T, heads, key_size]`.
      k: Keys `[B, S, heads, key_size]`, the dtype of `q`.
      v: Values `[B, S, heads, value_size]`, the dtype of `q`.
      attend: None, or a boolean `[T, S]`: where it is False the logit is
        the softmax dtype's minimum (no weight unless a whole row is masked,
        as in the plain path).
      softmax_dtype: The dtype of the logits' softmax (float32 for half
        precision operands).

    Returns:
      The weighted values `[B, T, heads, value_size]`, dtype of `v`.
    """
    return _with_gradient(softmax_dtype, attend is not None)(q, k, v, attend)


@functools.cache
def _with_gradient(softmax_dtype: tf.DType, masked: bool) -> Callable[..., Any]:
    """`core` for one softmax dtype, with or without a mask."""
    forward, backward = _compiled(softmax_dtype, masked)

    def gradient(q: Any, k: Any, v: Any, weights: Any) -> Callable[..., Any]:
        def grad(dheads: tf.Tensor) -> tuple[tf.Tensor, ...]:
            return backward(dheads, q, k, v, weights)

        return grad

    @tf.custom_gradient
    def with_mask(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, attend: Any) -> Any:
        heads, weights = forward(q, k, v, attend)
        grad = gradient(q, k, v, weights)
        return heads, lambda dheads: (*grad(dheads), None)

    @tf.custom_gradient
    def without_mask(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> Any:
        heads, weights = forward(q, k, v)
        return heads, gradient(q, k, v, weights)

    if masked:
        return with_mask
    return lambda q, k, v, attend: without_mask(q, k, v)


@functools.cache
def _compiled(softmax_dtype: tf.DType, masked: bool) -> tuple[Any, Any]:
    """The compiled forward and backward functions for one softmax dtype."""

    def logits_of(q: tf.Tensor, k: tf.Tensor, attend: Any) -> tf.Tensor:
        logits = tf.einsum("bthd,bshd->bhts", q, k)
        if logits.dtype != softmax_dtype:
            logits = tf.cast(logits, softmax_dtype)
        if attend is not None:
            bias = tf.where(attend, tf.zeros([], softmax_dtype), softmax_dtype.min)
            logits = logits + bias
        return logits

    @tf.function(jit_compile=True, autograph=False)
    def forward(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, *attend: tf.Tensor) -> Any:
        weights = tf.nn.softmax(logits_of(q, k, attend[0] if masked else None))
        heads = tf.einsum("bhts,bshd->bthd", tf.cast(weights, v.dtype), v)
        return heads, weights

    @tf.function(jit_compile=True, autograph=False)
    def backward(
        dheads: tf.Tensor,
        q: tf.Tensor,
        k: tf.Tensor,
        v: tf.Tensor,
        weights: tf.Tensor,
    ) -> Any:
        # heads = w v: dv = w^T dh, dw = dh v^T; softmax: dl = w (dw - <dw, w>).
        dv = tf.einsum("bhts,bthd->bshd", tf.cast(weights, v.dtype), dheads)
        dweights = tf.cast(tf.einsum("bthd,bshd->bhts", dheads, v), weights.dtype)
        dlogits = weights * (
            dweights - tf.reduce_sum(dweights * weights, -1, keepdims=True)
        )
        dlogits = tf.cast(dlogits, q.dtype)
        dq = tf.einsum("bhts,bshd->bthd", dlogits, k)
        dk = tf.einsum("bhts,bthd->bshd", dlogits, q)
        return dq, dk, dv

    return forward, backward
