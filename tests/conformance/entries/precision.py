"""Registry entry for `snt.precision.DynamicLossScale`."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance.case import Case

CASES = [
    Case(
        id="DynamicLossScale",
        cls=snt.precision.DynamicLossScale,
        factory=lambda: snt.precision.DynamicLossScale(
            initial_scale=8.0, growth_interval=10
        ),
        ctor_kwargs={"initial_scale": 8.0, "growth_interval": 10},
        inputs=lambda: (tf.constant([1.5, 2.0]),),
        call=lambda module, loss: module.scale(loss),
        # The scale is not trained (no trainable variables).
        trainable=False,
    ),
]
