"""A GRU over a whole time-major sequence, used by `dynamic_unroll(snt.GRU)`.

Like `lstm_sequence`: the caller computes the input projection
`x @ w_i + b` of all steps in one matmul (`xw`, `[T, B, 3 * hidden]`, gates
`[z | r | a]`), the recurrence runs in a `tf.while_loop` that also keeps the
activated gates, and a hand-written gradient carries only `dh` per step and
computes the recurrent weights' gradient as two matmuls over all steps
afterwards. Sequence lengths are a `[T, B, 1]` bool mask: rows past their
length keep their state (and pass its gradient through).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src.recurrent import sequence


def _make_fused(split: bool, masked: bool) -> Callable[..., Any]:
    """`fused(xw, h0, w_h[, mask]) -> (hs, h)` with a hand-written gradient.

    With `split`, `h @ w_h[:, :2h]` runs as two matmuls (z and r) that
    TensorFlow executes in parallel (see `sequence.split_gates`).
    """

    @tf.custom_gradient
    def fused(*inputs: tf.Tensor) -> Any:
        xw, h0, w_h, *extra = inputs
        mask = extra[0] if masked else None
        outputs, grad = _fused_forward(xw, h0, w_h, mask, split)
        if not masked:
            return outputs, grad
        return outputs, lambda *d: (*grad(*d), None)  # No gradient for the mask.

    return fused


def _fused_forward(
    xw: tf.Tensor, h0: tf.Tensor, w_h: tf.Tensor, mask: tf.Tensor | None, split: bool
) -> Any:
    """Forward loop of `_make_fused`: `((hs, h), grad)`; `hs[t]` is the state
    after step t (the previous one where `mask[t]` is False)."""
    steps = tf.shape(xw)[0]
    w_z, w_r, w_a = tf.split(w_h, 3, axis=1)
    w_zr = None if split else tf.concat([w_z, w_r], axis=1)

    def forward(t, h, arrays):
        x_z, x_r, x_a = tf.split(xw[t], 3, axis=1)
        if w_zr is None:
            z = tf.sigmoid(x_z + tf.matmul(h, w_z))
            r = tf.sigmoid(x_r + tf.matmul(h, w_r))
        else:
            z, r = tf.split(
                tf.sigmoid(tf.concat([x_z, x_r], axis=1) + tf.matmul(h, w_zr)),
                2,
                axis=1,
            )
        a = tf.tanh(x_a + tf.matmul(r * h, w_a))
        new_h = h + z * (a - h)
        h = new_h if mask is None else tf.where(mask[t], new_h, h)
        arrays = [array.write(t, v) for array, v in zip(arrays, (h, z, r, a))]
        return t + 1, h, arrays

    # hs, z, r, a, each `[T, B, hidden]`.
    arrays = [sequence.empty_array(h0, steps) for _ in range(4)]
    _, h_final, arrays = tf.while_loop(
        lambda t, *_: t < steps,
        forward,
        (0, h0, arrays),
        maximum_iterations=steps,
    )
    # Dense tensors (not the arrays) are what the gradient captures, so that
    # a SavedModel can serialise the gradient function too.
    hs, zs, rs, a_s = [array.stack() for array in arrays]
    h_prev = tf.concat([h0[None], hs[:-1]], axis=0)  # State entering step t.

    def grad(d_hs: Any, d_h_final: Any) -> tuple[tf.Tensor, ...]:
        d_hs = tf.zeros_like(hs) if d_hs is None else d_hs
        d_h = tf.zeros_like(h0) if d_h_final is None else d_h_final
        w_z_t, w_r_t, w_a_t = tf.transpose(w_z), tf.transpose(w_r), tf.transpose(w_a)

        # Not differentiated (except for higher-order gradients), so it can
        # index the sequences directly. `d_h` is the gradient of the state
        # after step t.
        def backward(t, d_h, d_gates_steps):
            d_h = d_h + d_hs[t]
            if mask is not None:  # Masked rows pass the gradient through.
                d_h, d_h_skip = sequence.split_where(mask[t], d_h)
            h, z, r, a = h_prev[t], zs[t], rs[t], a_s[t]
            d_a = sequence.tanh_grad(a, d_h * z)
            d_z = sequence.sigmoid_grad(z, d_h * (a - h))
            d_rh = tf.matmul(d_a, w_a_t)
            d_r = sequence.sigmoid_grad(r, d_rh * h)
            d_prev = tf.add_n(
                [
                    d_h * (1 - z),
                    d_rh * r,
                    tf.matmul(d_z, w_z_t),
                    tf.matmul(d_r, w_r_t),
                ]
            )
            if mask is not None:
                d_prev = d_prev + d_h_skip
            d_gates = tf.concat([d_z, d_r, d_a], axis=1)
            return t - 1, d_prev, d_gates_steps.write(t, d_gates)

        _, d_h0, d_gates_steps = tf.while_loop(
            lambda t, *_: t >= 0,
            backward,
            (steps - 1, d_h, sequence.empty_array(xw[0], steps)),
            maximum_iterations=steps,
        )
        d_xw = d_gates_steps.stack()
        hidden = tf.shape(w_h)[0]
        d_zr, d_a = tf.split(d_xw, [2 * hidden, hidden], axis=2)
        # dw_zr = sum_t h_{t-1}^T @ d_zr_t; dw_a = sum_t (r_t h_{t-1})^T @ d_a_t.
        d_w_zr = tf.matmul(
            tf.reshape(h_prev, [-1, hidden]),
            tf.reshape(d_zr, [-1, 2 * hidden]),
            transpose_a=True,
        )
        d_w_a = tf.matmul(
            tf.reshape(rs * h_prev, [-1, hidden]),
            tf.reshape(d_a, [-1, hidden]),
            transpose_a=True,
        )
        return d_xw, d_h0, tf.concat([d_w_zr, d_w_a], axis=1)

    return (hs, h_final), grad


# Selected by (split, masked).
_fused = sequence.fused_variants(_make_fused, 2)


def gru_sequence(
    xw: tf.Tensor,
    initial_state: tf.Tensor,
    w_h: Any,
    sequence_length: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Runs a GRU over `xw`, the precomputed `inputs @ w_i + b` of all steps.

    Args:
      xw: `[T, B, 3 * hidden]` input projections (gates layout `[z|r|a]`).
      initial_state: `[B, hidden]`.
      w_h: `[hidden, 3 * hidden]` recurrent weights.
      sequence_length: Optional `[B]` lengths: past a row's length its
        state stays at its last valid step and its outputs repeat that
        step's (zeros for a row of length 0).

    Returns:
      `(outputs [T, B, hidden], final state [B, hidden])`.
    """
    w_h = tf.convert_to_tensor(w_h)
    inputs = [xw, initial_state, w_h]
    mask = sequence.step_mask(xw, sequence_length)
    if mask is not None:
        inputs.append(mask)
    # Only the z and r products are split: per-gate work is batch * hidden * 2h.
    split = sequence.split_gates(initial_state.shape[0], w_h)
    outputs, state = _fused(split, mask is not None)(*inputs)
    return sequence.zero_empty_rows(outputs, mask), state
