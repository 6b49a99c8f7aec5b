"""Tests for `snt.nets.ResNet`, `ResNet50` and `snt.nets.resnet` blocks."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.conformance import bad_input

resnet = snt.nets.resnet
EPS = 1e-5
BN_PATHS = [
    "moving_mean/_counter",
    "moving_mean/_hidden",
    "moving_mean/average",
    "moving_variance/_counter",
    "moving_variance/_hidden",
    "moving_variance/average",
    "offset",
    "scale",
]


def _data(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _randomize(module, seed=1):
    for i, v in enumerate(module.variables):
        if v.dtype.is_floating:
            value = _data(v.shape, seed=seed + i) * 0.5
            if "variance" in v.name:
                value = np.abs(value) + 0.5
            v.assign(value)


def _checkpoint_shapes(module, tmp_path):
    path = tf.train.Checkpoint(module=module).write(str(tmp_path / "ckpt"))
    shapes = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    return {
        k[len("module/") : -len(suffix)]: v
        for k, v in shapes.items()
        if k.startswith("module/") and k.endswith(suffix)
    }


def test_appendix_a_checkpoint_keys(tmp_path):
    """`ResNet([1, 1, 1, 1], 9)` on [1, 8, 8, 3]: the original's 155 keys."""
    net = snt.nets.ResNet([1, 1, 1, 1], 9)
    net(tf.ones([1, 8, 8, 3]), is_training=True)
    assert len(net.variables) == 155
    expected = {
        "_initial_conv/w": [7, 7, 3, 64],
        "_logits/w": [2048, 9],
        "_logits/b": [9],
    }

    def bn(prefix, channels):
        for p in BN_PATHS:
            if p.endswith("_counter"):
                expected[f"{prefix}/{p}"] = []
            elif p in ("offset", "scale"):
                expected[f"{prefix}/{p}"] = [channels]
            else:
                expected[f"{prefix}/{p}"] = [1, 1, 1, channels]

    bn("_initial_batchnorm", 64)
    inputs = 64
    for g, channels in enumerate((256, 512, 1024, 2048)):
        block = f"_block_groups/{g}/_blocks/0"
        kernels = [
            [1, 1, inputs, channels // 4],
            [3, 3, channels // 4, channels // 4],
            [1, 1, channels // 4, channels],
        ]
        for i, kernel in enumerate(kernels):
            expected[f"{block}/_layers/{i}/0/w"] = kernel
            bn(f"{block}/_layers/{i}/1", kernel[-1])
        expected[f"{block}/_proj_conv/w"] = [1, 1, inputs, channels]
        bn(f"{block}/_proj_batchnorm", channels)
        inputs = channels
    assert len(expected) == 155
    assert _checkpoint_shapes(net, tmp_path) == expected


def test_v2_checkpoint_keys(tmp_path):
    net = snt.nets.ResNet(
        [1, 2, 1, 1], 3, resnet_v2=True, channels_per_group_list=(4, 8, 8, 8)
    )
    net(tf.ones([1, 16, 16, 3]), is_training=True)
    keys = set(_checkpoint_shapes(net, tmp_path))
    assert "_initial_conv/w" in keys and "_final_batchnorm/offset" in keys
    assert not any(k.startswith("_initial_batchnorm") for k in keys)
    assert "_block_groups/1/_blocks/1/_conv_2/w" in keys
    assert "_block_groups/1/_blocks/1/_bn_0/moving_mean/average" in keys
    assert "_block_groups/1/_blocks/0/_proj_conv/w" in keys
    assert "_block_groups/1/_blocks/1/_proj_conv/w" not in keys
    assert not any("_proj_batchnorm" in k for k in keys)
    # 1 + 5 blocks * 3 convs + 4 projections, 5 * 3 + 1 batch norms, logits.
    assert len(keys) == 1 + 15 + 4 + 16 * 8 + 2


def test_variable_names():
    net = snt.nets.ResNet([1, 1, 1, 1], 5, channels_per_group_list=(4, 8, 8, 8))
    net(tf.ones([1, 16, 16, 3]), is_training=True)
    names = [v.name for v in net.variables]
    assert names[0] == "res_net/block_group_0/block_0/conv_0/w:0"
    assert "res_net/block_group_0/block_0/batchnorm_0/moving_mean/counter:0" in names
    assert "res_net/block_group_3/block_0/shortcut_conv/w:0" in names
    assert "res_net/block_group_3/block_0/shortcut_batchnorm/scale:0" in names
    assert names[-3:] == [
        "res_net/initial_conv/w:0",
        "res_net/logits/b:0",
        "res_net/logits/w:0",
    ]


def test_resnet50():
    net = snt.nets.ResNet50(num_classes=10)
    assert net.name == "res_net50"
    assert len(net.submodules) == 233
    assert repr(net) == "ResNet50(num_classes=10)"
    assert [len(g._blocks) for g in net._block_groups] == [3, 4, 6, 3]


def test_defaults_and_bn_config():
    net = snt.nets.ResNet([1, 1, 1, 1], 2, channels_per_group_list=(4, 4, 4, 4))
    bns = [m for m in net.submodules if isinstance(m, snt.BatchNorm)]
    assert all(bn.moving_mean._decay == 0.9 and bn._eps == 1e-5 for bn in bns)
    net = snt.nets.ResNet(
        [1, 1, 1, 1],
        2,
        bn_config={"decay_rate": 0.5, "eps": 1e-3, "create_offset": False},
        channels_per_group_list=(4, 4, 4, 4),
    )
    bns = [m for m in net.submodules if isinstance(m, snt.BatchNorm)]
    assert len(bns) == 1 + 4 * 4
    assert all(bn.moving_mean._decay == 0.5 and bn._eps == 1e-3 for bn in bns)
    assert all(not bn._create_offset and bn._create_scale for bn in bns)
    net(tf.ones([1, 8, 8, 3]), is_training=True)
    # The last batch norm of every v1 block starts with zero scale.
    for group in net._block_groups:
        block = group._blocks[0]
        np.testing.assert_array_equal(block._layers[2][1].scale.numpy(), 0)
        np.testing.assert_array_equal(block._layers[0][1].scale.numpy(), 1)
    np.testing.assert_array_equal(net._logits.w.numpy(), 0)


def _bn_ref(x, bn, training):
    if training:
        mean, var = tf.nn.moments(x, [0, 1, 2])
    else:
        mean = tf.reshape(bn.moving_mean.value, [-1])
        var = tf.reshape(bn.moving_variance.value, [-1])
    return (x - mean) / tf.sqrt(var + EPS) * bn.scale + bn.offset


def _conv_ref(x, conv):
    k = conv.w.shape[0]
    pad = [(k - 1) // 2, k // 2]
    x = tf.pad(x, [[0, 0], pad, pad, [0, 0]])
    return tf.nn.conv2d(x, conv.w, conv.stride, "VALID")


def _v1_ref(block, x, training):
    if block._use_projection:
        shortcut = _bn_ref(
            _conv_ref(x, block._proj_conv), block._proj_batchnorm, training
        )
    else:
        shortcut = x
    net = x
    for i, (conv, bn) in enumerate(block._layers):
        net = _bn_ref(_conv_ref(net, conv), bn, training)
        if i < 2:
            net = tf.nn.relu(net)
    return tf.nn.relu(net + shortcut)


def _v2_ref(block, x, training):
    net = tf.nn.relu(_bn_ref(x, block._bn_0, training))
    shortcut = _conv_ref(net, block._proj_conv) if block._use_projection else x
    net = _conv_ref(net, block._conv_0)
    net = _conv_ref(tf.nn.relu(_bn_ref(net, block._bn_1, training)), block._conv_1)
    net = _conv_ref(tf.nn.relu(_bn_ref(net, block._bn_2, training)), block._conv_2)
    return net + shortcut


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("projection", [True, False])
@pytest.mark.parametrize("v2", [False, True])
def test_blocks_match_reference(training, projection, v2):
    cls = resnet.BottleNeckBlockV2 if v2 else resnet.BottleNeckBlockV1
    stride = 2 if projection else 1
    block = cls(channels=8, stride=stride, use_projection=projection, bn_config={})
    x = _data([2, 5, 5, 8])
    block(x, is_training=True)
    _randomize(block)
    expected = (_v2_ref if v2 else _v1_ref)(block, x, training)
    np.testing.assert_allclose(
        block(x, is_training=training), expected, rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("v2", [False, True])
def test_resnet_matches_reference(v2):
    net = snt.nets.ResNet(
        [2, 1, 1, 1], 3, resnet_v2=v2, channels_per_group_list=(4, 8, 8, 12)
    )
    x = _data([2, 17, 17, 3])
    net(x, is_training=True)
    _randomize(net)

    def reference(training):
        h = _conv_ref(x, net._initial_conv)
        if not v2:
            h = tf.nn.relu(_bn_ref(h, net._initial_batchnorm, training))
        h = tf.nn.max_pool2d(h, 3, 2, "SAME")
        for group in net._block_groups:
            for block in group._blocks:
                h = (_v2_ref if v2 else _v1_ref)(block, h, training)
        if v2:
            h = tf.nn.relu(_bn_ref(h, net._final_batchnorm, training))
        return tf.reduce_mean(h, [1, 2]) @ net._logits.w + net._logits.b

    for training in (False, True):
        expected = reference(training)
        np.testing.assert_allclose(
            net(x, is_training=training), expected, rtol=1e-4, atol=1e-4
        )


def test_block_group_strides_and_projection():
    group = resnet.BlockGroup(channels=8, num_blocks=3, stride=2, bn_config={})
    assert [b._stride for b in group._blocks] == [2, 1, 1]
    assert [b._use_projection for b in group._blocks] == [True, False, False]
    assert [b.name for b in group._blocks] == ["block_0", "block_1", "block_2"]
    assert group(tf.ones([1, 6, 6, 4]), is_training=True).shape == (1, 3, 3, 8)
    v2 = resnet.BlockGroup(8, 2, 1, {}, resnet_v2=True)
    assert all(isinstance(b, resnet.BottleNeckBlockV2) for b in v2._blocks)


def test_tensor_flag_matches_python_flag():
    net = snt.nets.ResNet([1, 1, 1, 1], 3, channels_per_group_list=(4, 4, 4, 4))
    x = _data([2, 8, 8, 3])
    net(x, is_training=True)
    _randomize(net)
    f = tf.function(lambda x, t: net(x, is_training=t), autograph=False)
    for training in (False, True):
        before = bad_input.snapshot(net)
        expected = net(x, is_training=training)
        after = bad_input.snapshot(net)
        for v, value in zip(tf.Module.variables.fget(net), before):
            v.assign(value)
        np.testing.assert_allclose(
            f(x, tf.constant(training)), expected, rtol=1e-5, atol=1e-5
        )
        for a, b in zip(bad_input.snapshot(net), after):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# Errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"blocks_per_group_list": [1, 1, 1]},
            ValueError,
            "`blocks_per_group_list` must have length 4",
        ),
        (
            {"channels_per_group_list": (4, 4, 4, 4, 4)},
            ValueError,
            "`channels_per_group_list` must have length 4",
        ),
        ({"blocks_per_group_list": 3}, TypeError, "`blocks_per_group_list` must be"),
        (
            {"blocks_per_group_list": [1, 0, 1, 1]},
            ValueError,
            "`blocks_per_group_list` must contain only integers >= 1",
        ),
        (
            {"channels_per_group_list": (4, 2, 4, 4)},
            ValueError,
            "`channels_per_group_list` must have entries of at least 4",
        ),
        ({"num_classes": -1}, ValueError, "`num_classes` must be a non-negative"),
        ({"bn_config": [("eps", 1)]}, TypeError, "`bn_config` must be a mapping"),
        (
            {"bn_config": {"momentum": 0.9}},
            TypeError,
            r"`bn_config` may only set .*\['momentum'\]",
        ),
        (
            {"bn_config": {"scale_init": snt.initializers.Ones()}},
            ValueError,
            "`bn_config` must not set `scale_init` for a v1 ResNet",
        ),
        ({"resnet_v2": "yes"}, TypeError, "`resnet_v2` must be a bool"),
    ],
)
def test_resnet_constructor_errors(kwargs, error, match):
    args = {
        "blocks_per_group_list": [1, 1, 1, 1],
        "num_classes": 2,
        "channels_per_group_list": (4, 4, 4, 4),
        **kwargs,
    }
    with pytest.raises(error, match=match):
        snt.nets.ResNet(**args)


def test_v2_accepts_scale_init():
    net = snt.nets.ResNet(
        [1, 1, 1, 1],
        2,
        bn_config={"scale_init": snt.initializers.Constant(2.0)},
        resnet_v2=True,
        channels_per_group_list=(4, 4, 4, 4),
    )
    net(tf.ones([1, 8, 8, 3]), is_training=True)
    np.testing.assert_array_equal(net._final_batchnorm.scale.numpy(), 2.0)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"channels": 3}, ValueError, "`channels` must be at least 4"),
        ({"channels": 8.0}, TypeError, "`channels` must be an integer"),
        ({"stride": 0}, ValueError, "`stride` must be a positive"),
        ({"use_projection": "no"}, TypeError, "`use_projection` must be a bool"),
        ({"bn_config": None}, None, None),
        ({"bn_config": 3}, TypeError, "`bn_config` must be a mapping"),
    ],
)
@pytest.mark.parametrize("cls", [resnet.BottleNeckBlockV1, resnet.BottleNeckBlockV2])
def test_block_constructor_errors(cls, kwargs, error, match):
    args = {"channels": 8, "stride": 1, "use_projection": True, "bn_config": {}}
    args.update(kwargs)
    if error is None:
        cls(**args)
    else:
        with pytest.raises(error, match=match):
            cls(**args)


