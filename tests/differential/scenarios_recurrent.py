"""Differential scenarios: recurrent cores and unrolling.

Loaded by `harness.py` in both environments: imports only snt, tf, numpy.
"""

import numpy as np
import tensorflow as tf

import sonnet as snt

_B, _T, _D = 2, 3, 4


def _step(core, inputs, batch_size=_B):
    return core(inputs, core.initial_state(batch_size))


def register(h):
    x = h.x((_B, _D))
    seq = h.x((_T, _B, _D))
    inits = {
        "w_i_init": h.initializers(),
        "w_h_init": h.initializers(),
        "b_init": h.initializers(),
    }
    h.module_grid(
        "LSTM",
        snt.LSTM,
        {"hidden_size": 3, "@inputs": x},
        {
            "hidden_size": h.ints(3),
            "projection_size": h.ints(2),
            "projection_init": h.initializers(),
            **inits,
            "forget_bias": h.floats(1.0),
            "dtype": h.dtypes(),
            "@inputs": h.inputs((_B, _D)),
            "@batch_size": h.ints(2),
        },
        call=_step,
        modes=h.ALL_MODES,
    )
    h.module_grid(
        "GRU",
        snt.GRU,
        {"hidden_size": 3, "@inputs": x},
        {
            "hidden_size": h.ints(3),
            **inits,
            "dtype": h.dtypes(),
            "@inputs": h.inputs((_B, _D)),
        },
        call=_step,
        modes=h.ALL_MODES,
    )
    h.module_grid(
        "VanillaRNN",
        snt.VanillaRNN,
        {"hidden_size": 3, "@inputs": x},
        {
            "hidden_size": h.ints(3),
            "activation": [
                ("relu", lambda: tf.nn.relu),
                ("lambda", lambda: lambda t: t * 0.5),
                ("None", lambda: None),
                ("str", lambda: "relu"),
            ],
            **inits,
            "dtype": h.dtypes(),
            "@inputs": h.inputs((_B, _D)),
        },
        call=_step,
    )
    h.module_grid(
        "UnrolledLSTM",
        snt.UnrolledLSTM,
        {"hidden_size": 3, "@inputs": seq},
        {
            "hidden_size": h.ints(3),
            **inits,
            "forget_bias": h.floats(1.0, invalid=False),
            "dtype": h.dtypes(),
            "@inputs": h.inputs((_T, _B, _D)),
        },
        call=_step,
        modes=("unknown_batch",),  # traced in a few seconds each
    )
    for cls, n, data_format in [
        (snt.Conv1DLSTM, 1, "NWC"),
        (snt.Conv2DLSTM, 2, "NHWC"),
        (snt.Conv3DLSTM, 3, "NDHWC"),
    ]:
        shape = (4,) * n + (2,)
        axes = {"@inputs": h.inputs((_B,) + shape)}
        if n == 2:
            axes = {
                "input_shape": h.shapes(shape),
                "output_channels": h.ints(3),
                "kernel_shape": h.ints(3) + h.shapes((3, 3)),
                "data_format": h.strs(data_format, "NCHW"),
                **inits,
                "forget_bias": h.floats(1.0, invalid=False),
                "dtype": h.dtypes(),
                **axes,
            }
        h.module_grid(
            cls.__name__,
            cls,
            {
                "input_shape": shape,
                "output_channels": 3,
                "kernel_shape": 3,
                "@inputs": h.x((_B,) + shape),
            },
            axes,
            call=_step,
        )

    h.module_grid(
        "DeepRNN",
        snt.DeepRNN,
        {"layers": h.lazy(lambda: [snt.LSTM(3), tf.nn.relu, snt.GRU(2)]), "@inputs": x},
        {
            "layers": [
                ("tuple", lambda: (snt.VanillaRNN(3), snt.LSTM(2))),
                ("only_functions", lambda: [tf.nn.relu]),
                ("empty", lambda: []),
                ("generator", lambda: (c for c in [snt.GRU(3)])),
            ],
            "@inputs": h.inputs((_B, _D)),
        },
        call=_step,
        modes=h.ALL_MODES,
    )
    for f in (
        snt.deep_rnn_with_skip_connections,
        snt.deep_rnn_with_residual_connections,
    ):
        axes = {
            "layers": [
                ("lstms", lambda: [snt.LSTM(4), snt.LSTM(4)]),
                ("tuple", lambda: (snt.GRU(4),)),
                ("with_function", lambda: [snt.LSTM(4), tf.nn.relu]),
                ("empty", lambda: []),
            ],
            "name": h.names(),
        }
        if f is snt.deep_rnn_with_skip_connections:
            axes["concat_final_output"] = h.bools(True)
        h.module_grid(
            f.__name__,
            f,
            {"layers": h.lazy(lambda: [snt.LSTM(4), snt.GRU(4)]), "@inputs": x},
            axes,
            call=_step,
        )

    h.grid(
        "lstm_with_recurrent_dropout",
        _recurrent_dropout,
        {"hidden_size": 3},
        {
            "hidden_size": h.ints(3),
            "dropout": h.floats(0.5) + [("one", lambda: 1.0)],
            "seed": [("int", lambda: 1), ("np.int64", lambda: np.int64(1))],
        },
    )

    h.module_grid(
        "TrainableState",
        snt.TrainableState,
        {"initial_values": h.lazy(lambda: tf.zeros([3])), "@inputs": 2},
        {
            "initial_values": [
                ("tensor", lambda: tf.constant([1.0, 2.0])),
                ("ndarray", lambda: np.ones([3], np.float32)),
                ("list_nest", lambda: [tf.zeros([2]), tf.ones([1])]),
                ("dict_nest", lambda: {"a": tf.zeros([2]), "b": tf.ones([3])}),
                ("LSTMState", lambda: snt.LSTMState(tf.zeros([2]), tf.ones([2]))),
                ("float64", lambda: tf.zeros([2], tf.float64)),
                ("scalar", lambda: tf.constant(1.0)),
                ("None", lambda: None),
            ],
            "mask": [
                ("bool_tensor", lambda: tf.constant([True, False, True])),
                ("list", lambda: [True, False, True]),
                ("ndarray", lambda: np.array([True, False, True])),
                ("wrong_structure", lambda: [tf.constant([True])]),
            ],
            "@inputs": h.ints(2),
        },
    )
    h.add("TrainableState.for_core", _trainable_state_for_core)

    for unroll in ("dynamic_unroll", "static_unroll"):
        base = {
            "core": h.lazy(lambda: snt.LSTM(3)),
            "input_sequence": seq,
            "initial_state": h.lazy(lambda: snt.LSTM(3).initial_state(_B)),
        }
        axes = {
            "input_sequence": h.inputs((_T, _B, _D)),
            "sequence_length": [
                ("tensor", lambda: tf.constant([1, 3])),
                ("list", lambda: [2, 3]),
                ("ndarray", lambda: np.array([1, 2])),
                ("int64", lambda: tf.constant([1, 3], tf.int64)),
                ("scalar_int", lambda: 2),
                ("too_long", lambda: tf.constant([4, 5])),
                ("float", lambda: tf.constant([1.0, 2.0])),
                ("wrong_batch", lambda: tf.constant([1, 2, 3])),
            ],
            "initial_state": [
                ("tuple", lambda: tuple(snt.LSTM(3).initial_state(_B))),
                ("wrong_batch", lambda: snt.LSTM(3).initial_state(_B + 1)),
            ],
        }
        if unroll == "dynamic_unroll":
            axes["parallel_iterations"] = h.ints(4)
            axes["swap_memory"] = h.bools(False)
        h.grid(
            unroll,
            lambda _u=unroll, **kw: _unroll(_u, h, **kw),
            base,
            axes,
        )
        for mode in ("autograph", "no_autograph"):
            h.add(
                f"{unroll}(tf.function={mode})",
                lambda _u=unroll, _m=mode: _unroll_traced(_u, _m, h),
            )
    h.add("LSTMState", _lstm_state)


