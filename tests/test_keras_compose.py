"""`snt.KerasLayer` meets freezing, LoRA, int8 and Keras dtype policies.

Each combination works, checked against the module itself (Keras trains what
the module trains; a loaded model computes what the saved one did), or is
refused clearly before anything changes.
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src import testing

import sonnet as snt
from sonnet._src import module_config


def _data(n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype("float32")
    return x, np.stack([x.sum(axis=1), x[:, 0] - x[:, 1]], axis=1)


def _wrapped(module: snt.Module, **kwargs) -> keras.Model:
    return keras.Sequential([keras.Input((4,)), snt.KerasLayer(module, **kwargs)])


def _compile(model: keras.Model) -> keras.Model:
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    return model


def _fit(model: keras.Model) -> None:
    x, y = _data()
    model.fit(x, y, epochs=2, batch_size=16, verbose=0)


def _values(variables) -> list[np.ndarray]:
    return [v.numpy().copy() for v in variables]


def _storage(weights) -> set[int]:
    return {id(w.value) for w in weights}


def _mlp() -> snt.nets.MLP:
    mlp = snt.nets.MLP([8, 6, 2])
    mlp(tf.ones([1, 4]))
    return mlp


def _linears(module: snt.Module) -> list[snt.Linear]:
    return [m for m in module.submodules if isinstance(m, snt.Linear)]


# ---------------------------------------------------------------------------
# Freezing, adapters and int8 weights reach Keras.


def test_lora_added_after_wrapping_trains_only_the_adapters():
    mlp = _mlp()
    model = _wrapped(mlp)
    adapters = snt.lora.add(mlp, rank=2)
    assert _storage(model.trainable_variables) == {
        id(v) for v in mlp.trainable_variables
    }
    base = [v for v in mlp.variables if "/lora/" not in v.name]
    trained = [v for a in adapters.values() for v in (a.a, a.b)]
    before_base, before_trained = _values(base), _values(trained)
    _fit(_compile(model))
    for v, value in zip(base, before_base):
        np.testing.assert_array_equal(v.numpy(), value, err_msg=v.name)
    assert all(
        not np.array_equal(v.numpy(), value)
        for v, value in zip(trained, before_trained)
    )
    x = _data(8)[0]
    np.testing.assert_allclose(model.predict(x, verbose=0), mlp(x), rtol=1e-5)


def test_summary_counts_adapters_as_the_trainable_parameters(capsys):
    mlp = _mlp()
    model = _wrapped(mlp)
    snt.lora.add(mlp, rank=2)
    model.summary()
    printed = capsys.readouterr().out
    adapters = (4 + 8) * 2 + (8 + 6) * 2 + (6 + 2) * 2
    total = 4 * 8 + 8 + 8 * 6 + 6 + 6 * 2 + 2 + adapters + 3  # 3 merged flags.
    assert f"Trainable params: {adapters} " in printed
    assert f"Non-trainable params: {total - adapters} " in printed
    layer = model.layers[0]
    assert layer.count_params() == total


def test_a_part_frozen_after_building_is_not_trained():
    mlp = _mlp()
    model = _compile(_wrapped(mlp))
    first, second, third = _linears(mlp)
    snt.freeze(second)
    assert _storage(model.trainable_weights) == {
        id(v) for m in (first, third) for v in m.variables
    }
    assert _storage(model.non_trainable_weights) == {id(v) for v in second.variables}
    frozen, trained = _values(second.variables), _values(first.variables)
    _fit(model)
    for v, value in zip(second.variables, frozen):
        np.testing.assert_array_equal(v.numpy(), value)
    assert all(
        not np.array_equal(v.numpy(), value)
        for v, value in zip(first.variables, trained)
    )
    with pytest.warns(UserWarning, match="compile"):  # `fit` traced a step.
        snt.unfreeze(second)
    assert len(model.trainable_weights) == 6


def test_the_keras_trainable_flag_does_not_unfreeze():
    mlp = _mlp()
    layer = snt.KerasLayer(mlp)
    layer.build((None, 4))
    snt.freeze(_linears(mlp)[0])
    layer.trainable = False
    assert layer.trainable_weights == []
    layer.trainable = True  # Keras sets every weight it tracks trainable.
    assert len(layer.trainable_weights) == 4
    assert len(layer.weights) == 6


def test_int8_weights_made_after_wrapping_are_weights():
    mlp = _mlp()
    model = _wrapped(mlp)
    snt.int8.quantize(mlp)
    assert _storage(model.weights) == {id(v) for v in mlp.variables}
    assert _storage(model.trainable_weights) == {id(v) for v in mlp.trainable_variables}
    assert len(model.trainable_weights) == 3  # The biases.
    x = _data(8)[0]
    np.testing.assert_allclose(model.predict(x, verbose=0), mlp(x), rtol=1e-6)
    _fit(_compile(model))
    np.testing.assert_allclose(model.predict(x, verbose=0), mlp(x), rtol=1e-6)


def test_changing_a_trained_model_warns_and_compile_makes_it_right():
    # Keras keeps the train function it traced (with its list of trainable
    # weights) until `compile`: `lora.add` warns that it meets such a list.
    mlp = _mlp()
    model = _compile(_wrapped(mlp))
    _fit(model)
    with pytest.warns(UserWarning, match=r"`model.compile\(\)` for Keras"):
        adapters = snt.lora.add(mlp, rank=1)
    _compile(model)  # A new optimizer: Keras' refuses variables it lacks.
    base = [v for v in mlp.variables if "/lora/" not in v.name]
    before = _values(base)
    _fit(model)
    for v, value in zip(base, before):
        np.testing.assert_array_equal(v.numpy(), value)
    assert all(np.any(a.b.numpy() != 0) for a in adapters.values())


def test_freezing_a_traced_model_warns():
    mlp = _mlp()
    model = _compile(_wrapped(mlp))
    _fit(model)
    with pytest.warns(UserWarning, match=r"mlp.trainable_variables.*traced"):
        snt.freeze(_linears(mlp)[0])


def test_a_module_replacing_variables_drops_the_old_weights():
    linear = snt.Linear(2)
    layer = snt.KerasLayer(linear)
    layer.build((None, 3))
    old = linear.w
    snt.int8.quantize(linear)
    storage = _storage(layer.weights)
    assert id(old) not in storage and id(linear.w) in storage
    assert len(layer._snt_weights.by_id) == 3


# ---------------------------------------------------------------------------
# `model.save` / `load_model` with adapters, int8 weights and frozen parts.


def _save_and_load(model: keras.Model, tmp_path) -> keras.Model:
    path = str(tmp_path / "model.keras")
    model.save(path)
    return keras.models.load_model(path)


def _trainable_names(model: keras.Model) -> list[str]:
    return sorted(w.name for w in model.trainable_weights)


def _assert_same(model: keras.Model, loaded: keras.Model) -> None:
    x = _data(8)[0]
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model(x))
    assert _trainable_names(loaded) == _trainable_names(model)
    assert [w.name for w in loaded.weights] == [w.name for w in model.weights]


@pytest.mark.parametrize("merged", [False, True], ids=["unmerged", "merged"])
def test_lora_adapters_are_saved_and_replayed(merged, tmp_path):
    mlp = _mlp()
    model = _compile(_wrapped(mlp))
    snt.lora.add(mlp, rank=2, alpha=3.0, pattern="linear_[01]")
    _fit(model)
    if merged:
        snt.lora.merge(mlp)
    loaded = _save_and_load(model, tmp_path)
    _assert_same(model, loaded)
    other = loaded.layers[0].module
    adapters = snt.lora.adapters(other)
    assert sorted(adapters) == ["mlp/linear_0", "mlp/linear_1"]
    assert {(a.rank, a.alpha) for a in adapters.values()} == {(2, 3.0)}
    assert all(bool(a.merged.numpy()) is merged for a in adapters.values())
    assert snt.is_frozen(_linears(other)[2])
    snt.lora.remove(other)  # Unfreezes what `add` froze, as on the original.
    assert len(other.trainable_variables) == 6


def test_int8_layers_are_saved_and_replayed(tmp_path):
    mlp = _mlp()
    model = _wrapped(mlp)
    snt.int8.quantize(mlp, pattern="linear_[12]")
    loaded = _save_and_load(model, tmp_path)
    _assert_same(model, loaded)
    other = _linears(loaded.layers[0].module)
    assert [m.w.dtype for m in other] == [tf.float32, tf.int8, tf.int8]


def test_frozen_parts_are_saved_and_replayed(tmp_path):
    mlp = _mlp()
    model = _wrapped(mlp)
    snt.freeze(_linears(mlp)[1])
    loaded = _save_and_load(model, tmp_path)
    _assert_same(model, loaded)
    other = loaded.layers[0].module
    assert [snt.is_frozen(m) for m in _linears(other)] == [False, True, False]


def test_lora_on_int8_weights_with_a_part_unfrozen(tmp_path):
    mlp = _mlp()
    model = _wrapped(mlp)
    snt.int8.quantize(mlp)
    snt.lora.add(mlp, rank=1)
    snt.unfreeze(_linears(mlp)[2])  # Trains the head's bias too.
    _fit(_compile(model))
    loaded = _save_and_load(model, tmp_path)
    _assert_same(model, loaded)
    assert "mlp.linear_2.b" in _trainable_names(loaded)


def test_a_plain_module_config_records_no_changes():
    config = snt.KerasLayer(_mlp()).get_config()
    assert not {"lora", "int8", "frozen"} & set(config)


def test_adapters_of_different_ranks_are_refused_at_save_time(tmp_path):
    mlp = _mlp()
    model = _wrapped(mlp)
    snt.lora.add(mlp, rank=1, pattern="linear_0")
    snt.lora.add(mlp, rank=2, pattern="linear_1")
    with pytest.raises(ValueError, match=r"share one rank and alpha.*snt.lora.merge"):
        model.save(str(tmp_path / "model.keras"))
    with pytest.raises(ValueError, match="save_weights"):
        model.layers[0].get_config()


def test_layers_sharing_a_name_path_are_refused_at_save_time():
    first, second = snt.Linear(3), snt.Linear(2)  # Both `linear`.
    seq = snt.Sequential([first, second])
    seq(tf.ones([1, 4]))
    snt.lora.add(first, rank=1)
    with pytest.raises(ValueError, match="no other Linear of the module has"):
        snt.KerasLayer(seq).get_config()
    snt.lora.remove(first)
    snt.int8.quantize(second)
    with pytest.raises(ValueError, match="no other Linear or Embed"):
        snt.KerasLayer(seq).get_config()


def test_changes_that_do_not_fit_the_rebuilt_module_are_refused():
    mlp = _mlp()
    snt.lora.add(mlp, rank=1, pattern="linear_0")
    changes = json.loads(json.dumps(module_config.describe_changes(mlp)))
    other = _mlp()
    bad = {"lora": {**changes["lora"], "at": [0]}}  # The MLP itself.
    with pytest.raises(ValueError, match="saved layers at the saved places"):
        module_config.replay_changes(other, bad)
    with pytest.raises(ValueError, match="as many modules as the saved one"):
        module_config.replay_changes(other, {"frozen": changes["frozen"][:2]})
    assert snt.lora.adapters(mlp) and not any(
        isinstance(m, snt.lora.LoRA) for m in other.submodules
    )


def test_shared_names_in_the_rebuilt_module_are_refused():
    seq = snt.Sequential([snt.Linear(3), snt.Linear(2)])
    seq(tf.ones([1, 4]))
    changes = {"int8": {"layers": ["linear"], "at": [1]}}
    with pytest.raises(ValueError, match="name paths no other layer has"):
        module_config.replay_changes(seq, changes)


# ---------------------------------------------------------------------------
# Keras dtype policies become `snt.precision` policies.


class _Harness(testing.TestCase):
    """Keras' layer test harness, driven by the pytest tests below."""

    __test__ = False  # Not a test of its own.

    def runTest(self) -> None:  # Makes the TestCase constructible.
        pass


