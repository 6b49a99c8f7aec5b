"""NumPy references and helpers shared by the recurrent tests."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

MODES = ["eager", "function", "jit"]


def run(mode: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Runs `fn(*args)` eagerly, in a `tf.function` or XLA-compiled."""
    if mode == "function":
        fn = tf.function(fn)
    elif mode == "jit":
        fn = tf.function(fn, jit_compile=True)
    return tf.nest.map_structure(
        lambda t: None if t is None else np.asarray(t), fn(*args)
    )


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def lstm_step(
    x: np.ndarray,
    h: np.ndarray,
    c: np.ndarray,
    w_i: np.ndarray,
    w_h: np.ndarray,
    b: np.ndarray,
    projection: np.ndarray | None = None,
    axis: int = -1,
) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step from pre-activation gates `[i|f|g|o]` (`axis`)."""
    gates = x @ w_i + h @ w_h + b
    return lstm_gates_update(gates, c, axis, projection)


def lstm_gates_update(
    gates: np.ndarray,
    c: np.ndarray,
    axis: int = -1,
    projection: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    i, f, g, o = np.split(gates, 4, axis=axis)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    if projection is not None:
        h = h @ projection
    return h, c


def gru_step(
    x: np.ndarray, h: np.ndarray, w_i: np.ndarray, w_h: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """One GRU step with gates `[z|r|a]`."""
    hidden = h.shape[1]
    gx = x @ w_i + b
    z = sigmoid(gx[:, :hidden] + h @ w_h[:, :hidden])
    r = sigmoid(gx[:, hidden : 2 * hidden] + h @ w_h[:, hidden : 2 * hidden])
    a = np.tanh(gx[:, 2 * hidden :] + (r * h) @ w_h[:, 2 * hidden :])
    return (1 - z) * h + z * a


def conv_same(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Stride-1 "SAME" convolution, channels-last, any number of spatial dims.

    `x` is `[B, *spatial, C_in]`, `w` is `[*kernel, C_in, C_out]`.
    """
    kernel = w.shape[:-2]
    spatial = x.shape[1:-1]
    pads = [(0, 0)] + [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in kernel] + [(0, 0)]
    padded = np.pad(x, pads)
    out = np.zeros(x.shape[:1] + spatial + w.shape[-1:], dtype=np.float64)
    for offset in itertools.product(*(range(k) for k in kernel)):
        window = padded[
            (slice(None),)
            + tuple(slice(o, o + s) for o, s in zip(offset, spatial))
            + (slice(None),)
        ]
        out += window @ w[offset]
    return out


def random(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def unroll(
    step: Callable[[np.ndarray, Any], tuple[Any, Any]],
    xs: np.ndarray,
    state: Any,
    lengths: np.ndarray | None = None,
) -> tuple[Any, Any]:
    """The original Sonnet's unroll, one `step(x_t, state)` at a time.

    Past a row's length its outputs repeat the previous step's (zeros before
    the first step) and its state is kept; scalar leaves always advance.
    Returns the outputs stacked along a leading time axis and the final state.
    """
    outputs = []
    previous = None
    for t, x in enumerate(xs):
        out, next_state = step(x, state)
        if lengths is not None:
            done = t >= np.asarray(lengths)
            if previous is None:
                previous = tf.nest.map_structure(np.zeros_like, out)
            hold = functools.partial(_hold, done)
            out = tf.nest.map_structure(hold, previous, out)
            next_state = tf.nest.map_structure(hold, state, next_state)
        outputs.append(out)
        previous, state = out, next_state
    return tf.nest.map_structure(lambda *steps: np.stack(steps), *outputs), state


def _hold(done: np.ndarray, old: Any, new: Any) -> Any:
    """`old` for the rows that are `done`, else `new` (scalars: `new`)."""
    if np.ndim(new) == 0:
        return new
    keep_old = done.reshape([-1] + [1] * (np.ndim(new) - 1))
    return np.where(keep_old, old, new)
