"""Averaged weights: `snt.AveragedWeights` (EMA, or uniform as in SWA)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, errors, once, utils
from sonnet._src.optimizers import optimizer_utils as opt_utils


class AveragedWeights(base.Module):
    """Running averages of a module's trainable variables, for evaluation.

    `update()` after each training step moves each average towards its
    variable's value, for all variables in one grouped update::

      average -= (1 - decay_t) * (average - variable)

    where `decay_t` is `decay` (an exponential moving average, EMA), with
    `warmup` `min(decay, (1 + n) / (10 + n))` (TensorFlow's
    `num_updates`, which lets early averages forget the initial weights),
    and without `decay` (None) `n / (n + 1)`: the uniform average of the
    weights at every update, as in stochastic weight averaging (SWA,
    arXiv:1803.05407). `n` is `num_updates`, the updates before this one.

    `swapped()` puts the averages into the module's variables for its body
    (evaluation, export) and the live weights back after it, also when it
    raises; `swap()` and `restore()` do the two halves. The values are
    exchanged, not copied: while swapped, `averages` hold the live weights,
    so checkpoint outside the swap. To export a plain checkpoint of the
    averaged model, write the module's checkpoint inside `swapped()`, or
    `copy_to` a module of the same structure.

    The averages are created from the module's current values on
    construction, or on the first `update()` if the module has no variables
    yet; they are variables of this module (checkpoint paths
    `averages/<i>`, with `num_updates`), so checkpoint it next to the model.
    Under `snt.distribute.Replicator`, make it inside `scope()` (the
    averages are then replica-local like the weights) and call `update()`
    inside `run` or outside (every replica's copy is updated either way).

    Args:
      module: The module whose `trainable_variables` (as first seen) are
        averaged.
      decay: The EMA decay, in [0, 1); default 0.999 (Keras' `use_ema`
        default is 0.99; 0.999 suits the longer runs averaging is used for).
        None gives the uniform average (SWA).
      warmup: Python bool; default False. With an EMA decay, use
        `min(decay, (1 + n) / (10 + n))`.
      name: Module name; default `"averaged_weights"`.

    >>> linear = snt.Linear(1, w_init=snt.initializers.Ones())
    >>> _ = linear(tf.ones([1, 1]))
    >>> ema = snt.AveragedWeights(linear, decay=0.5)
    >>> linear.w.assign([[3.0]])
    <...>
    >>> ema.update()
    >>> with ema.swapped():
    ...   print(linear(tf.ones([1, 1])).numpy())
    [[2.]]
    >>> linear.w.numpy()
    array([[3.]], dtype=float32)
    """

    _TF_MODULE_IGNORED_PROPERTIES = base.Module._TF_MODULE_IGNORED_PROPERTIES | {
        "_module",
        "_live",
    }
    # Set in `vars(self)`, outside tracking.
    _module: tf.Module
    _live: tuple[tf.Variable, ...]

    def __init__(
        self,
        module: tf.Module,
        decay: Any = 0.999,
        warmup: bool = False,
        name: str | None = None,
    ):
        super().__init__(name=name)
        if not isinstance(module, tf.Module):
            raise errors.bad_type("module", "must be an `snt.Module`", module)
        if decay is not None:
            decay = checks.real("decay", decay, 0, allow_tensor=False)
            if decay >= 1:
                raise errors.bad_value("decay", "must be in [0, 1) or None", decay)
        self.decay = decay
        self.warmup = checks.flag("warmup", warmup)
        if self.warmup and decay is None:
            raise errors.bad_value(
                "warmup", "must be False for the uniform average (decay=None)", warmup
            )
        # Outside `tf.Module` tracking: the model is not part of this module's
        # variables or checkpoint.
        vars(self)["_module"] = module
        vars(self)["_live"] = ()
        self.is_swapped = False
        self.num_updates = tf.Variable(
            tf.constant(0, tf.int64), trainable=False, name="num_updates"
        )
        self.averages: list[tf.Variable] = []
        if _trainable_variables(module):
            self._initialize()

    @once.once
    def _initialize(self) -> None:
        live = _trainable_variables(self._module)
        if not live:
            raise errors.bad_value(
                "module",
                "must have trainable variables by the first `update()`",
                self._module,
            )
        with tf.name_scope("averages"):
            self.averages.extend(_copy(v) for v in live)
        vars(self)["_live"] = live

    @utils.no_autograph
    def update(self) -> None:
        """Moves every average towards its variable's current value (one step)."""
        if self.is_swapped:
            raise _swapped_error("update")
        self._initialize()
        n = tf.cast(tf.convert_to_tensor(self.num_updates), tf.float32)
        if self.decay is None:
            rate = 1.0 / (n + 1.0)
        else:
            decay = tf.constant(self.decay, tf.float32)
            if self.warmup:
                decay = tf.minimum(decay, (1.0 + n) / (10.0 + n))
            rate = 1.0 - decay
        cache = opt_utils.CastCache(lambda dtype: tf.cast(rate, dtype))
        _for_each_pair(lambda v, a: _move(v, a, cache), self._live, self.averages)
        self.num_updates.assign_add(1, read_value=False)

    def swap(self) -> None:
        """Puts the averages into the module's variables (the live weights
        into `averages`); undo with `restore()`."""
        if self.is_swapped:
            raise errors.bad_value(
                "swap()",
                "must not be called while the averages are swapped in; call "
                "`restore()` first",
                "a second swap()",
            )
        if not self.averages:
            raise errors.bad_value(
                "swap()",
                "needs averages: call `update()` after a step first",
                "no averages yet",
            )
        _for_each_pair(_exchange, self._live, self.averages)
        self.is_swapped = True

    def restore(self) -> None:
        """Puts the live weights back after `swap()`."""
        if not self.is_swapped:
            raise errors.bad_value(
                "restore()",
                "must follow `swap()`",
                "restore() without swap()",
            )
        _for_each_pair(_exchange, self._live, self.averages)
        self.is_swapped = False

    @contextlib.contextmanager
    def swapped(self) -> Iterator[None]:
        """A context in which the module holds the averages.

        The live weights come back on exit, also on an exception.
        """
        self.swap()
        try:
            yield
        finally:
            self.restore()

    def copy_to(self, module: tf.Module) -> None:
        """Assigns the averages to `module`'s trainable variables.

        `module` must have the structure of the averaged one (the same
        trainable variables' shapes and dtypes, in order), e.g. a second
        instance to evaluate or export with `tf.train.Checkpoint`.
        """
        if self.is_swapped:
            raise _swapped_error("copy_to")
        if not isinstance(module, tf.Module):
            raise errors.bad_type("module", "must be an `snt.Module`", module)
        targets = _trainable_variables(module)
        if len(targets) != len(self.averages) or not self.averages:
            raise errors.bad_value(
                "module",
                f"must have {len(self.averages)} trainable variables, like the "
                "averaged module (and averages must exist)",
                f"{len(targets)} variables",
            )
        for i, (t, a) in enumerate(zip(targets, self.averages, strict=True)):
            if t.dtype != a.dtype or not t.shape.is_compatible_with(a.shape):
                raise errors.bad_value(
                    "module",
                    f"must have variables shaped like the averaged module's "
                    f"(variable {i}: {a.shape.as_list()} {a.dtype.name})",
                    t,
                )
        for t, a in zip(targets, self.averages, strict=True):
            t.assign(tf.convert_to_tensor(a))


def _swapped_error(method: str) -> ValueError:
    return errors.bad_value(
        f"{method}()",
        "must not be called while the averages are swapped in; call `restore()` first",
        "swapped averages",
    )


def _trainable_variables(module: tf.Module) -> tuple[tf.Variable, ...]:
    try:
        return tuple(module.trainable_variables)
    except ValueError:
        # An `snt.Module` not built yet.
        return ()


def _copy(variable: tf.Variable) -> tf.Variable:
    """A non-trainable copy of `variable` (same device, or same strategy)."""
    name = variable.name.split(":")[0]

    def make() -> tf.Variable:
        with tf.device(variable.device):
            return tf.Variable(
                lambda: tf.identity(variable), trainable=False, name=name
            )

    if isinstance(variable, tf.distribute.DistributedValues) and (
        not tf.distribute.has_strategy()
    ):
        with variable.distribute_strategy.scope():  # type: ignore[attr-defined]
            return make()
    return make()


def _for_each_pair(
    rule: Callable[[tf.Variable, tf.Variable], None],
    live: Sequence[tf.Variable],
    averages: Sequence[tf.Variable],
) -> None:
    """`rule(variable, average)` per pair, per replica copy where needed."""
    in_replica = tf.distribute.has_strategy() and not (
        tf.distribute.in_cross_replica_context()
    )
    for variable, average in zip(live, averages, strict=True):
        if in_replica or not isinstance(variable, tf.distribute.DistributedValues):
            rule(variable, average)
            continue
        strategy = variable.distribute_strategy  # type: ignore[attr-defined]
        with strategy.scope():
            strategy.extended.update(variable, rule, args=(average,))


def _move(variable: tf.Variable, average: tf.Variable, rate: Any) -> None:
    live, avg = opt_utils.Ref(variable), opt_utils.Ref(average)
    if avg.fused(live):
        # `average -= rate * (average - variable)` in one kernel.
        dtype = avg.dtype
        tf.raw_ops.ResourceApplyGradientDescent(
            var=avg.handle,
            alpha=rate(dtype),
            delta=tf.raw_ops.ReadVariableOp(resource=avg.handle, dtype=dtype)
            - tf.raw_ops.ReadVariableOp(resource=live.handle, dtype=dtype),
        )
        return
    current = avg.read()
    avg.assign(current - rate(avg.compute_dtype) * (current - live.read()))


def _exchange(variable: tf.Variable, average: tf.Variable) -> None:
    live_value = tf.convert_to_tensor(variable)
    average_value = tf.convert_to_tensor(average)
    variable.assign(average_value)
    average.assign(live_value)
