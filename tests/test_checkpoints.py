"""Checkpoints: CheckpointManager round trips, damaged files, wrong configurations.

* Every registered module (the registry in `tests/conformance`) and every
  optimizer (with its slots) survives a `tf.train.CheckpointManager` round
  trip; older checkpoints stay restorable until `max_to_keep` drops them.
* A truncated, corrupted or missing data file or index gives a clear error
  and leaves the live variables unchanged (TensorFlow's own `read` and
  `snt.restore_checkpoint`).
* Restoring into a module built with another configuration raises an error
  naming the variable and both shapes (TensorFlow's own, for existing
  variables and on creation) and, with `snt.restore_checkpoint`, changes no
  variable at all (TensorFlow's own restore stops at the first mismatch,
  after restoring the variables before it).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.conformance.registry import CASES, Case

pytestmark = pytest.mark.filterwarnings("ignore")


def _variables(module: Any) -> tuple[tf.Variable, ...]:
    return tuple(tf.Module.variables.fget(module))  # type: ignore[attr-defined]


def _values(module: Any) -> list[np.ndarray]:
    return [np.asarray(v.numpy()) for v in _variables(module)]


def _assert_values(module: Any, expected: list[np.ndarray]) -> None:
    actual = _values(module)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a, e)


def _perturb(module: Any) -> None:
    """Changes every numeric variable (so restored values are distinguishable)."""
    for v in _variables(module):
        if v.dtype.is_floating or v.dtype.is_integer:
            v.assign(v + tf.ones_like(v))


# ---------------------------------------------------------------------------
# CheckpointManager round trips.


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_checkpoint_manager_round_trip(case: Case, tmp_path):
    module = case.factory()
    inputs = case.inputs()
    case.run(module, *inputs)
    checkpoint = tf.train.Checkpoint(module=module)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=2)
    first_path = manager.save()
    _perturb(module)
    manager.save()
    second = _values(module)
    _perturb(module)
    manager.save()  # Drops the first checkpoint (max_to_keep=2).
    third = _values(module)

    assert len(manager.checkpoints) == 2
    assert first_path not in manager.checkpoints
    assert not Path(first_path + ".index").exists()
    assert tf.train.latest_checkpoint(str(tmp_path)) == manager.latest_checkpoint

    restored = case.factory()
    case.run(restored, *inputs)
    restored_checkpoint = tf.train.Checkpoint(module=restored)
    latest = tf.train.CheckpointManager(
        restored_checkpoint, str(tmp_path), max_to_keep=2
    ).latest_checkpoint
    snt.restore_checkpoint(restored_checkpoint, latest).assert_consumed()
    _assert_values(restored, third)
    restored_checkpoint.restore(manager.checkpoints[0]).assert_consumed()
    _assert_values(restored, second)


_OPTIMIZERS = {
    "SGD": lambda: snt.optimizers.SGD(0.1),
    "Momentum": lambda: snt.optimizers.Momentum(0.1, 0.9),
    "Momentum-nesterov": lambda: snt.optimizers.Momentum(0.1, 0.9, use_nesterov=True),
    "Adam": lambda: snt.optimizers.Adam(0.1),
    "RMSProp": lambda: snt.optimizers.RMSProp(0.1, momentum=0.5),
    "RMSProp-centered": lambda: snt.optimizers.RMSProp(0.1, centered=True),
}


def _data(step: int) -> tuple[tf.Tensor, tf.Tensor]:
    rng = np.random.default_rng(step)
    return (
        tf.constant(rng.normal(size=(4, 3)), tf.float32),
        tf.constant(rng.normal(size=(4, 2)), tf.float32),
    )


def _train(model: Any, optimizer: Any, steps: range) -> None:
    for step in steps:
        x, y = _data(step)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        params = model.trainable_variables
        optimizer.apply(tape.gradient(loss, params), params)


@pytest.mark.parametrize("name", sorted(_OPTIMIZERS))
def test_optimizer_round_trip_with_slots(name: str, tmp_path):
    make = _OPTIMIZERS[name]
    model, optimizer = snt.nets.MLP([5, 2]), make()
    _train(model, optimizer, range(3))
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=1)
    manager.save()
    saved_optimizer_state = _values(optimizer)
    _train(model, optimizer, range(3, 5))
    expected = _values(model) + _values(optimizer)

    # A fresh model and optimizer: every variable, slots included, is
    # restored when it is created (model: first call; slots: first apply).
    restored_model, restored_optimizer = snt.nets.MLP([5, 2]), make()
    status = tf.train.Checkpoint(
        model=restored_model, optimizer=restored_optimizer
    ).restore(manager.latest_checkpoint)
    _train(restored_model, restored_optimizer, range(3, 5))
    status.assert_consumed()
    actual = _values(restored_model) + _values(restored_optimizer)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a, e)
    if name != "SGD":
        assert len(saved_optimizer_state) >= 4, "no slots were checkpointed"


# ---------------------------------------------------------------------------
# Damaged files.


def _trained(tmp_path: Path) -> tuple[str, Any, Any]:
    """A checkpoint of an MLP and Adam after one step, and its prefix."""
    model, optimizer = snt.nets.MLP([4, 2]), snt.optimizers.Adam(0.1)
    _train(model, optimizer, range(1))
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=optimizer),
        str(tmp_path / "good"),
        max_to_keep=1,
    )
    return manager.save(), model, optimizer


def _flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    start = len(data) // 3
    for i in range(start, min(start + 8, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


_DAMAGE = {
    "data-truncated": ("data", _truncate),
    "data-empty": ("data", lambda p: p.write_bytes(b"")),
    "data-corrupted": ("data", _flip_bytes),
    "data-missing": ("data", lambda p: p.unlink()),
    "index-truncated": ("index", _truncate),
    "index-corrupted": ("index", _flip_bytes),
    "index-missing": ("index", lambda p: p.unlink()),
}


def _damaged_copy(prefix: str, tmp_path: Path, damage: str) -> str:
    source = Path(prefix)
    target = tmp_path / "damaged"
    target.mkdir()
    for f in source.parent.glob(source.name + ".*"):
        shutil.copy(f, target / f.name)
    part, corrupt = _DAMAGE[damage]
    (file,) = target.glob(f"{source.name}.data-*" if part == "data" else "*.index")
    corrupt(file)
    return str(target / source.name)


def _live_model(tmp_path: Path) -> tuple[tf.train.Checkpoint, Any, Any]:
    """A differently trained model and optimizer with the same structure."""
    model, optimizer = snt.nets.MLP([4, 2]), snt.optimizers.Adam(0.1)
    _train(model, optimizer, range(5, 8))
    return tf.train.Checkpoint(model=model, optimizer=optimizer), model, optimizer


@pytest.mark.parametrize("damage", sorted(_DAMAGE))
def test_damaged_checkpoint_with_tensorflow_read(damage: str, tmp_path):
    prefix, _, _ = _trained(tmp_path)
    damaged = _damaged_copy(prefix, tmp_path, damage)
    checkpoint, model, optimizer = _live_model(tmp_path)
    before = _values(model) + _values(optimizer)
    with pytest.raises((tf.errors.OpError, IndexError, ValueError)):
        checkpoint.read(damaged)
    for a, b in zip(_values(model) + _values(optimizer), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("damage", sorted(_DAMAGE))
def test_damaged_checkpoint_with_restore_checkpoint(damage: str, tmp_path):
    prefix, _, _ = _trained(tmp_path)
    damaged = _damaged_copy(prefix, tmp_path, damage)
    checkpoint, model, optimizer = _live_model(tmp_path)
    before = _values(model) + _values(optimizer)
    with pytest.raises(ValueError, match="`save_path` must be a complete") as info:
        snt.restore_checkpoint(checkpoint, damaged)
    assert f"Received: {damaged!r}." in str(info.value)
    for a, b in zip(_values(model) + _values(optimizer), before):
        np.testing.assert_array_equal(a, b)
    # The intact checkpoint still restores into the same objects.
    snt.restore_checkpoint(checkpoint, prefix).assert_consumed()


# ---------------------------------------------------------------------------
# Restoring into a different configuration.


def _mlp_checkpoint(tmp_path: Path, sizes: list[int]) -> str:
    model = snt.nets.MLP(sizes)
    model(tf.ones([2, 3]))
    return tf.train.Checkpoint(model=model).write(str(tmp_path / "mlp"))


def test_tensorflow_names_variable_and_shapes_for_existing_variables(tmp_path):
    path = _mlp_checkpoint(tmp_path, [4, 2])
    model = snt.nets.MLP([4, 5])
    model(tf.ones([2, 3]))
    with pytest.raises(ValueError) as info:
        tf.train.Checkpoint(model=model).read(path)
    message = str(info.value)
    assert "mlp/linear_1/" in message
    assert "(2,)" in message or "(4, 2)" in message
    assert "(5,)" in message or "(4, 5)" in message


def test_tensorflow_names_variable_and_shapes_on_create(tmp_path):
    path = _mlp_checkpoint(tmp_path, [4, 2])
    model = snt.nets.MLP([4, 5])
    tf.train.Checkpoint(model=model).read(path)
    with pytest.raises(ValueError) as info:
        model(tf.ones([2, 3]))  # Variables are created and restored here.
    message = str(info.value)
    assert "mlp/linear_1/" in message
    assert "(2,)" in message or "(4, 2)" in message
    assert "(5,)" in message or "(4, 5)" in message


def test_restore_checkpoint_reports_every_mismatch_and_changes_nothing(tmp_path):
    path = _mlp_checkpoint(tmp_path, [4, 2])
    model = snt.nets.MLP([4, 5])
    model(tf.ones([2, 3]))
    before = _values(model)
    with pytest.raises(ValueError) as info:
        snt.restore_checkpoint(tf.train.Checkpoint(model=model), path)
    message = str(info.value)
    assert "model/_layers/1/b (variable 'mlp/linear_1/b:0')" in message
    assert "checkpoint has shape (2,) dtype float32" in message
    assert "the variable has shape (5,) dtype float32" in message
    assert "model/_layers/1/w (variable 'mlp/linear_1/w:0')" in message
    assert "checkpoint has shape (4, 2)" in message
    assert "the variable has shape (4, 5)" in message
    assert "linear_0" not in message  # The first layer fits.
    assert f"Received: {path!r}." in message
    # Unlike TensorFlow's own restore, the fitting first layer is untouched.
    _assert_values(model, before)


def test_restore_checkpoint_reports_dtype_mismatch(tmp_path):
    linear = snt.Linear(3)
    linear(tf.ones([1, 2]))
    path = tf.train.Checkpoint(model=linear).write(str(tmp_path / "lin"))
    other = snt.Linear(3)
    other(tf.ones([1, 2], tf.float64))
    with pytest.raises(ValueError, match="dtype float32, the variable has shape"):
        snt.restore_checkpoint(tf.train.Checkpoint(model=other), path)


def test_tensorflow_partial_restore_that_restore_checkpoint_avoids(tmp_path):
    # Documents why `snt.restore_checkpoint` checks first: TensorFlow's own
    # restore assigns the variables before the first mismatch.
    path = _mlp_checkpoint(tmp_path, [4, 2])
    model = snt.nets.MLP([4, 5])
    model(tf.ones([2, 3]))
    before = _values(model)
    with pytest.raises(ValueError):
        tf.train.Checkpoint(model=model).read(path)
    changed = [not np.array_equal(a, b) for a, b in zip(_values(model), before)]
    assert any(changed), "TensorFlow now restores atomically; update the docs"


def test_restore_checkpoint_arguments(tmp_path):
    linear = snt.Linear(2)
    linear(tf.ones([1, 2]))
    checkpoint = tf.train.Checkpoint(model=linear)
    with pytest.raises(TypeError, match="`checkpoint` must be a tf.train.Checkpoint"):
        snt.restore_checkpoint(linear, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`save_path` must be a checkpoint prefix"):
        snt.restore_checkpoint(checkpoint, 3)
    with pytest.raises(ValueError, match="Failed to find any matching files"):
        snt.restore_checkpoint(checkpoint, str(tmp_path / "nothing"))
    # None (no checkpoint saved yet) restores nothing, like `restore(None)`.
    before = _values(linear)
    snt.restore_checkpoint(checkpoint, None)
    _assert_values(linear, before)
    # A path-like prefix works.
    path = checkpoint.write(str(tmp_path / "lin"))
    snt.restore_checkpoint(checkpoint, Path(path)).assert_consumed()
