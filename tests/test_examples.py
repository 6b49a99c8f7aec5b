"""The examples: each runs end to end in `--quick` mode; the data loaders.

Every example is run as a user would run it (a subprocess, from a scratch
directory) and its printed results and written files are checked. The loaders
are tested on small MNIST/CIFAR-10 files written here in their real layouts.
"""

from __future__ import annotations

import importlib.util
import io
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
from matplotlib import image as mpimg

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


def run_example(script: str, tmp_path: Path, *args: str) -> str:
    """Runs an example in quick mode, writing into `tmp_path`; returns stdout."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
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
    return result.stdout


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
    out = tmp_path / "out"
    assert_png(out / "loss.png")
    assert_png(out / "predictions.png")
    assert (out / "checkpoint" / "ckpt-1.index").is_file()
    assert (out / "saved_model" / "saved_model.pb").is_file()
    assert re.search(r"checkpoint .*: reloaded outputs match", stdout)
    assert re.search(r"SavedModel .*: reloaded outputs match", stdout)


def test_little_gan(tmp_path):
    stdout = run_example("little_gan.py", tmp_path)
    assert "final losses" in stdout
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


def test_functional_mlp(tmp_path):
    stdout = run_example("functional_mlp.py", tmp_path)
    assert accuracy(stdout) > 0.5
    assert_png(tmp_path / "out" / "loss.png")


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


def test_distributed_training_two_workers(tmp_path):
    stdout = run_example(
        "distributed_training.py", tmp_path, "--workers", "2", "--steps", "10"
    )
    assert "MultiWorkerReplicator with 2 replicas" in stdout
    assert "replicas in sync: True (2 copies)" in stdout
    assert 0.0 <= accuracy(stdout) <= 1.0
    assert_png(tmp_path / "out" / "loss.png")


def test_worker_launcher_stops_the_others_when_one_fails(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", datasets)
    monkeypatch.setitem(sys.modules, "plots", _load("plots"))
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
