"""Gradient accumulation: `snt.optimizers.Accumulator`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, errors, once, tf_compat, utils
from sonnet._src.optimizers import optimizer_utils as opt_utils


class Accumulator(base.Optimizer):
    """Sums `num_micro_batches` updates, then applies them with `optimizer`.

    An optimizer wrapping another: each `apply` adds the updates to
    `accumulated_updates` and counts the call; the `num_micro_batches`-th
    call applies their mean (or sum) with `optimizer` and resets. So a batch
    too large for memory trains as its micro-batches in turn::

      for x, y in micro_batches:           # num_micro_batches of them
        grads = tape.gradient(loss(x, y), params)
        accumulator.apply(grads, params)   # the last one steps `optimizer`

    For a mean loss over equal micro-batches of a model without batch
    statistics, the default mean of the gradients is the gradient of the
    loss over the concatenated batch, so the step is that batch's step.

    Whether this call applies is a tensor condition on the `count` variable,
    so a `tf.function` step traces once and runs for every micro-batch.
    Inside `snt.distribute.Replicator.run`, pass each replica's own gradients
    (do not all-reduce them): the applying call sums `accumulated_updates`
    over the replicas, in one all-reduce per applied step rather than one per
    micro-batch, and every replica applies the same update (normalise the
    loss by the global batch size, as without accumulation).

    With a `loss_scale` (`snt.precision.DynamicLossScale`), `apply` takes
    the gradients of `loss_scale.scale(loss)`; the applying call unscales
    the sum and, if any micro-batch had a non-finite gradient (on any
    replica), skips the whole step (nothing in `optimizer` changes) and
    updates the loss scale once per step.

    Variables: `count` (int64 scalar, micro-batches accumulated in the
    current step) and, created on the first `apply`, `accumulated_updates`
    (one per parameter, shaped like it, checkpoint paths
    `accumulated_updates/<i>`); `optimizer` and `loss_scale` are tracked
    too, so a checkpoint taken mid-step resumes the partial sums. A
    `tf.IndexedSlices` update is added into its dense sum, and the step
    applies the dense sum.

    Args:
      optimizer: Anything with `apply(updates, parameters)`, e.g. any
        `snt.optimizers` optimizer; it steps once per `num_micro_batches`
        calls.
      num_micro_batches: Calls per step, a positive integer (1 applies on
        every call).
      average: Python bool; default True: apply the mean of the updates,
        which is the concatenated batch's gradient for mean losses. False
        applies their sum (losses summed over examples).
      loss_scale: None (default) or an `snt.precision.DynamicLossScale`
        whose scaled losses the updates are gradients of.
      name: Module name; default `"accumulator"`.

    >>> w = tf.Variable([1.0])
    >>> acc = snt.optimizers.Accumulator(snt.optimizers.SGD(0.1), 2)
    >>> bool(acc.apply([tf.constant([1.0])], [w])), w.numpy()
    (False, array([1.], dtype=float32))
    >>> bool(acc.apply([tf.constant([3.0])], [w])), w.numpy()
    (True, array([0.8], dtype=float32))
    """

    def __init__(
        self,
        optimizer: Any,
        num_micro_batches: Any,
        average: bool = True,
        loss_scale: Any = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        _check_optimizer("optimizer", optimizer)
        self.optimizer = optimizer
        self.num_micro_batches = checks.size("num_micro_batches", num_micro_batches)
        self.average = checks.flag("average", average)
        if loss_scale is not None:
            for method in ("unscale", "all_finite", "update"):
                if not callable(getattr(loss_scale, method, None)):
                    raise errors.bad_type(
                        "loss_scale",
                        "must be None or an `snt.precision.DynamicLossScale`",
                        loss_scale,
                    )
        self.loss_scale = loss_scale
        self.count = tf.Variable(
            tf.constant(0, tf.int64), trainable=False, name="count"
        )
        self.accumulated_updates: list[tf.Variable] = []
        # What the first `apply` passed (names, and which updates were None):
        # later calls must match, as the sums are matched by position.
        self._signature: tuple[tuple[str, bool], ...] | None = None

    @once.once
    def _initialize(self, parameters: Sequence[tf.Variable]) -> None:
        opt_utils.create_slots(parameters, accumulated_updates=self.accumulated_updates)

    @utils.no_autograph
    def apply(
        self, updates: Sequence[Any], parameters: Sequence[tf.Variable]
    ) -> tf.Tensor:
        """Adds `updates` to the sums; on the last micro-batch, steps.

        Args:
          updates: As for `snt.Optimizer.apply`, one per parameter; a
            position that is None must be None in every call.
          parameters: The same variables, in the same order, on every call.

        Returns:
          A scalar bool tensor: whether `optimizer` stepped in this call.

        Raises:
          ValueError: If the call differs from the first one (other
            variables, or None at other positions), or as
            `snt.Optimizer.apply`; nothing changes then.
        """
        checked = opt_utils.check_updates_parameters(updates, parameters)
        opt_utils.check_replicated("count", self.count)
        signature = tuple(
            (p.name, u is None) for p, u in zip(parameters, checked, strict=True)
        )
        if self._signature is not None and signature != self._signature:
            raise _mismatch(self._signature, signature)
        self._initialize(parameters)
        opt_utils.check_same_parameters(parameters, self.accumulated_updates)
        self._signature = signature
        opt_utils.for_each_update(_add, checked, parameters, self.accumulated_updates)
        count = self.count.assign_add(1)
        ready = count >= self.num_micro_batches
        return tf.cond(
            ready,
            lambda: self._step(checked, parameters),
            lambda: tf.constant(False),
        )

    @base.no_name_scope
    def _step(
        self, checked: Sequence[opt_utils.Update], parameters: Sequence[tf.Variable]
    ) -> tf.Tensor:
        """Applies the (all-reduced, unscaled) sums with `optimizer`, resets."""
        positions = [i for i, u in enumerate(checked) if u is not None]
        sums = [tf.convert_to_tensor(self.accumulated_updates[i]) for i in positions]
        sums = all_reduce_sum(sums)
        if self.average:
            sums = [s / self.num_micro_batches for s in sums]
        updates: list[Any] = [None] * len(parameters)
        for i, s in zip(positions, sums, strict=True):
            updates[i] = s

        def step() -> tf.Tensor:
            self.optimizer.apply(updates, parameters)
            return tf.constant(True)

        if self.loss_scale is None:
            applied = step()
        else:
            for i, s in zip(positions, self.loss_scale.unscale(sums), strict=True):
                updates[i] = s
            finite = self.loss_scale.all_finite([updates[i] for i in positions])
            applied = tf.cond(finite, step, lambda: tf.constant(False))
            with tf.control_dependencies([applied]):
                self.loss_scale.update(finite)
        with tf.control_dependencies([applied]):
            for i in positions:
                self.accumulated_updates[i].assign(
                    tf.zeros_like(self.accumulated_updates[i])
                )
            self.count.assign(tf.constant(0, tf.int64))
            return tf.identity(applied)


def _check_optimizer(argument: str, optimizer: Any) -> None:
    if not callable(getattr(optimizer, "apply", None)):
        raise errors.bad_type(
            argument, "must have an `apply(updates, parameters)` method", optimizer
        )


def _mismatch(
    first: tuple[tuple[str, bool], ...], this: tuple[tuple[str, bool], ...]
) -> ValueError:
    for i, (a, b) in enumerate(zip(first, this)):
        if a[0] != b[0]:
            return errors.bad_value(
                f"parameters[{i}]",
                "must be the same variables, in the same order, as in the first "
                f"call to `apply` (position {i} was {a[0]!r})",
                b[0],
            )
        if a[1] != b[1]:
            state = "None" if a[1] else "not None"
            return errors.bad_value(
                f"updates[{i}]",
                f"must be None at the same positions as in the first call to "
                f"`apply` (it was {state})",
                "None" if b[1] else "an update",
            )
    return errors.bad_value(
        "parameters",
        "must be the same variables, in the same order, as in the first call to "
        f"`apply` ({len(first)} variables)",
        f"{len(this)} variables",
    )


def _add(parameter: tf.Variable, update: Any, accumulated: tf.Variable) -> None:
    del parameter  # Matched by position.
    ref = opt_utils.Ref(accumulated)
    if isinstance(update, tf.IndexedSlices):
        values, indices = opt_utils.deduplicate(update)
        if ref.handle is None:
            accumulated.scatter_add(tf.IndexedSlices(values, indices))
        else:
            tf.raw_ops.ResourceScatterAdd(
                resource=ref.handle, indices=indices, updates=values
            )
    elif ref.handle is None:
        accumulated.assign_add(update)
    else:
        tf.raw_ops.AssignAddVariableOp(resource=ref.handle, value=update)


def all_reduce_sum(values: list[tf.Tensor]) -> list[tf.Tensor]:
    """Sums `values` over the replicas inside `strategy.run` (as is outside).

    One batched all-reduce, usable inside `tf.cond`: `ReplicaContext.
    all_reduce` of a `MirroredStrategy` (so `snt.distribute.Replicator`)
    synchronises the replica threads with `merge_call`, which TensorFlow
    refuses inside control flow while tracing; there the strategy's own
    collective all-reduce, which needs no synchronisation point, runs
    instead (`tf_compat.replica_all_reduce_sum`, as `MirroredStrategy` itself
    does for XLA on GPUs).
    """
    if not values or not tf.distribute.has_strategy():
        return values
    if tf.distribute.in_cross_replica_context():
        return values
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return values
    if not tf.executing_eagerly():
        summed = tf_compat.replica_all_reduce_sum(context, values)
        if summed is not None:
            return summed
    return list(context.all_reduce(tf.distribute.ReduceOp.SUM, values))
