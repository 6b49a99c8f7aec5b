"""Tests for `snt.nets.Cifar10ConvNet`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.conformance import bad_input


def _data(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def test_default_config_counts():
    net = snt.nets.Cifar10ConvNet()
    assert len(net.submodules) == 45
    out = net(tf.ones([1, 8, 8, 3]), is_training=True)
    assert len(net.variables) == 112
    assert out["logits"].shape == (1, 10)
    assert [a.shape.as_list() for a in out["activations"]][-4:] == [
        [1, 1, 1, 512],
        [1, 1, 1, 512],
        [1, 1, 1, 512],
        [1, 512],
    ]


def test_variable_names_and_order():
    net = snt.nets.Cifar10ConvNet(output_channels=(2, 3), strides=(1, 2), num_classes=4)
    net(tf.ones([2, 6, 6, 3]), is_training=False)
    names = [v.name for v in net.variables]
    bn_vars = [
        "offset",
        "scale",
        "moving_mean/counter",
        "moving_mean/hidden",
        "moving_mean/average",
        "moving_variance/counter",
        "moving_variance/hidden",
        "moving_variance/average",
    ]
    expected = (
        [f"cifar10_conv_net/batch_norm_0/{n}:0" for n in bn_vars]
        + [f"cifar10_conv_net/batch_norm_1/{n}:0" for n in bn_vars]
        + [
            "cifar10_conv_net/conv_2d_0/b:0",
            "cifar10_conv_net/conv_2d_0/w:0",
            "cifar10_conv_net/conv_2d_1/b:0",
            "cifar10_conv_net/conv_2d_1/w:0",
            "cifar10_conv_net/logits/b:0",
            "cifar10_conv_net/logits/w:0",
        ]
    )
    assert names == expected
    trainable = [v.name for v in net.trainable_variables]
    assert "cifar10_conv_net/batch_norm_0/scale:0" not in trainable
    assert "cifar10_conv_net/batch_norm_0/offset:0" in trainable


def _reference(net, x, use_batch_stats):
    """The forward pass from the network's variables with plain TF ops."""
    net_out = x
    for conv, bn, stride in zip(net._conv_modules, net._bn_modules, net._strides):
        net_out = tf.nn.conv2d(net_out, conv.w, stride, "SAME") + conv.b
        if use_batch_stats:
            mean, var = tf.nn.moments(net_out, [0, 1, 2])
        else:
            mean = tf.reshape(bn.moving_mean.value, [-1])
            var = tf.reshape(bn.moving_variance.value, [-1])
        net_out = tf.nn.relu((net_out - mean) / tf.sqrt(var + 1e-5) + bn.offset)
    pooled = tf.reduce_mean(net_out, [1, 2])
    return pooled @ net._logits_module.w + net._logits_module.b


@pytest.mark.parametrize(
    "is_training, test_local_stats", [(True, False), (False, True), (False, False)]
)
def test_forward_matches_reference(is_training, test_local_stats):
    net = snt.nets.Cifar10ConvNet(output_channels=(4, 5, 6), strides=(1, 2, 1))
    x = _data([3, 8, 8, 3])
    net(_data([3, 8, 8, 3], seed=1), is_training=True)  # Non-zero moving stats.
    for v in net.trainable_variables:
        v.assign(_data(v.shape, seed=2) * 0.3)
    expected = _reference(net, x, is_training or test_local_stats)
    out = net(x, is_training=is_training, test_local_stats=test_local_stats)
    np.testing.assert_allclose(out["logits"], expected, rtol=1e-4, atol=1e-4)
    assert len(out["activations"]) == 4


def test_training_updates_statistics_only_when_training():
    net = snt.nets.Cifar10ConvNet(output_channels=(2,), strides=(1,))
    net(tf.ones([1, 4, 4, 3]), is_training=False)
    counter = net._bn_modules[0].moving_mean._counter
    assert int(counter.numpy()) == 0
    net(_data([2, 4, 4, 3]), is_training=True)
    assert int(counter.numpy()) == 1

    @tf.function
    def step(x, training):
        return net(x, is_training=training)["logits"]

    step(_data([2, 4, 4, 3]), tf.constant(False))
    assert int(counter.numpy()) == 1
    step(_data([2, 4, 4, 3]), tf.constant(True))
    assert int(counter.numpy()) == 2


def test_initializers_are_passed_down():
    net = snt.nets.Cifar10ConvNet(
        output_channels=(2,),
        strides=(1,),
        w_init=snt.initializers.Constant(0.5),
        b_init=snt.initializers.Constant(0.25),
    )
    net(tf.ones([1, 4, 4, 3]), is_training=True)
    for module in (net._conv_modules[0], net._logits_module):
        np.testing.assert_array_equal(module.w.numpy(), np.full(module.w.shape, 0.5))
        np.testing.assert_array_equal(module.b.numpy(), np.full(module.b.shape, 0.25))


def test_repr():
    assert repr(snt.nets.Cifar10ConvNet()) == "Cifar10ConvNet()"
    assert repr(snt.nets.Cifar10ConvNet(num_classes=3, strides=[1] * 11)) == (
        "Cifar10ConvNet(num_classes=3, strides=[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])"
    )


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"output_channels": (2, 3), "strides": (1,)},
            ValueError,
            r"`strides` must have the length of `output_channels` \(2\)",
        ),
        (
            {"output_channels": (2, 0), "strides": (1, 1)},
            ValueError,
            "`output_channels` must contain only integers >= 1",
        ),
        ({"output_channels": 3}, TypeError, "`output_channels` must be a sequence"),
        ({"strides": "11"}, TypeError, "`strides` must be a sequence"),
        ({"num_classes": 0}, ValueError, "`num_classes` must be a positive"),
        ({"data_format": "NCDHW"}, ValueError, "`data_format`"),
        ({"w_init": 3}, TypeError, "`w_init`"),
    ],
)
def test_constructor_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        snt.nets.Cifar10ConvNet(**kwargs)


def test_call_errors():
    net = snt.nets.Cifar10ConvNet(output_channels=(2,), strides=(1,))
    with pytest.raises(TypeError, match="`is_training` must be a bool"):
        net(tf.ones([1, 4, 4, 3]), is_training="no")
    net(tf.ones([1, 4, 4, 3]), is_training=True)
    before = bad_input.snapshot(net)
    with pytest.raises(ValueError, match="`inputs`"):
        net(tf.ones([1, 4, 4, 4]), is_training=True)
    bad_input.assert_unchanged(net, before)
