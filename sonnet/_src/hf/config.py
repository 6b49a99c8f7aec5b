"""Hugging Face `config.json` <-> the arguments of `snt.nets.CausalLM`.

`Spec` is what both directions share: the family's tensor layout (`layout`:
"gpt2" or "llama") and the resolved sizes and options. `from_config` reads a
config as `transformers` 4.x or 5.x writes it (4.x: `rope_theta` and
`rope_scaling` at the top level; 5.x: `rope_parameters` holding both) and
refuses what would compute something else than `transformers` does;
`to_config` writes the 5.x form; `from_model` reads a `CausalLM` back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from sonnet._src import errors
from sonnet._src import rotary as rotary_lib
from sonnet._src.nets import causal_lm as causal_lm_lib
from sonnet._src.nets import transformer as transformer_lib

# `model_type` -> tensor layout.
FAMILIES = {
    "gpt2": "gpt2",
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "llama",
    "qwen3": "llama",
}
_ARCHITECTURES = {
    "gpt2": "GPT2LMHeadModel",
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}
_GPT2_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
# Config entries copied from a loaded model's config into the one `save`
# writes (they do not change the maths, but tokenizers and generation read
# them).
_KEPT = ("bos_token_id", "eos_token_id", "pad_token_id")


@dataclasses.dataclass(frozen=True)
class Spec:
    """A decoder model's architecture, in the library's terms."""

    model_type: str
    vocab_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    model_size: int
    key_size: int
    mlp_hidden_size: int
    activation: str
    norm: str
    norm_eps: float
    attention_bias: bool
    attention_output_bias: bool
    mlp_bias: bool
    tie_embeddings: bool
    max_positions: int
    learned_positions: bool = False
    rotary_base: float = 10000.0
    rotary_scaling: dict[str, Any] | None = None
    qk_norm: bool = False
    window: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def layout(self) -> str:
        return FAMILIES[self.model_type]

    def transformer_kwargs(self) -> dict[str, Any]:
        """The `snt.nets.Transformer` arguments (non-default options only)."""
        kwargs: dict[str, Any] = dict(
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            model_size=self.model_size,
            key_size=self.key_size,
            mlp_hidden_size=self.mlp_hidden_size,
            activation=self.activation,
            norm=self.norm,
            causal=True,
            norm_eps=self.norm_eps,
            attention_bias=self.attention_bias,
            mlp_bias=self.mlp_bias,
        )
        if self.num_kv_heads != self.num_heads:
            kwargs["num_kv_heads"] = self.num_kv_heads
        if not self.learned_positions:
            kwargs["rotary"] = True
            kwargs["rotary_base"] = self.rotary_base
        if self.rotary_scaling is not None:
            kwargs["rotary_scaling"] = self.rotary_scaling
        if self.attention_output_bias != self.attention_bias:
            kwargs["attention_output_bias"] = self.attention_output_bias
        if self.qk_norm:
            kwargs["qk_norm"] = True
        if self.window is not None:
            kwargs["window"] = self.window
        return kwargs

    def build(self, w_init: Any = None) -> causal_lm_lib.CausalLM:
        """A new, unbuilt `snt.nets.CausalLM` of this architecture.

        `w_init`, if given, initialises every weight matrix and embedding
        table (the Transformer's `w_init`, the model's `embed_init` and its
        head's `w_init`); default None: the modules' defaults.
        """
        kwargs = self.transformer_kwargs()
        if w_init is not None:
            kwargs["w_init"] = w_init
        # Made in the model's scope: variables `causal_lm/transformer/...`.
        with tf.name_scope("causal_lm"):
            transformer = transformer_lib.Transformer(**kwargs)
        model = causal_lm_lib.CausalLM(
            self.vocab_size,
            transformer,
            max_positions=self.max_positions if self.learned_positions else None,
            tie_embeddings=self.tie_embeddings,
            embed_init=w_init,
            name="causal_lm",
        )
        if w_init is not None and not self.tie_embeddings:
            # Read when the head is built (the model has no argument for it).
            model.head.w_init = w_init
        return model


def _unsupported(path: str, option: str, expected: str, value: Any) -> ValueError:
    return errors.bad_value(f"{path}: {option}", expected, value)


def _get(config: dict[str, Any], path: str, key: str, default: Any = ...) -> Any:
    if key in config and config[key] is not None:
        return config[key]
    if default is ...:
        raise _unsupported(path, key, "is required in the config", None)
    return default


def _integer(config: dict[str, Any], path: str, key: str, default: Any = ...) -> int:
    value = _get(config, path, key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _unsupported(path, key, "must be a positive integer", value)
    return value


def _number(config: dict[str, Any], path: str, key: str, default: Any = ...) -> float:
    value = _get(config, path, key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _unsupported(path, key, "must be a number", value)
    return float(value)


def _flag(config: dict[str, Any], path: str, key: str, default: bool) -> bool:
    value = _get(config, path, key, default)
    if not isinstance(value, bool):
        raise _unsupported(path, key, "must be true or false", value)
    return value


def _refuse(config: dict[str, Any], path: str, key: str, allowed: Any) -> None:
    """Raises if `config[key]` is set to something else than `allowed`."""
    value = config.get(key)
    if value is None or value == allowed:
        return
    raise _unsupported(
        path,
        key,
        f"is not supported (only {allowed!r}, which is what we compute)",
        value,
    )


def _rope(config: dict[str, Any], path: str) -> tuple[float, dict[str, Any] | None]:
    """The rotary base and scaling from a 4.x or 5.x config."""
    parameters = config.get("rope_parameters")
    if parameters is None:  # transformers 4.x.
        base = _number(config, path, "rope_theta", 10000.0)
        parameters = dict(config.get("rope_scaling") or {})
    else:
        if not isinstance(parameters, dict):
            raise _unsupported(path, "rope_parameters", "must be a mapping", parameters)
        parameters = dict(parameters)
        base = _number(
            parameters, path, "rope_theta", config.get("rope_theta", 10000.0)
        )
        parameters.pop("rope_theta", None)
    partial = parameters.pop("partial_rotary_factor", None)
    if partial is None:
        partial = config.get("partial_rotary_factor")
    if partial not in (None, 1, 1.0):
        raise _unsupported(
            path, "partial_rotary_factor", "is not supported (only 1.0)", partial
        )
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    if kind == "default":
        return base, None
    try:
        scaling = rotary_lib.check_scaling(parameters, f"{path}: rope_parameters")
    except ValueError as e:
        raise _unsupported(
            path,
            "rope_type",
            f'is not supported: only "default", "linear" and "llama3" ({e})',
            kind,
        ) from e
    return base, scaling


def _llama(config: dict[str, Any], path: str, model_type: str) -> Spec:
    hidden = _integer(config, path, "hidden_size")
    heads = _integer(config, path, "num_attention_heads")
    act = config.get("hidden_act", "silu")
    if act != "silu":
        raise _unsupported(path, "hidden_act", 'is not supported (only "silu")', act)
    window = None
    if model_type == "mistral":
        window = config.get("sliding_window")
        if window is not None:
            window = _integer(config, path, "sliding_window")
    else:
        _refuse(config, path, "use_sliding_window", False)
        for kind in config.get("layer_types") or ():
            if kind != "full_attention":
                raise _unsupported(
                    path,
                    "layer_types",
                    'is not supported: only "full_attention" layers',
                    config["layer_types"],
                )
    base, scaling = _rope(config, path)
    attention_bias = _flag(config, path, "attention_bias", False)
    output_bias = attention_bias
    if model_type == "qwen2":  # q/k/v biases, none on the output.
        attention_bias, output_bias = True, False
    return Spec(
        model_type=model_type,
        vocab_size=_integer(config, path, "vocab_size"),
        num_layers=_integer(config, path, "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=_integer(config, path, "num_key_value_heads", heads),
        model_size=hidden,
        key_size=_integer(config, path, "head_dim", hidden // heads),
        mlp_hidden_size=_integer(config, path, "intermediate_size"),
        activation="swiglu",
        norm="rms",
        norm_eps=_number(config, path, "rms_norm_eps", 1e-6),
        attention_bias=attention_bias,
        attention_output_bias=output_bias,
        mlp_bias=_flag(config, path, "mlp_bias", False),
        tie_embeddings=_flag(config, path, "tie_word_embeddings", False),
        max_positions=_integer(config, path, "max_position_embeddings", 2048),
        rotary_base=base,
        rotary_scaling=scaling,
        qk_norm=model_type == "qwen3",
        window=window,
        extra={k: config[k] for k in _KEPT if k in config},
    )


def _gpt2(config: dict[str, Any], path: str) -> Spec:
    act = config.get("activation_function", "gelu_new")
    if act not in _GPT2_ACTIVATIONS:
        raise _unsupported(
            path,
            "activation_function",
            "is not supported (only " + ", ".join(map(repr, _GPT2_ACTIVATIONS)) + ")",
            act,
        )
    _refuse(config, path, "scale_attn_weights", True)
    _refuse(config, path, "scale_attn_by_inverse_layer_idx", False)
    _refuse(config, path, "add_cross_attention", False)
    hidden = _integer(config, path, "n_embd")
    heads = _integer(config, path, "n_head")
    if hidden % heads:
        raise _unsupported(
            path, "n_embd", f"must be a multiple of n_head {heads}", hidden
        )
    return Spec(
        model_type="gpt2",
        vocab_size=_integer(config, path, "vocab_size"),
        num_layers=_integer(config, path, "n_layer"),
        num_heads=heads,
        num_kv_heads=heads,
        model_size=hidden,
        key_size=hidden // heads,
        mlp_hidden_size=_integer(config, path, "n_inner", 4 * hidden),
        activation=_GPT2_ACTIVATIONS[act],
        norm="layer",
        norm_eps=_number(config, path, "layer_norm_epsilon", 1e-5),
        attention_bias=True,
        attention_output_bias=True,
        mlp_bias=True,
        tie_embeddings=_flag(config, path, "tie_word_embeddings", True),
        max_positions=_integer(config, path, "n_positions"),
        learned_positions=True,
        extra={k: config[k] for k in _KEPT if k in config},
    )


def from_config(config: Any, path: str = "config.json") -> Spec:
    """The `Spec` of a Hugging Face config (a dict), or a clear error."""
    if not isinstance(config, dict):
        raise errors.bad_value(path, "must hold a JSON object", config)
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise _unsupported(
            path,
            "model_type",
            "must be one of " + ", ".join(f'"{f}"' for f in FAMILIES),
            model_type,
        )
    quantization = config.get("quantization_config")
    if quantization:
        raise _unsupported(
            path,
            "quantization_config",
            "is not supported (float weights only)",
            quantization,
        )
    if model_type == "gpt2":
        return _gpt2(config, path)
    return _llama(config, path, model_type)


def to_config(spec: Spec) -> dict[str, Any]:
    """The `config.json` of `spec`, as `transformers` 5.x writes it."""
    common: dict[str, Any] = {
        "architectures": [_ARCHITECTURES[spec.model_type]],
        "model_type": spec.model_type,
        "dtype": "float32",
        "vocab_size": spec.vocab_size,
        "tie_word_embeddings": spec.tie_embeddings,
        **spec.extra,
    }
    if spec.model_type == "gpt2":
        activation = {"gelu_tanh": "gelu_new"}.get(spec.activation, spec.activation)
        return {
            **common,
            "n_embd": spec.model_size,
            "n_layer": spec.num_layers,
            "n_head": spec.num_heads,
            "n_inner": spec.mlp_hidden_size,
            "n_positions": spec.max_positions,
            "activation_function": activation,
            "layer_norm_epsilon": spec.norm_eps,
            "scale_attn_weights": True,
        }
    rope: dict[str, Any] = {"rope_theta": spec.rotary_base, "rope_type": "default"}
    if spec.rotary_scaling is not None:
        rope.update(spec.rotary_scaling)
    config = {
        **common,
        "hidden_size": spec.model_size,
        "intermediate_size": spec.mlp_hidden_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.key_size,
        "hidden_act": "silu",
        "rms_norm_eps": spec.norm_eps,
        "max_position_embeddings": spec.max_positions,
        "rope_parameters": rope,
    }
    if spec.model_type in ("llama", "qwen3"):
        config["attention_bias"] = spec.attention_bias
    if spec.model_type == "llama":
        config["mlp_bias"] = spec.mlp_bias
    if spec.model_type == "mistral":
        config["sliding_window"] = spec.window
    if spec.model_type in ("qwen2", "qwen3"):
        config["use_sliding_window"] = False
    return config


def _model_type(
    learned: bool,
    activation: str,
    norm: str,
    bias: tuple[bool, bool, bool],
    qk_norm: bool,
    window: int | None,
) -> str | None:
    """The family whose layout and maths a model's options are, or None."""
    attention_bias, output_bias, mlp_bias = bias
    if learned:
        if norm == "layer" and all(bias) and activation != "swiglu" and not qk_norm:
            return "gpt2" if window is None else None
        return None
    if activation != "swiglu" or norm != "rms":
        return None
    if window is not None:
        return "mistral" if not any(bias) and not qk_norm else None
    if qk_norm:
        return "qwen3" if attention_bias == output_bias and not mlp_bias else None
    if attention_bias and not output_bias:
        return "qwen2" if not mlp_bias else None
    return "llama" if attention_bias == output_bias else None


def from_model(model: Any, extra: dict[str, Any] | None = None) -> Spec:
    """The `Spec` of a `snt.nets.CausalLM`, or a clear error naming what no
    supported family has."""
    if not isinstance(model, causal_lm_lib.CausalLM):
        raise errors.bad_type("model", "must be an `snt.nets.CausalLM`", model)
    transformer = model.transformer
    if transformer.stacked:
        raise errors.bad_value(
            "model",
            "must have unrolled blocks (`stacked=False`): convert a stacked "
            "Transformer with `snt.nets.copy_transformer_weights`",
            "a stacked Transformer",
        )
    experts = [getattr(b, "num_experts", None) for b in transformer.blocks]
    if any(e is not None for e in experts):
        raise errors.bad_value(
            "model",
            "must have dense MLPs: no supported family has mixture-of-experts "
            "blocks (the Transformer's `num_experts`)",
            f"a Transformer with num_experts={experts}",
        )
    block = transformer.blocks[0]
    attention = block.attention
    learned = model.max_positions is not None
    bias = (
        attention.with_bias,
        attention.output_bias,
        block.mlp_in.with_bias,
    )
    if learned == attention.rotary:
        raise errors.bad_value(
            "model",
            "must have either learned positions (`max_positions`) or rotary "
            "embeddings, not both or neither",
            model,
        )
    model_type = _model_type(
        learned, block.activation, block.norm, bias, attention.qk_norm, attention.window
    )
    if model_type is None:
        raise errors.bad_value(
            "model",
            "must have the options of a supported family (GPT-2: learned "
            "positions, LayerNorm, biases; Llama/Mistral/Qwen: rotary, RMSNorm, "
            "SwiGLU, with their bias, q/k norm and window options)",
            model,
        )
    eps = block.attention_norm._eps
    max_positions = model.max_positions
    if max_positions is None:
        max_positions = int((extra or {}).get("max_position_embeddings", 2048))
    return Spec(
        model_type=model_type,
        vocab_size=model.vocab_size,
        num_layers=transformer.num_layers,
        num_heads=block.num_heads,
        num_kv_heads=attention.num_kv_heads,
        model_size=transformer.model_size,
        key_size=block.key_size,
        mlp_hidden_size=block.mlp_hidden_size,
        activation=block.activation,
        norm=block.norm,
        norm_eps=float(eps),
        attention_bias=bias[0],
        attention_output_bias=bias[1],
        mlp_bias=bias[2],
        tie_embeddings=model.tie_embeddings,
        max_positions=max_positions,
        learned_positions=learned,
        rotary_base=attention.rotary_base,
        rotary_scaling=attention.rotary_scaling,
        qk_norm=attention.qk_norm,
        window=attention.window,
        extra={k: v for k, v in (extra or {}).items() if k in _KEPT},
    )
