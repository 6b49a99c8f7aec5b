"""Open-weight model workloads (issue 33): loading, generating, prefilling.

`hf_load`: `snt.hf.load` of a random Llama-shaped checkpoint written here by
`snt.hf.save` (`LLAMA_FULL`: 16 blocks of width 1536, 12 query and 4
key/value heads, SwiGLU MLPs of width 4096, a 32,000-token vocabulary and an
untied head: 501 M parameters, 2.0 GB in float32; `LLAMA_QUICK` with
`--quick`). The checkpoint is written once into the temporary directory
(`sonnet_bench_hf/`) and reused. Against `hf_load_transformers`:
`transformers.AutoModelForCausalLM.from_pretrained` of the same files in
float32 (PyTorch), timed in the same process, interleaved. Both read the
files from the page cache after the warm-up. `transformers` 5 maps the files
and reads each tensor when it is first used; `hf_load_first_logits` (and its
`_transformers` row) adds the logits of 16 tokens, so that every weight is
read in both. `hf_load_memory` (a value):
the peak resident memory increase of a fresh process that loads the
checkpoint once (`bench/_worker.py --memory`, after importing TensorFlow,
Keras and Sonnet) over the checkpoint's bytes; `hf_load_rss` that increase
in MiB.

`generate_tokens`: greedy decoding of 128 new tokens after a 64-token
prompt (random token ids), batch 1 (`_b1`) and batch 8 (`_b8`), by a
GPT-2-small-shaped `snt.nets.CausalLM` with random weights (12 blocks of
width 768, 12 heads, tanh-GELU MLPs of width 3072, learned positions, tied
head, 50,257 tokens: 124 M parameters; `GPT2_QUICK` with `--quick`):
`snt.hf.generate` (its whole loop one `tf.function`; `_xla` with
`jit_compile=True`), against `transformers`' `GPT2LMHeadModel.generate`
(PyTorch, eager, its default threads) and KerasHub's `GPT2CausalLM.generate`
(TensorFlow backend, `sampler="greedy"`, its default compilation), each on
a model of the same shape with its own random weights. Time per call of
`B x 128` tokens: tokens/s = `B x 128 / time`.

`prefill`: the time to the first new token after a 512-token prompt
(batch 1): the same three `generate` calls with one new token, i.e. the
prompt's forward pass filling the cache, then one token.

Peers that are not installed (`torch` + `transformers`, `keras_hub`) are
reported skipped with the reason. The original Sonnet 2.0.2 has none of
this (`--vs` does not run these workloads).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import Sampler, Samples, Skip, interleave, timed
from bench.workloads import OURS, Results, Row, Target, Workload


@dataclasses.dataclass(frozen=True)
class Llama:
    """A Llama-shaped model's sizes."""

    name: str
    vocab: int
    width: int
    layers: int
    heads: int
    kv_heads: int
    mlp: int

    @property
    def parameters(self) -> int:
        key = self.width // self.heads
        attention = 2 * self.width**2 + 2 * self.width * self.kv_heads * key
        block = attention + 3 * self.width * self.mlp + 2 * self.width
        return self.layers * block + 2 * self.vocab * self.width + self.width


@dataclasses.dataclass(frozen=True)
class Gpt2:
    """A GPT-2-shaped model's sizes, and the lengths decoded."""

    vocab: int
    width: int
    layers: int
    heads: int
    positions: int
    prompt: int
    new: int
    prefill: int


LLAMA_FULL = Llama("llama_501m", 32000, 1536, 16, 12, 4, 4096)
LLAMA_QUICK = Llama("llama_quick", 512, 64, 2, 4, 2, 128)
GPT2_FULL = Gpt2(50257, 768, 12, 12, 1024, prompt=64, new=128, prefill=512)
GPT2_QUICK = Gpt2(1000, 64, 2, 4, 128, prompt=8, new=8, prefill=32)
BATCHES = (1, 8)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _missing(*modules: str) -> str | None:
    """Why a peer cannot run (its packages are not installed), or None."""
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if not absent:
        return None
    return f"{' and '.join(absent)} not installed (pip install {' '.join(absent)})"


