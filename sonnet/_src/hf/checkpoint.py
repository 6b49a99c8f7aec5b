"""`snt.hf.load` and `snt.hf.save`: Hugging Face model directories <->
`snt.nets.CausalLM`."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import pathlib
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import errors, initializers
from sonnet._src import precision as precision_lib
from sonnet._src.hf import config as config_lib
from sonnet._src.hf import files, layout
from sonnet._src.nets import causal_lm as causal_lm_lib

# The config each loaded model came from (token ids, the rotary models'
# `max_position_embeddings`), which `save` writes back.
_LOADED: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _directory(path: Any) -> pathlib.Path:
    if not isinstance(path, (str, os.PathLike)):
        raise errors.bad_type("path", "must be a directory path (str or Path)", path)
    directory = pathlib.Path(path)
    if not directory.is_dir():
        raise errors.bad_value("path", "must be an existing directory", str(path))
    return directory


def spec(path: Any) -> config_lib.Spec:
    """The architecture of the model in directory `path` (its `config.json`)."""
    directory = _directory(path)
    config_path = directory / "config.json"
    return config_lib.from_config(files.read_json(config_path), str(config_path))


def check_tensors(
    reader: files.Reader, found: list[layout.Entry], base: str, tied: bool
) -> dict[str, str]:
    """Our key -> the file's key for every entry, after checking names,
    shapes and dtypes of the whole checkpoint (nothing is read yet)."""
    names: dict[str, str] = {}
    for key in reader.tensors:
        if key.endswith(layout.IGNORED_SUFFIXES) or (tied and key == "lm_head.weight"):
            continue
        ours = key if key.startswith(base) or key.startswith("lm_head.") else base + key
        if ours in names:
            raise errors.bad_value(
                str(reader.directory), f"must hold {ours!r} once", [names[ours], key]
            )
        names[ours] = key
    wanted = {e.key: e for e in found}
    missing = sorted(set(wanted) - set(names))
    extra = sorted(names[k] for k in set(names) - set(wanted))
    if missing or extra:
        raise errors.bad_value(
            str(reader.directory),
            "must hold exactly the tensors the config describes "
            f"(missing: {missing}; unexpected: {extra})",
            f"{len(reader.tensors)} tensors",
        )
    for key, entry in wanted.items():
        name, _, shape = reader.tensors[names[key]]
        reader.check_dtype(names[key])
        if shape != entry.shape():
            raise errors.bad_value(
                f"{reader.directory / name}: {names[key]}",
                f"must have shape {entry.shape()} (from config.json)",
                shape,
            )
    return names


class LoadedWeights(initializers.Zeros):
    """The `w_init` and `embed_init` of a model read by `snt.hf.load`.

    Zeros, as `snt.initializers.Zeros`, except while `load` creates the
    variables that it then overwrites from the files: there it gives
    uninitialised memory, as no value it would compute is ever used (and
    drawing random initial values for a large model takes longer than
    reading its files).
    """

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        if getattr(_CREATING, "active", False):
            shape = tf.constant([int(n) for n in shape], tf.int32)
            return tf.raw_ops.Empty(shape=shape, dtype=tf.as_dtype(dtype))
        return super().__call__(shape, dtype)


# Whether this thread is in `load`'s variable creation.
_CREATING = threading.local()


@contextlib.contextmanager
def _creating() -> Iterator[None]:
    _CREATING.active = True
    try:
        yield
    finally:
        _CREATING.active = False


def _tensor(array: np.ndarray) -> tf.Tensor:
    """`array` as a tensor; one of `files.empty`'s own memory without a copy,
    through DLPack (an `assign` then makes that memory the variable's)."""
    if array.nbytes < files.OWN_MEMORY_BYTES or array.ctypes.data % _ALIGNMENT:
        return tf.convert_to_tensor(array)
    if array.dtype == files.numpy_dtype("BF16"):  # DLPack has no NumPy bf16.
        bits = tf.experimental.dlpack.from_dlpack(array.view(np.uint16).__dlpack__())
        return tf.bitcast(bits, tf.bfloat16)
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())


# TensorFlow's alignment of tensor buffers (Eigen's largest).
_ALIGNMENT = 64
# Bytes of each source row that a transposed copy takes at a time: `np.copyto`
# walks the target's rows, so each pass reads these columns' rows of the
# source (two 64-byte lines each) while they are in the CPU's caches. For 1
# MiB blocks: 32 float32 columns took 13 ms per 24 MB against 15-16 for 16,
# 64 or all of them; 64 bfloat16 columns 11 ms against 14 for 32.
_COLUMN_BYTES = 128


