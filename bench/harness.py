"""Timing, workload records and the protocol for workers in other interpreters.

A *sampler* is a callable `sample(number) -> (wall, cpu)`: it runs its
workload `number` times and returns the wall-clock and process-CPU seconds
per run. `timed(fn)` makes one from a step function (the last result is
fetched, so asynchronous devices finish their work inside the timed region);
`self_timed(fn)` from a function that times its own critical section (e.g.
only the tracing, not the model construction before it) and returns
`(wall, cpu)`.

`interleave` runs every sampler once per repetition, round-robin, after one
warm-up sample each that is thrown away, so slow drifts of a shared
machine's load hit all implementations alike; medians of the repetitions
are then compared.

Workers (`bench/_worker.py`) run sonnet-side workload code in another
interpreter (e.g. one whose `sonnet` is the original dm-sonnet). The parent
speaks JSON lines over the worker's stdin/stdout:

  worker -> {"hello": {...versions...}}
  parent -> {"cmd": "setup", "workload": NAME, "quick": bool}
  worker -> {"rows": [ROW, ...], "skipped": {ROW: REASON, ...}}
                                          (or {"error": "..."})
  parent -> {"cmd": "sample", "row": ROW, "number": N}
  worker -> {"wall": s, "cpu": s}
  parent -> {"cmd": "quit"}
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Sampler = Callable[[int], tuple[float, float]]


@dataclass(frozen=True)
class Skip:
    """Stands for a sampler a build cannot make: the row is reported skipped."""

    reason: str


# Builds the samplers (row name -> sampler, or `Skip`) of one implementation
# of a workload: `build(impl, quick)` with impl in {"sonnet", "raw", "keras"}.
Builder = Callable[[str, bool], Mapping[str, "Sampler | Skip"]]

BENCH_DIR = Path(__file__).resolve().parent
WORKER = BENCH_DIR / "_worker.py"

# Display scale of each unit.
UNITS = {"us": 1e6, "ms": 1e3, "s": 1.0, "MiB": 1.0, "GFLOP/s": 1.0, "fraction": 1.0}
# Units of values (rates, fractions) rather than costs: larger is better, and
# the table shows no ours/other ratios for them.
VALUE_UNITS = frozenset(["GFLOP/s", "fraction"])


def timed(fn: Callable[[], Any]) -> Sampler:
    """A sampler that calls `fn()` `number` times (result of the last fetched)."""

    def sample(number: int) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        result = None
        for _ in range(number):
            result = fn()
        fetch(result)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        return wall / number, cpu / number

    return sample


def self_timed(fn: Callable[[], tuple[float, float]]) -> Sampler:
    """A sampler from `fn() -> (wall, cpu)` that times its own critical part."""

    def sample(number: int) -> tuple[float, float]:
        walls, cpus = zip(*(fn() for _ in range(number)), strict=True)
        return sum(walls) / number, sum(cpus) / number

    return sample


class Clock:
    """Context manager measuring wall-clock and process-CPU seconds."""

    wall: float
    cpu: float

    def __enter__(self) -> Clock:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu

    @property
    def both(self) -> tuple[float, float]:
        return self.wall, self.cpu


def fetch(result: Any) -> None:
    """Waits for `result` (nested tensors) to be computed, by reading them."""
    if result is None:
        return
    import tensorflow as tf

    for leaf in tf.nest.flatten(result):
        if hasattr(leaf, "numpy"):
            leaf.numpy()


@dataclass
class Samples:
    """Per-repetition seconds (per run) of one row of one implementation.

    Rows in a value unit (`VALUE_UNITS`) hold their values instead (e.g.
    GFLOP/s per wall-clock second in `wall`, per CPU second in `cpu`).
    """

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None  # Why the row was not measured.


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def interleave(
    samplers: dict[tuple[str, str], Sampler],
    repeats: int,
    number: int | Mapping[tuple[str, str], int],
    warmup: int = 1,
) -> dict[tuple[str, str], Samples]:
    """Runs all samplers round-robin; returns their per-repetition samples.

    The i-th sample of every sampler comes from the same repetition, so
    ratios of samples can be taken pairwise.

    Args:
      samplers: `(row, impl) -> sampler`.
      repeats: Repetitions kept (each runs every sampler once).
      number: Runs per sample: one for all, or per sampler key.
      warmup: Samples per sampler run and discarded first (tracing, caches).
    """
    numbers = (
        dict(number) if isinstance(number, Mapping) else dict.fromkeys(samplers, number)
    )
    for key, sample in samplers.items():
        for _ in range(warmup):
            sample(numbers[key])
    results = {key: Samples() for key in samplers}
    with frozen_heap():
        for _ in range(repeats):
            for key, sample in samplers.items():
                wall, cpu = sample(numbers[key])
                results[key].wall.append(wall)
                results[key].cpu.append(cpu)
    return results


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keeps the objects alive now (models, traced functions) out of `gc`'s scans.

    Python's full collections scan every live object (~0.2 s with TensorFlow
    imported) and start after a count of allocations, so one lands in
    whichever sample crosses the count: in a round-robin, the same
    implementation's sample each time (e.g. every other 128-layer trace of
    one implementation 50% slower). With the heap frozen, collections scan
    only what the samples themselves allocate, which each one pays for.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def worker_env(device: str, pythonpath: str | None = None) -> dict[str, str]:
    """Environment for child processes: quiet TF, the chosen device only.

    The child finds `sonnet` through `pythonpath` if given, else through its
    own interpreter's installation (never through ours).
    """
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class WorkerError(RuntimeError):
    """A worker process failed or answered with an error."""


class RemoteWorker:
    """A `bench/_worker.py` process in another interpreter (see module doc)."""

    def __init__(self, python: str, device: str):
        self.python = python
        # Run by path from the bench directory: the repository root (with our
        # `sonnet`) must not be on the child's `sys.path`.
        self._process = subprocess.Popen(
            [python, str(WORKER), "--serve", "--device", device],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sys.stderr,
            cwd=BENCH_DIR,
            env=worker_env(device),
            text=True,
        )
        self.info: dict[str, Any] = self._receive()["hello"]
        self.skipped: dict[str, str] = {}

    def _receive(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait()
            raise WorkerError(f"worker {self.python} exited with status {code}")
        message = json.loads(line)
        if "error" in message:
            raise WorkerError(f"worker {self.python}: {message['error']}")
        return message

    def _ask(self, **message: Any) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message) + "\n")
        self._process.stdin.flush()
        return self._receive()

    def setup(self, workload: str, quick: bool) -> list[str]:
        """Builds the sonnet implementation of `workload`; returns its rows.

        Rows the worker's build skipped are in `self.skipped` (row -> reason).
        """
        answer = self._ask(cmd="setup", workload=workload, quick=quick)
        self.skipped = answer.get("skipped", {})
        return answer["rows"]

    def sampler(self, row: str) -> Sampler:
        def sample(number: int) -> tuple[float, float]:
            answer = self._ask(cmd="sample", row=row, number=number)
            return answer["wall"], answer["cpu"]

        return sample

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._ask(cmd="quit")
            except (WorkerError, BrokenPipeError, OSError):
                pass
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> RemoteWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_oneshot(
    python: str,
    args: list[str],
    device: str,
    timeout: float,
    pythonpath: str | None = None,
) -> Any:
    """Runs `_worker.py ARGS` in `python`; returns the JSON on its last line."""
    try:
        completed = subprocess.run(
            [python, str(WORKER), "--device", device, *args],
            capture_output=True,
            cwd=BENCH_DIR,
            env=worker_env(device, pythonpath),
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        raise WorkerError(f"{python} {WORKER.name} {' '.join(args)} timed out") from e
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise WorkerError(
            f"{python} {WORKER.name} {' '.join(args)} failed "
            f"(status {completed.returncode}):\n{completed.stderr[-2000:]}"
        )
    return json.loads(lines[-1])
