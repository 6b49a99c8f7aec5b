"""Which Hugging Face tensor holds which variables of a `snt.nets.CausalLM`.

One `Entry` per tensor of the checkpoint: its name, the variables it fills
(several for GPT-2's fused `c_attn`, split along `axis` in our layout), and
whether it is stored transposed (`torch.nn.Linear` keeps `[out, in]`; our
`snt.Linear` `w` is `[in, out]`; GPT-2's `Conv1D` is `[in, out]` already).

The rotary pairing needs no permutation: `transformers`' `rotate_half`
pairs features `(i, i + D/2)` of each head, as `snt.apply_rotary_embedding`
does, so query and key weights are copied unchanged.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import tensorflow as tf

from sonnet._src.nets import causal_lm as causal_lm_lib


class Entry(NamedTuple):
    """One checkpoint tensor and the variables it holds."""

    key: str
    parts: tuple[tf.Variable, ...]
    transpose: bool = False
    axis: int = 0

    def shape(self) -> list[int]:
        """The tensor's shape in the checkpoint."""
        shapes = [dims(v) for v in self.parts]
        shape = list(shapes[0])
        shape[self.axis] = sum(s[self.axis] for s in shapes)
        return shape[::-1] if self.transpose else shape


def dims(variable: tf.Variable) -> list[int]:
    """A variable's shape (always fully known) as ints."""
    return cast(list[int], variable.shape.as_list())


# Names of `transformers`' non-persistent buffers that older checkpoints
# contain: ignored when reading.
IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")


def prefix(layout: str) -> str:
    """The base model's prefix of the tensor names (all but the head's)."""
    return "transformer." if layout == "gpt2" else "model."


def _linear(entries: list[Entry], key: str, module: Any, transpose: bool) -> None:
    entries.append(Entry(f"{key}.weight", (module.w,), transpose))
    if module.with_bias:
        entries.append(Entry(f"{key}.bias", (module.b,)))


def _norm(entries: list[Entry], key: str, norm: Any) -> None:
    entries.append(Entry(f"{key}.weight", (norm.scale,)))
    offset = getattr(norm, "offset", None)
    if offset is not None:
        entries.append(Entry(f"{key}.bias", (offset,)))


def linears(model: causal_lm_lib.CausalLM, layout: str) -> dict[str, Any]:
    """The `snt.Linear`s of `model` by Hugging Face module name (for PEFT)."""
    found: dict[str, Any] = {}
    for i, block in enumerate(model.transformer.blocks):
        attention = block.attention
        if layout == "gpt2":
            layer = f"transformer.h.{i}"
            found[f"{layer}.attn.c_proj"] = attention.output
            found[f"{layer}.mlp.c_fc"] = block.mlp_in
            found[f"{layer}.mlp.c_proj"] = block.mlp_out
            continue
        layer = f"model.layers.{i}"
        for name, module in (
            ("self_attn.q_proj", attention.query),
            ("self_attn.k_proj", attention.key),
            ("self_attn.v_proj", attention.value),
            ("self_attn.o_proj", attention.output),
            ("mlp.gate_proj", block.mlp_gate),
            ("mlp.up_proj", block.mlp_in),
            ("mlp.down_proj", block.mlp_out),
        ):
            found[f"{layer}.{name}"] = module
    if not model.tie_embeddings:
        found["lm_head"] = model.head
    return found


def entries(model: causal_lm_lib.CausalLM, layout: str) -> list[Entry]:
    """Every tensor of `model`'s checkpoint in `layout` ("gpt2" or "llama"),
    for a built model."""
    found: list[Entry] = []
    base = prefix(layout)
    if layout == "gpt2":
        found.append(Entry(f"{base}wte.weight", (model.embed.embeddings,)))
        found.append(Entry(f"{base}wpe.weight", (model.positions.embeddings,)))
    else:
        found.append(Entry(f"{base}embed_tokens.weight", (model.embed.embeddings,)))
    modules = linears(model, layout)
    for i, block in enumerate(model.transformer.blocks):
        attention = block.attention
        if layout == "gpt2":
            layer = f"{base}h.{i}"
            projections = (attention.query, attention.key, attention.value)
            found.append(
                Entry(
                    f"{layer}.attn.c_attn.weight",
                    tuple(p.w for p in projections),
                    axis=1,
                )
            )
            found.append(
                Entry(f"{layer}.attn.c_attn.bias", tuple(p.b for p in projections))
            )
            for name in ("attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
                _linear(found, f"{layer}.{name}", modules[f"{layer}.{name}"], False)
            _norm(found, f"{layer}.ln_1", block.attention_norm)
            _norm(found, f"{layer}.ln_2", block.mlp_norm)
            continue
        layer = f"{base}layers.{i}"
        for name, module in modules.items():
            if name.startswith(f"{layer}."):
                _linear(found, name, module, True)
        if attention.qk_norm:
            _norm(found, f"{layer}.self_attn.q_norm", attention.query_norm)
            _norm(found, f"{layer}.self_attn.k_norm", attention.key_norm)
        _norm(found, f"{layer}.input_layernorm", block.attention_norm)
        _norm(found, f"{layer}.post_attention_layernorm", block.mlp_norm)
    final = "ln_f" if layout == "gpt2" else "norm"
    _norm(found, f"{base}{final}", model.transformer.final_norm)
    if not model.tie_embeddings:
        _linear(found, "lm_head", model.head, True)
    return found
