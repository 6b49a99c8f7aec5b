"""A convolutional network for CIFAR-10-sized images: `snt.nets.Cifar10ConvNet`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import (
    base,
    batch_norm,
    checks,
    conv,
    errors,
    initializers,
    linear,
    utils,
)

_DEFAULT_CHANNELS = (64, 64, 128, 128, 128, 256, 256, 256, 512, 512, 512)
_DEFAULT_STRIDES = (1, 1, 2, 1, 1, 2, 1, 1, 2, 1, 1)


class Cifar10ConvNet(base.Module):
    """Stack of 3x3 convolutions with batch norm and ReLU, then pooled logits.

    Each layer `i` is `relu(batch_norm(conv_i(x)))`, with a 3x3 `snt.Conv2D`
    of `output_channels[i]` channels and stride `strides[i]`, and an
    `snt.BatchNorm(create_scale=False, create_offset=True, decay_rate=0.999)`.
    The last activation is averaged over axes 1 and 2 and fed to an
    `snt.Linear(num_classes)` named `logits`.

    Args:
      num_classes: Number of logits. Default 10 (CIFAR-10).
      w_init: Initializer for the conv and linear weights (default: theirs).
      b_init: Initializer for their biases (default zeros).
      data_format: "NHWC" (default) or "NCHW". Note: the final average is
        always over axes 1 and 2, as in Sonnet 2 (for "NCHW" that is channels
        and height, which also fixes the logits' input size; kept so that
        checkpoints stay compatible).
      output_channels: Channels of each conv layer. Default: 11 layers from
        64 to 512 channels.
      strides: Stride of each conv layer; same length as `output_channels`.
      name: Module name.

    >>> net = snt.nets.Cifar10ConvNet(output_channels=(4, 8), strides=(1, 2))
    >>> out = net(tf.random.normal([2, 8, 8, 3]), is_training=True)
    >>> out["logits"].shape, len(out["activations"])
    (TensorShape([2, 10]), 3)
    """

    def __init__(
        self,
        num_classes: int = 10,
        w_init: initializers.Initializer | None = None,
        b_init: initializers.Initializer | None = None,
        data_format: str = "NHWC",
        output_channels: Sequence[int] = _DEFAULT_CHANNELS,
        strides: Sequence[int] = _DEFAULT_STRIDES,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self._num_classes = checks.size("num_classes", num_classes)
        output_channels = checks.integers("output_channels", output_channels, minimum=1)
        strides = checks.integers("strides", strides, minimum=1)
        if len(output_channels) != len(strides):
            raise errors.bad_value(
                "strides",
                f"must have the length of `output_channels` ({len(output_channels)})",
                strides,
            )
        self._data_format = data_format
        self._output_channels = output_channels
        self._strides = strides
        self._num_layers = len(output_channels)
        self._kernel_shapes = [[3, 3]] * self._num_layers
        self._w_init = w_init
        self._b_init = b_init
        self._conv_modules = [
            conv.Conv2D(
                output_channels=output_channels[i],
                kernel_shape=[3, 3],
                stride=strides[i],
                w_init=w_init,
                b_init=b_init,
                data_format=data_format,
                name=f"conv_2d_{i}",
            )
            for i in range(self._num_layers)
        ]
        self._bn_modules = [
            batch_norm.BatchNorm(
                create_offset=True,
                create_scale=False,
                decay_rate=0.999,
                data_format=data_format,
                name=f"batch_norm_{i}",
            )
            for i in range(self._num_layers)
        ]
        self._logits_module = linear.Linear(
            self._num_classes, w_init=w_init, b_init=b_init, name="logits"
        )

    @utils.no_autograph
    def __call__(
        self,
        inputs: tf.Tensor,
        is_training: bool | tf.Tensor,
        test_local_stats: bool | tf.Tensor = True,
    ) -> dict[str, Any]:
        """Runs the network.

        Args:
          inputs: Images `[B, H, W, C]` (or `[B, C, H, W]` for "NCHW").
          is_training: Bool or scalar bool tensor, passed to every batch norm
            (batch statistics and moving-average updates).
          test_local_stats: Whether batch norm uses batch statistics when not
            training. Default True.

        Returns:
          A dict with `logits` (`[B, num_classes]`) and `activations` (the
          output of every layer, then the pooled features: a list of
          `num_layers + 1` tensors).
        """
        is_training = checks.mode_flag("is_training", is_training)
        test_local_stats = checks.mode_flag("test_local_stats", test_local_stats)
        activations = []
        net = inputs
        for conv_module, bn in zip(self._conv_modules, self._bn_modules):
            net = conv_module(net)
            net = bn(net, is_training=is_training, test_local_stats=test_local_stats)
            net = tf.nn.relu(net)
            activations.append(net)
        flat = tf.reduce_mean(net, axis=[1, 2])
        activations.append(flat)
        logits = self._logits_module(flat)
        return {"logits": logits, "activations": activations}
