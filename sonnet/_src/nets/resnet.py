"""Residual networks (He et al., 2015/2016): `snt.nets.ResNet`, `ResNet50`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import (
    base,
    batch_norm,
    checks,
    conv,
    drop_path,
    errors,
    initializers,
    linear,
    pad,
    utils,
)

# Keyword arguments of `snt.BatchNorm` that `bn_config` may set.
_BN_KEYS = frozenset(
    {"create_scale", "create_offset", "decay_rate", "eps", "scale_init", "offset_init"}
)


def _check_bn_config(bn_config: Any) -> dict[str, Any]:
    """Validates `bn_config` and fills in the blocks' defaults."""
    if bn_config is None:
        bn_config = {}
    if not isinstance(bn_config, Mapping):
        raise errors.bad_type(
            "bn_config", "must be a mapping of snt.BatchNorm arguments", bn_config
        )
    unknown = sorted(str(k) for k in bn_config if k not in _BN_KEYS)
    if unknown:
        # The original passed them on: `BatchNorm()` raised a TypeError.
        raise errors.bad_type(
            "bn_config",
            f"may only set the snt.BatchNorm arguments {sorted(_BN_KEYS)}, "
            f"not {unknown}",
            bn_config,
        )
    return {"create_scale": True, "create_offset": True, **bn_config}


def _conv(channels: int, kernel: int, stride: int, name: str) -> conv.Conv2D:
    return conv.Conv2D(
        output_channels=channels,
        kernel_shape=kernel,
        stride=stride,
        with_bias=False,
        padding=pad.same,
        name=name,
    )


def _check_channels(channels: Any) -> int:
    channels = checks.size("channels", channels)
    if channels < 4:
        # The bottleneck convolutions have `channels // 4` channels.
        raise errors.bad_value("channels", "must be at least 4", channels)
    return channels


def _check_stride(stride: Any) -> int:
    return checks.size("stride", stride)


def _check_identity_shortcut(block: Any, inputs: tf.Tensor) -> None:
    """Without a projection, the output must have the input's shape."""
    shape = inputs.shape
    if shape.rank != 4:
        return
    channels = shape[-1]
    same_size = block._stride == 1 or all(d == 1 for d in shape[1:3])
    if (channels is not None and channels != block._channels) or not same_size:
        raise errors.bad_value(
            "inputs",
            f"must have {block._channels} channels (and, unless `stride` is 1, "
            "1x1 spatial size) for a block with `use_projection=False`",
            inputs,
        )


class _BottleNeckBlock(base.Module):
    """The constructor of both bottleneck blocks: checks, then `_build`."""

    def __init__(
        self,
        channels: int,
        stride: int | Sequence[int],
        use_projection: bool,
        bn_config: Mapping[str, Any],
        name: str | None = None,
        *,
        drop_path_rate: float = 0.0,
    ):
        super().__init__(name=name)
        self._channels = _check_channels(channels)
        self._stride = _check_stride(stride)
        self._use_projection = checks.flag("use_projection", use_projection)
        self._bn_config = _check_bn_config(bn_config)
        self._drop_path_rate = drop_path.check_rate("drop_path_rate", drop_path_rate)
        self._build(self._channels, bn_config)

    @base.no_name_scope
    def _drop_path(self, net: tf.Tensor, is_training: bool | tf.Tensor) -> tf.Tensor:
        """The residual branch `net`, dropped per example while training
        with probability `drop_path_rate` (`snt.drop_path`)."""
        if not self._drop_path_rate:
            return net
        return drop_path.drop_path(net, self._drop_path_rate, is_training)

    def _build(self, channels: int, bn_config: Any) -> None:
        """Creates the block's submodules (each block defines it)."""


