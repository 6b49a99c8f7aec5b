"""Whole-sequence fast paths of recurrent cores: the protocol and shared pieces.

`snt.dynamic_unroll` normally calls a core once per time step. A core that can
compute a whole time-major sequence at once (e.g. `snt.LSTM`: one input matmul
for all steps, then a fused recurrence with a hand-written gradient) opts in
by defining

    _unroll_sequence(input_sequence, initial_state, sequence_length)

which runs the core over a `[T, B, ...]` tensor and returns `(output_sequence,
final_state)`: the values (and gradients) `dynamic_unroll` would compute by
stepping `__call__`, with its masking for `sequence_length` (`[B]` lengths or
None), and the argument checks a step makes. It may also override
`snt.RNNCore._unrolls_sequence(initial_state)` (default True) to decline,
without creating ops, for a given initial state (`snt.DeepRNN` does unless
every layer can unroll its entry).

Callers go through `can_unroll` and `unroll` here, never through the methods
themselves. `can_unroll` also enforces the rule that keeps a fast path
honest: it is used only if the class that defines `_unroll_sequence` is the
class that defines the step `__call__`, or a subclass of it. A subclass that
changes the step therefore gets the generic loop until it provides its own
`_unroll_sequence`.

The rest of this module is what the fused loops (`lstm_sequence`,
`gru_sequence`) and the unrolls share: masks, gradient kernels, the gate
split choice and the compiled variants of a loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src.recurrent import base as rnn_base

# ---------------------------------------------------------------------------
# The protocol.


def _defining_class(cls: type, name: str) -> type | None:
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    return None


def can_unroll(core: Any, initial_state: Any) -> bool:
    """Whether `unroll(core, ...)` may run the whole sequence from
    `initial_state` (see the module docstring)."""
    if not isinstance(core, rnn_base.RNNCore):
        return False
    cls = type(core)
    owner = _defining_class(cls, "_unroll_sequence")
    step = _defining_class(cls, "__call__")
    if owner is None or step is None or not issubclass(owner, step):
        return False
    return bool(core._unrolls_sequence(initial_state))


def unroll(
    core: Any,
    input_sequence: tf.Tensor,
    initial_state: Any,
    sequence_length: tf.Tensor | None,
) -> tuple[Any, Any]:
    """Runs `core` over the `[T, B, ...]` `input_sequence` in one call.

    Only for a core where `can_unroll(core, initial_state)` holds.
    """
    return core._unroll_sequence(input_sequence, initial_state, sequence_length)


def input_projection(input_sequence: tf.Tensor, w_i: Any, b: Any) -> tf.Tensor:
    """`input_sequence @ w_i + b` for all time steps in one matmul."""
    static = input_sequence.shape
    dynamic = tf.shape(input_sequence)
    steps = static[0] if static[0] is not None else dynamic[0]
    batch = static[1] if static[1] is not None else dynamic[1]
    if w_i.shape[0] == 0:  # No input features (`-1` below would be ambiguous).
        return tf.broadcast_to(b, tf.stack([steps, batch, w_i.shape[1]]))
    flat = tf.reshape(input_sequence, [-1, w_i.shape[0]])
    projected = tf.nn.bias_add(tf.matmul(flat, w_i), b)
    return tf.reshape(projected, [steps, batch, w_i.shape[1]])


# ---------------------------------------------------------------------------
# Masks.


def time_mask(steps: Any, sequence_length: tf.Tensor) -> tf.Tensor:
    """`[T, B]` bool mask, True where `t < sequence_length[b]`."""
    times = tf.range(steps, dtype=sequence_length.dtype)
    return times[:, None] < sequence_length[None, :]


def step_mask(xw: tf.Tensor, sequence_length: tf.Tensor | None) -> tf.Tensor | None:
    """The `[T, B, 1]` mask of a fused loop over `xw` (None without lengths)."""
    if sequence_length is None:
        return None
    return time_mask(tf.shape(xw)[0], sequence_length)[:, :, None]


def zero_empty_rows(outputs: tf.Tensor, mask: tf.Tensor | None) -> tf.Tensor:
    """Outputs of a masked fused loop, with zeros for rows without a step.

    Masked steps already hold the state (the outputs) of the last valid step;
    a row of length 0 would hold the initial state instead.
    """
    if mask is None:
        return outputs
    return tf.where(mask[:1], outputs, tf.zeros_like(outputs))


def split_where(keep: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """`x` where `keep` (else 0), and `x` where not `keep` (else 0)."""
    zeros = tf.zeros_like(x)
    return tf.where(keep, x, zeros), tf.where(keep, zeros, x)


# ---------------------------------------------------------------------------
# Pieces of the fused loops.


def empty_array(like: tf.Tensor, size: Any) -> tf.TensorArray:
    """An empty `TensorArray` of `size` elements shaped like `like`."""
    return tf.TensorArray(like.dtype, size=size, element_shape=like.shape)


def sigmoid_grad(y: tf.Tensor, dy: tf.Tensor) -> tf.Tensor:
    """`dy * y * (1 - y)`, the gradient through `y = sigmoid(x)`, in one op."""
    return tf.raw_ops.SigmoidGrad(y=y, dy=dy)


def tanh_grad(y: tf.Tensor, dy: tf.Tensor) -> tf.Tensor:
    """`dy * (1 - y**2)`, the gradient through `y = tanh(x)`, in one op."""
    return tf.raw_ops.TanhGrad(y=y, dy=dy)


# Per-step `h @ w_h` products of this many multiply-adds or more (and fewer
# than `_SPLIT_MAX`) run as per-gate matmuls on CPU. TensorFlow runs a matmul
# this small on one thread; independent ones run side by side on its inter-op
# threads, which makes the loop ~1.4x faster on 2 cores. Smaller products are
# dominated by per-op overhead, larger ones use all threads already; GPUs gain
# nothing from it. Results agree up to float rounding. The bounds were tuned
# on the project's 2-core CI machine (`bench/lstm_step.py` has the variants);
# on other CPUs they only move the point where one schedule beats the other.
_SPLIT_MIN = 2**20
_SPLIT_MAX = 2**26
# Whether the process sees only CPUs: asked once, on the first fused unroll
# (logical devices cannot change after TensorFlow has initialised them).
_cpu_only: bool | None = None


def split_gates(batch: int | None, w_h: tf.Tensor) -> bool:
    """Whether the recurrent product `[B, hidden] @ w_h` runs per gate.

    An unknown batch size counts as 32.
    """
    global _cpu_only
    if _cpu_only is None:
        _cpu_only = all(
            d.device_type == "CPU" for d in tf.config.list_logical_devices()
        )
    hidden, gates = w_h.shape
    if not _cpu_only or hidden is None or gates is None:
        return False
    work = (32 if batch is None else batch) * hidden * gates
    return _SPLIT_MIN <= work < _SPLIT_MAX


def fused_variants(
    make: Callable[..., Callable[..., Any]], flags: int
) -> Callable[..., Callable[..., Any]]:
    """Builds `make(*key)` for every key of `flags` bools, once.

    Returns `select(*key)`, which gives the variant to call now: eagerly it is
    wrapped in a `tf.function` (so the loop's ops are not dispatched one by one
    from Python), inside a trace it is the plain function.
    """
    traced = {key: make(*key) for key in itertools.product((False, True), repeat=flags)}
    eager = {
        key: tf.function(fn, autograph=False, reduce_retracing=True)
        for key, fn in traced.items()
    }

    def select(*key: bool) -> Callable[..., Any]:
        return (eager if tf.executing_eagerly() else traced)[key]

    return select