_HARNESS = {
    "linear": (lambda: snt.Linear(3), (2, 4), (2, 3), 2, 0),
    "mlp": (lambda: snt.nets.MLP([5, 3]), (2, 4), (2, 3), 4, 0),
    "conv2d": (lambda: snt.Conv2D(3, 3), (2, 5, 5, 2), (2, 5, 5, 3), 2, 0),
    "layer_norm": (lambda: snt.LayerNorm(-1, True, True), (2, 4), (2, 4), 2, 0),
    # Moving mean and variance: a value, a hidden value and a counter each.
    "batch_norm": (lambda: snt.BatchNorm(True, True), (2, 4), (2, 4), 2, 6),
}


@pytest.mark.filterwarnings("ignore:`shuffle=True` was passed")  # Keras' own.
@pytest.mark.parametrize("case", list(_HARNESS))
def test_keras_layer_test_harness(case):
    make, input_shape, output_shape, trainable, non_trainable = _HARNESS[case]
    # Includes the mixed precision check (dtype="mixed_float16": float16
    # outputs, float32 weights) and a training step.
    _Harness().run_layer_test(
        snt.KerasLayer,
        init_kwargs={"module": make()},
        input_shape=input_shape,
        expected_output_shape=output_shape,
        expected_num_trainable_weights=trainable,
        expected_num_non_trainable_weights=non_trainable,
        run_mixed_precision_check=True,
    )


