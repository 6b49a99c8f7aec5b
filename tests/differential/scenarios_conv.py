"""Differential scenarios: convolutions and `snt.pad`.

Loaded by `harness.py` in both environments: imports only snt, tf, numpy.
"""

import tensorflow as tf

import sonnet as snt

_CONVS = [
    (snt.Conv1D, 1, "NWC", "NCW"),
    (snt.Conv2D, 2, "NHWC", "NCHW"),
    (snt.Conv3D, 3, "NDHWC", "NCDHW"),
]
_TRANSPOSES = [
    (snt.Conv1DTranspose, 1, "NWC", "NCW"),
    (snt.Conv2DTranspose, 2, "NHWC", "NCHW"),
    (snt.Conv3DTranspose, 3, "NDHWC", "NCDHW"),
]


def register(h):
    for cls, n, data_format, other_format in _CONVS:
        shape = (2,) + (5,) * n + (3,)
        full = n == 2  # the whole grid for 2-D; the shared code for the others
        axes = {
            "output_channels": h.ints(4),
            "kernel_shape": h.ints(3) + h.shapes((3,) * n),
            "stride": h.ints(2) + h.shapes((2,) * n),
            "rate": h.ints(2) + h.shapes((2,) * n),
            "padding": h.strs("SAME", "VALID")
            + [
                ("pad.causal", lambda: snt.pad.causal),
                ("pad.full", lambda: snt.pad.full),
                ("pad_list", lambda n=n: [snt.pad.same] * n),
                ("pad_tuple", lambda n=n: (snt.pad.valid,) * n),
                ("pad_list_wrong_length", lambda n=n: [snt.pad.same] * (n + 1)),
            ],
            "with_bias": h.bools(True),
            "data_format": h.strs(data_format, other_format),
            "@inputs": h.inputs(shape),
        }
        if full:
            axes["w_init"] = h.initializers()
            axes["b_init"] = h.initializers()
            axes["name"] = h.names()
        else:
            axes = {k: v for k, v in axes.items() if k != "with_bias"}
        h.module_grid(
            cls.__name__,
            cls,
            {
                "output_channels": 4,
                "kernel_shape": 3,
                "w_init": h.Ramp(),
                "@inputs": h.x(shape),
            },
            axes,
            modes=h.ALL_MODES if full else True,
        )

    for cls, n, data_format, other_format in _TRANSPOSES:
        shape = (2,) + (4,) * n + (3,)
        axes = {
            "output_channels": h.ints(4),
            "kernel_shape": h.ints(3) + h.shapes((3,) * n),
            "output_shape": h.shapes((8,) * n)
            + [("TensorShape_none", lambda: None), ("wrong", lambda n=n: (3,) * n)],
            "stride": h.ints(2) + h.shapes((2,) * n),
            "rate": h.ints(1) + [("two", lambda: 2)],
            "padding": h.strs("SAME", "VALID"),
            "data_format": h.strs(data_format, other_format),
            "@inputs": h.inputs(shape),
        }
        if n == 2:
            axes["with_bias"] = h.bools(True)
            axes["w_init"] = h.initializers()
            axes["b_init"] = h.initializers()
        h.module_grid(
            cls.__name__,
            cls,
            {
                "output_channels": 4,
                "kernel_shape": 3,
                "stride": 2,
                "w_init": h.Ramp(),
                "@inputs": h.x(shape),
            },
            axes,
        )

    shape = (2, 5, 5, 3)
    h.module_grid(
        "DepthwiseConv2D",
        snt.DepthwiseConv2D,
        {"kernel_shape": 3, "w_init": h.Ramp(), "@inputs": h.x(shape)},
        {
            "kernel_shape": h.ints(3) + h.shapes((3, 3)),
            "channel_multiplier": h.ints(2),
            "stride": h.ints(2) + h.shapes((2, 2)),
            "rate": h.ints(2) + h.shapes((2, 2)),
            "padding": h.strs("SAME", "VALID"),
            "with_bias": h.bools(True),
            "w_init": h.initializers(),
            "b_init": h.initializers(),
            "data_format": h.strs("NHWC", "NCHW"),
            "@inputs": h.inputs(shape),
        },
    )

    for f in (snt.pad.same, snt.pad.full, snt.pad.causal, snt.pad.reverse_causal):
        h.grid(
            f"pad.{f.__name__}",
            lambda _f=f, **kwargs: _f(**kwargs),
            {"effective_kernel_size": 3},
            {"effective_kernel_size": h.ints(3) + [("four", lambda: 4)]},
        )
    h.grid(
        "pad.valid",
        lambda **kwargs: snt.pad.valid(**kwargs),
        {"effective_kernel_size": 3},
        {"effective_kernel_size": h.ints(3)},
    )
    h.grid(
        "pad.create",
        lambda **kwargs: snt.pad.create(**kwargs),
        {
            "padding": snt.pad.same,
            "kernel": 3,
            "rate": 1,
            "n": 2,
            "channel_index": 3,
        },
        {
            "padding": [
                ("function", lambda: snt.pad.same),
                ("list", lambda: [snt.pad.same, snt.pad.causal]),
                ("tuple", lambda: (snt.pad.full,)),
                ("wrong_length", lambda: [snt.pad.same] * 3),
                ("str", lambda: "SAME"),
            ],
            "kernel": h.ints(3) + h.shapes((3, 5)),
            "rate": h.ints(2) + h.shapes((1, 2)),
            "n": h.ints(2),
            "channel_index": h.ints(3)
            + [("one", lambda: 1), ("minus_one", lambda: -1)],
        },
    )
    h.add("Conv2D(pad.create_equivalence)", _conv_padding_functions)


def _conv_padding_functions():
    x = tf.reshape(tf.range(2 * 6 * 6 * 2, dtype=tf.float32) / 50.0, (2, 6, 6, 2))
    outs = {}
    for name, padding in [
        ("causal", snt.pad.causal),
        ("full", snt.pad.full),
        ("reverse_causal", snt.pad.reverse_causal),
        ("mixed", (snt.pad.causal, snt.pad.same)),
    ]:
        conv = snt.Conv2D(2, 3, rate=2, padding=padding, w_init=snt.initializers.Ones())
        outs[name] = conv(x)
    return outs
