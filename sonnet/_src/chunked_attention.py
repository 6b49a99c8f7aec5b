"""Memory-efficient (chunked, online-softmax) attention for `snt.MultiHeadAttention`.

The dense path materialises `[B, heads, T, S]` logits (and the backward pass
keeps several such tensors). This kernel never holds more than one
`[B, heads, query_chunk, key_chunk]` block: a `tf.while_loop` over query
blocks runs an inner loop over key chunks with a running maximum, sum and
weighted sum per query (Milakov & Gimelshein, 2018; Rabe & Staats, 2021; the
forward pass of FlashAttention, Dao et al., 2022), so memory grows linearly
in `T`. The gradient is a `tf.custom_gradient` that recomputes each block
from the saved per-query maximum and sum (FlashAttention's backward pass), so the
loop keeps nothing per iteration either. Chunk counts are static when `T`
and `S` are, so the loops compile under XLA.

Masks are given as a `Mask`: positions (with their causal / window rules and
a user `mask_fn` on positions, evaluated per block, never as a `[T, S]`
tensor; its result may carry batch and head axes) and an optional user mask
tensor (sliced per block). Masked logits get the dtype's lowest value, as in
the dense path, so a query whose keys are all masked out gets the mean of the
values there too.

Attention-weight dropout (`Dropout`) is stateless: whether the weight of
query `t` on key `s` in head `h` of example `b` is kept is a hash of the
call's seed and those four indices (`keep`), so the backward pass recomputes
the forward pass's mask block by block, and the dense path (which hashes the
whole `[B, heads, T, S]` at once) drops exactly the same weights, whatever
the chunk size.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from sonnet._src import errors

MaskFn = Callable[[tf.Tensor, tf.Tensor], Any]

_MATMUL = tf.raw_ops.BatchMatMulV2


class Mask(NamedTuple):
    """Which keys each query may attend to, as rules on positions.

    Attributes:
      query_positions: `[T]` int32 positions of the queries.
      key_positions: `[S]` int32 positions of the keys; a negative position
        marks an empty cache slot (never attended).
      causal: Whether keys after the query's position are masked.
      window: Keys at positions `<= query - window` (causal) or
        `|query - key| >= window` (not causal) are masked; None: no window.
      mask_fn: Optional `mask_fn(query_positions [Tq, 1], key_positions
        [1, Sk]) -> bool`, broadcastable to `[Tq, Sk]`.
      tensor: Optional user mask broadcastable to the logits
        `[B, kv_heads, groups, T, S]`.
      empty_slots: Whether some key positions may be negative.
      heads: The number of query heads (a `mask_fn` result of rank 4 has 1
        or `heads` on its second axis).
      groups: Query heads per key/value head (logits are `[B, heads //
        groups, groups, T, S]`).
      batch: The static batch size, if known (for checking `mask_fn`).
    """

    query_positions: tf.Tensor
    key_positions: tf.Tensor
    causal: bool
    window: int | None
    mask_fn: MaskFn | None
    tensor: tf.Tensor | None
    empty_slots: bool = False
    heads: int = 1
    groups: int = 1
    batch: int | None = None


class Dropout(NamedTuple):
    """Attention-weight dropout of one call.

    Attributes:
      state: uint32 scalar: the hash of the call's seed (`seed_state`).
      threshold: float32 scalar `rate * 2**32`: a weight is dropped where its
        hash (as a float32) is below it (0: nothing dropped).
      scale: Scalar in the softmax dtype: `1 / (1 - rate)`, the factor of the
        weights kept.
    """

    state: tf.Tensor
    threshold: tf.Tensor
    scale: tf.Tensor


def _mix(h: tf.Tensor) -> tf.Tensor:
    """A bijective 32-bit integer hash with full avalanche (two
    multiply-xorshift rounds; constants from Wellons' hash prospector)."""
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, np.uint32(16)))
    h = h * np.uint32(0x7FEB352D)
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, np.uint32(15)))
    h = h * np.uint32(0x846CA68B)
    return tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, np.uint32(16)))


