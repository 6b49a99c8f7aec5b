"""`snt.lora` adapters in PEFT's format: `adapter_config.json` and
`adapter_model.safetensors`.

PEFT names the adapter of the Hugging Face module `NAME` (e.g.
`model.layers.0.self_attn.q_proj`) `base_model.model.NAME.lora_A.weight`,
`[rank, in]`, and `...lora_B.weight`, `[out, rank]`, and scales its term by
`lora_alpha / r`: our adapter's `a` `[in, rank]` and `b` `[rank, out]`
transposed, with the same scale `alpha / rank`.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import errors
from sonnet._src.hf import checkpoint, files, layout
from sonnet._src.hf import config as config_lib

ADAPTER = "adapter_model.safetensors"
CONFIG = "adapter_config.json"
_PREFIX = "base_model.model."
_KEY = re.compile(r"^base_model\.model\.(.+)\.lora_([AB])(?:\.[^.]+)?\.weight$")
# Options of `adapter_config.json` that change the maths, with the value we
# implement.
_REQUIRED = {
    "peft_type": "LORA",
    "use_dora": False,
    "use_rslora": False,
    "lora_bias": False,
    "bias": "none",
    "modules_to_save": None,
    "rank_pattern": {},
    "alpha_pattern": {},
}


def _name_path(linear: Any) -> str:
    """The prefix of a Linear's variable names (what `snt.lora.add`'s
    `pattern` and `snt.lora.adapters` use)."""
    return linear.w.name.rsplit("/", 1)[0]


def _lora() -> Any:
    from sonnet import lora  # The public API (sonnet/_src/lora.py may change).

    return lora


def _existing(model: Any) -> dict[str, Any]:
    """`snt.lora.adapters(model)`, empty where it has none (which it refuses)."""
    try:
        return _lora().adapters(model)
    except ValueError:
        return {}


def _layout(model: Any) -> tuple[str, dict[str, Any]]:
    spec = config_lib.from_model(model)
    return spec.layout, layout.linears(model, spec.layout)


def load_adapters(model: Any, path: Any) -> dict[str, Any]:
    """Reads a PEFT LoRA adapter into `model` as `snt.lora` adapters.

    Adds an `snt.lora` adapter (rank `r`, alpha `lora_alpha`) to each
    projection the adapter file has weights for (`snt.lora.add`, which also
    freezes the rest of the model), and copies those weights in. Everything
    is checked first: on any error the model is unchanged.

    Args:
      model: A built `snt.nets.CausalLM` (e.g. from `snt.hf.load`) without
        adapters, of the base model the adapter was trained on.
      path: The adapter directory (`adapter_config.json`,
        `adapter_model.safetensors`), as PEFT's `save_pretrained` writes.

    Returns:
      The new adapters, as `snt.lora.adapters(model)`.

    Raises:
      ValueError: for an adapter of another kind than plain LoRA (DoRA,
        rsLoRA, biases, per-module ranks, saved modules), of modules the
        model does not have (or GPT-2's fused `c_attn`), of another rank than
        its config's, with shapes that do not match the model, or for a model
        that already has adapters.
      ImportError: if `safetensors` is not installed.

    >>> import tempfile
    >>> lm = snt.nets.CausalLM(16, snt.nets.Transformer(
    ...     num_layers=1, num_heads=2, model_size=8, mlp_hidden_size=16,
    ...     activation="swiglu", norm="rms", causal=True, rotary=True,
    ...     with_bias=False))
    >>> tokens = tf.constant([[1, 2, 3]])
    >>> logits = lm(tokens)  # Creates the variables.
    >>> _ = snt.lora.add(lm, rank=2)
    >>> folder = tempfile.mkdtemp()
    >>> _ = snt.hf.save_adapters(lm, folder)
    >>> snt.lora.remove(lm)
    >>> sorted(snt.hf.load_adapters(lm, folder))[0]
    'causal_lm/head'
    """
    directory = checkpoint._directory(path)
    config = files.read_json(directory / CONFIG)
    config_path = str(directory / CONFIG)
    if not isinstance(config, dict):
        raise errors.bad_value(config_path, "must hold a JSON object", config)
    for key, expected in _REQUIRED.items():
        value = config.get(key, expected)
        if value != expected and not (expected is None and not value):
            raise errors.bad_value(
                f"{config_path}: {key}",
                f"is not supported (only {expected!r}: plain LoRA)",
                value,
            )
    rank = config.get("r")
    alpha = config.get("lora_alpha")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise errors.bad_value(f"{config_path}: r", "must be a positive integer", rank)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise errors.bad_value(f"{config_path}: lora_alpha", "must be a number", alpha)
    lora = _lora()
    existing = _existing(model)
    if existing:
        raise errors.bad_value(
            "model",
            "must have no adapters yet (remove them with `snt.lora.remove`)",
            sorted(existing),
        )
    _, linears = _layout(model)
    reader = files.Reader(directory, single=ADAPTER, index=ADAPTER + ".index.json")
    weights: dict[str, dict[str, str]] = {}
    for key in reader.tensors:
        match = _KEY.match(key)
        file = f"{directory / ADAPTER}: {key}"
        if match is None:
            raise errors.bad_value(
                file, "must be a LoRA weight `base_model.model.NAME.lora_A.weight`", key
            )
        name, kind = match.groups()
        if name not in linears:
            raise errors.bad_value(
                file,
                "must adapt a projection of the model (its Hugging Face name, e.g. "
                "model.layers.0.self_attn.q_proj; GPT-2's fused c_attn is not "
                "supported)",
                name,
            )
        reader.check_dtype(key)
        shape = reader.tensors[key][2]
        size_in, size_out = linears[name].w.shape
        expected = [rank, size_in] if kind == "A" else [size_out, rank]
        if shape != expected:
            raise errors.bad_value(
                file,
                f"must have shape {expected} (rank r={rank} from {CONFIG} and the "
                "model's projection)",
                shape,
            )
        weights.setdefault(name, {})[kind] = key
    incomplete = sorted(n for n, w in weights.items() if len(w) != 2)
    if incomplete or not weights:
        raise errors.bad_value(
            str(directory / ADAPTER),
            "must hold lora_A and lora_B weights of each adapted module",
            incomplete or "no weights",
        )
    paths = {name: _name_path(linears[name]) for name in weights}
    pattern = "^(?:" + "|".join(re.escape(p) for p in paths.values()) + ")$"
    lora.add(model, rank=rank, alpha=float(alpha), pattern=pattern)
    adapters = lora.adapters(model)
    owners = {
        key: (name, kind) for name, w in weights.items() for kind, key in w.items()
    }
    for key, array in reader.read(owners):
        name, kind = owners[key]
        adapter = adapters[paths[name]]
        variable = adapter.a if kind == "A" else adapter.b
        value = tf.transpose(tf.convert_to_tensor(array))
        variable.assign(tf.cast(value, variable.dtype))
    return adapters


def save_adapters(model: Any, path: Any) -> list[str]:
    """Writes the `snt.lora` adapters of `model` in PEFT's format.

    `adapter_config.json` (`r`, `lora_alpha`, the adapted modules by their
    Hugging Face names) and `adapter_model.safetensors`: PEFT loads them
    onto the `transformers` model that `snt.hf.save` writes for `model`.

    Args:
      model: An `snt.nets.CausalLM` with unmerged `snt.lora` adapters, all of
        the same rank and alpha.
      path: The directory (created if needed).

    Returns:
      The names of the files written.

    Raises:
      ValueError: if the model has no adapters, adapters of different ranks
        or alphas, merged adapters, or adapters on layers without a Hugging
        Face name (GPT-2's query, key and value).
      ImportError: if `safetensors` is not installed.

    >>> import tempfile
    >>> lm = snt.nets.CausalLM(16, snt.nets.Transformer(
    ...     num_layers=1, num_heads=2, model_size=8, mlp_hidden_size=16,
    ...     activation="swiglu", norm="rms", causal=True, rotary=True,
    ...     with_bias=False))
    >>> tokens = tf.constant([[1, 2, 3]])
    >>> logits = lm(tokens)  # Creates the variables.
    >>> _ = snt.lora.add(lm, rank=2)
    >>> snt.hf.save_adapters(lm, tempfile.mkdtemp())
    ['adapter_config.json', 'adapter_model.safetensors']
    """
    adapters = _existing(model)
    if not adapters:
        raise errors.bad_value("model", "must have `snt.lora` adapters", model)
    kind, linears = _layout(model)
    names = {_name_path(linear): name for name, linear in linears.items()}
    unnamed = sorted(set(adapters) - set(names))
    if unnamed:
        raise errors.bad_value(
            "model",
            "must have adapters only on layers with a Hugging Face name",
            unnamed,
        )
    settings = {(a.rank, float(a.alpha)) for a in adapters.values()}
    if len(settings) != 1:
        raise errors.bad_value(
            "model", "must have adapters of one rank and alpha", sorted(settings)
        )
    if any(bool(np.any(a.merged.numpy())) for a in adapters.values()):
        raise errors.bad_value(
            "model",
            "must have unmerged adapters (`snt.lora.unmerge` first: merged "
            "weights would count them twice)",
            "merged adapters",
        )
    ((rank, alpha),) = settings
    tensors = []
    for path_name, adapter in sorted(adapters.items()):
        prefix = f"{_PREFIX}{names[path_name]}"
        for suffix, variable in (("lora_A", adapter.a), ("lora_B", adapter.b)):
            nbytes = int(np.prod(variable.shape)) * variable.dtype.size

            def fetch(variable: tf.Variable = variable) -> np.ndarray:
                return tf.transpose(variable).numpy()

            tensors.append((f"{prefix}.{suffix}.weight", nbytes, fetch))
    directory = pathlib.Path(path)
    written = files.write(
        directory, tensors, 2**62, single=ADAPTER, index=ADAPTER + ".index.json"
    )
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": alpha,
        "target_modules": sorted(names[p] for p in adapters),
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": kind == "gpt2",
        "use_rslora": False,
        "use_dora": False,
        "modules_to_save": None,
        "inference_mode": True,
        "base_model_name_or_path": None,
    }
    (directory / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    return [CONFIG, *written]
