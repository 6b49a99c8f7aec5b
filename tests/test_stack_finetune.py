"""`snt.lora` and `snt.int8` on the layers of an `snt.LayerStack`.

A stacked Transformer with adapters (or int8 weights) must compute what the
unrolled one with the same weights computes: the references are
`snt.nets.Transformer(stacked=False)` models given the same values by
`snt.nets.copy_transformer_weights`, and NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt

_KW = {"num_layers": 3, "model_size": 8, "num_heads": 2}


def _close(actual, expected) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def _x(*shape: int, seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[seed, 1])


def _transformer(stacked: bool, seed: int = 0) -> snt.nets.Transformer:
    model = snt.nets.Transformer(stacked=stacked, **_KW)
    model(_x(2, 5, 8, seed=seed))
    return model


def _randomize(adapters: dict[str, snt.lora.LoRA]) -> None:
    for i, adapter in enumerate(adapters.values()):
        adapter.b.assign(_x(*adapter.b.shape, seed=100 + i) * 0.5)


def _adapted_pair(**add_kwargs) -> tuple[snt.nets.Transformer, snt.nets.Transformer]:
    """A stacked and an unrolled Transformer with the same (random) adapters."""
    stacked, unrolled = _transformer(True), _transformer(False, seed=1)
    _randomize(snt.lora.add(stacked, rank=2, **add_kwargs))
    snt.lora.add(unrolled, rank=2, **add_kwargs)
    snt.nets.copy_transformer_weights(stacked, unrolled)
    return stacked, unrolled


def _quantized_pair() -> tuple[snt.nets.Transformer, snt.nets.Transformer]:
    """A stacked and an unrolled Transformer with the same float weights,
    each quantized on its own."""
    stacked, unrolled = _transformer(True), _transformer(False, seed=1)
    snt.nets.copy_transformer_weights(stacked, unrolled)
    snt.int8.quantize(stacked)
    snt.int8.quantize(unrolled)
    return stacked, unrolled


def _call(model: snt.Module, x: tf.Tensor, mode: str) -> np.ndarray:
    if mode == "eager":
        return model(x).numpy()
    f = tf.function(
        lambda x: model(x), autograph=mode == "autograph", jit_compile=mode == "xla"
    )
    return f(x).numpy()


_MODES = ["eager", "autograph", "no_autograph", "xla"]


def _values(model: snt.Module) -> list[np.ndarray]:
    return [v.numpy() for v in model.variables]


def _assert_values(model: snt.Module, values: list[np.ndarray]) -> None:
    for variable, value in zip(model.variables, values, strict=True):
        np.testing.assert_array_equal(variable.numpy(), value)


# LoRA


def test_lora_stacked_adapters_have_the_layer_axis_and_are_the_only_trainables():
    model = _transformer(True)
    adapters = snt.lora.add(model, rank=2)
    assert sorted(adapters)[0] == "transformer/stack/block/attention/key"
    query = model.stack.layer.attention.query.lora
    assert adapters["transformer/stack/block/attention/query"] is query
    assert query.a.shape == [3, 8, 2] and query.b.shape == [3, 2, 8]
    assert query.merged.shape == [3] and query.merged.dtype == tf.bool
    assert query.a.name == "transformer/stack/block/attention/query/lora/a:0"
    mlp_in = model.stack.layer.mlp_in.lora
    assert mlp_in.a.shape == [3, 8, 2] and mlp_in.b.shape == [3, 2, 32]
    # Each layer's `a` is drawn on its own; `b` starts at zero.
    a = query.a.numpy()
    assert not np.allclose(a[0], a[1]) and not np.allclose(a[1], a[2])
    assert not np.any(mlp_in.b.numpy())
    names = {v.name for v in model.trainable_variables}
    assert names == {
        v.name for adapter in adapters.values() for v in (adapter.a, adapter.b)
    }
    # The stack's layer variables all keep the leading layer axis.
    assert all(v.shape[0] == 3 for _, v in model.stack.layer_variables())


@pytest.mark.parametrize("mode", _MODES)
def test_lora_stacked_outputs_match_unrolled(mode):
    stacked, unrolled = _adapted_pair()
    x = _x(2, 5, 8, seed=3)
    expected = unrolled(x).numpy()
    _close(_call(stacked, x, mode), expected)
    snt.lora.remove(unrolled)
    assert not np.allclose(unrolled(x).numpy(), expected, atol=1e-3)


def test_lora_filters_choose_stacked_layers_by_type_and_name():
    model = _transformer(True)
    by_type = snt.lora.add(model, rank=1, types=snt.MultiHeadAttention)
    assert sorted(by_type) == [
        f"transformer/stack/block/attention/{p}"
        for p in ("key", "output", "query", "value")
    ]
    snt.lora.remove(model)
    by_name = snt.lora.add(model, rank=1, pattern=r"stack/block/mlp_")
    assert sorted(by_name) == [
        "transformer/stack/block/mlp_in",
        "transformer/stack/block/mlp_out",
    ]
    stacked, unrolled = _adapted_pair(pattern="mlp_out")
    x = _x(2, 5, 8)
    _close(stacked(x).numpy(), unrolled(x).numpy())


@pytest.mark.parametrize("jit_compile", [False, True])
def test_lora_stacked_gradients_reach_only_adapters_and_match_unrolled(jit_compile):
    stacked, unrolled = _adapted_pair()
    x = _x(2, 5, 8, seed=4)
    # A fixed projection of the outputs: the sum of their squares would be
    # constant after the final layer norm, its gradients rounding noise.
    probe = _x(2, 5, 8, seed=9)

    def gradients(model):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x) * probe)
        return tape.gradient(loss, model.trainable_variables)

    traced = tf.function(lambda: gradients(stacked), jit_compile=jit_compile)
    # XLA fuses and orders the float32 sums its own way.
    rtol = 1e-3 if jit_compile else 1e-4
    expected = dict(
        zip([v.name for v in unrolled.trainable_variables], gradients(unrolled))
    )
    for grads in (gradients(stacked), traced()):
        assert len(grads) == 6 * 2
        for v, g in zip(stacked.trainable_variables, grads):
            assert "/lora/" in v.name and g.shape == v.shape
            for i in range(3):
                name = v.name.replace("stack/block", f"block_{i}")
                np.testing.assert_allclose(g[i], expected[name], rtol=rtol, atol=1e-5)
    # A training step moves the adapters only.
    frozen = {v.name: v.numpy() for v in stacked.variables if "/lora/" not in v.name}
    optimizer = snt.optimizers.SGD(0.1)
    optimizer.apply(gradients(stacked), stacked.trainable_variables)
    for v in stacked.variables:
        if v.name in frozen:
            np.testing.assert_array_equal(v.numpy(), frozen[v.name])


def test_lora_stacked_merge_unmerge_remove():
    model = _transformer(True)
    x = _x(2, 5, 8)
    plain, values = model(x).numpy(), _values(model)
    slots = len(model.stack._slots)
    adapters = snt.lora.add(model, rank=2)
    _randomize(adapters)
    adapted = model(x).numpy()
    traced = tf.function(model)
    _close(traced(x).numpy(), adapted)
    query = model.stack.layer.attention.query
    w, a, b = query.w.numpy(), query.lora.a.numpy(), query.lora.b.numpy()
    snt.lora.merge(model)
    assert all(bool(tf.reduce_all(a.merged)) for a in adapters.values())
    for i in range(3):
        _close(query.w[i].numpy(), w[i] + a[i] @ b[i])
    for mode in _MODES:
        _close(_call(model, x, mode), adapted)
    _close(traced(x).numpy(), adapted)
    snt.lora.unmerge(model)
    assert not any(bool(tf.reduce_any(a.merged)) for a in adapters.values())
    _close(model(x).numpy(), adapted)
    _close(traced(x).numpy(), adapted)
    snt.lora.merge(model)
    snt.lora.remove(model)
    assert len(model.stack._slots) == slots
    assert model.stack.layer.attention.query.lora is None
    for variable, value in zip(model.variables, values, strict=True):
        np.testing.assert_allclose(variable.numpy(), value, rtol=1e-5, atol=1e-6)
    _close(model(x).numpy(), plain)
    _close(_call(model, x, "xla"), plain)


def test_lora_stacked_remove_keep_merged_equals_unrolled_merged():
    stacked, unrolled = _adapted_pair()
    x = _x(2, 5, 8)
    adapted = unrolled(x).numpy()
    snt.lora.merge(stacked)
    snt.lora.remove(stacked, keep_merged=True)
    assert [v.shape[0] for _, v in stacked.stack.layer_variables()] == [3] * 16
    _close(stacked(x).numpy(), adapted)
    _close(_call(stacked, x, "xla"), adapted)


def test_lora_stacked_checkpoint_paths_round_trip_and_restore_on_create(tmp_path):
    model, _ = _adapted_pair()
    snt.lora.merge(model)  # Per-layer merged flags travel too.
    x = _x(2, 5, 8)
    expected = model(x).numpy()
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    keys = {name for name, _ in tf.train.list_variables(path)}
    key = "model/stack/layer/attention/query/lora/{}/.ATTRIBUTES/VARIABLE_VALUE"
    assert {key.format(n) for n in ("a", "b", "merged")} <= keys
    # Round trip into a built, adapted model.
    other = _transformer(True, seed=5)
    snt.lora.add(other, rank=2)
    tf.train.Checkpoint(model=other).read(path).assert_consumed()
    _close(other(x).numpy(), expected)
    # Restore on create: read before the first call, adapters added after it.
    fresh = snt.nets.Transformer(stacked=True, **_KW)
    status = tf.train.Checkpoint(model=fresh).read(path)
    fresh(x)
    snt.lora.add(fresh, rank=2)
    status.assert_consumed()
    _close(fresh(x).numpy(), expected)
    _close(_call(fresh, x, "autograph"), expected)


def test_lora_stacked_adapters_save_and_restore(tmp_path):
    model, _ = _adapted_pair()
    x = _x(2, 5, 8)
    expected = model(x).numpy()
    path = snt.lora.save(model, str(tmp_path / "adapters"))
    other = _transformer(True)
    snt.lora.add(other, rank=2)
    for v, w in zip(other.variables, model.variables, strict=True):
        if "/lora/" not in w.name:
            v.assign(w)
    assert not np.allclose(other(x).numpy(), expected, atol=1e-3)
    snt.lora.restore(other, path)
    _close(other(x).numpy(), expected)
    # The unrolled model's adapters have other names and shapes.
    _, unrolled = _adapted_pair()
    with pytest.raises(ValueError, match=r"`path` must hold the adapter variable"):
        snt.lora.restore(unrolled, path)


def test_lora_stacked_saved_model(tmp_path):
    model, _ = _adapted_pair()
    x = _x(2, 5, 8)
    expected = model(x).numpy()
    model.inference = tf.function(
        lambda x: model(x), input_signature=[tf.TensorSpec([None, 5, 8])]
    )
    tf.saved_model.save(model, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    _close(loaded.inference(x).numpy(), expected)


def test_lora_on_int8_stacked_base_matches_unrolled():
    stacked, unrolled = _quantized_pair()
    _randomize(snt.lora.add(stacked, rank=2))
    snt.lora.add(unrolled, rank=2)
    snt.nets.copy_transformer_weights(stacked, unrolled)
    x = _x(2, 5, 8)
    expected = unrolled(x).numpy()
    for mode in _MODES:
        _close(_call(stacked, x, mode), expected)
    assert stacked.stack.layer.mlp_in.lora.a.dtype == tf.float32


def test_stacked_adapter_is_not_called_on_its_own():
    model = _transformer(True)
    adapter = snt.lora.add(model, rank=1)["transformer/stack/block/mlp_in"]
    with pytest.raises(ValueError, match=r"`self` must be an adapter of one layer"):
        adapter(tf.ones([2, 8]))


# int8


@pytest.mark.parametrize("mode", _MODES)
def test_int8_stacked_matches_unrolled(mode):
    stacked, unrolled = _quantized_pair()
    x = _x(2, 5, 8, seed=2)
    _close(_call(stacked, x, mode), unrolled(x).numpy())


def test_int8_stacked_values_and_scales_per_layer_and_output_channel():
    model = _transformer(True)
    w = model.stack.layer.mlp_in.w.numpy()  # [3, 8, 32]
    layers = snt.int8.quantize(model)
    assert model.stack.layer.mlp_in in layers
    mlp_in = model.stack.layer.mlp_in
    assert mlp_in.w.dtype == tf.int8 and mlp_in.w.shape == [3, 8, 32]
    assert mlp_in.w_scale.shape == [3, 32] and not mlp_in.w.trainable
    assert mlp_in.w.name == "transformer/stack/block/mlp_in/w:0"
    scales = np.abs(w).max(axis=1) / 127.0
    np.testing.assert_allclose(mlp_in.w_scale.numpy(), scales, rtol=1e-6)
    values = np.clip(np.round(w / scales[:, None, :]), -127, 127)
    np.testing.assert_array_equal(mlp_in.w.numpy(), values)
    assert all(v.shape[0] == 3 for _, v in model.stack.layer_variables())


def test_int8_stacked_checkpoint_and_saved_model(tmp_path):
    stacked, unrolled = _quantized_pair()
    x = _x(2, 5, 8)
    expected = unrolled(x).numpy()
    path = tf.train.Checkpoint(model=stacked).write(str(tmp_path / "ckpt"))
    other = _transformer(True, seed=3)
    snt.int8.quantize(other)
    tf.train.Checkpoint(model=other).read(path).assert_consumed()
    _close(other(x).numpy(), expected)
    stacked.inference = tf.function(
        lambda x: stacked(x), input_signature=[tf.TensorSpec([None, 5, 8])]
    )
    tf.saved_model.save(stacked, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    _close(loaded.inference(x).numpy(), expected)


class _EmbedAdd(snt.Module):
    """A layer adding the embeddings of fixed ids: an Embed inside a stack."""

    def __init__(self):
        super().__init__()
        self.embed = snt.Embed(5, 4)

    def __call__(self, x: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
        return x + self.embed(ids)


def test_int8_stacked_embed_scales_per_layer_and_row():
    stack = snt.LayerStack(_EmbedAdd, num_layers=3)
    ids = tf.constant([[1, 4, 4]])
    h = tf.ones([1, 3, 4])
    stack(h, ids)
    table = stack.layer.embed.embeddings.numpy()  # [3, 5, 4]
    snt.int8.quantize(stack)
    embed = stack.layer.embed
    assert embed.embeddings.dtype == tf.int8
    scales = np.abs(table).max(axis=2, keepdims=True) / 127.0
    np.testing.assert_allclose(embed.embeddings_scale.numpy(), scales, rtol=1e-6)
    dequantized = np.clip(np.round(table / scales), -127, 127) * scales
    expected = h.numpy() + dequantized[:, ids.numpy()[0]].sum(axis=0)
    for mode in ("eager", "no_autograph", "xla"):
        f = stack if mode == "eager" else tf.function(stack, jit_compile=mode == "xla")
        _close(f(h, ids).numpy(), expected)


# Refusals


def test_nested_stacks_are_refused_and_nothing_changes():
    stack = snt.LayerStack(lambda: snt.LayerStack(lambda: snt.Linear(4), 2), 3)
    stack(tf.ones([2, 4]))
    values = _values(stack)
    for change in (lambda m: snt.lora.add(m, rank=1), snt.int8.quantize):
        with pytest.raises(ValueError, match=r"inside nested `snt.LayerStack`s"):
            change(stack)
    _assert_values(stack, values)
    assert stack.layer.layer.lora is None


@pytest.mark.parametrize(
    "change",
    [lambda m: snt.lora.add(m, rank=1), snt.int8.quantize],
    ids=["lora", "int8"],
)
def test_a_stacks_layer_without_its_stack_is_refused(change):
    model = _transformer(True)
    values = _values(model)
    with pytest.raises(ValueError, match=r"`module` must hold the `snt.LayerStack`"):
        change(model.stack.layer)
    _assert_values(model, values)


def test_restack_contract():
    stack = snt.LayerStack(lambda: snt.Linear(4), num_layers=2)
    with pytest.raises(ValueError, match=r"`self` must be called once"):
        stack._restack()
    x = tf.ones([3, 4])
    expected = stack(x).numpy()
    slots = stack._slots

    def same(a, b) -> bool:
        return len(a) == len(b) and all(
            s.variable is t.variable and s.proxy is t.proxy for s, t in zip(a, b)
        )

    stack._restack()  # Nothing changed: the same slots.
    assert same(stack._slots, slots)
    stack.layer.extra = tf.Variable(tf.zeros([4]), name="extra")
    with pytest.raises(ValueError, match=r"leading axis of num_layers=2"):
        stack._restack()
    assert same(stack._slots, slots)
    del stack.layer.extra
    # A replaced variable gets a new slot, used by every kind of call.
    stack.layer.w = tf.Variable(stack.layer.w * 2.0, name="w")
    stack._restack()
    assert not same(stack._slots, slots)
    doubled = x.numpy()
    for w, b in zip(stack.layer.w.numpy(), stack.layer.b.numpy()):
        doubled = doubled @ w + b
    assert not np.allclose(doubled, expected)
    for f in (stack, tf.function(stack), tf.function(stack, jit_compile=True)):
        _close(f(x).numpy(), doubled)


# copy_transformer_weights


def test_copy_refuses_adapted_source_into_plain_target_saying_what_to_do():
    stacked, _ = _adapted_pair()
    target = _transformer(False)
    values = _values(target)
    with pytest.raises(
        ValueError,
        match=r"(?s)fine-tuning variables of `source`.*attention/key/lora/a.*"
        r"`snt.lora.merge\(source\)` and `snt.lora.remove\(source, "
        r"keep_merged=True\)`.*`snt.lora.add`",
    ):
        snt.nets.copy_transformer_weights(stacked, target)
    _assert_values(target, values)
    # The advice works.
    x = _x(2, 5, 8)
    expected = stacked(x).numpy()
    snt.lora.merge(stacked)
    snt.lora.remove(stacked, keep_merged=True)
    snt.nets.copy_transformer_weights(stacked, target)
    _close(target(x).numpy(), expected)


def test_copy_refuses_plain_source_into_adapted_target():
    source = _transformer(True)
    target = _transformer(False)
    snt.lora.add(target, rank=2)
    with pytest.raises(ValueError, match=r"`target` has LoRA adapters and `source`"):
        snt.nets.copy_transformer_weights(source, target)


def test_copy_refuses_int8_into_float_and_back_saying_what_to_do():
    stacked, _ = _quantized_pair()
    target = _transformer(False)
    with pytest.raises(ValueError, match=r"`snt.int8.quantize\(target\)` first"):
        snt.nets.copy_transformer_weights(stacked, target)
    with pytest.raises(ValueError, match=r"`target` has int8 weights"):
        snt.nets.copy_transformer_weights(target, stacked)


def test_copy_moves_adapters_and_int8_both_ways():
    stacked, unrolled = _adapted_pair()
    snt.lora.merge(unrolled)
    back = _transformer(True, seed=7)
    snt.lora.add(back, rank=2)
    snt.nets.copy_transformer_weights(unrolled, back)
    assert bool(tf.reduce_all(back.stack.layer.mlp_in.lora.merged))
    x = _x(2, 5, 8)
    _close(back(x).numpy(), stacked(x).numpy())
    q_stacked, q_unrolled = _quantized_pair()
    q_back = _transformer(True, seed=7)
    snt.int8.quantize(q_back)
    snt.nets.copy_transformer_weights(q_unrolled, q_back)
    np.testing.assert_array_equal(
        q_back.stack.layer.mlp_in.w.numpy(), q_stacked.stack.layer.mlp_in.w.numpy()
    )
