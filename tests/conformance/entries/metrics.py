"""Registry entries for `snt.Sum`, `snt.Mean` and `snt.ExponentialMovingAverage`."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance.case import Case


def _values() -> tuple[tf.Tensor]:
    return (tf.reshape(tf.range(6, dtype=tf.float32), [2, 3]),)


CASES = [
    Case(id="Sum", cls=snt.Sum, factory=snt.Sum, inputs=_values, ctor_kwargs={}),
    Case(
        id="Sum-int32",
        cls=snt.Sum,
        factory=snt.Sum,
        inputs=lambda: (tf.constant([1, 2, 3]),),
    ),
    Case(id="Mean", cls=snt.Mean, factory=snt.Mean, inputs=_values, ctor_kwargs={}),
    Case(
        id="ExponentialMovingAverage",
        cls=snt.ExponentialMovingAverage,
        factory=lambda: snt.ExponentialMovingAverage(decay=0.9),
        ctor_kwargs={"decay": 0.9},
        inputs=_values,
    ),
    Case(
        id="ExponentialMovingAverage-scalar",
        cls=snt.ExponentialMovingAverage,
        factory=lambda: snt.ExponentialMovingAverage(decay=0.5, name="ema"),
        ctor_kwargs={"decay": 0.5, "name": "ema"},
        inputs=lambda: (tf.constant(3.0),),
    ),
]

NOT_REGISTERED = {
    snt.Metric: "abstract base: covered by Sum, Mean and ExponentialMovingAverage",
}
