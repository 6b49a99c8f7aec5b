"""Registry entries for the training-loop toolkit, second part (issue 34):
normalised weights (`snt.spectral_norm`, `snt.weight_norm`) and drop path.

A normalised layer must be built before its weight step is added, so those
factories build it on the example input first. One call of a spectrally
normalised layer is a training step's: the layer, then
`snt.spectral_norm.update` (the suites reset `u` and `v` before each
compared call, so every call refines the same estimate). The steps
themselves are not registered: they are not called on inputs but by their
layers, whose cases cover them.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance import case
from tests.conformance.case import Case

_sequence = case.sequence


def _built(module: Any, *inputs: tf.Tensor) -> Any:
    module(*inputs)
    return module


def _spectral(module: Any, *inputs: tf.Tensor) -> Any:
    snt.spectral_norm.add(_built(module, *inputs), seed=1)
    return module


def _weight_norm(module: Any, *inputs: tf.Tensor) -> Any:
    steps = snt.weight_norm.add(_built(module, *inputs))
    for step in steps.values():  # Norms other than the weights' own.
        step.g.assign(step.g * (1.0 + 0.1 * _sequence(*step.g.shape)))
    return module


def _train_call(module: Any, *inputs: tf.Tensor) -> tf.Tensor:
    # The update after the call, so that a call failing on bad inputs
    # changes nothing (the bad-input suite checks it).
    outputs = module(*inputs)
    snt.spectral_norm.update(module)
    return outputs


def _ids() -> tuple[tf.Tensor]:
    return (tf.constant([[1, 2], [5, 0]]),)


_NORMALISED = {"precisions": ()}  # Built in float32 by the factories.

CASES = [
    Case(
        id="Linear-spectral_norm",
        cls=snt.Linear,
        factory=lambda: _spectral(snt.Linear(3), _sequence(2, 4)),
        inputs=lambda: (_sequence(2, 4),),
        call=_train_call,
        **_NORMALISED,
    ),
    Case(
        id="Conv2D-spectral_norm",
        cls=snt.Conv2D,
        factory=lambda: _spectral(snt.Conv2D(3, 2), _sequence(2, 4, 4, 2)),
        inputs=lambda: (_sequence(2, 4, 4, 2),),
        call=_train_call,
        **_NORMALISED,
    ),
    Case(
        id="Conv1DTranspose-spectral_norm",
        cls=snt.Conv1DTranspose,
        factory=lambda: _spectral(snt.Conv1DTranspose(3, 2), _sequence(2, 4, 2)),
        inputs=lambda: (_sequence(2, 4, 2),),
        call=_train_call,
        **_NORMALISED,
    ),
    Case(
        id="Embed-spectral_norm",
        cls=snt.Embed,
        factory=lambda: _spectral(snt.Embed(6, 4), *_ids()),
        inputs=_ids,
        call=_train_call,
        **_NORMALISED,
    ),
    Case(
        id="MLP-spectral_norm-eval",
        cls=snt.nets.MLP,
        factory=lambda: _spectral(snt.nets.MLP([5, 3]), _sequence(2, 4)),
        inputs=lambda: (_sequence(2, 4),),
        **_NORMALISED,
    ),
    Case(
        id="Linear-weight_norm",
        cls=snt.Linear,
        factory=lambda: _weight_norm(snt.Linear(3), _sequence(2, 4)),
        inputs=lambda: (_sequence(2, 4),),
        **_NORMALISED,
    ),
    Case(
        id="Conv2DTranspose-weight_norm",
        cls=snt.Conv2DTranspose,
        factory=lambda: _weight_norm(snt.Conv2DTranspose(3, 2), _sequence(2, 3, 3, 2)),
        inputs=lambda: (_sequence(2, 3, 3, 2),),
        **_NORMALISED,
    ),
    Case(
        id="DepthwiseConv2D-weight_norm",
        cls=snt.DepthwiseConv2D,
        factory=lambda: _weight_norm(
            snt.DepthwiseConv2D(2, channel_multiplier=2), _sequence(2, 4, 4, 3)
        ),
        inputs=lambda: (_sequence(2, 4, 4, 3),),
        **_NORMALISED,
    ),
    Case(
        id="Embed-weight_norm",
        cls=snt.Embed,
        factory=lambda: _weight_norm(snt.Embed(6, 4), *_ids()),
        inputs=_ids,
        **_NORMALISED,
    ),
    Case(
        id="DropPath-row-training",
        cls=snt.DropPath,
        factory=lambda: snt.DropPath(0.5),
        # 16 rows: a dropped branch is zero whatever its values (NaN too, as
        # in `tf.nn.dropout`), so with few rows every row could be dropped
        # (1 in 16 for 4 rows) and NaN inputs would give a finite output.
        inputs=lambda: (_sequence(16, 3, 2),),
        call=lambda m, x: m(x, is_training=True),
        deterministic=False,
        ctor_kwargs={"rate": 0.5},
    ),
    Case(
        id="DropPath-batch-eval",
        cls=snt.DropPath,
        factory=lambda: snt.DropPath(0.25, mode="batch", seed=3),
        inputs=lambda: (_sequence(4, 3),),
        # Evaluation returns `x` itself; `tf.identity` gives strategy.run a
        # per-replica output to compare.
        call=lambda m, x: tf.identity(m(x, is_training=False)),
        trainable=False,
        ctor_kwargs={"rate": 0.25, "mode": "batch", "seed": 3},
    ),
    Case(
        id="BottleNeckBlockV2-drop_path-training",
        cls=snt.nets.resnet.BottleNeckBlockV2,
        factory=lambda: snt.nets.resnet.BottleNeckBlockV2(
            channels=8, stride=1, use_projection=True, bn_config={}, drop_path_rate=0.5
        ),
        inputs=lambda: (_sequence(4, 4, 4, 3),),
        call=lambda m, x: m(x, is_training=True),
        deterministic=False,
        precisions=(),
    ),
]

NOT_REGISTERED: dict[type, str] = {
    snt.spectral_norm.SpectralNorm: (
        "a weight step, called by its layer (`step(layer, dtype)`), not on "
        "inputs: covered by the `*-spectral_norm` cases"
    ),
    snt.weight_norm.WeightNorm: (
        "a weight step, called by its layer: covered by the `*-weight_norm` cases"
    ),
}
