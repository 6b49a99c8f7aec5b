"""`CrossReplicaBatchNorm`: batch norm whose batch statistics span all replicas."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import base, batch_norm, eager_init, once


class CrossReplicaBatchNorm(batch_norm.BaseBatchNorm):
    """`snt.BaseBatchNorm` with batch statistics all-reduced across replicas.

    Under a distribution strategy each replica sees only its shard of the
    batch; this module sums the per-channel sums, sums of squares and element
    counts over all replicas (one all-reduce) so that every replica normalizes
    with, and updates its moving statistics from, the moments of the *global*
    batch. Outside any strategy (a single replica) it equals
    `snt.BaseBatchNorm`. The fused kernel is never used (it cannot take
    external statistics); the moving variance is fed the population variance.

    It must be called in a replica context: inside `strategy.run`, or with no
    strategy at all; a call in the cross-replica context (inside
    `strategy.scope()` but not inside `strategy.run`) raises a `TypeError`.
    Arguments, variables (`scale`, `offset`, always created) and call
    signature are those of `snt.BaseBatchNorm`.

    Args:
      create_scale: Whether `scale` is trainable.
      create_offset: Whether `offset` is trainable.
      moving_mean: Metric tracking the mean, e.g.
        `snt.ExponentialMovingAverage(0.9)`.
      moving_variance: Metric tracking the variance.
      eps: Added to the variance for stability; default 1e-5.
      scale_init: Initializer for `scale`; default `Ones()`.
      offset_init: Initializer for `offset`; default `Zeros()`.
      data_format: `"channels_last"` (default) or `"channels_first"`.
      name: Module name; default `"cross_replica_batch_norm"`.

    >>> replicator = snt.distribute.Replicator(["/cpu:0"])
    >>> with replicator.scope():
    ...   bn = snt.distribute.CrossReplicaBatchNorm(
    ...       True, True, snt.ExponentialMovingAverage(0.9),
    ...       snt.ExponentialMovingAverage(0.9))
    >>> out = replicator.run(lambda x: bn(x, is_training=True),
    ...                      args=(tf.ones([4, 3]),))
    >>> out.shape
    TensorShape([4, 3])
    """

    _use_fused_kernel = False

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _normalize(self, *args: Any) -> tf.Tensor:
        if tf.distribute.in_cross_replica_context():
            raise TypeError(
                "`CrossReplicaBatchNorm` must be called in a replica context "
                "(inside `strategy.run(...)`, or outside any strategy). "
                "Received: a call in the cross-replica context of "
                f"`{type(tf.distribute.get_strategy()).__name__}`."
            )
        return super()._normalize(*args)

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        # Inside a `tf.function`, create the variables eagerly also under a
        # strategy (`eager_init`): their initial values (initializer outputs,
        # zeros for the statistics) do not depend on the inputs. Variables
        # created inside the function by `strategy.run` could not be
        # initialized outside it, and TensorFlow's fallback (initialization
        # under a `tf.cond`) breaks the all-reduce of the first call ("You
        # must feed a value for placeholder tensor").
        with eager_init.under_strategies():
            super()._initialize(inputs)

    def _batch_moments(self, inputs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        context = tf.distribute.get_replica_context()
        assert context is not None  # Checked in `__call__`.
        dtype = inputs.dtype
        # Half-precision sums and counts overflow: accumulate in float32.
        x = tf.cast(inputs, tf.float32) if dtype.size < 4 else inputs
        total = tf.reduce_sum(x, self._axis, keepdims=True)
        total_sq = tf.reduce_sum(tf.square(x), self._axis, keepdims=True)
        count = tf.cast(tf.size(x) // max(self._channels, 1), x.dtype)
        if context.num_replicas_in_sync > 1:
            total, total_sq, count = context.all_reduce(
                tf.distribute.ReduceOp.SUM, [total, total_sq, count]
            )
        mean = total / count
        # E[x^2] - E[x]^2 can come out slightly negative by rounding.
        variance = tf.maximum(total_sq / count - tf.square(mean), 0)
        return tf.cast(mean, dtype), tf.cast(variance, dtype)
