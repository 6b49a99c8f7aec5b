"""The original Sonnet 2.0.2's results, computed once and shared.

`harness.py` runs in the second virtual environment (see `original_python`)
as one background process over all scenario files. Its results go to a cache
directory keyed by the scenario code, the interpreter and TensorFlow's
kernel setting (`TF_ENABLE_ONEDNN_OPTS`), so every pytest worker (and every
later session, until a scenario file changes) reads the same file; tests
wait only for the lines they need.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ENV_VAR = "SONNET_ORIGINAL_PYTHON"
TIMEOUT_S = 1200


def original_python() -> str | None:
    """The second environment's interpreter, or None if there is none."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        return configured if os.path.exists(configured) else None
    default = ROOT / ".ci-orig-venv" / "bin" / "python"
    return str(default) if default.exists() else None


def missing_reason() -> str:
    configured = os.environ.get(ENV_VAR)
    where = configured or str(ROOT / ".ci-orig-venv" / "bin" / "python")
    return (
        f"differential suite skipped: no Python with dm-sonnet==2.0.2 at {where} "
        f"(set {ENV_VAR}, or run .ci/run, which creates .ci-orig-venv)"
    )


def scenario_files() -> list[Path]:
    return sorted(HERE.glob("scenarios_*.py"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


class OriginalResults:
    """Starts (once) and reads the original's results for all scenarios."""

    def __init__(self, python: str):
        self.python = python
        self.files = [str(f) for f in scenario_files()]
        digest = hashlib.sha256(os.path.realpath(python).encode())
        # TensorFlow's choice of CPU kernels changes what the original does
        # with invalid arguments (see the root conftest.py).
        onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default")
        digest.update(f"TF_ENABLE_ONEDNN_OPTS={onednn}".encode())
        for path in [HERE / "harness.py", *self.files]:
            digest.update(Path(path).read_bytes())
        base = Path(tempfile.gettempdir()) / f"sonnet-differential-{os.getuid()}"
        self.dir = base / digest.hexdigest()[:20]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.out = self.dir / "results.jsonl"
        self.done = self.dir / "done"
        self.pid_file = self.dir / "pid"
        self.log = self.dir / "log.txt"
        self.records: dict[str, dict[str, Any]] = {}
        self._offset = 0
        self._process: subprocess.Popen | None = None
        self._start()

    def _start(self) -> None:
        with open(self.dir / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.done.exists():
                return
            if self.pid_file.exists():
                with contextlib.suppress(ValueError):
                    if _alive(int(self.pid_file.read_text())):
                        return
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
            env.update(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
            with open(self.log, "a") as log:
                self._process = subprocess.Popen(
                    [self.python, str(HERE / "harness.py"), "--out", str(self.out)]
                    + ["--done", str(self.done), *self.files],
                    cwd=self.dir,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.pid_file.write_text(str(self._process.pid))

    def _read(self) -> None:
        if not self.out.exists():
            return
        with open(self.out) as f:
            f.seek(self._offset)
            while True:
                line = f.readline()
                if not line.endswith("\n"):
                    break
                self._offset = f.tell()
                with contextlib.suppress(json.JSONDecodeError):
                    record = json.loads(line)
                    if not record.get("started"):
                        self.records[record["id"]] = record

    def _running(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        with contextlib.suppress(ValueError, OSError):
            return _alive(int(self.pid_file.read_text()))
        return False

    def get(self, sid: str) -> dict[str, Any]:
        """The original's record for scenario `sid` (waits until it exists)."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            self._read()
            if sid in self.records:
                return self.records[sid]
            finished = self.done.exists()
            if finished or not self._running():
                self._read()
                if sid in self.records:
                    return self.records[sid]
                log = self.log.read_text()[-3000:] if self.log.exists() else ""
                state = "finished" if finished else "died"
                raise RuntimeError(
                    f"the original's run {state} without a result for {sid!r} "
                    f"(results in {self.out}); log tail:\n{log}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"no result for {sid!r} after {TIMEOUT_S}s")
            time.sleep(0.05)


def main() -> int:
    """`python -m tests.differential.original`: compute the cache, print its path."""
    python = original_python()
    if python is None:
        print(missing_reason(), file=sys.stderr)
        return 1
    results = OriginalResults(python)
    while not results.done.exists() and results._running():
        time.sleep(0.5)
    print(results.out)
    return 0 if results.done.exists() else 1


if __name__ == "__main__":
    sys.exit(main())
