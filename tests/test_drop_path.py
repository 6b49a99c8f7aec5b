"""`snt.drop_path`, `snt.DropPath` and the ResNet blocks' `drop_path_rate`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def test_row_mode_drops_whole_examples_and_scales_the_rest():
    x = tf.random.uniform([2000, 3, 2], 1.0, 2.0, seed=1)
    y = snt.drop_path(x, 0.25, is_training=True, seed=2).numpy()
    kept = np.all(y != 0, axis=(1, 2))
    dropped = np.all(y == 0, axis=(1, 2))
    assert np.all(kept | dropped)  # Each example all or nothing.
    np.testing.assert_allclose(y[kept], x.numpy()[kept] / 0.75, rtol=1e-6)
    # About `1 - rate` of the examples are kept (4 standard deviations).
    assert abs(kept.mean() - 0.75) < 4 * np.sqrt(0.75 * 0.25 / 2000)


def test_batch_mode_drops_the_whole_batch_or_nothing():
    x = tf.ones([8, 4])
    outcomes = set()
    for seed in range(40):
        y = snt.drop_path(x, 0.5, is_training=True, mode="batch", seed=seed).numpy()
        assert np.all(y == 0) or np.all(y == 2.0)
        outcomes.add(float(y[0, 0]))
    assert outcomes == {0.0, 2.0}


def test_identity_when_not_training_or_rate_zero():
    x = tf.random.normal([3, 4])
    assert snt.drop_path(x, 0.5, is_training=False) is x
    assert snt.drop_path(x, 0.0, is_training=True) is x
    drop = snt.DropPath(0.3, mode="batch")
    assert drop(x, is_training=False) is x
    assert repr(drop) == "DropPath(rate=0.3, mode='batch')"


def test_tensor_is_training_decides_at_run_time():
    drop = snt.DropPath(0.5, seed=1)
    x = tf.ones([64, 2])
    step = tf.function(lambda x, training: drop(x, is_training=training))
    np.testing.assert_array_equal(step(x, tf.constant(False)).numpy(), x.numpy())
    y = step(x, tf.constant(True)).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.0 in y
    assert step.experimental_get_tracing_count() == 1


def test_unknown_batch_size_and_gradients():
    drop = snt.DropPath(0.5, seed=3)
    f = tf.function(
        lambda x: drop(x, is_training=True),
        input_signature=[tf.TensorSpec([None, 3])],
    )
    x = tf.ones([16, 3])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    grad = tape.gradient(y, x).numpy()
    np.testing.assert_array_equal(grad, y.numpy())  # d(x * mask / keep)/dx.


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: snt.DropPath(1.0), ValueError, r"`rate` must be in \[0, 1\)"),
        (lambda: snt.DropPath(-0.1), ValueError, r"`rate` must be in \[0, 1\)"),
        (lambda: snt.DropPath("0.5"), TypeError, r"`rate` must be a real number"),
        (lambda: snt.DropPath(0.1, mode="col"), ValueError, r"`mode` must be one of"),
        (lambda: snt.DropPath(0.1, mode=1), TypeError, r"`mode` must be one of"),
        (lambda: snt.DropPath(0.1, seed="a"), TypeError, r"`seed`"),
        (
            lambda: snt.drop_path(tf.ones([2]), 1.5, True),
            ValueError,
            r"`rate` must be in \[0, 1\)",
        ),
        (
            lambda: snt.drop_path(tf.ones([2], tf.int32), 0.5, True),
            TypeError,
            r"`inputs` must be a floating point tensor",
        ),
        (
            lambda: snt.drop_path(tf.constant(1.0), 0.5, True),
            ValueError,
            r"`inputs` must have a known rank >= 1",
        ),
        (
            lambda: snt.drop_path(tf.ones([2]), 0.5, "yes"),
            TypeError,
            r"`is_training` must be a bool",
        ),
    ],
)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------------
# ResNet blocks.


def _small_resnet(**kwargs) -> snt.nets.ResNet:
    return snt.nets.ResNet(
        [1, 2, 1, 1], num_classes=3, channels_per_group_list=(4, 8, 8, 8), **kwargs
    )


def test_resnet_linear_schedule_over_depth():
    net = _small_resnet(drop_path_rate=0.2)
    rates = [b._drop_path_rate for g in net._block_groups for b in g._blocks]
    np.testing.assert_allclose(rates, np.linspace(0.0, 0.2, 5))
    assert snt.nets.resnet.BlockGroup(8, 1, 1, {}, drop_path_rate=0.3)._blocks[
        0
    ]._drop_path_rate == pytest.approx(0.3)


def test_resnet_defaults_unchanged_and_eval_equal():
    tf.random.set_seed(0)
    plain = _small_resnet()
    tf.random.set_seed(0)
    dropping = _small_resnet(drop_path_rate=0.5)
    x = tf.random.normal([2, 16, 16, 3], seed=1)
    expected = plain(x, is_training=False)
    actual = dropping(x, is_training=False)
    assert [v.name for v in plain.variables] == [v.name for v in dropping.variables]
    assert len(plain.submodules) == len(dropping.submodules)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6)
    assert "drop_path_rate" not in repr(plain)
    assert "drop_path_rate=0.5" in repr(dropping)
    assert repr(snt.nets.ResNet50(10)) == "ResNet50(num_classes=10)"


def test_resnet_restores_a_plain_checkpoint(tmp_path):
    plain = _small_resnet()
    x = tf.random.normal([2, 16, 16, 3], seed=1)
    plain(x, is_training=False)
    path = tf.train.Checkpoint(model=plain).write(str(tmp_path / "ckpt"))
    dropping = _small_resnet(drop_path_rate=0.1)
    status = tf.train.Checkpoint(model=dropping).read(path)
    dropping(x, is_training=False)
    status.assert_consumed()


@pytest.mark.parametrize("block", ["BottleNeckBlockV1", "BottleNeckBlockV2"])
def test_block_drops_the_residual_branch(block):
    cls = getattr(snt.nets.resnet, block)
    module = cls(channels=4, stride=1, use_projection=False, bn_config={})
    x = tf.random.normal([64, 2, 2, 4], seed=2)
    module(x, is_training=True)
    dropping = cls(
        channels=4, stride=1, use_projection=False, bn_config={}, drop_path_rate=0.5
    )
    dropping(x, is_training=True)
    for a, b in zip(dropping.variables, module.variables):
        a.assign(b)
    # Non-zero branches: v1's last batch norm starts at zero scale.
    for v in dropping.variables:
        if "batchnorm_2/scale" in v.name:
            v.assign(tf.ones_like(v))
    tf.random.set_seed(4)
    y = dropping(x, is_training=True).numpy()
    shortcut_only = x.numpy() if block == "BottleNeckBlockV2" else np.maximum(x, 0)
    dropped = np.all(np.isclose(y, shortcut_only), axis=(1, 2, 3))
    assert 0 < dropped.sum() < len(dropped)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: _small_resnet(drop_path_rate=1.0), r"`drop_path_rate` must be in"),
        (
            lambda: snt.nets.ResNet50(10, drop_path_rate=-0.5),
            r"`drop_path_rate` must be in",
        ),
        (
            lambda: snt.nets.resnet.BlockGroup(8, 2, 1, {}, drop_path_rate=[0.1]),
            r"`drop_path_rate` must be a rate or a sequence of 2 rates",
        ),
        (
            lambda: snt.nets.resnet.BlockGroup(8, 2, 1, {}, drop_path_rate=[0.1, 2]),
            r"`drop_path_rate` must be in",
        ),
        (
            lambda: snt.nets.resnet.BottleNeckBlockV1(8, 1, True, {}, drop_path_rate=1),
            r"`drop_path_rate` must be in",
        ),
    ],
)
def test_resnet_bad_rates(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# The Transformer ---------------------------------------------------------------


def _transformer(**kwargs) -> snt.nets.Transformer:
    return snt.nets.Transformer(num_layers=3, num_heads=2, model_size=8, **kwargs)


def test_transformer_linear_schedule_over_blocks():
    model = _transformer(drop_path_rate=0.2)
    assert [b.drop_path_rate for b in model.blocks] == [0.0, 0.1, 0.2]
    assert repr(model) == (
        "Transformer(num_layers=3, num_heads=2, model_size=8, drop_path_rate=0.2)"
    )
    assert "drop_path_rate" not in repr(model.blocks[0])
    assert "drop_path_rate=0.1" in repr(model.blocks[1])


def test_transformer_defaults_unchanged_and_eval_equal():
    x = tf.random.stateless_normal([4, 5, 8], seed=[1, 2])
    tf.random.set_seed(3)
    plain = _transformer()
    tf.random.set_seed(3)
    dropping = _transformer(drop_path_rate=0.5)
    plain(x)
    dropping(x)
    assert [v.name for v in plain.variables] == [v.name for v in dropping.variables]
    for a, b in zip(plain.variables, dropping.variables):
        b.assign(a)
    np.testing.assert_array_equal(plain(x).numpy(), dropping(x).numpy())
    assert all(b.drop_path_rate == 0 for b in plain.blocks)


def test_transformer_block_drops_whole_branches_per_example():
    block = snt.nets.TransformerBlock(num_heads=2, model_size=8, drop_path_rate=0.5)
    x = tf.random.stateless_normal([64, 3, 8], seed=[4, 5])
    block(x)
    tf.random.set_seed(6)
    y = block(x, is_training=True).numpy()
    # An example whose two branches were both dropped comes out unchanged.
    unchanged = np.all(np.isclose(y, x.numpy()), axis=(1, 2))
    assert 0 < unchanged.sum() < 64
    # A traced flag decides at run time.
    f = tf.function(lambda t: block(x, is_training=t))
    # (Traced self-attention projects with one fused product: float32 rounding.)
    np.testing.assert_allclose(
        f(tf.constant(False)).numpy(), block(x).numpy(), rtol=1e-5, atol=1e-6
    )


def test_transformer_drop_path_refused_when_stacked_or_out_of_range():
    with pytest.raises(ValueError, match=r"`drop_path_rate` must be 0 with `stacked"):
        _transformer(drop_path_rate=0.1, stacked=True)
    with pytest.raises(ValueError, match=r"`drop_path_rate` must be in \[0, 1\)"):
        _transformer(drop_path_rate=1.0)
    with pytest.raises(ValueError, match=r"`drop_path_rate` must be in \[0, 1\)"):
        snt.nets.TransformerBlock(num_heads=2, model_size=8, drop_path_rate=-0.1)


def test_surgery_on_a_transformer_reaches_its_loop():
    model = _transformer(remat=True)
    x = tf.random.stateless_normal([2, 3, 8], seed=[7, 8])
    model(x)
    identity = snt.Sequential([lambda h, **_: h], name="block_1")
    snt.surgery.set(model, "blocks/1", identity)
    assert model._block_tuple[1] is identity
    expected = model.final_norm(model.blocks[2](model.blocks[0](x)))
    np.testing.assert_allclose(model(x).numpy(), expected.numpy(), atol=1e-6)