def _copy(target: np.ndarray, value: np.ndarray, transposed: bool) -> None:
    """`target[...] = value`, cast to the target's dtype; `value` a
    transposed view if `transposed`."""
    if not transposed:
        np.copyto(target, value, casting="unsafe")
        return
    step = max(1, _COLUMN_BYTES // value.itemsize)
    for first in range(0, value.shape[-1], step):
        columns = slice(first, first + step)
        np.copyto(target[..., columns], value[..., columns], casting="unsafe")


def fill(entry: layout.Entry, source: files.Source) -> None:
    """Reads one checkpoint tensor into new memory of the entry's variables
    (in its dtype, transposed and split as the entry says) and makes that
    memory theirs: one pass over the bytes, no intermediate tensors."""
    dtype = np.dtype(entry.parts[0].dtype.as_numpy_dtype)
    targets = [files.empty(layout.dims(v), dtype) for v in entry.parts]
    if len(targets) == 1 and not entry.transpose and source.dtype == dtype:
        source.read_into(targets[0])
    else:
        rank = len(source.shape)
        # The file's first axis is our last one when the tensor is transposed.
        row_axis = rank - 1 if entry.transpose else 0
        for begin, block in source.blocks():
            value = block.T if entry.transpose else block
            end = begin + block.shape[0] if rank else 1
            low = 0  # Where each part starts along `entry.axis`.
            for target in targets:
                high = low + (target.shape[entry.axis] if rank else 1)
                into, taken = [slice(None)] * rank, [slice(None)] * rank
                if entry.axis == row_axis:  # The part's rows in this block.
                    first, last = max(low, begin), min(high, end)
                    taken[row_axis] = slice(first - begin, last - begin)
                    into[row_axis] = slice(first - low, last - low)
                else:
                    first, last = begin, end
                    taken[entry.axis] = slice(low, high)
                    into[row_axis] = slice(begin, end)
                low = high
                if first < last:
                    _copy(target[tuple(into)], value[tuple(taken)], entry.transpose)
    for variable, target in zip(entry.parts, targets):
        variable.assign(_tensor(target))


# Threads that fill variables at once (`fill` spends its time in NumPy
# copies and file reads, which release the GIL).
WORKERS = min(4, os.cpu_count() or 1)


def _fill_all(work: list[tuple[layout.Entry, files.Source]]) -> None:
    if WORKERS <= 1:
        for entry, source in work:
            fill(entry, source)
        return
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(fill, entry, source) for entry, source in work]
        try:
            for future in futures:
                future.result()
        finally:  # After an error, start no other tensor.
            for future in futures:
                future.cancel()


def load(path: Any, *, precision: Any = None) -> causal_lm_lib.CausalLM:
    """Reads a Hugging Face model directory into a new `snt.nets.CausalLM`.

    The directory is what `transformers`' `save_pretrained` writes:
    `config.json` and `model.safetensors`, or shards listed by
    `model.safetensors.index.json`. Families (`model_type`): `gpt2`,
    `llama` (Llama 2, 3, 3.1, 3.2), `mistral`, `qwen2` (Qwen2, 2.5),
    `qwen3`; configs as `transformers` 4.x (`rope_theta`, `rope_scaling`) or
    5.x (`rope_parameters`) writes them. The model is plain Sonnet modules
    (`model.transformer.blocks[0].attention.query.w`, ...): call it, train
    it, add `snt.lora` adapters, `snt.int8.quantize` it, save it back with
    `snt.hf.save`.

    Everything is checked before any weight is read: the config's options
    (an option that would change the maths and that we do not implement is
    an error, never a silently different model), every tensor's name, shape
    and dtype, and the files' integrity. Each variable then gets memory of
    its own that is written once: a tensor stored as the variable holds it
    is read straight into it, one to transpose, split or cast goes through
    a small buffer of rows (plain file reads, no memory map; a few tensors
    at a time in threads), so that memory holds about one copy of the
    model; no initial values are drawn (the model's `w_init` and
    `embed_init` are `LoadedWeights()`, which give zeros when used later).
    float16 and bfloat16 checkpoints are read as float32 variables.

    Args:
      path: The model directory.
      precision: Optional `snt.precision` policy (name or `Policy`) applied
        to the model before its variables are created: e.g.
        `snt.precision.Policy("bfloat16", "bfloat16")` keeps bfloat16
        weights (the embedding tables stay float32). Default None: float32.

    Returns:
      A built `snt.nets.CausalLM` with the checkpoint's weights.

    Raises:
      ValueError: for a missing or unreadable `config.json`, an unknown
        `model_type`, rope type or unsupported option; missing, unexpected,
        duplicated or misshaped tensors, a truncated file, a non-floating
        dtype (each message names the file and tensor).
      TypeError: if `path` is not a path.
      ImportError: if `safetensors` is not installed.

    >>> import tempfile
    >>> lm = snt.nets.CausalLM(16, snt.nets.Transformer(
    ...     num_layers=1, num_heads=2, model_size=8, mlp_hidden_size=16,
    ...     activation="swiglu", norm="rms", causal=True, rotary=True,
    ...     with_bias=False))
    >>> tokens = tf.constant([[1, 2, 3]])
    >>> logits = lm(tokens)  # Creates the variables.
    >>> folder = tempfile.mkdtemp()
    >>> snt.hf.save(lm, folder)
    ['config.json', 'model.safetensors']
    >>> loaded = snt.hf.load(folder)
    >>> bool(tf.reduce_all(tf.abs(loaded(tokens) - lm(tokens)) < 1e-5))
    True
    """
    directory = _directory(path)
    config_path = directory / "config.json"
    config = files.read_json(config_path)
    architecture = config_lib.from_config(config, str(config_path))
    reader = files.Reader(directory)
    with _creating():
        model = architecture.build(w_init=LoadedWeights())
        if precision is not None:
            precision_lib.apply(model, precision)
        # Creates the variables. A batch of none: the layers read no weights.
        model(tf.zeros([0, 1], tf.int32))
    found = layout.entries(model, architecture.layout)
    names = check_tensors(
        reader, found, layout.prefix(architecture.layout), architecture.tie_embeddings
    )
    by_file_key = {names[e.key]: e for e in found}
    with reader.open_tensors(by_file_key) as sources:
        _fill_all([(by_file_key[key], source) for key, source in sources])
    _LOADED[model] = {
        **architecture.extra,
        "max_position_embeddings": architecture.max_positions,
    }
    return model


