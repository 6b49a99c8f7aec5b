"""Run, fine-tune and export open-weight language models in the Hugging Face layout.

With `--model DIR`, a model directory as `transformers` writes it (GPT-2,
Llama 2/3, Mistral, Qwen2/3: `config.json`, safetensors weights and
`tokenizer.json`) is read by `snt.hf.load` into a plain `snt.nets.CausalLM`,
continues `--prompt` (`snt.hf.generate`), and is fine-tuned with LoRA
(`snt.lora.add`) for `--steps` steps on the source of a few standard-library
modules; the adapters are written in PEFT's format (`snt.hf.save_adapters`),
read back onto a fresh copy of the model (`snt.hf.load_adapters`) and
checked.

Without `--model` (the default, offline) the model comes from here: a small
Llama-layout language model (rotary embeddings, RMSNorm, SwiGLU,
grouped-query attention, untied head) is trained on characters of Python's
own source, as in `char_transformer.py`, written as a Hugging Face model
directory (`snt.hf.save`, plus a character-level `tokenizer.json`), read back
(`snt.hf.load`: the logits must be identical) and, when `transformers` is
installed, read by `transformers` too (the same logits, to float32
rounding). The steps above then run on that directory.

    python examples/open_weights.py --quick     # offline, about 30 seconds
    python examples/open_weights.py             # offline, 5-8 minutes on 2 cores
    python examples/open_weights.py --model ~/models/Qwen2.5-0.5B \\
        --prompt "def fibonacci(" --steps 20 --batch-size 2 --context 64

Outputs go to `--out` (default `examples/out/open_weights`): the offline
model's directory (`model/`, which `--model` reads), the adapters
(`adapters/`), the sample (`sample.txt`) and the fine-tuning loss curve
(`loss.png`); TensorBoard logs to `--logdir`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import tools

# The fine-tuning text: standard-library modules (not in the pretraining text).
_FINETUNE_MODULES = ["statistics", "fractions", "heapq"]


def parse_args() -> argparse.Namespace:
    parser = tools.parser(__doc__)
    parser.add_argument(
        "--model",
        metavar="DIR",
        help="a Hugging Face model directory (config.json, *.safetensors, "
        "tokenizer.json) to run and fine-tune (default: none: train a small "
        "model here, offline; --layers, --width, --heads, --kv-heads and "
        "--dropout size that model only)",
    )
    parser.add_argument(
        "--modules",
        nargs="+",
        help="standard-library modules whose source trains the offline model "
        "(default: char_transformer.py's)",
    )
    parser.add_argument(
        "--finetune-modules",
        nargs="+",
        default=_FINETUNE_MODULES,
        help="standard-library modules whose source is the LoRA fine-tuning text",
    )
    tools.add_steps_argument(
        parser, "LoRA fine-tuning steps", steps=200, quick_steps=20
    )
    parser.add_argument(
        "--pretrain-steps",
        type=int,
        help="training steps of the offline model (default: 1000; with --quick: 60)",
    )
    tools.add_run_arguments(
        parser, "open_weights", "where the model directory, adapters and sample go"
    )
    tools.add_char_model_arguments(parser)
    parser.add_argument(
        "--kv-heads",
        type=int,
        help="key/value heads of the offline model (default: half of --heads)",
    )
    parser.add_argument(
        "--rank", type=int, default=8, help="inner size of each LoRA adapter"
    )
    parser.add_argument(
        "--learning-rate",
        type=float,
        help="peak learning rate of the adapters (default: 1e-2 offline, 1e-4 "
        "with --model)",
    )
    parser.add_argument(
        "--pretrain-learning-rate",
        type=float,
        default=3e-3,
        help="peak learning rate of the offline model's training",
    )
    tools.add_sample_arguments(
        parser, "tokens to generate (default: to fill --context)"
    )
    args = parser.parse_args()
    tools.finish_arguments(args)
    tools.finish_char_model_arguments(parser, args)
    if args.model is not None and not os.path.isfile(
        os.path.join(args.model, "config.json")
    ):
        parser.error(f"--model {args.model} is not a directory with a config.json")
    if args.pretrain_steps is None:
        args.pretrain_steps = 60 if args.quick else 1000
    if args.kv_heads is None:
        args.kv_heads = max(1, args.heads // 2)
    if args.heads % args.kv_heads:
        parser.error(f"--kv-heads ({args.kv_heads}) must divide --heads")
    if args.learning_rate is None:
        args.learning_rate = 1e-4 if args.model else 1e-2
    if args.rank < 1:
        parser.error(f"--rank ({args.rank}) must be positive")
    return args


# The command line is read before TensorFlow loads (seconds): `--help` and
# mistakes in arguments answer at once.
if __name__ == "__main__":
    ARGS = parse_args()
tools.import_tensorflow()

import numpy as np
import tensorflow as tf

import sonnet as snt

import char_transformer as ct
import plots


class Characters:
    """The offline model's tokenizer when `tokenizers` is not installed: one
    token per character of `chars`; other characters are dropped."""

    def __init__(self, chars: list[str]):
        self.chars = chars
        self.index = {c: i for i, c in enumerate(chars)}

    def encode(self, text: str) -> list[int]:
        return [self.index[c] for c in text if c in self.index]

    def decode(self, ids: Any) -> str:
        return "".join(self.chars[i] for i in ids)


class Tokens:
    """A `tokenizers.Tokenizer` (`snt.hf.load_tokenizer`) as ids in, text out."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def decode(self, ids: Any) -> str:
        return self.tokenizer.decode([int(i) for i in ids])


