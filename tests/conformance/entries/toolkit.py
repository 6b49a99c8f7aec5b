"""Registry entries for the training-loop toolkit (issue 34).

`snt.optimizers.Accumulator` and `snt.optimizers.Muon` are registered like
the other optimizers (`optimizers.py`: the parameters live on the module
under test; one call is one `apply` and returns them). The accumulator
steps every second call: the suites reset its `count` to 1 (the value
after the first call), so each compared call applies.

`snt.AveragedWeights` averages a built `snt.Linear` that it does not track;
one call is the linear's output on the input with the averages swapped in
(evaluation), then one `update()`.

`distribute=False`: optimizers reject plain `MirroredStrategy` (see
`optimizers.py`); `tests/test_accumulate.py`, `test_muon.py` and
`test_averaging.py` run them under `snt.distribute.Replicator`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance.case import Case
from tests.conformance.entries import optimizers


def _averaged() -> snt.AveragedWeights:
    linear = snt.Linear(2, w_init=snt.initializers.Constant(0.5), name="linear")
    linear(tf.ones([1, 3]))
    return snt.AveragedWeights(linear, decay=0.9, warmup=True)


def _evaluate_and_update(averages: Any, x: tf.Tensor) -> tf.Tensor:
    with averages.swapped():
        y = averages._module(x)  # noqa: SLF001
    averages.update()
    return y


_OPTIMIZER_CASE = {"distribute": False, "trainable": False, "precisions": ()}

CASES = [
    Case(
        id="Accumulator",
        cls=snt.optimizers.Accumulator,
        factory=optimizers._with_params(  # noqa: SLF001
            lambda: snt.optimizers.Accumulator(snt.optimizers.SGD(0.1), 2)
        ),
        inputs=optimizers._dense_inputs,  # noqa: SLF001
        call=optimizers._dense_call,  # noqa: SLF001
        **_OPTIMIZER_CASE,
    ),
    Case(
        id="Muon",
        cls=snt.optimizers.Muon,
        factory=optimizers._with_params(  # noqa: SLF001
            lambda: snt.optimizers.Muon(
                0.1, weight_decay=0.1, fallback=snt.optimizers.SGD(0.1)
            )
        ),
        inputs=optimizers._dense_inputs,  # noqa: SLF001
        call=optimizers._dense_call,  # noqa: SLF001
        **_OPTIMIZER_CASE,
    ),
    Case(
        id="AveragedWeights",
        cls=snt.AveragedWeights,
        factory=_averaged,
        inputs=lambda: (tf.constant([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]),),
        call=_evaluate_and_update,
        # The averaged module is deliberately not tracked (it is not part of
        # the averages' checkpoint), so a SavedModel of the averages alone
        # cannot capture it; export both together.
        saved_model=False,
        distribute=False,
        trainable=False,
        precisions=(),
    ),
]
