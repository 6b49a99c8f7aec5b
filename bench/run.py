"""The benchmark suite's entry point: `python -m bench` or `python bench/run.py`.

Runs the selected workloads for each implementation side by side
(interleaved repetitions, warm-up excluded), prints a Markdown table of
medians and ratios (ours / other) with the performance targets marked met
or missed, and writes every sample to a JSON file. See `bench/README.md`.

    python -m bench [--quick] [--only NAME[,NAME]] [--vs PYTHON]
                    [--device cpu|gpu] [--json PATH] [--repeats N]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py`: make `bench` importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.harness import VALUE_UNITS, RemoteWorker, Samples, Skip, median

DEFAULT_JSON = Path(__file__).resolve().parent / "results.json"
IMPL_ORDER = ("ours", "raw", "keras", "original")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Sonnet benchmark suite: ours vs raw TF vs Keras 3 "
        "(vs the original Sonnet with --vs).",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="few repeats and small sizes (a smoke test, not a measurement)",
    )
    parser.add_argument(
        "--only", help="comma-separated workloads to run (default: all default ones)"
    )
    parser.add_argument(
        "--vs",
        metavar="PYTHON",
        help="an interpreter whose `sonnet` is the original dm-sonnet 2.0.2; its "
        "sonnet-side workloads run in a worker process, interleaved with ours",
    )
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument(
        "--json",
        type=Path,
        default=DEFAULT_JSON,
        help=f"where to write the results (default: {DEFAULT_JSON})",
    )
    parser.add_argument(
        "--repeats", type=int, help="override every workload's repetitions"
    )
    parser.add_argument(
        "--list", action="store_true", help="list the workloads and exit"
    )
    parser.add_argument(
        "--table-from",
        type=Path,
        metavar="JSON",
        help="print the tables of a results file written earlier and exit",
    )
    return parser.parse_args(argv)


def _configure(device: str) -> None:
    """Device selection; must run before TensorFlow is imported."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _select(only: str | None) -> list[str]:
    from bench import workloads

    if not only:
        names = [n for n in workloads.NAMES if workloads.get(n).default]
    else:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in names if n not in workloads.NAMES]
        if unknown:
            raise SystemExit(
                f"--only: unknown workload(s) {', '.join(unknown)}; "
                f"known: {', '.join(workloads.NAMES)}"
            )
    return list(dict.fromkeys(names))