def _fold(h: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """The hash `h` extended by an int32 `index` (broadcast against it)."""
    return _mix(tf.bitwise.bitwise_xor(h, tf.cast(index, tf.uint32)))


def seed_state(seed: tf.Tensor) -> tf.Tensor:
    """The uint32 hash state of an integer seed `[2]`."""
    seed = tf.cast(seed, tf.uint32)
    return _fold(_mix(tf.bitwise.bitwise_xor(seed[0], np.uint32(0x9E3779B9))), seed[1])


def row_state(
    dropout: Dropout, batch: Any, kv_heads: Any, groups: Any, rows: tf.Tensor
) -> tf.Tensor:
    """Hash states `[B, N, G, Tq, 1]` of the query `rows` `[Tq]` (indices
    into the call's queries) of every example and head; query head
    `n * groups + g` is at `[:, n, g]`."""
    h = _fold(dropout.state, tf.reshape(tf.range(batch), [-1, 1, 1, 1, 1]))
    h = _fold(h, tf.reshape(tf.range(kv_heads * groups), [1, kv_heads, groups, 1, 1]))
    return _fold(h, tf.reshape(rows, [1, 1, 1, -1, 1]))


def keep_scale(dropout: Dropout, rows: tf.Tensor, columns: tf.Tensor) -> tf.Tensor:
    """The factors `[B, N, G, Tq, Sk]` of the weights of `rows` (states from
    `row_state`) on the keys `columns` `[Sk]` (indices into the call's keys):
    `scale` where kept, 0 where dropped."""
    # Per weight, the cheaper half of `_mix` (its multiplies and middle
    # shift) on the row's state and the key's own hash: about 2/3 of the
    # full hash's time, and the top bits it leaves, which decide, are as
    # independent across keys, queries and 2 x 2 blocks as the rate predicts.
    h = tf.bitwise.bitwise_xor(rows, _mix(tf.cast(columns, tf.uint32)))
    h = h * np.uint32(0x7FEB352D)
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, np.uint32(15)))
    h = h * np.uint32(0x846CA68B)
    kept = tf.cast(h, tf.float32) >= dropout.threshold
    return tf.where(kept, dropout.scale, tf.zeros([], dropout.scale.dtype))


def dense_keep_scale(
    dropout: Dropout, batch: Any, kv_heads: int, groups: int, time: Any, key_time: Any
) -> tf.Tensor:
    """`keep_scale` `[B, N, G, T, S]` of every query and key of a call."""
    rows = row_state(dropout, batch, kv_heads, groups, tf.range(time))
    return keep_scale(dropout, rows, tf.range(key_time))


def check_mask_fn(mask_fn: Any, batch: Any = None, heads: int = 1) -> MaskFn:
    """`mask_fn`, checked: a callable of two position tensors whose result is
    a boolean tensor broadcastable to `[Tq, Sk]` or `[B, heads, Tq, Sk]`
    (probed on small inputs; `batch`: the static batch size if known)."""
    if not callable(mask_fn):
        raise errors.bad_type(
            "mask_fn",
            "must be a callable `mask_fn(query_positions, key_positions)`",
            mask_fn,
        )
    try:
        signature = inspect.signature(mask_fn)
    except (TypeError, ValueError):  # Builtins without a signature.
        signature = None
    if signature is not None:
        try:
            signature.bind(0, 0)
        except TypeError:
            raise errors.bad_type(
                "mask_fn",
                "must take two arguments `(query_positions, key_positions)`",
                mask_fn,
            ) from None
    probe = mask_fn(tf.zeros([2, 1], tf.int32), tf.zeros([1, 3], tf.int32))
    check_mask_result(probe, 2, 3, batch, heads)
    return mask_fn


