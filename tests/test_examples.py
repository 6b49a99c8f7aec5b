"""The examples: each runs end to end in `--quick` mode; the data loaders.

Every example is run as a user would run it (a subprocess, from a scratch
directory) and its printed results and written files are checked. The loaders
are tested on small MNIST/CIFAR-10 files written here in their real layouts.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import pickle
import re
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from matplotlib import image as mpimg
from tensorboard.backend.event_processing import event_accumulator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _load(name: str) -> types.ModuleType:
    """Imports `examples/<name>.py` without putting `examples/` on `sys.path`."""
    spec = importlib.util.spec_from_file_location(
        f"_example_{name}", EXAMPLES / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


datasets = _load("datasets")


# The stderr of the last `run_example`: progress lines, never TF's start-up.
last_stderr = ""


def run_example(script: str, tmp_path: Path, *args: str) -> str:
    """Runs an example in quick mode, writing into `tmp_path`; returns stdout.

    Its stderr (not a terminal here) must hold progress as lines, not a bar's
    redraws, and none of TensorFlow's start-up lines.
    """
    global last_stderr
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env.pop("COLUMNS", None)  # Output to a pipe: tables fit 100 characters.
    # The checkout's `sonnet`, whether or not it is installed.
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), env.get("PYTHONPATH")])
    )
    command = [sys.executable, str(EXAMPLES / script), "--quick", "--out", "out"]
    result = subprocess.run(
        [*command, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (
        f"{script} failed ({result.returncode}):\n{result.stdout[-3000:]}\n"
        f"{result.stderr[-3000:]}"
    )
    last_stderr = result.stderr
    return result.stdout


def assert_quiet_progress(
    stderr: str, keys: tuple[str, ...] = ("loss",), desc: str = "training"
) -> None:
    """Progress as lines: the recent speed, the first step's time on the
    first line only, and for each of `keys` the mean since the line before,
    which changes from line to line as the loss does."""
    assert "\r" not in stderr, "a progress bar was drawn without a terminal"
    for noise in ["cuda", "absl::InitializeLog", "cpu_feature_guard", "I0000"]:
        assert noise not in stderr, f"TensorFlow start-up line on stderr:\n{stderr}"
    lines = re.findall(rf"^{desc}: \d+/\d+ steps, .*$", stderr, re.MULTILINE)
    assert len(lines) >= 5, stderr
    assert re.search(r"steps/s, first step [0-9.]+ s, ", lines[0]), lines[0]
    assert all("first step" not in line for line in lines[1:]), stderr
    assert all(re.search(r", [0-9.]+ steps/s", line) for line in lines), stderr
    for key in keys:
        values = [re.findall(rf"\b{key}=([-0-9.]+)", line) for line in lines]
        assert all(len(v) == 1 for v in values), stderr
        # Means of different steps: equal to 3 digits only where it levels off.
        changes = sum(float(a[0]) != float(b[0]) for a, b in zip(values, values[1:]))
        assert changes >= len(values) // 2, f"{key} repeats:\n{stderr}"


def assert_fits(stdout: str, width: int = 100) -> None:
    """No printed line (tables included) is wider than `width`; sampled text
    (between rules of dashes) is the model's own."""
    outside_samples = re.sub(r"^-{60}\n.*?^-{60}$", "", stdout, flags=re.S | re.M)
    wide = [line for line in outside_samples.splitlines() if len(line) > width]
    assert not wide, f"lines over {width} characters:\n" + "\n".join(wide)


def run_logs(out: Path) -> dict[str, list[float | str]]:
    """The TensorBoard logs of the one run in `out/logs` (one folder a run)."""
    (run,) = (out / "logs").iterdir()
    return tensorboard_logs(run)