def h_spec(t):
    return {"dtype": t.dtype.name, "shape": t.shape.as_list()}


def _recurrent_dropout(**kwargs):
    train, test = snt.lstm_with_recurrent_dropout(**kwargs)
    x = tf.ones((_B, _D))
    train_out, _ = train(x, train.initial_state(_B))
    test_out, _ = test(x, test.initial_state(_B))
    return h_spec(train_out), h_spec(test_out), train, test


def _trainable_state_for_core():
    core = snt.LSTM(3)
    state = snt.TrainableState.for_core(core)
    return state(2), state


def _unroll(unroll, h, core, **kwargs):
    out, final = getattr(snt, unroll)(core, **kwargs)
    h.settle(core)
    out, final = getattr(snt, unroll)(core, **kwargs)
    return out, final, core


def _unroll_traced(unroll, mode, h):
    core = snt.GRU(3)
    f = tf.function(
        lambda xs: getattr(snt, unroll)(core, xs, core.initial_state(_B)),
        autograph=mode == "autograph",
    )
    xs = tf.constant(h.ramp((_T, _B, _D)))
    f(xs)
    h.settle(core)
    return f(xs), core


def _lstm_state():
    state = snt.LSTMState(hidden=tf.ones([2]), cell=tf.zeros([2]))
    return state, state._replace(cell=tf.ones([2])), tuple(state), state.hidden
