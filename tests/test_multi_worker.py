"""Multi-worker training: two processes with `MultiWorkerMirroredStrategy`.

Starts two workers (`tests/multi_worker_worker.py`) on free loopback ports;
each trains the same Sonnet model (with `snt.distribute.CrossReplicaBatchNorm`,
whose batch statistics span both workers) on its half of the global batches.
Both must end with identical variables, equal to a single-process run on the
whole batches, and the chief's checkpoint must restore into a plain model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests import multi_worker_worker as worker
from tests.ports import free_ports

ROOT = Path(__file__).resolve().parent.parent
# Hang protection only: on an idle 2-core machine the whole test takes about
# 15 s (TensorFlow import and the first trace dominate).
TIMEOUT_S = 120


def _start_workers(out_dir: Path) -> list[subprocess.Popen[bytes]]:
    ports = ",".join(str(p) for p in free_ports(2))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
    }
    env.pop("TF_CONFIG", None)
    script = str(ROOT / "tests" / "multi_worker_worker.py")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(2):
            with open(out_dir / f"worker{i}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, script, str(i), ports, str(out_dir)],
                        cwd=ROOT,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
    except BaseException:
        _stop(procs)
        raise
    return procs


def _wait(procs: list[subprocess.Popen[bytes]], out_dir: Path, deadline: float) -> None:
    for i, proc in enumerate(procs):
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        log = (out_dir / f"worker{i}.log").read_text(errors="replace")
        assert code == 0, f"worker {i} exited with {code}:\n{log[-3000:]}"


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _single_process_reference() -> tuple[object, object]:
    net, opt = worker.make_net(), worker.make_optimizer()

    @tf.function
    def train_step(x, y):
        grads = worker.gradients(net, x, y)
        opt.apply(grads, list(net.trainable_variables))

    for step in range(worker.STEPS):
        train_step(*worker.batch(step))
    return net, opt


def test_two_workers_match_single_process_and_checkpoint_restores(tmp_path):
    deadline = time.monotonic() + TIMEOUT_S
    procs = _start_workers(tmp_path)
    try:
        # The reference runs here while the workers start up.
        net, opt = _single_process_reference()
        _wait(procs, tmp_path, deadline)
    finally:
        _stop(procs)
    results = [dict(np.load(tmp_path / f"worker{i}.npz")) for i in range(2)]
    assert results[0].keys() == results[1].keys()
    for name in results[0]:
        np.testing.assert_array_equal(results[0][name], results[1][name], err_msg=name)

    expected = worker.variables_of(net, opt)
    assert sorted(expected) == sorted(results[0])
    for name, value in expected.items():
        np.testing.assert_allclose(
            results[0][name], value, rtol=1e-5, atol=1e-6, err_msg=name
        )
    # Sanity: the moving statistics moved, i.e. batch norm ran in training.
    (counter,) = [k for k in results[0] if k.endswith(" net/moving_mean/counter:0")]
    assert int(results[0][counter]) == worker.STEPS

    fresh, fresh_opt = worker.make_net(), worker.make_optimizer()
    status = tf.train.Checkpoint(net=fresh, opt=fresh_opt).read(str(tmp_path / "ckpt"))
    fresh(tf.zeros([2, 3]), is_training=False)  # Variables restored on creation.
    status.assert_existing_objects_matched()
    restored = worker.variables_of(fresh, fresh_opt)
    assert [k.split()[1] for k in restored] == [
        k.split()[1] for k in results[0] if "/m/" not in k and "/v/" not in k
    ]
    saved = [v for k, v in results[0].items() if "/m/" not in k and "/v/" not in k]
    for (name, value), expected_value in zip(restored.items(), saved):
        np.testing.assert_array_equal(value, expected_value, err_msg=name)