def test_block_group_constructor_errors():
    with pytest.raises(ValueError, match="`num_blocks` must be a positive"):
        resnet.BlockGroup(8, 0, 1, {})
    with pytest.raises(TypeError, match="`resnet_v2` must be a bool"):
        resnet.BlockGroup(8, 1, 1, {}, resnet_v2="no")


def test_call_errors():
    net = snt.nets.ResNet([1, 1, 1, 1], 2, channels_per_group_list=(4, 4, 4, 4))
    with pytest.raises(TypeError, match="`is_training` must be a bool"):
        net(tf.ones([1, 8, 8, 3]), is_training="no")
    net(tf.ones([1, 8, 8, 3]), is_training=True)
    before = bad_input.snapshot(net)
    with pytest.raises(ValueError, match="`inputs`"):
        net(tf.ones([1, 8, 8, 4]), is_training=True)
    bad_input.assert_unchanged(net, before)


@pytest.mark.parametrize("cls", [resnet.BottleNeckBlockV1, resnet.BottleNeckBlockV2])
def test_identity_shortcut_needs_matching_shapes(cls):
    block = cls(channels=8, stride=1, use_projection=False, bn_config={})
    with pytest.raises(ValueError, match="must have 8 channels"):
        block(tf.ones([1, 4, 4, 3]), is_training=True)
    strided = cls(channels=8, stride=2, use_projection=False, bn_config={})
    with pytest.raises(ValueError, match="1x1 spatial size"):
        strided(tf.ones([1, 4, 4, 8]), is_training=True)
    assert strided(tf.ones([1, 1, 1, 8]), is_training=True).shape == (1, 1, 1, 8)
    assert block(tf.ones([1, 4, 4, 8]), is_training=True).shape == (1, 4, 4, 8)