def tensorboard_logs(logdir: Path) -> dict[str, list[float | str]]:
    """Every tag in the event files of `logdir`, read with TensorBoard's own
    reader: `{tag: [value per step]}` for scalars and text, plugin name else."""
    assert logdir.is_dir(), f"no TensorBoard logs in {logdir}"
    reader = event_accumulator.EventAccumulator(
        str(logdir), size_guidance={event_accumulator.TENSORS: 0}
    )
    reader.Reload()
    logs: dict[str, list[float | str]] = {}
    for tag in reader.Tags()[event_accumulator.TENSORS]:
        plugin = reader.SummaryMetadata(tag).plugin_data.plugin_name
        values = [tf.make_ndarray(e.tensor_proto) for e in reader.Tensors(tag)]
        if plugin == "scalars":
            logs[tag] = [float(v) for v in values]
        elif plugin == "text":
            logs[tag] = [v.item().decode() for v in values]
        else:
            logs[tag] = [plugin]
    return logs


def assert_summary_text(logs: dict[str, list[float | str]], tag: str) -> None:
    (text,) = logs[tag]
    assert isinstance(text, str)
    assert "Trainable" in text and "Total" in text and "FLOPs" in text
    assert "multiple" not in text


def accuracy(stdout: str) -> float:
    match = re.search(r"test accuracy: ([0-9.]+)", stdout)
    assert match, f"no test accuracy printed:\n{stdout}"
    return float(match.group(1))


def assert_png(path: Path) -> np.ndarray:
    assert path.is_file(), f"{path} was not written"
    pixels = mpimg.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 50 and pixels.shape[1] > 50
    assert pixels.std() > 0, f"{path} is blank"
    return pixels


# ---------------------------------------------------------------------------
# The examples, end to end.


def test_mlp_digits(tmp_path):
    stdout = run_example("mlp_digits.py", tmp_path)
    assert accuracy(stdout) >= 0.95  # Even the quick run's 300 steps get there.
    assert_quiet_progress(last_stderr)
    assert_fits(stdout)
    assert re.search(r"mlp/linear_0 +Linear +f32\[64,256\] +16,640", stdout)
    out = tmp_path / "out"
    assert_png(out / "loss.png")
    assert_png(out / "evaluation.png")
    assert_png(out / "predictions.png")
    (count,) = re.findall(r"test set: (\d+|none) misclassified", stdout)
    wrong = 0 if count == "none" else int(count)
    if 0 < wrong <= 16:
        assert f"{wrong} misclassified, all shown in predictions.png" in stdout
    elif wrong:
        assert "the first 16 shown in predictions.png" in stdout
    logs = run_logs(out)
    assert len(logs["train/loss"]) == 30  # One mean per 10 of the 300 steps.
    assert len(logs["test/accuracy"]) == len(logs["test/loss"]) == 10
    assert logs["test/accuracy"][-1] == pytest.approx(accuracy(stdout), abs=1e-4)
    for layer in ["linear_0", "linear_1", "linear_2"]:
        for variable in ["w", "b"]:
            assert logs[f"mlp/{layer}/{variable}"] == ["histograms"]
    assert_summary_text(logs, "model/summary")
    assert (out / "checkpoint" / "ckpt-1.index").is_file()
    assert (out / "saved_model" / "saved_model.pb").is_file()
    assert re.search(r"checkpoint .*: reloaded outputs match", stdout)
    assert re.search(r"SavedModel .*: reloaded outputs match", stdout)


def test_mlp_digits_bf16(tmp_path):
    # bfloat16 compute, float32 variables: about float32's accuracy (the
    # float32 run above reaches >= 0.95 in the same 300 steps).
    stdout = run_example("mlp_digits.py", tmp_path, "--precision", "bf16")
    assert accuracy(stdout) >= 0.93
    assert re.search(r"checkpoint .*: reloaded outputs match", stdout)
    assert re.search(r"SavedModel .*: reloaded outputs match", stdout)


def test_little_gan(tmp_path):
    stdout = run_example("little_gan.py", tmp_path)
    assert "final losses" in stdout
    assert_quiet_progress(last_stderr, keys=("d_loss", "g_loss"))
    # The discriminator's table would be 123 characters wide unfitted.
    assert_fits(stdout)
    assert "spectral_norm" in stdout
    # A 60-step GAN's samples are still all alike; the run says so.
    match = re.search(r"sample diversity ([0-9.]+)", stdout)
    assert match, stdout
    if float(match.group(1)) < 0.3:
        assert "the samples are nearly all alike" in stdout
    logs = run_logs(tmp_path / "out")
    for tag in ["discriminator_loss", "generator_loss", "discriminator_accuracy"]:
        assert len(logs[f"train/{tag}"]) == 6
    assert logs["samples"] == ["images"]
    assert_summary_text(logs, "generator/summary")
    assert_summary_text(logs, "discriminator/summary")
    pixels = assert_png(tmp_path / "out" / "samples.png")
    assert pixels.shape[0] > pixels.shape[1] / 4  # Several rows of samples.


