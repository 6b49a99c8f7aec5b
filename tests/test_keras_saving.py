"""`snt.KerasLayer` in `model.save(....keras)` / `keras.models.load_model`."""

from __future__ import annotations

import copy
import json
import os
import pickle
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import base, module_config
from tests.conformance.registry import CASES


def _inputs(shape=(5, 4)) -> np.ndarray:
    return np.random.default_rng(0).normal(size=shape).astype("float32")


def _round_trip(module, tmp_path, shape=(5, 4), training_argument="auto"):
    """`(model, loaded)`: a model around `module`, saved and loaded."""
    layer = snt.KerasLayer(module, training_argument=training_argument)
    model = keras.Sequential([keras.Input(shape[1:]), layer])
    model(_inputs(shape))
    path = str(tmp_path / "model.keras")
    model.save(path)
    return model, keras.models.load_model(path)


def _assert_same_outputs(model, loaded, shape=(5, 4)):
    x = _inputs(shape)
    np.testing.assert_allclose(loaded(x), model(x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: snt.Linear(3, name="lin"),
        lambda: snt.nets.MLP(
            [8, 2],
            activation=tf.nn.gelu,
            w_init=snt.initializers.VarianceScaling(2.0, "fan_avg", seed=1),
            b_init=snt.initializers.Constant(0.5),
            activate_final=True,
        ),
        lambda: snt.Sequential([snt.Linear(6), tf.nn.relu, snt.Linear(2)]),
        lambda: snt.LayerNorm(
            axis=slice(1, None), create_scale=True, create_offset=True
        ),
        lambda: snt.Sequential([keras.layers.Dense(3, activation="tanh")]),
    ],
    ids=["linear", "mlp", "sequential", "layer_norm", "keras_layer_inside"],
)
def test_save_and_load_give_the_same_outputs(make, tmp_path):
    module = make()
    model, loaded = _round_trip(module, tmp_path)
    rebuilt = loaded.layers[0].module
    assert rebuilt is not module
    # A Keras layer's repr shows whether it is built.
    assert re.sub("built=.*>", "", repr(rebuilt)) == re.sub(
        "built=.*>", "", repr(module)
    )
    _assert_same_outputs(model, loaded)


def test_trained_batch_norm_and_the_training_flag(tmp_path):
    bn = snt.BatchNorm(create_scale=True, create_offset=True, decay_rate=0.5)
    layer = snt.KerasLayer(bn)
    model = keras.Sequential([keras.Input((4,)), layer])
    model.compile(optimizer="adam", loss="mse")
    x = _inputs((32, 4)) * 3 + 1
    model.fit(x, x, epochs=2, batch_size=8, verbose=0)
    path = str(tmp_path / "bn.keras")
    model.save(path)
    # All 8 variables reached Keras (it has 2 before its first call).
    assert (len(layer.weights), len(layer.trainable_weights)) == (8, 2)
    loaded = keras.models.load_model(path)
    assert loaded.layers[0]._is_training
    moving = loaded.layers[0].module.moving_mean.value
    np.testing.assert_allclose(moving, bn.moving_mean.value, rtol=1e-6)
    _assert_same_outputs(model, loaded)


def test_convolutions(tmp_path):
    conv = snt.Sequential(
        [
            snt.Conv2D(4, kernel_shape=3, stride=2, padding="VALID"),
            tf.nn.relu,
            snt.Flatten(),
            snt.Linear(2),
        ]
    )
    model, loaded = _round_trip(conv, tmp_path, shape=(2, 9, 9, 3))
    _assert_same_outputs(model, loaded, shape=(2, 9, 9, 3))


def test_training_argument_is_kept(tmp_path):
    mlp = snt.nets.MLP([4, 1], dropout_rate=0.5)
    _, loaded = _round_trip(mlp, tmp_path, training_argument=True)
    assert loaded.layers[0]._is_training
    config = loaded.layers[0].get_config()
    assert config["training_argument"] is True