class BottleNeckBlockV1(_BottleNeckBlock):
    """Bottleneck residual block, post-activation (ResNet v1).

    `relu(shortcut + bn(conv1x1(relu(bn(conv3x3(relu(bn(conv1x1(x)))))))))`
    with `channels // 4` channels in the first two convolutions and
    `channels` in the last; the 3x3 convolution has the block's `stride`.
    The shortcut is `x`, or `bn(conv1x1(x))` with stride `stride` when
    `use_projection`. The last batch norm starts with zero scale, so the
    block starts as (a projection of) the identity.

    Args:
      channels: Output channels (at least 4).
      stride: Stride of the 3x3 and projection convolutions.
      use_projection: Whether the shortcut is a projection (needed when the
        stride or the number of channels change).
      bn_config: Extra `snt.BatchNorm` arguments (e.g. `decay_rate`, `eps`);
        `create_scale`/`create_offset` default to True.
      name: Module name.
      drop_path_rate: Probability of dropping the residual branch of an
        example while training (stochastic depth, `snt.drop_path`: the
        block then passes the shortcut on). Default 0: never.

    >>> block = snt.nets.resnet.BottleNeckBlockV1(
    ...     channels=8, stride=2, use_projection=True, bn_config={})
    >>> block(tf.ones([1, 4, 4, 3]), is_training=True).shape
    TensorShape([1, 2, 2, 8])
    """

    def _build(self, channels: int, bn_config: Any) -> None:
        if "scale_init" in self._bn_config:
            raise errors.bad_value(
                "bn_config",
                "must not set `scale_init` for BottleNeckBlockV1 (its last "
                "batch norm's scale always starts at zero)",
                bn_config,
            )
        if self._use_projection:
            self._proj_conv = _conv(channels, 1, self._stride, "shortcut_conv")
            self._proj_batchnorm = batch_norm.BatchNorm(
                name="shortcut_batchnorm", **self._bn_config
            )
        specs = (
            (channels // 4, 1, 1),
            (channels // 4, 3, self._stride),
            (channels, 1, 1),
        )
        self._layers = []
        for i, (out, kernel, stride_i) in enumerate(specs):
            conv_i = _conv(out, kernel, stride_i, f"conv_{i}")
            # The last batch norm's scale starts at zero (if it has one).
            zero_scale = i == 2 and self._bn_config["create_scale"]
            scale_init = initializers.Zeros() if zero_scale else None
            bn_i = batch_norm.BatchNorm(
                name=f"batchnorm_{i}", scale_init=scale_init, **self._bn_config
            )
            self._layers.append([conv_i, bn_i])

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor, is_training: bool | tf.Tensor) -> tf.Tensor:
        """Maps `[B, H, W, C]` inputs to `[B, H', W', channels]` outputs."""
        is_training = checks.mode_flag("is_training", is_training)
        inputs = utils.to_tensor("inputs", inputs)
        if not self._use_projection:
            _check_identity_shortcut(self, inputs)
        if self._use_projection:
            shortcut = self._proj_batchnorm(
                self._proj_conv(inputs), is_training=is_training
            )
        else:
            shortcut = inputs
        net = inputs
        last = len(self._layers) - 1
        for i, (conv_i, bn_i) in enumerate(self._layers):
            net = bn_i(conv_i(net), is_training=is_training)
            if i < last:
                net = tf.nn.relu(net)
        return tf.nn.relu(self._drop_path(net, is_training) + shortcut)


class BottleNeckBlockV2(_BottleNeckBlock):
    """Bottleneck residual block, pre-activation (ResNet v2).

    For `i` in 0..2: `net = conv_i(relu(bn_i(net)))`; the output is `net +
    shortcut` (no final activation). The shortcut is the input, or, when
    `use_projection`, a strided 1x1 convolution of the first pre-activation
    `relu(bn_0(x))`.

    Args:
      channels: Output channels (at least 4).
      stride: Stride of the 3x3 and projection convolutions.
      use_projection: Whether the shortcut is a projection.
      bn_config: Extra `snt.BatchNorm` arguments (e.g. `decay_rate`, `eps`).
      name: Module name.
      drop_path_rate: Probability of dropping the residual branch of an
        example while training (`snt.drop_path`). Default 0: never.

    >>> block = snt.nets.resnet.BottleNeckBlockV2(
    ...     channels=8, stride=1, use_projection=True, bn_config={})
    >>> block(tf.ones([1, 4, 4, 3]), is_training=False).shape
    TensorShape([1, 4, 4, 8])
    """

    def _build(self, channels: int, bn_config: Any) -> None:
        if self._use_projection:
            self._proj_conv = _conv(channels, 1, self._stride, "shortcut_conv")
        self._conv_0 = _conv(channels // 4, 1, 1, "conv_0")
        self._bn_0 = batch_norm.BatchNorm(name="batchnorm_0", **self._bn_config)
        self._conv_1 = _conv(channels // 4, 3, self._stride, "conv_1")
        self._bn_1 = batch_norm.BatchNorm(name="batchnorm_1", **self._bn_config)
        self._conv_2 = _conv(channels, 1, 1, "conv_2")
        self._bn_2 = batch_norm.BatchNorm(name="batchnorm_2", **self._bn_config)

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor, is_training: bool | tf.Tensor) -> tf.Tensor:
        """Maps `[B, H, W, C]` inputs to `[B, H', W', channels]` outputs."""
        is_training = checks.mode_flag("is_training", is_training)
        # The batch norm comes first and accepts any rank: check here so a bad
        # first call cannot build it for the wrong rank.
        inputs = utils.to_tensor("inputs", inputs)
        utils.assert_rank(inputs, 4)
        if inputs.shape[-1] == 0:  # The convolutions would fail after it.
            raise errors.invalid_argument(
                "inputs", "must have at least one channel", inputs
            )
        if not self._use_projection:
            _check_identity_shortcut(self, inputs)
        # Not stored as a list attribute: that would add checkpoint paths.
        net = tf.nn.relu(self._bn_0(inputs, is_training=is_training))
        shortcut = self._proj_conv(net) if self._use_projection else inputs
        net = self._conv_0(net)
        net = self._conv_1(tf.nn.relu(self._bn_1(net, is_training=is_training)))
        net = self._conv_2(tf.nn.relu(self._bn_2(net, is_training=is_training)))
        return self._drop_path(net, is_training) + shortcut


class BlockGroup(base.Module):
    """A group of bottleneck blocks; the first one projects and strides.

    Args:
      channels: Output channels of every block (at least 4).
      num_blocks: Number of blocks.
      stride: Stride of the first block.
      bn_config: Extra `snt.BatchNorm` arguments for every block.
      resnet_v2: Whether to use `BottleNeckBlockV2` (pre-activation) blocks
        instead of `BottleNeckBlockV1`. Default False.
      name: Module name.
      drop_path_rate: The blocks' `drop_path_rate`: one rate for every
        block, or a sequence of `num_blocks` rates. Default 0: no drop path.

    >>> group = snt.nets.resnet.BlockGroup(
    ...     channels=8, num_blocks=2, stride=2, bn_config={})
    >>> group(tf.ones([1, 4, 4, 3]), is_training=True).shape
    TensorShape([1, 2, 2, 8])
    """

    def __init__(
        self,
        channels: int,
        num_blocks: int,
        stride: int | Sequence[int],
        bn_config: Mapping[str, Any],
        resnet_v2: bool = False,
        name: str | None = None,
        *,
        drop_path_rate: float | Sequence[float] = 0.0,
    ):
        super().__init__(name=name)
        channels = _check_channels(channels)
        num_blocks = checks.size("num_blocks", num_blocks)
        stride = _check_stride(stride)
        rates = _check_block_rates(drop_path_rate, num_blocks)
        block = (
            BottleNeckBlockV2
            if checks.flag("resnet_v2", resnet_v2)
            else BottleNeckBlockV1
        )
        self._blocks = [
            block(
                channels=channels,
                stride=stride if i == 0 else 1,
                use_projection=(i == 0),
                bn_config=bn_config,
                name=f"block_{i}",
                drop_path_rate=rates[i],
            )
            for i in range(num_blocks)
        ]

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor, is_training: bool | tf.Tensor) -> tf.Tensor:
        """Applies the blocks in order."""
        is_training = checks.mode_flag("is_training", is_training)
        net = inputs
        for block in self._blocks:
            net = block(net, is_training=is_training)
        return net


def _check_block_rates(rates: Any, num_blocks: int) -> list[float]:
    """`drop_path_rate` of a `BlockGroup`: one rate per block."""
    if isinstance(rates, Sequence) and not isinstance(rates, str):
        if len(rates) != num_blocks:
            raise errors.bad_value(
                "drop_path_rate",
                f"must be a rate or a sequence of {num_blocks} rates (one per block)",
                rates,
            )
        return [drop_path.check_rate("drop_path_rate", r) for r in rates]
    return [drop_path.check_rate("drop_path_rate", rates)] * num_blocks


def _check_four(argument: str, value: Any) -> tuple[int, ...]:
    values = checks.integers(argument, value, minimum=1)
    if len(values) != 4:
        raise errors.bad_value(argument, "must have length 4", value)
    return values


class ResNet(base.Module):
    """Residual network for images (v1: He et al. 2015; v2: He et al. 2016).

    A 7x7 stride-2 convolution with 64 channels (v1: then batch norm and
    ReLU), a 3x3 stride-2 max pool, four `BlockGroup`s (strides 1, 2, 2, 2),
    (v2: a final batch norm and ReLU), a spatial average and a linear layer
    `logits` with zero-initialized weights. All convolutions have no bias and
    "same" padding (padding explicitly, then a VALID convolution).

    Args:
      blocks_per_group_list: Number of blocks in each of the 4 groups.
      num_classes: Number of logits.
      bn_config: Extra `snt.BatchNorm` arguments (`decay_rate`, `eps`,
        `create_scale`, `create_offset`, ...). Defaults: `decay_rate=0.9`,
        `eps=1e-5`, scale and offset created.
      resnet_v2: Whether to build the pre-activation (v2) network. Default
        False.
      channels_per_group_list: Output channels of each of the 4 groups.
        Default (256, 512, 1024, 2048).
      name: Module name.
      drop_path_rate: Stochastic depth (`snt.drop_path`, per example, while
        training): the rate of the last block, with rates rising linearly
        over all blocks from 0 for the first (Huang et al. 2016; timm's
        schedule). Default 0: no drop path.

    Inputs are NHWC images `[B, H, W, C]`; outputs are logits
    `[B, num_classes]`.

    >>> net = snt.nets.ResNet([1, 1, 1, 1], num_classes=5,
    ...                       channels_per_group_list=(4, 8, 8, 8))
    >>> net(tf.ones([2, 16, 16, 3]), is_training=True).shape
    TensorShape([2, 5])
    """

    def __init__(
        self,
        blocks_per_group_list: Sequence[int],
        num_classes: int,
        bn_config: Mapping[str, Any] | None = None,
        resnet_v2: bool = False,
        channels_per_group_list: Sequence[int] = (256, 512, 1024, 2048),
        name: str | None = None,
        *,
        drop_path_rate: float = 0.0,
    ):
        super().__init__(name=name)
        num_classes = checks.size("num_classes", num_classes, allow_zero=True)
        blocks = _check_four("blocks_per_group_list", blocks_per_group_list)
        channels = _check_four("channels_per_group_list", channels_per_group_list)
        for c in channels:
            if c < 4:
                raise errors.bad_value(
                    "channels_per_group_list",
                    "must have entries of at least 4",
                    channels_per_group_list,
                )
        if bn_config is None:
            bn_config = {}
        bn_config = dict(_check_bn_config(bn_config))
        bn_config.setdefault("decay_rate", 0.9)
        bn_config.setdefault("eps", 1e-5)
        if "scale_init" in bn_config and not resnet_v2:
            raise errors.bad_value(
                "bn_config",
                "must not set `scale_init` for a v1 ResNet (the last batch "
                "norm of each block starts with zero scale)",
                bn_config,
            )
        self._bn_config = bn_config
        self._resnet_v2 = checks.flag("resnet_v2", resnet_v2)
        self._blocks_per_group_list = blocks
        self._channels_per_group_list = channels

        rates = drop_path.linear_schedule(
            drop_path.check_rate("drop_path_rate", drop_path_rate), sum(blocks)
        )
        starts = [sum(blocks[:i]) for i in range(4)]
        self._initial_conv = _conv(64, 7, 2, "initial_conv")
        if not self._resnet_v2:
            self._initial_batchnorm = batch_norm.BatchNorm(
                name="initial_batchnorm", **bn_config
            )
        strides = (1, 2, 2, 2)
        self._block_groups = [
            BlockGroup(
                channels=channels[i],
                num_blocks=blocks[i],
                stride=strides[i],
                bn_config=bn_config,
                resnet_v2=self._resnet_v2,
                name=f"block_group_{i}",
                drop_path_rate=rates[starts[i] : starts[i] + blocks[i]],
            )
            for i in range(4)
        ]
        if self._resnet_v2:
            self._final_batchnorm = batch_norm.BatchNorm(
                name="final_batchnorm", **bn_config
            )
        self._logits = linear.Linear(
            output_size=num_classes, w_init=initializers.Zeros(), name="logits"
        )

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor, is_training: bool | tf.Tensor) -> tf.Tensor:
        """Computes logits `[B, num_classes]` for images `inputs` `[B, H, W, C]`."""
        is_training = checks.mode_flag("is_training", is_training)
        net = self._initial_conv(inputs)
        if not self._resnet_v2:
            net = tf.nn.relu(self._initial_batchnorm(net, is_training=is_training))
        net = tf.nn.max_pool2d(net, ksize=3, strides=2, padding="SAME")
        for group in self._block_groups:
            net = group(net, is_training=is_training)
        if self._resnet_v2:
            net = tf.nn.relu(self._final_batchnorm(net, is_training=is_training))
        net = tf.reduce_mean(net, axis=[1, 2])
        return self._logits(net)


class ResNet50(ResNet):
    """ResNet-50: `snt.nets.ResNet` with `[3, 4, 6, 3]` blocks per group.

    Args:
      num_classes: Number of logits.
      bn_config: Extra `snt.BatchNorm` arguments (see `snt.nets.ResNet`).
      resnet_v2: Whether to build the pre-activation (v2) network.
      name: Module name (default "res_net50").
      drop_path_rate: Stochastic depth rate of the last block (see
        `snt.nets.ResNet`). Default 0.

    >>> net = snt.nets.ResNet50(num_classes=10)
    >>> len(net.submodules)
    233
    """

    def __init__(
        self,
        num_classes: int,
        bn_config: Mapping[str, Any] | None = None,
        resnet_v2: bool = False,
        name: str | None = None,
        *,
        drop_path_rate: float = 0.0,
    ):
        super().__init__(
            [3, 4, 6, 3],
            num_classes=num_classes,
            bn_config=bn_config,
            resnet_v2=resnet_v2,
            name=name,
            drop_path_rate=drop_path_rate,
        )
