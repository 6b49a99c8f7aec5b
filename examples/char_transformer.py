"""Train a small causal Transformer language model on Python's own source code.

The text is the source of a few standard-library modules (`json`, `os`,
`argparse`, `pathlib`, ... by default: about 370,000 characters that ship with
every Python, so nothing is downloaded); the last 10% is held out. The model
reads characters and predicts the next one; at the end it writes new "Python"
one character at a time. The full run reaches about 1.3 nats (1.9 bits) per
held-out character, against 3.0 for character frequencies alone.

    python examples/char_transformer.py             # 5-8 minutes on 2 CPU cores
    python examples/char_transformer.py --quick     # a few seconds of training
    python examples/char_transformer.py --modules json typing --steps 3000
    python examples/char_transformer.py --window 32 none    # local, global, ...
    python examples/char_transformer.py --experts 4 --top-k 1   # sparse MLPs

What it shows: `snt.Embed` + `snt.nets.Transformer(causal=True, rotary=True)` +
`snt.Linear` as a language model, trained with `snt.optimizers.AdamW` and a
warm-up + cosine learning-rate schedule inside a `tf.function` step; a
validation loss against a character-frequency baseline; sampling with the
decoding cache (`initial_cache`), the whole loop in one `tf.function`, checked
against recomputing every prefix without the cache; a loss curve (`loss.png`),
the sample (`sample.txt`) and a `tf.train.Checkpoint`, reloaded into a fresh
model, in `--out` (default `examples/out/char_transformer`); TensorBoard logs
in `--logdir`.

Options of the Transformer: `--window` gives the blocks local attention
(each character sees the last N; a list is a per-layer pattern cycled over
the blocks, `none` for global attention), and `--experts` makes every
block's MLP a mixture of experts (`snt.MixtureOfExperts`, `--top-k` experts
per character), trained with its load-balancing and router z-losses added
to the loss.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import time
from pathlib import Path
from typing import Any

import tools

_MODULES = ["json", "os", "textwrap", "string", "argparse", "functools"]
_MODULES += ["dataclasses", "pathlib"]


def parse_args() -> argparse.Namespace:
    parser = tools.parser(__doc__)
    parser.add_argument(
        "--modules",
        nargs="+",
        default=_MODULES,
        help="standard-library modules whose source is the text (a package "
        "contributes every .py file of its folder; default: %(default)s)",
    )
    tools.add_steps_argument(parser, "training steps", steps=1000, quick_steps=60)
    tools.add_run_arguments(
        parser, "char_transformer", "where plots, the sample and the checkpoint go"
    )
    tools.add_char_model_arguments(parser)
    parser.add_argument(
        "--learning-rate", type=float, default=3e-3, help="AdamW's peak learning rate"
    )
    tools.add_sample_arguments(
        parser,
        "characters to generate (default: to fill the context; the model "
        "has not seen positions past it)",
    )
    parser.add_argument(
        "--window",
        nargs="+",
        type=window_size,
        help="local attention: each character attends to the last N (itself "
        "included); several values are a per-layer pattern cycled over the "
        "blocks, `none` for global attention (e.g. `--window 32 none`; "
        "default: global attention everywhere)",
    )
    parser.add_argument(
        "--experts",
        type=int,
        help="make every block's MLP a mixture of this many experts (default: "
        "dense MLPs)",
    )
    parser.add_argument(
        "--top-k",
        type=int,
        help="experts per character with --experts (default: 2, or 1 for 1 expert)",
    )
    args = parser.parse_args()
    tools.finish_arguments(args)
    tools.finish_char_model_arguments(parser, args)
    if args.experts is None:
        if args.top_k is not None:
            parser.error("--top-k needs --experts")
    elif args.experts < 1:
        parser.error(f"--experts ({args.experts}) must be at least 1")
    elif args.top_k is None:
        args.top_k = min(2, args.experts)
    elif not 1 <= args.top_k <= args.experts:
        parser.error(f"--top-k ({args.top_k}) must be in [1, --experts]")
    return args


def window_size(text: str) -> int | None:
    """A `--window` value: a positive int, or `none` (global attention)."""
    if text.lower() == "none":
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive int or none")
    return int(text)


def source_text(modules: list[str]) -> str:
    """The source code of standard-library `modules`, one file after another."""
    parts = []
    for name in modules:
        module = importlib.import_module(name)
        path = Path(module.__file__ or "")
        if path.suffix != ".py":
            raise SystemExit(f"--modules: {name} has no Python source ({path})")
        files = (
            sorted(path.parent.glob("*.py")) if path.name == "__init__.py" else [path]
        )
        parts += [f.read_text(encoding="utf-8") for f in files]
    return "\n".join(parts)


# The command line is read before TensorFlow loads (seconds): `--help` and
# mistakes in arguments answer at once.
if __name__ == "__main__":
    ARGS = parse_args()
tools.import_tensorflow()

import numpy as np
import tensorflow as tf

import sonnet as snt

import plots


class CharLM(snt.Module):
    """Characters in, logits of the next character out.

    `snt.nets.Transformer` maps vectors to vectors; the embedding of the
    characters and the output head around it are ordinary Sonnet modules.
    Rotary embeddings encode positions inside attention: there is no
    position table, and the decoding cache knows where each new character
    goes. `args.window`, `args.experts` and `args.top_k` (see
    `parse_args`; `char_transformer_lora.py`'s arguments have none of them)
    choose local attention and mixture-of-experts MLPs.
    """

    def __init__(self, vocab_size: int, args: argparse.Namespace):
        super().__init__(name="char_lm")
        window = getattr(args, "window", None)
        experts = getattr(args, "experts", None)
        self.has_experts = experts is not None
        self.embed = snt.Embed(vocab_size, args.width)
        self.transformer = snt.nets.Transformer(
            num_layers=args.layers,
            num_heads=args.heads,
            model_size=args.width,
            dropout_rate=args.dropout,
            causal=True,
            rotary=True,
            window=window,
            num_experts=experts,
            top_k=args.top_k if self.has_experts else None,
        )
        self.head = snt.Linear(vocab_size, name="head")

    def __call__(
        self,
        tokens: tf.Tensor,
        is_training: bool = False,
        cache: Any = None,
        return_aux_losses: bool = False,
    ) -> Any:
        """Logits `[B, T, vocab]`; with a cache, `(logits, new_cache)`; with
        `return_aux_losses` (experts only), `(logits, aux_losses)`."""
        x = self.embed(tokens)
        if return_aux_losses:
            y, losses = self.transformer(
                x, is_training=is_training, return_aux_losses=True
            )
            return self.head(y), losses
        if cache is None:
            return self.head(self.transformer(x, is_training=is_training))
        y, cache = self.transformer(x, is_training=is_training, cache=cache)
        return self.head(y), cache


def make_optimizer(learning_rate: float, steps: int) -> Any:
    """AdamW with a warm-up (5% of `steps`) + cosine learning-rate schedule."""
    warmup = max(1, steps // 20)
    schedule = snt.optimizers.schedules.WarmupCosine(
        learning_rate, warmup, max(1, steps - warmup), alpha=0.1
    )
    return snt.optimizers.AdamW(schedule, weight_decay=0.01)


def make_sampler(model: CharLM, length: int, temperature: float) -> Any:
    """A `tf.function(prompt [B, P], seed)` -> `(tokens [B, length], logits)`.

    The prompt fills the decoding cache in one call, then each new character
    is one call on a single position; the loop runs in the graph. `logits`
    `[B, length, vocab]` are those each sampled character was drawn from.
    """

    @tf.function
    def sample(prompt: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # The cache has a fixed size: the prompt's (known while tracing) plus
        # the characters to generate.
        cache = model.transformer.initial_cache(
            tf.shape(prompt)[0], prompt.shape[1] + length
        )
        logits, cache = model(prompt, cache=cache)
        next_logits = logits[:, -1]
        tokens = tf.TensorArray(tf.int32, size=length)
        all_logits = tf.TensorArray(tf.float32, size=length)
        for i in tf.range(length):
            all_logits = all_logits.write(i, next_logits)
            token = tf.random.stateless_categorical(
                next_logits / temperature, 1, seed=[seed, i], dtype=tf.int32
            )
            tokens = tokens.write(i, token[:, 0])
            logits, cache = model(token, cache=cache)
            next_logits = logits[:, -1]
        return tf.transpose(tokens.stack()), tf.transpose(all_logits.stack(), [1, 0, 2])

    return sample


def encode(text: str, chars: list[str]) -> np.ndarray:
    """`text` as indices into `chars` (each character of `text` must be there)."""
    index = {c: i for i, c in enumerate(chars)}
    return np.array([index[c] for c in text], dtype=np.int32)


def xent(logits: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Mean cross-entropy (nats per character) of `logits` for `targets`."""
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
    )


