"""Registry entries for the core modules (`snt.Module`, `snt.Deferred`, ...)."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance.case import Case


def _linear() -> snt.Linear:
    return snt.Linear(3)


def _deferred() -> snt.Deferred:
    return snt.Deferred(_linear)


CASES = [
    Case(
        id="Deferred",
        cls=snt.Deferred,
        factory=_deferred,
        ctor_kwargs={"constructor": _linear},
        inputs=lambda: (tf.reshape(tf.range(8, dtype=tf.float32), [2, 4]),),
    ),
]

NOT_REGISTERED = {
    snt.Module: "abstract base: every other case exercises it",
    snt.Optimizer: "abstract base: covered by the optimizer cases",
}
