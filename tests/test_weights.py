"""The weight step (`sonnet/_src/weights.py`): every module kind that
multiplies by a kernel gets it from `_weight_step`, in each of its calls."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import weights


class Doubled:
    """A custom weight step: twice the default kernel; records its dtypes."""

    def __init__(self, attribute: str = "w"):
        self.default = weights.VariableKernel(attribute)
        self.dtypes: list[Any] = []

    def __call__(self, module: Any, dtype: tf.DType | None) -> tf.Tensor:
        self.dtypes.append(dtype)
        kernel = self.default(module, dtype)
        return kernel * tf.constant(2, kernel.dtype)


class Recording(Doubled):
    """The default kernel itself; records its dtypes."""

    def __call__(self, module: Any, dtype: tf.DType | None) -> tf.Tensor:
        self.dtypes.append(dtype)
        return self.default(module, dtype)


def _modes() -> list[str]:
    return ["eager", "function"]


def _run(mode: str, f: Any, *args: Any) -> np.ndarray:
    if mode == "function":
        f = tf.function(f)
    return np.asarray(tf.cast(f(*args), tf.float32))


def _check_doubled(
    module: snt.Module, attribute: str, mode: str, *inputs: tf.Tensor
) -> Doubled:
    """`module`'s outputs with a `Doubled` step are twice the plain ones
    (every module here is linear in its kernel: no bias)."""
    expected = 2 * _run(mode, module, *inputs)
    step = Doubled(attribute)
    module._weight_step = step
    np.testing.assert_allclose(_run(mode, module, *inputs), expected, rtol=1e-6)
    assert step.dtypes, "the custom step was not called"
    return step


@pytest.mark.parametrize("mode", _modes())
@pytest.mark.parametrize("rank", [2, 3])
def test_linear_uses_the_weight_step(mode, rank):
    x = tf.random.normal([4, 5] if rank == 2 else [4, 3, 5], seed=0)
    step = _check_doubled(snt.Linear(3, with_bias=False), "w", mode, x)
    assert set(step.dtypes) == {None}


@pytest.mark.parametrize("mode", _modes())
@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda: snt.Conv1D(4, 3, with_bias=False), [2, 8, 3]),
        (lambda: snt.Conv2D(4, 3, with_bias=False), [2, 8, 8, 3]),
        (lambda: snt.Conv2D(4, 1, with_bias=False), [2, 8, 8, 3]),
        (lambda: snt.Conv2D(4, 3, with_bias=False, data_format="NCHW"), [2, 3, 8, 8]),
        (lambda: snt.Conv3D(2, 3, with_bias=False), [1, 4, 4, 4, 2]),
        (lambda: snt.Conv2DTranspose(4, 3, stride=2, with_bias=False), [2, 4, 4, 3]),
        (lambda: snt.DepthwiseConv2D(3, 2, with_bias=False), [2, 8, 8, 3]),
    ],
)
def test_convolutions_use_the_weight_step(mode, make, shape):
    x = tf.random.normal(shape, seed=0)
    step = _check_doubled(make(), "w", mode, x)
    assert set(step.dtypes) == {None}


def test_empty_convolution_outputs_use_the_weight_step():
    conv = snt.Conv2D(4, 3, with_bias=False)
    conv(tf.ones([1, 5, 5, 2]))
    step = Doubled()
    conv._weight_step = step
    assert conv(tf.ones([0, 5, 5, 2])).shape == [0, 5, 5, 4]
    assert step.dtypes == [None]


@pytest.mark.parametrize("mode", _modes())
def test_embed_uses_the_weight_step(mode):
    ids = tf.constant([[0, 3], [2, 9]])
    step = _check_doubled(snt.Embed(10, 4), "embeddings", mode, ids)
    assert set(step.dtypes) == {None}


@pytest.mark.parametrize("mode", _modes())
def test_attention_projections_use_the_weight_step(mode):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, with_bias=False)
    x = tf.random.normal([2, 3, 8], seed=0)
    expected = 2 * _run(mode, mha, x)
    # Doubling the values doubles the outputs (the attention weights do not
    # depend on them); doubling queries and keys changes the weights, so
    # those steps only record.
    steps = {name: Recording() for name in ("query", "key", "output")}
    steps["value"] = Doubled()
    for name, step in steps.items():
        getattr(mha, name)._weight_step = step
    np.testing.assert_allclose(_run(mode, mha, x), expected, rtol=1e-5, atol=1e-6)
    for step in steps.values():
        assert step.dtypes == [None]


def test_policy_gives_the_step_its_compute_dtype():
    # Each module is called twice: the first call builds it, the second takes
    # `snt.Linear`'s eager fast branch.
    linear = snt.precision.apply(snt.Linear(3), "mixed_bfloat16")
    conv = snt.precision.apply(snt.Conv1D(3, 2), "mixed_bfloat16")
    embed = snt.precision.apply(snt.Embed(10, 4), "mixed_bfloat16")
    mha = snt.precision.apply(snt.MultiHeadAttention(2, 4), "mixed_bfloat16")
    cases = (
        (linear, "w", linear, (tf.ones([2, 5]),)),
        (conv, "w", conv, (tf.ones([2, 6, 5]),)),
        (embed, "embeddings", embed, (tf.constant([1, 2]),)),
        (mha.query, "w", mha, (tf.ones([1, 2, 8]),)),
    )
    steps = []
    for module, attribute, called, args in cases:
        step = Recording(attribute)
        module._weight_step = step
        steps.append(step)
        for _ in range(2):
            assert called(*args).dtype == tf.bfloat16
    assert [s.dtypes for s in steps] == [
        [tf.bfloat16] * 2,
        [tf.bfloat16] * 2,
        [None] * 2,  # `Embed` casts the looked-up rows, not the table.
        [tf.bfloat16] * 2,
    ]
    assert linear.w.dtype == tf.float32


def test_the_default_step_is_shared_and_not_state():
    a, b = snt.Linear(2), snt.Linear(2)
    assert a._weight_step is b._weight_step
    assert repr(a._weight_step) == "VariableKernel('w')"
    assert repr(snt.Embed(3, 2)._weight_step) == "VariableKernel('embeddings')"
    a(tf.ones([1, 3]))
    assert "_weight_step" not in vars(a)
    assert [v.name for v in a.variables] == ["linear/b:0", "linear/w:0"]


def test_a_step_that_is_a_module_belongs_to_the_checkpoint(tmp_path):
    class Adapter(snt.Module):
        """A stand-in for an adapter: `w + delta`."""

        def __init__(self):
            super().__init__()
            self.delta = tf.Variable(tf.fill([3, 2], 0.5), name="delta")

        def __call__(self, module: Any, dtype: tf.DType | None) -> tf.Tensor:
            return module.w + self.delta

    linear = snt.Linear(2, with_bias=False)
    x = tf.ones([1, 3])
    y = linear(x)
    linear._weight_step = Adapter()
    np.testing.assert_allclose(linear(x), y + 1.5, rtol=1e-6)
    assert len(linear.trainable_variables) == 2
    path = tf.train.Checkpoint(m=linear).write(str(tmp_path / "ckpt"))
    linear._weight_step.delta.assign(tf.zeros([3, 2]))
    tf.train.Checkpoint(m=linear).read(path).assert_consumed()
    np.testing.assert_allclose(linear(x), y + 1.5, rtol=1e-6)
