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
eager calls, caches, dropout, grouped heads and masks other than `[T, S]`,
and, by default, for processes where TensorFlow runs oneDNN's CPU kernels
and sees no GPU or TPU: oneDNN's batch matmuls beat these programs
(`attention._compiled_core`).

Causal self-attention with no other mask (`core(..., causal=True)`, with or
without a window) builds its mask from positions inside the program and
splits the queries into blocks (`causal_spans`), each multiplied only with
the keys it may see: the blocks above the diagonal, which the mask would
zero, are never computed (`[1, 512, 12, 64]` forward and backward 57 -> 30
ms; `[1, 2048, 8, 64]` 630 -> 268 ms).

Shapes must be known when the step is traced: XLA compiles one program per
shape, and a `None` dimension would compile a new one for every length the
trace meets at run time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

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
    causal: bool = False,
    window: int | None = None,
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
      causal: Whether the mask is exactly causal self-attention (`S == T`,
        query `i` sees keys `j <= i`; `attend` must then be None): the
        mask is built into the program and the products skip the blocks
        above the diagonal (`causal_spans`).
      window: With `causal`, query `i` also sees only keys `j > i - window`
        (None: no limit); blocks left of the band are skipped too.

    Returns:
      The weighted values `[B, T, heads, value_size]`, dtype of `v`.
    """
    spans = causal_spans(q.shape[1], window) if causal else None
    call = _with_gradient(softmax_dtype, attend is not None, spans, window)
    return call(q, k, v, attend)


# Causal queries come in blocks of at least this many: smaller products
# cost more per flop than the masked blocks they would skip.
_MIN_BLOCK = 64
# At most this many query blocks: each adds products and a compiled loop.
_MAX_BLOCKS = 8

Spans = tuple[tuple[int, int, int, int], ...]


@functools.lru_cache(maxsize=64)
def causal_spans(time: int, window: int | None = None) -> Spans:
    """Query blocks of causal self-attention over `time` positions and the
    keys each block sees: `(query start, query end, key start, key end)`.

    Query block `[s, e)` needs keys `[0, e)` (or `[s - window + 1, e)`):
    the products skip the fully masked blocks above the diagonal (and left
    of a window's band), `(n + 1) / 2n` of the square's work for `n`
    blocks. Measured on 2 AVX2 cores, forward and backward: `[16, 128, 4,
    64]` 17.0 -> 15.2 ms (2 blocks), `[1, 512, 12, 64]` 57 -> 30 ms (8),
    `[1, 2048, 8, 64]` 630 -> 268 ms (8).
    """
    blocks = max(1, min(_MAX_BLOCKS, time // _MIN_BLOCK))
    bounds = [round(i * time / blocks) for i in range(blocks + 1)]
    spans = []
    for start, end in zip(bounds, bounds[1:]):
        first = 0 if window is None else max(0, start - window + 1)
        spans.append((start, end, first, end))
    return tuple(spans)


def _causal_bias(
    span: tuple[int, int, int, int], window: int | None, dtype: tf.DType
) -> tf.Tensor:
    """The `[e - s, key end - key start]` additive mask of one causal span:
    0 where the query sees the key, the dtype's minimum elsewhere (built
    from positions inside the program, which XLA fuses into the logits)."""
    start, end, first, last = span
    rows = tf.range(start, end)[:, None]
    columns = tf.range(first, last)[None, :]
    allowed = columns <= rows
    if window is not None:
        allowed = allowed & (columns > rows - window)
    return tf.where(allowed, tf.zeros([], dtype), dtype.min)


@functools.cache
def _with_gradient(
    softmax_dtype: tf.DType, masked: bool, spans: Spans | None, window: int | None
) -> Callable[..., Any]:
    """`core` for one softmax dtype, a mask or none, causal spans or none."""
    forward, backward = _compiled(softmax_dtype, masked, spans, window)

    def gradient(q: Any, k: Any, v: Any, weights: Any) -> Callable[..., Any]:
        def grad(dheads: tf.Tensor) -> tuple[tf.Tensor, ...]:
            return backward(dheads, q, k, v, *weights)

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
def _compiled(
    softmax_dtype: tf.DType,
    masked: bool,
    spans: Spans | None = None,
    window: int | None = None,
) -> tuple[Any, Any]:
    """The compiled forward and backward functions for one softmax dtype,
    a `[T, S]` mask or none, and causal `spans` with their `window` (None:
    one block over all keys).

    The forward pass returns the heads and the softmax weights of each
    span, which the backward pass takes after `dheads`, `q`, `k` and `v`.
    """

    def blocks(q: tf.Tensor, k: tf.Tensor) -> Spans:
        # `usable` checked that the shapes are known.
        time, key_time = _length(q), _length(k)
        return spans or ((0, time, 0, key_time),)

    def logits_of(
        q: tf.Tensor, k: tf.Tensor, attend: Any, span: tuple[int, int, int, int]
    ) -> tf.Tensor:
        logits = tf.einsum("bthd,bshd->bhts", q, k)
        if logits.dtype != softmax_dtype:
            logits = tf.cast(logits, softmax_dtype)
        if spans is not None:
            logits = logits + _causal_bias(span, window, softmax_dtype)
        elif attend is not None:
            bias = tf.where(attend, tf.zeros([], softmax_dtype), softmax_dtype.min)
            logits = logits + bias
        return logits

    @tf.function(jit_compile=True, autograph=False)
    def forward(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, *attend: tf.Tensor) -> Any:
        mask = attend[0] if masked else None
        heads, weights = [], []
        for span in blocks(q, k):
            start, end, first, last = span
            logits = logits_of(q[:, start:end], k[:, first:last], mask, span)
            w = tf.nn.softmax(logits)
            part = tf.einsum("bhts,bshd->bthd", tf.cast(w, v.dtype), v[:, first:last])
            heads.append(part)
            weights.append(w)
        return _joined(heads), tuple(weights)

    @tf.function(jit_compile=True, autograph=False)
    def backward(
        dheads: tf.Tensor, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, *weights: Any
    ) -> Any:
        # heads = w v: dv = w^T dh, dw = dh v^T; softmax: dl = w (dw - <dw, w>).
        key_time = _length(k)
        dq, dk, dv = [], [], []
        for (start, end, first, last), w in zip(blocks(q, k), weights, strict=True):
            dh = dheads[:, start:end]
            pad = [[0, 0], [first, key_time - last], [0, 0], [0, 0]]
            part = tf.einsum("bhts,bthd->bshd", tf.cast(w, v.dtype), dh)
            dv.append(tf.pad(part, pad))
            dw = tf.cast(tf.einsum("bthd,bshd->bhts", dh, v[:, first:last]), w.dtype)
            dlogits = w * (dw - tf.reduce_sum(dw * w, -1, keepdims=True))
            dlogits = tf.cast(dlogits, q.dtype)
            dq.append(tf.einsum("bhts,bshd->bthd", dlogits, k[:, first:last]))
            part = tf.einsum("bhts,bthd->bshd", dlogits, q[:, start:end])
            dk.append(tf.pad(part, pad))
        return _joined(dq), tf.add_n(dk), tf.add_n(dv)

    return forward, backward


def _length(x: tf.Tensor) -> int:
    """The time dimension of `[B, T, heads, size]` operands of known shape."""
    return cast(int, x.shape[1])


def _joined(parts: list[tf.Tensor]) -> tf.Tensor:
    """Per-block results concatenated along time."""
    return parts[0] if len(parts) == 1 else tf.concat(parts, 1)
