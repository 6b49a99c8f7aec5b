"""Safetensors files of a Hugging Face model directory: read and written one
tensor at a time (with the `safetensors` package, an optional dependency).

A directory holds `model.safetensors`, or shards `model-0000i-of-0000n
.safetensors` listed by `model.safetensors.index.json` (`weight_map`: tensor
name -> file). `Reader` checks every header first (names, shapes, dtypes; a
truncated file fails there), so a caller can validate everything before it
changes anything, and then reads one tensor, or one block of a tensor's rows,
at a time.

Tensors are read with plain file reads at the offsets the header gives, not
through a memory map: the pages of a mapped file count in the process's
resident memory until it is closed, so reading a model through one (as
`safetensors.safe_open(...).get_tensor` does) holds the file and the
model's variables at once, twice the model. With reads only the block in
hand is extra.
"""

from __future__ import annotations

import json
import pathlib
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from sonnet._src import errors

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
# Dtypes we read (floating point only: quantized checkpoints are refused).
DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def safetensors_module() -> Any:
    """The `safetensors` package, or an `ImportError` saying how to install it."""
    try:
        import safetensors
        import safetensors.numpy  # noqa: F401
    except ImportError as e:  # pragma: no cover - installed in CI.
        raise ImportError(
            "Reading and writing Hugging Face checkpoints needs the `safetensors` "
            "package: `pip install 'sonnet[hf]'` (or `pip install safetensors`)."
        ) from e
    return safetensors


def read_json(path: pathlib.Path) -> Any:
    """The JSON value in `path`, or a `ValueError` naming the file."""
    if not path.is_file():
        raise errors.bad_value("path", f"must contain {path.name}", str(path.parent))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise errors.bad_value(
            str(path), f"must be a readable JSON file ({e})", path.name
        ) from e


class Reader:
    """The tensors of a model directory: where each is, its dtype and shape."""

    def __init__(
        self, directory: pathlib.Path, single: str = SINGLE, index: str = INDEX
    ):
        self._safetensors = safetensors_module()
        self.directory = directory
        index_path = directory / index
        if (directory / single).is_file():
            files = [single]
            expected: dict[str, str] | None = None
        elif index_path.is_file():
            weight_map = read_json(index_path).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise errors.bad_value(
                    str(index_path), "must have a non-empty `weight_map`", weight_map
                )
            expected = {str(k): str(v) for k, v in weight_map.items()}
            files = sorted(set(expected.values()))
        else:
            raise errors.bad_value(
                "path", f"must contain {single} or {index}", str(directory)
            )
        # key -> (file, dtype, shape)
        self.tensors: dict[str, tuple[str, str, list[int]]] = {}
        for name in files:
            for key, dtype, shape in self._header(name):
                if key in self.tensors:
                    raise errors.bad_value(
                        str(directory / name),
                        f"must not repeat tensor {key!r} (also in "
                        f"{self.tensors[key][0]})",
                        key,
                    )
                self.tensors[key] = (name, dtype, shape)
        if expected is not None:
            for key, name in expected.items():
                if self.tensors.get(key, (name,))[0] != name or key not in self.tensors:
                    raise errors.bad_value(
                        str(index_path),
                        f"lists tensor {key!r} in {name}, which does not hold it",
                        key,
                    )

    def _header(self, name: str) -> Iterator[tuple[str, str, list[int]]]:
        path = self.directory / name
        if not path.is_file():
            raise errors.bad_value(str(path), "must exist (listed by the index)", name)
        try:
            with self._safetensors.safe_open(str(path), framework="np") as f:
                for key in f.keys():
                    part = f.get_slice(key)
                    yield key, part.get_dtype(), list(part.get_shape())
        except self._safetensors.SafetensorError as e:
            raise errors.bad_value(
                str(path), f"must be a complete safetensors file ({e})", name
            ) from e

    def check_dtype(self, key: str) -> None:
        name, dtype, _ = self.tensors[key]
        if dtype not in DTYPES:
            raise errors.bad_value(
                f"{self.directory / name}: {key}",
                "must have a floating point dtype: " + ", ".join(DTYPES),
                dtype,
            )

    def read(self, keys: Iterable[str]) -> Iterator[tuple[str, np.ndarray]]:
        """`(key, array)` for `keys`, one whole tensor at a time."""
        for key, _, array in self.read_rows(keys, None):
            yield key, array

    def read_rows(
        self, keys: Iterable[str], max_bytes: int | None, block_bytes: int = 0
    ) -> Iterator[tuple[str, slice | None, np.ndarray]]:
        """`(key, rows, array)` for `keys`, each file opened once.

        A tensor of more than `max_bytes` (None: no limit) comes in blocks of
        whole rows (along its first axis) of at most `block_bytes` (default
        0: `max_bytes`; one row at least): `array` holds `tensor[rows]`. A
        tensor read whole has `rows` None. Arrays are C-contiguous and
        aligned to `ALIGNMENT` bytes.
        """
        by_file: dict[str, list[str]] = {}
        for key in keys:
            by_file.setdefault(self.tensors[key][0], []).append(key)
        for name, names in by_file.items():
            path = self.directory / name
            try:
                starts = _data_starts(path)
                with open(path, "rb", buffering=0) as f:
                    for key in names:
                        _, dtype, shape = self.tensors[key]
                        size = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype]
                        step = None
                        if max_bytes is not None and size > max_bytes:
                            step = block_bytes or max_bytes
                        for rows, array in _blocks(
                            f, starts[key], numpy_dtype(dtype), shape, step
                        ):
                            yield key, rows, array
            except (OSError, ValueError, KeyError) as e:
                raise errors.bad_value(
                    str(path), f"must be a readable safetensors file ({e})", name
                ) from e


