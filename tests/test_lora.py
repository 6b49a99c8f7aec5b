"""`snt.lora`: low-rank adapters on the Linears of a trained module tree."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt

_KW = {"num_layers": 2, "model_size": 8, "num_heads": 2}


def _devices(n: int) -> list[str]:
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:n]]
    assert len(devices) == n, "conftest.py should configure 4 logical CPUs"
    return devices


def _x(*shape: int, seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[seed, 1])


def _transformer(**kwargs) -> snt.nets.Transformer:
    model = snt.nets.Transformer(**{**_KW, **kwargs})
    model(_x(2, 5, 8))
    return model


def _linears(module: tf.Module) -> list[snt.Linear]:
    return [m for m in (module, *module.submodules) if isinstance(m, snt.Linear)]


def _randomize(adapters) -> None:
    for i, adapter in enumerate(adapters.values()):
        adapter.b.assign(_x(*adapter.b.shape, seed=100 + i))


def _values(variables) -> list[np.ndarray]:
    return [v.numpy() for v in variables]


def test_linear_matches_numpy_reference():
    linear = snt.Linear(5)
    x = _x(3, 4)
    linear(x)
    (adapter,) = snt.lora.add(linear, rank=2, alpha=6.0).values()
    adapter.b.assign(_x(2, 5, seed=7))
    w, b, a, lb = (v.numpy() for v in (linear.w, linear.b, adapter.a, adapter.b))
    expected = x.numpy() @ w + b + 3.0 * (x.numpy() @ a) @ lb
    np.testing.assert_allclose(linear(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    # The other call path (rank > 2 inputs; traced calls) gives the same.
    x3 = tf.reshape(x, [3, 1, 4])
    np.testing.assert_allclose(linear(x3).numpy()[:, 0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        tf.function(linear)(x).numpy(), expected, rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        adapter(x).numpy(), 3.0 * (x.numpy() @ a) @ lb, rtol=1e-5, atol=1e-5
    )
    assert adapter.scale == 3.0 and adapter.rank == 2 and adapter.alpha == 6.0


def test_default_alpha_is_rank_and_a_is_random_b_zero():
    linear = snt.Linear(6)
    linear(_x(2, 6))
    (adapter,) = snt.lora.add(linear, rank=3).values()
    assert adapter.alpha == 3.0 and adapter.scale == 1.0
    assert adapter.a.shape == [6, 3] and adapter.b.shape == [3, 6]
    assert float(tf.math.reduce_std(adapter.a)) > 0.1
    assert not np.any(adapter.b.numpy())
    assert adapter.a.name == "linear/lora/a:0"


def test_transformer_adapters_everywhere_start_equal_and_are_the_only_trainables():
    model = _transformer()
    x = _x(2, 5, 8)
    before = model(x).numpy()
    adapters = snt.lora.add(model, rank=4)
    # 4 attention projections and 2 MLP Linears per block.
    assert len(adapters) == 12
    assert "transformer/block_0/attention/query" in adapters
    expected = [v.name for a in adapters.values() for v in (a.a, a.b)]
    assert sorted(v.name for v in model.trainable_variables) == sorted(expected)
    np.testing.assert_array_equal(model(x).numpy(), before)


def test_training_changes_only_the_adapters_and_lowers_the_loss():
    model = _transformer()
    x, y = _x(4, 5, 8, seed=1), _x(4, 5, 8, seed=2)
    snt.lora.add(model, rank=2)
    frozen = [v for v in model.variables if "lora" not in v.name]
    before = _values(frozen)
    optimizer = snt.optimizers.Adam(0.01)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        params = model.trainable_variables
        optimizer.apply(tape.gradient(loss, params), params)
        return loss

    losses = [float(step()) for _ in range(30)]
    assert losses[-1] < losses[0] * 0.95
    for value, variable in zip(before, frozen):
        np.testing.assert_array_equal(variable.numpy(), value)
    assert all(np.any(a.b.numpy()) for a in snt.lora.adapters(model).values())


def test_filters_choose_by_enclosing_type_and_name():
    model = _transformer()
    attention = snt.lora.add(model, rank=2, types=snt.MultiHeadAttention)
    assert len(attention) == 8
    assert all("/attention/" in name for name in attention)
    snt.lora.remove(model)
    mlp = snt.lora.add(model, rank=2, pattern=r"mlp_(in|out)$")
    assert sorted(mlp) == [
        f"transformer/block_{i}/mlp_{s}" for i in (0, 1) for s in ("in", "out")
    ]
    # Linears without adapters are frozen too: the model trains adapters only.
    assert len(model.trainable_variables) == 8
    snt.lora.remove(model)
    both = snt.lora.add(model, rank=2, types=snt.MultiHeadAttention, pattern="query")
    assert sorted(both) == [
        "transformer/block_0/attention/query",
        "transformer/block_1/attention/query",
    ]


def test_merge_unmerge_and_remove():
    model = _transformer()
    x = _x(2, 5, 8)
    plain = model(x).numpy()
    weights = _values(model.variables)
    adapters = snt.lora.add(model, rank=2)
    _randomize(adapters)
    adapted = model(x).numpy()
    assert not np.allclose(adapted, plain)
    snt.lora.merge(model)
    assert all(bool(a.merged) for a in adapters.values())
    np.testing.assert_allclose(model(x).numpy(), adapted, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        tf.function(model)(x).numpy(), adapted, rtol=1e-5, atol=1e-5
    )
    snt.lora.unmerge(model)
    np.testing.assert_allclose(model(x).numpy(), adapted, rtol=1e-5, atol=1e-5)
    snt.lora.merge(model)
    snt.lora.remove(model)  # Takes the merged adapters out first.
    assert all(m.lora is None for m in _linears(model))
    assert len(model.trainable_variables) == len(weights)
    assert not any(snt.is_frozen(m) for m in (model, *model.submodules))
    for value, variable in zip(weights, model.variables):
        np.testing.assert_allclose(variable.numpy(), value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model(x).numpy(), plain, rtol=1e-5, atol=1e-5)


def test_functions_traced_before_a_merge_stay_right():
    model = _transformer()
    x = _x(2, 5, 8)
    _randomize(snt.lora.add(model, rank=2))
    traced = tf.function(model)
    adapted = traced(x).numpy()
    snt.lora.merge(model)
    np.testing.assert_allclose(traced(x).numpy(), adapted, rtol=1e-5, atol=1e-5)
    snt.lora.unmerge(model)
    np.testing.assert_allclose(traced(x).numpy(), adapted, rtol=1e-5, atol=1e-5)
    # Traced while merged, called after unmerging: still right.
    snt.lora.merge(model)
    merged_trace = tf.function(model)
    merged_trace(x)
    snt.lora.unmerge(model)
    np.testing.assert_allclose(merged_trace(x).numpy(), adapted, rtol=1e-5, atol=1e-5)


def test_checkpoint_of_merged_model_restores_as_merged(tmp_path):
    model = _transformer()
    x = _x(2, 5, 8)
    _randomize(snt.lora.add(model, rank=2))
    adapted = model(x).numpy()
    snt.lora.merge(model)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "merged"))
    other = _transformer()
    snt.lora.add(other, rank=2)
    tf.train.Checkpoint(model=other).read(path).assert_consumed()
    assert all(bool(a.merged) for a in snt.lora.adapters(other).values())
    np.testing.assert_allclose(other(x).numpy(), adapted, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"`module` must have unmerged adapters to"):
        snt.lora.restore(other, snt.lora.save(model, str(tmp_path / "a")))
    snt.lora.unmerge(other)
    np.testing.assert_allclose(other(x).numpy(), adapted, rtol=1e-5, atol=1e-5)


def test_remove_keep_merged_leaves_a_plain_model_with_adapted_weights(tmp_path):
    model = _transformer()
    x = _x(2, 5, 8)
    plain_path = tf.train.Checkpoint(model=model).write(str(tmp_path / "plain"))
    _randomize(snt.lora.add(model, rank=2))
    adapted = model(x).numpy()
    snt.lora.merge(model)
    snt.lora.remove(model, keep_merged=True)
    np.testing.assert_allclose(model(x).numpy(), adapted, rtol=1e-5, atol=1e-5)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "merged"))
    assert [n for n, _ in tf.train.list_variables(path)] == [
        n for n, _ in tf.train.list_variables(plain_path)
    ]


def test_remove_keeps_what_the_user_froze():
    model = _transformer()
    snt.freeze(model.submodules[0])
    snt.lora.add(model, rank=2)
    snt.lora.remove(model)
    assert snt.is_frozen(model.submodules[0]) and not snt.is_frozen(model)


def test_plain_checkpoint_restores_into_adapted_model(tmp_path):
    source = _transformer()
    path = tf.train.Checkpoint(model=source).write(str(tmp_path / "base"))
    target = _transformer()
    adapters = snt.lora.add(target, rank=2)
    initial = {name: a.a.numpy() for name, a in adapters.items()}
    tf.train.Checkpoint(model=target).read(path).expect_partial()
    x = _x(2, 5, 8)
    np.testing.assert_allclose(target(x).numpy(), source(x).numpy(), rtol=1e-6)
    for name, adapter in adapters.items():
        np.testing.assert_array_equal(adapter.a.numpy(), initial[name])


def test_adapters_alone_save_and_restore(tmp_path):
    model = _transformer()
    full = tf.train.Checkpoint(model=model).write(str(tmp_path / "full"))
    adapters = snt.lora.add(model, rank=2)
    _randomize(adapters)
    x = _x(2, 5, 8)
    adapted = model(x).numpy()
    path = snt.lora.save(model, str(tmp_path / "adapters"))
    names = [n for n, _ in tf.train.list_variables(path) if n.startswith("adapters")]
    assert len(names) == 36  # a, b and merged of 12 adapters.
    assert all("lora" not in n for n in names)  # Only the adapters' own paths.
    other = _transformer()
    tf.train.Checkpoint(model=other).read(full)
    snt.lora.add(other, rank=2)
    assert not np.allclose(other(x).numpy(), adapted)
    snt.lora.restore(other, path)
    np.testing.assert_allclose(other(x).numpy(), adapted, rtol=1e-6)
    # A standard checkpoint of the same dict reads them too.
    third = _transformer()
    tf.train.Checkpoint(model=third).read(full)
    snt.lora.add(third, rank=2)
    tf.train.Checkpoint(adapters=snt.lora.adapters(third)).read(
        path
    ).assert_existing_objects_matched()
    np.testing.assert_allclose(third(x).numpy(), adapted, rtol=1e-6)


def test_restoring_adapters_of_another_rank_names_the_variable_and_changes_nothing(
    tmp_path,
):
    model = _transformer()
    _randomize(snt.lora.add(model, rank=2))
    path = snt.lora.save(model, str(tmp_path / "rank2"))
    other = _transformer()
    snt.lora.add(other, rank=3)
    before = _values(other.variables)
    with pytest.raises(
        ValueError,
        match=r"`path` must hold `transformer/block_0/mlp_in/lora/a` with shape "
        r"\[8, 3\] \(rank 3\), not \[8, 2\].*Received: ",
    ):
        snt.lora.restore(other, path)
    for value, variable in zip(before, other.variables):
        np.testing.assert_array_equal(variable.numpy(), value)


def test_restore_refuses_missing_and_extra_adapters(tmp_path):
    model = _transformer()
    snt.lora.add(model, rank=2, types=snt.MultiHeadAttention)
    path = snt.lora.save(model, str(tmp_path / "attention"))
    everywhere = _transformer()
    snt.lora.add(everywhere, rank=2)
    with pytest.raises(ValueError, match=r"`path` must hold the adapter variable `"):
        snt.lora.restore(everywhere, path)
    fewer = _transformer()
    snt.lora.add(fewer, rank=2, pattern="query")
    with pytest.raises(ValueError, match=r"`path` must hold only adapters"):
        snt.lora.restore(fewer, path)


def test_checkpoint_key_is_tensorflows(tmp_path):
    model = _transformer()
    snt.lora.add(model, rank=1, pattern="block_0/attention/query")
    path = snt.lora.save(model, str(tmp_path / "one"))
    from sonnet._src import lora

    names = {n for n, _ in tf.train.list_variables(path)}
    assert lora.checkpoint_key("transformer/block_0/attention/query", "a") in names


@pytest.mark.parametrize("autograph", [True, False])
def test_tf_function_and_xla_match_eager(autograph):
    model = _transformer()
    _randomize(snt.lora.add(model, rank=2))
    x = _x(2, 5, 8)
    eager = model(x).numpy()
    traced = tf.function(model, autograph=autograph)(x).numpy()
    compiled = tf.function(model, autograph=autograph, jit_compile=True)(x).numpy()
    np.testing.assert_allclose(traced, eager, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-4)


def test_xla_train_step_updates_adapters_only():
    model = _transformer()
    snt.lora.add(model, rank=2)
    frozen = [v for v in model.variables if "lora" not in v.name]
    before = _values(frozen)
    optimizer = snt.optimizers.SGD(0.1)
    x, y = _x(2, 5, 8), _x(2, 5, 8, seed=3)

    @tf.function(jit_compile=True)
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        params = model.trainable_variables
        optimizer.apply(tape.gradient(loss, params), params)
        return loss

    first = float(step())
    assert float(step()) < first
    assert all(np.any(a.b.numpy()) for a in snt.lora.adapters(model).values())
    for value, variable in zip(before, frozen):
        np.testing.assert_array_equal(variable.numpy(), value)


def test_precision_policy_adapters_float32_computed_in_bfloat16():
    linear = snt.Linear(8)
    x = _x(4, 8)
    linear(x)
    snt.precision.apply(linear, "mixed_bfloat16")
    adapters = snt.lora.add(linear, rank=2)
    _randomize(adapters)
    assert all(a.a.dtype == tf.float32 for a in adapters.values())
    low = linear(x)
    traced = tf.function(linear)(x)
    assert low.dtype == traced.dtype == tf.bfloat16
    snt.precision.apply(linear, None)
    reference = linear(x).numpy()
    for result in (low, traced):
        np.testing.assert_allclose(
            tf.cast(result, tf.float32).numpy(), reference, rtol=0.02, atol=0.05
        )
    # In a Transformer under the policy, the adapters' products are bfloat16.
    model = _transformer()
    snt.precision.apply(model, "mixed_bfloat16")
    snt.lora.add(model, rank=2)
    graph = tf.function(model).get_concrete_function(_x(2, 5, 8)).graph
    ranks = [
        op
        for op in graph.get_operations()
        if op.type == "MatMul" and op.inputs[1].shape[0] == 2
    ]
    assert len(ranks) == 12
    assert all(op.inputs[0].dtype == tf.bfloat16 for op in ranks)


def test_under_replicator():
    strategy = snt.distribute.Replicator(_devices(2))
    with strategy.scope():
        model = _transformer()
        snt.lora.add(model, rank=2)
        optimizer = snt.optimizers.SGD(0.1)
    frozen = [v for v in model.variables if "lora" not in v.name]
    before = [v.values[0].numpy() for v in frozen]
    x = _x(4, 5, 8)

    @tf.function
    def step(x):
        def replica(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x) ** 2)
            params = model.trainable_variables
            grads = tape.gradient(loss, params)
            grads = tf.distribute.get_replica_context().all_reduce("sum", grads)
            optimizer.apply(grads, params)
            return loss

        return strategy.run(replica, (x,))

    step(x)
    step(x)
    adapter_b = snt.lora.adapters(model)["transformer/block_0/mlp_out"].b
    locals_ = adapter_b.values
    assert np.any(locals_[0].numpy())
    np.testing.assert_allclose(locals_[0].numpy(), locals_[1].numpy())
    for value, variable in zip(before, frozen):
        np.testing.assert_array_equal(variable.values[0].numpy(), value)


def test_saved_model_of_adapted_model(tmp_path):
    model = _transformer()
    _randomize(snt.lora.add(model, rank=2))
    x = _x(2, 5, 8)
    module = tf.Module()
    module.model = model
    module.run = tf.function(model, input_signature=[tf.TensorSpec([None, 5, 8])])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    np.testing.assert_allclose(loaded.run(x).numpy(), model(x).numpy(), rtol=1e-5)


@pytest.mark.parametrize("clone", ["pickle", "deepcopy"])
def test_pickle_and_copy_of_adapted_model(clone):
    model = _transformer()
    _randomize(snt.lora.add(model, rank=2))
    x = _x(2, 5, 8)
    other = (
        pickle.loads(pickle.dumps(model)) if clone == "pickle" else copy.deepcopy(model)
    )
    np.testing.assert_allclose(other(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert len(other.trainable_variables) == 24


def test_adapted_mlp_eager_fast_path_and_rank3():
    mlp = snt.nets.MLP([6, 3])
    x = _x(4, 5)
    mlp(x)
    _randomize(snt.lora.add(mlp, rank=2))
    np.testing.assert_allclose(
        mlp(tf.reshape(x, [2, 2, 5])).numpy().reshape(4, 3),
        mlp(x).numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


# Bad input: each error names its argument, and nothing changes.


def _unchanged(model, before) -> None:
    assert all(m.lora is None for m in _linears(model))
    assert not any(snt.is_frozen(m) for m in (model, *model.submodules))
    assert len(model.trainable_variables) == before


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"rank": 0}, ValueError, r"`rank` must be a positive integer"),
        ({"rank": 9}, ValueError, r"`rank` must be at most 8, the smaller dimension"),
        ({"rank": 1.5}, TypeError, r"`rank` must be an integer"),
        ({"rank": 2, "alpha": -1.0}, ValueError, r"`alpha` must be a positive"),
        (
            {"rank": 2, "pattern": "nothing"},
            ValueError,
            r"`pattern` must match at least one of the 12",
        ),
        (
            {"rank": 2, "pattern": 3},
            TypeError,
            r"`pattern` must be a regular expression",
        ),
        ({"rank": 2, "pattern": "("}, ValueError, r"`pattern` must be a valid regular"),
        (
            {"rank": 2, "types": snt.Conv2D},
            ValueError,
            r"`types` must match at least one",
        ),
        ({"rank": 2, "types": "Linear"}, TypeError, r"`types` must be a class"),
        ({"rank": 2, "a_init": 3}, TypeError, r"`a_init`"),
    ],
)
def test_bad_arguments_change_nothing(kwargs, error, pattern):
    model = _transformer()
    before = len(model.trainable_variables)
    with pytest.raises(error, match=pattern + r".*Received: "):
        snt.lora.add(model, **kwargs)
    _unchanged(model, before)


def test_rank_is_checked_against_every_chosen_weight():
    mlp = snt.nets.MLP([16, 2])
    mlp(_x(3, 16))
    with pytest.raises(ValueError, match=r"`rank` must be at most 2.*mlp/linear_1"):
        snt.lora.add(mlp, rank=3)
    _unchanged(mlp, 4)
    assert len(snt.lora.add(mlp, rank=3, pattern="linear_0")) == 1


def test_rank_accepts_integer_spellings():
    linear = snt.Linear(4)
    linear(_x(2, 4))
    (adapter,) = snt.lora.add(linear, rank=np.int64(2), alpha=tf.constant(4.0)).values()
    assert adapter.rank == 2 and adapter.alpha == 4.0


def test_unbuilt_module_is_refused():
    model = snt.nets.MLP([4, 2])
    with pytest.raises(ValueError, match=r"`module` must be built first"):
        snt.lora.add(model, rank=1)
    linear = snt.Linear(3)
    with pytest.raises(ValueError, match=r"`module` must be built first"):
        snt.lora.add(linear, rank=1)


def test_module_without_linears_is_refused():
    norm = snt.LayerNorm(-1, True, True)
    norm(_x(2, 3))
    with pytest.raises(ValueError, match=r"`module` must contain a `snt.Linear`"):
        snt.lora.add(norm, rank=1)
    with pytest.raises(TypeError, match=r"`module` must be a `tf.Module`"):
        snt.lora.add([norm], rank=1)


def test_adding_twice_merging_twice_and_unmerging_unmerged_are_refused():
    model = _transformer()
    snt.lora.add(model, rank=2)
    with pytest.raises(ValueError, match=r"`module` must not have adapters already"):
        snt.lora.add(model, rank=2)
    with pytest.raises(ValueError, match=r"`module` must have merged adapters"):
        snt.lora.unmerge(model)
    snt.lora.merge(model)
    weights = _values(model.variables)
    with pytest.raises(ValueError, match=r"`module` must have unmerged adapters"):
        snt.lora.merge(model)
    for value, variable in zip(weights, model.variables):
        np.testing.assert_array_equal(variable.numpy(), value)


@pytest.mark.parametrize(
    "function", [snt.lora.merge, snt.lora.unmerge, snt.lora.remove, snt.lora.adapters]
)
def test_functions_need_adapters(function):
    model = _transformer()
    with pytest.raises(ValueError, match=r"`module` must have LoRA adapters"):
        function(model)


def _diverged(bad: float = float("nan"), stacked: bool = False):
    """An adapted Transformer whose `mlp_out` adapter (layer 1 of the stack
    when stacked) holds `bad`."""
    model = _transformer(stacked=stacked)
    adapters = snt.lora.add(model, rank=2)
    _randomize(adapters)
    adapter = next(a for name, a in adapters.items() if name.endswith("mlp_out"))
    index = [1, 0, 0] if stacked else [0, 0]
    adapter.b.assign(tf.tensor_scatter_nd_update(adapter.b, [index], [bad]))
    return model


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("stacked", [False, True])
def test_merge_refuses_non_finite_adapters_and_changes_nothing(bad, stacked):
    model = _diverged(bad, stacked)
    values = _values(model.variables)
    where = (
        "layer 1 of `transformer/stack/block/mlp_out`"
        if stacked
        else "`transformer/block_0/mlp_out`"
    )
    with pytest.raises(ValueError) as info:
        snt.lora.merge(model)
    message = str(info.value)
    assert message.startswith("`module` must have finite adapters to merge: ")
    assert where in message and "`snt.lora.remove`" in message, message
    assert "`safe_merge=False`" in message and "Received: " in message
    for value, variable in zip(values, model.variables, strict=True):
        np.testing.assert_array_equal(variable.numpy(), value)
    # The advice: removing the adapters gives the base model back.
    snt.lora.remove(model)
    assert all(np.isfinite(v.numpy()).all() for v in model.variables)


def test_merge_refuses_an_overflowing_weight():
    linear = snt.Linear(2)
    linear(tf.ones([1, 2]))
    linear.w.assign([[3e38, 0.0], [0.0, 0.0]])
    adapter = snt.lora.add(linear, rank=1)["linear"]
    adapter.a.assign([[1.0], [0.0]])
    adapter.b.assign([[3e38, 0.0]])  # Finite, but w + a @ b is not.
    with pytest.raises(ValueError, match=r"`linear` has an adapter term .* overflow"):
        snt.lora.merge(linear)
    assert not bool(adapter.merged)
    np.testing.assert_array_equal(
        linear.w.numpy(), np.array([[3e38, 0.0], [0.0, 0.0]], np.float32)
    )


def test_safe_merge_false_merges_anyway():
    model = _diverged()
    snt.lora.merge(model, safe_merge=False)
    assert not np.isfinite(model.blocks[0].mlp_out.w.numpy()).all()
    with pytest.raises(TypeError, match=r"`safe_merge`"):
        snt.lora.merge(model, safe_merge="yes")


@pytest.mark.parametrize("stacked", [False, True])
def test_taking_out_a_term_that_became_non_finite_is_refused(stacked):
    model = _transformer(stacked=stacked)
    _randomize(snt.lora.add(model, rank=2))
    snt.lora.merge(model)
    name = "stack/block" if stacked else "block_0"
    adapter = snt.lora.adapters(model)[f"transformer/{name}/mlp_in"]
    adapter.a.assign(tf.fill(adapter.a.shape, float("nan")))
    merged = _values(model.variables)
    for change in (snt.lora.unmerge, snt.lora.remove):
        with pytest.raises(ValueError, match=r"keep_merged=True"):
            change(model)
        for value, variable in zip(merged, model.variables, strict=True):
            np.testing.assert_array_equal(variable.numpy(), value)
    assert all(bool(tf.reduce_all(a.merged)) for a in snt.lora.adapters(model).values())
    # The advice: keep the merged weights (finite), drop the adapters.
    snt.lora.remove(model, keep_merged=True)
    assert all(np.isfinite(v.numpy()).all() for v in model.variables)
    assert all(m.lora is None for m in _linears(model))


def test_unmerge_safe_merge_false_writes_what_it_is_told():
    linear = snt.Linear(2)
    linear(tf.ones([1, 2]))
    adapter = snt.lora.add(linear, rank=1)["linear"]
    snt.lora.merge(linear)
    adapter.b.assign([[float("nan"), 0.0]])
    snt.lora.unmerge(linear, safe_merge=False)
    assert np.isnan(linear.w.numpy()[:, 0]).all()


def test_lora_module_arguments():
    with pytest.raises(ValueError, match=r"`rank` must be at most 3"):
        snt.lora.LoRA(3, 5, rank=4)
    with pytest.raises(ValueError, match=r"`dtype` must be a floating point"):
        snt.lora.LoRA(3, 5, rank=1, dtype=tf.int32)
    adapter = snt.lora.LoRA(3, 5, rank=1, alpha=2, dtype=tf.float64)
    assert adapter.a.dtype == tf.float64 and adapter.scale == 2.0
    assert adapter(tf.ones([2, 3], tf.float64)).dtype == tf.float64


@pytest.mark.parametrize(
    "change",
    [
        lambda m: snt.lora.add(m, rank=1),
        snt.lora.merge,
        snt.lora.unmerge,
        snt.lora.remove,
        snt.int8.quantize,
    ],
)
def test_changes_inside_tf_function_are_refused(change):
    linear = snt.Linear(2)
    linear(tf.ones([1, 2]))
    if change is not snt.int8.quantize and change.__name__ != "<lambda>":
        snt.lora.add(linear, rank=1)

    @tf.function
    def traced():
        change(linear)
        return 0

    with pytest.raises(ValueError, match=r"`module` must be .* eagerly, not inside"):
        traced()
