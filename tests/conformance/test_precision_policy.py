"""`snt.precision` over the registry: every case of a class with policy support.

The same built module, with `snt.precision.apply(module, "mixed_bfloat16")`,
computes within bfloat16 tolerance of its float32 outputs, keeps float32
variables and gets float32 gradients for every trainable variable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.conformance.registry import CASES, Case

# Classes that read the policy (or only hold submodules that do). A class
# that gains policy support is added here.
POLICY_CLASSES = {
    snt.Linear,
    snt.Bias,
    snt.Conv1D,
    snt.Conv2D,
    snt.Conv3D,
    snt.Conv1DTranspose,
    snt.Conv2DTranspose,
    snt.Conv3DTranspose,
    snt.DepthwiseConv2D,
    snt.BaseBatchNorm,
    snt.BatchNorm,
    snt.distribute.CrossReplicaBatchNorm,
    snt.GroupNorm,
    snt.Embed,
    snt.nets.MLP,
    snt.Sequential,
    snt.BatchApply,
    snt.nets.ResNet,
    snt.nets.Cifar10ConvNet,
    snt.LayerNorm,
    snt.InstanceNorm,
    snt.RMSNorm,
    snt.MultiHeadAttention,
    snt.nets.TransformerBlock,
    snt.nets.Transformer,
    snt.VanillaRNN,
    snt.LSTM,
    snt.GRU,
    snt.DeepRNN,
}
POLICY_CASES = [c for c in CASES if c.cls in POLICY_CLASSES]


def _float_leaves(structure: Any) -> list[tf.Tensor]:
    leaves = tf.nest.flatten(structure, expand_composites=True)
    return [t for t in leaves if isinstance(t, tf.Tensor) and t.dtype.is_floating]


def _variables(module: Any) -> tuple[tf.Variable, ...]:
    return tuple(tf.Module.variables.fget(module))  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", POLICY_CASES, ids=[c.id for c in POLICY_CASES])
def test_mixed_bfloat16(case: Case):
    module = case.factory()
    inputs = case.inputs()
    case.run(module, *inputs)
    if any(v.dtype != tf.float32 for v in _variables(module) if v.dtype.is_floating):
        pytest.skip("not a float32 module")
    snap = [v.numpy() for v in _variables(module)]
    expected = case.run(module, *inputs)
    for v, value in zip(_variables(module), snap, strict=True):
        v.assign(value)
    snt.precision.apply(module, "mixed_bfloat16")
    with tf.GradientTape() as tape:
        actual = case.run(module, *inputs)
        leaves = _float_leaves(actual)
        loss = tf.add_n([tf.reduce_sum(tf.cast(t, tf.float32)) for t in leaves])
    assert leaves, "no floating point outputs"
    assert all(t.dtype == tf.bfloat16 for t in leaves)
    assert all(v.dtype == tf.float32 for v in _variables(module) if v.dtype.is_floating)
    if case.deterministic:
        for a, e in zip(leaves, _float_leaves(expected), strict=True):
            scale = max(1.0, float(tf.reduce_max(tf.abs(e)))) if e.shape else 1.0
            np.testing.assert_allclose(
                tf.cast(a, tf.float32).numpy(),
                e.numpy(),
                rtol=8e-2,
                atol=8e-2 * scale,
            )
    if case.trainable:
        params = [v for v in _variables(module) if v.trainable]
        for v, g in zip(params, tape.gradient(loss, params), strict=True):
            assert g is not None, v.name
            assert g.dtype == tf.float32, v.name
