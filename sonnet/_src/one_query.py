"""Attention products of one query position against many keys (a decoding step).

A decoding step of `snt.MultiHeadAttention` multiplies one query per head
with the cache's keys `[B, S, heads, size]` and its weights with the cache's
values. As einsums (`bthk,bshk->bhts`, `bhts,bshv->bthv`) TensorFlow
transposes both caches to `[B, heads, S, size]` on every step (a copy of
each) and runs `B * heads` matrix-vector products. Here the caches stay as
they are, each read once by one matmul per example:

- logits: the keys as a `[S, heads * size]` matrix times the query laid out
  block-diagonally, `[heads * size, heads]` (head `h`'s query in rows
  `h * size...` of column `h`, zeros elsewhere), give `[S, heads]`;
- values: the weights `[heads, S]` times the values as `[S, heads * size]`
  give every head's weights against every head's values, `[heads, heads *
  size]`, of which the diagonal blocks are the result.

Both do `heads` times the arithmetic of the einsums, on a matrix that is read
once instead of copied and read; measured on 2 cores with oneDNN's kernels (4
layers, float32): `[8, 192, 12, 64]` caches 7.7 -> 2.9 ms, `[8, 2048, 12,
64]` 178 -> 36 ms, `[1, 2048, 32, 128]` 99 -> 27 ms, `[1, 64, 4, 16]` 0.90 ->
0.77 ms. With TensorFlow's default (Eigen) kernels short caches of larger
batches were slower, so there they are used from `MIN_KEYS_WITHOUT_ONEDNN`
keys on (`worthwhile`).

Grouped-query heads (`N` key/value heads of `G` queries each) work the same
way with the `G` queries of a key/value head side by side in its block.
"""

from __future__ import annotations

from typing import cast

import tensorflow as tf

from sonnet._src import tf_compat

_MAT_MUL = tf.raw_ops.BatchMatMulV2
_RESHAPE = tf.raw_ops.Reshape
_TRANSPOSE = tf.raw_ops.Transpose


def usable(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> bool:
    """Whether `q` `[B, 1, heads, size]` (or `[B, 1, N, G, size]`) has one
    position, all three known dimensions after the batch, and there are keys
    (a reshape of an empty batch infers it only from non-zero sizes)."""
    return (
        q.shape[1] == 1
        and bool(k.shape[1])
        and q.shape[2:].is_fully_defined()
        and k.shape[1:].is_fully_defined()
        and v.shape[1:].is_fully_defined()
    )


# Without oneDNN's kernels (TensorFlow's default on CPUs without AVX-512-VNNI
# and the like), the one-query products win from this many keys: measured
# there (4 layers, traced, ms, einsums -> one-query) `[8, 192, 12, 64]`
# caches 6.6 -> 9.1, `[8, 512, 12, 64]` 24.7 -> 20.7, `[8, 1024, 12, 64]` 79.8
# -> 38.7, `[1, 512, 12, 64]` 2.3 -> 1.7; with oneDNN they won at every size.
MIN_KEYS_WITHOUT_ONEDNN = 512


def worthwhile(k: tf.Tensor) -> bool:
    """Whether the one-query products beat the einsums for keys `k` `[B, S,
    ...]` (known `S`) with this process's TensorFlow kernels."""
    return (
        tf_compat.onednn_enabled() or cast(int, k.shape[1]) >= MIN_KEYS_WITHOUT_ONEDNN
    )


def _dims(x: tf.Tensor, first: int, last: int) -> list[int]:
    """Dimensions `first..last` of `x` (known: `usable`)."""
    return [cast(int, d) for d in x.shape[first : last + 1]]


def logits(q: tf.Tensor, k: tf.Tensor) -> tf.Tensor:
    """`einsum("bthk,bshk->bhts")` (MHA) or `einsum("btngk,bsnk->bngts")`
    (grouped) for one query position: `[B, heads, 1, S]` or `[B, N, G, 1,
    S]` in the dtype of `q`.

    >>> from sonnet._src import one_query
    >>> q, k = tf.ones([1, 1, 2, 3]), tf.ones([1, 4, 2, 3])
    >>> one_query.logits(q, k).shape
    TensorShape([1, 2, 1, 4])
    """
    grouped = q.shape.rank == 5
    length, kv_heads, size = _dims(k, 1, 3)
    groups = _dims(q, 3, 3)[0] if grouped else 1
    # [B, N, size, G]: each key/value head's queries as columns.
    columns = _RESHAPE(tensor=q, shape=[-1, kv_heads, groups, size])
    columns = _TRANSPOSE(x=columns, perm=[0, 1, 3, 2])
    eye = tf.eye(kv_heads, dtype=q.dtype)
    # [B, N, size, N, G], zero off the diagonal blocks.
    blocks = columns[:, :, :, None, :] * eye[None, :, None, :, None]
    blocks = _RESHAPE(tensor=blocks, shape=[-1, kv_heads * size, kv_heads * groups])
    keys = _RESHAPE(tensor=k, shape=[-1, length, kv_heads * size])
    products = _MAT_MUL(x=keys, y=blocks)  # [B, S, N * G]
    products = _TRANSPOSE(x=products, perm=[0, 2, 1])
    shape = [-1, kv_heads, groups, 1, length] if grouped else [-1, kv_heads, 1, length]
    return _RESHAPE(tensor=products, shape=shape)


def values(weights: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
    """`einsum("bhts,bshv->bthv")` (MHA) or `einsum("bngts,bsnv->btngv")`
    (grouped) for one query position: `[B, 1, heads, size]` or `[B, 1, N,
    G, size]`, weights and values of one dtype.

    >>> from sonnet._src import one_query
    >>> w, v = tf.ones([1, 2, 1, 4]) / 4, tf.ones([1, 4, 2, 3])
    >>> one_query.values(w, v).numpy().tolist()
    [[[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]]
    """
    grouped = weights.shape.rank == 5
    length, kv_heads, size = _dims(v, 1, 3)
    groups = _dims(weights, 2, 2)[0] if grouped else 1
    rows = _RESHAPE(tensor=weights, shape=[-1, kv_heads * groups, length])
    table = _RESHAPE(tensor=v, shape=[-1, length, kv_heads * size])
    products = _MAT_MUL(x=rows, y=table)  # [B, N * G, N * size]
    products = _RESHAPE(tensor=products, shape=[-1, kv_heads, groups, kv_heads, size])
    eye = tf.eye(kv_heads, dtype=products.dtype)
    heads = tf.reduce_sum(products * eye[None, :, None, :, None], axis=3)
    shape = [-1, 1, kv_heads, groups, size] if grouped else [-1, 1, kv_heads, size]
    return _RESHAPE(tensor=heads, shape=shape)
