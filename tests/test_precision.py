"""`snt.precision`: float32 variables, bfloat16/float16 compute (issue 16)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt

BF16_RTOL = 5e-2
BF16_ATOL = 5e-2


def _conv_net() -> snt.Module:
    return snt.Sequential(
        [snt.Conv2D(4, 3), tf.nn.relu, snt.Conv2DTranspose(3, 3, stride=2)]
    )


# name -> (factory, input, call kwargs). Each builds a module whose float32
# outputs are compared with its outputs under "mixed_bfloat16".
CASES = {
    "linear": (lambda: snt.Linear(6), lambda: tf.random.normal([4, 5]), {}),
    "linear_rank3": (lambda: snt.Linear(6), lambda: tf.random.normal([2, 3, 5]), {}),
    "bias": (lambda: snt.Bias(), lambda: tf.random.normal([4, 5]), {}),
    "bias_dims": (
        lambda: snt.Bias(bias_dims=[-1], b_init=snt.initializers.RandomNormal()),
        lambda: tf.random.normal([2, 3, 5]),
        {},
    ),
    "conv1d": (lambda: snt.Conv1D(4, 3), lambda: tf.random.normal([2, 8, 3]), {}),
    "conv2d": (lambda: snt.Conv2D(4, 3), lambda: tf.random.normal([2, 6, 6, 3]), {}),
    "conv2d_nchw": (
        lambda: snt.Conv2D(4, 3, data_format="NCHW"),
        lambda: tf.random.normal([2, 3, 6, 6]),
        {},
    ),
    "conv2d_dilated": (
        lambda: snt.Conv2D(4, 3, rate=2),
        lambda: tf.random.normal([2, 8, 8, 3]),
        {},
    ),
    "conv3d": (lambda: snt.Conv3D(2, 2), lambda: tf.random.normal([1, 4, 4, 4, 2]), {}),
    "conv2d_transpose": (
        lambda: snt.Conv2DTranspose(4, 3, stride=2),
        lambda: tf.random.normal([2, 4, 4, 3]),
        {},
    ),
    "conv1d_transpose": (
        lambda: snt.Conv1DTranspose(4, 3),
        lambda: tf.random.normal([2, 5, 3]),
        {},
    ),
    "depthwise_conv2d": (
        lambda: snt.DepthwiseConv2D(3, 2),
        lambda: tf.random.normal([2, 6, 6, 3]),
        {},
    ),
    "batch_norm_train": (
        lambda: snt.BatchNorm(True, True),
        lambda: tf.random.normal([8, 4, 4, 3]),
        {"is_training": True},
    ),
    "batch_norm_test": (
        lambda: snt.BatchNorm(True, True),
        lambda: tf.random.normal([8, 3]),
        {"is_training": False, "test_local_stats": True},
    ),
    "group_norm": (
        lambda: snt.GroupNorm(2),
        lambda: tf.random.normal([2, 4, 4, 4]),
        {},
    ),
    "mlp": (lambda: snt.nets.MLP([8, 8, 3]), lambda: tf.random.normal([4, 5]), {}),
    "mlp_dropout": (
        lambda: snt.nets.MLP([8, 3], dropout_rate=0.5),
        lambda: tf.random.normal([4, 5]),
        {"is_training": False},
    ),
    "sequential_conv": (_conv_net, lambda: tf.random.normal([2, 6, 6, 3]), {}),
    "resnet": (
        lambda: snt.nets.ResNet([1, 1, 1, 1], 5, channels_per_group_list=[4] * 4),
        lambda: tf.random.normal([2, 16, 16, 3]),
        {"is_training": True},
    ),
}
IDS = sorted(CASES)


def _build(name: str) -> tuple[snt.Module, tf.Tensor, dict]:
    tf.random.set_seed(0)
    factory, inputs, kwargs = CASES[name]
    return factory(), inputs(), kwargs


def _compare(module: snt.Module, x: tf.Tensor, kwargs: dict) -> None:
    expected = module(x, **kwargs)
    assert expected.dtype == tf.float32
    snt.precision.apply(module, "mixed_bfloat16")
    actual = module(x, **kwargs)
    assert actual.dtype == tf.bfloat16
    scale = max(1.0, float(tf.reduce_max(tf.abs(expected))))
    np.testing.assert_allclose(
        tf.cast(actual, tf.float32).numpy(),
        expected.numpy(),
        rtol=BF16_RTOL,
        atol=BF16_ATOL * scale,
    )


@pytest.mark.parametrize("name", IDS)
def test_bf16_outputs_close_to_float32(name):
    module, x, kwargs = _build(name)
    _compare(module, x, kwargs)
    assert {v.dtype for v in module.variables} <= {tf.float32, tf.int64}


@pytest.mark.parametrize("name", IDS)
def test_variables_created_float32_and_gradients_reach_them(name):
    module, x, kwargs = _build(name)
    snt.precision.apply(module, "mixed_bfloat16")
    with tf.GradientTape() as tape:
        y = module(tf.cast(x, tf.bfloat16), **kwargs)
        loss = tf.reduce_sum(tf.square(tf.cast(y, tf.float32)))
    params = module.trainable_variables
    assert all(p.dtype == tf.float32 for p in params)
    grads = tape.gradient(loss, params)
    for p, g in zip(params, grads, strict=True):
        assert g is not None, p.name
        assert g.dtype == tf.float32, p.name


def test_embed():
    embed = snt.Embed(10, 4)
    ids = tf.constant([[1, 2], [3, 9]])
    expected = embed(ids)
    snt.precision.apply(embed, "mixed_bfloat16")
    with tf.GradientTape() as tape:
        actual = embed(ids)
        loss = tf.reduce_sum(tf.cast(actual, tf.float32))
    assert actual.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(actual, tf.float32).numpy(), expected.numpy(), rtol=1e-2
    )
    grad = tape.gradient(loss, embed.embeddings)
    assert grad.dtype == tf.float32
    assert isinstance(grad, tf.IndexedSlices)  # Still sparse.


@pytest.mark.parametrize("name", ["linear", "conv2d", "batch_norm_train", "mlp"])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_tf_function(name, jit_compile):
    module, x, kwargs = _build(name)
    snt.precision.apply(module, "mixed_bfloat16")
    eager = module(x, **kwargs)
    if name == "batch_norm_train":
        kwargs = {"is_training": False, "test_local_stats": True}
        eager = module(x, **kwargs)
    fn = tf.function(lambda v: module(v, **kwargs), jit_compile=jit_compile)
    traced = fn(x)
    assert traced.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(traced, tf.float32).numpy(),
        tf.cast(eager, tf.float32).numpy(),
        rtol=2e-2,
        atol=2e-2,
    )


def test_first_call_inside_tf_function():
    mlp = snt.precision.apply(snt.nets.MLP([8, 3]), "mixed_bfloat16")
    fn = tf.function(mlp)
    assert fn(tf.ones([2, 5])).dtype == tf.bfloat16
    assert {v.dtype for v in mlp.variables} == {tf.float32}


def test_mirrored_strategy_two_replicas():
    # `snt.distribute.Replicator` is a `MirroredStrategy`.
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    strategy = snt.distribute.Replicator(devices)
    with strategy.scope():
        mlp = snt.precision.apply(snt.nets.MLP([8, 3]), "mixed_bfloat16")
        mlp(tf.ones([1, 5]))
        optimizer = snt.optimizers.SGD(0.1)

    @tf.function
    def step(x):
        def replica_step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.cast(mlp(x), tf.float32))
            grads = tape.gradient(loss, mlp.trainable_variables)
            context = tf.distribute.get_replica_context()
            grads = context.all_reduce("mean", grads)
            optimizer.apply(grads, mlp.trainable_variables)
            return loss

        return strategy.run(replica_step, args=(x,))

    before = [v.numpy() for v in mlp.trainable_variables]
    losses = strategy.experimental_local_results(step(tf.ones([2, 5])))
    assert len(losses) == 2
    after = [v.numpy() for v in mlp.trainable_variables]
    assert all(v.dtype == tf.float32 for v in mlp.trainable_variables)
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))


def _ckpt_keys(path: str) -> list[str]:
    return sorted(name for name, _ in tf.train.list_variables(path))


def test_checkpoint_keys_identical_with_and_without_policy(tmp_path):
    plain = snt.nets.MLP([4, 2])
    plain(tf.ones([1, 3]))
    mixed = snt.precision.apply(snt.nets.MLP([4, 2]), "mixed_bfloat16")
    mixed(tf.ones([1, 3]))
    a = tf.train.Checkpoint(module=plain).write(str(tmp_path / "a"))
    b = tf.train.Checkpoint(module=mixed).write(str(tmp_path / "b"))
    assert _ckpt_keys(a) == _ckpt_keys(b)
    assert [v.name for v in plain.variables] == [v.name for v in mixed.variables]
    for name, _ in tf.train.list_variables(b):
        if "VARIABLE_VALUE" in name:
            assert tf.train.load_variable(b, name).dtype == np.float32


def test_checkpoint_round_trip_bf16_to_float32_and_back(tmp_path):
    x = tf.random.normal([4, 3])
    trained = snt.precision.apply(snt.nets.MLP([4, 2]), "mixed_bfloat16")
    trained(x)
    path = tf.train.Checkpoint(module=trained).write(str(tmp_path / "bf16"))
    # A float32 model restores the bf16-trained values...
    restored = snt.nets.MLP([4, 2])
    restored(x)
    tf.train.Checkpoint(module=restored).read(path).assert_consumed()
    for a, b in zip(trained.variables, restored.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_allclose(
        restored(x).numpy(),
        tf.cast(trained(x), tf.float32).numpy(),
        rtol=5e-2,
        atol=5e-2,
    )
    # ... and a bf16 model restores a float32 one (restore-on-create too).
    path = tf.train.Checkpoint(module=restored).write(str(tmp_path / "f32"))
    again = snt.precision.apply(snt.nets.MLP([4, 2]), "mixed_bfloat16")
    status = tf.train.Checkpoint(module=again).read(path)
    again(x)
    status.assert_consumed()
    for a, b in zip(again.variables, restored.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.dtype == tf.float32


def test_saved_model(tmp_path):
    mlp = snt.precision.apply(snt.nets.MLP([4, 2]), "mixed_bfloat16")
    x = tf.random.normal([3, 5])
    serving = tf.Module()
    serving.mlp = mlp
    serving.predict = tf.function(
        lambda v: tf.cast(mlp(v), tf.float32),
        input_signature=[tf.TensorSpec([None, 5])],
    )
    expected = serving.predict(x)
    tf.saved_model.save(serving, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    np.testing.assert_array_equal(loaded.predict(x).numpy(), expected.numpy())


@pytest.mark.parametrize("clone", [copy.copy, copy.deepcopy, pickle.loads])
def test_pickle_and_copy_keep_the_policy(clone):
    linear = snt.precision.apply(snt.Linear(3), "mixed_bfloat16")
    linear(tf.ones([2, 4]))
    if clone is pickle.loads:
        other = pickle.loads(pickle.dumps(linear))
    else:
        other = clone(linear)
    assert other._precision == linear._precision
    assert other(tf.ones([2, 4])).dtype == tf.bfloat16


def test_no_policy_is_the_old_behaviour():
    linear = snt.Linear(3)
    assert linear._precision is None
    assert snt.precision.compute_dtype(linear) is None
    linear(tf.ones([2, 4]))
    assert linear(tf.ones([2, 4])).dtype == tf.float32
    with pytest.raises(TypeError, match="must have dtype float32"):
        linear(tf.ones([2, 4], tf.bfloat16))
    # Without a policy, bf16 inputs make bf16 variables, as in 2.0.2.
    bf16 = snt.Linear(3)
    bf16(tf.ones([2, 4], tf.bfloat16))
    assert bf16.w.dtype == tf.bfloat16


def test_apply_none_removes_the_policy():
    mlp = snt.precision.apply(snt.nets.MLP([4, 2]), "mixed_bfloat16")
    assert mlp(tf.ones([1, 3])).dtype == tf.bfloat16
    assert snt.precision.apply(mlp, None) is mlp
    assert all(m._precision is None for m in (mlp, *mlp.submodules))
    assert mlp(tf.ones([1, 3])).dtype == tf.float32


def test_apply_reaches_every_submodule_and_the_class_default_is_untouched():
    mlp = snt.precision.apply(snt.nets.MLP([4, 2]), "mixed_float16")
    policy = snt.precision.get_policy("mixed_float16")
    assert all(m._precision == policy for m in (mlp, *mlp.submodules))
    assert snt.Linear._precision is None
    assert snt.Linear(2)._precision is None


def test_float16_policy_and_output_dtype():
    policy = snt.precision.Policy(tf.float16, tf.float32, tf.float32)
    linear = snt.precision.apply(snt.Linear(3), policy)
    y = linear(tf.ones([2, 4]))
    assert y.dtype == tf.float32
    assert linear.w.dtype == tf.float32
    fp16 = snt.precision.apply(snt.Conv2D(2, 3), "mixed_float16")
    assert fp16(tf.ones([1, 4, 4, 2])).dtype == tf.float16


def test_float32_policy_casts_float64_inputs():
    linear = snt.precision.apply(snt.Linear(3), "float32")
    assert linear(np.ones([2, 4])).dtype == tf.float32
    assert linear.w.dtype == tf.float32


def test_policy_applied_after_building_keeps_variable_dtypes():
    linear = snt.Linear(3)
    linear(tf.ones([2, 4]))
    snt.precision.apply(linear, "mixed_bfloat16")
    assert linear(tf.ones([2, 4])).dtype == tf.bfloat16
    assert linear.w.dtype == tf.float32


def test_integer_inputs_are_not_cast():
    linear = snt.precision.apply(
        snt.Linear(2, w_init=snt.initializers.Ones()), "mixed_bfloat16"
    )
    y = linear(tf.ones([2, 3], tf.int32))
    assert y.dtype == tf.int32
    assert linear.w.dtype == tf.int32


def test_linear_errors_under_a_policy():
    linear = snt.precision.apply(snt.Linear(2), "mixed_bfloat16")
    linear(tf.ones([2, 3]))
    with pytest.raises(ValueError, match="must have last dimension 3"):
        linear(tf.ones([2, 4]))
    with pytest.raises(TypeError, match="computes in bfloat16 under its"):
        linear(tf.ones([2, 3], tf.int32))
    with pytest.raises(ValueError, match="must have last dimension 3"):
        tf.function(linear)(tf.ones([2, 4]))


def test_bias_errors_and_multiplier_under_a_policy():
    bias = snt.precision.apply(
        snt.Bias(b_init=snt.initializers.Ones()), "mixed_bfloat16"
    )
    y = bias(tf.zeros([2, 3]), multiplier=2.0)
    assert y.dtype == tf.bfloat16
    np.testing.assert_array_equal(tf.cast(y, tf.float32).numpy(), np.full([2, 3], 2))
    with pytest.raises(TypeError, match="computes in bfloat16 under its"):
        bias(tf.ones([2, 3], tf.int32))
    with pytest.raises(TypeError, match="computes in bfloat16 under its"):
        bias(tf.ones([2, 3], tf.int32), multiplier=2)


def test_conv_errors_and_empty_batch_under_a_policy():
    conv = snt.precision.apply(snt.Conv2D(2, 3), "mixed_bfloat16")
    conv(tf.ones([1, 4, 4, 3]))
    with pytest.raises(ValueError, match="must have 3 channels"):
        conv(tf.ones([1, 4, 4, 5]))
    empty = conv(tf.zeros([0, 4, 4, 3]))
    assert empty.shape == [0, 4, 4, 2] and empty.dtype == tf.bfloat16


def test_get_policy():
    assert snt.precision.get_policy("mixed_bfloat16") == snt.precision.Policy(
        tf.bfloat16, tf.float32
    )
    assert snt.precision.get_policy("float32").compute_dtype == tf.float32
    policy = snt.precision.get_policy(snt.precision.Policy("float16", np.float32))
    assert policy == snt.precision.Policy(tf.float16, tf.float32, None)
    assert isinstance(policy.compute_dtype, tf.DType)


def test_get_policy_errors():
    with pytest.raises(ValueError, match="`policy` must be one of 'float32'"):
        snt.precision.get_policy("bfloat16_everything")
    with pytest.raises(TypeError, match="`policy` must be a policy name"):
        snt.precision.get_policy(tf.bfloat16)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`compute_dtype` must be a floating"):
        snt.precision.get_policy(snt.precision.Policy(tf.int32, tf.float32))
    with pytest.raises(TypeError, match="`variable_dtype` must be a floating"):
        snt.precision.get_policy(snt.precision.Policy(tf.float16, "nope"))
    with pytest.raises(ValueError, match="`output_dtype` must be a floating"):
        snt.precision.get_policy(snt.precision.Policy(tf.float16, tf.float32, "int8"))


def test_apply_errors():
    with pytest.raises(TypeError, match="`module` must be an `snt.Module`"):
        snt.precision.apply(tf.Module(), "mixed_bfloat16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`policy` must be one of"):
        snt.precision.apply(snt.Linear(2), "fp8")


def test_helpers():
    linear = snt.precision.apply(snt.Linear(2), "mixed_bfloat16")
    assert snt.precision.compute_dtype(linear) == tf.bfloat16
    assert snt.precision.variable_dtype(linear, tf.bfloat16) == tf.float32
    assert snt.precision.variable_dtype(linear, "int32") == tf.int32
    assert snt.precision.variable_dtype(snt.Linear(2), tf.bfloat16) == tf.bfloat16
    x = tf.ones([2])
    assert snt.precision.cast(x, tf.float32) is x
    assert snt.precision.cast([1.0, 2.0], tf.bfloat16).dtype == tf.bfloat16
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        y = snt.precision.cast(v, tf.bfloat16)
        loss = tf.reduce_sum(tf.cast(y, tf.float32))
    assert tape.gradient(loss, v).dtype == tf.float32


def test_mixed_precision_api_unchanged():
    assert set(snt.mixed_precision.__all__) == {"disable", "enable", "modes", "scope"}


# Dynamic loss scaling.


def _sgd_step(loss_scale, optimizer, w, factor):
    with tf.GradientTape() as tape:
        loss = loss_scale.scale(tf.reduce_sum(w * factor))
    grads = tape.gradient(loss, [w])
    return loss_scale.apply_gradients(optimizer, grads, [w])


def test_loss_scale_finite_step_applies_unscaled_gradients():
    w = tf.Variable([1.0, 2.0])
    loss_scale = snt.precision.DynamicLossScale(initial_scale=1024.0)
    applied = _sgd_step(loss_scale, snt.optimizers.SGD(0.5), w, tf.constant(2.0))
    assert bool(applied)
    np.testing.assert_allclose(w.numpy(), [0.0, 1.0])
    assert float(loss_scale.loss_scale) == 1024.0
    assert int(loss_scale.good_steps) == 1


@pytest.mark.parametrize("in_function", [False, True])
def test_loss_scale_overflow_skips_the_step_and_halves(in_function):
    w = tf.Variable([1.0, 2.0])
    optimizer = snt.optimizers.Adam(0.1)
    loss_scale = snt.precision.DynamicLossScale(initial_scale=16.0)
    step = _sgd_step
    if in_function:
        step = tf.function(_sgd_step)
    assert bool(step(loss_scale, optimizer, w, tf.constant(1.0)))
    before = [v.numpy() for v in (w, *optimizer.variables)]
    assert not bool(step(loss_scale, optimizer, w, tf.constant(np.inf, tf.float32)))
    after = [v.numpy() for v in (w, *optimizer.variables)]
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)
    assert float(loss_scale.loss_scale) == 8.0
    assert int(loss_scale.good_steps) == 0


def test_loss_scale_never_below_one():
    loss_scale = snt.precision.DynamicLossScale(initial_scale=1.0)
    loss_scale.update(False)
    assert float(loss_scale.loss_scale) == 1.0


@pytest.mark.parametrize("in_function", [False, True])
def test_loss_scale_grows_after_the_interval(in_function):
    loss_scale = snt.precision.DynamicLossScale(initial_scale=4.0, growth_interval=3)
    update = tf.function(loss_scale.update) if in_function else loss_scale.update
    for _ in range(2):
        update(tf.constant(True))
    assert float(loss_scale.loss_scale) == 4.0
    update(tf.constant(True))
    assert float(loss_scale.loss_scale) == 8.0
    assert int(loss_scale.good_steps) == 0


def test_loss_scale_unscale_keeps_none_and_indexed_slices():
    loss_scale = snt.precision.DynamicLossScale(initial_scale=4.0)
    sparse = tf.IndexedSlices(tf.constant([[4.0, 8.0]]), tf.constant([1]))
    none, dense, slices = loss_scale.unscale([None, tf.constant([4.0]), sparse])
    assert none is None
    np.testing.assert_array_equal(dense.numpy(), [1.0])
    assert isinstance(slices, tf.IndexedSlices)
    np.testing.assert_array_equal(slices.values.numpy(), [[1.0, 2.0]])
    assert bool(loss_scale.all_finite([None, sparse]))
    assert bool(loss_scale.all_finite([None]))


def test_loss_scale_float16_training_step():
    mlp = snt.precision.apply(snt.nets.MLP([8, 2]), "mixed_float16")
    x = tf.random.normal([4, 3])
    mlp(x)
    optimizer = snt.optimizers.Adam(1e-2)
    loss_scale = snt.precision.DynamicLossScale()

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.cast(mlp(x), tf.float32)))
            scaled = loss_scale.scale(loss)
        grads = tape.gradient(scaled, mlp.trainable_variables)
        loss_scale.apply_gradients(optimizer, grads, mlp.trainable_variables)
        return loss

    first = float(step())
    for _ in range(20):
        last = float(step())
    assert last < first


def test_loss_scale_checkpoint(tmp_path):
    loss_scale = snt.precision.DynamicLossScale(initial_scale=64.0)
    loss_scale.update(False)
    path = tf.train.Checkpoint(ls=loss_scale).write(str(tmp_path / "ls"))
    other = snt.precision.DynamicLossScale()
    tf.train.Checkpoint(ls=other).read(path).assert_consumed()
    assert float(other.loss_scale) == 32.0
    assert [v.name for v in other.variables] == [
        "dynamic_loss_scale/good_steps:0",
        "dynamic_loss_scale/loss_scale:0",
    ]


def test_loss_scale_errors():
    with pytest.raises(ValueError, match="`initial_scale` must be >= 1"):
        snt.precision.DynamicLossScale(initial_scale=0.5)
    with pytest.raises(TypeError, match="`initial_scale` must be a real number"):
        snt.precision.DynamicLossScale(initial_scale="big")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`growth_interval`"):
        snt.precision.DynamicLossScale(growth_interval=0)
    with pytest.raises(ValueError, match="`multiplier` must be a number > 1"):
        snt.precision.DynamicLossScale(multiplier=1.0)
    loss_scale = snt.precision.DynamicLossScale()
    with pytest.raises(TypeError, match="`loss` must be a floating point tensor"):
        loss_scale.scale(tf.constant(3))
    with pytest.raises(TypeError, match="`optimizer` must have an `apply"):
        loss_scale.apply_gradients(object(), [], [])