class Doubled(snt.Module):
    """A user module: `inner(x) * 2`."""

    def __init__(self, inner: snt.Module, name: str | None = None):
        super().__init__(name=name)
        self.inner = inner

    def __call__(self, x):
        return self.inner(x) * 2.0


def test_custom_classes_known_to_keras_by_name(tmp_path):
    keras.saving.get_custom_objects()["test>Doubled"] = Doubled
    try:
        model, loaded = _round_trip(Doubled(snt.Linear(2)), tmp_path)
    finally:
        del keras.saving.get_custom_objects()["test>Doubled"]
    assert isinstance(loaded.layers[0].module, Doubled)
    _assert_same_outputs(model, loaded)


def test_custom_classes_given_to_load_model(tmp_path):
    path = str(tmp_path / "model.keras")
    with keras.saving.custom_object_scope({"Doubled": Doubled}):
        model = keras.Sequential(
            [keras.Input((4,)), snt.KerasLayer(Doubled(snt.Linear(2)))]
        )
        model.save(path)
    with pytest.raises(ValueError, match="a class must be a public Sonnet class"):
        keras.models.load_model(path)
    loaded = keras.models.load_model(path, custom_objects={"Doubled": Doubled})
    _assert_same_outputs(model, loaded)


@keras.saving.register_keras_serializable(package="test")
def _halve(x):
    return x / 2.0


def test_functions_registered_with_keras(tmp_path):
    model, loaded = _round_trip(
        snt.nets.MLP([3], activation=_halve, activate_final=True), tmp_path
    )
    assert loaded.layers[0].module._activation is _halve
    _assert_same_outputs(model, loaded)


def test_before_the_fix_save_raised_not_implemented(tmp_path):
    # What today's main did: Keras asked for a `get_config` the layer lacked.
    model = keras.Sequential([keras.Input((4,)), snt.KerasLayer(snt.Linear(2))])
    model.save(str(tmp_path / "ok.keras"))  # No NotImplementedError.
    config = model.layers[0].get_config()
    assert config["module"]["class"] == "snt.Linear"
    json.dumps(config)


# ---------------------------------------------------------------------------
# Modules a config cannot describe: clear errors.


def _save(module, tmp_path, shape=(2, 4)):
    model = keras.Sequential([keras.Input(shape[1:]), snt.KerasLayer(module)])
    model.save(str(tmp_path / "m.keras"))


def test_lambda_arguments_are_refused(tmp_path):
    mlp = snt.nets.MLP([2], activation=lambda x: x)
    with pytest.raises(
        ValueError, match=r"argument `activation` of `snt.nets.MLP` must be"
    ) as e:
        _save(mlp, tmp_path)
    assert "model.save_weights" in str(e.value) and "get_custom_objects" in str(e.value)


def test_array_arguments_are_refused():
    embed = snt.Embed(existing_vocab=np.ones([4, 3], np.float32))
    with pytest.raises(
        ValueError, match=r"`existing_vocab` of `snt.Embed`.*numpy.ndarray"
    ):
        snt.KerasLayer(embed).get_config()


def test_unknown_classes_are_refused(tmp_path):
    with pytest.raises(
        ValueError,
        match="known to Keras by name. Received: `tests.test_keras_saving.Doubled`",
    ):
        _save(Doubled(snt.Linear(2)), tmp_path)


def test_a_module_used_twice_is_refused(tmp_path):
    shared = snt.Linear(4)
    with pytest.raises(ValueError, match="each module may appear once"):
        _save(snt.Sequential([shared, shared]), tmp_path)


def test_precision_policies_are_refused(tmp_path):
    mlp = snt.nets.MLP([2])
    snt.precision.apply(mlp, "mixed_bfloat16")
    with pytest.raises(ValueError, match="must not compute under a precision policy"):
        _save(mlp, tmp_path)