# Weights of the experts' auxiliary losses in the training loss (the Switch
# Transformer's 1e-2 for load balancing, ST-MoE's 1e-3 for the router z-loss).
_LOAD_BALANCING_WEIGHT = 1e-2
_ROUTER_Z_WEIGHT = 1e-3


def train(
    model: CharLM,
    optimizer: Any,
    data: np.ndarray,
    steps: int,
    batch_size: int,
    context: int,
    rng: np.random.Generator,
    desc: str = "training",
    tag: str = "train/loss",
) -> list[float]:
    """Trains `model.trainable_variables` on random windows of `data`.

    Each step predicts every next character of `batch_size` windows of
    `context + 1` characters (with experts, their auxiliary losses are added
    to the loss the optimizer sees); the mean training loss of every 10
    steps is logged to TensorBoard as `tag`. Returns each step's
    cross-entropy.
    """

    # `open_weights.py` trains an `snt.nets.CausalLM` (no experts) with this loop.
    experts = getattr(model, "has_experts", False)

    @tf.function
    def train_step(tokens: tf.Tensor) -> tf.Tensor:
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        with tf.GradientTape() as tape:
            if experts:
                logits, aux = model(inputs, is_training=True, return_aux_losses=True)
                loss = xent(logits, targets)
                total = loss + _LOAD_BALANCING_WEIGHT * aux["load_balancing"]
                total += _ROUTER_Z_WEIGHT * aux["router_z"]
            else:
                total = loss = xent(model(inputs, is_training=True), targets)
        params = model.trainable_variables
        optimizer.apply(tape.gradient(total, params), params)
        return loss

    window = np.arange(context + 1)

    def random_batch() -> np.ndarray:
        starts = rng.integers(0, len(data) - len(window), batch_size)
        return data[starts[:, None] + window]

    losses: list[float] = []
    with tools.progress(steps, desc) as bar:
        for step in bar:
            losses.append(float(train_step(random_batch())))
            bar.record(loss=losses[-1])
            if (step + 1) % 10 == 0:
                tf.summary.scalar(tag, np.mean(losses[-10:]), step=step + 1)
    return losses