def test_vqvae(tmp_path):
    stdout = run_example("vqvae.py", tmp_path)
    match = re.search(
        r"error: ([0-9.]+) \(predicting the mean training image: ([0-9.]+)", stdout
    )
    assert match, stdout
    error, baseline = map(float, match.groups())
    assert error < baseline
    assert_png(tmp_path / "out" / "reconstructions.png")
    assert_quiet_progress(last_stderr, keys=("error",))
    # Its table, 141 characters wide in full, prints as a tree within 100.
    assert_fits(stdout)
    assert re.search(r"^    ema_cluster_size +Exponential", stdout, re.MULTILINE)
    logs = run_logs(tmp_path / "out")
    assert len(logs["train/loss"]) == len(logs["train/perplexity"]) == 8
    assert logs["test/reconstruction_error"] == [pytest.approx(error, abs=1e-4)]
    assert_summary_text(logs, "model/summary")
    # TensorBoard gets the full table. The encoder and decoder have one name
    # scope; their paths differ.
    (table,) = logs["model/summary"]
    assert isinstance(table, str)
    assert "vqvae/encoder/conv" in table and "vqvae/decoder/conv" in table
    assert "vqvae/quantizer/ema_cluster_size  ExponentialMovingAverage" in table


def test_functional_mlp(tmp_path):
    stdout = run_example("functional_mlp.py", tmp_path)
    assert accuracy(stdout) > 0.5
    assert_png(tmp_path / "out" / "loss.png")
    assert_quiet_progress(last_stderr)
    assert_fits(stdout)  # The parameter list too.
    assert re.search(r"^parameters: .*\n  ", stdout, re.MULTILINE)
    logs = run_logs(tmp_path / "out")
    assert len(logs["train/loss"]) == 10
    assert logs["test/accuracy"] == [pytest.approx(accuracy(stdout), abs=1e-4)]
    assert_summary_text(logs, "model/summary")


def test_functional_mlp_with_sgd_on_an_mnist_file(tmp_path):
    path = write_mnist(tmp_path / "mnist.npz", num_train=120, num_test=40)
    stdout = run_example(
        "functional_mlp.py", tmp_path, "--optimizer", "sgd", "--data", str(path)
    )
    assert "mnist: 120 training and 40 test images" in stdout
    assert 0.0 <= accuracy(stdout) <= 1.0
    assert_png(tmp_path / "out" / "loss.png")


def test_distributed_training_replicator(tmp_path):
    stdout = run_example("distributed_training.py", tmp_path, "--replicas", "2")
    assert "Replicator with 2 replicas" in stdout
    assert "replicas in sync: True (2 copies)" in stdout
    assert accuracy(stdout) > 0.2
    assert_png(tmp_path / "out" / "loss.png")
    assert_quiet_progress(last_stderr)
    assert_fits(stdout)
    # The model's table comes before training, as in the other examples.
    assert stdout.index("Total") < stdout.index("trained 40 steps")
    logs = run_logs(tmp_path / "out")
    assert len(logs["train/loss"]) == 4
    assert logs["test/accuracy"] == [pytest.approx(accuracy(stdout), abs=1e-4)]
    assert_summary_text(logs, "model/summary")


def test_distributed_training_two_workers(tmp_path):
    stdout = run_example(
        "distributed_training.py", tmp_path, "--workers", "2", "--steps", "10"
    )
    assert "MultiWorkerReplicator with 2 replicas" in stdout
    assert "replicas in sync: True (2 copies)" in stdout
    assert 0.0 <= accuracy(stdout) <= 1.0
    assert_png(tmp_path / "out" / "loss.png")
    # Only the chief worker writes logs.
    assert "test/accuracy" in run_logs(tmp_path / "out")