def check_mask_result(
    result: Any, rows: Any, columns: Any, batch: Any = None, heads: int = 1
) -> tf.Tensor:
    """`mask_fn`'s result for `[rows, 1]` and `[1, columns]` positions,
    checked: booleans of rank 2 `[Tq, Sk]` or rank 4 `[B, heads, Tq, Sk]`
    (each axis its size or 1)."""
    if not isinstance(result, (tf.Tensor, tf.Variable)) and not hasattr(
        result, "dtype"
    ):
        raise errors.bad_type(
            "mask_fn",
            "must return a boolean tensor `[Tq, Sk]` or `[B, num_heads, Tq, Sk]`",
            result,
        )
    result = tf.convert_to_tensor(result)
    if result.dtype != tf.bool:
        raise errors.bad_type(
            "mask_fn",
            "must return a boolean tensor (True where attention is allowed)",
            result,
        )
    shape = result.shape
    if shape.rank not in (2, 4):
        raise errors.bad_value(
            "mask_fn",
            "must return booleans broadcastable to `[Tq, Sk]` (rank 2) or "
            "`[B, num_heads, Tq, Sk]` (rank 4; a per-example `[B, Tq, Sk]` "
            "result is `result[:, None]`)",
            shape,
        )
    target = [batch, heads, rows, columns][-shape.rank :]
    for size, want in zip(shape.as_list(), target):
        if size is not None and isinstance(want, int) and size not in (1, want):
            names = "[Tq, Sk]" if shape.rank == 2 else "[B, num_heads, Tq, Sk]"
            raise errors.bad_value(
                "mask_fn",
                f"must return a tensor broadcastable to `{names}` = {target}",
                shape,
            )
    return result


def _grouped(allowed: tf.Tensor, heads: int, groups: int) -> tf.Tensor:
    """A `[B, H, Tq, Sk]` mask (`H`: 1 or `heads`) as `[B, H // groups,
    groups, Tq, Sk]`, the layout of the logits."""
    if groups == 1 or allowed.shape[1] == 1:
        return tf.expand_dims(allowed, 2)
    shape = tf.unstack(tf.shape(allowed))
    if allowed.shape[1] is None:  # Unknown head axis: 1 or all.
        allowed = tf.broadcast_to(allowed, tf.stack([shape[0], heads, *shape[2:]]))
    kv_heads = heads // groups
    return tf.reshape(allowed, tf.stack([shape[0], kv_heads, groups, *shape[2:]]))


def positional(mask: Mask, queries: tf.Tensor, keys: tf.Tensor) -> tf.Tensor | None:
    """`[Tq, Sk]` bools (with a per-example `mask_fn`, `[B, N, G, Tq, Sk]`;
    None: all allowed) for `queries` `[Tq]` and `keys` `[Sk]` positions by
    `mask`'s rules (not its tensor)."""
    rows = tf.expand_dims(queries, 1)
    columns = tf.expand_dims(keys, 0)
    allowed = []
    if mask.causal:
        allowed.append(columns <= rows)
        if mask.window is not None:
            allowed.append(columns > rows - mask.window)
    elif mask.window is not None:
        allowed.append(tf.abs(rows - columns) < mask.window)
    if mask.empty_slots:
        allowed.append(columns >= 0)
    if mask.mask_fn is not None:
        # Empty slots are passed as position 0 (a function may gather by it).
        if mask.empty_slots:
            columns = tf.maximum(columns, 0)
        result = check_mask_result(
            mask.mask_fn(rows, columns),
            rows.shape[0],
            columns.shape[1],
            mask.batch,
            mask.heads,
        )
        if result.shape.rank == 4:
            result = _grouped(result, mask.heads, mask.groups)
        allowed.append(result)
    if not allowed:
        return None
    result = allowed[0]
    for a in allowed[1:]:
        result = result & a
    return result


