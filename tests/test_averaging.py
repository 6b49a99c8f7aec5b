"""Tests for `snt.AveragedWeights` (EMA and uniform averages of weights)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _det(shape: Any, dtype: tf.DType) -> tf.Tensor:
    n = int(np.prod(shape))
    return tf.reshape(tf.sin(tf.range(1, n + 1, dtype=dtype)) * 0.5, shape)


def _mlp(dtype: tf.DType = tf.float32) -> snt.nets.MLP:
    mlp = snt.nets.MLP([4, 2], w_init=_det, b_init=_det)
    mlp(tf.zeros([1, 3], dtype))
    return mlp


def _perturb(module: snt.Module, step: int) -> None:
    for i, v in enumerate(module.trainable_variables):
        v.assign(v + tf.cast(np.cos(step + i) * 0.3, v.dtype))


def _values(module: snt.Module) -> list[np.ndarray]:
    return [v.numpy().astype(np.float64) for v in module.trainable_variables]


def _reference(history: list[list[np.ndarray]], decay: Any, warmup: bool):
    """The averages after one update per entry of `history[1:]`
    (`history[0]`: the values at construction)."""
    averages = [h.copy() for h in history[0]]
    for n, values in enumerate(history[1:]):
        if decay is None:
            rate = 1.0 / (n + 1)
        else:
            d = min(decay, (1 + n) / (10 + n)) if warmup else decay
            rate = 1.0 - d
        averages = [a - rate * (a - v) for a, v in zip(averages, values, strict=True)]
    return averages


@pytest.mark.parametrize(
    "decay,warmup", [(0.9, False), (0.99, True), (None, False), (0.0, False)]
)
@pytest.mark.parametrize("traced", [False, True])
def test_matches_numpy_reference(decay, warmup, traced):
    model = _mlp()
    averages = snt.AveragedWeights(model, decay=decay, warmup=warmup)
    update = tf.function(averages.update) if traced else averages.update
    history = [_values(model)]
    for step in range(6):
        _perturb(model, step)
        history.append(_values(model))
        update()
    expected = _reference(history, decay, warmup)
    for a, e in zip(averages.averages, expected, strict=True):
        np.testing.assert_allclose(a.numpy(), e, rtol=1e-5, atol=1e-6)
    assert int(averages.num_updates) == 6
    if decay is None:
        mean = [np.mean(vs, axis=0) for vs in zip(*history[1:], strict=True)]
        for a, e in zip(averages.averages, mean, strict=True):
            np.testing.assert_allclose(a.numpy(), e, rtol=1e-5, atol=1e-6)


def test_swapped_puts_the_averages_in_and_the_live_weights_back():
    model = _mlp()
    averages = snt.AveragedWeights(model, decay=0.5)
    _perturb(model, 0)
    averages.update()
    live = _values(model)
    averaged = [a.numpy() for a in averages.averages]
    x = tf.ones([2, 3])
    with averages.swapped():
        assert averages.is_swapped
        for v, a in zip(model.trainable_variables, averaged, strict=True):
            np.testing.assert_array_equal(v.numpy(), a)
        inside = model(x).numpy()
    assert not averages.is_swapped
    for v, e in zip(model.trainable_variables, live, strict=True):
        np.testing.assert_array_equal(v.numpy(), e)
    for a, e in zip(averages.averages, averaged, strict=True):
        np.testing.assert_array_equal(a.numpy(), e)
    assert not np.allclose(inside, model(x).numpy())


def test_swapped_restores_on_an_exception():
    model = _mlp()
    averages = snt.AveragedWeights(model, decay=0.5)
    _perturb(model, 0)
    averages.update()
    live = _values(model)
    with pytest.raises(RuntimeError, match="boom"), averages.swapped():
        raise RuntimeError("boom")
    assert not averages.is_swapped
    for v, e in zip(model.trainable_variables, live, strict=True):
        np.testing.assert_array_equal(v.numpy(), e)


def test_averages_are_created_on_the_first_update_of_an_unbuilt_module():
    model = snt.Linear(2, w_init=_det)
    averages = snt.AveragedWeights(model, decay=0.5)
    assert averages.averages == []
    model(tf.ones([1, 3]))
    averages.update()
    for a, v in zip(averages.averages, model.trainable_variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), v.numpy())
        assert not a.trainable
    assert [v.name for v in averages.variables] == [
        "averaged_weights/averages/linear/b:0",
        "averaged_weights/averages/linear/w:0",
        "averaged_weights/num_updates:0",
    ]


def test_bfloat16_variables_are_averaged_in_float32():
    model = snt.Linear(2, w_init=_det)
    snt.precision.apply(model, snt.precision.Policy(tf.bfloat16, tf.bfloat16))
    model(tf.ones([1, 3]))
    assert model.w.dtype == tf.bfloat16
    averages = snt.AveragedWeights(model, decay=0.75)
    start = model.w.numpy().astype(np.float32)
    model.w.assign(model.w + tf.constant(1.0, tf.bfloat16))
    averages.update()
    expected = (0.75 * start + 0.25 * model.w.numpy().astype(np.float32)).astype(
        tf.bfloat16.as_numpy_dtype
    )
    np.testing.assert_array_equal(averages.averages[1].numpy(), expected)


def test_checkpoint_restores_averages_and_exports_a_plain_model(tmp_path):
    model = _mlp()
    averages = snt.AveragedWeights(model, decay=0.5)
    for step in range(3):
        _perturb(model, step)
        averages.update()
    path = tf.train.Checkpoint(model=model, averages=averages).write(
        str(tmp_path / "train")
    )
    with averages.swapped():
        export = tf.train.Checkpoint(model=model).write(str(tmp_path / "export"))
    expected = [a.numpy() for a in averages.averages]

    restored_model = _mlp()
    restored = snt.AveragedWeights(restored_model, decay=0.5)
    tf.train.Checkpoint(model=restored_model, averages=restored).read(
        path
    ).assert_consumed()
    assert int(restored.num_updates) == 3
    for a, e in zip(restored.averages, expected, strict=True):
        np.testing.assert_array_equal(a.numpy(), e)

    plain = _mlp()
    tf.train.Checkpoint(model=plain).read(export).assert_consumed()
    for v, e in zip(plain.trainable_variables, expected, strict=True):
        np.testing.assert_array_equal(v.numpy(), e)

    copy = _mlp()
    averages.copy_to(copy)
    for v, e in zip(copy.trainable_variables, expected, strict=True):
        np.testing.assert_array_equal(v.numpy(), e)


def _devices(n: int) -> list[str]:
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:n]]
    assert len(devices) == n, "conftest.py should configure 4 logical CPUs"
    return devices


@pytest.mark.parametrize("inside_run", [True, False])
def test_replicator(inside_run):
    replicator = snt.distribute.Replicator(_devices(2))
    reference = _mlp()
    reference_averages = snt.AveragedWeights(reference, decay=0.5, warmup=True)
    with replicator.scope():
        model = _mlp()
        averages = snt.AveragedWeights(model, decay=0.5, warmup=True)

    def perturb(step):
        for i, v in enumerate(model.trainable_variables):
            v.assign_add(tf.fill(v.shape, tf.cos(step + i)))

    @tf.function
    def step(i):
        replicator.run(perturb, args=(i,))
        if inside_run:
            replicator.run(averages.update)
        else:
            averages.update()

    for i in range(3):
        for j, v in enumerate(reference.trainable_variables):
            v.assign_add(tf.fill(v.shape, float(np.cos(i + j))))
        reference_averages.update()
        step(tf.constant(float(i)))
    for a, e in zip(averages.averages, reference_averages.averages, strict=True):
        for copy in replicator.experimental_local_results(a):
            np.testing.assert_allclose(copy.numpy(), e.numpy(), rtol=1e-6)
    live = [v.numpy() for v in reference.trainable_variables]
    with averages.swapped():
        for v, e in zip(
            model.trainable_variables, reference_averages.averages, strict=True
        ):
            for copy in replicator.experimental_local_results(v):
                np.testing.assert_allclose(copy.numpy(), e.numpy(), rtol=1e-6)
    for v, e in zip(model.trainable_variables, live, strict=True):
        for copy in replicator.experimental_local_results(v):
            np.testing.assert_allclose(copy.numpy(), e, rtol=1e-6)


# Bad input ----------------------------------------------------------------------


def _snapshot(model: snt.Module, averages: snt.AveragedWeights) -> list[np.ndarray]:
    return [v.numpy() for v in (*model.trainable_variables, *averages.variables)]


def _assert_unchanged(before: list[np.ndarray], after: list[np.ndarray]) -> None:
    for a, b in zip(after, before, strict=True):
        np.testing.assert_array_equal(a, b)


def test_swap_twice_and_restore_without_swap():
    model = _mlp()
    averages = snt.AveragedWeights(model)
    _perturb(model, 0)
    averages.update()
    with pytest.raises(ValueError, match=r"`restore\(\)` must follow `swap\(\)`"):
        averages.restore()
    averages.swap()
    before = _snapshot(model, averages)
    with pytest.raises(ValueError, match=r"`swap\(\)` must not be called while"):
        averages.swap()
    with pytest.raises(ValueError, match=r"`swap\(\)` must not be called while"):
        with averages.swapped():
            pass
    with pytest.raises(ValueError, match=r"`update\(\)` must not be called while"):
        averages.update()
    with pytest.raises(ValueError, match=r"`copy_to\(\)` must not be called while"):
        averages.copy_to(_mlp())
    _assert_unchanged(before, _snapshot(model, averages))
    averages.restore()
    assert not averages.is_swapped


def test_swap_before_any_average():
    averages = snt.AveragedWeights(snt.Linear(2))
    with pytest.raises(ValueError, match=r"`swap\(\)` needs averages"):
        averages.swap()


def test_update_of_a_module_without_variables():
    averages = snt.AveragedWeights(snt.Linear(2))
    with pytest.raises(ValueError, match="`module` must have trainable variables"):
        averages.update()
    assert int(averages.num_updates) == 0


def test_copy_to_a_module_of_another_structure():
    averages = snt.AveragedWeights(_mlp())
    other = snt.Linear(2)
    other(tf.ones([1, 3]))
    before = [v.numpy() for v in other.trainable_variables]
    with pytest.raises(ValueError, match="`module` must have 4 trainable"):
        averages.copy_to(other)
    wide = snt.nets.MLP([5, 2])
    wide(tf.ones([1, 3]))
    with pytest.raises(ValueError, match="`module` must have variables shaped"):
        averages.copy_to(wide)
    with pytest.raises(TypeError, match="`module` must be an `snt.Module`"):
        averages.copy_to([1])
    _assert_unchanged(before, [v.numpy() for v in other.trainable_variables])


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"module": "mlp"}, TypeError, "`module`"),
        ({"decay": 1.0}, ValueError, "`decay` must be in"),
        ({"decay": -0.1}, ValueError, "`decay` must be >= 0"),
        ({"decay": "0.9"}, TypeError, "`decay`"),
        ({"decay": None, "warmup": True}, ValueError, "`warmup` must be False"),
        ({"warmup": "yes"}, TypeError, "`warmup`"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, match):
    kwargs = {"module": snt.Linear(2), **kwargs}
    with pytest.raises(error, match=match):
        snt.AveragedWeights(**kwargs)


def test_averages_of_two_averagers_made_in_one_trace_have_unique_scopes():
    linear = snt.Linear(2)  # Built in the trace: the averages are made there.
    first, second = snt.AveragedWeights(linear), snt.AveragedWeights(linear)

    @tf.function
    def update():
        linear(tf.ones([1, 3]))
        first.update()
        second.update()

    update()
    assert sorted(v.name for v in first.averages) == [
        "averaged_weights/averages/linear/b:0",
        "averaged_weights/averages/linear/w:0",
    ]
    assert sorted(v.name for v in second.averages) == [
        "averaged_weights/averages_1/linear/b:0",
        "averaged_weights/averages_1/linear/w:0",
    ]