def held_out_windows(data: np.ndarray, context: int) -> np.ndarray:
    """`data` cut into consecutive windows of `context + 1` characters."""
    count = (len(data) - 1) // context
    return np.stack([data[i * context : (i + 1) * context + 1] for i in range(count)])


def evaluate(model: CharLM, windows: np.ndarray) -> float:
    """Mean loss (nats/char) of `model` predicting each window's next characters.

    Traced anew on each call (once, whatever the windows' number), so it
    sees the model as it is now.
    """

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def eval_loss(tokens: tf.Tensor) -> tf.Tensor:
        return xent(model(tokens[:, :-1]), tokens[:, 1:])

    chunks = [windows[i : i + 64] for i in range(0, len(windows), 64)]
    return float(
        np.average([eval_loss(c) for c in chunks], weights=[len(c) for c in chunks])
    )


def main(args: argparse.Namespace) -> None:
    tf.random.set_seed(args.seed)
    text = source_text(args.modules)
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = encode(text, chars)
    split = int(len(data) * 0.9)
    train_data, valid_data = data[:split], data[split:]
    vocab_size = len(chars)
    print(
        tools.wrap(
            f"text: {len(text)} characters of {', '.join(args.modules)} "
            f"({vocab_size} distinct); {len(valid_data)} held out"
        )
    )

    model = CharLM(vocab_size, args)
    if args.window:
        pattern = [block.attention.window for block in model.transformer.blocks]
        print(f"attention windows per block: {pattern}")
    if args.experts:
        print(
            f"MLPs: mixtures of {args.experts} experts, {args.top_k} per character "
            "(snt.MixtureOfExperts)"
        )
    optimizer = make_optimizer(args.learning_rate, args.steps)
    # Traced on a spec, nothing run: this also builds the model.
    spec = tf.TensorSpec([args.batch_size, args.context], tf.int32)
    writer = tools.tensorboard(args.logdir)
    tools.show_summary("model/summary", snt.summary(model, spec, is_training=True))

    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    losses = train(
        model, optimizer, train_data, args.steps, args.batch_size, args.context, rng
    )
    print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f}s")

    # Held-out text in consecutive windows; the baseline predicts every
    # character from its frequency in the training text.
    windows = held_out_windows(valid_data, args.context)
    valid_loss = evaluate(model, windows)
    freq = np.bincount(train_data, minlength=vocab_size) + 1.0
    freq /= freq.sum()
    baseline = float(-np.mean(np.log(freq[valid_data])))
    print(
        f"validation loss: {valid_loss:.3f} nats/char, "
        f"{valid_loss / math.log(2):.2f} bits/char "
        f"(character frequencies alone: {baseline:.3f} nats/char)"
    )
    tf.summary.scalar("validation/loss", valid_loss, step=args.steps)
    if args.experts:
        # How evenly the routers spread held-out characters over the experts.
        _, aux = model(windows[:64, :-1], return_aux_losses=True)
        print(
            tools.wrap(
                f"experts on held-out text: load-balancing loss "
                f"{float(aux['load_balancing']):.3f} summed over {args.layers} "
                f"block(s) (1 per block: characters spread evenly), router z-loss "
                f"{float(aux['router_z']):.3f}"
            )
        )

    # Sampling: the prompt fills the cache in one call, then each new
    # character is one call on a single position. The loop runs in the graph.
    prompt = np.array([[index.get(c, 0) for c in args.prompt]], dtype=np.int32)
    sample = make_sampler(model, args.sample_length, args.temperature)
    generated, sampled_logits = sample(prompt, tf.constant(args.seed))
    text_out = args.prompt + "".join(chars[i] for i in generated.numpy()[0])
    tools.print_sample(text_out, args.quick)
    tools.write_table("sample", text_out, step=args.steps)
    writer.flush()
    # Without the cache, every position's logits come from the whole prefix.
    full = tf.concat([prompt, generated[:, :-1]], axis=1)
    recomputed = model(full)[:, prompt.shape[1] - 1 :]
    difference = float(tf.reduce_max(tf.abs(recomputed - sampled_logits)))
    print(
        f"cached decoding matches recomputing each prefix: max |diff| {difference:.2e}"
    )

    os.makedirs(args.out, exist_ok=True)
    plots.save_curve(
        os.path.join(args.out, "loss.png"),
        losses,
        "cross-entropy (nats/char)",
        "training loss",
    )
    with open(os.path.join(args.out, "sample.txt"), "w", encoding="utf-8") as f:
        f.write(text_out)

    # The checkpoint stores the variables by their place in the object graph
    # (`model/transformer/blocks/0/attention/...`); a fresh model restores
    # them when its first call creates them.
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    path = checkpoint.save(os.path.join(args.out, "checkpoint", "ckpt"))
    fresh = CharLM(vocab_size, args)
    status = tf.train.Checkpoint(model=fresh).read(path)
    batch = windows[:8, :-1]
    np.testing.assert_allclose(fresh(batch).numpy(), model(batch).numpy(), atol=1e-5)
    status.assert_existing_objects_matched().expect_partial()
    print(f"checkpoint {path}: reloaded outputs match")
    print(
        f"wrote {args.out}/loss.png and {args.out}/sample.txt; "
        f"TensorBoard logs in {args.logdir}"
    )


if __name__ == "__main__":
    main(ARGS)
