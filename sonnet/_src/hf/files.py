"""Safetensors files of a Hugging Face model directory: read and written one
tensor at a time (with the `safetensors` package, an optional dependency).

A directory holds `model.safetensors`, or shards `model-0000i-of-0000n
.safetensors` listed by `model.safetensors.index.json` (`weight_map`: tensor
name -> file). `Reader` checks every header first (names, shapes, dtypes; a
truncated file fails there), so a caller can validate everything before it
changes anything, and then reads each tensor whole into a buffer of the
caller's, or in blocks of its rows.

Tensors are read with plain file reads at the offsets the header gives, not
through a memory map: the pages of a mapped file count in the process's
resident memory until it is closed, so reading a model through one (as
`safetensors.safe_open(...).get_tensor` does) holds the file and the
model's variables at once, twice the model; and a file that shrinks while
it is mapped kills the process (SIGBUS) where a read reports the short
file. With reads only the block in hand is extra.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import pathlib
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

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
        with self.open_tensors(keys) as sources:
            for key, source in sources:
                array = empty(source.shape, source.dtype)
                source.read_into(array)
                yield key, array

    @contextlib.contextmanager
    def open_tensors(self, keys: Iterable[str]) -> Iterator[list[tuple[str, Source]]]:
        """`(key, source)` for `keys` while their files are open (each once),
        in the order of the files' bytes. Sources can be read in parallel
        threads."""
        by_file: dict[str, list[str]] = {}
        for key in keys:
            by_file.setdefault(self.tensors[key][0], []).append(key)
        scratch = threading.local()
        with contextlib.ExitStack() as stack:
            sources: list[tuple[str, Source]] = []
            for name, names in by_file.items():
                path = self.directory / name
                try:
                    starts = _data_starts(path)
                    file = stack.enter_context(open(path, "rb", buffering=0))
                except (OSError, ValueError, KeyError) as e:
                    raise _unreadable(path, e) from e
                opened = _File(file, path, threading.Lock(), scratch)
                for key in sorted(names, key=lambda k: starts[k]):
                    _, dtype, shape = self.tensors[key]
                    source = Source(opened, starts[key], numpy_dtype(dtype), shape)
                    sources.append((key, source))
            yield sources


# Most bytes one `readinto` asks for (a read returns at most about 2 GiB).
READ_BYTES = 2**30
# Most bytes of a tensor's rows that `Source.blocks` holds at a time: small
# enough to stay in the CPU's caches while they are rearranged (transposed,
# split, cast) into their variables. A row larger than this is one block.
BLOCK_BYTES = 2**20


class _File(NamedTuple):
    file: Any
    path: pathlib.Path
    lock: threading.Lock  # Held from a seek to the end of its read.
    scratch: threading.local  # Each thread's block buffer (`buffer`).


class Source:
    """The bytes of one tensor in an open safetensors file."""

    def __init__(self, opened: _File, start: int, dtype: np.dtype, shape: list[int]):
        self._opened = opened
        self._start = start
        self.dtype = dtype
        self.shape = shape

    def read_into(self, out: np.ndarray) -> None:
        """Fills `out` (C-contiguous, of the tensor's dtype and size)."""
        self._read(self._start, out.reshape(-1).view(np.uint8))

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """`(first, rows)`: the tensor's rows (along its first axis) from row
        `first`, at most `BLOCK_BYTES` of them (one row at least), in an
        array that the thread's next block overwrites. A scalar is one
        block."""
        count = self.shape[0] if self.shape else 1
        row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        step = max(1, BLOCK_BYTES // max(row_bytes, 1))
        size = min(step, count) * row_bytes
        scratch = self._opened.scratch
        if getattr(scratch, "buffer", np.empty(0)).size < size:
            scratch.buffer = empty([size], np.dtype(np.uint8))
        for first in range(0, count, step):
            rows = min(step, count - first)
            block = scratch.buffer[: rows * row_bytes]
            self._read(self._start + first * row_bytes, block)
            shape = [rows, *self.shape[1:]] if self.shape else []
            yield first, block.view(self.dtype).reshape(shape)

    def _read(self, offset: int, buffer: np.ndarray) -> None:
        opened, view = self._opened, buffer.data
        try:
            with opened.lock:
                opened.file.seek(offset)
                done = 0
                while done < len(view):
                    count = opened.file.readinto(view[done : done + READ_BYTES])
                    if not count:
                        raise ValueError("the file ends inside a tensor")
                    done += count
        except (OSError, ValueError) as e:
            raise _unreadable(opened.path, e) from e


def _unreadable(path: pathlib.Path, error: Exception) -> ValueError:
    return errors.bad_value(
        str(path), f"must be a readable safetensors file ({error})", path.name
    )


# Buffers of at least this many bytes get memory of their own (`empty`).
OWN_MEMORY_BYTES = 2**16


def empty(shape: list[int], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array; from `OWN_MEMORY_BYTES` up, in
    a private anonymous memory map of its own (page-aligned, so TensorFlow
    can take it over without a copy, `tf.experimental.dlpack`; unmapped when
    the array's last user goes).

    Not `np.empty`: NumPy asks the kernel for huge pages for arrays of 4 MiB
    or more (`madvise`), and where none are free the kernel compacts memory
    at each fault: filling 2 GB of fresh `np.empty` memory took 5-6 s of CPU
    time on our 2-core development machine, against 1.2 s for a map, whose
    pages are faulted in all at once where the system allows it
    (`MAP_POPULATE`, Linux).
    """
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size < OWN_MEMORY_BYTES or not size:
        return np.empty(shape, dtype)
    if hasattr(mmap, "MAP_ANONYMOUS"):
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        memory = mmap.mmap(-1, size, flags=flags | getattr(mmap, "MAP_POPULATE", 0))
    else:  # pragma: no cover - Windows: anonymous memory by default.
        memory = mmap.mmap(-1, size)
    return np.frombuffer(memory, dtype).reshape(shape)


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
