"""Group normalization: `snt.GroupNorm`."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, errors, initializers, precision, utils
from sonnet._src.axis_norm import AxisLike, check_axis, resolve_axis
from sonnet._src.norm_params import NormParams, as_inputs
from sonnet._src.once import once


def _groups(value: Any) -> int:
    """`groups`: a positive integer, also as a whole float (as the original's
    shape arithmetic took it); zero divided the channels by zero there."""
    groups = checks.whole_size("groups", value, allow_zero=True)
    if groups == 0:
        raise errors.invalid_argument_zero("groups", "must be a positive integer", 0)
    return groups


class GroupNorm(NormParams, base.Module):
    """Normalizes groups of channels (Wu & He, 2018).

    The channels are split into `groups` groups of `C // groups` consecutive
    channels; each group is standardized with the mean and variance over
    `axis` (within the group), then every channel is scaled and shifted:
    `(x - mean) / sqrt(var + eps) * scale + offset`. With `groups=1` and the
    default `axis` this is layer normalization over all non-batch axes; with
    `groups=C` it is instance normalization.

    Args:
      groups: Number of channel groups; must divide the number of channels.
      axis: Axes to normalize over (the channel axis stands for "the channels
        of a group"): an int, an iterable of ints or a slice. Default
        `slice(1, None)`: every axis but the batch axis.
      create_scale: Whether to create a trainable per-channel `scale`.
        Default True. If False, `scale` may be passed at call time.
      create_offset: Whether to create a trainable per-channel `offset`.
        Default True. If False, `offset` may be passed at call time.
      eps: Added to the variance for numerical stability. Default 1e-5.
      scale_init: Initializer for `scale`; default `Ones()`.
      offset_init: Initializer for `offset`; default `Zeros()`.
      data_format: `"channels_last"` (default) or `"channels_first"` (or e.g.
        "NCHW").
      name: Module name.

    Inputs have rank >= 2 and statically known channels; the output has the
    same shape. `scale`/`offset` are `[C]` (channels-first: `[C, 1, ..., 1]`).

    >>> gn = snt.GroupNorm(groups=2)
    >>> gn(tf.random.normal([3, 5, 5, 4])).shape
    TensorShape([3, 5, 5, 4])
    """

    def __init__(
        self,
        groups: int,
        axis: AxisLike = slice(1, None),
        create_scale: bool = True,
        create_offset: bool = True,
        eps: float = 1e-5,
        scale_init: initializers.Initializer | None = None,
        offset_init: initializers.Initializer | None = None,
        data_format: str = "channels_last",
        name: str | None = None,
    ):
        super().__init__(name=name)
        self._groups = _groups(groups)
        self._axis = check_axis(axis)
        self.check_common(
            create_scale, create_offset, eps, scale_init, offset_init, data_format
        )

    @once
    def _initialize(self, inputs: tf.Tensor) -> None:
        self.build_params(inputs)
        rank, channels, groups = self._rank, self._channels, self._groups
        if channels is None:
            raise errors.bad_value(
                "inputs", "must have a statically known number of channels", inputs
            )
        if channels % groups:
            raise errors.bad_value(
                "inputs",
                f"must have a number of channels divisible by `groups` ({groups})",
                inputs,
            )
        axis = resolve_axis(self._axis, rank)
        # The inputs are viewed with one more axis: channels split into
        # [groups, channels // groups]. Normalized axes move accordingly; the
        # channel axis means "within a group".
        self._split = (groups, channels // groups)
        if self._channel_axis == rank - 1:
            self._group_axis = tuple(rank if a == rank - 1 else a for a in axis)
        else:
            self._group_axis = tuple(a if a == 0 else a + 1 for a in axis)
        self.create_params(self._params_shape, self._dtype)

    def _grouped_shape(self, inputs: tf.Tensor) -> list[Any] | tf.Tensor:
        dims = inputs.shape.as_list()
        if self._channel_axis == self._rank - 1:
            spatial = dims[1:-1]
            if None in spatial:
                shape = tf.shape(inputs)
                return tf.concat([[-1], shape[1:-1], self._split], 0)
            return [-1, *spatial, *self._split]
        spatial = dims[2:]
        if None in spatial:
            shape = tf.shape(inputs)
            return tf.concat([[-1], self._split, shape[2:]], 0)
        return [-1, *self._split, *spatial]

    @utils.no_autograph
    def __call__(
        self,
        inputs: tf.Tensor,
        scale: tf.Tensor | None = None,
        offset: tf.Tensor | None = None,
    ) -> tf.Tensor:
        """Normalizes `inputs` per group of channels.

        Args:
          inputs: A float tensor of rank >= 2.
          scale: Only if `create_scale=False`: a tensor broadcastable to the
            parameter shape, used as the scale.
          offset: Only if `create_offset=False`: as `scale`, for the offset.

        Returns:
          A tensor of the same shape and dtype as `inputs` (under a
          `snt.precision` policy: its compute or output dtype; the
          statistics and the normalization are then computed in its
          variable dtype, float32).
        """
        if scale is not None or offset is not None:
            self.check_params(scale, offset)
        inputs = as_inputs(inputs)
        policy = self._precision
        if policy is not None:
            inputs = precision.cast(inputs, policy.variable_dtype)
        self.initialize_and_check(inputs)
        if scale is None:
            scale = self.scale
        if offset is None:
            offset = self.offset
        grouped = tf.reshape(inputs, self._grouped_shape(inputs))
        mean, variance = tf.nn.moments(grouped, self._group_axis, keepdims=True)
        normalized = tf.nn.batch_normalization(
            grouped,
            mean,
            variance,
            None,  # pyright: ignore[reportArgumentType]
            None,  # pyright: ignore[reportArgumentType]
            self._eps,
        )
        outputs = tf.reshape(normalized, tf.shape(inputs))
        if scale is not None:
            outputs *= scale
        if offset is not None:
            outputs += offset
        if policy is not None:
            outputs = precision.cast(outputs, policy.compute_dtype)
            return precision.cast_outputs(policy, outputs)
        return outputs
