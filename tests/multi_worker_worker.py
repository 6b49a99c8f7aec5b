"""One worker of the multi-worker training test (`tests/test_multi_worker.py`).

Run as `python tests/multi_worker_worker.py <task index> <port,port> <out dir>`:
joins a `tf.distribute.MultiWorkerMirroredStrategy` cluster of workers on
loopback ports, trains `Net` (with `snt.distribute.CrossReplicaBatchNorm`) for
`STEPS` steps, each worker on its half of the same global batches, then writes
its variables to `<out dir>/worker<index>.npz` and a checkpoint (the chief to
`<out dir>/ckpt`, the others to a scratch directory, as TensorFlow requires
every worker to take part in saving).

The model, data and step are also imported by the test for the single-process
reference, so both runs share one definition.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

GLOBAL_BATCH = 8
STEPS = 3
LEARNING_RATE = 0.05
_START = time.monotonic()


def det_init(shape: Any, dtype: Any) -> Any:
    """Deterministic initial values, the same in every process."""
    import tensorflow as tf

    n = int(np.prod(shape))
    return tf.reshape(tf.sin(tf.range(1, n + 1, dtype=dtype)) * 0.5, shape)


def make_net() -> Any:
    import tensorflow as tf

    import sonnet as snt

    class Net(snt.Module):
        def __init__(self) -> None:
            super().__init__(name="net")
            self.hidden = snt.Linear(6, with_bias=False, w_init=det_init, name="hidden")
            self.bn = snt.distribute.CrossReplicaBatchNorm(
                True,
                True,
                snt.ExponentialMovingAverage(0.9, name="moving_mean"),
                snt.ExponentialMovingAverage(0.9, name="moving_variance"),
            )
            self.out = snt.Linear(2, w_init=det_init, name="out")

        def __call__(self, x: tf.Tensor, is_training: bool) -> tf.Tensor:
            h = self.bn(self.hidden(x), is_training=is_training)
            return self.out(tf.nn.relu(h))

    return Net()


def make_optimizer() -> Any:
    import sonnet as snt

    return snt.optimizers.Adam(LEARNING_RATE)


def batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(step)
    x = rng.normal(size=(GLOBAL_BATCH, 3)).astype(np.float32)
    y = rng.normal(size=(GLOBAL_BATCH, 2)).astype(np.float32)
    return x, y


def gradients(net: Any, x: Any, y: Any) -> list[Any]:
    """This replica's share of the gradients of the global-batch loss,
    all-reduced over the replicas (the identity without a strategy)."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(net(x, is_training=True) - y)) / GLOBAL_BATCH
    grads = tape.gradient(loss, net.trainable_variables)
    return tf.distribute.get_replica_context().all_reduce("sum", grads)


def variables_of(net: Any, opt: Any) -> dict[str, np.ndarray]:
    import tensorflow as tf

    found = list(net.variables) + list(tf.Module.variables.fget(opt))
    return {f"{i:02d} {v.name}": np.asarray(v.numpy()) for i, v in enumerate(found)}


def main(task_index: int, ports: list[int], out_dir: str) -> None:
    os.environ["TF_CONFIG"] = json.dumps(
        {
            "cluster": {"worker": [f"localhost:{p}" for p in ports]},
            "task": {"type": "worker", "index": task_index},
        }
    )
    _log("importing TensorFlow")
    import tensorflow as tf

    _log("joining the cluster")
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        net = make_net()
    # Sonnet optimizers only run under strategies with replica-local
    # variables; here the all-reduced gradients are applied in cross-replica
    # context (outside `strategy.scope()`), which updates this worker's copy.
    opt = make_optimizer()
    half = GLOBAL_BATCH // len(ports)

    def shard(value: np.ndarray) -> Any:
        return strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(value[ctx.replica_id_in_sync_group * half :][:half])
        )

    @tf.function
    def train_step(x: Any, y: Any) -> None:
        grads = strategy.run(lambda a, b: gradients(net, a, b), args=(x, y))
        local = [strategy.experimental_local_results(g)[0] for g in grads]
        opt.apply(local, list(net.trainable_variables))

    for step in range(STEPS):
        _log(f"step {step}")
        x, y = batch(step)
        train_step(shard(x), shard(y))
    _log("saving")

    np.savez(os.path.join(out_dir, f"worker{task_index}.npz"), **variables_of(net, opt))
    prefix = (
        os.path.join(out_dir, "ckpt")
        if task_index == 0
        else os.path.join(out_dir, f"scratch{task_index}", "ckpt")
    )
    tf.train.Checkpoint(net=net, opt=opt).write(prefix)
    _log("done")


def _log(message: str) -> None:
    print(f"[{time.monotonic() - _START:6.1f}s] {message}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), [int(p) for p in sys.argv[2].split(",")], sys.argv[3])
    # The collective runtime's threads can keep a finished worker alive at
    # interpreter shutdown; the results are on disk, so leave at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
