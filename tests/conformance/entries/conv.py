"""Registry entries for the convolutions: Conv1D/2D/3D, their transposes and
DepthwiseConv2D (channels-last and channels-first, string and function
paddings, strides and dilation)."""

from __future__ import annotations

import sonnet as snt
from tests.conformance import case
from tests.conformance.case import Case

_x = case.ramp


CASES = [
    Case(
        id="Conv1D",
        ctor_kwargs=dict(output_channels=3, kernel_shape=3),
        cls=snt.Conv1D,
        factory=lambda: snt.Conv1D(3, 3),
        inputs=lambda: _x(2, 4, 2),
    ),
    Case(
        id="Conv1D-causal-NCW",
        ctor_kwargs=dict(
            output_channels=2, kernel_shape=3, padding=snt.pad.causal, data_format="NCW"
        ),
        cls=snt.Conv1D,
        factory=lambda: snt.Conv1D(2, 3, padding=snt.pad.causal, data_format="NCW"),
        inputs=lambda: _x(2, 3, 5),
    ),
    Case(
        id="Conv2D",
        ctor_kwargs=dict(output_channels=3, kernel_shape=3),
        cls=snt.Conv2D,
        factory=lambda: snt.Conv2D(3, 3),
        inputs=lambda: _x(2, 4, 4, 2),
    ),
    Case(
        id="Conv2D-NCHW-stride2-valid",
        ctor_kwargs=dict(
            output_channels=3,
            kernel_shape=(3, 2),
            stride=2,
            padding="VALID",
            data_format="NCHW",
        ),
        cls=snt.Conv2D,
        factory=lambda: snt.Conv2D(
            3, (3, 2), stride=2, padding="VALID", data_format="NCHW"
        ),
        inputs=lambda: _x(2, 2, 5, 5),
    ),
    Case(
        id="Conv2D-dilated-padfns-nobias",
        ctor_kwargs=dict(
            output_channels=2,
            kernel_shape=2,
            rate=2,
            padding=[snt.pad.full, snt.pad.causal],
            with_bias=False,
        ),
        cls=snt.Conv2D,
        factory=lambda: snt.Conv2D(
            2, 2, rate=2, padding=[snt.pad.full, snt.pad.causal], with_bias=False
        ),
        inputs=lambda: _x(1, 4, 3, 2),
    ),
    Case(
        id="Conv3D",
        ctor_kwargs=dict(output_channels=2, kernel_shape=2),
        cls=snt.Conv3D,
        factory=lambda: snt.Conv3D(2, 2),
        inputs=lambda: _x(2, 3, 3, 3, 2),
    ),
    Case(
        id="Conv3D-NCDHW",
        ctor_kwargs=dict(output_channels=2, kernel_shape=2, data_format="NCDHW"),
        cls=snt.Conv3D,
        factory=lambda: snt.Conv3D(2, 2, data_format="NCDHW"),
        inputs=lambda: _x(1, 2, 3, 3, 2),
    ),
    Case(
        id="Conv1DTranspose",
        ctor_kwargs=dict(output_channels=3, kernel_shape=3, stride=2),
        cls=snt.Conv1DTranspose,
        factory=lambda: snt.Conv1DTranspose(3, 3, stride=2),
        inputs=lambda: _x(2, 3, 2),
    ),
    Case(
        id="Conv2DTranspose",
        ctor_kwargs=dict(output_channels=2, kernel_shape=3, stride=2),
        cls=snt.Conv2DTranspose,
        factory=lambda: snt.Conv2DTranspose(2, 3, stride=2),
        inputs=lambda: _x(2, 3, 3, 2),
    ),
    Case(
        id="Conv2DTranspose-NCHW-valid-output_shape",
        ctor_kwargs=dict(
            output_channels=2,
            kernel_shape=3,
            output_shape=[7, 8],
            stride=2,
            padding="VALID",
            data_format="NCHW",
        ),
        cls=snt.Conv2DTranspose,
        factory=lambda: snt.Conv2DTranspose(
            2, 3, output_shape=[7, 8], stride=2, padding="VALID", data_format="NCHW"
        ),
        inputs=lambda: _x(1, 3, 3, 3),
    ),
    Case(
        id="Conv2DTranspose-dilated",
        ctor_kwargs=dict(output_channels=2, kernel_shape=2, rate=2, padding="VALID"),
        cls=snt.Conv2DTranspose,
        factory=lambda: snt.Conv2DTranspose(2, 2, rate=2, padding="VALID"),
        inputs=lambda: _x(1, 3, 3, 2),
    ),
    Case(
        id="Conv3DTranspose",
        ctor_kwargs=dict(output_channels=2, kernel_shape=2, stride=2),
        cls=snt.Conv3DTranspose,
        factory=lambda: snt.Conv3DTranspose(2, 2, stride=2),
        inputs=lambda: _x(2, 2, 2, 2, 2),
    ),
    Case(
        id="DepthwiseConv2D",
        ctor_kwargs=dict(kernel_shape=3, channel_multiplier=2),
        cls=snt.DepthwiseConv2D,
        factory=lambda: snt.DepthwiseConv2D(3, channel_multiplier=2),
        inputs=lambda: _x(2, 4, 4, 3),
    ),
    Case(
        id="DepthwiseConv2D-NCHW-stride2",
        ctor_kwargs=dict(kernel_shape=3, stride=2, data_format="NCHW"),
        cls=snt.DepthwiseConv2D,
        factory=lambda: snt.DepthwiseConv2D(3, stride=2, data_format="NCHW"),
        inputs=lambda: _x(2, 3, 5, 5),
    ),
]

NOT_REGISTERED: dict[type, str] = {}