# ---------------------------------------------------------------------------
# Loading.


def llama_model(shape: Llama, init: Any = None) -> Any:
    """A Llama-shaped `snt.nets.CausalLM` (unbuilt), weights from `init`."""
    import sonnet as snt

    transformer = snt.nets.Transformer(
        num_layers=shape.layers,
        num_heads=shape.heads,
        model_size=shape.width,
        mlp_hidden_size=shape.mlp,
        num_kv_heads=shape.kv_heads,
        activation="swiglu",
        norm="rms",
        causal=True,
        rotary=True,
        with_bias=False,
        w_init=init,
    )
    return snt.nets.CausalLM(shape.vocab, transformer, embed_init=init)


def checkpoint(quick: bool) -> Path:
    """The random Llama-shaped checkpoint (written by `snt.hf.save` once)."""
    shape = LLAMA_QUICK if quick else LLAMA_FULL
    folder = Path(tempfile.gettempdir()) / "sonnet_bench_hf" / shape.name
    written = folder / "written"
    if written.is_file():
        return folder
    import tensorflow as tf

    import sonnet as snt

    _log(f"    writing {shape.parameters:,} parameters to {folder} (once)")
    model = llama_model(shape, snt.initializers.RandomUniform(-0.05, 0.05))
    model(tf.zeros([1, 1], tf.int32))
    snt.hf.save(model, folder)
    written.write_text("")
    return folder


def checkpoint_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def _transformers_loader(folder: Path) -> Callable[[], Any]:
    def load() -> Any:
        import torch  # pyright: ignore[reportMissingImports]
        import transformers  # pyright: ignore[reportMissingImports]

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        return transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32
        )

    return load


def _transformers_logits(load: Callable[[], Any], tokens: np.ndarray) -> Any:
    import torch  # pyright: ignore[reportMissingImports]

    with torch.no_grad():
        return load()(torch.from_numpy(tokens.astype(np.int64))).logits


def build_hf_load(impl: str, quick: bool) -> dict[str, Sampler | Skip]:
    import sonnet as snt

    del impl  # Ours only: the peer is a row.
    folder = checkpoint(quick)
    tokens = np.arange(1, 17, dtype=np.int32)[None]
    samplers: dict[str, Sampler | Skip] = {
        "hf_load": timed(lambda: snt.hf.load(folder)),
        "hf_load_first_logits": timed(lambda: snt.hf.load(folder)(tokens)),
    }
    missing = _missing("torch", "transformers")
    load = _transformers_loader(folder)
    for row, sampler in (
        ("hf_load_transformers", timed(load)),
        (
            "hf_load_first_logits_transformers",
            timed(lambda: _transformers_logits(load, tokens)),
        ),
    ):
        samplers[row] = Skip(missing) if missing else sampler
    return samplers


def run_hf_load(
    impls: tuple[str, ...],
    other_python: str | None,
    quick: bool,
    device: str,
    repeats: int,
) -> Results:
    """Load times interleaved here; the memory in a fresh process."""
    from bench.workloads.process import memory_sample, our_root

    del impls, other_python  # Ours only.
    folder = checkpoint(quick)
    size = checkpoint_bytes(folder)
    results: Results = {}
    samplers: dict[tuple[str, str], Sampler] = {}
    for row, sampler in build_hf_load("sonnet", quick).items():
        if isinstance(sampler, Skip):
            results[row, OURS] = Samples(skipped=sampler.reason)
        else:
            samplers[row, OURS] = sampler
    results.update(interleave(samplers, repeats, 1, warmup=0 if quick else 1))
    rss = Samples()
    memory = Samples()
    python, path = sys.executable, our_root()
    fresh = memory_sample(
        rss, python, "hf_load", "hf_load", "sonnet", 1, quick, device, path
    )
    if fresh:
        ratio = rss.wall[0] * 2**20 / size
        memory.wall, memory.cpu = [ratio], [ratio]
        _log(
            f"    hf_load: checkpoint {size / 2**20:.0f} MiB, peak RSS increase "
            f"{rss.wall[0]:.0f} MiB of a fresh process ({ratio:.3f} x)"
        )
    else:
        memory.error = rss.error
    results["hf_load_memory", OURS] = memory
    results["hf_load_rss", OURS] = rss
    return results


