"""Tests for `snt.distribute` and for modules/optimizers under a strategy.

The repo-root `conftest.py` configures 4 logical CPU devices, so strategies
here run 2 or 4 replicas on the CPU.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input

ON_READ = tf.VariableSynchronization.ON_READ
GLOBAL_BATCH = 8


def _devices(n: int) -> list[str]:
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:n]]
    assert len(devices) == n, "conftest.py should configure 4 logical CPUs"
    return devices


def _locals(strategy: tf.distribute.Strategy, value: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in strategy.experimental_local_results(value)]


def _shard(strategy: tf.distribute.Strategy, *tensors: tf.Tensor) -> tuple[Any, ...]:
    """Splits each tensor along the batch into one equal part per replica."""
    n = strategy.num_replicas_in_sync
    out = []
    for t in tensors:
        parts = tf.split(t, n)
        out.append(
            strategy.experimental_distribute_values_from_function(
                lambda ctx, parts=parts: parts[ctx.replica_id_in_sync_group]
            )
        )
    return tuple(out)


def _det_init(shape: Any, dtype: tf.DType) -> tf.Tensor:
    """Deterministic, non-constant initial values (not foldable statically)."""
    n = int(np.prod(shape))
    return tf.reshape(tf.sin(tf.range(1, n + 1, dtype=dtype)) * 0.5, shape)


class Net(snt.Module):
    """Linear -> CrossReplicaBatchNorm -> relu -> Linear."""

    def __init__(self, name: str | None = None):
        super().__init__(name=name)
        # No bias before batch norm: its gradient is rounding noise, which
        # Adam would turn into full-size steps.
        self.hidden = snt.Linear(6, with_bias=False, w_init=_det_init, name="hidden")
        self.bn = snt.distribute.CrossReplicaBatchNorm(
            True,
            True,
            snt.ExponentialMovingAverage(0.9, name="moving_mean"),
            snt.ExponentialMovingAverage(0.9, name="moving_variance"),
        )
        self.out = snt.Linear(2, w_init=_det_init, name="out")

    def __call__(self, x: tf.Tensor, is_training: bool) -> tf.Tensor:
        return self.out(tf.nn.relu(self.bn(self.hidden(x), is_training=is_training)))


def _data(step: int) -> tuple[tf.Tensor, tf.Tensor]:
    rng = np.random.default_rng(step)
    x = rng.normal(size=(GLOBAL_BATCH, 3)).astype(np.float32)
    y = rng.normal(size=(GLOBAL_BATCH, 2)).astype(np.float32)
    return tf.constant(x), tf.constant(y)


def _train_step(net: Net, opt: snt.Optimizer) -> Callable[[Any, Any], tf.Tensor]:
    """A replica step: the loss is normalised by the global batch and the
    gradients are all-reduced by the user, as the spec prescribes."""

    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(net(x, is_training=True) - y)) / GLOBAL_BATCH
        grads = tape.gradient(loss, net.trainable_variables)
        grads = tf.distribute.get_replica_context().all_reduce("sum", grads)
        opt.apply(grads, net.trainable_variables)
        return loss

    return step


_OPTIMIZERS = {
    "sgd": lambda: snt.optimizers.SGD(0.1),
    "momentum": lambda: snt.optimizers.Momentum(0.1, 0.9, use_nesterov=True),
    "adam": lambda: snt.optimizers.Adam(0.05),
    "rmsprop": lambda: snt.optimizers.RMSProp(0.01, momentum=0.5, centered=True),
}


def _single_device_run(make_opt: Callable[[], snt.Optimizer], steps: int):
    net, opt = Net(), make_opt()
    step = tf.function(_train_step(net, opt))
    for i in range(steps):
        step(*_data(i))
    return net, opt


# Replicator -----------------------------------------------------------------


def test_replicator_is_a_mirrored_strategy_with_replica_local_variables():
    replicator = snt.distribute.Replicator(_devices(2))
    assert isinstance(replicator, tf.distribute.MirroredStrategy)
    with replicator.scope():
        v = tf.Variable(1.0)
        frozen = tf.Variable(1.0, trainable=False)
        mirrored = tf.Variable(1.0, synchronization=tf.VariableSynchronization.ON_WRITE)
        summed = tf.Variable(1.0, aggregation=tf.VariableAggregation.SUM)
    assert v.trainable and not frozen.trainable
    for var in (v, frozen):
        assert len(var.values) == 2
        for component in var.values:
            assert component.synchronization == ON_READ
            assert component.aggregation == tf.VariableAggregation.ONLY_FIRST_REPLICA
    assert mirrored.values[0].synchronization == tf.VariableSynchronization.ON_WRITE
    assert summed.values[0].aggregation == tf.VariableAggregation.SUM


def test_replicator_variables_created_inside_run_are_replica_local():
    replicator = snt.distribute.Replicator(_devices(2))
    created = []

    def fn():
        if not created:
            created.append(tf.Variable(tf.ones([2])))
        return created[0].read_value()

    replicator.run(fn)
    (v,) = created
    assert [c.synchronization for c in v.values] == [ON_READ, ON_READ]
    assert v.trainable


def test_replicator_assign_from_either_context():
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        v = tf.Variable(0.0)
        v.assign(3.0)  # Cross-replica: every copy.
    assert _locals(replicator, v) == [3.0, 3.0]

    def add_replica_id():
        ctx = tf.distribute.get_replica_context()
        v.assign_add(tf.cast(ctx.replica_id_in_sync_group, tf.float32))

    replicator.run(add_replica_id)  # Replica context: each its own copy.
    assert _locals(replicator, v) == [3.0, 4.0]
    assert float(v.read_value()) == 3.0  # Reads give the first replica's.
    with replicator.scope():
        v.assign_sub(1.0)  # Each copy.
    assert _locals(replicator, v) == [2.0, 3.0]


def test_replicators_with_different_all_reduce_shapes_in_one_process():
    # Plain `MirroredStrategy`s over the same devices share collective keys;
    # each replicator gets its own, so these do not collide.
    for n in (3, 5, 3):
        replicator = snt.distribute.Replicator(_devices(2))

        @tf.function
        def reduce(x, replicator=replicator):
            ctx_fn = lambda t: tf.distribute.get_replica_context().all_reduce(
                "sum", t * 1.0
            )
            return replicator.run(ctx_fn, args=(x,))

        assert _locals(replicator, reduce(tf.ones([n])))[0].tolist() == [2.0] * n


def test_tpu_replicator_is_a_tpu_strategy():
    assert issubclass(snt.distribute.TpuReplicator, tf.distribute.TPUStrategy)
    assert snt.distribute.TpuReplicator.scope is not tf.distribute.TPUStrategy.scope
    if not tf.config.list_logical_devices("TPU"):
        pytest.skip("no TPU: TpuReplicator cannot be constructed here")
    replicator = snt.distribute.TpuReplicator()  # pragma: no cover
    with replicator.scope():  # pragma: no cover
        assert tf.Variable(1.0).values[0].synchronization == ON_READ


def test_public_names():
    assert snt.distribute.__all__ == [
        "create_variables_eagerly",
        "Replicator",
        "TpuReplicator",
        "CrossReplicaBatchNorm",
    ]


# Training under a strategy equals training on one device --------------------


@pytest.mark.parametrize(
    "opt_name,replicas",
    [(name, 2) for name in _OPTIMIZERS] + [("momentum", 4), ("adam", 4)],
)
def test_training_step_matches_single_device(opt_name, replicas):
    make_opt = _OPTIMIZERS[opt_name]
    steps = 3
    reference, ref_opt = _single_device_run(make_opt, steps)

    replicator = snt.distribute.Replicator(_devices(replicas))
    with replicator.scope():
        net, opt = Net(), make_opt()
    replica_step = _train_step(net, opt)

    @tf.function
    def step(x, y):
        # Variables (model and slots) are created lazily by the first call,
        # inside `run`, in the same call as the all-reduces.
        return replicator.run(replica_step, args=(x, y))

    for i in range(steps):
        step(*_shard(replicator, *_data(i)))

    expected = [v.numpy() for v in reference.variables]
    assert [v.name for v in net.variables] == [v.name for v in reference.variables]
    for v, e in zip(net.variables, expected):
        for copy in _locals(replicator, v):
            np.testing.assert_allclose(copy, e, rtol=2e-5, atol=2e-6, err_msg=v.name)
    for v, e in zip(tf.Module.variables.fget(opt), tf.Module.variables.fget(ref_opt)):
        for copy in _locals(replicator, v):
            np.testing.assert_allclose(copy, e.numpy(), rtol=2e-5, atol=2e-6)


def test_module_outputs_match_single_device_with_global_batch():
    replicator = snt.distribute.Replicator(_devices(4))
    with replicator.scope():
        net = Net()
    reference = Net()
    x, _ = _data(0)
    expected = reference(x, is_training=True)
    out = replicator.run(lambda x: net(x, is_training=True), args=_shard(replicator, x))
    np.testing.assert_allclose(
        np.concatenate(_locals(replicator, out)), expected, atol=1e-5
    )
    for v, e in zip(
        net.bn.moving_variance.variables, reference.bn.moving_variance.variables
    ):
        for copy in _locals(replicator, v):
            np.testing.assert_allclose(copy, e.numpy(), rtol=1e-5)


def test_cross_replica_batch_norm_uses_global_statistics():
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        bn = snt.distribute.CrossReplicaBatchNorm(
            False,
            False,
            snt.ExponentialMovingAverage(0.5),
            snt.ExponentialMovingAverage(0.5),
        )
    # Replica 0 sees only 0s and 1s... replica 1 only 10s and 11s: local
    # statistics would differ; global ones are shared.
    x = tf.constant([[0.0], [1.0], [10.0], [11.0]])
    out = replicator.run(lambda t: bn(t, is_training=True), args=_shard(replicator, x))
    mean, var = x.numpy().mean(), x.numpy().var()
    expected = (x.numpy() - mean) / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(
        np.concatenate(_locals(replicator, out)), expected, atol=1e-5
    )
    for copy in _locals(replicator, bn.moving_mean.value):
        np.testing.assert_allclose(copy, [[mean]], rtol=1e-6)
    for copy in _locals(replicator, bn.moving_variance.value):
        np.testing.assert_allclose(copy, [[var]], rtol=1e-6)


def test_cross_replica_batch_norm_outside_a_strategy_equals_batch_norm():
    x = tf.random.stateless_normal([6, 2, 3], seed=[3, 4]) * 3 + 1
    crbn = snt.distribute.CrossReplicaBatchNorm(
        True, True, snt.ExponentialMovingAverage(0.9), snt.ExponentialMovingAverage(0.9)
    )
    bn = snt.BaseBatchNorm(
        True, True, snt.ExponentialMovingAverage(0.9), snt.ExponentialMovingAverage(0.9)
    )
    for training in (True, False):
        np.testing.assert_allclose(
            crbn(x, is_training=training), bn(x, is_training=training), atol=1e-5
        )
    np.testing.assert_allclose(
        crbn.moving_variance.value, bn.moving_variance.value, rtol=1e-5
    )
    assert [v.name for v in crbn.variables][:2] == [
        "cross_replica_batch_norm/offset:0",
        "cross_replica_batch_norm/scale:0",
    ]


def test_cross_replica_batch_norm_half_precision_statistics():
    # Sums over 2^17 elements per channel overflow float16; they are taken
    # in float32.
    x = tf.cast(
        1 + 0.5 * tf.random.stateless_normal([2**17, 1], seed=[1, 1]), tf.float16
    )
    bn = snt.distribute.CrossReplicaBatchNorm(
        False,
        False,
        snt.ExponentialMovingAverage(0.5),
        snt.ExponentialMovingAverage(0.5),
    )
    out = bn(x, is_training=True)
    assert out.dtype == tf.float16
    np.testing.assert_allclose(bn.moving_mean.value.numpy(), [[1.0]], atol=0.01)
    np.testing.assert_allclose(bn.moving_variance.value.numpy(), [[0.25]], atol=0.01)
    assert np.all(np.isfinite(out.numpy()))


def test_cross_replica_batch_norm_rejects_cross_replica_context():
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        bn = snt.distribute.CrossReplicaBatchNorm(
            True,
            True,
            snt.ExponentialMovingAverage(0.9),
            snt.ExponentialMovingAverage(0.9),
        )
        with pytest.raises(TypeError, match="must be called in a replica context"):
            bn(tf.ones([2, 3]), is_training=True)


# Lazy creation inside `strategy.run` inside `tf.function` ------------------


@pytest.mark.parametrize(
    "strategy_cls", [tf.distribute.MirroredStrategy, snt.distribute.Replicator]
)
@pytest.mark.parametrize("is_training,local_stats", [(True, False), (False, True)])
def test_cross_replica_batch_norm_created_inside_run_in_tf_function(
    strategy_cls, is_training, local_stats
):
    # With TensorFlow 2.21 this used to fail at run time with "You must feed a
    # value for placeholder tensor": the variables' initialization could not
    # be lifted out of the function and the fallback broke the all-reduce.
    strategy = strategy_cls(_devices(2))
    with strategy.scope():
        bn = snt.distribute.CrossReplicaBatchNorm(
            True,
            True,
            snt.ExponentialMovingAverage(0.9),
            snt.ExponentialMovingAverage(0.9),
        )

    @tf.function
    def step(x):
        return strategy.run(
            lambda t: bn(t, is_training=is_training, test_local_stats=local_stats),
            args=(x,),
        )

    x = tf.constant([[0.0, 1.0], [2.0, 5.0], [4.0, -1.0], [6.0, 3.0]])
    (sx,) = _shard(strategy, x)
    out = np.concatenate(_locals(strategy, step(sx)))
    mean, var = x.numpy().mean(0), x.numpy().var(0)
    np.testing.assert_allclose(out, (x.numpy() - mean) / np.sqrt(var + 1e-5), atol=1e-5)
    assert len(bn.variables) == 8
    for v in bn.variables:
        copies = _locals(strategy, v)
        assert len(copies) == 2
        np.testing.assert_array_equal(copies[0], copies[1])
    step(sx)  # The second call reuses the variables.


def test_random_initializers_inside_run_in_tf_function_agree_across_replicas():
    replicator = snt.distribute.Replicator(_devices(4))
    with replicator.scope():
        lin = snt.Linear(5)
        bn = snt.distribute.CrossReplicaBatchNorm(
            True,
            True,
            snt.ExponentialMovingAverage(0.9),
            snt.ExponentialMovingAverage(0.9),
        )

    @tf.function
    def step(x):
        return replicator.run(lambda t: bn(lin(t), is_training=True), args=(x,))

    step(_shard(replicator, tf.ones([8, 3]))[0])
    for v in lin.variables:
        copies = _locals(replicator, v)
        for c in copies[1:]:
            np.testing.assert_array_equal(c, copies[0])
    assert np.std(_locals(replicator, lin.w)[0]) > 0  # Random, not zeros.


# Optimizers in and out of a strategy ---------------------------------------


def test_optimizer_apply_in_cross_replica_context_updates_every_copy():
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        w = tf.Variable([1.0, 2.0])
        emb = tf.Variable(tf.ones([3, 2]))
        opt = snt.optimizers.Adam(0.1)
        opt.apply(
            [tf.constant([1.0, -1.0]), tf.IndexedSlices(tf.ones([1, 2]), [1])], [w, emb]
        )
    ref_w, ref_emb = tf.Variable([1.0, 2.0]), tf.Variable(tf.ones([3, 2]))
    ref_opt = snt.optimizers.Adam(0.1)
    ref_opt.apply(
        [tf.constant([1.0, -1.0]), tf.IndexedSlices(tf.ones([1, 2]), [1])],
        [ref_w, ref_emb],
    )
    for v, ref in (
        (w, ref_w),
        (emb, ref_emb),
        (opt.m[1], ref_opt.m[1]),
        (opt.step, ref_opt.step),
    ):
        for copy in _locals(replicator, v):
            np.testing.assert_allclose(copy, ref.numpy(), rtol=1e-6)
    # Outside any scope the variables still know their strategy.
    opt.apply([tf.constant([1.0, -1.0]), None], [w, emb])
    ref_opt.apply([tf.constant([1.0, -1.0]), None], [ref_w, ref_emb])
    for copy in _locals(replicator, w):
        np.testing.assert_allclose(copy, ref_w.numpy(), rtol=1e-6)


@pytest.mark.parametrize("opt_name", list(_OPTIMIZERS))
def test_sparse_updates_inside_run(opt_name):
    # Replica-local variables have no `scatter_*` methods; the optimizers
    # update the local copy through its handle.
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        emb = tf.Variable(tf.reshape(tf.range(8, dtype=tf.float32), [4, 2]))
        opt = _OPTIMIZERS[opt_name]()
    ref_emb = tf.Variable(tf.reshape(tf.range(8, dtype=tf.float32), [4, 2]))
    ref_opt = _OPTIMIZERS[opt_name]()
    ids = tf.constant([3, 0, 3, 1])

    def grads(table, ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(tf.gather(table, ids)))
        return tape.gradient(loss, table)

    @tf.function
    def step(ids):
        def fn(ids):
            g = grads(emb, ids)
            assert isinstance(g, tf.IndexedSlices)
            g = tf.distribute.get_replica_context().all_reduce("sum", g)
            opt.apply([g], [emb])

        replicator.run(fn, args=(ids,))

    for _ in range(2):
        step(_shard(replicator, ids)[0])
        ref_opt.apply([grads(ref_emb, ids)], [ref_emb])
    for copy in _locals(replicator, emb):
        np.testing.assert_allclose(copy, ref_emb.numpy(), rtol=1e-5)
    np.testing.assert_array_equal(_locals(replicator, emb)[0][2], [4.0, 5.0])


def test_optimizer_rejects_variables_made_outside_the_strategy():
    replicator = snt.distribute.Replicator(_devices(2))
    outside = tf.Variable([1.0])
    with pytest.raises(
        ValueError, match=r"`parameters\[0\]` must have one copy per replica"
    ):
        replicator.run(lambda: snt.optimizers.SGD(0.1).apply([tf.ones([1])], [outside]))
    with replicator.scope():
        inside = tf.Variable([1.0])
    adam = snt.optimizers.Adam()
    with pytest.raises(ValueError, match="`step` must have one copy per replica"):
        replicator.run(lambda: adam.apply([tf.ones([1])], [inside]))
    momentum = snt.optimizers.Momentum(0.1, 0.9)
    momentum.apply([tf.ones([1])], [outside])  # Slots for a plain variable...
    with pytest.raises(ValueError, match="must have replica-local optimizer state"):
        replicator.run(lambda: momentum.apply([tf.ones([1])], [inside]))
    np.testing.assert_allclose(_locals(replicator, inside), [[1.0], [1.0]])
    # A first `apply` outside the strategy still makes replica-local slots
    # for replica-local parameters.
    late = snt.optimizers.Momentum(0.1, 0.9)
    late.apply([tf.ones([1])], [inside])
    replicator.run(lambda: late.apply([tf.ones([1])], [inside]))
    np.testing.assert_allclose(_locals(replicator, inside), [[0.71], [0.71]], rtol=1e-6)


# Checkpoints -----------------------------------------------------------------


def _build_replicated(
    replicator: snt.distribute.Replicator, make_opt
) -> tuple[Net, Any]:
    with replicator.scope():
        net, opt = Net(), make_opt()
    step = tf.function(lambda x, y: replicator.run(_train_step(net, opt), args=(x, y)))
    step(*_shard(replicator, *_data(0)))
    return net, opt


def test_checkpoint_saved_under_strategy_restores_outside(tmp_path):
    replicator = snt.distribute.Replicator(_devices(2))
    net, opt = _build_replicated(replicator, _OPTIMIZERS["adam"])
    path = tf.train.Checkpoint(net=net, opt=opt).write(str(tmp_path / "ckpt"))
    plain, plain_opt = Net(), _OPTIMIZERS["adam"]()
    status = tf.train.Checkpoint(net=plain, opt=plain_opt).read(path)
    # Restore on create: variables and slots receive the saved values when built.
    _train_step(plain, plain_opt)(*_data(1))
    status.assert_consumed()
    again = tf.train.Checkpoint(net=plain, opt=plain_opt)
    again.read(path).assert_consumed()
    for v, saved in zip(plain.variables, net.variables):
        np.testing.assert_array_equal(v.numpy(), _locals(replicator, saved)[0])
    assert int(plain_opt.step) == 1


def test_checkpoint_saved_outside_restores_under_strategy(tmp_path):
    plain, plain_opt = _single_device_run(_OPTIMIZERS["rmsprop"], 2)
    path = tf.train.Checkpoint(net=plain, opt=plain_opt).write(str(tmp_path / "ckpt"))
    replicator = snt.distribute.Replicator(_devices(4))
    net, opt = _build_replicated(replicator, _OPTIMIZERS["rmsprop"])
    with replicator.scope():
        tf.train.Checkpoint(net=net, opt=opt).read(path).assert_consumed()
    for v, saved in zip(net.variables, plain.variables):
        for copy in _locals(replicator, v):
            np.testing.assert_array_equal(copy, saved.numpy())
    for v, saved in zip(opt.mg, plain_opt.mg):
        for copy in _locals(replicator, v):
            np.testing.assert_array_equal(copy, saved.numpy())


def test_restore_on_create_inside_run(tmp_path):
    plain, plain_opt = _single_device_run(_OPTIMIZERS["momentum"], 1)
    path = tf.train.Checkpoint(net=plain).write(str(tmp_path / "ckpt"))
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        net = Net()
        status = tf.train.Checkpoint(net=net).read(path)
    replicator.run(
        lambda x: net(x, is_training=False), args=_shard(replicator, _data(0)[0])
    )
    status.assert_consumed()
    for v, saved in zip(net.variables, plain.variables):
        for copy in _locals(replicator, v):
            np.testing.assert_array_equal(copy, saved.numpy())


# create_variables_eagerly -------------------------------------------------


def test_create_variables_eagerly_gives_the_same_results():
    lin_a = snt.Linear(3, w_init=_det_init)
    lin_b = snt.Linear(3, w_init=_det_init)
    plain = tf.function(lin_a)
    eager = tf.function(snt.distribute.create_variables_eagerly(lin_b))
    x = tf.ones([2, 4])
    np.testing.assert_allclose(plain(x), eager(x))
    assert [v.name for v in lin_a.variables] == [v.name for v in lin_b.variables]


@pytest.mark.parametrize("autograph", [True, False])
def test_create_variables_eagerly_of_a_module(monkeypatch, autograph):
    # AutoGraph must not be pointed (by `__wrapped__`) at the module object:
    # with strict conversion that failed ("module, class, method, function
    # ... expected").
    monkeypatch.setenv("AUTOGRAPH_STRICT_CONVERSION", "1")
    for module, x in (
        (snt.Linear(2, w_init=snt.initializers.Ones()), tf.ones([1, 3])),
        (snt.Flatten(), tf.ones([2, 3, 4])),
        (snt.GroupNorm(2), tf.ones([2, 4])),
    ):
        wrapped = snt.distribute.create_variables_eagerly(module)
        assert not hasattr(wrapped, "__wrapped__")
        forward = tf.function(wrapped, autograph=autograph)
        np.testing.assert_allclose(forward(x), module(x))
    f = snt.distribute.create_variables_eagerly(_plain_function)
    assert f.__wrapped__ is _plain_function and f.__name__ == "_plain_function"


def _plain_function(x):
    return x + 1


def test_create_variables_eagerly_runs_initializers_eagerly_under_a_strategy():
    seen = []

    class Spy(snt.initializers.Zeros):
        def __call__(self, shape, dtype):
            seen.append(tf.executing_eagerly())
            return super().__call__(shape, dtype)

    strategy = snt.distribute.Replicator(_devices(2))
    with strategy.scope():
        lin = snt.Linear(2, b_init=Spy())
    step = tf.function(snt.distribute.create_variables_eagerly(lin))
    strategy.run(step, (tf.ones([1, 2]),))
    assert seen == [True]
    # Without the wrapper, under a strategy, the initializer runs in the graph
    # (Sonnet only computes initial values eagerly by itself outside one).
    seen.clear()
    with strategy.scope():
        lin = snt.Linear(2, b_init=Spy())
    strategy.run(tf.function(lin), (tf.ones([1, 2]),))
    assert seen == [False]
    # After the wrapper returns, initializers run where they are called.
    seen.clear()
    Spy()([2], tf.float32)
    tf.function(lambda: Spy()([2], tf.float32))()
    assert seen == [True, False]


def test_create_variables_eagerly_keeps_input_dependent_initial_values():
    made = []

    @tf.function
    @snt.distribute.create_variables_eagerly
    def f(x):
        if not made:
            made.append(tf.Variable(x * 2))
            made.append(tf.Variable(tf.zeros([2])))
        return made[0] + made[1]

    np.testing.assert_allclose(f(tf.constant([1.0, 2.0])), [2.0, 4.0])


def test_create_variables_eagerly_under_replicator():
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        lin = snt.Linear(3)

    @tf.function
    def step(x):
        return replicator.run(snt.distribute.create_variables_eagerly(lin), args=(x,))

    step(tf.ones([2, 2]))
    copies = _locals(replicator, lin.w)
    np.testing.assert_array_equal(copies[0], copies[1])


# Bad input -------------------------------------------------------------------

_CRBN_ARGS = [
    "create_scale",
    "create_offset",
    "moving_mean",
    "moving_variance",
    "eps",
    "scale_init",
    "offset_init",
    "data_format",
    "name",
]


def _crbn_kwargs() -> dict[str, Any]:
    return {
        "create_scale": True,
        "create_offset": False,
        "moving_mean": snt.ExponentialMovingAverage(0.5),
        "moving_variance": snt.ExponentialMovingAverage(0.5),
    }


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(_CRBN_ARGS), bad_input.junk())
def test_cross_replica_batch_norm_junk_constructor_arguments(argument, value):
    kwargs = {**_crbn_kwargs(), argument: value}
    ok, module = bad_input.outcome(
        lambda: snt.distribute.CrossReplicaBatchNorm(**kwargs), [argument]
    )
    if ok:
        # Metrics are checked when first used, as in the original.
        bad_input.outcome(
            lambda: module(tf.ones([2, 3]), is_training=True), ["inputs", argument]
        )


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["add", "drop", "dtype", "channels"]), bad_input.junk())
def test_cross_replica_batch_norm_bad_inputs(kind, flag):
    bn = snt.distribute.CrossReplicaBatchNorm(**_crbn_kwargs())
    x = tf.random.stateless_normal([4, 3, 2], seed=[0, 1])
    bn(x, is_training=True)
    before = bad_input.snapshot(bn)
    bad = {
        "add": x[None],
        "drop": x[0],
        "dtype": tf.cast(x, tf.float64),
        "channels": tf.pad(x, [[0, 0], [0, 0], [0, 1]]),
    }[kind]
    ok, _ = bad_input.outcome(lambda: bn(bad, is_training=True), ["inputs"])
    assert not ok
    bad_input.assert_unchanged(bn, before)
    ok, _ = bad_input.outcome(lambda: bn(x, is_training=flag), ["is_training"])
    if not ok:
        bad_input.assert_unchanged(bn, before)


class _AssertsEager(snt.initializers.Initializer):
    def __call__(self, shape, dtype):
        assert tf.executing_eagerly()
        return tf.ones(shape, dtype) * float(tf.reduce_sum(tf.ones([2])).numpy())


@pytest.mark.parametrize("autograph", [True, False])
def test_create_variables_eagerly_runs_user_initializers_eagerly(autograph):
    init = _AssertsEager()
    call = _AssertsEager.__call__
    f = tf.function(
        snt.distribute.create_variables_eagerly(lambda: init([2], tf.float32)),
        autograph=autograph,
    )
    np.testing.assert_allclose(f(), [2.0, 2.0])
    # The classes get their own `__call__` back when the wrapper returns, so
    # outside it an initializer runs where it is called.
    assert _AssertsEager.__call__ is call
    with pytest.raises(AssertionError):
        tf.function(lambda: init([2], tf.float32))()


def test_create_variables_eagerly_initializer_falls_back_to_the_graph():
    class Scaled(snt.initializers.Initializer):
        scale: Any = None

        def __call__(self, shape, dtype):
            return tf.ones(shape, dtype) * self.scale

    init = Scaled()

    @tf.function
    def f(x):
        init.scale = x  # A traced tensor: it cannot be read eagerly.
        return snt.distribute.create_variables_eagerly(lambda: init([2], tf.float32))()

    np.testing.assert_allclose(f(tf.constant(3.0)), [3.0, 3.0])


def test_create_variables_eagerly_restores_initializers_after_an_error():
    call = snt.initializers.Ones.__call__

    def fails():
        assert snt.initializers.Ones.__call__ is not call
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tf.function(snt.distribute.create_variables_eagerly(fails))()
    assert snt.initializers.Ones.__call__ is call


def test_create_variables_eagerly_initializers_nested_and_in_other_threads():
    seen: list[tuple[str, bool]] = []

    class Spy(snt.initializers.Initializer):
        def __call__(self, shape, dtype):
            seen.append((threading.current_thread().name, tf.executing_eagerly()))
            return tf.zeros(shape, dtype)

    def other_thread():
        # Traced while the main thread's scope is open: not this thread's.
        tf.function(lambda: Spy()([1], tf.float32))()

    def inner():
        return Spy()([1], tf.float32)

    def outer():
        snt.distribute.create_variables_eagerly(inner)()  # Nested scope.
        thread = threading.Thread(target=other_thread, name="other")
        thread.start()
        thread.join()
        return Spy()([1], tf.float32)  # The outer scope is still open.

    tf.function(snt.distribute.create_variables_eagerly(outer))()
    main = threading.current_thread().name
    assert seen == [(main, True), ("other", False), (main, True)]
