"""Fine-tune the character Transformer of `char_transformer.py` on new text with LoRA.

The model of `char_transformer.py` is first trained on its text (the source of
`json`, `os`, `argparse`, ...), or read from a checkpoint of it
(`--checkpoint`). It is then adapted to other standard-library modules
(`statistics`, `fractions`, `random`, `heapq`, `difflib`, `calendar` by
default: numbers, doctests and text diffing), read with the pretrained
vocabulary (the few characters outside it are dropped). `snt.lora.add` gives
every `snt.Linear` of the model (the attention projections and the MLPs of the
Transformer's blocks, and the output head) a low-rank adapter and freezes
everything else, so the usual training loop over `model.trainable_variables`
trains the adapters alone: a small fraction of the parameters.

    python examples/char_transformer_lora.py           # about 10 minutes on 2 CPU cores
    python examples/char_transformer_lora.py --quick   # a few seconds of training
    python examples/char_transformer.py                # or: pretrain once, then
    python examples/char_transformer_lora.py \\
        --checkpoint examples/out/char_transformer/checkpoint --rank 8

Pretraining takes 5-8 minutes of the full run and fine-tuning 3-4 (the
adapters' gradients are cheap, but the backward pass through the
activations is not): a `--checkpoint` saves the former.

What it shows: the parameter counts before and after `snt.lora.add`; the
held-out loss on the new text before and after fine-tuning the adapters,
with every frozen weight unchanged; `snt.lora.save` writing the adapters
alone; `snt.lora.merge` folding them into the weights (same loss, a plain
model's cost), a sample of the merged model; `snt.lora.remove` giving the
pretrained model back and `snt.lora.restore` reading the saved adapters into
it again. Outputs go to `--out` (default `examples/out/char_transformer_lora`):
the pretrained checkpoint (reuse it with `--checkpoint`), the adapters, the
fine-tuning loss curve (`loss.png`) and the sample; TensorBoard logs to
`--logdir`.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Sequence

import tools

_NEW_MODULES = ["statistics", "fractions", "random", "heapq", "difflib", "calendar"]


def parse_args() -> argparse.Namespace:
    parser = tools.parser(__doc__)
    parser.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="a checkpoint of char_transformer.py's model (its checkpoint folder "
        "or a file prefix such as .../checkpoint/ckpt-1) to fine-tune instead "
        "of pretraining here; give the --modules, --width, --layers and "
        "--heads (or --quick) it was trained with",
    )
    parser.add_argument(
        "--modules",
        nargs="+",
        help="standard-library modules of the pretraining text, which also "
        "fixes the vocabulary (default: char_transformer.py's)",
    )
    parser.add_argument(
        "--new-modules",
        nargs="+",
        default=_NEW_MODULES,
        help="standard-library modules whose source is the new text to fine-tune on",
    )
    parser.add_argument(
        "--rank", type=int, default=4, help="inner size of each adapter"
    )
    parser.add_argument(
        "--alpha",
        type=float,
        help="adapters' outputs are scaled by alpha / rank (default: rank)",
    )
    parser.add_argument(
        "--pattern",
        help="adapt only the Linears whose name path matches this regular "
        "expression, e.g. 'attention' (default: every Linear)",
    )
    tools.add_steps_argument(parser, "fine-tuning steps", steps=500, quick_steps=100)
    parser.add_argument(
        "--pretrain-steps",
        type=int,
        help="pretraining steps (default: 1000; with --quick: 60)",
    )
    tools.add_run_arguments(
        parser, "char_transformer_lora", "where the checkpoints, plot and sample go"
    )
    # The model's arguments and defaults are char_transformer.py's (a
    # --checkpoint of it fits with the same flags).
    tools.add_char_model_arguments(parser)
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=1e-2,
        help="peak learning rate of the adapters",
    )
    parser.add_argument(
        "--pretrain-learning-rate",
        type=float,
        default=3e-3,
        help="peak learning rate of pretraining",
    )
    tools.add_sample_arguments(
        parser, "characters to generate (default: to fill the context)"
    )
    args = parser.parse_args()
    tools.finish_arguments(args)
    tools.finish_char_model_arguments(parser, args)
    if args.pretrain_steps is None:
        args.pretrain_steps = 60 if args.quick else 1000
    if not 1 <= args.rank <= args.width:
        parser.error(f"--rank ({args.rank}) must be from 1 to --width ({args.width})")
    if args.alpha is not None and not args.alpha > 0:
        parser.error(f"--alpha ({args.alpha}) must be positive")
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


def count(variables: Sequence[tf.Variable]) -> int:
    """The number of parameters (floating point values) in `variables`: the
    adapters' `merged` flags are not parameters."""
    return sum(v.shape.num_elements() or 0 for v in variables if v.dtype.is_floating)


