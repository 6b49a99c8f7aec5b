"""Runs workload code in a child interpreter (see `bench/harness.py`).

Started by path (`python bench/_worker.py ...`), never with `-m` from the
repository root, so that `import sonnet` finds the interpreter's own Sonnet
(e.g. the original dm-sonnet in another virtual environment) unless the
parent sets `PYTHONPATH`. Modes:

  --serve                          JSON-lines server (the `--vs` protocol)
  --import MODULE                  seconds to import MODULE
  --memory WORKLOAD ROW IMPL STEPS [--quick]
                                   peak RSS increase of building + STEPS runs
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

BENCH_DIR = Path(__file__).resolve().parent


def _load_bench_package() -> None:
    """Makes `import bench.*` work without the repository root on sys.path."""
    if "bench" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        "bench",
        BENCH_DIR / "__init__.py",
        submodule_search_locations=[str(BENCH_DIR)],
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = package
    spec.loader.exec_module(package)


def _versions() -> dict[str, Any]:
    import tensorflow as tf

    import sonnet

    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "tensorflow": tf.__version__,
        "sonnet_version": getattr(sonnet, "__version__", "unknown"),
        "sonnet_file": str(Path(sonnet.__file__).resolve()),
    }


def _configure_device(device: str) -> None:
    import tensorflow as tf

    if device == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise SystemExit("--device gpu: TensorFlow sees no GPU in the worker")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} missing from /proc/self/status")


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # Resets VmHWM to the current RSS.
        return True
    except OSError:
        return False


def measure_memory(workload: str, row: str, impl: str, steps: int, quick: bool) -> dict:
    import keras  # noqa: F401  (imported by every implementation's baseline)
    import tensorflow as tf

    import sonnet  # noqa: F401
    from bench import workloads
    from bench.harness import Skip

    build = workloads.get(workload).build
    assert build is not None
    gpu = tf.config.list_physical_devices("GPU")
    if gpu:
        tf.config.experimental.reset_memory_stats("GPU:0")
    reset = _reset_peak_rss()
    baseline = _status_kib("VmRSS")
    sampler = build(impl, quick)[row]
    if isinstance(sampler, Skip):
        raise RuntimeError(f"{workload} {row} ({impl}) skipped: {sampler.reason}")
    sampler(steps)
    peak = _status_kib("VmHWM")
    result: dict[str, Any] = {
        "rss_mib": (peak - baseline) / 1024,
        "baseline_rss_mib": baseline / 1024,
        "peak_reset": reset,
    }
    if gpu:
        result["gpu_peak_mib"] = (
            tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
        )
    return result


def serve(channel: TextIO) -> None:
    from bench import workloads
    from bench.harness import Skip

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    send({"hello": _versions()})
    samplers: dict[str, Any] = {}
    sampled: set[str] = set()
    for line in sys.stdin:
        message = json.loads(line)
        try:
            if message["cmd"] == "quit":
                break
            if message["cmd"] == "setup":
                build = workloads.get(message["workload"]).build
                assert build is not None
                samplers = {}
                sampled.clear()
                gc.unfreeze()
                gc.collect()  # Free the previous workload's models first.
                built = build("sonnet", message["quick"])
                skipped = {r: s.reason for r, s in built.items() if isinstance(s, Skip)}
                samplers = {r: s for r, s in built.items() if r not in skipped}
                send({"rows": list(samplers), "skipped": skipped})
            elif message["cmd"] == "sample":
                row = message["row"]
                wall, cpu = samplers[row](message["number"])
                if row not in sampled:
                    # After a row's first (warm-up) sample, as `interleave`
                    # does here after all warm-ups: see `harness.frozen_heap`.
                    sampled.add(row)
                    gc.collect()
                    gc.freeze()
                send({"wall": wall, "cpu": cpu})
            else:
                send({"error": f"unknown command {message['cmd']!r}"})
        except Exception as e:
            send({"error": f"{type(e).__name__}: {e}"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--import", dest="module")
    parser.add_argument("--memory", nargs=4, metavar=("WORKLOAD", "ROW", "IMPL", "N"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    if args.module:
        wall, cpu = time.perf_counter(), time.process_time()
        importlib.import_module(args.module)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(json.dumps({"wall": wall, "cpu": cpu}))
        return

    _load_bench_package()
    _configure_device(args.device)
    if args.memory:
        workload, row, impl, steps = args.memory
        print(json.dumps(measure_memory(workload, row, impl, int(steps), args.quick)))
    elif args.serve:
        # The protocol owns the real stdout; stray prints go to stderr.
        channel = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        serve(channel)


if __name__ == "__main__":
    main()
