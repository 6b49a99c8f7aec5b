"""Training script for the fault-tolerance tests (`tests/test_fault_tolerance.py`).

Trains `snt.nets.MLP` with `snt.optimizers.Adam` for `STEPS` steps with op
determinism and fixed seeds, saving a `tf.train.CheckpointManager` checkpoint
of the model, the optimizer (with its slots and step counter) and the data
position every `EVERY` steps. On start it restores the latest checkpoint in
`<out>/ckpt`, if any, and carries on from there; at the end it writes every
variable to `<out>/final<task>.npz` and where it started to
`<out>/resumed<task>.json`.

    python tests/fault_tolerance_worker.py OUT [--hang-after N]
    python tests/fault_tolerance_worker.py OUT --task I --ports P0,P1 [...]

With `--ports`, the process is worker `--task` of a
`tf.distribute.MultiWorkerMirroredStrategy` cluster on those loopback ports;
each worker trains on its share of the same global batches and the chief
(task 0) owns `<out>/ckpt` (the other workers save to scratch directories, as
every worker must take part in saving, and all restore from the chief's).

`--hang-after N` writes `<out>/reached<task>` after step `N` (and its
checkpoint, if any) and then stops making progress, so the test can kill the
process at a known point mid-run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from typing import Any

import numpy as np

STEPS = 12
EVERY = 3
GLOBAL_BATCH = 8
FEATURES = 5
CLASSES = 3
LEARNING_RATE = 0.01


def batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    """The global batch for `step`: a pure function of the data position."""
    rng = np.random.default_rng(1000 + step)
    x = rng.normal(size=(GLOBAL_BATCH, FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=GLOBAL_BATCH).astype(np.int32)
    return x, y


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--ports", default="")
    parser.add_argument("--hang-after", type=int, default=-1)
    return parser.parse_args()


def _write_atomically(path: str, text: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main() -> None:
    args = _parse()
    ports = [int(p) for p in args.ports.split(",")] if args.ports else []
    if ports:
        os.environ["TF_CONFIG"] = json.dumps(
            {
                "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                "task": {"type": "worker", "index": args.task},
            }
        )
    import tensorflow as tf

    import sonnet as snt

    tf.config.experimental.enable_op_determinism()
    tf.random.set_seed(0)

    strategy = tf.distribute.MultiWorkerMirroredStrategy() if ports else None
    replicas = len(ports) or 1
    share = GLOBAL_BATCH // replicas

    with strategy.scope() if strategy else contextlib.nullcontext():
        model = snt.nets.MLP([16, 8, CLASSES], name="mlp")
        # Variables exist before the restore, so it assigns them directly.
        model(tf.zeros([1, FEATURES]))
    # Sonnet optimizers reject strategies whose variables are mirrored; the
    # all-reduced gradients are applied in cross-replica context instead,
    # which updates this worker's copy (the same update on every worker).
    optimizer = snt.optimizers.Adam(LEARNING_RATE)
    # The data position: the next step to train on.
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_position")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)

    chief_dir = os.path.join(args.out, "ckpt")
    own_dir = (
        chief_dir if args.task == 0 else os.path.join(args.out, f"scratch{args.task}")
    )
    manager = tf.train.CheckpointManager(checkpoint, own_dir, max_to_keep=2)
    latest = tf.train.latest_checkpoint(chief_dir)
    status = None
    if latest is not None:
        # Adam's slots are created by its first `apply` and restored then.
        status = checkpoint.restore(latest)
        status.assert_existing_objects_matched()
    resumed_from = int(step.numpy())

    def loss_fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        logits = model(x)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        return tf.reduce_sum(losses) / GLOBAL_BATCH

    if strategy is None:

        @tf.function
        def train_step(x: tf.Tensor, y: tf.Tensor) -> None:
            with tf.GradientTape() as tape:
                loss = loss_fn(x, y)
            params = list(model.trainable_variables)
            optimizer.apply(tape.gradient(loss, params), params)

    else:

        def replica_grads(x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
            with tf.GradientTape() as tape:
                loss = loss_fn(x, y)
            grads = tape.gradient(loss, model.trainable_variables)
            return tf.distribute.get_replica_context().all_reduce("sum", grads)

        @tf.function
        def train_step(x: Any, y: Any) -> None:
            grads = strategy.run(replica_grads, args=(x, y))
            local = [strategy.experimental_local_results(g)[0] for g in grads]
            optimizer.apply(local, list(model.trainable_variables))

    def shard(value: np.ndarray) -> Any:
        if strategy is None:
            return tf.constant(value)
        return strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(
                value[ctx.replica_id_in_sync_group * share :][:share]
            )
        )

    while int(step.numpy()) < STEPS:
        x, y = batch(int(step.numpy()))
        train_step(shard(x), shard(y))
        step.assign_add(1)
        done = int(step.numpy())
        if done % EVERY == 0:
            manager.save(checkpoint_number=done)
        if done == args.hang_after:
            _write_atomically(os.path.join(args.out, f"reached{args.task}"), str(done))
            while True:  # Wait to be killed.
                time.sleep(1)

    del status
    variables = list(model.variables) + list(tf.Module.variables.fget(optimizer))
    values = {v.name: np.asarray(v.numpy()) for v in variables}
    values["data_position"] = step.numpy()
    np.savez(os.path.join(args.out, f"final{args.task}.npz"), **values)
    _write_atomically(
        os.path.join(args.out, f"resumed{args.task}.json"),
        json.dumps({"resumed_from": resumed_from}),
    )


if __name__ == "__main__":
    main()
