"""Data-parallel training of `snt.nets.Cifar10ConvNet` on several devices or processes.

    python examples/distributed_training.py                # 4 virtual CPU replicas
    python examples/distributed_training.py --replicas 2
    python examples/distributed_training.py --workers 2    # 2 processes
    python examples/distributed_training.py --quick        # a few seconds of training
    python examples/distributed_training.py --data cifar-10-python.tar.gz \\
        --widths 64 64 128 128 --strides 1 2 1 2 --steps 5000

Sonnet's recipe for data parallelism: every replica runs the same step on its
own shard of the batch, the script averages the gradients across replicas
(`tf.distribute.get_replica_context().all_reduce`), and every replica applies the
same update, so all copies of the variables stay equal. Metrics are combined
with `strategy.reduce`.

- One process (default): `snt.distribute.Replicator` over `--replicas` virtual
  CPU devices (on a machine with GPUs, pass their names instead). Its variables
  are replica-local: each replica's optimizer updates its own copy.
- `--workers N`: the script starts N local worker processes itself, each told
  its place in the cluster by `TF_CONFIG` (free loopback ports), trains with
  `tf.distribute.MultiWorkerMirroredStrategy` (one replica per process) and
  waits for them; if one fails the others are stopped.

Images: the 8x8 digits upsampled to 16x16 and repeated over 3 channels by
default, or CIFAR-10 (`--data`). The network is narrow by default so that a CPU
run takes a minute or two. Writes `loss.png` to `--out` (default
`examples/out/distributed_training`) and, from the chief, TensorBoard logs to
`--logdir`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import tools


def parse_args() -> argparse.Namespace:
    parser = tools.parser(__doc__)
    tools.add_common_arguments(
        parser, "distributed_training", steps=400, quick_steps=40
    )
    parser.add_argument("--replicas", type=int, default=4, help="virtual CPUs")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--task-index", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch")
    parser.add_argument(
        "--learning-rate", type=float, default=0.05, help="momentum SGD's"
    )
    parser.add_argument(
        "--widths",
        type=int,
        nargs="+",
        default=[16, 32, 32],
        help="output channels of each convolution",
    )
    parser.add_argument(
        "--strides",
        type=int,
        nargs="+",
        default=[1, 2, 1],
        help="stride of each convolution",
    )
    args = parser.parse_args()
    tools.finish_arguments(args)
    if len(args.widths) != len(args.strides):
        parser.error("--widths and --strides need one value per layer each")
    return args


# ---------------------------------------------------------------------------
# Launching worker processes (`--workers N`).


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_workers(command: list[str], num_workers: int) -> int:
    """Runs `command --task-index i` once per worker, each with its `TF_CONFIG`.

    Returns 0 if every worker succeeded, else 1 (as soon as one fails, the
    others are stopped: they would wait for it forever).
    """
    cluster = {"worker": [f"localhost:{free_port()}" for _ in range(num_workers)]}
    workers = []
    for index in range(num_workers):
        config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = {**os.environ, "TF_CONFIG": json.dumps(config)}
        task = [*command, "--task-index", str(index)]
        workers.append(subprocess.Popen(task, env=env))
    print(f"started {num_workers} workers on {', '.join(cluster['worker'])}")
    try:
        while True:
            codes = [w.poll() for w in workers]  # None while running.
            if None not in codes or any(codes):
                break
            time.sleep(0.5)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
            w.wait()
    codes = [w.returncode for w in workers]
    if any(codes):
        print(f"worker exit codes: {codes}", file=sys.stderr)
        return 1
    return 0


# The command line is read before TensorFlow loads (seconds): `--help` and
# mistakes in arguments answer at once, and the launcher of `--workers N`
# needs no TensorFlow.
if __name__ == "__main__":
    ARGS = parse_args()
    if ARGS.workers > 1 and ARGS.task_index is None:
        sys.exit(launch_workers([sys.executable, *sys.argv], ARGS.workers))
tools.import_tensorflow()

import numpy as np
import tensorflow as tf

import sonnet as snt

import datasets
import plots

# ---------------------------------------------------------------------------
# Training (one process, or one of the workers).


class MultiWorkerReplicator(tf.distribute.MultiWorkerMirroredStrategy):
    """`MultiWorkerMirroredStrategy` with replica-local variables, like `Replicator`.

    By default this strategy's variables are mirrored, and a mirrored variable
    cannot be assigned from inside a replica without a cross-replica
    aggregation. Replica-local variables let each replica's `BatchNorm` update
    its own moving averages, as under `snt.distribute.Replicator`.
    """

    def scope(self) -> Any:  # `run` enters `scope()` too.
        return _replica_local_scope(super().scope())


@contextlib.contextmanager
def _replica_local_scope(parent: Any) -> Iterator[None]:
    def replica_local(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        if kwargs.get("synchronization") in (None, tf.VariableSynchronization.AUTO):
            kwargs["synchronization"] = tf.VariableSynchronization.ON_READ
            kwargs["aggregation"] = tf.VariableAggregation.ONLY_FIRST_REPLICA
            if kwargs.get("trainable") is None:
                kwargs["trainable"] = True
        return next_creator(**kwargs)

    with parent, tf.variable_creator_scope(replica_local):
        yield


def make_strategy(args: argparse.Namespace) -> tf.distribute.Strategy:
    if args.task_index is not None:
        # Reads TF_CONFIG. One replica per process on CPU (one per GPU if any).
        return MultiWorkerReplicator()
    # Logical devices must be set up before TensorFlow initialises its runtime.
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * args.replicas
    )
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    return snt.distribute.Replicator(devices)


def load_images(path: str | None) -> datasets.Dataset:
    data = datasets.load(path)
    if data.name != "digits":
        return data

    # 8x8 grey digits -> 16x16 RGB images, so the ConvNet has room to stride.
    def to_rgb(x: np.ndarray) -> np.ndarray:
        return np.repeat(np.repeat(np.repeat(x, 2, axis=1), 2, axis=2), 3, axis=3)

    return data._replace(x_train=to_rgb(data.x_train), x_test=to_rgb(data.x_test))


def train(args: argparse.Namespace) -> None:
    chief = not args.task_index  # None (one process) or worker 0.
    strategy = make_strategy(args)
    replicas = strategy.num_replicas_in_sync
    tf.random.set_seed(args.seed)
    data = load_images(args.data)
    if chief:
        print(
            f"{type(strategy).__name__} with {replicas} replicas; {data.name}: "
            f"{len(data.x_train)} training images of shape {data.x_train.shape[1:]}"
        )

    with strategy.scope():
        model = snt.nets.Cifar10ConvNet(
            num_classes=data.num_classes,
            output_channels=args.widths,
            strides=args.strides,
        )
        optimizer = snt.optimizers.Momentum(args.learning_rate, momentum=0.9)
    # Sonnet optimizers update each replica's copy from inside `strategy.run`
    # under a `Replicator`. They refuse `MultiWorkerMirroredStrategy` there and
    # are called from cross-replica context instead (below), where they update
    # every local copy of each variable with that replica's (equal) gradient.
    apply_in_replica = isinstance(strategy, snt.distribute.Replicator)

    def replica_step(images: tf.Tensor, labels: tf.Tensor) -> Any:
        with tf.GradientTape() as tape:
            logits = model(images, is_training=True)["logits"]
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            )
        params = model.trainable_variables
        grads = tape.gradient(loss, params)
        # Each replica saw its own shard of the batch: average the gradients so
        # that every replica applies the same update.
        grads = tf.distribute.get_replica_context().all_reduce("mean", grads)
        if apply_in_replica:
            optimizer.apply(grads, params)
        return loss, grads

    @tf.function
    def train_step(batch: tuple[Any, Any]) -> tf.Tensor:
        loss, grads = strategy.run(replica_step, args=batch)
        if not apply_in_replica:
            optimizer.apply(grads, model.trainable_variables)
        return strategy.reduce("mean", loss, axis=None)

    def replica_eval(images: tf.Tensor, labels: tf.Tensor) -> Any:
        logits = model(images, is_training=False)["logits"]
        correct = tf.equal(tf.argmax(logits, axis=1), labels)
        return tf.reduce_sum(tf.cast(correct, tf.int64)), tf.size(labels, tf.int64)

    @tf.function
    def eval_step(batch: tuple[Any, Any]) -> tuple[tf.Tensor, tf.Tensor]:
        correct, count = strategy.run(replica_eval, args=batch)
        return (
            strategy.reduce("sum", correct, axis=None),
            strategy.reduce("sum", count, axis=None),
        )

    def replica_checksum() -> tf.Tensor:
        total = tf.add_n([tf.reduce_sum(v) for v in model.trainable_variables])
        ctx = tf.distribute.get_replica_context()
        return ctx.all_gather(tf.reshape(total, [1]), axis=0)

    @tf.function
    def checksums() -> tf.Tensor:
        per_replica = strategy.run(replica_checksum)
        return strategy.experimental_local_results(per_replica)[0]

    # The global batch is split evenly over the replicas (of all workers).
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    train_data = datasets.batches(
        data.x_train, data.y_train, args.batch_size, args.seed
    ).with_options(options)
    test_data = (
        tf.data.Dataset.from_tensor_slices((data.x_test, data.y_test))
        .batch(args.batch_size)
        .with_options(options)
    )
    batches = iter(strategy.experimental_distribute_dataset(train_data))

    # Only the chief writes TensorBoard logs; elsewhere `tf.summary` calls
    # find no default writer and do nothing.
    writer = tools.tensorboard(args.logdir) if chief else None
    # Traced (not run) in the strategy's scope, on the per-replica batch; it
    # builds the model, in every process alike (the workers create their
    # variables together).
    per_replica = max(1, args.batch_size // replicas)
    spec = tf.TensorSpec([per_replica, *data.x_train.shape[1:]])
    with strategy.scope():
        summary = snt.summary(model, spec, is_training=False)
    if chief:
        tools.show_summary("model/summary", summary)
    losses = []
    start = time.perf_counter()
    with tools.progress(args.steps, quiet=not chief) as bar:
        for step in bar:
            losses.append(float(train_step(next(batches))))
            bar.record(loss=losses[-1])
            if (step + 1) % 10 == 0:
                tf.summary.scalar("train/loss", np.mean(losses[-10:]), step=step + 1)
    elapsed = time.perf_counter() - start

    correct = total = 0
    for batch in strategy.experimental_distribute_dataset(test_data):
        c, n = eval_step(batch)
        correct, total = correct + int(c), total + int(n)
    sums = checksums().numpy()
    if chief:
        print(f"trained {args.steps} steps in {elapsed:.1f}s")
        print(f"test accuracy: {correct / total:.4f} ({correct}/{total})")
        print(f"replicas in sync: {bool(np.all(sums == sums[0]))} ({replicas} copies)")
        tf.summary.scalar("test/accuracy", correct / total, step=args.steps)
        assert writer is not None
        writer.flush()
        path = os.path.join(args.out, "loss.png")
        title = f"training loss, {replicas} replicas"
        plots.save_curve(path, losses, "cross-entropy", title)
        print(f"wrote {path}; TensorBoard logs in {args.logdir}")


if __name__ == "__main__":
    train(ARGS)
