"""Training survives SIGKILL: restart from the latest checkpoint, same result.

Each test runs `tests/fault_tolerance_worker.py` (MLP + Adam, op determinism,
fixed seeds, a `tf.train.CheckpointManager` checkpoint of model, optimizer and
data position every `EVERY` steps) twice side by side: once uninterrupted,
and once told to stop making progress after step `HANG_AFTER` (between two
checkpoints), where the test kills it with SIGKILL and starts it again. The
restarted run must resume from the last checkpoint and end with variables
bit-identical to the uninterrupted run's.

Processes run in their own process groups and are killed in `finally`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests import fault_tolerance_worker as worker
from tests.ports import free_ports

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "fault_tolerance_worker.py"
HANG_AFTER = 7  # Between the checkpoints after steps 6 and 9.
RESUME_FROM = HANG_AFTER // worker.EVERY * worker.EVERY
TIMEOUT_S = 150

assert HANG_AFTER % worker.EVERY != 0 and HANG_AFTER < worker.STEPS


class _Processes:
    """Worker processes, each in its own process group, with logs."""

    def __init__(self) -> None:
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, out: Path, *args: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "",
        }
        env.pop("TF_CONFIG", None)
        log = out / f"log{len(self.procs)}.txt"
        with open(log, "wb") as f:
            proc = subprocess.Popen(
                [sys.executable, str(SCRIPT), str(out), *args],
                cwd=ROOT,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append((proc, log))
        return proc

    def _log(self, proc: subprocess.Popen[bytes]) -> str:
        log = next(log for p, log in self.procs if p is proc)
        return log.read_text(errors="replace")[-3000:]

    def wait_ok(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker timed out:\n{self._log(proc)}")
        assert code == 0, f"worker exited with {code}:\n{self._log(proc)}"

    def wait_for_file(
        self, path: Path, proc: subprocess.Popen[bytes], deadline: float
    ) -> None:
        while not path.exists():
            if proc.poll() is not None:
                pytest.fail(f"worker exited before {path.name}:\n{self._log(proc)}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {path.name} in time:\n{self._log(proc)}")
            time.sleep(0.1)

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()

    def kill_all(self) -> None:
        for proc, _ in self.procs:
            self.kill(proc)


def _final(out: Path, task: int = 0) -> dict[str, np.ndarray]:
    with np.load(out / f"final{task}.npz") as data:
        return dict(data)


def _resumed_from(out: Path, task: int = 0) -> int:
    return json.loads((out / f"resumed{task}.json").read_text())["resumed_from"]


def _latest_checkpoint_step(out: Path) -> int:
    text = (out / "ckpt" / "checkpoint").read_text()
    first = text.splitlines()[0]  # model_checkpoint_path: "ckpt-6"
    return int(first.rsplit("-", 1)[1].rstrip('"'))


def _assert_bit_identical(
    expected: dict[str, np.ndarray], actual: dict[str, np.ndarray]
) -> None:
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)
    assert int(actual["data_position"]) == worker.STEPS
    # Every variable of model and optimizer (slots, step counter) is compared.
    assert "adam/t:0" in expected
    assert any(name.startswith("adam/m/") for name in expected)


def test_single_process_killed_and_restarted(tmp_path):
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    reference.mkdir()
    interrupted.mkdir()
    procs = _Processes()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        ref = procs.start(reference)
        run = procs.start(interrupted, "--hang-after", str(HANG_AFTER))
        procs.wait_for_file(interrupted / "reached0", run, deadline)
        procs.kill(run)
        assert run.returncode == -signal.SIGKILL
        assert _latest_checkpoint_step(interrupted) == RESUME_FROM
        assert not (interrupted / "final0.npz").exists()

        procs.wait_ok(procs.start(interrupted), deadline)
        procs.wait_ok(ref, deadline)
    finally:
        procs.kill_all()

    assert _resumed_from(reference) == 0
    assert _resumed_from(interrupted) == RESUME_FROM
    _assert_bit_identical(_final(reference), _final(interrupted))


def test_two_workers_killed_and_restarted(tmp_path):
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    reference.mkdir()
    interrupted.mkdir()
    procs = _Processes()
    deadline = time.monotonic() + TIMEOUT_S

    def start_pair(out: Path, hang: bool = False) -> list[subprocess.Popen[bytes]]:
        ports = ",".join(str(p) for p in free_ports(2))
        pair = []
        for task in range(2):
            extra = ["--hang-after", str(HANG_AFTER)] if hang and task == 1 else []
            pair.append(procs.start(out, "--task", str(task), "--ports", ports, *extra))
        return pair

    try:
        ref_pair = start_pair(reference)
        chief, other = start_pair(interrupted, hang=True)
        # Worker 1 stalls after step HANG_AFTER and is killed; the chief,
        # blocked in the next step's all-reduce, is then killed too.
        procs.wait_for_file(interrupted / "reached1", other, deadline)
        procs.kill(other)
        procs.kill(chief)
        assert other.returncode == -signal.SIGKILL
        assert _latest_checkpoint_step(interrupted) == RESUME_FROM
        assert not (interrupted / "final0.npz").exists()

        for proc in start_pair(interrupted):
            procs.wait_ok(proc, deadline)
        for proc in ref_pair:
            procs.wait_ok(proc, deadline)
    finally:
        procs.kill_all()

    expected = _final(reference, 0)
    _assert_bit_identical(expected, _final(reference, 1))
    for task in range(2):
        assert _resumed_from(reference, task) == 0
        assert _resumed_from(interrupted, task) == RESUME_FROM
        _assert_bit_identical(expected, _final(interrupted, task))