def test_mixed_policy_is_the_modules_precision_policy():
    mlp = snt.nets.MLP([8, 2])
    layer = snt.KerasLayer(mlp, dtype="mixed_bfloat16")
    policy = snt.precision.Policy(tf.bfloat16, tf.float32)
    assert all(m._precision == policy for m in (mlp, *mlp.submodules))
    x = tf.constant(_data(4)[0])
    y = layer(x)
    assert y.dtype == tf.bfloat16
    assert all(v.dtype == tf.float32 for v in mlp.variables)
    plain = snt.nets.MLP([8, 2])
    plain(x)
    for a, b in zip(plain.variables, mlp.variables):
        a.assign(b)
    expected = snt.precision.apply(plain, "mixed_bfloat16")(x)
    np.testing.assert_array_equal(y.numpy(), expected.numpy())


def test_a_global_keras_policy_reaches_the_module():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mlp = snt.nets.MLP([8, 2])
        model = _compile(_wrapped(mlp))
        _fit(model)
    finally:
        keras.config.set_dtype_policy(previous)
    assert mlp._precision == snt.precision.Policy(tf.bfloat16, tf.float32)
    assert all(v.dtype == tf.float32 for v in mlp.variables)


def test_a_plain_low_precision_policy_makes_low_precision_variables():
    linear = snt.Linear(2)
    layer = snt.KerasLayer(linear, dtype="float16")
    y = layer(tf.ones([1, 3]))
    assert y.dtype == linear.w.dtype == tf.float16


