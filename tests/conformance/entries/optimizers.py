"""Registry entries for the optimizers (`snt.optimizers.*`).

The module under test is the optimizer; the parameters it updates are held on
it (attribute `params_under_test`) so that the suites, which snapshot and
reset a module's variables, reset them too. Each call is one `apply` with
constant updates (slots are created by the first one) and returns the updated
parameters.

`distribute=False`: Sonnet optimizers reject plain `MirroredStrategy` by design
(their variables must be replica-local; see `snt.distribute.Replicator`,
tested in `tests/test_distribute.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance.case import Case


def _with_params(make: Callable[[], snt.Optimizer]) -> Callable[[], snt.Optimizer]:
    def factory() -> snt.Optimizer:
        opt = make()
        opt.params_under_test = [
            tf.Variable(
                tf.reshape(tf.range(6, dtype=tf.float32), [3, 2]) / 4, name="w"
            ),
            tf.Variable([0.5, -0.5], name="b"),
        ]
        return opt

    return factory


def _dense_inputs() -> tuple[tf.Tensor, tf.Tensor]:
    return tf.constant([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]]), tf.constant(
        [1.0, -2.0]
    )


def _dense_call(opt: Any, gw: tf.Tensor, gb: tf.Tensor) -> list[tf.Tensor]:
    params = opt.params_under_test
    opt.apply([gw, gb], params)
    return [tf.convert_to_tensor(p) for p in params]


def _sparse_inputs() -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    # Rows 2 and 0 of `w`, row 2 twice (summed).
    values = tf.constant([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])
    return values, tf.constant([2, 0, 2]), tf.constant([1.0, -2.0])


def _sparse_call(
    opt: Any, values: tf.Tensor, indices: tf.Tensor, gb: tf.Tensor
) -> list[tf.Tensor]:
    params = opt.params_under_test
    opt.apply([tf.IndexedSlices(values, indices), gb], params)
    return [tf.convert_to_tensor(p) for p in params]


_OPTIMIZERS: list[tuple[str, type, Callable[[], snt.Optimizer]]] = [
    ("SGD", snt.optimizers.SGD, lambda: snt.optimizers.SGD(0.1)),
    ("Momentum", snt.optimizers.Momentum, lambda: snt.optimizers.Momentum(0.1, 0.9)),
    (
        "Momentum-nesterov",
        snt.optimizers.Momentum,
        lambda: snt.optimizers.Momentum(0.1, 0.9, use_nesterov=True),
    ),
    ("Adam", snt.optimizers.Adam, lambda: snt.optimizers.Adam(0.1)),
    (
        "AdamW",
        snt.optimizers.AdamW,
        lambda: snt.optimizers.AdamW(0.1, weight_decay=0.1),
    ),
    (
        # A learning-rate schedule, evaluated at the optimizer's `step` (a
        # variable only optimizers with a schedule have) in every `apply`.
        "SGD-schedule",
        snt.optimizers.SGD,
        lambda: snt.optimizers.SGD(
            snt.optimizers.schedules.WarmupCosine(
                0.5, warmup_steps=2, decay_steps=4, init_value=0.1
            )
        ),
    ),
    ("RMSProp", snt.optimizers.RMSProp, lambda: snt.optimizers.RMSProp(0.1)),
    (
        "RMSProp-centered",
        snt.optimizers.RMSProp,
        lambda: snt.optimizers.RMSProp(0.1, momentum=0.5, centered=True),
    ),
]

CASES = [
    Case(
        id=name,
        cls=cls,
        factory=_with_params(make),
        inputs=_dense_inputs,
        call=_dense_call,
        distribute=False,
        # The outputs are the parameters after an update, and the parameters
        # are float32: the training-step and low-precision suites do not apply.
        trainable=False,
        precisions=(),
    )
    for name, cls, make in _OPTIMIZERS
] + [
    Case(
        id=f"{name}-sparse",
        cls=cls,
        factory=_with_params(make),
        inputs=_sparse_inputs,
        call=_sparse_call,
        # De-duplicating indices uses `tf.unique`, whose output size is
        # data-dependent, which XLA cannot compile.
        xla=name.startswith("SGD"),
        distribute=False,
        trainable=False,
        precisions=(),
    )
    for name, cls, make in _OPTIMIZERS
]