def _blocks(x: tf.Tensor, axis: int, size: int, count: Any, padded: Any) -> tf.Tensor:
    """`x` padded along `axis` to `padded` and split into `count` blocks of
    `size`, the block axis first."""
    length = tf.shape(x)[axis]
    pad = [[0, 0]] * x.shape.rank
    pad[axis] = [0, padded - length]
    x = tf.pad(x, pad)
    shape = tf.unstack(tf.shape(x))
    shape = [*shape[:axis], count, size, *shape[axis + 1 :]]
    x = tf.reshape(x, tf.stack(shape))
    perm = [axis, *range(axis), *range(axis + 1, x.shape.rank)]
    return tf.transpose(x, perm)


def _slice_mask(tensor: tf.Tensor, start: Any, size: int, axis: int) -> tf.Tensor:
    """Rows `[start, start + size)` of `tensor` along `axis` (from the end),
    unless it is broadcast along it."""
    if tensor.shape[axis] == 1:
        return tensor
    length = tf.shape(tensor)[axis]
    pad = [[0, 0]] * tensor.shape.rank
    pad[axis] = [0, tf.maximum(start + size - length, 0)]
    padded = tf.pad(tensor, pad)
    begin = [0] * tensor.shape.rank
    begin[axis] = start
    sizes = [-1] * tensor.shape.rank
    sizes[axis] = size
    return tf.slice(padded, begin, sizes)


class _Plan(NamedTuple):
    """Static facts of one chunked call."""

    query_chunk: int
    key_chunk: int
    query_blocks: Any
    key_blocks: Any
    key_time: Any
    padded_keys: bool
    # Blocks entirely outside the causal band may be skipped: every query
    # sees at least one key (its own position), so no all-masked row needs
    # the skipped keys for its mean.
    skip: bool
    softmax_dtype: tf.DType


def _block_logits(
    plan: _Plan,
    mask: Mask,
    q: tf.Tensor,
    k: tf.Tensor,
    i: Any,
    j: Any,
    q_positions: tf.Tensor,
    k_positions: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor | None]:
    """Masked logits `[B, N, G, Cq, Ck]` in the softmax dtype for query block
    `i` and key chunk `j`, and where attention is allowed (None: anywhere)."""
    logits = _MATMUL(x=q, y=k, adj_y=True)
    if logits.dtype != plan.softmax_dtype:
        logits = tf.cast(logits, plan.softmax_dtype)
    allowed = positional(mask, q_positions, k_positions)
    if mask.tensor is not None:
        block = _slice_mask(mask.tensor, i * plan.query_chunk, plan.query_chunk, -2)
        block = _slice_mask(block, j * plan.key_chunk, plan.key_chunk, -1)
        allowed = block if allowed is None else allowed & block
    lowest = plan.softmax_dtype.min
    if allowed is not None:
        logits = tf.where(allowed, logits, tf.constant(lowest, logits.dtype))
    if plan.padded_keys:
        # Padding keys take no weight even in all-masked rows.
        real = tf.expand_dims(
            j * plan.key_chunk + tf.range(plan.key_chunk) < plan.key_time, 0
        )
        logits = tf.where(real, logits, tf.constant(-float("inf"), logits.dtype))
    return logits, allowed


def _skipped(plan: _Plan, mask: Mask, q_positions: Any, k_positions: Any) -> Any:
    """Whether a block lies entirely outside the causal band (a bool tensor)."""
    after = tf.reduce_min(k_positions) > tf.reduce_max(q_positions)
    if mask.window is None:
        return after
    before = tf.reduce_max(k_positions) <= tf.reduce_min(q_positions) - mask.window
    return after | before


def _padded_positions(positions: tf.Tensor, padded: Any) -> tf.Tensor:
    # Padding positions repeat the last one (within every band the real ones
    # are in); padded rows and keys are dropped or masked anyway.
    extra = padded - tf.shape(positions)[0]
    return tf.concat([positions, tf.fill([extra], positions[-1])], 0)