def restore(model: ct.CharLM, path: str) -> str:
    """Reads a checkpoint of `char_transformer.py` into the built `model`."""
    if os.path.isdir(path):
        found = tf.train.latest_checkpoint(path)
        if found is None:
            raise SystemExit(f"--checkpoint: no checkpoint in {path}")
        path = found
    hint = (
        "give the --modules, --width, --layers and --heads (or --quick) "
        "char_transformer.py was run with"
    )
    try:
        # The optimizer's slots in the file are not needed: `expect_partial`.
        status = tf.train.Checkpoint(model=model).read(path).expect_partial()
        status.assert_existing_objects_matched()
    except (ValueError, AssertionError, tf.errors.OpError) as e:
        first_line = str(e).strip().splitlines()[0]
        raise SystemExit(
            f"--checkpoint {path} does not fit the model: {first_line}; {hint}"
        ) from None
    return path


def main(args: argparse.Namespace) -> None:
    tf.random.set_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    writer = tools.tensorboard(args.logdir)
    modules = args.modules or ct._MODULES
    shared = sorted(set(modules) & set(args.new_modules))
    if shared:
        raise SystemExit(
            f"--new-modules must differ from the pretraining text: {shared} in both"
        )

    # The pretraining text fixes the vocabulary, as in char_transformer.py.
    text = ct.source_text(modules)
    chars = sorted(set(text))
    data = ct.encode(text, chars)
    split = int(len(data) * 0.9)
    old_valid = ct.held_out_windows(data[split:], args.context)
    print(
        tools.wrap(
            f"pretraining text: {len(text)} characters of {', '.join(modules)} "
            f"({len(chars)} distinct)"
        )
    )

    model = ct.CharLM(len(chars), args)
    if args.checkpoint:
        model(old_valid[:1, :-1])  # Creates the variables to restore into.
        path = restore(model, args.checkpoint)
        print(f"pretrained model read from {path}")
    else:
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
        prefix = os.path.join(args.out, "pretrained", "ckpt")
        path = tf.train.Checkpoint(model=model).save(prefix)
        print(
            tools.wrap(
                f"pretrained {args.pretrain_steps} steps in "
                f"{time.perf_counter() - start:.1f}s; saved to {path} "
                f"(--checkpoint {os.path.dirname(path)} skips pretraining)"
            )
        )

    # The new text, in the pretrained vocabulary: characters it lacks are
    # dropped (the embedding has no row for them).
    new_text = ct.source_text(args.new_modules)
    vocabulary = set(chars)
    kept = "".join(c for c in new_text if c in vocabulary)
    new_data = ct.encode(kept, chars)
    new_split = int(len(new_data) * 0.9)
    new_train = new_data[:new_split]
    new_valid = ct.held_out_windows(new_data[new_split:], args.context)
    print(
        tools.wrap(
            f"new text: {len(kept)} characters of {', '.join(args.new_modules)} "
            f"({len(new_text) - len(kept)} outside the vocabulary dropped); "
            f"{len(new_data) - new_split} held out"
        )
    )
    pretrained_loss = ct.evaluate(model, new_valid)
    own_loss = ct.evaluate(model, old_valid)
    print(
        f"pretrained model: held-out loss {pretrained_loss:.3f} nats/char on the "
        f"new text ({own_loss:.3f} on its own)"
    )

    total = count(model.variables)
    print(
        f"parameters: {total:,} total, {count(model.trainable_variables):,} trainable"
    )
    frozen = [(v, v.numpy()) for v in model.variables]
    try:
        adapters = snt.lora.add(
            model, rank=args.rank, alpha=args.alpha, pattern=args.pattern
        )
    except ValueError as e:  # A --pattern that matches no Linear, say.
        raise SystemExit(f"snt.lora.add: {e}") from None
    scale = next(iter(adapters.values())).scale
    names = sorted(adapters)
    print(
        f"snt.lora.add(rank={args.rank}, alpha={args.rank * scale:g}): "
        f"{len(adapters)} adapters ({names[0]}, ..., {names[-1]})"
    )
    trainable = count(model.trainable_variables)
    print(
        f"parameters: {count(model.variables):,} total, {trainable:,} trainable "
        f"(the adapters: {trainable / total:.1%} of the model's {total:,})"
    )

    # A new optimizer for the adapters; `ct.train` traces its step anew, so
    # it sees the adapters and the new `trainable_variables`.
    optimizer = ct.make_optimizer(args.learning_rate, args.steps)
    start = time.perf_counter()
    losses = ct.train(
        model,
        optimizer,
        new_train,
        args.steps,
        args.batch_size,
        args.context,
        rng,
        tag="finetune/loss",
    )
    print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f}s")
    tuned_loss = ct.evaluate(model, new_valid)
    print(
        f"fine-tuned: held-out loss {tuned_loss:.3f} nats/char on the new text "
        f"(pretrained: {pretrained_loss:.3f}; "
        f"{tuned_loss / math.log(2):.2f} bits/char)"
    )
    tf.summary.scalar("finetune/validation_loss", tuned_loss, step=args.steps)
    same = sum(np.array_equal(v.numpy(), value) for v, value in frozen)
    print(f"base weights unchanged: {same} of {len(frozen)} variables identical")
    if same != len(frozen):
        raise SystemExit("fine-tuning changed a frozen variable")

    adapters_path = snt.lora.save(model, os.path.join(args.out, "adapters", "lora"))
    print(f"adapters alone saved to {adapters_path}")

    # Merging folds each adapter into its weight: `w += (alpha / rank) a @ b`.
    # (Functions traced before the merge would still add the adapters' terms:
    # `ct.evaluate` traces anew.)
    snt.lora.merge(model)
    merged_loss = ct.evaluate(model, new_valid)
    print(
        f"merged (snt.lora.merge): held-out loss {merged_loss:.3f} nats/char "
        f"(|difference| {abs(merged_loss - tuned_loss):.1e})"
    )
    print(
        f"  on the pretraining text: {ct.evaluate(model, old_valid):.3f} "
        f"(pretrained: {own_loss:.3f})"
    )
    index = {c: i for i, c in enumerate(chars)}
    prompt = np.array([[index.get(c, 0) for c in args.prompt]], dtype=np.int32)
    sample = ct.make_sampler(model, args.sample_length, args.temperature)
    generated, _ = sample(prompt, tf.constant(args.seed))
    text_out = args.prompt + "".join(chars[i] for i in generated.numpy()[0])
    tools.print_sample(text_out, args.quick)
    tools.write_table("sample", text_out, step=args.steps)

    # Removing merged adapters takes them out of the weights again: the
    # pretrained model; restoring the saved adapters adapts it again.
    snt.lora.remove(model)
    removed_loss = ct.evaluate(model, new_valid)
    snt.lora.add(model, rank=args.rank, alpha=args.alpha, pattern=args.pattern)
    snt.lora.restore(model, adapters_path)
    restored_loss = ct.evaluate(model, new_valid)
    print(
        f"snt.lora.remove: held-out loss {removed_loss:.3f} "
        f"(pretrained: {pretrained_loss:.3f})"
    )
    print(
        f"snt.lora.restore: held-out loss {restored_loss:.3f} "
        f"(fine-tuned: {tuned_loss:.3f})"
    )
    writer.flush()

    os.makedirs(args.out, exist_ok=True)
    plots.save_curve(
        os.path.join(args.out, "loss.png"),
        losses,
        "cross-entropy (nats/char)",
        "fine-tuning loss (LoRA) on the new text",
        points={
            f"held-out, before: {pretrained_loss:.3f}": (0, pretrained_loss),
            f"held-out, after: {tuned_loss:.3f}": (args.steps, tuned_loss),
        },
    )
    with open(os.path.join(args.out, "sample.txt"), "w", encoding="utf-8") as f:
        f.write(text_out)
    print(
        f"wrote {args.out}/loss.png and {args.out}/sample.txt; "
        f"TensorBoard logs in {args.logdir}"
    )


if __name__ == "__main__":
    main(ARGS)