def test_char_transformer(tmp_path):
    stdout = run_example("char_transformer.py", tmp_path)
    match = re.search(
        r"validation loss: ([0-9.]+) nats/char.*alone: ([0-9.]+) nats/char", stdout
    )
    assert match, stdout
    loss, baseline = map(float, match.groups())
    assert loss < baseline  # Even 60 steps beat character frequencies.
    assert "sampled text:\n" in stdout
    assert "too little for readable text" in stdout  # A --quick run says so.
    assert_quiet_progress(last_stderr)
    assert_fits(stdout)
    match = re.search(r"recomputing each prefix: max \|diff\| (\S+)", stdout)
    assert match and float(match.group(1)) < 1e-4, stdout
    assert re.search(r"checkpoint .*: reloaded outputs match", stdout)
    out = tmp_path / "out"
    assert_png(out / "loss.png")
    assert (out / "sample.txt").read_text(encoding="utf-8").startswith("def ")
    assert (out / "checkpoint" / "ckpt-1.index").is_file()


def test_char_transformer_rejects_a_width_not_divisible_by_the_heads(tmp_path):
    command = [sys.executable, str(EXAMPLES / "char_transformer.py"), "--width", "30"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2
    assert "--width (30) must be a multiple of --heads" in result.stderr


def test_char_transformer_with_local_attention_and_experts(tmp_path):
    stdout = run_example(
        "char_transformer.py",
        tmp_path,
        *("--layers", "2", "--window", "8", "none"),
        *("--experts", "4", "--top-k", "1", "--steps", "20"),
    )
    assert "attention windows per block: [8, None]" in stdout
    assert "MLPs: mixtures of 4 experts, 1 per character" in stdout
    match = re.search(r"load-balancing loss ([0-9.]+) summed over 2 block", stdout)
    assert match and float(match.group(1)) >= 2 - 1e-3, stdout  # At least 1 each.
    assert re.search(r"validation loss: [0-9.]+ nats/char", stdout)
    match = re.search(r"recomputing each prefix: max \|diff\| (\S+)", stdout)
    assert match and float(match.group(1)) < 1e-4, stdout
    assert re.search(r"checkpoint .*: reloaded outputs match", stdout)
    assert_fits(stdout)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--experts", "2", "--top-k", "3"], "--top-k (3) must be in [1, --experts]"),
        (["--top-k", "1"], "--top-k needs --experts"),
        (["--experts", "0"], "--experts (0) must be at least 1"),
        (["--window", "0"], "'0' is not a positive int or none"),
    ],
)
def test_char_transformer_rejects_bad_window_and_expert_flags(tmp_path, flags, message):
    command = [sys.executable, str(EXAMPLES / "char_transformer.py"), *flags]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2
    assert message in result.stderr


def lora_numbers(stdout: str) -> dict[str, float]:
    """The parameter counts and losses `char_transformer_lora.py` prints."""
    patterns = {
        "total": r"^parameters: ([\d,]+) total, ([\d,]+) trainable$",
        "adapted": r"^parameters: ([\d,]+) total, ([\d,]+) trainable \(the adapters",
        "pretrained": r"^pretrained model: held-out loss ([0-9.]+) nats/char on "
        r"the new text \(([0-9.]+) on its own\)",
        "tuned": r"^fine-tuned: held-out loss ([0-9.]+) nats/char",
        "merged": r"^merged \(snt.lora.merge\): held-out loss ([0-9.]+) nats/char",
        "removed": r"^snt.lora.remove: held-out loss ([0-9.]+) ",
        "restored": r"^snt.lora.restore: held-out loss ([0-9.]+) ",
    }
    numbers = {}
    for name, pattern in patterns.items():
        match = re.search(pattern, stdout, re.MULTILINE)
        assert match, f"no {name!r} line:\n{stdout}"
        for i, value in enumerate(match.groups()):
            numbers[f"{name}_{i}"] = float(value.replace(",", ""))
    return numbers