# Alignment of the arrays `Reader` returns: TensorFlow's (Eigen's largest),
# so that they can become tensors without a copy (`tf.experimental.dlpack`).
ALIGNMENT = 64


def aligned_empty(shape: list[int], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data is `ALIGNMENT`-aligned."""
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(size + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + size].view(dtype).reshape(shape)


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a safetensors dtype name (of `DTYPES`)."""
    if name == "BF16":
        import ml_dtypes  # Installed with TensorFlow.

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"F64": np.float64, "F32": np.float32, "F16": np.float16}[name])


def _data_starts(path: pathlib.Path) -> dict[str, int]:
    """Where each tensor's bytes start in a safetensors file (already checked
    by `Reader`): after the 8-byte header size and the JSON header."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return {
        key: 8 + size + int(value["data_offsets"][0])
        for key, value in header.items()
        if key != "__metadata__"
    }


def _blocks(
    f: Any, start: int, dtype: np.dtype, shape: list[int], block_bytes: int | None
) -> Iterator[tuple[slice | None, np.ndarray]]:
    """`(rows, array)` blocks of at most `block_bytes` (None: the whole
    tensor) of the tensor at `start` in the open file `f`."""
    count = shape[0] if shape else 1
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    step = count
    if block_bytes is not None and shape:
        step = max(1, block_bytes // max(row_bytes, 1))
    for first in range(0, max(count, 1), max(step, 1)):
        rows = min(step, count - first)
        array = aligned_empty([rows, *shape[1:]] if shape else [], dtype)
        f.seek(start + first * row_bytes)
        _read_into(f, array.reshape(-1).view(np.uint8).data)
        yield (None if step >= count else slice(first, first + rows)), array


def _read_into(f: Any, buffer: memoryview) -> None:
    """Fills `buffer` from `f` (a read returns at most about 2 GiB)."""
    done = 0
    while done < len(buffer):
        count = f.readinto(buffer[done:])
        if not count:
            raise ValueError("the file ends inside a tensor")
        done += count


def shard_size(value: Any) -> int:
    """`max_shard_size` in bytes: an int, or a string such as "5GB", "200MiB"."""
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match is not None:
            unit = (match.group(2) or "B").lower()
            size = int(float(match.group(1)) * _UNITS[unit])
            if size > 0:
                return size
        raise errors.bad_value(
            "max_shard_size",
            'must be a positive number of bytes, e.g. 5000000 or "5GB"',
            value,
        )
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise errors.bad_value(
            "max_shard_size",
            'must be a positive number of bytes, e.g. 5000000 or "5GB"',
            value,
        )
    return int(value)


def _stale(directory: pathlib.Path, single: str, index: str) -> list[pathlib.Path]:
    stem = single.removesuffix(".safetensors")
    pattern = re.compile(rf"^{re.escape(stem)}-\d+-of-\d+\.safetensors$")
    return [
        p
        for p in directory.iterdir()
        if p.name in (single, index) or pattern.match(p.name)
    ]


def write(
    directory: pathlib.Path,
    tensors: list[tuple[str, int, Callable[[], np.ndarray]]],
    max_shard_size: int,
    single: str = SINGLE,
    index: str = INDEX,
) -> list[str]:
    """Writes `(key, nbytes, fetch)` tensors, sharded above `max_shard_size`.

    Only one shard's arrays are in memory at a time (`fetch` is called when
    its shard is written). Earlier weight files of the same name pattern in
    `directory` are removed first, so that the directory holds one model.
    Returns the names of the files written.
    """
    safetensors = safetensors_module()
    shards: list[list[tuple[str, int, Callable[[], np.ndarray]]]] = [[]]
    size = 0
    for item in tensors:
        if shards[-1] and size + item[1] > max_shard_size:
            shards.append([])
            size = 0
        shards[-1].append(item)
        size += item[1]
    directory.mkdir(parents=True, exist_ok=True)
    for path in _stale(directory, single, index):
        path.unlink()
    stem = single.removesuffix(".safetensors")
    count = len(shards)
    names = (
        [single]
        if count == 1
        else [f"{stem}-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)]
    )
    weight_map: dict[str, str] = {}
    for name, shard in zip(names, shards):
        arrays = {key: np.ascontiguousarray(fetch()) for key, _, fetch in shard}
        safetensors.numpy.save_file(
            arrays, str(directory / name), metadata={"format": "pt"}
        )
        del arrays
        weight_map.update({key: name for key, _, _ in shard})
    if count > 1:
        total = sum(item[1] for item in tensors)
        content = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (directory / index).write_text(json.dumps(content, indent=2) + "\n")
        names.append(index)
    return names