def save(
    model: causal_lm_lib.CausalLM,
    path: Any,
    *,
    max_shard_size: int | str = "5GB",
    dtype: Any = None,
) -> list[str]:
    """Writes `model` as a Hugging Face model directory (`transformers` reads it).

    Writes `config.json` (as `transformers` 5.x writes it) and the weights in
    safetensors files, one file, or shards of at most `max_shard_size` bytes
    with their index `model.safetensors.index.json` (as `save_pretrained`),
    gathering one shard's tensors at a time. The family follows from the
    model's options: learned positions, LayerNorm and biases are GPT-2;
    rotary embeddings, RMSNorm and SwiGLU are Llama, with a `window` Mistral,
    q/k/v biases without an output bias Qwen2, q/k norms Qwen3. A model read
    by `snt.hf.load` keeps its family and token ids.

    Args:
      model: A built `snt.nets.CausalLM` with unrolled blocks.
      path: The directory (created if needed; earlier weight files in it
        are replaced).
      max_shard_size: Most bytes per file, an int or a string such as
        `"5GB"` or `"200MiB"` (as `transformers`). Default "5GB".
      dtype: Dtype of the written tensors: "float32", "float16" or
        "bfloat16". Default None: the variables' dtype.

    Returns:
      The names of the files written.

    Raises:
      ValueError: if the model's options are no supported family's, it has
        stacked blocks or is not built, or for a bad `max_shard_size` or
        `dtype`.
      TypeError: if `model` is not an `snt.nets.CausalLM`.
      ImportError: if `safetensors` is not installed.

    >>> import tempfile
    >>> lm = snt.nets.CausalLM(16, snt.nets.Transformer(
    ...     num_layers=1, num_heads=2, model_size=8, mlp_hidden_size=16,
    ...     activation="swiglu", norm="rms", causal=True, rotary=True,
    ...     with_bias=False))
    >>> tokens = tf.constant([[1, 2, 3]])
    >>> logits = lm(tokens)  # Creates the variables.
    >>> snt.hf.save(lm, tempfile.mkdtemp(), max_shard_size="1KB")[-1]
    'model.safetensors.index.json'
    """
    architecture = config_lib.from_model(model, _LOADED.get(model))
    size = files.shard_size(max_shard_size)
    target = None
    if dtype is not None:
        try:
            target = tf.as_dtype(dtype)
        except TypeError as e:
            raise errors.bad_type(
                "dtype", "must be a floating point dtype", dtype
            ) from e
        if target not in (tf.float32, tf.float16, tf.bfloat16):
            raise errors.bad_value(
                "dtype", "must be float32, float16 or bfloat16", dtype
            )
    if not _built(model):
        raise errors.bad_value(
            "model", "must be built (called once) before it is saved", model
        )
    found = layout.entries(model, architecture.layout)

    def fetch(entry: layout.Entry) -> Any:
        def value() -> np.ndarray:
            parts = [tf.convert_to_tensor(v) for v in entry.parts]
            tensor = parts[0] if len(parts) == 1 else tf.concat(parts, entry.axis)
            if entry.transpose:
                tensor = tf.transpose(tensor)
            if target is not None and tensor.dtype != target:
                tensor = tf.cast(tensor, target)
            return tensor.numpy()

        return value

    tensors = []
    for entry in found:
        item = (target or entry.parts[0].dtype).size
        tensors.append((entry.key, int(np.prod(entry.shape())) * item, fetch(entry)))
    directory = pathlib.Path(path)
    config = config_lib.to_config(architecture)
    if target is not None:
        config["dtype"] = target.name
    elif found[0].parts[0].dtype != tf.float32:
        config["dtype"] = found[0].parts[0].dtype.name
    names = files.write(directory, tensors, size)
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return ["config.json", *names]


def _built(model: causal_lm_lib.CausalLM) -> bool:
    block = model.transformer.blocks[0]
    return getattr(block.mlp_out, "w", None) is not None