def _dropout_rows(plan: _Plan, dropout: Dropout, q: tf.Tensor, i: Any) -> tf.Tensor:
    """`row_state` of query block `i` of the blocked `q`."""
    rows = i * plan.query_chunk + tf.range(plan.query_chunk)
    return row_state(dropout, tf.shape(q)[1], q.shape[2], q.shape[3], rows)


def _dropout_columns(plan: _Plan, j: Any) -> tf.Tensor:
    return j * plan.key_chunk + tf.range(plan.key_chunk)


def _forward(
    plan: _Plan,
    mask: Mask,
    q: tf.Tensor,
    k: tf.Tensor,
    v: tf.Tensor,
    dropout: Dropout | None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Outputs `[nq, B, N, G, Cq, V]`, the logits' maximum and the sum of
    their exponentials `[nq, B, N, G, Cq]` (not their log-sum-exp: in an
    all-masked row the maximum is the dtype's lowest and absorbs a log) for
    blocked `q` `[nq, B, N, G, Cq, K]`, `k`/`v` `[nk, B, N, 1, Ck, *]`.
    Dropout scales the weights of the values, not the sum."""
    dtype = plan.softmax_dtype
    qp = tf.reshape(mask.query_positions, [-1, plan.query_chunk])
    kp = tf.reshape(mask.key_positions, [-1, plan.key_chunk])

    def query_block(i: Any) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        q_i, qp_i = q[i], qp[i]
        drop_rows = None if dropout is None else _dropout_rows(plan, dropout, q, i)
        rows = tf.shape(q_i)[:-1]
        m0 = tf.fill(rows, tf.constant(-float("inf"), dtype))
        l0 = tf.zeros(rows, dtype)
        acc0 = tf.zeros(tf.concat([rows, tf.shape(v)[-1:]], 0), dtype)

        def update(j: Any, m: Any, total: Any, acc: Any) -> tuple[Any, Any, Any]:
            logits, _ = _block_logits(plan, mask, q_i, k[j], i, j, qp_i, kp[j])
            m_new = tf.maximum(m, tf.reduce_max(logits, -1))
            p = tf.exp(logits - tf.expand_dims(m_new, -1))
            correction = tf.exp(m - m_new)
            total = total * correction + tf.reduce_sum(p, -1)
            if dropout is not None and drop_rows is not None:
                p = p * keep_scale(dropout, drop_rows, _dropout_columns(plan, j))
            pv = _MATMUL(x=tf.cast(p, v.dtype), y=v[j])
            acc = acc * tf.expand_dims(correction, -1) + tf.cast(pv, dtype)
            return m_new, total, acc

        def body(j: Any, m: Any, total: Any, acc: Any) -> Any:
            if plan.skip:
                m, total, acc = tf.cond(
                    _skipped(plan, mask, qp_i, kp[j]),
                    lambda: (m, total, acc),
                    lambda: update(j, m, total, acc),
                )
            else:
                m, total, acc = update(j, m, total, acc)
            return j + 1, m, total, acc

        _, m, total, acc = tf.while_loop(
            lambda j, *_: j < plan.key_blocks,
            body,
            (tf.constant(0), m0, l0, acc0),
            maximum_iterations=plan.key_blocks,
        )
        out = acc / tf.expand_dims(total, -1)
        return tf.cast(out, v.dtype), m, total

    return tf.map_fn(
        query_block,
        tf.range(plan.query_blocks),
        fn_output_signature=(v.dtype, dtype, dtype),
    )


def _backward(
    plan: _Plan,
    mask: Mask,
    q: tf.Tensor,
    k: tf.Tensor,
    v: tf.Tensor,
    out: tf.Tensor,
    maximum: tf.Tensor,
    total: tf.Tensor,
    d_out: tf.Tensor,
    dropout: Dropout | None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Gradients of blocked `q`, `k`, `v`, recomputing each block's weights
    (and dropout mask) from the saved statistics (FlashAttention's backward
    pass)."""
    dtype = plan.softmax_dtype
    qp = tf.reshape(mask.query_positions, [-1, plan.query_chunk])
    kp = tf.reshape(mask.key_positions, [-1, plan.key_chunk])
    # D_i = sum_v dO * O: the softmax Jacobian's diagonal term per query
    # (with dropout too: sum_s P * dP = sum_s P' * dP' for the dropped P').
    delta = tf.reduce_sum(tf.cast(d_out, dtype) * tf.cast(out, dtype), -1)

    def grads(i: Any, j: Any, d_q: Any, rows: Any) -> tuple[Any, Any, Any]:
        q_i, d_out_i = q[i], d_out[i]
        logits, allowed = _block_logits(plan, mask, q_i, k[j], i, j, qp[i], kp[j])
        p = tf.exp(logits - tf.expand_dims(maximum[i], -1))
        p = p / tf.expand_dims(total[i], -1)
        d_p = tf.cast(_MATMUL(x=d_out_i, y=v[j], adj_y=True), dtype)
        dropped = p
        if dropout is not None and rows is not None:
            factors = keep_scale(dropout, rows, _dropout_columns(plan, j))
            dropped = p * factors
            d_p = d_p * factors
        d_v = tf.reduce_sum(
            _MATMUL(x=tf.cast(dropped, d_out.dtype), y=d_out_i, adj_x=True), 2, True
        )
        d_s = p * (d_p - tf.expand_dims(delta[i], -1))
        if allowed is not None:
            # Masked logits are constants: no gradient flows through them
            # (the weights of an all-masked row are not 0 there).
            d_s = tf.where(allowed, d_s, tf.zeros([], dtype))
        d_s = tf.cast(d_s, q.dtype)
        d_q = d_q + tf.cast(_MATMUL(x=d_s, y=k[j]), dtype)
        d_k = tf.reduce_sum(_MATMUL(x=d_s, y=q_i, adj_x=True), 2, True)
        return d_q, tf.cast(d_k, dtype), tf.cast(d_v, dtype)

    k_zeros = tf.zeros(tf.shape(k)[1:], dtype)
    v_zeros = tf.zeros(tf.shape(v)[1:], dtype)

    def query_block(i: Any, d_k_all: Any, d_v_all: Any) -> Any:
        rows = None if dropout is None else _dropout_rows(plan, dropout, q, i)
        d_q0 = tf.zeros(tf.shape(q)[1:], dtype)
        d_ks = tf.TensorArray(dtype, size=plan.key_blocks, element_shape=k.shape[1:])
        d_vs = tf.TensorArray(dtype, size=plan.key_blocks, element_shape=v.shape[1:])

        def body(j: Any, d_q: Any, d_ks: Any, d_vs: Any) -> Any:
            if plan.skip:
                d_q, d_k, d_v = tf.cond(
                    _skipped(plan, mask, qp[i], kp[j]),
                    lambda: (d_q, k_zeros, v_zeros),
                    lambda: grads(i, j, d_q, rows),
                )
            else:
                d_q, d_k, d_v = grads(i, j, d_q, rows)
            return j + 1, d_q, d_ks.write(j, d_k), d_vs.write(j, d_v)

        _, d_q, d_ks, d_vs = tf.while_loop(
            lambda j, *_: j < plan.key_blocks,
            body,
            (tf.constant(0), d_q0, d_ks, d_vs),
            maximum_iterations=plan.key_blocks,
        )
        return d_q, d_k_all + d_ks.stack(), d_v_all + d_vs.stack()

    d_qs = tf.TensorArray(dtype, size=plan.query_blocks, element_shape=q.shape[1:])

    def outer(i: Any, d_qs: Any, d_k_all: Any, d_v_all: Any) -> Any:
        d_q, d_k_all, d_v_all = query_block(i, d_k_all, d_v_all)
        return i + 1, d_qs.write(i, d_q), d_k_all, d_v_all

    _, d_qs, d_k, d_v = tf.while_loop(
        lambda i, *_: i < plan.query_blocks,
        outer,
        (
            tf.constant(0),
            d_qs,
            tf.zeros(tf.shape(k), dtype),
            tf.zeros(tf.shape(v), dtype),
        ),
        maximum_iterations=plan.query_blocks,
    )
    return (
        tf.cast(d_qs.stack(), q.dtype),
        tf.cast(d_k, k.dtype),
        tf.cast(d_v, v.dtype),
    )


def _count(length: Any, chunk: int) -> Any:
    return -(-length // chunk)


def attend(
    q: tf.Tensor,
    k: tf.Tensor,
    v: tf.Tensor,
    mask: Mask,
    chunk_size: int,
    softmax_dtype: tf.DType,
    skip: bool,
    dropout: Dropout | None = None,
) -> tf.Tensor:
    """Values weighted by the softmax of the masked logits, chunk by chunk.

    Args:
      q: `[B, T, N, G, K]` scaled queries (`N` key/value heads, `G` queries
        per key/value head).
      k: `[B, S, N, K]` keys.
      v: `[B, S, N, V]` values.
      mask: What may be attended (`Mask`); its tensor broadcasts against
        `[B, N, G, T, S]`.
      chunk_size: Queries per block and keys per chunk.
      softmax_dtype: The dtype of the logits' statistics (float32 for half
        inputs).
      skip: Whether blocks outside the causal band may be skipped (only
        when every query sees its own position).
      dropout: Optional attention-weight dropout (`Dropout`); query and key
        indices count from the call's first query and key.

    Returns:
      `[B, T, N, G, V]` in the dtype of `v`.
    """
    time, key_time = q.shape[1], k.shape[1]
    if time is None:
        time = tf.shape(q)[1]
    if key_time is None:
        key_time = tf.shape(k)[1]
    query_chunk = chunk_size if not isinstance(time, int) else min(chunk_size, time)
    key_chunk = (
        chunk_size if not isinstance(key_time, int) else min(chunk_size, key_time)
    )
    nq, nk = _count(time, query_chunk), _count(key_time, key_chunk)
    plan = _Plan(
        query_chunk=query_chunk,
        key_chunk=key_chunk,
        query_blocks=nq,
        key_blocks=nk,
        key_time=key_time,
        padded_keys=not (isinstance(key_time, int) and key_time % key_chunk == 0),
        skip=skip and mask.tensor is None and mask.mask_fn is None,
        softmax_dtype=softmax_dtype,
    )
    mask = mask._replace(
        query_positions=_padded_positions(mask.query_positions, nq * query_chunk),
        key_positions=_padded_positions(mask.key_positions, nk * key_chunk),
    )
    # Blocks, block axis first: q `[nq, B, N, G, Cq, K]`, k `[nk, B, N, 1, Ck, K]`.
    q_blocks = _blocks(
        tf.transpose(q, [0, 2, 3, 1, 4]), 3, query_chunk, nq, nq * query_chunk
    )
    k_blocks = _blocks(
        tf.transpose(k, [0, 2, 1, 3])[:, :, None], 3, key_chunk, nk, nk * key_chunk
    )
    v_blocks = _blocks(
        tf.transpose(v, [0, 2, 1, 3])[:, :, None], 3, key_chunk, nk, nk * key_chunk
    )

    @tf.custom_gradient
    def kernel(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> Any:
        out, maximum, total = _forward(plan, mask, q, k, v, dropout)

        def grad(d_out: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            return _backward(plan, mask, q, k, v, out, maximum, total, d_out, dropout)

        return out, grad

    out = kernel(q_blocks, k_blocks, v_blocks)  # [nq, B, N, G, Cq, V]
    out = tf.transpose(out, [1, 0, 4, 2, 3, 5])  # [B, nq, Cq, N, G, V]
    shape = tf.shape(out)
    out = tf.reshape(
        out, tf.stack([shape[0], nq * query_chunk, shape[3], shape[4], shape[5]])
    )
    return out[:, :time]
