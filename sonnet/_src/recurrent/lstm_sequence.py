"""An LSTM over a whole time-major sequence, shared by `UnrolledLSTM` and unrolls.

The input projection `x @ w_i + b` does not depend on the state, so callers
compute it for all time steps in one matmul and pass it here as `xw`
(`[T, B, 4 * hidden]`). Only `h @ w_h` and the gate nonlinearities remain per
step, in a `tf.while_loop` over `tf.TensorArray`s (which XLA compiles too).

The recurrence has a hand-written gradient: the forward loop keeps the
activated gates, the backward loop carries only `dh`/`dc` per step (no
nonlinearity evaluated again), and the weight gradients (`dw_h`, and the
output projection's) are one matmul over all steps afterwards, instead of
one small accumulated matmul per step as automatic differentiation of the
loop does. Sequence lengths are a mask in the same loops. On CPU, mid-sized
recurrent products run as four per-gate matmuls that TensorFlow executes in
parallel (`sequence.split_gates`). Eagerly, the loop runs inside a `tf.function` so
the per-step ops are not dispatched one by one from Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src.recurrent import base as rnn_base
from sonnet._src.recurrent import sequence


def _make_fused(split: bool, projected: bool, masked: bool) -> Callable[..., Any]:
    """The recurrence with a hand-written gradient.

    The forward loop also records the cells and the activated gates, from
    which the backward loop computes each step's gradient without
    re-evaluating any nonlinearity. With `split`, `h @ w_h` runs as four
    per-gate matmuls (see `sequence.split_gates`). The returned function takes
    `(xw, h0, c0, w_h)`, then the `[hidden, projection]` output projection if
    `projected`, then a `[T, B, 1]` bool mask if `masked` (where it is False
    the step keeps the previous state, which is then also its output).
    """

    @tf.custom_gradient
    def fused(*inputs: tf.Tensor) -> Any:
        xw, h0, c0, w_h, *extra = inputs
        projection = extra.pop(0) if projected else None
        mask = extra.pop(0) if masked else None
        outputs, grad = _fused_forward(xw, h0, c0, w_h, projection, mask, split)
        if not masked:
            return outputs, grad
        return outputs, lambda *d: (*grad(*d), None)  # No gradient for the mask.

    return fused


def _fused_forward(
    xw: tf.Tensor,
    h0: tf.Tensor,
    c0: tf.Tensor,
    w_h: tf.Tensor,
    projection: tf.Tensor | None,
    mask: tf.Tensor | None,
    split: bool,
) -> Any:
    """Forward loop of `_make_fused`: `((hs, h, c), grad)`.

    `hs[t]` is the state after step t (the new, projected, hidden state, or
    the previous one where `mask[t]` is False).
    """
    steps = tf.shape(xw)[0]
    w_parts = tf.split(w_h, 4, axis=1) if split else None

    def gates_at(t: Any, h: tf.Tensor) -> list[tf.Tensor]:
        # Slicing `xw` directly is ~10% faster than a TensorArray here; the
        # loop is never differentiated (the gradient is `grad` below).
        if w_parts is None:
            return tf.split(xw[t] + tf.matmul(h, w_h), 4, axis=1)
        return [
            x + tf.matmul(h, w) for x, w in zip(tf.split(xw[t], 4, axis=1), w_parts)
        ]

    def forward(t, h, c, cells, arrays):
        i, f, g, o = gates_at(t, h)
        i, f, g, o = tf.sigmoid(i), tf.sigmoid(f), tf.tanh(g), tf.sigmoid(o)
        new_c = f * c + i * g
        tanh_c = tf.tanh(new_c)
        new_h = o * tanh_c
        if projection is not None:
            new_h = tf.matmul(new_h, projection)
        if mask is None:
            h, c = new_h, new_c
        else:
            h, c = tf.where(mask[t], new_h, h), tf.where(mask[t], new_c, c)
        values = (h, i, f, g, o, tanh_c)
        arrays = [a.write(t, v) for a, v in zip(arrays, values)]
        return t + 1, h, c, cells.write(t + 1, c), arrays

    # Index 0 of `cells` holds `c0`, index t + 1 the cell after step t; the
    # other arrays hold hs (`[T, B, hidden or projection]`), and i, f, g, o and
    # tanh(new cell), each `[T, B, hidden]`.
    cells = tf.TensorArray(c0.dtype, size=steps + 1, element_shape=c0.shape)
    arrays = [sequence.empty_array(h0, steps)] + [
        sequence.empty_array(c0, steps) for _ in range(5)
    ]
    _, h_final, c_final, cells, arrays = tf.while_loop(
        lambda t, *_: t < steps,
        forward,
        (0, h0, c0, cells.write(0, c0), arrays),
        maximum_iterations=steps,
    )
    # Dense tensors (not the arrays) are what the gradient captures, so that
    # a SavedModel can serialise the gradient function too.
    cells = cells.stack()
    hs, ii, ff, gg, oo, tanh_cells = [a.stack() for a in arrays]

    def grad(d_hs: Any, d_h_final: Any, d_c_final: Any) -> tuple[tf.Tensor, ...]:
        d_hs = tf.zeros_like(hs) if d_hs is None else d_hs
        d_h = tf.zeros_like(h0) if d_h_final is None else d_h_final
        d_c = tf.zeros_like(c0) if d_c_final is None else d_c_final
        if w_parts is None:
            w_h_t = tf.transpose(w_h)
        else:
            w_parts_t = [tf.transpose(w) for w in w_parts]
        projection_t = None if projection is None else tf.transpose(projection)

        # The backward loop is not differentiated (except for higher-order
        # gradients), so it can index the sequences directly. `d_h`/`d_c`
        # are the gradients of the state after step t.
        def backward(t, d_h, d_c, d_gates_steps, *d_hs_steps):
            d_h = d_h + d_hs[t]
            if mask is not None:  # Masked rows pass the gradient through.
                keep = mask[t]
                d_h, d_h_skip = sequence.split_where(keep, d_h)
                d_c, d_c_skip = sequence.split_where(keep, d_c)
            if projection_t is not None:
                # `d_h` is the projected output's gradient; kept for d_proj.
                d_hs_steps = (d_hs_steps[0].write(t, d_h),)
                d_h = tf.matmul(d_h, projection_t)
            i, f, g, o, tanh_c = ii[t], ff[t], gg[t], oo[t], tanh_cells[t]
            d_o = sequence.sigmoid_grad(o, d_h * tanh_c)
            d_c = d_c + sequence.tanh_grad(tanh_c, d_h * o)
            d_parts = [
                sequence.sigmoid_grad(i, d_c * g),
                sequence.sigmoid_grad(f, d_c * cells[t]),
                sequence.tanh_grad(g, d_c * i),
                d_o,
            ]
            d_gates = tf.concat(d_parts, axis=1)
            if w_parts is None:
                d_h = tf.matmul(d_gates, w_h_t)
            else:
                d_h = tf.add_n([tf.matmul(d, w) for d, w in zip(d_parts, w_parts_t)])
            d_c = d_c * f
            if mask is not None:
                d_h, d_c = d_h + d_h_skip, d_c + d_c_skip
            return (t - 1, d_h, d_c, d_gates_steps.write(t, d_gates), *d_hs_steps)

        d_hs_steps = () if projection is None else (sequence.empty_array(h0, steps),)
        _, d_h0, d_c0, d_gates_steps, *d_hs_steps = tf.while_loop(
            lambda t, *_: t >= 0,
            backward,
            (steps - 1, d_h, d_c, sequence.empty_array(xw[0], steps), *d_hs_steps),
            maximum_iterations=steps,
        )
        d_xw = d_gates_steps.stack()
        # dw_h = sum_t h_{t-1}^T @ d_gates_t, with h_{-1} = h0: two products
        # over leading-dim slices (which share memory) instead of a concat
        # (the einsum also covers an empty sequence).
        hidden, gates = tf.shape(w_h)[0], tf.shape(w_h)[1]
        d_w_h = tf.einsum("bh,tbg->hg", h0, d_xw[:1]) + tf.matmul(
            tf.reshape(hs[:-1], [-1, hidden]),
            tf.reshape(d_xw[1:], [-1, gates]),
            transpose_a=True,
        )
        if projection is None:
            return d_xw, d_h0, d_c0, d_w_h
        # d_proj = sum_t (o_t * tanh(c_t))^T @ d_projected_t.
        hidden, projected = tf.shape(projection)[0], tf.shape(projection)[1]
        d_projection = tf.matmul(
            tf.reshape(oo * tanh_cells, [-1, hidden]),
            tf.reshape(d_hs_steps[0].stack(), [-1, projected]),
            transpose_a=True,
        )
        return d_xw, d_h0, d_c0, d_w_h, d_projection

    return (hs, h_final, c_final), grad


# Selected by (split, projected, masked).
_fused = sequence.fused_variants(_make_fused, 3)


def lstm_sequence(
    xw: tf.Tensor,
    initial_state: rnn_base.LSTMState,
    w_h: Any,
    projection: Any = None,
    sequence_length: tf.Tensor | None = None,
) -> tuple[tf.Tensor, rnn_base.LSTMState]:
    """Runs an LSTM over `xw`, the precomputed `inputs @ w_i + b` of all steps.

    Args:
      xw: `[T, B, 4 * hidden]` input projections (gates layout `[i|f|g|o]`).
      initial_state: `LSTMState` of `[B, hidden or projection]`/`[B, hidden]`.
      w_h: `[hidden or projection, 4 * hidden]` recurrent weights.
      projection: Optional `[hidden, projection]` output projection.
      sequence_length: Optional `[B]` lengths: past a row's length its
        state stays at its last valid step and its outputs repeat that
        step's (zeros for a row of length 0).

    Returns:
      `(outputs [T, B, hidden or projection], final LSTMState)`.
    """
    h0, c0 = initial_state
    w_h = tf.convert_to_tensor(w_h)
    inputs = [xw, h0, c0, w_h]
    if projection is not None:
        inputs.append(tf.convert_to_tensor(projection))
    mask = sequence.step_mask(xw, sequence_length)
    if mask is not None:
        inputs.append(mask)
    split = sequence.split_gates(h0.shape[0], w_h)
    outputs, h, c = _fused(split, projection is not None, mask is not None)(*inputs)
    return sequence.zero_empty_rows(outputs, mask), rnn_base.LSTMState(h, c)