def llama_model(vocab_size: int, args: argparse.Namespace) -> Any:
    """A Llama-layout language model: what `snt.hf.save` writes as `llama`."""
    transformer = snt.nets.Transformer(
        num_layers=args.layers,
        num_heads=args.heads,
        model_size=args.width,
        num_kv_heads=args.kv_heads,
        activation="swiglu",
        norm="rms",
        dropout_rate=args.dropout,
        causal=True,
        rotary=True,
        with_bias=False,
    )
    return snt.nets.CausalLM(vocab_size, transformer)


def logits_of(model: Any, tokens: np.ndarray) -> np.ndarray:
    return model(tokens).numpy()


def write_char_tokenizer(chars: list[str], path: Path) -> bool:
    """Writes `tokenizer.json` for one token per character (unknown ones read
    as a space); False if `tokenizers` is not installed."""
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    except ImportError:
        return False
    vocab = {c: i for i, c in enumerate(chars)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=" "))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(
        Regex(r"[\s\S]"), behavior="isolated"
    )
    tokenizer.decoder = decoders.Fuse()
    tokenizer.save(str(path))
    return True


def transformers_logits(directory: Path, tokens: np.ndarray) -> np.ndarray | None:
    """`transformers`' logits for `tokens` from the model in `directory`, or
    None if `transformers` (and `torch`) are not installed."""
    try:
        import torch  # pyright: ignore[reportMissingImports]
        import transformers  # pyright: ignore[reportMissingImports]
    except ImportError:
        return None
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, dtype=torch.float32
    )
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens.astype(np.int64))).logits
    return logits.numpy()


def compare_with_transformers(directory: Path, tokens: np.ndarray, ours: Any) -> None:
    theirs = transformers_logits(directory, tokens)
    if theirs is None:
        print(
            tools.wrap(
                "transformers is not installed: skipped reading the directory with "
                "it (pip install torch transformers)"
            )
        )
        return
    import transformers  # pyright: ignore[reportMissingImports]

    ours = np.asarray(ours)
    difference = float(np.max(np.abs(theirs - ours)))
    scale = float(np.max(np.abs(ours)))
    print(
        f"transformers {transformers.__version__} reads {directory}: the same "
        f"logits, max |difference| {difference:.1e} (largest logit {scale:.1f})"
    )
    if difference > 1e-4 * max(scale, 1.0):
        raise SystemExit("transformers computes other logits than snt.hf.load's model")


