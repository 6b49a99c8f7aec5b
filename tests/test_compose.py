"""Where the fine-tuning features meet the rest: each combination works, or
refuses with a clear error, and is never a silently different model.

The interaction matrix: {stacked, unrolled} Transformer x {freeze, lora,
int8} x {eager, tf.function, KerasLayer + fit, checkpoint, SavedModel,
`.keras` save}. Every cell checks the outputs against the model's own
reference (before the change for freezing, the merged weights for LoRA, the
float model within int8's rounding) and, where the cell trains, which
variables a step changes.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable

import keras
import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt

_SHAPE = (2, 3, 8)


def _inputs(seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_normal(_SHAPE, seed=[seed, 1])


def _model(stacked: bool) -> snt.nets.Transformer:
    tf.random.set_seed(0)
    model = snt.nets.Transformer(
        num_layers=2, num_heads=2, model_size=8, stacked=stacked
    )
    model(_inputs())
    return model


def _freeze(model: snt.Module) -> None:
    for m in model.submodules:
        if isinstance(m, snt.MultiHeadAttention):
            snt.freeze(m)


def _lora(model: snt.Module) -> None:
    adapters = snt.lora.add(model, rank=2)
    for i, adapter in enumerate(adapters.values()):
        shape = adapter.b.shape
        adapter.b.assign(tf.random.stateless_normal(shape, seed=[i, 2]) * 0.1)


def _int8(model: snt.Module) -> None:
    snt.int8.quantize(model)


FEATURES: dict[str, Callable[[snt.Module], None]] = {
    "freeze": _freeze,
    "lora": _lora,
    "int8": _int8,
}


def _adapted(stacked: bool, feature: str) -> snt.nets.Transformer:
    model = _model(stacked)
    FEATURES[feature](model)
    return model


def _kept(model: snt.Module, feature: str) -> list[tf.Variable]:
    """The variables a training step must leave unchanged."""
    if feature == "lora":
        return [v for v in model.variables if "/lora/" not in v.name]
    if feature == "int8":
        return [v for v in model.variables if not v.dtype.is_floating]
    return [v for v in model.variables if "/attention/" in v.name]


def _reference(model: snt.Module, feature: str, x: tf.Tensor) -> np.ndarray:
    """What the adapted model must compute, not by its own call path."""
    if feature == "lora":
        snt.lora.merge(model)
        try:
            return model(x).numpy()
        finally:
            snt.lora.unmerge(model)
    return model(x).numpy()


def _snapshot(variables: list[tf.Variable]) -> list[np.ndarray]:
    return [v.numpy().copy() for v in variables]


def _check_training(model: snt.Module, feature: str, before: list, kept: list):
    for variable, value in zip(kept, before):
        np.testing.assert_array_equal(variable.numpy(), value, err_msg=variable.name)
    names = {v.name for v in model.trainable_variables}
    assert names, "nothing left to train"
    assert not names & {v.name for v in kept}


def _step(model: snt.Module, x: tf.Tensor) -> None:
    optimizer = snt.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(model(x)))
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    assert all(g is not None for g in grads)
    optimizer.apply(grads, variables)


@pytest.fixture(params=[False, True], ids=["unrolled", "stacked"])
def stacked(request: pytest.FixtureRequest) -> bool:
    return request.param


@pytest.fixture(params=list(FEATURES))
def feature(request: pytest.FixtureRequest) -> str:
    return request.param


def test_eager(stacked: bool, feature: str):
    model = _model(stacked)
    x = _inputs(1)
    plain = model(x).numpy()
    FEATURES[feature](model)
    out = model(x).numpy()
    np.testing.assert_allclose(out, _reference(model, feature, x), atol=1e-5)
    if feature == "freeze":
        np.testing.assert_array_equal(out, plain)
    elif feature == "int8":
        np.testing.assert_allclose(out, plain, atol=0.05)
    kept = _kept(model, feature)
    before = _snapshot(kept)
    _step(model, x)
    _check_training(model, feature, before, kept)


@pytest.mark.parametrize("autograph", [True, False])
def test_function(stacked: bool, feature: str, autograph: bool):
    model = _adapted(stacked, feature)
    x = _inputs(1)
    eager = model(x).numpy()
    traced = tf.function(model, autograph=autograph)(x).numpy()
    np.testing.assert_allclose(traced, eager, atol=1e-5)
    kept = _kept(model, feature)
    before = _snapshot(kept)
    tf.function(lambda: _step(model, x), autograph=autograph)()
    _check_training(model, feature, before, kept)


def _keras_model(model: snt.Module) -> keras.Model:
    return keras.Sequential([keras.Input(_SHAPE[1:]), snt.KerasLayer(model)])


def test_keras_fit(stacked: bool, feature: str):
    model = _adapted(stacked, feature)
    x = _inputs(1)
    wrapped = _keras_model(model)
    kept = _kept(model, feature)
    before = _snapshot(kept)
    trainable = {id(v) for v in model.trainable_variables}
    assert {id(v.value) for v in wrapped.trainable_variables} == trainable
    wrapped.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    wrapped.fit(x, tf.zeros(_SHAPE), batch_size=2, epochs=1, verbose=0)
    _check_training(model, feature, before, kept)
    changed = [
        v for v in model.trainable_variables if id(v) in trainable and v.shape.rank
    ]
    assert changed
    np.testing.assert_allclose(wrapped(x).numpy(), model(x).numpy(), atol=1e-5)


def test_checkpoint(stacked: bool, feature: str, tmp_path):
    model = _adapted(stacked, feature)
    x = _inputs(1)
    for v in model.trainable_variables:  # Values the new model cannot guess.
        v.assign_add(tf.fill(v.shape, tf.constant(0.01, v.dtype)))
    path = tf.train.Checkpoint(model=model).write(os.fspath(tmp_path / "ckpt"))
    tf.random.set_seed(7)
    other = snt.nets.Transformer(
        num_layers=2, num_heads=2, model_size=8, stacked=stacked
    )
    other(_inputs(3))
    FEATURES[feature](other)
    status = tf.train.Checkpoint(model=other).read(path)
    status.assert_consumed()
    np.testing.assert_allclose(other(x).numpy(), model(x).numpy(), atol=1e-6)
    assert [v.name for v in other.trainable_variables] == [
        v.name for v in model.trainable_variables
    ]


def test_saved_model(stacked: bool, feature: str, tmp_path):
    model = _adapted(stacked, feature)
    x = _inputs(1)
    holder = tf.Module()
    holder.model = model
    holder.call = tf.function(model, input_signature=[tf.TensorSpec(_SHAPE)])
    tf.saved_model.save(holder, os.fspath(tmp_path / "saved"))
    loaded = tf.saved_model.load(os.fspath(tmp_path / "saved"))
    np.testing.assert_allclose(loaded.call(x).numpy(), model(x).numpy(), atol=1e-5)


def test_keras_save(stacked: bool, feature: str, tmp_path):
    model = _adapted(stacked, feature)
    x = _inputs(1)
    wrapped = _keras_model(model)
    path = os.fspath(tmp_path / "model.keras")
    wrapped.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), atol=1e-5)
    assert len(loaded.trainable_weights) == len(wrapped.trainable_weights)


# A train step traced before a change to what is frozen keeps its list.


def _traced_step(model: snt.Module, x: tf.Tensor) -> Callable[[], None]:
    step = tf.function(lambda: _step(model, x))
    step()
    return step


@pytest.mark.parametrize(
    "change",
    [
        lambda m: snt.lora.add(m, rank=1),
        snt.freeze,
        lambda m: snt.freeze(m.submodules[0]),
    ],
    ids=["lora_add", "freeze", "freeze_part"],
)
def test_warns_when_a_traced_step_read_the_old_list(change):
    model = snt.nets.MLP([4, 2])
    x = tf.ones([2, 3])
    model(x)
    _traced_step(model, x)
    with pytest.warns(UserWarning, match=r"mlp.trainable_variables.*traced"):
        change(model)


def test_warns_for_a_traced_read_of_a_part():
    model = snt.nets.MLP([4, 2])
    x = tf.ones([2, 3])
    model(x)
    _traced_step(model.submodules[1], x @ tf.ones([3, 4]))
    with pytest.warns(UserWarning, match="linear_1.trainable_variables"):
        snt.freeze(model)


def test_warns_once_and_not_for_eager_reads_or_other_models():
    model, other = snt.nets.MLP([4, 2]), snt.nets.MLP([4, 2], name="other")
    x = tf.ones([2, 3])
    model(x)
    other(x)
    _ = model.trainable_variables  # Eager: no function keeps it.
    _traced_step(other, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        snt.freeze(model)
    with pytest.warns(UserWarning):
        snt.freeze(other)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        snt.unfreeze(other)  # Warned once already.
