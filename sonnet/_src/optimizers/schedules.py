"""Learning-rate schedules: `snt.optimizers.schedules`.

A schedule is a callable `schedule(step) -> rate`. Give one as the
`learning_rate` of any Sonnet optimizer and each `apply` calls it with the
optimizer's `step`: the number of `apply` calls before this one (0 on the
first), an int64 variable that checkpoints save and restore, so a restored
optimizer carries on where the schedule was. A schedule is code, not state:
a checkpoint holds no learning rate for it.

The schedules here are small Python objects holding Python numbers (so they
pickle, copy and print); calling one builds a few TensorFlow ops, so they
work eagerly, inside `tf.function` (with or without AutoGraph) and under XLA.
They take an integer step (any integer dtype; a float step also works) of
any shape, elementwise, and return float32. Any other callable of that form
works as a schedule too, e.g. `lambda step: 0.1 / tf.sqrt(1.0 + tf.cast(step,
tf.float32))`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import checks, errors

Schedule = Callable[[Any], Any]


def _as_step(step: Any) -> tf.Tensor:
    """`step` as an int64 tensor (integer steps) or a float32 one."""
    try:
        step = tf.convert_to_tensor(step)
    except (TypeError, ValueError) as e:
        raise errors.bad_type("step", "must be a number or a tensor", step) from e
    if step.dtype.is_integer:
        return tf.cast(step, tf.int64)
    if step.dtype.is_floating:
        return tf.cast(step, tf.float32)
    raise errors.bad_type("step", "must have an integer or floating dtype", step)


def _progress(step: tf.Tensor, steps: int) -> tf.Tensor:
    """How far `step` is through `steps` steps: from 0 to 1, float32."""
    if steps == 0:
        return tf.ones_like(step, tf.float32)
    done = tf.clip_by_value(step, tf.cast(0, step.dtype), tf.cast(steps, step.dtype))
    return tf.cast(done, tf.float32) / steps


def _value(argument: str, value: Any) -> float:
    """A rate or a factor: a real number (not a tensor), as a Python float."""
    return checks.real(argument, value, allow_tensor=False)


def _segments(
    argument: str, items: Any, boundaries: Any
) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """`(items, boundaries)` as tuples: one item per segment between the
    boundaries (non-negative step numbers in increasing order)."""
    if not isinstance(items, (list, tuple)):
        raise errors.bad_type(argument, "must be a list or tuple", items)
    checked = checks.integers("boundaries", boundaries, minimum=0)
    if any(a >= b for a, b in zip(checked, checked[1:])):
        raise errors.bad_value("boundaries", "must be strictly increasing", boundaries)
    if len(items) != len(checked) + 1:
        raise errors.bad_value(
            argument,
            f"must have one entry more than `boundaries` ({len(checked)} boundaries)",
            items,
        )
    return tuple(items), checked


class _Schedule:
    """The `repr` of the schedules: the constructor arguments that differ
    from their defaults (each stored as an attribute of the same name)."""

    def __repr__(self) -> str:
        parameters = inspect.signature(type(self).__init__).parameters
        shown = []
        for name, parameter in list(parameters.items())[1:]:
            value = getattr(self, name)
            if parameter.default is inspect.Parameter.empty or (
                value != parameter.default
            ):
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


class LinearWarmup(_Schedule):
    """Linear warm-up: from `init_value` to `peak_value` in `warmup_steps` steps.

    `rate(step) = init_value + (peak_value - init_value) * min(step,
    warmup_steps) / warmup_steps`, so the rate is `peak_value` from step
    `warmup_steps` on. Warming up keeps the first updates, made while Adam's
    moment estimates are still poor, small (arXiv:1706.02677). To decay
    after the warm-up, `Join` it with a decay, or use `WarmupCosine`.

    Args:
      peak_value: The rate at the end of the warm-up and after it.
      warmup_steps: Length of the warm-up, a non-negative integer; 0 gives
        `peak_value` throughout.
      init_value: The rate at step 0; default 0.

    >>> schedule = snt.optimizers.schedules.LinearWarmup(1.0, warmup_steps=4)
    >>> schedule(tf.range(6)).numpy()
    array([0.  , 0.25, 0.5 , 0.75, 1.  , 1.  ], dtype=float32)
    """

    def __init__(self, peak_value: float, warmup_steps: int, init_value: float = 0.0):
        self.peak_value = _value("peak_value", peak_value)
        self.warmup_steps = checks.size("warmup_steps", warmup_steps, allow_zero=True)
        self.init_value = _value("init_value", init_value)

    def __call__(self, step: Any) -> tf.Tensor:
        progress = _progress(_as_step(step), self.warmup_steps)
        return self.init_value + (self.peak_value - self.init_value) * progress


class CosineDecay(_Schedule):
    """Cosine decay (arXiv:1608.03983, without restarts).

    `rate(step) = init_value * ((1 - alpha) * c + alpha)` with `c = (1 +
    cos(pi * min(step, decay_steps) / decay_steps)) / 2`: the rate falls
    from `init_value` along half a cosine to `alpha * init_value` at step
    `decay_steps`, and stays there.

    Args:
      init_value: The rate at step 0.
      decay_steps: Length of the decay, a positive integer.
      alpha: The final rate as a fraction of `init_value`, in [0, 1];
        default 0 (decay to zero).

    >>> schedule = snt.optimizers.schedules.CosineDecay(1.0, decay_steps=4)
    >>> schedule(tf.range(6)).numpy().round(4)
    array([1.    , 0.8536, 0.5   , 0.1464, 0.    , 0.    ], dtype=float32)
    """

    def __init__(self, init_value: float, decay_steps: int, alpha: float = 0.0):
        self.init_value = _value("init_value", init_value)
        self.decay_steps = checks.size("decay_steps", decay_steps)
        self.alpha = checks.real("alpha", alpha, 0.0, 1.0, allow_tensor=False)

    def __call__(self, step: Any) -> tf.Tensor:
        progress = _progress(_as_step(step), self.decay_steps)
        cosine = 0.5 * (1.0 + tf.cos(math.pi * progress))
        return self.init_value * ((1.0 - self.alpha) * cosine + self.alpha)


class ExponentialDecay(_Schedule):
    """Exponential decay: the rate is multiplied by `decay_rate` every
    `decay_steps` steps.

    `rate(step) = init_value * decay_rate ** (step / decay_steps)`, with the
    exponent rounded down to an integer when `staircase` is True (the rate
    then changes only every `decay_steps` steps). Negative steps count as 0.

    Args:
      init_value: The rate at step 0.
      decay_steps: Steps per factor of `decay_rate`, a positive integer.
      decay_rate: The factor, > 0 (below 1 to decay).
      staircase: Python bool: decay in whole steps of `decay_rate`; default
        False (smoothly).

    >>> schedule = snt.optimizers.schedules.ExponentialDecay(
    ...     1.0, decay_steps=2, decay_rate=0.5, staircase=True)
    >>> schedule(tf.range(6)).numpy()
    array([1.  , 1.  , 0.5 , 0.5 , 0.25, 0.25], dtype=float32)
    """

    def __init__(
        self,
        init_value: float,
        decay_steps: int,
        decay_rate: float,
        staircase: bool = False,
    ):
        self.init_value = _value("init_value", init_value)
        self.decay_steps = checks.size("decay_steps", decay_steps)
        self.decay_rate = _value("decay_rate", decay_rate)
        if self.decay_rate <= 0:
            raise errors.bad_value("decay_rate", "must be > 0", decay_rate)
        self.staircase = checks.flag("staircase", staircase)

    def __call__(self, step: Any) -> tf.Tensor:
        step = _as_step(step)
        step = tf.maximum(step, tf.cast(0, step.dtype))
        if self.staircase and step.dtype.is_integer:
            exponent = tf.cast(step // self.decay_steps, tf.float32)
        else:
            exponent = tf.cast(step, tf.float32) / self.decay_steps
            if self.staircase:
                exponent = tf.floor(exponent)
        return self.init_value * tf.pow(tf.constant(self.decay_rate), exponent)


class PiecewiseConstant(_Schedule):
    """A rate that is constant between boundaries.

    `values[0]` before step `boundaries[0]`, `values[i]` from step
    `boundaries[i - 1]` up to (not including) step `boundaries[i]`, and
    `values[-1]` from step `boundaries[-1]` on.

    Args:
      boundaries: Strictly increasing non-negative integers (a list or
        tuple; may be empty).
      values: Real numbers, one more than `boundaries`.

    >>> schedule = snt.optimizers.schedules.PiecewiseConstant(
    ...     boundaries=[2, 4], values=[1.0, 0.1, 0.01])
    >>> schedule(tf.range(6)).numpy()
    array([1.  , 1.  , 0.1 , 0.1 , 0.01, 0.01], dtype=float32)
    """

    def __init__(self, boundaries: Sequence[int], values: Sequence[float]):
        values, self.boundaries = _segments("values", values, boundaries)
        self.values = tuple(_value(f"values[{i}]", v) for i, v in enumerate(values))

    def __call__(self, step: Any) -> tf.Tensor:
        step = _as_step(step)
        rate = tf.fill(tf.shape(step), tf.constant(self.values[0]))
        for boundary, value in zip(self.boundaries, self.values[1:]):
            rate = tf.where(step >= tf.cast(boundary, step.dtype), value, rate)
        return rate


class Join(_Schedule):
    """Schedules one after another, e.g. a warm-up followed by a decay.

    `schedules[0]` runs before step `boundaries[0]`; from step
    `boundaries[i - 1]` on, `schedules[i]` runs, called with the steps since
    that boundary (so each schedule starts at its own step 0). Results are
    cast to float32.

    Args:
      schedules: Callables `step -> rate` (a list or tuple), one more than
        `boundaries`.
      boundaries: Strictly increasing non-negative integers (a list or
        tuple; may be empty).

    >>> schedules = snt.optimizers.schedules
    >>> schedule = schedules.Join(
    ...     [schedules.LinearWarmup(1.0, warmup_steps=2),
    ...      schedules.ExponentialDecay(1.0, decay_steps=1, decay_rate=0.5)],
    ...     boundaries=[2])
    >>> schedule(tf.range(6)).numpy()
    array([0.   , 0.5  , 1.   , 0.5  , 0.25 , 0.125], dtype=float32)
    """

    def __init__(self, schedules: Sequence[Schedule], boundaries: Sequence[int]):
        self.schedules, self.boundaries = _segments("schedules", schedules, boundaries)
        for i, schedule in enumerate(self.schedules):
            checks.function(f"schedules[{i}]", schedule)

    def __call__(self, step: Any) -> tf.Tensor:
        step = _as_step(step)
        rate = tf.cast(self.schedules[0](step), tf.float32)
        for boundary, schedule in zip(self.boundaries, self.schedules[1:]):
            start = tf.cast(boundary, step.dtype)
            later = tf.cast(schedule(step - start), tf.float32)
            rate = tf.where(step >= start, later, rate)
        return rate


class WarmupCosine(Join):
    """Linear warm-up, then cosine decay: the usual transformer schedule.

    The rate rises linearly from `init_value` at step 0 to `peak_value` at
    step `warmup_steps` (`LinearWarmup`), then falls along half a cosine to
    `alpha * peak_value` at step `warmup_steps + decay_steps`
    (`CosineDecay`), and stays there.

    Args:
      peak_value: The rate at the end of the warm-up.
      warmup_steps: Length of the warm-up, a non-negative integer.
      decay_steps: Length of the decay after the warm-up, a positive
        integer.
      init_value: The rate at step 0; default 0.
      alpha: The final rate as a fraction of `peak_value`, in [0, 1];
        default 0.

    >>> schedule = snt.optimizers.schedules.WarmupCosine(
    ...     1.0, warmup_steps=2, decay_steps=2)
    >>> schedule(tf.range(6)).numpy().round(4)
    array([0. , 0.5, 1. , 0.5, 0. , 0. ], dtype=float32)
    """

    def __init__(
        self,
        peak_value: float,
        warmup_steps: int,
        decay_steps: int,
        init_value: float = 0.0,
        alpha: float = 0.0,
    ):
        warmup = LinearWarmup(peak_value, warmup_steps, init_value)
        decay = CosineDecay(warmup.peak_value, decay_steps, alpha)
        super().__init__([warmup, decay], [warmup.warmup_steps])
        self.peak_value = warmup.peak_value
        self.warmup_steps = warmup.warmup_steps
        self.decay_steps = decay.decay_steps
        self.init_value = warmup.init_value
        self.alpha = decay.alpha
