"""Registry entries for the core modules (`snt.Module`, `snt.Deferred`, ...)."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance.registry import Case


def _deferred() -> snt.Deferred:
    return snt.Deferred(lambda: snt.Linear(3))


CASES = [
    Case(
        id="Deferred",
        cls=snt.Deferred,
        factory=_deferred,
        inputs=lambda: (tf.reshape(tf.range(8, dtype=tf.float32), [2, 4]),),
    ),
]

NOT_REGISTERED = {
    snt.Module: "abstract base: every other case exercises it",
    snt.Optimizer: "abstract base: covered by the optimizer cases",
}