def test_v2_block_checks_rank_before_building():
    block = resnet.BottleNeckBlockV2(8, 1, True, {})
    with pytest.raises(ValueError, match="`inputs` must have rank 4"):
        block(tf.ones([2, 3]), is_training=True)
    assert block(tf.ones([1, 4, 4, 3]), is_training=True).shape == (1, 4, 4, 8)


def test_v1_block_rejects_scale_init():
    with pytest.raises(ValueError, match="must not set `scale_init` for BottleNeck"):
        resnet.BottleNeckBlockV1(8, 1, True, {"scale_init": snt.initializers.Ones()})
    block = resnet.BottleNeckBlockV2(
        8, 1, True, {"scale_init": snt.initializers.Ones()}
    )
    block(tf.ones([1, 4, 4, 3]), is_training=True)
    np.testing.assert_array_equal(block._bn_2.scale.numpy(), 1.0)


def test_zero_channel_inputs_build_nothing():
    block = resnet.BottleNeckBlockV2(8, 1, True, {})
    with pytest.raises(tf.errors.InvalidArgumentError, match="at least one channel"):
        block(tf.ones([2, 4, 4, 0]), is_training=True)
    assert not hasattr(block._bn_0, "scale")  # Nothing was built.
    assert block(tf.ones([2, 4, 4, 3]), is_training=True).shape == [2, 4, 4, 8]


def test_zero_classes_and_unscaled_batch_norms():
    # As the original: zero logits. Without scales the v1 blocks' last batch
    # norm has no scale to start at zero (the original failed: TypeError).
    net = snt.nets.ResNet(
        [1, 1, 1, 1],
        0,
        bn_config={"create_scale": False},
        channels_per_group_list=(4, 4, 4, 4),
    )
    assert net(tf.ones([1, 8, 8, 3]), is_training=False).shape == [1, 0]