# ---------------------------------------------------------------------------
# Generation.


def gpt2_model(shape: Gpt2) -> Any:
    """A built GPT-2-shaped `snt.nets.CausalLM` with random weights."""
    import tensorflow as tf

    import sonnet as snt

    transformer = snt.nets.Transformer(
        num_layers=shape.layers,
        num_heads=shape.heads,
        model_size=shape.width,
        activation="gelu_tanh",
        norm="layer",
        causal=True,
    )
    model = snt.nets.CausalLM(
        shape.vocab, transformer, max_positions=shape.positions, tie_embeddings=True
    )
    model(tf.zeros([1, 1], tf.int32))
    return model


def _transformers_generate(shape: Gpt2) -> Callable[[np.ndarray, int], Any]:
    import torch  # pyright: ignore[reportMissingImports]
    import transformers  # pyright: ignore[reportMissingImports]

    transformers.logging.set_verbosity_error()
    config = transformers.GPT2Config(
        vocab_size=shape.vocab,
        n_positions=shape.positions,
        n_embd=shape.width,
        n_layer=shape.layers,
        n_head=shape.heads,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    threads = torch.get_num_threads()
    _log(f"    transformers: torch {torch.__version__}, {threads} threads")

    def generate(prompts: np.ndarray, new: int) -> Any:
        ids = torch.from_numpy(prompts.astype(np.int64))
        return model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            pad_token_id=0,
        )

    return generate


def _kerashub_generate(shape: Gpt2) -> Callable[[np.ndarray, int], Any]:
    import keras_hub  # pyright: ignore[reportMissingImports]

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=shape.vocab,
        num_layers=shape.layers,
        num_heads=shape.heads,
        hidden_dim=shape.width,
        intermediate_dim=4 * shape.width,
        max_sequence_length=shape.positions,
    )
    model = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    model.compile(sampler="greedy")

    def generate(prompts: np.ndarray, new: int) -> Any:
        batch, length = prompts.shape
        tokens = np.zeros([batch, length + new], np.int32)
        tokens[:, :length] = prompts
        mask = np.zeros([batch, length + new], bool)
        mask[:, :length] = True
        # Without a preprocessor, the unmasked positions are generated.
        return model.generate(
            {"token_ids": tokens, "padding_mask": mask}, stop_token_ids=None
        )["token_ids"]

    return generate


def _peers(shape: Gpt2) -> dict[str, Callable[[np.ndarray, int], Any] | Skip]:
    peers: dict[str, Callable[[np.ndarray, int], Any] | Skip] = {}
    for suffix, modules, make in (
        ("transformers", ("torch", "transformers"), _transformers_generate),
        ("kerashub", ("keras_hub",), _kerashub_generate),
    ):
        missing = _missing(*modules)
        peers[suffix] = Skip(missing) if missing else make(shape)
    return peers


def _prompts(shape: Gpt2, batch: int, length: int) -> np.ndarray:
    rng = np.random.default_rng(batch)
    return rng.integers(1, shape.vocab, [batch, length]).astype(np.int32)


def _samplers(
    row: str,
    prompts: np.ndarray,
    new: int,
    model: Any,
    peers: dict[str, Any],
    xla: bool,
) -> dict[str, Sampler | Skip]:
    import sonnet as snt

    samplers: dict[str, Sampler | Skip] = {
        row: timed(lambda: snt.hf.generate(model, prompts, new))
    }
    if xla:
        samplers[f"{row}_xla"] = timed(
            lambda: snt.hf.generate(model, prompts, new, jit_compile=True)
        )
    for suffix, peer in peers.items():
        samplers[f"{row}_{suffix}"] = (
            peer if isinstance(peer, Skip) else timed(lambda p=peer: p(prompts, new))
        )
    return samplers