def make_offline_model(
    args: argparse.Namespace, rng: np.random.Generator
) -> tuple[Path, Any]:
    """Trains the offline model, writes it as a Hugging Face model directory
    and checks it reads back; returns the directory and its tokenizer."""
    modules = args.modules or ct._MODULES
    text = ct.source_text(modules)
    chars = sorted(set(text))
    data = ct.encode(text, chars)
    split = int(len(data) * 0.9)
    print(
        tools.wrap(
            f"text: {len(text)} characters of {', '.join(modules)} "
            f"({len(chars)} distinct); {len(data) - split} held out"
        )
    )
    model = llama_model(len(chars), args)
    optimizer = ct.make_optimizer(args.pretrain_learning_rate, args.pretrain_steps)
    start = time.perf_counter()
    ct.train(
        model,
        optimizer,
        data[:split],
        args.pretrain_steps,
        args.batch_size,
        args.context,
        rng,
        desc="pretraining",
        tag="pretrain/loss",
    )
    windows = ct.held_out_windows(data[split:], args.context)
    print(
        f"trained a Llama-layout model {args.pretrain_steps} steps in "
        f"{time.perf_counter() - start:.1f}s: held-out loss "
        f"{ct.evaluate(model, windows):.3f} nats/char"
    )

    directory = Path(args.out) / "model"
    written = snt.hf.save(model, directory)
    tokenizer: Any = Characters(chars)
    if write_char_tokenizer(chars, directory / "tokenizer.json"):
        written.append("tokenizer.json")
        tokenizer = Tokens(snt.hf.load_tokenizer(directory))
    print(
        tools.wrap(
            f"wrote {directory} in the Hugging Face layout: {', '.join(written)} "
            f"(run the rest on it again with --model {directory})"
        )
    )
    config = json.loads((directory / "config.json").read_text())
    print(
        f"config.json: model_type {config['model_type']!r}, "
        f"{config['num_hidden_layers']} layers, hidden_size {config['hidden_size']}, "
        f"{config['num_attention_heads']} heads, "
        f"{config['num_key_value_heads']} key/value heads"
    )
    tokens = windows[:2, :-1]
    logits = model(tokens).numpy()
    loaded = logits_of(snt.hf.load(directory), tokens)
    identical = np.array_equal(loaded, logits)
    print(
        f"read back with snt.hf.load: logits identical: {identical} "
        f"(max |difference| {np.max(np.abs(loaded - logits)):.1e})"
    )
    if not identical:
        raise SystemExit("the model read back computes other logits")
    compare_with_transformers(directory, tokens, logits)
    return directory, tokenizer


def model_tokenizer(directory: Path) -> Any:
    if not (directory / "tokenizer.json").is_file():
        raise SystemExit(
            f"--model {directory} has no tokenizer.json: it is needed to encode "
            "the prompt and the fine-tuning text"
        )
    return Tokens(snt.hf.load_tokenizer(directory))


def stop_tokens(directory: Path) -> list[int]:
    """The config's end-of-sequence token ids (an int, a list, or none)."""
    eos = json.loads((directory / "config.json").read_text()).get("eos_token_id")
    if eos is None:
        return []
    return [eos] if isinstance(eos, int) else list(eos)


def finetune_data(
    tokenizer: Any, args: argparse.Namespace
) -> tuple[np.ndarray, np.ndarray]:
    """The fine-tuning text as token ids: training part, held-out windows
    (at most 64, so that evaluating a large model stays short)."""
    text = ct.source_text(args.finetune_modules)
    ids = np.asarray(tokenizer.encode(text), np.int32)
    split = int(len(ids) * 0.9)
    if len(ids) - split <= args.context + 1:
        raise SystemExit(
            f"--finetune-modules: {len(ids)} tokens are too few for --context "
            f"{args.context}"
        )
    print(
        f"fine-tuning text: {len(text)} characters of "
        f"{', '.join(args.finetune_modules)}, {len(ids)} tokens"
    )
    return ids[:split], ct.held_out_windows(ids[split:], args.context)[:64]


def count(variables: Any) -> int:
    """Parameters in `variables` (the adapters' `merged` flags are not)."""
    return sum(v.shape.num_elements() or 0 for v in variables if v.dtype.is_floating)


