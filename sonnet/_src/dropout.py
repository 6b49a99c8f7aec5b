"""`snt.Dropout`: randomly zeroes activations while training."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, errors, once, utils


def check_rate(argument: str, rate: Any) -> Any:
    """Checks a dropout rate: a number in `[0, 1)` or a scalar float tensor.

    As `tf.nn.dropout`, which raised `ValueError` for the original, a rate
    outside `[0, 1)` is refused (checked for tensors whose value is known).
    """
    checked = checks.real(argument, rate)
    if isinstance(checked, (tf.Tensor, tf.Variable)):
        if not checked.dtype.is_floating:
            raise errors.bad_type(
                argument, "must be a number or a scalar floating point tensor", rate
            )
        value = tf.get_static_value(checked) if isinstance(checked, tf.Tensor) else None
        if value is not None and not 0 <= float(value) < 1:
            raise errors.bad_value(argument, "must be in [0, 1)", float(value))
        return checked
    if not 0 <= checked < 1:
        raise errors.bad_value(argument, "must be in [0, 1)", rate)
    return checked


def when_training(x: tf.Tensor, rate: Any, training: bool | tf.Tensor) -> tf.Tensor:
    """`tf.nn.dropout(x, rate)` if `training` (a checked mode flag), else `x`.

    A Python bool decides now; a boolean tensor decides at run time.
    """
    if training is False:
        return x
    if training is True:
        return tf.nn.dropout(x, rate=rate)
    return tf.cond(
        training, lambda: tf.nn.dropout(x, rate=rate), lambda: tf.identity(x)
    )


def _check_noise_shape(noise_shape: Any) -> Any:
    if noise_shape is None or isinstance(noise_shape, (tf.Tensor, tf.Variable)):
        return noise_shape
    if isinstance(noise_shape, tf.TensorShape):
        noise_shape = noise_shape.as_list()
    if isinstance(noise_shape, (str, bytes)) or not isinstance(noise_shape, Sequence):
        raise errors.bad_type(
            "noise_shape",
            "must be None or a sequence of sizes (ints or None)",
            noise_shape,
        )
    for d in noise_shape:
        if d is None:
            continue
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise errors.bad_type(
                "noise_shape", "must contain only ints and None", noise_shape
            )
        if d < 0:
            raise errors.bad_value(
                "noise_shape", "must contain non-negative sizes", noise_shape
            )
    return tuple(noise_shape)


class Dropout(base.Module):
    """Randomly zeroes inputs with probability `rate` while training.

    In training each element is kept with probability `1 - rate` and scaled
    by `1 / (1 - rate)`, so the expected value is unchanged
    (Srivastava et al., "Dropout", JMLR 2014); otherwise inputs pass through.

    Args:
      rate: Probability of dropping an element, a number in `[0, 1)`, or a
        scalar float `tf.Variable` (tracked: it is saved in checkpoints) or
        tensor, so that the rate can change during training.
      noise_shape: Shape of the random keep/drop mask, broadcast against the
        inputs (e.g. `[N, 1, 1, C]` drops whole channels); default None means
        the input shape.
      seed: Op-level random seed (default None).
      name: Module name (default `dropout`).

    Shapes:
      x of any shape (floating point) -> outputs of the same shape and dtype.

    >>> dropout = snt.Dropout(0.5)
    >>> x = tf.ones([2, 4])
    >>> bool(tf.reduce_all(dropout(x, is_training=False) == x))
    True
    >>> sorted(set(dropout(x, is_training=True).numpy().ravel().tolist()) - {0.0})
    [2.0]
    """

    def __init__(
        self,
        rate: Any,
        noise_shape: Sequence[int | None] | None = None,
        seed: int | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        # As in the original, the arguments are only used (and so checked) by
        # the first call in training mode: in evaluation dropout is the
        # identity whatever they are.
        self._rate = rate
        self._noise_shape = noise_shape
        self._seed = seed

    @once.once
    def _check_arguments(self) -> None:
        try:
            self._rate = check_rate("rate", self._rate)
        except TypeError as e:  # `tf.nn.dropout` raised ValueError for these.
            raise errors.bad_value(
                "rate", "must be a number in [0, 1) or a scalar tensor", self._rate
            ) from e
        self._noise_shape = _check_noise_shape(self._noise_shape)
        self._seed = checks.seed("seed", self._seed)

    def __call__(self, x: tf.Tensor, is_training: Any) -> tf.Tensor:
        """Applies dropout when `is_training` is true.

        Args:
          x: A floating point tensor.
          is_training: A Python bool or a scalar boolean tensor/variable
            (which makes the choice at run time, also inside `tf.function`).

        Returns:
          `x` with dropout applied in training, else `x` itself.

        Raises:
          TypeError: if `is_training` is not a boolean, or `x` is not floating
            point (in training).
          ValueError: if `noise_shape` does not broadcast to the shape of `x`.
        """
        training = checks.mode_flag("is_training", is_training)
        if training is False:
            return x
        if training is True:
            return self._dropout(x)
        return tf.cond(training, lambda: self._dropout(x), lambda: tf.identity(x))

    def _dropout(self, x: Any) -> tf.Tensor:
        self._check_arguments()
        x = utils.to_tensor("x", x)
        if not x.dtype.is_floating:
            raise errors.bad_type(
                "x", "must be a floating point tensor (kept values are scaled)", x
            )
        noise_shape = self._noise_shape
        if isinstance(noise_shape, tuple):
            self._check_noise_shape_fits(x.shape, noise_shape)
        try:
            outputs = tf.nn.dropout(
                x, rate=self._rate, noise_shape=noise_shape, seed=self._seed
            )
        except errors.OP_ERRORS as e:
            raise errors.bad_value(
                "noise_shape", f"must broadcast to the shape of `x` ({e})", noise_shape
            ) from e
        if not outputs.shape.is_compatible_with(x.shape):
            # A tensor `noise_shape` that broadcast `x` up.
            raise errors.bad_value(
                "noise_shape",
                f"must broadcast to the shape of `x` ({x.shape}) without growing it",
                noise_shape,
            )
        return outputs

    @base.no_name_scope
    def _check_noise_shape_fits(
        self, shape: tf.TensorShape, noise_shape: tuple[int | None, ...]
    ) -> None:
        # A mask that broadcasts the inputs *up* would silently change the
        # output shape, so each mask size must be 1 or the input size.
        if shape.rank is None:
            return
        fits = len(noise_shape) == shape.rank and all(
            n is None or d is None or n in (1, d) for n, d in zip(noise_shape, shape)
        )
        if not fits:
            raise errors.bad_value(
                "noise_shape",
                f"must have one size per axis of `x` (shape {shape}), each 1 or "
                "the size of that axis",
                list(noise_shape),
            )
