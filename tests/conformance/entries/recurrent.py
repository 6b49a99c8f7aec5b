"""Registry entries for the recurrent cores, `UnrolledLSTM`, `DeepRNN` and the
deep-RNN factories, recurrent dropout and `TrainableState`.

Cores are registered twice: one step `core(inputs, prev_state)` with the state
as an input (so the bad-input suite also corrupts state leaves), and wrapped
in a small module that runs `snt.dynamic_unroll` (or `snt.static_unroll`)
over a length-3 time-major sequence from `core.initial_state`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance.case import Case


def _x(*shape: int) -> tf.Tensor:
    size = 1
    for d in shape:
        size *= d
    return tf.reshape(tf.range(size, dtype=tf.float32) / size - 0.5, shape)


def _lstm_state(batch: int, hidden: int, cell: int | None = None) -> snt.LSTMState:
    return snt.LSTMState(
        hidden=_x(batch, hidden) * 0.5, cell=_x(batch, cell or hidden) * 0.25
    )


def _lstm_state_conv(batch: int, *shape: int) -> snt.LSTMState:
    return snt.LSTMState(hidden=_x(batch, *shape) * 0.5, cell=_x(batch, *shape) * 0.25)


class Unrolled(snt.Module):
    """Runs `unroll(core, x, core.initial_state(B))` over time-major `x`."""

    def __init__(
        self,
        core: Any,
        unroll: Callable[..., Any] = snt.dynamic_unroll,
        with_lengths: bool = False,
    ):
        super().__init__(name=f"unrolled_{core.name}")
        self.core = core
        self._unroll = unroll
        self._with_lengths = with_lengths

    def __call__(self, x: tf.Tensor) -> Any:
        # Left to the unroll to reject: inputs without a batch dimension.
        rank = tf.TensorShape(x.shape).rank
        batch = tf.shape(x)[1] if rank and rank >= 2 else 1
        lengths = None
        if self._with_lengths:
            # Row b is valid for min(b, T) steps (0 for the first row).
            steps = tf.shape(x)[0] if rank else 1
            lengths = tf.minimum(tf.range(batch), steps)
        outputs, state = self._unroll(
            self.core, x, self.core.initial_state(batch), sequence_length=lengths
        )
        # Flat, without the `None` leaves of recurrent-dropout states.
        return outputs, [s for s in tf.nest.flatten(state) if s is not None]


def _unroll_case(
    id: str,
    cls: type,
    core: Callable[[], Any],
    input_shape: tuple[int, ...],
    unroll: Callable[..., Any] = snt.dynamic_unroll,
    with_lengths: bool = False,
    **kwargs: Any,
) -> Case:
    return Case(
        id=id,
        cls=cls,
        factory=lambda: Unrolled(core(), unroll, with_lengths),
        inputs=lambda: (_x(3, *input_shape),),
        **kwargs,
    )


CASES = [
    # One step of each core.
    Case(
        id="VanillaRNN",
        cls=snt.VanillaRNN,
        factory=lambda: snt.VanillaRNN(4),
        inputs=lambda: (_x(2, 3), _x(2, 4)),
        ctor_kwargs={"hidden_size": 4},
    ),
    Case(
        id="LSTM",
        cls=snt.LSTM,
        factory=lambda: snt.LSTM(4),
        inputs=lambda: (_x(2, 3), _lstm_state(2, 4)),
        ctor_kwargs={"hidden_size": 4},
    ),
    Case(
        id="LSTM-projected",
        cls=snt.LSTM,
        factory=lambda: snt.LSTM(5, projection_size=2, forget_bias=0.5),
        inputs=lambda: (_x(2, 3), _lstm_state(2, 2, 5)),
        ctor_kwargs={"hidden_size": 5, "projection_size": 2, "forget_bias": 0.5},
    ),
    Case(
        id="LSTM-float64",
        cls=snt.LSTM,
        factory=lambda: snt.LSTM(3, dtype=tf.float64),
        inputs=lambda: (
            tf.cast(_x(2, 3), tf.float64),
            tf.nest.map_structure(lambda t: tf.cast(t, tf.float64), _lstm_state(2, 3)),
        ),
        ctor_kwargs={"hidden_size": 3, "dtype": tf.float64},
    ),
    Case(
        id="GRU",
        cls=snt.GRU,
        factory=lambda: snt.GRU(4),
        inputs=lambda: (_x(2, 3), _x(2, 4)),
        ctor_kwargs={"hidden_size": 4},
    ),
    Case(
        id="Conv1DLSTM",
        cls=snt.Conv1DLSTM,
        factory=lambda: snt.Conv1DLSTM((5, 2), 3, 3),
        inputs=lambda: (_x(2, 5, 2), _lstm_state_conv(2, 5, 3)),
        ctor_kwargs={"input_shape": (5, 2), "output_channels": 3, "kernel_shape": 3},
    ),
    Case(
        id="Conv2DLSTM",
        cls=snt.Conv2DLSTM,
        factory=lambda: snt.Conv2DLSTM((4, 4, 2), 3, 3),
        inputs=lambda: (_x(2, 4, 4, 2), _lstm_state_conv(2, 4, 4, 3)),
        ctor_kwargs={"input_shape": (4, 4, 2), "output_channels": 3, "kernel_shape": 3},
    ),
    Case(
        id="Conv3DLSTM",
        cls=snt.Conv3DLSTM,
        factory=lambda: snt.Conv3DLSTM((3, 3, 3, 2), 2, 3),
        inputs=lambda: (_x(2, 3, 3, 3, 2), _lstm_state_conv(2, 3, 3, 3, 2)),
        ctor_kwargs={
            "input_shape": (3, 3, 3, 2),
            "output_channels": 2,
            "kernel_shape": 3,
        },
    ),
    Case(
        id="UnrolledLSTM",
        cls=snt.UnrolledLSTM,
        factory=lambda: snt.UnrolledLSTM(4),
        inputs=lambda: (_x(3, 2, 3), _lstm_state(2, 4)),
        ctor_kwargs={"hidden_size": 4},
    ),
    Case(
        id="DeepRNN",
        cls=snt.DeepRNN,
        factory=lambda: snt.DeepRNN([snt.LSTM(3), tf.nn.relu, snt.GRU(2)]),
        inputs=lambda: (_x(2, 4), (_lstm_state(2, 3), _x(2, 2))),
        ctor_kwargs={"layers": [snt.LSTM(3), tf.nn.relu, snt.GRU(2)]},
    ),
    # The factories build the (non-public) base of `snt.DeepRNN`.
    Case(
        id="deep_rnn_with_skip_connections",
        cls=snt.DeepRNN,
        factory=lambda: snt.deep_rnn_with_skip_connections([snt.LSTM(3), snt.GRU(2)]),
        inputs=lambda: (_x(2, 4), (_lstm_state(2, 3), _x(2, 2))),
    ),
    Case(
        id="deep_rnn_with_residual_connections",
        cls=snt.DeepRNN,
        factory=lambda: snt.deep_rnn_with_residual_connections(
            [snt.LSTM(4), snt.GRU(4)]
        ),
        inputs=lambda: (_x(2, 4), (_lstm_state(2, 4), _x(2, 4))),
    ),
    Case(
        id="TrainableState",
        cls=snt.TrainableState,
        factory=lambda: snt.TrainableState.for_core(snt.LSTM(3)),
        inputs=lambda: (),
        call=lambda m: m(2),
    ),
    Case(
        # The original's own conformance tests call it with a float scalar.
        id="TrainableState-float_batch",
        cls=snt.TrainableState,
        factory=lambda: snt.TrainableState(tf.zeros([1])),
        inputs=lambda: (tf.constant(2.0),),
    ),
    Case(
        id="TrainableState-nested-tensor_batch",
        cls=snt.TrainableState,
        factory=lambda: snt.TrainableState(
            (tf.ones([2]), {"a": tf.zeros([1, 3]), "b": tf.ones([])}),
            mask=(True, {"a": False, "b": True}),
        ),
        inputs=lambda: (tf.constant(3),),
        # XLA needs the tiling multiples at compile time; here they are an
        # argument of the compiled function.
        xla=False,
    ),
    # Cores unrolled over a length-3 sequence.
    _unroll_case(
        "VanillaRNN-dynamic_unroll", snt.VanillaRNN, lambda: snt.VanillaRNN(4), (2, 3)
    ),
    _unroll_case("LSTM-dynamic_unroll", snt.LSTM, lambda: snt.LSTM(4), (2, 3)),
    _unroll_case(
        "LSTM-dynamic_unroll-lengths",
        snt.LSTM,
        lambda: snt.LSTM(4),
        (3, 3),
        with_lengths=True,
    ),
    _unroll_case(
        "LSTM-projected-dynamic_unroll",
        snt.LSTM,
        lambda: snt.LSTM(4, projection_size=2),
        (2, 3),
    ),
    _unroll_case(
        "LSTM-static_unroll",
        snt.LSTM,
        lambda: snt.LSTM(4),
        (2, 3),
        unroll=snt.static_unroll,
        # Time-major inputs whose length the static unroll needs.
        batch_axis=1,
        static_axes=(0,),
    ),
    _unroll_case("GRU-dynamic_unroll", snt.GRU, lambda: snt.GRU(4), (2, 3)),
    _unroll_case(
        "GRU-static_unroll-lengths",
        snt.GRU,
        lambda: snt.GRU(4),
        (3, 3),
        unroll=snt.static_unroll,
        with_lengths=True,
        # Time-major inputs whose length the static unroll needs.
        batch_axis=1,
        static_axes=(0,),
    ),
    _unroll_case(
        "Conv2DLSTM-dynamic_unroll",
        snt.Conv2DLSTM,
        lambda: snt.Conv2DLSTM((3, 3, 2), 2, 3),
        (2, 3, 3, 2),
    ),
    _unroll_case(
        "DeepRNN-dynamic_unroll-lengths",
        snt.DeepRNN,
        lambda: snt.DeepRNN([snt.LSTM(3), snt.GRU(2)]),
        (3, 4),
        with_lengths=True,
    ),
    _unroll_case(
        "lstm_with_recurrent_dropout-dynamic_unroll",
        snt.LSTM,
        lambda: snt.lstm_with_recurrent_dropout(4, dropout=0.5)[0],
        (2, 3),
        deterministic=False,
    ),
    _unroll_case(
        "lstm_with_recurrent_dropout-eval_core",
        snt.LSTM,
        lambda: snt.lstm_with_recurrent_dropout(4, dropout=0.5)[1],
        (2, 3),
    ),
]


# Recurrent cores take their dtype as a constructor argument (as in the
# original), not from their inputs: the low-precision suite does not apply.
CASES = [dataclasses.replace(c, precisions=()) for c in CASES]

NOT_REGISTERED = {
    snt.RNNCore: "abstract base of every recurrent core; covered by the cores",
    snt.UnrolledRNN: "abstract base; covered by UnrolledLSTM",
}
