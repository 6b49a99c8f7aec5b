"""Workloads measured in fresh processes: import time and peak memory.

`import_time`: seconds for `import sonnet` (ours, and the original with
`--vs`), `import keras` and `import tensorflow` (labelled "raw": the floor
every implementation pays), timed inside a fresh interpreter around the
import statement only (interpreter start-up excluded). One discarded
warm-up round fills the OS file cache; the rounds are interleaved.

`memory`: peak resident set size (RSS) of a fresh process while it builds a
model and runs its train step, minus its RSS just before (after importing
TensorFlow, Keras and Sonnet, so import costs are excluded for all
implementations alike). Linux's `/proc/self/clear_refs` resets the peak
after the imports; `VmHWM` in `/proc/self/status` reads it. This is process
memory (TensorFlow's allocator, graphs, Python objects), not
`tracemalloc`'s Python-only view; with `--device gpu` the worker also
reports TensorFlow's peak GPU memory (`get_memory_info`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.harness import Samples, WorkerError, run_oneshot
from bench.workloads import KERAS, ORIGINAL, OURS, RAW, Row, Workload

# Modules timed by `import_time`, per implementation.
IMPORTS = {OURS: "sonnet", RAW: "tensorflow", KERAS: "keras", ORIGINAL: "sonnet"}

# Memory rows: (workload, sampler row, steps run, implementations).
MEMORY = {
    "mem_mlp_adam_step": ("mlp_adam_step", "mlp_adam_step", 5, (OURS, RAW, KERAS)),
    "mem_resnet50_step": ("resnet50_step", "resnet50_step", 2, (OURS, KERAS)),
}


def our_root() -> str:
    """Directory holding the `sonnet` package this process imports."""
    import sonnet

    return str(Path(sonnet.__file__).resolve().parent.parent)


def _interpreter(impl: str, other_python: str | None) -> tuple[str, str | None]:
    """`(python, PYTHONPATH)` that runs `impl`'s sonnet code path."""
    if impl == ORIGINAL:
        assert other_python is not None
        return other_python, None
    return sys.executable, our_root()


def run_import_time(
    impls: tuple[str, ...],
    other_python: str | None,
    quick: bool,
    device: str,
    repeats: int,
) -> dict[tuple[str, str], Samples]:
    results = {("import_time", impl): Samples() for impl in impls}
    for round_ in range(repeats + (0 if quick else 1)):
        for impl in impls:
            python, path = _interpreter(impl, other_python)
            answer = run_oneshot(
                python, ["--import", IMPORTS[impl]], device, 600, pythonpath=path
            )
            if round_ == 0 and not quick:
                continue  # Warm-up round.
            results["import_time", impl].wall.append(answer["wall"])
            results["import_time", impl].cpu.append(answer["cpu"])
    return results


def run_memory(
    impls: tuple[str, ...],
    other_python: str | None,
    quick: bool,
    device: str,
    repeats: int,
) -> dict[tuple[str, str], Samples]:
    results: dict[tuple[str, str], Samples] = {}
    for row, (workload, sampler_row, steps, local) in MEMORY.items():
        for impl in (*local, ORIGINAL):
            if impl not in impls:
                continue
            python, path = _interpreter(impl, other_python)
            code_path = "sonnet" if impl in (OURS, ORIGINAL) else impl
            samples = results[row, impl] = Samples()
            for _ in range(repeats):
                args = (workload, sampler_row, code_path, steps)
                if not memory_sample(samples, python, *args, quick, device, path):
                    break
    return results


def memory_sample(
    samples: Samples,
    python: str,
    workload: str,
    row: str,
    code_path: str,
    steps: int,
    quick: bool,
    device: str,
    pythonpath: str | None,
    timeout: int = 900,
) -> bool:
    """Adds one peak-RSS sample (MiB) to `samples`: a fresh process builds
    `row`'s model of `workload` and runs `steps` steps (`_worker --memory`).
    False (and `samples.error` set) if the process failed."""
    args = ["--memory", workload, row, code_path, str(steps)]
    if quick:
        args.append("--quick")
    try:
        answer = run_oneshot(python, args, device, timeout, pythonpath=pythonpath)
    except WorkerError as e:
        samples.error = str(e)
        return False
    samples.wall.append(answer["rss_mib"])
    samples.cpu.append(answer["rss_mib"])
    return True


WORKLOADS = {
    "import_time": Workload(
        name="import_time",
        rows=(
            Row(
                "import_time",
                "s",
                "import sonnet (raw: import tensorflow; keras: import keras), "
                "fresh process",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        run=run_import_time,
    ),
    "memory": Workload(
        name="memory",
        rows=(
            Row(
                "mem_mlp_adam_step",
                "MiB",
                "peak RSS increase: build + 5 MLP Adam steps (fresh process)",
            ),
            Row(
                "mem_resnet50_step",
                "MiB",
                "peak RSS increase: build + 2 ResNet-50 train steps, batch 8 "
                "(fresh process)",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=1,
        number=1,
        quick_repeats=1,
        quick_number=1,
        run=run_memory,
    ),
}
