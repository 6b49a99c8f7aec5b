"""Tests for `snt.optimizers.Accumulator` (gradient accumulation)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src.optimizers import accumulate

BATCH = 16


def _det(shape: Any, dtype: tf.DType) -> tf.Tensor:
    n = int(np.prod(shape))
    return tf.reshape(tf.sin(tf.range(1, n + 1, dtype=dtype)) * 0.5, shape)


def _mlp() -> snt.nets.MLP:
    mlp = snt.nets.MLP([8, 3], w_init=_det, b_init=_det)
    mlp(tf.zeros([1, 5]))
    return mlp


def _data(seed: int) -> tuple[tf.Tensor, tf.Tensor]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, 5)).astype(np.float32)
    y = rng.normal(size=(BATCH, 3)).astype(np.float32)
    return tf.constant(x), tf.constant(y)


def _grads(model: snt.Module, x: tf.Tensor, y: tf.Tensor, scale: float = 1.0):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y)) * scale
    return tape.gradient(loss, model.trainable_variables)


OPTIMIZERS = {
    "sgd": lambda: snt.optimizers.SGD(0.1),
    "momentum": lambda: snt.optimizers.Momentum(0.1, 0.9, use_nesterov=True),
    "adam": lambda: snt.optimizers.Adam(0.05),
    "adamw": lambda: snt.optimizers.AdamW(0.05, weight_decay=0.1),
    "rmsprop": lambda: snt.optimizers.RMSProp(0.01, momentum=0.5, centered=True),
    "muon": lambda: snt.optimizers.Muon(
        0.05, fallback=snt.optimizers.Adam(0.05), route=lambda v: v.shape.rank == 2
    ),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_equals_one_step_on_the_concatenated_batch(name):
    reference, reference_opt = _mlp(), OPTIMIZERS[name]()
    model = _mlp()
    acc = snt.optimizers.Accumulator(OPTIMIZERS[name](), 4)

    @tf.function
    def micro_step(x, y):
        return acc.apply(_grads(model, x, y), model.trainable_variables)

    for step in range(2):
        x, y = _data(step)
        reference_opt.apply(_grads(reference, x, y), reference.trainable_variables)
        applied = [
            bool(micro_step(xs, ys))
            for xs, ys in zip(tf.split(x, 4), tf.split(y, 4), strict=True)
        ]
        assert applied == [False, False, False, True]
    assert micro_step.experimental_get_tracing_count() == 1
    for v, r in zip(model.variables, reference.variables, strict=True):
        np.testing.assert_allclose(v.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)
    assert int(acc.count) == 0
    for s in acc.accumulated_updates:
        np.testing.assert_array_equal(s.numpy(), 0)


def test_sum_applies_the_sum_of_the_updates():
    w = tf.Variable([1.0, 2.0])
    acc = snt.optimizers.Accumulator(snt.optimizers.SGD(1.0), 3, average=False)
    for g in ([1.0, 0.0], [2.0, 1.0], [0.5, 0.5]):
        acc.apply([tf.constant(g)], [w])
    np.testing.assert_allclose(w.numpy(), [1.0 - 3.5, 2.0 - 1.5])


def test_one_micro_batch_is_the_optimizer_itself():
    w, v = tf.Variable([1.0, 2.0]), tf.Variable([1.0, 2.0])
    acc = snt.optimizers.Accumulator(snt.optimizers.Adam(0.1), 1)
    opt = snt.optimizers.Adam(0.1)
    for g in ([1.0, -3.0], [2.0, 1.0]):
        assert bool(acc.apply([tf.constant(g)], [w]))
        opt.apply([tf.constant(g)], [v])
    np.testing.assert_allclose(w.numpy(), v.numpy())


def test_sparse_updates_are_summed_into_dense_sums():
    table = tf.Variable(tf.zeros([4, 2]))
    acc = snt.optimizers.Accumulator(snt.optimizers.SGD(1.0), 2, average=False)
    acc.apply([tf.IndexedSlices(tf.ones([2, 2]), tf.constant([1, 1]))], [table])
    np.testing.assert_allclose(acc.accumulated_updates[0].numpy()[1], [2.0, 2.0])
    acc.apply([tf.IndexedSlices(tf.ones([1, 2]), tf.constant([3]))], [table])
    np.testing.assert_allclose(table.numpy(), [[0, 0], [-2, -2], [0, 0], [-1, -1]])


def test_none_updates_leave_their_parameter_alone():
    w, b = tf.Variable([1.0]), tf.Variable([5.0])
    acc = snt.optimizers.Accumulator(snt.optimizers.Adam(0.1), 2)
    for _ in range(2):
        acc.apply([tf.constant([1.0]), None], [w, b])
    assert b.numpy()[0] == 5.0
    assert w.numpy()[0] != 1.0


def test_loss_scale_skips_the_whole_step_if_a_micro_batch_is_not_finite():
    w = tf.Variable([1.0, 2.0])
    loss_scale = snt.precision.DynamicLossScale(initial_scale=8.0)
    opt = snt.optimizers.Momentum(0.5, 0.9)
    acc = snt.optimizers.Accumulator(opt, 2, loss_scale=loss_scale)

    @tf.function
    def micro_step(g):
        # `g` stands for the gradient of the scaled loss.
        return acc.apply([g], [w])

    assert not bool(micro_step(tf.constant([8.0, 8.0])))
    assert not bool(micro_step(tf.constant([np.inf, 8.0])))
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])
    assert not opt.accumulated_momentum or not opt.accumulated_momentum[0].numpy().any()
    assert float(loss_scale.loss_scale) == 4.0
    assert int(acc.count) == 0
    np.testing.assert_array_equal(acc.accumulated_updates[0].numpy(), [0.0, 0.0])
    # The next step is whole again: gradients [1, 2] and [3, 2] at scale 4.
    micro_step(tf.constant([4.0, 8.0]))
    assert bool(micro_step(tf.constant([12.0, 8.0])))
    np.testing.assert_allclose(w.numpy(), [1.0 - 0.5 * 2.0, 2.0 - 0.5 * 2.0])
    assert int(loss_scale.good_steps) == 1
    assert micro_step.experimental_get_tracing_count() == 1


def test_checkpoint_mid_accumulation_restores_sums_and_count(tmp_path):
    def make():
        model = _mlp()
        opt = snt.optimizers.Accumulator(snt.optimizers.Adam(0.05), 3)
        return model, opt

    x, y = _data(0)
    xs, ys = tf.split(x, 3 * [BATCH // 4] + [BATCH // 4]), tf.split(y, 4)
    reference, reference_acc = make()
    for i in range(3):
        reference_acc.apply(
            _grads(reference, xs[i], ys[i]), reference.trainable_variables
        )

    model, acc = make()
    for i in range(2):
        acc.apply(_grads(model, xs[i], ys[i]), model.trainable_variables)
    path = tf.train.Checkpoint(model=model, opt=acc).write(str(tmp_path / "ckpt"))

    restored, restored_acc = make()
    status = tf.train.Checkpoint(model=restored, opt=restored_acc).read(path)
    assert int(restored_acc.count) == 2
    status.assert_existing_objects_matched()
    applied = restored_acc.apply(
        _grads(restored, xs[2], ys[2]), restored.trainable_variables
    )
    assert bool(applied)
    for v, r in zip(restored.variables, reference.variables, strict=True):
        np.testing.assert_allclose(v.numpy(), r.numpy(), rtol=1e-6)


# Replicator -------------------------------------------------------------------


def _devices(n: int) -> list[str]:
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:n]]
    assert len(devices) == n, "conftest.py should configure 4 logical CPUs"
    return devices


def _shard(strategy: tf.distribute.Strategy, t: tf.Tensor) -> Any:
    parts = tf.split(t, strategy.num_replicas_in_sync)
    return strategy.experimental_distribute_values_from_function(
        lambda ctx: parts[ctx.replica_id_in_sync_group]
    )


def _replica_grads(model: snt.Module, x: tf.Tensor, y: tf.Tensor, global_batch: int):
    # The Sonnet convention: normalise by the global batch, sum over replicas.
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(model(x) - y)) / (global_batch * 3)
    return tape.gradient(loss, model.trainable_variables)


def test_replicator_sums_over_replicas_once_per_step(monkeypatch):
    calls = []
    original = accumulate.all_reduce_sum

    def spy(values):
        calls.append(len(values))
        return original(values)

    monkeypatch.setattr(accumulate, "all_reduce_sum", spy)
    replicator = snt.distribute.Replicator(_devices(2))
    reference, reference_opt = _mlp(), snt.optimizers.Adam(0.05)
    with replicator.scope():
        model = _mlp()
        acc = snt.optimizers.Accumulator(snt.optimizers.Adam(0.05), 2)

    def micro_step(x, y):
        grads = _replica_grads(model, x, y, BATCH // 2)
        return acc.apply(grads, model.trainable_variables)

    x, y = _data(0)
    reference_opt.apply(_grads(reference, x, y), reference.trainable_variables)
    for xs, ys in zip(tf.split(x, 2), tf.split(y, 2), strict=True):
        replicator.run(
            micro_step, args=(_shard(replicator, xs), _shard(replicator, ys))
        )
    # Eagerly the branch runs only when it applies: one batched all-reduce
    # per replica, for the one step.
    assert calls == [len(model.trainable_variables)] * 2
    for v, r in zip(model.variables, reference.variables, strict=True):
        for copy in replicator.experimental_local_results(v):
            np.testing.assert_allclose(copy.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


def _collective_ops(graph: Any) -> int:
    return sum(op.type.startswith("Collective") for op in graph.get_operations())


def test_replicator_in_tf_function_all_reduces_only_in_the_applying_branch():
    replicator = snt.distribute.Replicator(_devices(2))
    reference, reference_opt = _mlp(), snt.optimizers.Momentum(0.1, 0.9)
    with replicator.scope():
        model = _mlp()
        acc = snt.optimizers.Accumulator(snt.optimizers.Momentum(0.1, 0.9), 4)

    def micro_step(x, y):
        grads = _replica_grads(model, x, y, BATCH // 4)
        return acc.apply(grads, model.trainable_variables)

    @tf.function
    def step(x, y):
        return replicator.run(micro_step, args=(x, y))

    traces = []
    for seed in range(2):
        x, y = _data(seed)
        reference_opt.apply(_grads(reference, x, y), reference.trainable_variables)
        for xs, ys in zip(tf.split(x, 4), tf.split(y, 4), strict=True):
            step(_shard(replicator, xs), _shard(replicator, ys))
            traces.append(step.experimental_get_tracing_count())
    # Under a strategy the first call, which creates variables, traces twice
    # (TensorFlow's way); the micro-steps after it do not retrace.
    assert len(set(traces)) == 1
    for v, r in zip(model.variables, reference.variables, strict=True):
        for copy in replicator.experimental_local_results(v):
            np.testing.assert_allclose(copy.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)
    concrete = step.get_concrete_function(
        _shard(replicator, tf.zeros([4, 5])), _shard(replicator, tf.zeros([4, 3]))
    )
    # The step graph itself has no collective op; the all-reduce (one per
    # replica) lives in the `tf.cond` branch that applies.
    assert _collective_ops(concrete.graph) == 0
    branches = [
        f
        for f in concrete.graph._functions.values()  # noqa: SLF001
        if _collective_ops(f.graph)
    ]
    assert branches


# Bad input ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, 2.5, "4", None])
def test_bad_num_micro_batches(value):
    with pytest.raises((ValueError, TypeError), match="`num_micro_batches`"):
        snt.optimizers.Accumulator(snt.optimizers.SGD(0.1), value)


def test_num_micro_batches_in_any_integer_spelling():
    opt = snt.optimizers.Accumulator(snt.optimizers.SGD(0.1), np.int64(3))
    assert opt.num_micro_batches == 3 and type(opt.num_micro_batches) is int


def test_bad_optimizer_average_loss_scale():
    with pytest.raises(TypeError, match="`optimizer`"):
        snt.optimizers.Accumulator(object(), 2)
    with pytest.raises(TypeError, match="`average`"):
        snt.optimizers.Accumulator(snt.optimizers.SGD(0.1), 2, average="no")
    with pytest.raises(TypeError, match="`loss_scale`"):
        snt.optimizers.Accumulator(snt.optimizers.SGD(0.1), 2, loss_scale=2.0)


def _state(acc: snt.optimizers.Accumulator, *params: tf.Variable) -> list[np.ndarray]:
    values = [acc.count.numpy()] + [s.numpy() for s in acc.accumulated_updates]
    return values + [p.numpy() for p in params]


def test_apply_with_other_variables_than_accumulated_changes_nothing():
    w, b = tf.Variable([[1.0, 2.0]]), tf.Variable([3.0])
    other = tf.Variable([[1.0, 2.0]], name="other")
    acc = snt.optimizers.Accumulator(snt.optimizers.SGD(0.1), 3)
    acc.apply([tf.ones([1, 2]), tf.ones([1])], [w, b])
    before = _state(acc, w, b, other)
    with pytest.raises(ValueError, match=r"`parameters\[0\]` must be the same"):
        acc.apply([tf.ones([1, 2]), tf.ones([1])], [other, b])
    with pytest.raises(ValueError, match="`parameters` must be the same"):
        acc.apply([tf.ones([1, 2])], [w])
    with pytest.raises(ValueError, match=r"`parameters\[0\]` must be the same"):
        acc.apply([tf.ones([1]), tf.ones([1, 2])], [b, w])
    with pytest.raises(ValueError, match=r"`updates\[1\]` must be None at the same"):
        acc.apply([tf.ones([1, 2]), None], [w, b])
    with pytest.raises(ValueError, match=r"`updates\[0\]` must have the shape"):
        acc.apply([tf.ones([3]), tf.ones([1])], [w, b])
    for a, e in zip(_state(acc, w, b, other), before, strict=True):
        np.testing.assert_array_equal(a, e)


def test_all_reduce_sum_outside_a_strategy_is_the_identity():
    values = [tf.constant(1.0)]
    assert accumulate.all_reduce_sum(values) is values
