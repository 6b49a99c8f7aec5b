"""Identity-like ops with custom gradients: `scale_gradient`, `leaky_clip_by_value`."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import checks, errors, utils

__all__ = ["leaky_clip_by_value", "scale_gradient"]


def _numeric_tensor(argument: str, value: Any) -> tf.Tensor:
    if value is None:
        # `tf.convert_to_tensor(None)` raised a `ValueError` in the original.
        raise errors.bad_value(argument, "must be a numeric tensor", value)
    tensor = utils.to_tensor(argument, value)
    dtype = tensor.dtype
    if not (dtype.is_floating or dtype.is_integer):
        # The original's TF op failed (`InvalidArgumentError`).
        raise errors.invalid_argument_type(argument, "must have a numeric dtype", value)
    return tensor


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not (
        isinstance(value, (bool, np.bool_))
    )


def scale_gradient(t: Any, scale: Any) -> tf.Tensor:
    """Returns `t` unchanged, but its gradient is multiplied by `scale`.

    Useful to slow down (`0 < scale < 1`), stop (`scale = 0`) or reverse
    (`scale < 0`) the learning signal reaching part of a model.

    Args:
      t: A tensor.
      scale: A number (also a NumPy scalar, a 0-d array or a one-element
        list) or a tensor multiplying the gradient (cast to its dtype). It
        gets no gradient itself.

    Returns:
      A tensor equal to `t` (same shape and dtype).

    >>> x = tf.constant(3.0)
    >>> with tf.GradientTape() as tape:
    ...   tape.watch(x)
    ...   y = snt.scale_gradient(x, 0.1) * 2.0
    >>> round(float(tape.gradient(y, x)), 4)
    0.2
    """
    t = _numeric_tensor("t", t)
    if isinstance(scale, (tf.Tensor, tf.Variable)):
        if not (scale.dtype.is_floating or scale.dtype.is_integer):
            raise errors.bad_type("scale", "must have a numeric dtype", scale)
    else:
        # NaN or infinite scales only give NaN/inf gradients.
        scale = checks.tf_real("scale", scale)

    @tf.custom_gradient
    def _scale_gradient(x: tf.Tensor) -> Any:
        def grad(dy: tf.Tensor) -> tf.Tensor:
            if isinstance(scale, (tf.Tensor, tf.Variable)):
                return dy * tf.cast(scale, dy.dtype)
            return dy * scale

        return tf.identity(x), grad

    return _scale_gradient(t)


def leaky_clip_by_value(
    t: Any, clip_value_min: Any, clip_value_max: Any, name: str | None = None
) -> tf.Tensor:
    """Clips `t` to `[clip_value_min, clip_value_max]`, letting gradients back in.

    The forward pass is `tf.clip_by_value`. Unlike it, the gradient is not
    zero for clipped values, except where following it (gradient descent)
    would push a value further out of range: it is zeroed where
    `t < clip_value_min` and the gradient is positive, or `t > clip_value_max`
    and the gradient is negative. So a clipped value can still be pulled back
    into range.

    Args:
      t: A numeric tensor.
      clip_value_min: Lower bound: a number or a tensor broadcastable to `t`.
      clip_value_max: Upper bound: a number or a tensor broadcastable to `t`.
      name: Optional name for the clip op.

    Returns:
      The clipped tensor, with `t`'s shape and dtype. The bounds get no
      gradient.

    >>> t = tf.constant([-2.0, 0.5, 2.0])
    >>> with tf.GradientTape() as tape:
    ...   tape.watch(t)
    ...   y = snt.leaky_clip_by_value(t, -1.0, 1.0)
    >>> y.numpy(), tape.gradient(y, t).numpy()
    (array([-1. ,  0.5,  1. ], dtype=float32), array([0., 1., 1.], dtype=float32))
    """
    t = _numeric_tensor("t", t)
    if name is not None and not isinstance(name, str):
        # The original failed with a `ValueError` (from its gradient).
        raise errors.invalid_argument_type("name", "must be a string or None", name)
    if _is_number(clip_value_min) and _is_number(clip_value_max):
        if clip_value_min > clip_value_max:
            raise errors.bad_value(
                "clip_value_max",
                f"must be >= clip_value_min ({clip_value_min!r})",
                clip_value_max,
            )
    bounds = []
    for argument, bound in (
        ("clip_value_min", clip_value_min),
        ("clip_value_max", clip_value_max),
    ):
        if bound is None:
            # `tf.convert_to_tensor(None)` raised a `ValueError` in the original.
            raise errors.bad_value(argument, "must be a number or a tensor", bound)
        if isinstance(bound, (tf.Tensor, tf.Variable)) and bound.dtype != t.dtype:
            # The original's `tf.maximum`/`tf.minimum` failed.
            raise errors.invalid_argument_type(
                argument, f"must have the dtype of `t` ({t.dtype.name})", bound
            )
        bounds.append(utils.to_tensor(argument, bound, dtype=t.dtype))
    lo, hi = bounds
    try:
        broadcast = tf.broadcast_static_shape(
            tf.broadcast_static_shape(lo.shape, hi.shape), t.shape
        )
    except ValueError as e:
        raise errors.bad_value(
            "clip_value_min",
            "and `clip_value_max` must broadcast to `t`'s shape",
            (lo.shape, hi.shape, t.shape),
        ) from e
    if not broadcast.is_compatible_with(t.shape):
        raise errors.bad_value(
            "clip_value_min",
            "and `clip_value_max` must not broadcast `t` to a larger shape",
            (lo.shape, hi.shape, t.shape),
        )

    @tf.custom_gradient
    def _leaky_clip(x: tf.Tensor, lower: tf.Tensor, upper: tf.Tensor) -> Any:
        def grad(dy: tf.Tensor) -> tuple[tf.Tensor, None, None]:
            zero = tf.zeros_like(dy)
            pushes_out = tf.logical_or(
                tf.logical_and(x < lower, dy > zero),
                tf.logical_and(x > upper, dy < zero),
            )
            return tf.where(pushes_out, zero, dy), None, None

        return tf.clip_by_value(x, lower, upper, name=name), grad

    return _leaky_clip(t, lo, hi)
