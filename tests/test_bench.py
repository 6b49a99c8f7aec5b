"""The benchmark suite runs and reports a well-formed table and JSON file.

Runs `python -m bench --quick` on the two cheapest workloads in a subprocess,
with this interpreter standing in for the `--vs` one (its `sonnet` is ours,
which exercises the worker protocol the original Sonnet would use). Checks
structure only: no timing assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("linear_eager", "mlp_eager_step")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    out = tmp_path_factory.mktemp("bench") / "results.json"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--only",
            ",".join(WORKLOADS),
            "--vs",
            sys.executable,
            "--json",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout, json.loads(out.read_text())


def test_table_lists_every_row_and_implementation(quick_run: tuple[str, dict]) -> None:
    stdout, _ = quick_run
    header = next(line for line in stdout.splitlines() if line.startswith("| row |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells == [
        "row",
        "unit",
        "ours",
        "raw",
        "keras",
        "original",
        "ours/raw",
        "ours/keras",
        "ours/original",
    ]
    lines = stdout.splitlines()
    for name in WORKLOADS:
        line = next(line for line in lines if line.startswith(f"| {name} "))
        values = [c.strip() for c in line.strip("|").split("|")]
        assert len(values) == len(cells)
        assert all(values), line
        for ratio in values[6:]:
            assert float(ratio) > 0
    assert "| linear_eager: ours/raw <= 1.05 |" in stdout


def test_json_structure(quick_run: tuple[str, dict]) -> None:
    _, report = quick_run
    assert set(report) == {"meta", "rows", "targets", "errors"}
    assert report["errors"] == {}
    meta = report["meta"]
    assert meta["quick"] is True
    assert meta["device"] == "cpu"
    # The stand-in "original" is this interpreter's (our) sonnet.
    assert meta["other"]["sonnet_file"] == meta["sonnet_file"]
    assert [row["row"] for row in report["rows"]] == list(WORKLOADS)
    for row in report["rows"]:
        assert row["unit"] == "us"
        assert set(row["impls"]) == {"ours", "raw", "keras", "original"}
        for record in row["impls"].values():
            assert len(record["samples"]) == len(record["cpu_samples"]) >= 1
            assert record["median"] > 0
            assert min(record["samples"]) <= record["median"] <= max(record["samples"])
        assert set(row["ratios"]) == {"raw", "keras", "original"}
        ours = row["impls"]["ours"]["median"]
        for other, ratio in row["ratios"].items():
            expected = ours / row["impls"][other]["median"]
            assert ratio["wall"] == pytest.approx(expected)
    (target,) = report["targets"]
    assert target["row"] == "linear_eager"
    assert target["other"] == "raw"
    assert target["limit"] == 1.05
    assert target["met"] == (target["ratio"] <= 1.05)


def test_table_from_json_reprints_the_tables(
    quick_run: tuple[str, dict], tmp_path: Path
) -> None:
    stdout, report = quick_run
    path = tmp_path / "results.json"
    path.write_text(json.dumps(report))
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--table-from", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]

    def tables(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("|")]

    assert tables(completed.stdout) == tables(stdout)
    assert len(tables(stdout)) == 2 + len(WORKLOADS) + 2 + 1


DEEP_WORKLOADS = ("transformer48_first_result", "transformer48_step", "remat_memory")


def test_deep_model_rows_and_targets(tmp_path: Path) -> None:
    # Issue 24's rows: our library in two configurations each (every value in
    # the "ours" column), compared by row targets; remat_memory runs its two
    # configurations in fresh processes and reports their step times too.
    out = tmp_path / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", ",".join(DEEP_WORKLOADS)]
        + ["--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["errors"] == {}
    rows = {row["row"]: row for row in report["rows"]}
    assert list(rows) == [
        "transformer48_first_result",
        "transformer48_first_result_unrolled",
        "transformer48_step",
        "transformer48_step_unrolled",
        "transformer48_step_xla",
        "transformer48_step_xla_unrolled",
        "transformer48_step_w64",
        "transformer48_step_w64_unrolled",
        "remat_memory",
        "remat_memory_plain",
        "remat_step",
        "remat_step_plain",
    ]
    for row in rows.values():
        assert set(row["impls"]) == {"ours"}, row["row"]
        assert row["impls"]["ours"]["median"] > 0, row["row"]
    assert rows["remat_memory"]["unit"] == "MiB"
    targets = {(t["row"], t["other_row"]): t for t in report["targets"]}
    assert set(targets) == {
        ("transformer48_first_result", "transformer48_first_result_unrolled"),
        ("transformer48_step", "transformer48_step_unrolled"),
        ("transformer48_step_xla", "transformer48_step_xla_unrolled"),
        ("transformer48_step_w64", "transformer48_step_w64_unrolled"),
        ("remat_memory", "remat_memory_plain"),
        ("remat_step", "remat_step_plain"),
    }
    for (row, other_row), target in targets.items():
        assert target["other"] == "ours"
        expected = rows[row]["impls"]["ours"]["median"]
        expected /= rows[other_row]["impls"]["ours"]["median"]
        assert target["ratio"] == pytest.approx(expected)


FINETUNE_WORKLOADS = ("lora_step", "int8_inference")


def test_finetune_rows_and_targets(tmp_path: Path) -> None:
    # `snt.lora` and `snt.int8` rows: two configurations of ours each (LoRA
    # against full fine-tuning with a row target; int8 against float32 for
    # information, with their time and byte ratios as value rows).
    out = tmp_path / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only"]
        + [",".join(FINETUNE_WORKLOADS), "--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "lora_step: rank-8 adapters 4,608 parameters" in completed.stderr
    report = json.loads(out.read_text())
    assert report["errors"] == {}
    rows = {row["row"]: row for row in report["rows"]}
    assert list(rows) == [
        "lora_step",
        "lora_step_full",
        "lora_params",
        "int8_inference",
        "int8_inference_f32",
        "int8_inference_mlp",
        "int8_inference_mlp_f32",
        "int8_time_ratio",
        "int8_time_ratio_mlp",
        "int8_bytes",
        "int8_bytes_mlp",
    ]
    for row in rows.values():
        assert set(row["impls"]) == {"ours"}, row["row"]
        assert row["impls"]["ours"]["median"] > 0, row["row"]
    value = {name: row["impls"]["ours"]["median"] for name, row in rows.items()}
    # QUICK: 1 block of width 32; 6 Linears with rank-8 adapters.
    assert value["lora_params"] == pytest.approx(4608 / 12768)
    # Weights in int8 plus float scales, biases and norms: just over a quarter.
    assert 0.25 < value["int8_bytes_mlp"] < 0.26
    assert 0.25 < value["int8_bytes"] < 0.31
    for suffix in ("", "_mlp"):
        samples = rows[f"int8_time_ratio{suffix}"]["impls"]["ours"]["samples"]
        int8 = rows[f"int8_inference{suffix}"]["impls"]["ours"]["samples"]
        f32 = rows[f"int8_inference{suffix}_f32"]["impls"]["ours"]["samples"]
        assert samples == pytest.approx([a / b for a, b in zip(int8, f32)])
    (target,) = report["targets"]
    assert (target["row"], target["other"], target["other_row"]) == (
        "lora_step",
        "ours",
        "lora_step_full",
    )
    assert target["limit"] == 0.8
    assert target["ratio"] == pytest.approx(
        value["lora_step"] / value["lora_step_full"]
    )


def test_lora_parameter_counts_match_the_closed_form() -> None:
    sys.path.insert(0, str(ROOT))
    from bench.workloads import finetune, transformer

    # Full size: 24 adapters of rank 8 on the 3.16 M-parameter Transformer.
    assert finetune.parameter_counts(transformer.FULL, 8) == (147_456, 3_159_552)


def test_unknown_workload_is_rejected() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "no_such_workload"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode != 0
    assert "unknown workload(s) no_such_workload" in completed.stderr


def _bench_modules():  # noqa: ANN202 (imported lazily: bench is not a package of ours)
    sys.path.insert(0, str(ROOT))
    from bench import harness
    from bench.workloads import dense, transformer, utilisation

    return harness, dense, transformer, utilisation


def test_interleave_pairs_samples_and_takes_numbers_per_sampler() -> None:
    harness, *_ = _bench_modules()
    calls: list[tuple[str, int]] = []

    def sampler(name: str):  # noqa: ANN202
        def sample(number: int) -> tuple[float, float]:
            calls.append((name, number))
            return float(len(calls)), 0.0

        return sample

    samplers = {("a", "raw"): sampler("a"), ("b", "raw"): sampler("b")}
    numbers = {("a", "raw"): 2, ("b", "raw"): 5}
    results = harness.interleave(samplers, 3, numbers, warmup=1)
    assert calls == [("a", 2), ("b", 5)] + [("a", 2), ("b", 5)] * 3
    # The i-th samples come from the same repetition (round-robin order).
    assert results["a", "raw"].wall == [3.0, 5.0, 7.0]
    assert results["b", "raw"].wall == [4.0, 6.0, 8.0]
    single = harness.interleave({("a", "raw"): sampler("a")}, 2, 4, warmup=0)
    assert calls[-2:] == [("a", 4), ("a", 4)] and len(single["a", "raw"].wall) == 2


def test_utilisation_flops_match_the_closed_forms() -> None:
    _, dense, transformer, utilisation = _bench_modules()
    sizes, batch = dense.adam_sizes(False)
    forward = sum(2 * batch * n * m for n, m in zip(sizes[:-1], sizes[1:]))
    mlp = utilisation.train_flops(utilisation.mlp_products(sizes, batch))
    assert mlp == 3 * forward - 2 * batch * sizes[0] * sizes[1]
    for config in (transformer.FULL, transformer.QUICK):
        n, d = config.batch * config.time, config.width
        block = 24 * n * d * d + 4 * config.batch * config.time**2 * d
        products = utilisation.transformer_products(config)
        assert utilisation.train_flops(products) == 3 * config.layers * block


def test_matmuls_sampler_computes_every_product() -> None:
    # It returns the sum of all elements of every forward and backward product.
    _, _, _, utilisation = _bench_modules()
    products = [utilisation.Product(6, 5, 4), utilisation.Product(3, 2, 4, batch=2)]
    products.append(utilisation.Product(4, 3, 2, input_grad=False))
    run, operands = utilisation.matmuls(products)
    expected = 0.0
    for p, variables in zip(products, operands, strict=True):
        x, w, g = (v.numpy().astype(np.float64) for v in variables)
        expected += (x @ w).sum() + (np.swapaxes(x, -1, -2) @ g).sum()
        if p.input_grad:
            expected += (g @ np.swapaxes(w, -1, -2)).sum()
    assert float(run()) == pytest.approx(expected, rel=1e-4)
    wall, cpu = utilisation.matmuls_sampler(products)(2)
    assert wall > 0 and cpu >= 0


OPEN_WEIGHTS_WORKLOADS = ("hf_load", "generate_tokens", "prefill")


def test_open_weights_rows_and_targets(tmp_path: Path) -> None:
    # Issue 33's rows: ours against transformers and KerasHub (rows of their
    # own, skipped with the reason where not installed), and the memory of a
    # fresh process loading a checkpoint written by `snt.hf.save`.
    out = tmp_path / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only"]
        + [",".join(OPEN_WEIGHTS_WORKLOADS), "--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["errors"] == {}
    rows = {row["row"]: row["impls"]["ours"] for row in report["rows"]}
    peers = ("transformers", "kerashub")
    expected = ["hf_load", "hf_load_first_logits"]
    expected += ["hf_load_transformers", "hf_load_first_logits_transformers"]
    expected += ["hf_load_memory", "hf_load_rss"]
    for batch in (1, 8):
        row = f"generate_tokens_b{batch}"
        expected += [row, f"{row}_xla", *(f"{row}_{peer}" for peer in peers)]
    expected += ["prefill", *(f"prefill_{peer}" for peer in peers)]
    assert sorted(rows) == sorted(expected)
    for name, record in rows.items():
        if name.endswith(peers) and record.get("skipped"):
            assert "not installed (pip install" in record["skipped"], name
        else:
            assert record["median"] > 0, name
    # (At the quick size the process's own growth outweighs the checkpoint.)
    assert rows["hf_load_memory"]["median"] > 0
    labels = {target["label"] for target in report["targets"]}
    assert "hf_load_memory: ours <= 1.3" in labels
    assert "prefill: ours/ours prefill_transformers <= 1" in labels


def test_transformer_step_torch_rows_and_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 35's PyTorch peers: rows of their own in the ours column, skipped
    # with the reason when PyTorch is not installed, and the target
    # ours / PyTorch eager <= 1.
    import importlib.util

    from bench import workloads
    from bench.harness import Skip
    from bench.workloads import transformer

    workload = workloads.get("transformer_step")
    rows = [row.name for row in workload.rows]
    assert rows == [
        "transformer_step",
        "transformer_step_torch",
        "transformer_step_torch_compile",
    ]
    labels = {target.label for target in workload.targets}
    assert "ours/ours transformer_step_torch <= 1" in labels
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "torch" else real_find_spec(name, *a),
    )
    skipped = transformer._torch_samplers(quick=True)
    assert sorted(skipped) == rows[1:]
    for value in skipped.values():
        assert isinstance(value, Skip) and "not installed" in value.reason


def test_transformer_step_torch_model_matches_ours() -> None:
    # The PyTorch peer has our model's parameters (3,159,552 at full size)
    # and its step runs (quick size).
    pytest.importorskip("torch")
    from bench.workloads import transformer

    counts = []
    for config in (transformer.FULL, transformer.QUICK):
        model = transformer.torch_model(config)
        ours = transformer._snt_transformer(config)
        ours(np.zeros([1, 1, config.width], np.float32))
        count = sum(int(np.prod(v.shape)) for v in ours.trainable_variables)
        assert sum(p.numel() for p in model.parameters()) == count
        counts.append(count)
    assert counts[0] == 3_159_552
    step = transformer.torch_transformer_step(transformer.QUICK)
    assert np.isfinite(step())