def finetune(
    model: Any,
    directory: Path,
    tokenizer: Any,
    args: argparse.Namespace,
    rng: np.random.Generator,
) -> list[float]:
    """LoRA fine-tuning, the adapters written in PEFT's format and read back;
    returns the losses."""
    train_ids, windows = finetune_data(tokenizer, args)
    before = ct.evaluate(model, windows)
    total = count(model.variables)
    # GPT-2's query, key and value share one fused tensor (`c_attn`) that
    # PEFT's format cannot adapt separately: adapt the other projections.
    pattern = None if model.max_positions is None else "attention/output|mlp_"
    adapters = snt.lora.add(model, rank=args.rank, pattern=pattern)
    trainable = count(model.trainable_variables)
    print(
        f"snt.lora.add(rank={args.rank}): {len(adapters)} adapters, {trainable:,} "
        f"trainable parameters ({trainable / total:.2%} of the model's {total:,})"
    )
    # `ct.train` traces its step now, after `snt.lora.add`: it sees the
    # adapters and the new `trainable_variables`.
    optimizer = ct.make_optimizer(args.learning_rate, args.steps)
    start = time.perf_counter()
    losses = ct.train(
        model,
        optimizer,
        train_ids,
        args.steps,
        args.batch_size,
        args.context,
        rng,
        desc="fine-tuning",
        tag="finetune/loss",
    )
    after = ct.evaluate(model, windows)
    print(
        f"fine-tuned {args.steps} steps in {time.perf_counter() - start:.1f}s: "
        f"held-out loss {after:.3f} nats/token (before: {before:.3f}; "
        f"{after / math.log(2):.2f} bits/token)"
    )
    tf.summary.scalar("finetune/validation_loss", after, step=args.steps)

    path = Path(args.out) / "adapters"
    written = snt.hf.save_adapters(model, path)
    fresh = snt.hf.load(directory)
    snt.hf.load_adapters(fresh, path)
    tokens = windows[:2, :-1]
    difference = float(np.max(np.abs(logits_of(fresh, tokens) - model(tokens))))
    print(
        tools.wrap(
            f"adapters in PEFT's format: {path}/{{{', '.join(written)}}}; read "
            f"onto a fresh snt.hf.load (snt.hf.load_adapters): max |logits "
            f"difference| {difference:.1e}"
        )
    )
    if difference > 1e-4:
        raise SystemExit("the adapters read back compute other logits")
    return losses


def main(args: argparse.Namespace) -> None:
    tf.random.set_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    writer = tools.tensorboard(args.logdir)
    if args.model:
        directory = Path(args.model)
        tokenizer = model_tokenizer(directory)
    else:
        directory, tokenizer = make_offline_model(args, rng)

    start = time.perf_counter()
    model = snt.hf.load(directory)
    print(f"snt.hf.load({str(directory)!r}): {time.perf_counter() - start:.1f}s")
    spec = tf.TensorSpec([1, args.context], tf.int32)
    tools.show_summary("model/summary", snt.summary(model, spec))

    prompt = tokenizer.encode(args.prompt)
    if not prompt:
        raise SystemExit(f"--prompt {args.prompt!r} has no tokens")
    generated = snt.hf.generate(
        model,
        [prompt],
        args.sample_length,
        temperature=args.temperature,
        seed=args.seed,
        stop_tokens=stop_tokens(directory),
    )
    text = args.prompt + tokenizer.decode(generated.numpy()[0])
    tools.print_sample(text, args.quick and not args.model)
    tools.write_table("sample", text)

    losses = finetune(model, directory, tokenizer, args, rng)
    writer.flush()
    plots.save_curve(
        os.path.join(args.out, "loss.png"),
        losses,
        "cross-entropy (nats/token)",
        "LoRA fine-tuning loss",
    )
    with open(os.path.join(args.out, "sample.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    print(
        f"wrote {args.out}/loss.png and {args.out}/sample.txt; "
        f"TensorBoard logs in {args.logdir}"
    )


if __name__ == "__main__":
    main(ARGS)
