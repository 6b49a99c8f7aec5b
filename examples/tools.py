"""What makes the examples behave like command-line tools (no TensorFlow import).

- `import_tensorflow()` imports TensorFlow without its start-up lines on
  stderr; call it after parsing the command line, so that `--help` and
  argument errors answer at once.
- `progress(steps)` is a tqdm bar on a terminal and a line every tenth of the
  run otherwise (in logs and CI, where a bar's redraws are noise).
- `tensorboard(logdir)` opens a `tf.summary` writer, and `write_table` logs a
  text table (such as `snt.summary`'s) that TensorBoard shows in monospace.
- `DATA_HELP` is the one description of `--data` that every example uses.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

DATA_HELP = (
    "data set to train on instead of the bundled 8x8 digits: MNIST as Keras "
    "stores it (.npz), or CIFAR-10 (the python tarball, its extracted folder, "
    "or an .npz with x_train, y_train, x_test, y_test)"
)


def add_common_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """`--data`, `--steps`, `--quick`, `--seed`, `--out` and `--logdir`."""
    parser.add_argument("--data", metavar="PATH", help=DATA_HELP)
    parser.add_argument("--steps", type=int, help="training steps")
    add_run_arguments(parser, name, "where plots and models go")


def add_run_arguments(parser: argparse.ArgumentParser, name: str, out: str) -> None:
    """`--quick`, `--seed`, `--out` (described by `out`) and `--logdir`."""
    parser.add_argument(
        "--quick", action="store_true", help="a short run, to check that it works"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        default=os.path.join("examples", "out", name),
        help=f"{out} (default: %(default)s)",
    )
    parser.add_argument(
        "--logdir",
        help="where TensorBoard logs go (default: OUT/logs); "
        "view them with `tensorboard --logdir OUT/logs`",
    )


def add_char_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The character language model's size and sampling arguments, shared by
    `char_transformer.py` and `char_transformer_lora.py` (whose models must
    match); `finish_char_model_arguments` fills in their defaults."""
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--context", type=int, help="characters seen at once")
    parser.add_argument("--layers", type=int, help="Transformer blocks")
    parser.add_argument("--width", type=int, help="model size")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.1)


def add_sample_arguments(parser: argparse.ArgumentParser, length_help: str) -> None:
    """`--sample-length`, `--temperature` and `--prompt` of the char models."""
    parser.add_argument("--sample-length", type=int, help=length_help)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--prompt", default="def ")


def finish_char_model_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> None:
    """The char model's size defaults (smaller with `--quick`) and checks."""
    defaults = {
        "context": 32 if args.quick else 128,
        "layers": 1 if args.quick else 3,
        "width": 32 if args.quick else 128,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.width % args.heads:
        parser.error(f"--width ({args.width}) must be a multiple of --heads")
    if not args.prompt:
        parser.error("--prompt must not be empty")
    if args.sample_length is None:
        args.sample_length = max(1, args.context - len(args.prompt))


# `--precision` choices -> the `snt.precision` policy (None: plain float32).
PRECISION_POLICIES = {"float32": None, "bf16": "mixed_bfloat16"}


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    """`--precision {float32,bf16}`: the dtype the model computes in."""
    parser.add_argument(
        "--precision",
        choices=sorted(PRECISION_POLICIES),
        default="float32",
        help="compute dtype: bf16 computes in bfloat16 with float32 variables "
        "(`snt.precision`; the loss stays float32) (default: %(default)s)",
    )


def finish_arguments(args: argparse.Namespace, steps: int, quick_steps: int) -> None:
    """Fills in the defaults that depend on other arguments."""
    if args.steps is None:
        args.steps = quick_steps if args.quick else steps
    if args.logdir is None:
        args.logdir = os.path.join(args.out, "logs")


def import_tensorflow() -> ModuleType:
    """Imports TensorFlow with its start-up lines kept off stderr.

    `TF_CPP_MIN_LOG_LEVEL=2` hides the C++ runtime's INFO and WARNING lines,
    but a few lines are written before that setting is read (the CUDA probe
    on a machine without a GPU, absl's "before InitializeLog" notice): those
    go to a temporary file while TensorFlow loads and finds its devices, and
    are shown only if that fails. Set `TF_CPP_MIN_LOG_LEVEL=0` to see them.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0":
        import tensorflow as tf

        return tf
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()  # The CUDA probe logs here.
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return tf


class progress:
    """`range(steps)` with progress: a tqdm bar on a terminal, else lines.

    Use as `with progress(n) as bar: for step in bar: ... bar.set_postfix(...)`.
    Without a terminal (output piped to a file or a CI log) it prints one
    line per tenth of the run to stderr, e.g.
    `training: 150/300 steps, 41.2 steps/s, loss=0.153`. `quiet` shows
    nothing (e.g. on all but one of several worker processes).
    """

    def __init__(self, steps: int, desc: str = "training", quiet: bool = False):
        self.steps = steps
        self.desc = desc
        self.quiet = quiet
        self.postfix: dict[str, Any] = {}
        self._bar: Any = None
        if sys.stderr.isatty() and not quiet:
            import tqdm

            self._bar = tqdm.trange(steps, desc=desc, mininterval=0.5)

    def __enter__(self) -> progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()

    def __iter__(self) -> Iterator[int]:
        if self._bar is not None:
            yield from self._bar
            return
        every = max(1, self.steps // 10)
        start = time.perf_counter()
        for step in range(self.steps):
            yield step
            done = step + 1
            if not self.quiet and (done % every == 0 or done == self.steps):
                rate = done / max(time.perf_counter() - start, 1e-9)
                values = "".join(f", {k}={v}" for k, v in self.postfix.items())
                print(
                    f"{self.desc}: {done}/{self.steps} steps, {rate:.1f} steps/s"
                    f"{values}",
                    file=sys.stderr,
                    flush=True,
                )

    def set_postfix(self, **values: Any) -> None:
        """Values shown after the count (as `tqdm`'s `set_postfix`)."""
        self.postfix = values
        if self._bar is not None:
            self._bar.set_postfix(**values)


def tensorboard(logdir: str) -> Any:
    """A `tf.summary` writer for `logdir` (made the default writer)."""
    import tensorflow as tf

    writer = tf.summary.create_file_writer(logdir)
    writer.set_as_default()
    return writer


def write_table(name: str, table: str, step: int = 0) -> None:
    """Logs `table` as TensorBoard text, indented so that the Markdown
    renderer shows it as preformatted (monospace) text."""
    import tensorflow as tf

    text = "\n".join("    " + line for line in table.splitlines())
    tf.summary.text(name, text, step=step)
