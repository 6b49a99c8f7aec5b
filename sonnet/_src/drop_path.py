"""Stochastic depth: `snt.drop_path` and `snt.DropPath`.

A residual block computes `shortcut + branch(x)`; drop path (stochastic
depth, Huang et al., "Deep Networks with Stochastic Depth",
arXiv:1603.09382) drops the branch while training, per example (`"row"`:
each example's branch is kept with probability `1 - rate`) or for the whole
batch (`"batch"`: one draw), and scales kept branches by `1 / (1 - rate)` so
the expected sum is unchanged. In evaluation it is the identity. The modes
and their names are torchvision's `StochasticDepth`; timm's `DropPath` is
the `"row"` mode.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, errors, utils

_MODES = ("row", "batch")


def check_rate(argument: str, rate: Any) -> float:
    """A drop rate: a number in `[0, 1)`."""
    value = checks.real(argument, rate, allow_tensor=False)
    if not 0 <= value < 1:
        raise errors.bad_value(argument, "must be in [0, 1)", rate)
    return value


def check_mode(mode: Any) -> str:
    if not isinstance(mode, str):
        raise errors.bad_type("mode", f"must be one of {list(_MODES)}", mode)
    if mode not in _MODES:
        raise errors.bad_value("mode", f"must be one of {list(_MODES)}", mode)
    return mode


def linear_schedule(rate: float, num_blocks: int) -> list[float]:
    """Drop path rates rising linearly over `num_blocks` blocks, from 0 for
    the first to `rate` for the last (timm's schedule; `snt.nets.ResNet`'s).

    >>> from sonnet._src.drop_path import linear_schedule
    >>> linear_schedule(0.3, 4)
    [0.0, 0.1, 0.2, 0.3]
    """
    if num_blocks < 2:
        return [0.0] * num_blocks
    # Rounded so that 0.3 over 4 blocks reads 0.1, not 0.09999999999999999.
    return [round(rate * i / (num_blocks - 1), 12) for i in range(num_blocks)]


def _drop(x: tf.Tensor, rate: float, mode: str, seed: int | None) -> tf.Tensor:
    if mode == "batch":
        noise_shape: Any = [1] * x.shape.rank
    else:
        batch = x.shape[0]
        if batch is None:
            batch = tf.shape(x)[0]
        noise_shape = tf.stack([batch, *([1] * (x.shape.rank - 1))])
    return tf.nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed)


def drop_path(
    inputs: Any,
    rate: float,
    is_training: bool | tf.Tensor,
    mode: str = "row",
    seed: int | None = None,
) -> tf.Tensor:
    """Drops residual branches while training (stochastic depth).

    Args:
      inputs: A residual branch's outputs, a floating point tensor of rank
        >= 1 whose first axis is the batch.
      rate: Probability of dropping a branch, a number in `[0, 1)`. 0 is the
        identity.
      is_training: A Python bool, or a scalar boolean tensor (decides at run
        time). False: `inputs` are returned as they are.
      mode: `"row"` (default): one draw per example; `"batch"`: one draw for
        the whole batch.
      seed: Op-level random seed (default None).

    Returns:
      `inputs * keep / (1 - rate)` while training, with `keep` 0 or 1 per
      example (`"row"`) or for the batch; else `inputs`.

    Raises:
      ValueError: if `rate` is outside `[0, 1)`, `mode` is not one of the two,
        or `inputs` have rank 0.
      TypeError: for arguments of the wrong type.

    >>> x = tf.ones([64, 3])  # Enough rows that some are kept.
    >>> bool(tf.reduce_all(snt.drop_path(x, 0.5, is_training=False) == x))
    True
    >>> y = snt.drop_path(x, 0.5, is_training=True)
    >>> sorted(set(y.numpy().ravel().tolist()) - {0.0})  # Kept rows, scaled.
    [2.0]
    """
    rate = check_rate("rate", rate)
    mode = check_mode(mode)
    seed = checks.seed("seed", seed)
    training = checks.mode_flag("is_training", is_training)
    return _apply(inputs, rate, training, mode, seed)


def _apply(
    inputs: Any, rate: float, training: bool | tf.Tensor, mode: str, seed: int | None
) -> tf.Tensor:
    """`drop_path` on checked arguments."""
    if training is False or rate == 0:
        return inputs
    x = utils.to_tensor("inputs", inputs)
    if not x.dtype.is_floating:
        raise errors.bad_type(
            "inputs", "must be a floating point tensor (kept values are scaled)", x
        )
    if x.shape.rank is None or x.shape.rank < 1:
        raise errors.bad_value(
            "inputs", "must have a known rank >= 1 (the batch axis first)", x
        )
    if training is True:
        return _drop(x, rate, mode, seed)
    return tf.cond(training, lambda: _drop(x, rate, mode, seed), lambda: tf.identity(x))


class DropPath(base.Module):
    """Drops residual branches while training: `snt.drop_path` as a module.

    Put it on the branch of a residual block: `x + drop(branch(x),
    is_training)`.

    Args:
      rate: Probability of dropping the branch, a number in `[0, 1)`.
      mode: `"row"` (default, one draw per example) or `"batch"` (one draw
        for the whole batch).
      seed: Op-level random seed (default None).
      name: Module name (default `drop_path`).

    Shapes:
      inputs `[batch, ...]` -> outputs of the same shape and dtype.

    >>> drop = snt.DropPath(0.25)
    >>> x = tf.ones([2, 3])
    >>> bool(tf.reduce_all(drop(x, is_training=False) == x))
    True
    >>> drop
    DropPath(rate=0.25)
    """

    def __init__(
        self,
        rate: float,
        mode: str = "row",
        seed: int | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.rate = check_rate("rate", rate)
        self.mode = check_mode(mode)
        self.seed = checks.seed("seed", seed)

    @utils.no_autograph
    def __call__(self, inputs: Any, is_training: bool | tf.Tensor) -> tf.Tensor:
        """Applies drop path when `is_training` (see `snt.drop_path`)."""
        training = checks.mode_flag("is_training", is_training)
        return _apply(inputs, self.rate, training, self.mode, self.seed)