def build_generate_tokens(impl: str, quick: bool) -> dict[str, Sampler | Skip]:
    del impl  # Ours only: the peers are rows.
    shape = GPT2_QUICK if quick else GPT2_FULL
    model, peers = gpt2_model(shape), _peers(shape)
    samplers: dict[str, Sampler | Skip] = {}
    for batch in BATCHES:
        prompts = _prompts(shape, batch, shape.prompt)
        row = f"generate_tokens_b{batch}"
        samplers.update(_samplers(row, prompts, shape.new, model, peers, True))
    return samplers


def build_prefill(impl: str, quick: bool) -> dict[str, Sampler | Skip]:
    del impl
    shape = GPT2_QUICK if quick else GPT2_FULL
    prompts = _prompts(shape, 1, shape.prefill)
    return _samplers("prefill", prompts, 1, gpt2_model(shape), _peers(shape), xla=False)


_GPT2 = "GPT-2-small-shaped CausalLM (124 M parameters, random weights)"
_PEER_TARGETS = ("transformers", "kerashub")


def _generate_rows(batch: int) -> tuple[Row, ...]:
    row = f"generate_tokens_b{batch}"
    return (
        Row(
            row,
            "s",
            f"snt.hf.generate: 128 greedy tokens after a 64-token prompt, batch "
            f"{batch}, {_GPT2}; tokens/s = {batch * 128} / time",
        ),
        Row(f"{row}_xla", "s", "the same with jit_compile=True"),
        Row(
            f"{row}_transformers",
            "s",
            "transformers GPT2LMHeadModel.generate, same shape and tokens (PyTorch)",
        ),
        Row(
            f"{row}_kerashub",
            "s",
            "KerasHub GPT2CausalLM.generate, greedy sampler (TensorFlow backend)",
        ),
    )


def _targets(row: str) -> tuple[Target, ...]:
    return tuple(
        Target(row, OURS, 1.0, other_row=f"{row}_{peer}") for peer in _PEER_TARGETS
    )


WORKLOADS = {
    "hf_load": Workload(
        name="hf_load",
        rows=(
            Row(
                "hf_load",
                "s",
                "snt.hf.load of a random Llama-shaped checkpoint (501 M parameters, "
                "2.0 GB float32) written by snt.hf.save",
            ),
            Row(
                "hf_load_transformers",
                "s",
                "transformers AutoModelForCausalLM.from_pretrained of the same "
                "files, float32",
            ),
            Row(
                "hf_load_first_logits",
                "s",
                "snt.hf.load and the logits of 16 tokens (every weight read)",
            ),
            Row(
                "hf_load_first_logits_transformers",
                "s",
                "from_pretrained and the same logits (PyTorch, no_grad)",
            ),
            Row(
                "hf_load_memory",
                "fraction",
                "peak RSS increase of a fresh process loading it / the "
                "checkpoint's bytes",
            ),
            Row("hf_load_rss", "MiB", "that peak RSS increase"),
        ),
        impls=(OURS,),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_hf_load,
        run=run_hf_load,
        targets=(
            Target("hf_load", OURS, 1.0, other_row="hf_load_transformers"),
            Target("hf_load_memory", None, 1.3),
        ),
        original=False,
    ),
    "generate_tokens": Workload(
        name="generate_tokens",
        rows=_generate_rows(1) + _generate_rows(8),
        impls=(OURS,),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_generate_tokens,
        targets=_targets("generate_tokens_b1") + _targets("generate_tokens_b8"),
        original=False,
    ),
    "prefill": Workload(
        name="prefill",
        rows=(
            Row(
                "prefill",
                "s",
                f"snt.hf.generate of 1 token after a 512-token prompt, batch 1, "
                f"{_GPT2}: the prompt's forward pass into the cache, then one token",
            ),
            Row("prefill_transformers", "s", "transformers generate, the same"),
            Row("prefill_kerashub", "s", "KerasHub GPT2CausalLM.generate, the same"),
        ),
        impls=(OURS,),
        repeats=5,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_prefill,
        targets=_targets("prefill"),
        original=False,
    ),
}