def test_char_transformer_lora(tmp_path):
    stdout = run_example("char_transformer_lora.py", tmp_path)
    assert_quiet_progress(last_stderr)
    assert_quiet_progress(last_stderr, desc="pretraining")
    assert_fits(stdout)
    n = lora_numbers(stdout)
    # Before `snt.lora.add` every parameter trains; after it only the
    # adapters, which are all the parameters it added.
    assert n["total_0"] == n["total_1"] > 0
    assert 0 < n["adapted_1"] < 0.25 * n["total_0"]
    assert n["adapted_0"] == n["total_0"] + n["adapted_1"]
    fraction = f"{n['adapted_1'] / n['total_0']:.1%}"
    assert f"(the adapters: {fraction} of the model's" in stdout
    # 1 Transformer block: attention's 4 projections, the MLP's 2, the head.
    assert re.search(r"snt.lora.add\(rank=4, alpha=4\): 7 adapters", stdout)
    assert n["tuned_0"] < n["pretrained_0"] - 0.05  # Fine-tuning helps.
    assert re.search(r"base weights unchanged: (\d+) of \1 variables", stdout)
    assert n["merged_0"] == pytest.approx(n["tuned_0"], abs=2e-3)
    assert n["removed_0"] == pytest.approx(n["pretrained_0"], abs=2e-3)
    assert n["restored_0"] == pytest.approx(n["tuned_0"], abs=2e-3)
    assert "sampled text:\n" in stdout
    out = tmp_path / "out"
    assert_png(out / "loss.png")
    assert (out / "sample.txt").read_text(encoding="utf-8").startswith("def ")
    assert (out / "adapters" / "lora.index").is_file()
    logs = run_logs(out)
    assert len(logs["pretrain/loss"]) == 6 and len(logs["finetune/loss"]) == 10
    assert logs["finetune/validation_loss"] == [pytest.approx(n["tuned_0"], abs=1e-3)]

    # The pretrained checkpoint it wrote, read back instead of pretraining
    # (as one of `char_transformer.py` would be), gives the same model.
    stdout = run_example(
        "char_transformer_lora.py",
        tmp_path,
        "--checkpoint",
        "out/pretrained",
        "--steps",
        "10",
        "--rank",
        "2",
        "--pattern",
        "attention",
    )
    assert "pretrained model read from out/pretrained/ckpt-1" in stdout
    assert "pretraining:" not in last_stderr
    again = lora_numbers(stdout)
    assert again["pretrained_0"] == n["pretrained_0"]
    assert again["pretrained_1"] == n["pretrained_1"]
    assert re.search(r"snt.lora.add\(rank=2, alpha=2\): 4 adapters", stdout)
    assert again["adapted_1"] < n["adapted_1"]

    # A model of another size does not fit the checkpoint: the run says so.
    command = [sys.executable, str(EXAMPLES / "char_transformer_lora.py"), "--quick"]
    command += ["--width", "64", "--checkpoint", "out/pretrained"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1, result.stderr
    assert "does not fit the model" in result.stderr
    assert "give the --modules, --width, --layers and --heads" in result.stderr


def test_open_weights(tmp_path):
    stdout = run_example("open_weights.py", tmp_path)
    assert "model_type 'llama'" in stdout
    assert "read back with snt.hf.load: logits identical: True" in stdout
    assert re.search(
        r"transformers is not installed|transformers \S+ reads .*the same logits",
        stdout,
    )
    assert "sampled text:\n" in stdout
    match = re.search(r"held-out loss ([0-9.]+) nats/token \(before: ([0-9.]+)", stdout)
    assert match and float(match.group(1)) < float(match.group(2)), stdout
    assert "max |logits difference| 0.0e+00" in " ".join(stdout.split())
    assert_quiet_progress(last_stderr, desc="pretraining")
    assert_quiet_progress(last_stderr, desc="fine-tuning")
    assert_fits(stdout)
    out = tmp_path / "out"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (out / "model" / name).is_file()
    assert json.loads((out / "adapters" / "adapter_config.json").read_text())["r"] == 8
    assert (out / "adapters" / "adapter_model.safetensors").is_file()
    assert_png(out / "loss.png")


def test_char_transformer_lora_help_answers_without_importing_tensorflow(tmp_path):
    # It imports char_transformer.py (and so TensorFlow) after its parsing.
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('TensorFlow imported')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"))
    command = [sys.executable, str(EXAMPLES / "char_transformer_lora.py"), "--help"]
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    for option in ["--checkpoint PATH", "--rank", "--alpha", "--quick", "--steps"]:
        assert option in result.stdout
    assert_help_shows_defaults(result.stdout)


def test_char_transformer_lora_rejects_a_rank_above_the_width(tmp_path):
    command = [sys.executable, str(EXAMPLES / "char_transformer_lora.py")]
    command += ["--quick", "--rank", "33"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2
    assert "--rank (33) must be from 1 to --width (32)" in result.stderr


def test_worker_launcher_stops_the_others_when_one_fails(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", datasets)
    monkeypatch.setitem(sys.modules, "plots", _load("plots"))
    monkeypatch.setitem(sys.modules, "tools", _load("tools"))
    launcher = _load("distributed_training")
    marker = tmp_path / "survivor_finished"
    # Worker 1 fails at once; worker 0 would write `marker` after 60 seconds.
    code = (
        "import json, os, sys, time\n"
        "index = json.loads(os.environ['TF_CONFIG'])['task']['index']\n"
        "if index == 1: sys.exit(3)\n"
        f"time.sleep(60); open({str(marker)!r}, 'w').close()\n"
    )
    assert launcher.launch_workers([sys.executable, "-c", code], 2) == 1
    assert not marker.exists()


OWN_EXAMPLES = [
    "mlp_digits.py",
    "little_gan.py",
    "vqvae.py",
    "functional_mlp.py",
    "distributed_training.py",
]


@pytest.mark.parametrize("script", OWN_EXAMPLES)
def test_help_answers_without_importing_tensorflow(script, tmp_path):
    # A `tensorflow` that cannot be imported: `--help` must not need it.
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('TensorFlow imported')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"))
    command = [sys.executable, str(EXAMPLES / script), "--help"]
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    text = " ".join(result.stdout.split())
    tools = _load("tools")
    # The README's account of `--data` is each script's own.
    assert " ".join(tools.DATA_HELP.split()) in text
    for option in ["--quick", "--steps", "--out", "--logdir", "--data PATH"]:
        assert option in text
    assert_help_shows_defaults(result.stdout)


def assert_help_shows_defaults(help_text: str) -> None:
    """Every option that takes a value, but `--data` (none: the digits) and
    the hidden `--task-index`, says its default in `--help`."""
    options = re.split(r"\n  (?=-)", help_text.split("options:", 1)[1])
    for entry in filter(str.strip, options):
        words = entry.split()
        name = words[0].rstrip(",")
        takes_value = len(words) > 1 and words[1].isupper()
        entry = " ".join(words)
        if takes_value and name not in ("--data", "--checkpoint"):
            assert "default" in entry, f"{name} shows no default: {entry}"
    assert "(default: 0)" in " ".join(help_text.split())  # --seed


def test_char_transformer_help_shows_defaults(tmp_path):
    command = [sys.executable, str(EXAMPLES / "char_transformer.py"), "--help"]
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert_help_shows_defaults(result.stdout)
    assert "--steps STEPS training steps (default: 1000; with --quick: 60)" in (
        " ".join(result.stdout.split())
    )


def test_progress_lines_show_the_means_since_the_line_before(capsys):
    tools = _load("tools")
    with tools.progress(20, formats={"rate": ".1f"}) as bar:
        for step in bar:
            bar.record(loss=step, rate=10 * step)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 10
    assert re.fullmatch(
        r"training: 2/20 steps, [0-9.]+ steps/s, first step [0-9.]+ s, "
        r"loss=0.500, rate=5.0",
        lines[0],
    )
    # Steps 18 and 19, whatever the values before.
    assert re.fullmatch(
        r"training: 20/20 steps, [0-9.]+ steps/s, loss=18.500, rate=185.0", lines[-1]
    )


def test_each_run_logs_into_its_own_folder(tmp_path):
    tools = _load("tools")
    first = tools.run_logdir(str(tmp_path))
    assert os.path.dirname(first) == str(tmp_path)
    assert re.fullmatch(r"\d{8}-\d{6}", os.path.basename(first))
    os.makedirs(first)  # A run's writer made it; the next run gets another.
    second = tools.run_logdir(str(tmp_path))
    assert second != first
    assert tools.run_logdir(str(tmp_path), "baseline") == str(tmp_path / "baseline")


def test_readme_describes_the_examples_options():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Examples", 1)[1].split("\n## ", 1)[0]
    text = " ".join(section.split())
    tools = _load("tools")
    assert " ".join(tools.DATA_HELP.split()) in text
    assert "tensorboard --logdir examples/out" in text
    assert "TF_CPP_MIN_LOG_LEVEL" in text
    for script in OWN_EXAMPLES:
        assert f"examples/{script}" in text


# ---------------------------------------------------------------------------
# Data loaders.


def write_mnist(path: Path, num_train: int = 6, num_test: int = 4) -> Path:
    rng = np.random.default_rng(0)
    np.savez(
        path,
        x_train=rng.integers(0, 256, [num_train, 28, 28], dtype=np.uint8),
        y_train=np.arange(num_train, dtype=np.uint8) % 10,
        x_test=rng.integers(0, 256, [num_test, 28, 28], dtype=np.uint8),
        y_test=np.arange(num_test, dtype=np.uint8) % 10,
    )
    return path


def cifar_batch(num: int, first_label: int) -> dict[bytes, object]:
    """A CIFAR-10 batch: red plane = 10, green = 20, blue = 30 (+ image index)."""
    planes = np.zeros([num, 3, 32, 32], np.uint8)
    for c in range(3):
        planes[:, c] = (10 * (c + 1) + np.arange(num))[:, None, None]
    labels = [(first_label + i) % 10 for i in range(num)]
    return {b"batch_label": b"x", b"labels": labels, b"data": planes.reshape(num, -1)}


def cifar_files() -> dict[str, bytes]:
    files = {f"data_batch_{i}": pickle.dumps(cifar_batch(2, i)) for i in range(1, 6)}
    files["test_batch"] = pickle.dumps(cifar_batch(3, 7))
    return files


def write_cifar_folder(parent: Path) -> Path:
    folder = parent / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name, data in cifar_files().items():
        (folder / name).write_bytes(data)
    return folder


def write_cifar_tarball(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in cifar_files().items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def check_cifar(data) -> None:
    assert data.name == "cifar10" and data.num_classes == 10
    assert data.x_train.shape == (10, 32, 32, 3) and data.x_test.shape == (3, 32, 32, 3)
    assert data.x_train.dtype == np.float32 and data.y_train.dtype == np.int64
    # Channels last, in the file's red/green/blue plane order, scaled to [0, 1].
    np.testing.assert_allclose(data.x_test[1, 5, 7], np.array([11, 21, 31]) / 255)
    np.testing.assert_array_equal(data.y_train[:4], [1, 2, 2, 3])
    np.testing.assert_array_equal(data.y_test, [7, 8, 9])


def test_digits_split():
    data = datasets.load()
    assert data.name == "digits" and data.num_classes == 10
    assert data.x_train.shape[1:] == (8, 8, 1) and data.x_train.dtype == np.float32
    assert len(data.x_train) + len(data.x_test) == 1797
    assert len(data.x_test) == round(1797 * 0.2)
    assert 0.0 == data.x_train.min() and data.x_train.max() == 1.0
    assert set(np.unique(data.y_test)) == set(range(10))
    again = datasets.load()
    np.testing.assert_array_equal(again.y_test, data.y_test)  # A fixed split.
    # No test image also in the training set (checked on the raw pixel bytes).
    train_rows = {x.tobytes() for x in data.x_train}
    overlap = sum(x.tobytes() in train_rows for x in data.x_test)
    assert overlap <= 5  # The data set itself holds a few duplicate images.


def test_mnist_npz(tmp_path):
    data = datasets.load(str(write_mnist(tmp_path / "mnist.npz")))
    assert data.name == "mnist" and data.num_classes == 10
    assert data.x_train.shape == (6, 28, 28, 1) and data.x_test.shape == (4, 28, 28, 1)
    assert data.x_train.dtype == np.float32 and 0 <= data.x_train.min()
    assert data.x_train.max() <= 1
    with np.load(tmp_path / "mnist.npz") as raw:
        np.testing.assert_allclose(data.x_test[..., 0], raw["x_test"] / 255)
    np.testing.assert_array_equal(data.y_train, [0, 1, 2, 3, 4, 5])
    assert data.y_train.dtype == np.int64


def test_cifar_npz_with_column_labels(tmp_path):
    path = tmp_path / "cifar.npz"
    x = np.full([4, 32, 32, 3], 0.5, np.float32)
    np.savez(
        path,
        x_train=x,
        y_train=np.arange(4)[:, None],
        x_test=x[:2],
        y_test=np.array([[9], [1]]),
    )
    data = datasets.load(str(path))
    assert data.x_train.shape == (4, 32, 32, 3) and data.num_classes == 10
    np.testing.assert_array_equal(data.y_test, [9, 1])
    assert float(data.x_train.max()) == 0.5  # Float images are kept as they are.


def test_npz_without_the_four_arrays(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, x_train=np.zeros([2, 8, 8]), y_train=np.zeros([2]))
    with pytest.raises(ValueError, match=r"x_test, y_test"):
        datasets.load(str(path))


def test_npz_with_images_of_the_wrong_rank(tmp_path):
    path = tmp_path / "flat.npz"
    np.savez(
        path,
        x_train=np.zeros([2, 64]),
        y_train=np.zeros([2]),
        x_test=np.zeros([2, 64]),
        y_test=np.zeros([2]),
    )
    with pytest.raises(ValueError, match=r"Images must be .*shape \(2, 64\)"):
        datasets.load(str(path))


def test_cifar_tarball(tmp_path):
    check_cifar(datasets.load(str(write_cifar_tarball(tmp_path / "cifar.tar.gz"))))


def test_cifar_folder_and_its_parent(tmp_path):
    folder = write_cifar_folder(tmp_path)
    check_cifar(datasets.load(str(folder)))
    check_cifar(datasets.load(str(tmp_path)))


def test_cifar_tarball_missing_a_batch(tmp_path):
    path = tmp_path / "partial.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        data = pickle.dumps(cifar_batch(2, 0))
        info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(FileNotFoundError, match="data_batch_2"):
        datasets.load(str(path))


class _Exploit:
    def __reduce__(self):
        return (os.getcwd, ())


def test_cifar_pickles_may_only_hold_arrays(tmp_path):
    folder = write_cifar_folder(tmp_path)
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": _Exploit()}))
    with pytest.raises(pickle.UnpicklingError, match=r"Refusing to load .*getcwd"):
        datasets.load(str(folder))


def test_cifar_labels_stored_as_an_array(tmp_path):
    folder = write_cifar_folder(tmp_path)
    batch = cifar_batch(3, 7)
    batch[b"labels"] = np.asarray(batch[b"labels"])
    (folder / "test_batch").write_bytes(pickle.dumps(batch))
    check_cifar(datasets.load(str(folder)))


def test_unknown_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing_here"):
        datasets.load(str(tmp_path / "nothing_here.npz"))
    other = tmp_path / "data.csv"
    other.write_text("1,2\n")
    with pytest.raises(ValueError, match=r"`path` must be .* Received: .*data.csv"):
        datasets.load(str(other))


def test_batches_repeat_shuffled_full_batches():
    x = np.arange(10, dtype=np.float32)
    y = np.arange(10)
    stream = iter(datasets.batches(x, y, batch_size=4, seed=1))
    seen = [next(stream) for _ in range(5)]  # More than one pass over the data.
    assert all(xs.shape == (4,) for xs, _ in seen)
    for xs, ys in seen:
        np.testing.assert_array_equal(xs.numpy(), ys.numpy())
    first_pass = np.concatenate([xs.numpy() for xs, _ in seen[:2]])
    assert len(set(first_pass)) == 8 and list(first_pass) != list(range(8))
