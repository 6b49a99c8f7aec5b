"""The suite's workloads, their rows (measured quantities) and targets.

A workload module defines `WORKLOADS`, name -> `Workload`. Timing workloads have a
`build(impl, quick)` that returns the samplers of one implementation
(`impl` is "sonnet", "raw" or "keras"); the "sonnet" code path uses
whatever `import sonnet` gives, so the same code measures our library in
this process and the original in a worker process started with `--vs`.
Process workloads (import time, memory) have a `run(...)` that starts
subprocesses or measures several workloads' steps together itself
(utilisation).

Modules are imported lazily (`get`): a worker only imports what it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.harness import Builder, Samples, Skip

# Implementation labels in results. "ours" and "original" both run the
# "sonnet" code path (in this process / in the `--vs` interpreter).
OURS, RAW, KERAS, ORIGINAL = "ours", "raw", "keras", "original"
IMPLS = (OURS, RAW, KERAS, ORIGINAL)


@dataclass(frozen=True)
class Row:
    """One measured quantity (a line of the results table)."""

    name: str
    # "us", "ms" or "s" per run, or "MiB"; or a value unit ("GFLOP/s",
    # "fraction", see `harness.VALUE_UNITS`), larger is better.
    unit: str
    description: str


@dataclass(frozen=True)
class Target:
    """`ours[row] / other[other_row or row] <= limit`.

    With `other=None`, our value itself: `ours[row] <= limit`, or
    `ours[row] >= limit` with `at_least=True`.
    """

    row: str
    other: str | None
    limit: float
    other_row: str | None = None
    at_least: bool = False

    @property
    def label(self) -> str:
        sign = ">=" if self.at_least else "<="
        if self.other is None:
            return f"ours {sign} {self.limit:g}"
        other = self.other
        if self.other_row is not None:
            other = f"{other} {self.other_row}"
        return f"ours/{other} {sign} {self.limit:g}"


# run(impls, other_python, quick, device, repeats) -> {(row, impl): Samples}
ProcessRunner = Callable[[tuple[str, ...], "str | None", bool, str, int], Any]
Results = dict[tuple[str, str], Samples]


@dataclass(frozen=True)
class Workload:
    name: str
    rows: tuple[Row, ...]
    # Implementations measured in this process ("ours" maps to "sonnet").
    impls: tuple[str, ...]
    repeats: int
    number: int
    quick_repeats: int
    quick_number: int
    build: Builder | None = None
    run: ProcessRunner | None = None
    targets: tuple[Target, ...] = field(default_factory=tuple)
    # Whether the original (via `--vs`) can run this workload.
    original: bool = True
    # Whether a plain run (no `--only`) includes it.
    default: bool = True
    warmup: int = 1


# Name -> module defining `WORKLOAD`, in the order the suite runs them.
_MODULES = {
    "import_time": "bench.workloads.process",
    "peak_matmul": "bench.workloads.dense",
    "linear_eager": "bench.workloads.dense",
    "mlp_eager_step": "bench.workloads.dense",
    "mlp_adam_step": "bench.workloads.dense",
    "mlp_adam_step_bf16": "bench.workloads.dense",
    "mlp128_trace": "bench.workloads.dense",
    "conv_bn_step": "bench.workloads.conv_bn",
    "lstm_step": "bench.workloads.lstm",
    "resnet50_trace": "bench.workloads.resnet",
    "resnet50_first_result": "bench.workloads.resnet",
    "resnet50_ckpt": "bench.workloads.resnet",
    "resnet50_step": "bench.workloads.resnet",
    "transformer_step": "bench.workloads.transformer",
    "decode_tokens": "bench.workloads.transformer",
    "mha_eager_overhead": "bench.workloads.transformer",
    "lora_step": "bench.workloads.finetune",
    "int8_inference": "bench.workloads.finetune",
    "transformer48_first_result": "bench.workloads.deep",
    "transformer48_step": "bench.workloads.deep",
    "utilisation": "bench.workloads.utilisation",
    "memory": "bench.workloads.process",
    "remat_memory": "bench.workloads.deep",
    "remat_memory_unrolled": "bench.workloads.deep",
    "accumulate_step": "bench.workloads.toolkit",
    "muon_step": "bench.workloads.toolkit",
    "ema_update": "bench.workloads.toolkit",
    "moe_step": "bench.workloads.moe",
    "attention_long": "bench.workloads.long_attention",
    "decode_window": "bench.workloads.long_attention",
    "hf_load": "bench.workloads.open_weights",
    "generate_tokens": "bench.workloads.open_weights",
    "prefill": "bench.workloads.open_weights",
}

NAMES = tuple(_MODULES)


def get(name: str) -> Workload:
    """The workload called `name` (imports its module)."""
    if name not in _MODULES:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(NAMES)}")
    workloads = importlib.import_module(_MODULES[name]).WORKLOADS
    return workloads[name]


__all__ = [
    "IMPLS",
    "KERAS",
    "NAMES",
    "ORIGINAL",
    "OURS",
    "RAW",
    "Row",
    "Samples",
    "Skip",
    "Target",
    "Workload",
    "get",
]
