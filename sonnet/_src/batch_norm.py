"""Batch normalization: `snt.BaseBatchNorm` and `snt.BatchNorm`."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    errors,
    initializers,
    metrics,
    moving_averages,
    precision,
    utils,
)
from sonnet._src.norm_params import NormParams, as_inputs, params_shape
from sonnet._src.once import once

# Inputs the fused kernel accepts (`FusedBatchNormV3` has T in {half, bfloat16,
# float} but needs float32 scale/offset/statistics, which our variables only
# are for float32 inputs).
_FUSED_DTYPES = (tf.float32,)


def _check_real_eps(eps: Any) -> Any:
    """`eps`: any real number but NaN (as a Python float), or a variable."""
    if isinstance(eps, (str, bytes)):
        # The original's ops failed on it (`TypeError` or, unfused,
        # `InvalidArgumentError`).
        raise errors.invalid_argument_type("eps", "must be a real number", eps)
    if eps is None:
        raise errors.bad_value("eps", "must be a real number", eps)
    eps = checks.tf_real("eps", eps)
    if isinstance(eps, tf.Tensor):
        static = tf.get_static_value(eps)
        if static is None:
            raise errors.bad_value(
                "eps", "must have a value known before the call", eps
            )
        eps = checks.real("eps", static)
    return eps


def _reads_shape_only(metric: Any) -> bool:
    """Whether `metric.initialize(x)` only uses the shape and dtype of `x`.

    The built-in metrics start from zeros; they are given zeros made outside
    the traced graph, so that their variables are created eagerly. Others
    (users' own) get the first batch's moments, as in the original.
    """
    return getattr(type(metric), "initialize", None) in _SHAPE_ONLY_INITIALIZE


_SHAPE_ONLY_INITIALIZE = (
    moving_averages.ExponentialMovingAverage.initialize,
    metrics.Mean.initialize,
    metrics.Sum.initialize,
)


def _empty_float32() -> tf.Tensor:
    # The fused kernel ignores its mean/variance inputs in training mode; they
    # must be empty. Built per trace in graphs, cached once when eager.
    if not tf.executing_eagerly():
        return tf.constant([], tf.float32)
    global _EMPTY
    if _EMPTY is None:
        _EMPTY = tf.constant([], tf.float32)
    return _EMPTY


_EMPTY: tf.Tensor | None = None


class BaseBatchNorm(NormParams, base.Module):
    """Normalizes inputs per channel with batch or moving statistics.

    The output is `(x - mean) / sqrt(variance + eps) * scale + offset`, where
    `mean` and `variance` are taken over every axis except the channel axis,
    either from the current batch (in training, or when `test_local_stats`) or
    from the `moving_mean`/`moving_variance` statistics (at test time). In
    training the statistics are updated with the batch moments.

    `scale` and `offset` variables are always created (so checkpoints have the
    same structure whatever the flags); `create_scale=False` makes `scale` a
    non-trainable vector of ones (or of `scale_init`'s values) and lets a
    `scale` be passed at call time instead (likewise for `offset`).

    Where it gives the same numbers, the fused kernel (`FusedBatchNormV3`,
    one op forward and one backward) is used: float32 inputs with the channels
    last (any rank, viewed as 4-D) or rank-4 channels-first inputs, with the
    module's own `scale` and `offset`. Other inputs use `tf.nn.moments` and
    `tf.nn.batch_normalization`.

    Subclasses may change how batch moments are computed by overriding
    `_batch_moments` and setting the class attribute `_use_fused_kernel =
    False` (e.g. cross-replica statistics).

    Args:
      create_scale: Whether `scale` is a trainable variable. If False a
        `scale` may be passed at call time.
      create_offset: Whether `offset` is a trainable variable. If False an
        `offset` may be passed at call time.
      moving_mean: An `snt.Metric`-like object that tracks the mean, e.g.
        `snt.ExponentialMovingAverage`: the first call passes the first
        batch's mean to `initialize(x)`, each training call passes the batch
        mean to `update(x)`, and test calls read `value` (all with the
        statistics' shape below).
      moving_variance: As `moving_mean`, for the variance.
      eps: Added to the variance for numerical stability: a real number
        (Python, NumPy, a scalar tensor or variable). Default 1e-5.
      scale_init: Initializer for `scale`; default `Ones()` (identity).
      offset_init: Initializer for `offset`; default `Zeros()`.
      data_format: Where the channels are: `"channels_last"` (default, also
        "NHWC", "NWC", ...) or `"channels_first"` (also "NCHW", ...).
      name: Module name.

    Inputs are `[N, ..., C]` (or `[N, C, ...]` channels-first; rank >= 2),
    or `[C]`; outputs have the same shape. Statistics have the "keepdims" shape, e.g.
    `[1, 1, 1, C]` for `[N, H, W, C]` inputs; `scale`/`offset` are `[C]`
    (channels-first: `[C, 1, ..., 1]`).

    >>> bn = snt.BaseBatchNorm(
    ...     True, True, snt.ExponentialMovingAverage(0.9),
    ...     snt.ExponentialMovingAverage(0.9))
    >>> bn(tf.ones([2, 3]), is_training=True).shape
    TensorShape([2, 3])
    """

    _use_fused_kernel: bool = True
    _always_create_params = True
    scale: tf.Variable
    offset: tf.Variable
    _check_eps = staticmethod(_check_real_eps)
    # The original's ops failed on inputs unlike the first call's.
    _bad_input = staticmethod(errors.invalid_argument)
    _bad_input_type = staticmethod(errors.invalid_argument_type)

    def __init__(
        self,
        create_scale: bool,
        create_offset: bool,
        moving_mean: Any,
        moving_variance: Any,
        eps: float = 1e-5,
        scale_init: initializers.Initializer | None = None,
        offset_init: initializers.Initializer | None = None,
        data_format: str = "channels_last",
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.check_common(
            create_scale, create_offset, eps, scale_init, offset_init, data_format
        )
        self.moving_mean = moving_mean
        self.moving_variance = moving_variance

    @utils.no_autograph
    def __call__(
        self,
        inputs: tf.Tensor,
        is_training: bool | tf.Tensor,
        test_local_stats: bool | tf.Tensor = False,
        scale: tf.Tensor | None = None,
        offset: tf.Tensor | None = None,
    ) -> tf.Tensor:
        """Normalizes `inputs`.

        Args:
          inputs: A float tensor `[N, ..., C]` (or channels-first), rank >= 2.
          is_training: Python bool or scalar bool tensor. If true, batch
            statistics are used and the moving statistics updated.
          test_local_stats: If true (and not training), batch statistics are
            used without updating the moving statistics.
          scale: Only if `create_scale=False`: a scale broadcastable to the
            parameter shape. Default: the (non-trainable) `scale` variable.
          offset: Only if `create_offset=False`: as `scale`, for the offset.

        Returns:
          A tensor of the same shape and dtype as `inputs` (under a
          `snt.precision` policy: its compute or output dtype; the
          statistics and the normalization are then computed in its
          variable dtype, float32).
        """
        policy = self._precision
        if policy is None:
            return self._normalize(inputs, is_training, test_local_stats, scale, offset)
        if not isinstance(inputs, (tf.Tensor, tf.Variable)):
            inputs = as_inputs(inputs)
        y = self._normalize(
            precision.cast(inputs, policy.variable_dtype),
            is_training,
            test_local_stats,
            scale,
            offset,
        )
        return precision.cast_outputs(policy, precision.cast(y, policy.compute_dtype))

    @base.no_name_scope
    def _normalize(
        self,
        inputs: tf.Tensor,
        is_training: bool | tf.Tensor,
        test_local_stats: bool | tf.Tensor,
        scale: tf.Tensor | None,
        offset: tf.Tensor | None,
    ) -> tf.Tensor:
        # The call, in the inputs' dtype (under the caller's name scope).
        if scale is not None or offset is not None:
            self.check_params(scale, offset)
        training = checks.mode_flag("is_training", is_training)
        if test_local_stats is None:
            # The original handed None to the fused kernel, whose default
            # (batch statistics) it then used.
            test_local_stats = True
        local_stats = checks.mode_flag("test_local_stats", test_local_stats)
        if not isinstance(inputs, (tf.Tensor, tf.Variable)):
            inputs = as_inputs(inputs)
        self.initialize_and_check(inputs)
        fused = self._fused and scale is None and offset is None
        if scale is not None:
            scale = self._given_parameter("scale", scale)
        if offset is not None:
            offset = self._given_parameter("offset", offset)
        if fused and self._fused_format == "NCHW":
            # The kernel wants [C] parameters; ours are [C, 1, 1].
            scale = tf.reshape(self.scale, (self._channels,))
            offset = tf.reshape(self.offset, (self._channels,))
        if scale is None:
            scale = self.scale
        if offset is None:
            offset = self.offset

        if training is True or local_stats is True:
            return self._with_batch_stats(inputs, scale, offset, fused, training)
        if training is False and local_stats is False:
            return self._with_moving_stats(inputs, scale, offset, fused)
        # A flag is a tensor (while tracing): choose the branch in the graph.
        if training is False:
            use_batch_stats = local_stats
        elif local_stats is False:
            use_batch_stats = training
        else:
            use_batch_stats = tf.logical_or(training, local_stats)
        return tf.cond(
            use_batch_stats,
            lambda: self._with_batch_stats(inputs, scale, offset, fused, training),
            lambda: self._with_moving_stats(inputs, scale, offset, fused),
        )

    def _given_parameter(self, argument: str, value: Any) -> tf.Tensor:
        """A `scale`/`offset` passed at call time, in the inputs' dtype."""
        try:
            return tf.convert_to_tensor(value, dtype=self._dtype)
        except (TypeError, ValueError) as e:
            raise errors.invalid_argument(
                argument, f"must be convertible to a {self._dtype.name} tensor", value
            ) from e

    @once
    def _initialize(self, inputs: tf.Tensor) -> None:
        """Checks the first inputs, then creates the statistics and
        parameters and chooses the kernel."""
        rank, channel_axis, channels = self._check_first_inputs(inputs)
        self._rank = rank
        self._channel_axis = channel_axis
        self._channels = channels
        self._dtype = inputs.dtype
        self._axis = tuple(i for i in range(rank) if i != channel_axis)
        stats_shape = [channels if i == channel_axis else 1 for i in range(rank)]
        self._initialize_statistics(inputs, stats_shape)
        self.shape = tf.TensorShape(stats_shape)
        self._stats_shape = tuple(stats_shape)
        self.create_params(params_shape(rank, channel_axis, channels), inputs.dtype)
        self._choose_kernel(inputs.dtype, rank, channels, channel_axis == rank - 1)

    @base.no_name_scope  # Called inside `_initialize`'s scope.
    def _check_first_inputs(self, inputs: tf.Tensor) -> tuple[int, int, int]:
        """The first inputs' rank, channel axis and number of channels, checked."""
        shape = inputs.shape
        rank = shape.rank
        min_rank = 1 if self._channel_index == -1 else 2
        expected = (
            f"must have a known rank >= {min_rank} (the channels"
            f"{'' if min_rank == 1 else ' after the batch'})"
        )
        if rank is None:
            raise errors.bad_value("inputs", expected, inputs)
        if rank < min_rank:
            # The original indexed the shape past its end.
            raise errors.invalid_argument_index("inputs", expected, inputs)
        if not inputs.dtype.is_floating:
            raise errors.invalid_argument_type(
                "inputs", "must have a floating point dtype", inputs
            )
        channel_axis = rank - 1 if self._channel_index == -1 else 1
        channels = shape[channel_axis]
        if channels is None:
            raise errors.bad_value(
                "inputs", "must have a statically known number of channels", inputs
            )
        return rank, channel_axis, channels

    @base.no_name_scope  # Called inside `_initialize`'s scope.
    def _initialize_statistics(self, inputs: tf.Tensor, stats_shape: list[int]) -> None:
        """Initializes the moving statistics' metrics (`stats_shape`)."""
        # The statistics have the input's shape with every axis but the
        # channels reduced to 1. As in the original, the moving statistics are
        # initialized with the first batch's moments (a user's metric may
        # start from them), or, for the built-in metrics, which only take the
        # shape and dtype, with zeros made outside any traced graph.
        for argument, metric in (
            ("moving_mean", self.moving_mean),
            ("moving_variance", self.moving_variance),
        ):
            if not callable(getattr(metric, "initialize", None)):
                raise errors.lacks_attribute(
                    argument,
                    "must be a metric with `initialize`, `update` and `value` "
                    "(e.g. snt.ExponentialMovingAverage)",
                    metric,
                )
        if _reads_shape_only(self.moving_mean) and _reads_shape_only(
            self.moving_variance
        ):
            mean = variance = metrics.zeros_like(
                tf.TensorSpec(stats_shape, inputs.dtype)
            )
        else:
            mean, variance = tf.nn.moments(inputs, self._axis, keepdims=True)
            # An empty batch has no moments (NaN): the metrics start from zeros.
            num_elements = inputs.shape.num_elements()
            if num_elements == 0:
                mean, variance = tf.zeros_like(mean), tf.zeros_like(variance)
            elif num_elements is None:
                not_empty = tf.size(inputs) > 0
                mean = tf.where(not_empty, mean, tf.zeros_like(mean))
                variance = tf.where(not_empty, variance, tf.zeros_like(variance))
        self.moving_mean.initialize(mean)
        self.moving_variance.initialize(variance)

    @base.no_name_scope  # Called inside `_initialize`'s scope.
    def _choose_kernel(
        self, dtype: tf.DType, rank: int, channels: int, channels_last: bool
    ) -> None:
        """Decides the fused kernel's use and the moving variance's bias."""
        # Sonnet 2.0.2 used the fused kernel exactly for rank-4 channels-last
        # inputs, and that kernel returns the *unbiased* batch variance
        # (times n / (n - 1)); that is what reached the moving variance there.
        # Everywhere else the population variance did. We reproduce those
        # numbers whatever kernel we pick (the normalized output always uses
        # the population variance).
        self._unbiased_update = self._use_fused_kernel and rank == 4 and channels_last
        fusable = (
            self._use_fused_kernel
            and dtype in _FUSED_DTYPES
            and isinstance(self._eps, float)
            and channels > 0
        )
        if fusable and channels_last:
            self._fused = True
            self._fused_format = "NHWC"
            self._fused_shape = None if rank == 4 else (-1, 1, 1, channels)
        elif fusable and rank == 4:
            self._fused = True
            self._fused_format = "NCHW"
            self._fused_shape = None
        else:
            self._fused = False

    def _batch_moments(self, inputs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Mean and population variance of the batch, with the keepdims shape."""
        return tf.nn.moments(inputs, self._axis, keepdims=True)

    def _moving_moments(self) -> tuple[tf.Tensor, tf.Tensor]:
        return self.moving_mean.value, self.moving_variance.value

    def _bessel_factor(self, inputs: tf.Tensor) -> tf.Tensor | float:
        """`n / (n - 1)` for n elements per channel (1 when n <= 1), like the
        fused kernel; a Python float when the shape is static."""
        num = inputs.shape.num_elements()
        if num is not None:
            n = num // self._channels
            return n / max(n - 1, 1)
        n = tf.cast(tf.size(inputs) // self._channels, inputs.dtype)
        return n / tf.maximum(n - 1, 1)

    def _with_batch_stats(
        self,
        inputs: tf.Tensor,
        scale: tf.Tensor,
        offset: tf.Tensor,
        fused: bool,
        training: bool | tf.Tensor,
    ) -> tf.Tensor:
        if fused:
            x = (
                inputs
                if self._fused_shape is None
                else tf.reshape(inputs, self._fused_shape)
            )
            empty = _empty_float32()
            y, mean, variance, _, _, _ = tf.raw_ops.FusedBatchNormV3(
                x=x,
                scale=scale,
                offset=offset,
                mean=empty,
                variance=empty,
                epsilon=self._eps,
                exponential_avg_factor=1.0,
                data_format=self._fused_format,
                is_training=True,
            )
            if self._fused_shape is not None:
                y = tf.reshape(y, tf.shape(inputs))
            if training is False:
                return y

            def update() -> None:
                # The kernel's variance is unbiased; see `_initialize`.
                var = variance
                if not self._unbiased_update:
                    var = var / self._bessel_factor(inputs)
                self._update_statistics(
                    tf.reshape(mean, self._stats_shape),
                    tf.reshape(var, self._stats_shape),
                )
        else:
            mean, variance = self._batch_moments(inputs)
            y = tf.nn.batch_normalization(
                inputs, mean, variance, offset, scale, self._eps
            )
            if training is False:
                return y

            def update() -> None:
                var = variance
                if self._unbiased_update:
                    var = var * self._bessel_factor(inputs)
                self._update_statistics(mean, var)

        # An empty batch has no statistics (its moments are NaN): the moving
        # statistics are left alone rather than poisoned.
        num_elements = inputs.shape.num_elements()
        if num_elements == 0:
            return y
        if training is True and num_elements is not None:
            update()
            return y
        condition = training
        if num_elements is None:
            not_empty = tf.size(inputs) > 0
            condition = (
                not_empty if training is True else tf.logical_and(training, not_empty)
            )
        with tf.control_dependencies([tf.cond(condition, _run(update), _noop)]):
            return tf.identity(y)

    def _with_moving_stats(
        self, inputs: tf.Tensor, scale: tf.Tensor, offset: tf.Tensor, fused: bool
    ) -> tf.Tensor:
        mean, variance = self._moving_moments()
        if not fused:
            return tf.nn.batch_normalization(
                inputs, mean, variance, offset, scale, self._eps
            )
        x = (
            inputs
            if self._fused_shape is None
            else tf.reshape(inputs, self._fused_shape)
        )
        channels = (self._channels,)
        y = tf.raw_ops.FusedBatchNormV3(
            x=x,
            scale=scale,
            offset=offset,
            mean=tf.reshape(mean, channels),
            variance=tf.reshape(variance, channels),
            epsilon=self._eps,
            exponential_avg_factor=1.0,
            data_format=self._fused_format,
            is_training=False,
        )[0]
        if self._fused_shape is not None:
            y = tf.reshape(y, tf.shape(inputs))
        return y

    def _update_statistics(self, mean: tf.Tensor, variance: tf.Tensor) -> None:
        moving_averages.update_together(
            (self.moving_mean, self.moving_variance), (mean, variance)
        )


def _run(fn: Any) -> Any:
    def branch() -> tf.Tensor:
        fn()
        return tf.constant(True)

    return branch


def _noop() -> tf.Tensor:
    return tf.constant(False)


class BatchNorm(BaseBatchNorm):
    """Batch normalization with exponential moving averages of the statistics.

    As `snt.BaseBatchNorm` with `moving_mean` and `moving_variance` being
    `snt.ExponentialMovingAverage(decay_rate)` submodules named `moving_mean`
    and `moving_variance` (checkpoint paths `moving_mean/...`,
    `moving_variance/...`). Before any training step the moving statistics
    are zero (mean 0, variance 0).

    Args:
      create_scale: Whether `scale` is trainable (see `snt.BaseBatchNorm`).
      create_offset: Whether `offset` is trainable.
      decay_rate: Decay of the moving averages, normally in [0, 1] (see
        `snt.ExponentialMovingAverage`). Default 0.999 (slow, smooth
        statistics for long training runs).
      eps: Added to the variance for numerical stability. Default 1e-5.
      scale_init: Initializer for `scale`; default `Ones()`.
      offset_init: Initializer for `offset`; default `Zeros()`.
      data_format: `"channels_last"` (default) or `"channels_first"` (or
        a spatial format such as "NCHW").
      name: Module name.

    >>> bn = snt.BatchNorm(create_scale=True, create_offset=True)
    >>> x = tf.random.normal([8, 4, 4, 3])
    >>> bn(x, is_training=True).shape
    TensorShape([8, 4, 4, 3])
    >>> bn.moving_mean.value.shape
    TensorShape([1, 1, 1, 3])
    >>> [v.name for v in bn.variables][:3]
    ['batch_norm/offset:0', 'batch_norm/scale:0', 'batch_norm/moving_mean/counter:0']
    """

    def __init__(
        self,
        create_scale: bool,
        create_offset: bool,
        decay_rate: float = 0.999,
        eps: float = 1e-5,
        scale_init: initializers.Initializer | None = None,
        offset_init: initializers.Initializer | None = None,
        data_format: str = "channels_last",
        name: str | None = None,
    ):
        if name is not None:
            base._check_name(name)
        # A scalar: an array decay (which `snt.ExponentialMovingAverage` takes)
        # could only be checked against the statistics on the first call.
        decay_rate = checks.real("decay_rate", decay_rate)
        # The statistics are built in the caller's scope + `name`, like the
        # original (in eager mode this is the module's own scope).
        with tf.name_scope(name or "batch_norm"):
            moving_mean = moving_averages.ExponentialMovingAverage(
                decay_rate, name="moving_mean"
            )
            moving_variance = moving_averages.ExponentialMovingAverage(
                decay_rate, name="moving_variance"
            )
        super().__init__(
            create_scale=create_scale,
            create_offset=create_offset,
            moving_mean=moving_mean,
            moving_variance=moving_variance,
            eps=eps,
            scale_init=scale_init,
            offset_init=offset_init,
            data_format=data_format,
            name=name,
        )