def test_other_tf_modules_are_refused():
    class Plain(tf.Module):
        def __call__(self, x):
            return x

    with pytest.raises(ValueError, match="must be a `snt.Module`"):
        snt.KerasLayer(Plain()).get_config()


def test_unknown_entries_in_a_config_are_refused():
    with pytest.raises(ValueError, match="a class must be a public Sonnet class"):
        module_config.rebuild(
            {"__snt__": "module", "class": "snt.Nope", "args": [], "kwargs": {}}
        )
    with pytest.raises(ValueError, match="a function must be found by name"):
        module_config.rebuild({"__snt__": "function", "module": "os", "name": "system"})
    with pytest.raises(ValueError, match="a function must be found by name"):
        module_config.rebuild({"__snt__": "function", "module": "", "name": "x>y"})
    for module, name in [
        ("sonnet._src.base", "os.system"),  # Imported there, not defined.
        ("sonnet._src.base", "no_name_scope.__globals__"),
    ]:
        with pytest.raises(ValueError, match="a function must be found by name"):
            module_config.rebuild(
                {"__snt__": "function", "module": module, "name": name}
            )
    with pytest.raises(ValueError, match="a class must be a public Sonnet class"):
        module_config.rebuild({"__snt__": "class", "class": "sonnet._src.base:os"})
    with pytest.raises(ValueError, match="an entry of an unknown kind"):
        module_config.rebuild({"__snt__": "pickle", "data": "..."})


# ---------------------------------------------------------------------------
# Every registered module: described and rebuilt, or refused clearly.


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_conformance_module(case):
    module = case.factory()
    try:
        description = module_config.describe(module)
    except ValueError as e:
        assert "cannot write its module into a Keras config" in str(e)
        return
    rebuilt = module_config.rebuild(json.loads(json.dumps(description)))
    assert type(rebuilt) is type(module)
    assert repr(rebuilt) == repr(module)


def test_most_conformance_modules_can_be_described():
    described = 0
    for case in CASES:
        try:
            module_config.describe(case.factory())
        except ValueError:
            continue
        described += 1
    assert described >= 0.75 * len(CASES)


# ---------------------------------------------------------------------------
# The recorded call.


def test_large_or_single_use_arguments_are_not_kept():
    vocab = np.ones([4, 3], np.float32)
    embed = snt.Embed(existing_vocab=vocab)
    (kept,) = vars(embed)["_snt_call"][1].values()
    assert isinstance(kept, base.Dropped)
    mlp = snt.nets.MLP(size for size in (3, 2))  # A generator, used up.
    copy.deepcopy(mlp)
    pickle.loads(pickle.dumps(mlp))
    assert repr(base.Dropped("numpy.ndarray")) == "<numpy.ndarray>"


def test_copies_keep_the_call():
    mlp = snt.nets.MLP([3, 2], activation=tf.nn.tanh)
    for other in (copy.deepcopy(mlp), pickle.loads(pickle.dumps(mlp))):
        assert module_config.describe(other) == module_config.describe(mlp)


# ---------------------------------------------------------------------------
# The README's section runs and prints what it shows.


def test_readme_keras_section(tmp_path, monkeypatch, capsys):
    from tests.test_readme import README, python_blocks

    text = README.read_text()
    start = text.index("### Using Sonnet with Keras 3")
    end = text.index("\n### ", start + 1)
    blocks = python_blocks(text[start:end])
    assert len(blocks) == 3
    monkeypatch.chdir(tmp_path)
    # What the tour's earlier blocks define: its temporary directory.
    namespace = {
        "__name__": "readme",
        "np": np,
        "tf": tf,
        "snt": snt,
        "os": os,
        "workdir": str(tmp_path),
    }
    shown = []
    for _, code in blocks:
        exec(compile(code, str(README), "exec"), namespace)
        shown += [line[2:] for line in code.splitlines() if line.startswith("# ")]
    printed = capsys.readouterr().out
    # Compared up to white space: the README wraps long outputs.
    assert printed.split() == " ".join(shown).split()