def run_workload(
    name: str,
    args: argparse.Namespace,
    remote: RemoteWorker | None,
) -> dict[tuple[str, str], Samples]:
    """Measures one workload for every implementation; `(row, impl) -> Samples`."""
    from bench import workloads
    from bench.workloads import ORIGINAL, OURS

    workload = workloads.get(name)
    repeats = args.repeats or (
        workload.quick_repeats if args.quick else workload.repeats
    )
    number = workload.quick_number if args.quick else workload.number
    with_original = remote is not None and workload.original
    if workload.run is not None:
        impls = workload.impls + ((ORIGINAL,) if with_original else ())
        return workload.run(impls, args.vs, args.quick, args.device, repeats)

    assert workload.build is not None
    samplers: dict[tuple[str, str], harness.Sampler] = {}
    skipped: dict[tuple[str, str], Samples] = {}
    for impl in workload.impls:
        code_path = "sonnet" if impl == OURS else impl
        for row, sampler in workload.build(code_path, args.quick).items():
            if isinstance(sampler, Skip):
                skipped[row, impl] = Samples(skipped=sampler.reason)
            else:
                samplers[row, impl] = sampler
    if with_original:
        assert remote is not None
        for row in remote.setup(name, args.quick):
            samplers[row, ORIGINAL] = remote.sampler(row)
        for row, reason in remote.skipped.items():
            skipped[row, ORIGINAL] = Samples(skipped=reason)
    # Round-robin over rows first, then implementations.
    rows = [row.name for row in workload.rows]
    order = sorted(samplers, key=lambda k: (rows.index(k[0]), IMPL_ORDER.index(k[1])))
    samplers = {key: samplers[key] for key in order}
    warmup = 0 if args.quick else workload.warmup
    measured = harness.interleave(samplers, repeats, number, warmup=warmup)
    return {**measured, **skipped}


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def summarise(
    names: list[str], results: dict[tuple[str, str], Samples]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-row records (medians, ratios) and target records."""
    from bench import workloads

    rows: list[dict[str, Any]] = []
    medians: dict[tuple[str, str], tuple[float, float]] = {}
    targets: list[dict[str, Any]] = []
    for name in names:
        workload = workloads.get(name)
        for row in workload.rows:
            impls: dict[str, Any] = {}
            for impl in IMPL_ORDER:
                samples = results.get((row.name, impl))
                if samples is None:
                    continue
                record: dict[str, Any] = {
                    "samples": samples.wall,
                    "cpu_samples": samples.cpu,
                    "median": median(samples.wall) if samples.wall else None,
                    "cpu_median": median(samples.cpu) if samples.cpu else None,
                }
                if samples.error:
                    record["error"] = samples.error
                if samples.skipped:
                    record["skipped"] = samples.skipped
                impls[impl] = record
                if record["median"] is not None:
                    medians[row.name, impl] = (record["median"], record["cpu_median"])
            ratios = {}
            ours = medians.get((row.name, "ours"))
            # Values (rates, fractions) are reported as they are.
            for other in IMPL_ORDER[1:] if row.unit not in VALUE_UNITS else ():
                theirs = medians.get((row.name, other))
                if ours and theirs:
                    ratios[other] = {
                        "wall": _ratio(ours[0], theirs[0]),
                        "cpu": _ratio(ours[1], theirs[1]),
                    }
            rows.append(
                {
                    "workload": name,
                    "row": row.name,
                    "unit": row.unit,
                    "description": row.description,
                    "impls": impls,
                    "ratios": ratios,
                }
            )
        for target in workload.targets:
            ours = medians.get((target.row, "ours"))
            if target.other is None:  # Our value itself.
                wall, cpu = ours if ours else (None, None)
            else:
                theirs = medians.get((target.other_row or target.row, target.other))
                wall = _ratio(ours[0], theirs[0]) if ours and theirs else None
                cpu = _ratio(ours[1], theirs[1]) if ours and theirs else None
            if wall is None:
                met = None
            else:
                met = wall >= target.limit if target.at_least else wall <= target.limit
            targets.append(
                {
                    "label": f"{target.row}: {target.label}",
                    "row": target.row,
                    "other": target.other,
                    "other_row": target.other_row or target.row,
                    "limit": target.limit,
                    "at_least": target.at_least,
                    "ratio": wall,
                    "cpu_ratio": cpu,
                    "met": met,
                }
            )
    return rows, targets


def _number(value: float | None, scale: float = 1.0) -> str:
    if value is None:
        return "–"
    value *= scale
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if value >= 1 else f"{value:.3f}"


def format_tables(rows: list[dict[str, Any]], targets: list[dict[str, Any]]) -> str:
    """The results as two Markdown tables (medians + ratios, targets)."""
    present = [i for i in IMPL_ORDER if any(i in r["impls"] for r in rows)]
    others = [i for i in present if i != "ours"]
    header = ["row", "unit", *present, *(f"ours/{o}" for o in others)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        scale = harness.UNITS[row["unit"]]
        cells = [row["row"], row["unit"]]
        for impl in present:
            record = row["impls"].get(impl)
            if record is None:
                cells.append("")
            elif record.get("error"):
                cells.append("error")
            elif record.get("skipped"):
                cells.append("skipped")
            else:
                cells.append(_number(record["median"], scale))
        for other in others:
            ratio = row["ratios"].get(other)
            cells.append(f"{ratio['wall']:.3f}" if ratio else "")
        lines.append("| " + " | ".join(cells) + " |")
    if targets:
        lines += [
            "",
            "| target | ratio | cpu-time ratio | status |",
            "|---|---|---|---|",
        ]
        for target in targets:
            if target["met"] is None:
                status = "not measured"
            else:
                status = "met" if target["met"] else "**MISSED**"
            ratio = "–" if target["ratio"] is None else f"{target['ratio']:.3f}"
            cpu = "–" if target["cpu_ratio"] is None else f"{target['cpu_ratio']:.3f}"
            lines.append(f"| {target['label']} | {ratio} | {cpu} | {status} |")
    return "\n".join(lines)


def _meta(args: argparse.Namespace, remote: RemoteWorker | None) -> dict[str, Any]:
    import keras
    import tensorflow as tf

    import sonnet

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "argv": sys.argv[1:],
        "quick": args.quick,
        "device": args.device,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "sonnet_version": sonnet.__version__,
        "sonnet_file": str(Path(sonnet.__file__).resolve()),
        "other": None if remote is None else remote.info,
    }


def format_report(report: dict[str, Any]) -> str:
    """Header line(s) and tables of a results report (as written to JSON)."""
    meta = report["meta"]
    load = meta["loadavg_start"][0], meta["loadavg_end"][0]
    lines = [
        f"sonnet {meta['sonnet_version']}, TF {meta['tensorflow']}, "
        f"Keras {meta['keras']}, Python {meta['python']}, "
        f"{meta['cpu_count']} CPUs, device {meta['device']}, "
        f"load average {load[0]:.1f} -> {load[1]:.1f}"
        + (" (quick: not a measurement)" if meta["quick"] else "")
    ]
    other = meta.get("other")
    if other:
        lines.append(
            f"original: sonnet {other['sonnet_version']} ({other['executable']})"
        )
    lines += ["", format_tables(report["rows"], report["targets"])]
    skips = [
        f"- {row['row']} ({impl}): {record['skipped']}"
        for row in report["rows"]
        for impl, record in row["impls"].items()
        if record.get("skipped")
    ]
    if skips:
        lines += ["", "skipped:", *skips]
    for name, error in report["errors"].items():
        lines.append(f"\nworkload {name} failed: {error}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.table_from:
        print(format_report(json.loads(args.table_from.read_text())))
        return 0
    _configure(args.device)
    from bench import workloads

    if args.list:
        for name in workloads.NAMES:
            workload = workloads.get(name)
            flag = "" if workload.default else "  (only with --only)"
            rows = ", ".join(r.name for r in workload.rows)
            print(f"{name}: {rows}{flag}")
        return 0
    names = _select(args.only)

    import tensorflow as tf

    if args.device == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise SystemExit("--device gpu: TensorFlow sees no GPU")
    remote = None
    if args.vs:
        _log(f"starting worker: {args.vs}")
        remote = RemoteWorker(args.vs, args.device)
        version = remote.info["sonnet_version"]
        _log(f"other sonnet: {version} at {remote.info['sonnet_file']}")
        if version != "2.0.2":
            _log("warning: --vs interpreter's sonnet is not dm-sonnet 2.0.2")
    load_start = os.getloadavg()
    results: dict[tuple[str, str], Samples] = {}
    errors: dict[str, str] = {}
    try:
        for i, name in enumerate(names, 1):
            _log(f"[{i}/{len(names)}] {name} ...")
            start = time.perf_counter()
            try:
                results.update(run_workload(name, args, remote))
            except Exception as e:
                errors[name] = f"{type(e).__name__}: {e}"
                _log(traceback.format_exc())
            gc.collect()
            _log(f"    {time.perf_counter() - start:.1f} s")
        meta = _meta(args, remote)
    finally:
        if remote is not None:
            remote.close()
    meta["loadavg_start"] = load_start
    meta["loadavg_end"] = os.getloadavg()
    rows, targets = summarise(names, results)
    report = {"meta": meta, "rows": rows, "targets": targets, "errors": errors}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")

    print(format_report(report))
    print(f"\nresults written to {args.json}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