def test_the_modules_own_policy():
    mlp = snt.precision.apply(snt.nets.MLP([2]), "mixed_bfloat16")
    layer = snt.KerasLayer(mlp)  # float32: the module keeps its own.
    assert layer(tf.ones([1, 3])).dtype == tf.bfloat16
    snt.KerasLayer(mlp, dtype="mixed_bfloat16")  # The same: accepted.
    with pytest.raises(ValueError, match=r"must agree with the `snt.precision`"):
        snt.KerasLayer(mlp, dtype="mixed_float16")
    assert mlp._precision.compute_dtype == tf.bfloat16


def test_modules_that_cannot_follow_a_policy_are_refused():
    lstm = snt.UnrolledLSTM(3)
    with pytest.raises(ValueError, match=r"`unrolled_lstm`, a `UnrolledLSTM`"):
        snt.KerasLayer(lstm, dtype="mixed_float16")
    assert lstm._precision is None

    class Plain(tf.Module):
        def __call__(self, x):
            return x

    with pytest.raises(ValueError, match="not an `snt.Module`"):
        snt.KerasLayer(Plain(), dtype="mixed_float16")
    linear = snt.Linear(2)
    with pytest.raises(ValueError, match=r"quantize the module itself"):
        snt.KerasLayer(linear, dtype="int8_from_float32")
    assert linear._precision is None


class _IgnoresPolicies(snt.Module):
    """Makes its variable in the inputs' dtype, whatever the policy."""

    @snt.once
    def _initialize(self, x):
        self.scale = tf.Variable(tf.ones([x.shape[-1]], x.dtype), name="scale")

    def __call__(self, x):
        self._initialize(x)
        return x * self.scale


def test_modules_ignoring_the_policy_are_refused_when_built():
    layer = snt.KerasLayer(_IgnoresPolicies(), dtype="mixed_float16")
    with pytest.raises(ValueError, match=r"does not follow the `snt.precision`"):
        layer(tf.ones([1, 3]))


def test_a_layer_under_a_mixed_policy_is_saved_and_loaded(tmp_path):
    mlp = snt.nets.MLP([8, 2])
    model = _wrapped(mlp, dtype="mixed_float16")
    loaded = _save_and_load(model, tmp_path)
    other = loaded.layers[0].module
    assert other._precision == snt.precision.Policy(tf.float16, tf.float32)
    x = _data(4)[0]
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())


def test_a_call_does_not_read_the_weights(monkeypatch):
    # The plain path: a call of a built layer is the module's call, with no
    # walk of the module's variables.
    mlp = _mlp()
    layer = snt.KerasLayer(mlp)
    layer(tf.ones([1, 4]))
    reads = []
    monkeypatch.setattr(snt.KerasLayer, "_sync", lambda self: reads.append(self))
    layer(tf.ones([1, 4]))
    assert reads == []
