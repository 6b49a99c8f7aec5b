"""An LSTM over a whole time-major sequence, shared by `UnrolledLSTM` and unrolls.

The input projection `x @ w_i + b` does not depend on the state, so callers
compute it for all time steps in one matmul and pass it here as `xw`
(`[T, B, 4 * hidden]`). Only `h @ w_h` and the gate nonlinearities remain per
step, in a `tf.while_loop` over `tf.TensorArray`s (which XLA compiles too).

Without projection or sequence lengths the recurrence has a hand-written
gradient: the backward loop carries only `dh`/`dc` per step, and the weight
gradient `dw_h` is one matmul over all steps afterwards, instead of one small
accumulated matmul per step as automatic differentiation of the loop does.
With a projection or `sequence_length`, the loop is differentiated
automatically. Eagerly, the loop runs inside a `tf.function` so the per-step
ops are not dispatched one by one from Python.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src.recurrent import base as rnn_base


def _array(value: tf.Tensor) -> tf.TensorArray:
    """A `TensorArray` holding the time steps of `value` (`[T, ...]`)."""
    return tf.TensorArray(
        value.dtype,
        size=tf.shape(value)[0],
        element_shape=value.shape[1:],
    ).unstack(value)


def _empty(like: tf.Tensor, size: Any) -> tf.TensorArray:
    """An empty `TensorArray` of `size` elements shaped like `like`."""
    return tf.TensorArray(like.dtype, size=size, element_shape=like.shape)


@tf.custom_gradient
def _fused(xw: tf.Tensor, h0: tf.Tensor, c0: tf.Tensor, w_h: tf.Tensor) -> Any:
    """The recurrence with a hand-written gradient (no projection, no masks).

    The forward loop also records the cells and pre-activation gates, which
    the backward loop reads step by step.
    """
    steps = tf.shape(xw)[0]
    # Index 0 holds `c0`, index t + 1 the cell after step t.
    cells = tf.TensorArray(c0.dtype, size=steps + 1, element_shape=c0.shape).write(
        0, c0
    )

    def forward(t, h, c, hs, cells, gates_steps):
        # Slicing `xw` directly is ~10% faster than a TensorArray here; the
        # loop is never differentiated (the gradient is `grad` below).
        gates = xw[t] + tf.matmul(h, w_h)
        h, c = rnn_base.lstm_update(gates, c)
        return (
            t + 1,
            h,
            c,
            hs.write(t, h),
            cells.write(t + 1, c),
            gates_steps.write(t, gates),
        )

    _, h_final, c_final, hs, cells, gates_steps = tf.while_loop(
        lambda t, *_: t < steps,
        forward,
        (0, h0, c0, _empty(h0, steps), cells, _empty(xw[0], steps)),
        maximum_iterations=steps,
    )
    # Dense tensors (not the arrays) are what the gradient captures, so that
    # a SavedModel can serialise the gradient function too.
    hs, cells, gates_steps = hs.stack(), cells.stack(), gates_steps.stack()

    def grad(d_hs: Any, d_h_final: Any, d_c_final: Any) -> tuple[tf.Tensor, ...]:
        d_hs = tf.zeros_like(hs) if d_hs is None else d_hs
        d_h = tf.zeros_like(h0) if d_h_final is None else d_h_final
        d_c = tf.zeros_like(c0) if d_c_final is None else d_c_final
        w_h_t = tf.transpose(w_h)

        # The backward loop is not differentiated (except for higher-order
        # gradients), so it can index the sequences directly.
        def backward(t, d_h, d_c, d_gates_steps):
            d_h = d_h + d_hs[t]
            i, f, g, o = tf.split(gates_steps[t], 4, axis=1)
            i, f, g, o = tf.sigmoid(i), tf.sigmoid(f), tf.tanh(g), tf.sigmoid(o)
            tanh_c = tf.tanh(cells[t + 1])
            d_o = d_h * tanh_c * o * (1 - o)
            d_c = d_c + d_h * o * (1 - tanh_c * tanh_c)
            d_i = d_c * g * i * (1 - i)
            d_f = d_c * cells[t] * f * (1 - f)
            d_g = d_c * i * (1 - g * g)
            d_gates = tf.concat([d_i, d_f, d_g, d_o], axis=1)
            return (
                t - 1,
                tf.matmul(d_gates, w_h_t),
                d_c * f,
                d_gates_steps.write(t, d_gates),
            )

        _, d_h0, d_c0, d_gates_steps = tf.while_loop(
            lambda t, *_: t >= 0,
            backward,
            (steps - 1, d_h, d_c, _empty(xw[0], steps)),
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
        return d_xw, d_h0, d_c0, d_w_h

    return (hs, h_final, c_final), grad


def _general(
    xw: tf.Tensor,
    h0: tf.Tensor,
    c0: tf.Tensor,
    w_h: tf.Tensor,
    projection: tf.Tensor | None,
    mask: tf.Tensor | None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The recurrence with optional projection and `[T, B, 1]` bool mask."""
    steps = tf.shape(xw)[0]
    xw_steps = _array(xw)
    mask_steps = None if mask is None else _array(mask)

    def body(t, h, c, hs):
        gates = xw_steps.read(t) + tf.matmul(h, w_h)
        new_h, new_c = rnn_base.lstm_update(gates, c)
        if projection is not None:
            new_h = tf.matmul(new_h, projection)
        hs = hs.write(t, new_h)
        if mask_steps is not None:
            keep = mask_steps.read(t)
            new_h = tf.where(keep, new_h, h)
            new_c = tf.where(keep, new_c, c)
        return t + 1, new_h, new_c, hs

    _, h, c, hs = tf.while_loop(
        lambda t, *_: t < steps,
        body,
        (0, h0, c0, _empty(h0, steps)),
        maximum_iterations=steps,
    )
    return hs.stack(), h, c


_fused_eager = tf.function(_fused, autograph=False, reduce_retracing=True)
_general_eager = tf.function(_general, autograph=False, reduce_retracing=True)


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
      sequence_length: Optional `[B]` integer lengths: outputs past a row's
        length are zero and its state stays at its last valid step.

    Returns:
      `(outputs [T, B, hidden or projection], final LSTMState)`.
    """
    h0, c0 = initial_state
    w_h = tf.convert_to_tensor(w_h)
    eager = tf.executing_eagerly()
    if projection is None and sequence_length is None:
        fused = _fused_eager if eager else _fused
        outputs, h, c = fused(xw, h0, c0, w_h)
        return outputs, rnn_base.LSTMState(hidden=h, cell=c)
    if projection is not None:
        projection = tf.convert_to_tensor(projection)
    mask = None
    if sequence_length is not None:
        mask = time_mask(tf.shape(xw)[0], sequence_length)[:, :, None]
    general = _general_eager if eager else _general
    outputs, h, c = general(xw, h0, c0, w_h, projection, mask)
    if mask is not None:
        outputs = tf.where(mask, outputs, tf.zeros_like(outputs))
    return outputs, rnn_base.LSTMState(hidden=h, cell=c)


def time_mask(steps: Any, sequence_length: tf.Tensor) -> tf.Tensor:
    """`[T, B]` bool mask, True where `t < sequence_length[b]`."""
    times = tf.range(steps, dtype=sequence_length.dtype)
    return times[:, None] < sequence_length[None, :]
