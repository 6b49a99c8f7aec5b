"""`snt.surgery`: get, set, replace and find submodules by path."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _mlp() -> snt.nets.MLP:
    mlp = snt.nets.MLP([4, 3], name="mlp")
    mlp(tf.ones([2, 5]))
    return mlp


def _transformer() -> snt.nets.Transformer:
    model = snt.nets.Transformer(num_layers=2, model_size=8, num_heads=2)
    model(tf.ones([1, 3, 8]))
    return model


class Scaled(snt.Module):
    """A wrapper reusing a layer: `2 * layer(x)`."""

    def __init__(self, layer, name=None):
        super().__init__(name=name)
        self.layer = layer

    def __call__(self, x):
        return 2.0 * self.layer(x)


Pair = collections.namedtuple("Pair", "first second")


class Holder(snt.Module):
    def __init__(self):
        super().__init__(name="holder")
        self.pair = Pair(snt.Linear(2, name="a"), snt.Linear(2, name="b"))
        self.table = {"x": snt.Linear(2, name="c"), "y": snt.Linear(2, name="d")}
        self.nested = [(snt.Linear(2, name="e"),)]


def test_get_by_string_or_tuple_path():
    model = _transformer()
    block = model.blocks[1]
    assert snt.surgery.get(model, "blocks/1") is block
    assert snt.surgery.get(model, ("blocks", 1, "mlp_in")) is block.mlp_in
    assert snt.surgery.get(model, "blocks/-1/attention/query") is block.attention.query
    assert snt.surgery.get(model, "") is model
    holder = Holder()
    assert snt.surgery.get(holder, "pair/1") is holder.pair.second
    assert snt.surgery.get(holder, "pair/second") is holder.pair.second
    assert snt.surgery.get(holder, "table/x") is holder.table["x"]
    assert snt.surgery.get(holder, ("table", "y")) is holder.table["y"]
    assert snt.surgery.get(holder, "nested/0/0") is holder.nested[0][0]


def test_find_lists_paths_in_walk_order():
    model = _transformer()
    found = snt.surgery.find(model, snt.Linear)
    assert list(found)[:2] == ["blocks/0/mlp_in", "blocks/0/mlp_out"]
    assert all(snt.surgery.get(model, path) is m for path, m in found.items())
    assert len(found) == 12
    everything = snt.surgery.find(model)
    assert set(found) < set(everything)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("blocks/7/mlp_in", r"`blocks` has no item '7' \(it has 2 items\)"),
        ("blocks/0/mlp", r"`blocks/0` has no attribute 'mlp' \(its submodules"),
        ("block/0", r"`module` has no attribute 'block'"),
        ("blocks/x", r"`blocks` has no item 'x'"),
        ("final_norm/scale/0", r"`final_norm/scale` is a ResourceVariable"),
    ],
)
def test_missing_paths_name_the_first_missing_part(path, message):
    model = _transformer()
    with pytest.raises(ValueError, match=r"`path` must name a submodule") as info:
        snt.surgery.get(model, path)
    assert info.match(message)
    with pytest.raises(ValueError, match=message):
        snt.surgery.set(model, path, snt.Linear(2))


def test_missing_dict_key():
    message = r"`table` has no key 'z' \(its keys: 'x', 'y'\)"
    with pytest.raises(ValueError, match=message):
        snt.surgery.get(Holder(), "table/z")


def test_set_replaces_and_returns_the_old_module(tmp_path):
    mlp = _mlp()
    head = snt.Linear(6, name="head")
    old = snt.surgery.set(mlp, "_layers/1", head)
    assert old.name == "linear_1"
    assert mlp(tf.ones([2, 5])).shape == [2, 6]  # The call uses the new layer.
    assert [v.name for v in mlp.variables] == [
        "mlp/linear_0/b:0",
        "mlp/linear_0/w:0",
        "head/b:0",
        "head/w:0",
    ]
    # TensorFlow checkpoints the rebuilt list under the same path.
    path = tf.train.Checkpoint(model=mlp).write(str(tmp_path / "ckpt"))
    names = {name for name, _ in tf.train.list_variables(path)}
    assert "model/_layers/1/w/.ATTRIBUTES/VARIABLE_VALUE" in names
    other = _mlp()
    snt.surgery.set(other, "_layers/1", snt.Linear(6, name="head"))
    status = tf.train.Checkpoint(model=other).read(path)
    other(tf.ones([2, 5]))
    status.assert_consumed()
    np.testing.assert_array_equal(other._layers[1].w.numpy(), head.w.numpy())


def test_set_in_tuples_namedtuples_and_dicts(tmp_path):
    holder = Holder()
    new = snt.Linear(5, name="new")
    snt.surgery.set(holder, "pair/0", new)
    assert isinstance(holder.pair, Pair) and holder.pair.first is new
    snt.surgery.set(holder, "pair/second", new)
    assert holder.pair.second is new
    snt.surgery.set(holder, "table/y", new)
    assert holder.table["y"] is new and "x" in holder.table
    snt.surgery.set(holder, "nested/0/0", new)
    assert holder.nested[0][0] is new
    for m in holder.submodules:
        if isinstance(m, snt.Linear):
            m(tf.ones([1, 2]))
    path = tf.train.Checkpoint(model=holder).write(str(tmp_path / "ckpt"))
    names = {name for name, _ in tf.train.list_variables(path)}
    assert "model/pair/first/w/.ATTRIBUTES/VARIABLE_VALUE" in names
    assert "model/table/x/w/.ATTRIBUTES/VARIABLE_VALUE" in names


def test_replace_keeps_variables_of_a_reused_module():
    mlp = _mlp()
    x = tf.ones([2, 5])
    before = mlp(x)
    names = [v.name for v in mlp.variables]
    replaced = snt.surgery.replace(mlp, snt.Linear, Scaled)
    assert sorted(replaced) == ["_layers/0", "_layers/1"]
    assert [v.name for v in mlp.variables] == names
    layer_0, layer_1 = mlp._layers[0].layer, mlp._layers[1].layer
    expected = 2 * layer_1(tf.nn.relu(2 * layer_0(x)))
    np.testing.assert_allclose(mlp(x).numpy(), expected.numpy(), rtol=1e-6)
    assert not np.allclose(mlp(x).numpy(), before.numpy())


def test_replace_builds_new_modules_in_the_holders_name_scope():
    model = _transformer()
    made = snt.surgery.replace(
        model,
        lambda m: isinstance(m, snt.Linear) and m.name == "mlp_in",
        lambda old: snt.Linear(old.output_size, name=old.name),
    )
    assert sorted(made) == ["blocks/0/mlp_in", "blocks/1/mlp_in"]
    model(tf.ones([1, 3, 8]))
    assert model.blocks[0].mlp_in.w.name == "transformer/block_0/mlp_in/w:0"


def test_replace_does_not_enter_matches_and_shares_replacements():
    shared = snt.Linear(2, name="shared")
    seq = snt.Sequential([shared, shared, snt.Sequential([snt.Linear(2)])])
    made = snt.surgery.replace(seq, snt.Linear, lambda old: snt.Linear(3))
    assert sorted(made) == ["_layers/0", "_layers/1", "_layers/2/_layers/0"]
    assert seq._layers[0] is seq._layers[1] is made["_layers/0"]
    inner = snt.Sequential([snt.Linear(2)])
    outer = snt.Sequential([inner])
    made = snt.surgery.replace(outer, snt.Sequential, lambda old: snt.Linear(4))
    assert list(made) == ["_layers/0"]  # Neither `outer` itself nor inside.


def test_a_failing_factory_changes_nothing():
    mlp = _mlp()
    layers = tuple(mlp._layers)

    def factory(old):
        if old.name == "linear_1":
            raise RuntimeError("no")
        return snt.Linear(2)

    with pytest.raises(RuntimeError):
        snt.surgery.replace(mlp, snt.Linear, factory)
    assert tuple(mlp._layers) == layers


def test_surgery_refuses_layer_stacks_variables_root_and_traces():
    stacked = snt.nets.Transformer(
        num_layers=2, model_size=8, num_heads=2, stacked=True
    )
    stacked(tf.ones([1, 3, 8]))
    with pytest.raises(ValueError, match=r"must not lead into an `snt.LayerStack`"):
        snt.surgery.set(stacked, "stack/layer/mlp_in", snt.Linear(2))
    with pytest.raises(ValueError, match=r"must not lead into an `snt.LayerStack`"):
        snt.surgery.replace(stacked, snt.Linear, lambda old: old)
    mlp = _mlp()
    with pytest.raises(ValueError, match=r"not a variable"):
        snt.surgery.set(mlp, "_layers/0/w", tf.Variable(1.0))
    with pytest.raises(ValueError, match=r"not `module` itself"):
        snt.surgery.set(mlp, "", snt.Linear(2))

    @tf.function
    def change():
        snt.surgery.set(mlp, "_layers/0", snt.Linear(2))

    with pytest.raises(ValueError, match=r"not inside a `tf.function`"):
        change()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: snt.surgery.get([1], "0"), TypeError, r"`module` must be"),
        (lambda: snt.surgery.get(_mlp(), 3), TypeError, r"`path` must be a str"),
        (lambda: snt.surgery.get(_mlp(), ("a", 1.5)), TypeError, r"str or int parts"),
        (lambda: snt.surgery.get(_mlp(), "_layers//0"), ValueError, r"empty parts"),
        (
            lambda: snt.surgery.replace(_mlp(), snt.Conv2D, lambda old: old),
            ValueError,
            r"`predicate` must match at least one submodule",
        ),
        (
            lambda: snt.surgery.replace(_mlp(), "Linear", lambda old: old),
            TypeError,
            r"`predicate` must be a class",
        ),
        (
            lambda: snt.surgery.replace(_mlp(), snt.Linear, None),
            TypeError,
            r"`factory` must be a callable",
        ),
    ],
)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


class Cached(snt.Module):
    """Keeps an untracked copy of its layers, refreshed by surgery's hook."""

    _TF_MODULE_IGNORED_PROPERTIES = snt.Module._TF_MODULE_IGNORED_PROPERTIES | {"_copy"}

    def __init__(self):
        super().__init__(name="cached")
        self.layers = [snt.Linear(2), snt.Linear(2)]
        self.refreshed = 0
        self._refresh_submodules()

    def _refresh_submodules(self):
        vars(self)["_copy"] = tuple(self.layers)
        self.refreshed += 1


def test_modules_with_copies_of_their_submodules_stay_up_to_date():
    cached = Cached()
    new = snt.Linear(3)
    snt.surgery.set(cached, "layers/1", new)
    assert cached._copy == (cached.layers[0], new) and cached.refreshed == 2
    mlp = _mlp()  # No hook: its untracked `_layer_tuple` gets the new layer.
    snt.surgery.set(mlp, "_layers/0", new)
    assert mlp._layer_tuple[0] is new
