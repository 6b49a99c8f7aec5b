"""Image-classification data for the examples, offline by default.

Every example trains on scikit-learn's bundled 8x8 handwritten digits (1,797 real
images shipped inside the package: no download). Pass a path to use a real data
set instead:

- MNIST as Keras stores it: an `.npz` with `x_train, y_train, x_test, y_test`.
- CIFAR-10: the python tarball (`cifar-10-python.tar.gz`), its extracted
  `cifar-10-batches-py/` folder (or the folder above it), or an `.npz` with the
  same four keys as MNIST.

`load(path)` returns a `Dataset` with float32 images in `[0, 1]` shaped
`[N, height, width, channels]` and int64 labels shaped `[N]`, whatever the source.
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from collections.abc import Callable
from typing import IO, Any, NamedTuple

import numpy as np
import tensorflow as tf

_CIFAR_DIR = "cifar-10-batches-py"
_CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_CIFAR_TEST = "test_batch"
_NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")


class Dataset(NamedTuple):
    """A train/test split: images `[N, H, W, C]` float32 in [0, 1], labels int64."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int


def load(path: str | None = None, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """Loads the digits (when `path` is None), an MNIST/CIFAR `.npz` or CIFAR-10.

    `test_fraction` and `seed` only apply to the digits, which have no official
    split: a fixed shuffle keeps the held-out set the same from run to run.
    """
    if path is None:
        return load_digits(test_fraction, seed)
    if not os.path.exists(path):
        raise FileNotFoundError(f"No data set at {path!r}.")
    if os.path.isdir(path) or path.endswith((".tar.gz", ".tgz", ".tar")):
        return load_cifar10(path)
    if path.endswith(".npz"):
        return load_npz(path)
    raise ValueError(
        "`path` must be an .npz file, a CIFAR-10 tarball or a CIFAR-10 folder. "
        f"Received: {path!r}."
    )


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's 8x8 digits, pixel values 0..16 scaled to [0, 1]."""
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    num_test = int(round(len(labels) * test_fraction))
    test, train = order[:num_test], order[num_test:]
    return Dataset(
        "digits", images[train], labels[train], images[test], labels[test], 10
    )


def load_npz(path: str) -> Dataset:
    """An `.npz` with `x_train, y_train, x_test, y_test` (Keras' MNIST layout).

    Images may be `[N, H, W]` (grey) or `[N, H, W, C]`, integers in 0..255 or
    floats in [0, 1]; labels `[N]` or `[N, 1]`.
    """
    with np.load(path, allow_pickle=False) as archive:
        missing = [key for key in _NPZ_KEYS if key not in archive.files]
        if missing:
            raise ValueError(
                f"`path` must name an .npz holding {', '.join(_NPZ_KEYS)}. "
                f"Received: {path!r} without {', '.join(missing)}."
            )
        arrays = {key: archive[key] for key in _NPZ_KEYS}
    x_train, x_test = _images(arrays["x_train"]), _images(arrays["x_test"])
    y_train, y_test = _labels(arrays["y_train"]), _labels(arrays["y_test"])
    # MNIST and CIFAR-10 have 10 classes; more if the labels say so.
    num_classes = max(10, int(max(y_train.max(), y_test.max())) + 1)
    name = "mnist" if x_train.shape[1:] == (28, 28, 1) else os.path.basename(path)
    return Dataset(name, x_train, y_train, x_test, y_test, num_classes)


def load_cifar10(path: str) -> Dataset:
    """CIFAR-10 in the python layout: a tarball or an extracted folder."""
    if os.path.isdir(path):
        folder = path
        if os.path.isdir(os.path.join(path, _CIFAR_DIR)):
            folder = os.path.join(path, _CIFAR_DIR)

        def open_batch(name: str) -> IO[bytes]:
            return open(os.path.join(folder, name), "rb")

        return _cifar_from(open_batch)
    with tarfile.open(path) as tar:
        members = {os.path.basename(m.name): m for m in tar.getmembers() if m.isfile()}

        def open_tar_batch(name: str) -> IO[bytes]:
            if name not in members:
                raise FileNotFoundError(f"{path!r} has no {_CIFAR_DIR}/{name}.")
            extracted = tar.extractfile(members[name])
            assert extracted is not None  # Regular files always extract.
            return io.BytesIO(extracted.read())

        return _cifar_from(open_tar_batch)


def _cifar_from(open_batch: Callable[[str], IO[bytes]]) -> Dataset:
    train = [_read_cifar_batch(open_batch, name) for name in _CIFAR_TRAIN]
    x_test, y_test = _read_cifar_batch(open_batch, _CIFAR_TEST)
    x_train = np.concatenate([x for x, _ in train])
    y_train = np.concatenate([y for _, y in train])
    return Dataset("cifar10", x_train, y_train, x_test, y_test, 10)


def _read_cifar_batch(
    open_batch: Callable[[str], IO[bytes]], name: str
) -> tuple[np.ndarray, np.ndarray]:
    with open_batch(name) as f:
        batch = _ArraysOnlyUnpickler(f, encoding="bytes").load()
    # Rows are 3,072 bytes: the red plane, then green, then blue, each 32x32.
    data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    images = data.transpose(0, 2, 3, 1)
    return _images(images), _labels(np.asarray(batch[b"labels"]))


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists and NumPy arrays, and refuses everything else.

    CIFAR-10 ships as pickles; a pickle can run any function it names while
    loading, so only the few NumPy functions that rebuild arrays are allowed.
    """

    _ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(
                f"Refusing to load {module}.{name} from a data file: only NumPy "
                "arrays, lists and dicts are allowed."
            )
        return super().find_class(module, name)


def _images(x: np.ndarray) -> np.ndarray:
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4:
        raise ValueError(
            "Images must be [N, height, width] or [N, height, width, channels]. "
            f"Received: shape {x.shape}."
        )
    if np.issubdtype(x.dtype, np.integer):
        return (x / 255.0).astype(np.float32)
    return x.astype(np.float32)


def _labels(y: np.ndarray) -> np.ndarray:
    return np.asarray(y).reshape(-1).astype(np.int64)


def batches(
    x: np.ndarray, y: np.ndarray, batch_size: int, seed: int = 0
) -> tf.data.Dataset:
    """An endless `tf.data` stream of shuffled `(images, labels)` batches."""
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True).repeat()
    return ds.batch(batch_size, drop_remainder=True).prefetch(2)
