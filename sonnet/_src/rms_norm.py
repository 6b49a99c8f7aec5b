"""`snt.RMSNorm`: root-mean-square normalization (Zhang & Sennrich, 2019)."""

from __future__ import annotations

from typing import Any, cast

import tensorflow as tf

from sonnet._src import axis_norm, base, errors, initializers, precision, utils
from sonnet._src.norm_params import NormParams, as_inputs
from sonnet._src.once import once

# Dtypes whose statistics are computed in float32: squaring and averaging in
# 16 bits loses most of the precision (and overflows float16 for |x| > 256).
_HALF_DTYPES = frozenset([tf.float16, tf.bfloat16])


class RMSNorm(NormParams, base.Module):
    """Scales each example by the inverse root mean square over `axis`.

    `outputs = inputs / sqrt(mean(inputs**2, axis) + eps) * scale`: as
    `snt.LayerNorm` without the mean subtraction and without an offset
    (Zhang & Sennrich, "Root Mean Square Layer Normalization", 2019), as used
    by most recent Transformers. For float16 and bfloat16 inputs the
    statistics and the scaling are computed in float32 and the result is cast
    back to the input dtype.

    Args:
      axis: The axes to average over: an int, an iterable of ints, or a slice,
        resolved against the rank of the first input. Default -1 (the
        features of each position).
      eps: Added to the mean square so that all-zero inputs give zeros rather
        than NaN. Default 1e-6, small enough to be negligible next to the mean
        square of unit-scale activations; must not be negative.
      create_scale: Whether to create a trainable per-channel `scale`
        (default True). Without it the outputs have unit root mean square.
      scale_init: Initializer for `scale`. Default None means `Ones()`, which
        starts as the identity scaling. Only with `create_scale=True`.
      name: Module name (default `rms_norm`).

    Shapes:
      inputs `[..., C]` (rank >= 2, floating point) -> outputs of the same
      shape and dtype. `scale` is `[C]`, over the last (channel) axis, like
      `snt.LayerNorm`'s parameters.

    >>> norm = snt.RMSNorm()
    >>> y = norm(tf.constant([[3.0, 4.0]]))
    >>> y.numpy().round(3)
    array([[0.849, 1.131]], dtype=float32)
    >>> norm.scale.shape
    TensorShape([2])
    """

    def __init__(
        self,
        axis: axis_norm.AxisLike = -1,
        eps: float = 1e-6,
        create_scale: bool = True,
        scale_init: initializers.Initializer | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self._axis = axis_norm.check_axis(axis)
        self.check_common(create_scale, False, eps, scale_init, None, "channels_last")
        if isinstance(self._eps, float) and self._eps < 0:
            raise errors.bad_value("eps", "must not be negative", eps)

    @once
    def _initialize(self, inputs: tf.Tensor) -> None:
        self.build_params(inputs)
        self._axis = axis_norm.resolve_axis(self._axis, self._rank)
        self._compute_dtype = (
            tf.float32 if inputs.dtype in _HALF_DTYPES else inputs.dtype
        )
        self.scale = (
            tf.Variable(self._scale_init(self._params_shape, self._dtype), name="scale")
            if self._create_scale
            else None
        )

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        """Normalizes `inputs` over the module's axes.

        Args:
          inputs: A float tensor of rank >= 2, `[..., C]`.

        Returns:
          A tensor of the same shape and dtype as `inputs` (under a
          `snt.precision` policy: its compute or output dtype; the statistics
          and the scaling are then computed in its variable dtype, float32).
        """
        policy = self._precision
        if policy is None:
            return self._normalize(inputs)
        inputs = precision.cast(as_inputs(inputs), policy.variable_dtype)
        y = precision.cast(self._normalize(inputs), policy.compute_dtype)
        return precision.cast_outputs(policy, y)

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _normalize(self, inputs: Any) -> tf.Tensor:
        inputs = as_inputs(inputs)
        self.initialize_and_check(inputs)
        dtype = self._compute_dtype
        x = inputs if inputs.dtype == dtype else tf.cast(inputs, dtype)
        axis = cast(tuple, self._axis)  # Resolved by the first call.
        mean_square = tf.reduce_mean(tf.square(x), axis=axis, keepdims=True)
        outputs = x * tf.math.rsqrt(mean_square + self._eps_as(dtype))
        if self.scale is not None:
            scale = self.scale
            outputs *= scale if scale.dtype == dtype else tf.cast(scale, dtype)
        return (
            outputs if outputs.dtype == inputs.dtype else tf.cast(outputs, inputs.dtype)
        )

    def _eps_as(self, dtype: tf.DType) -> Any:
        eps = self._eps
        if isinstance(eps, (tf.Tensor, tf.Variable)) and eps.dtype != dtype:
            return tf.cast(eps, dtype)
        return eps
