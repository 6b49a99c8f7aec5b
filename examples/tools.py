"""What makes the examples behave like command-line tools (no TensorFlow import).

- `parser(doc)` is an `argparse` parser whose `--help` shows every option's
  default; `add_common_arguments` and friends add the options the examples
  share, and `finish_arguments` fills in the defaults that depend on others.
- `import_tensorflow()` imports TensorFlow without its start-up lines on
  stderr; call it after parsing the command line, so that `--help` and
  argument errors answer at once.
- `progress(steps)` is a tqdm bar on a terminal and a line every tenth of the
  run otherwise (in logs and CI, where a bar's redraws are noise); each line
  shows the mean of the values `record`ed since the line before and the
  recent speed.
- `tensorboard(logdir)` opens a `tf.summary` writer, and `show_summary` prints
  an `snt.summary` table fitted to the output's width and logs the full
  table as TensorBoard text, which shows it in monospace.
- `wrap(text)` fits a long printed line to the same width as the tables.
- `DATA_HELP` is the one description of `--data` that every example uses.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

DATA_HELP = (
    "data set to train on instead of the bundled 8x8 digits: MNIST as Keras "
    "stores it (.npz), or CIFAR-10 (the python tarball, its extracted folder, "
    "or an .npz with x_train, y_train, x_test, y_test)"
)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds `(default: ...)` to options whose help does not state it, and
    leaves it out where there is none (flags, values set after parsing)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "default" in text or default is None or default is False:
            return text
        if default == argparse.SUPPRESS:
            return text
        return super()._get_help_string(action)


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser described by the first line of `doc` (the script's
    docstring), whose `--help` shows each option's default."""
    return argparse.ArgumentParser(
        description=(doc or "").splitlines()[0], formatter_class=_HelpFormatter
    )


def add_common_arguments(
    parser: argparse.ArgumentParser, name: str, steps: int, quick_steps: int
) -> None:
    """`--data`, `--steps`, `--quick`, `--seed`, `--out`, `--logdir` and
    `--run-name`; `steps` and `quick_steps` are `--steps`'s defaults."""
    parser.add_argument("--data", metavar="PATH", help=DATA_HELP)
    add_steps_argument(parser, "training steps", steps, quick_steps)
    add_run_arguments(parser, name, "where plots and models go")


def add_steps_argument(
    parser: argparse.ArgumentParser, what: str, steps: int, quick_steps: int
) -> None:
    """`--steps`, whose default (`steps`, or `quick_steps` with `--quick`)
    `finish_arguments` fills in."""
    parser.add_argument(
        "--steps",
        type=int,
        help=f"{what} (default: {steps}; with --quick: {quick_steps})",
    )
    parser.set_defaults(steps_defaults=(steps, quick_steps))


def add_run_arguments(parser: argparse.ArgumentParser, name: str, out: str) -> None:
    """`--quick`, `--seed`, `--out` (described by `out`), `--logdir` and
    `--run-name`."""
    parser.add_argument(
        "--quick", action="store_true", help="a short run, to check that it works"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the initial values and data"
    )
    parser.add_argument(
        "--out", default=os.path.join("examples", "out", name), help=out
    )
    parser.add_argument(
        "--logdir",
        help="where TensorBoard logs go, one subfolder per run (default: "
        "OUT/logs); view them with `tensorboard --logdir OUT/logs`",
    )
    parser.add_argument(
        "--run-name",
        help="this run's subfolder of --logdir (default: the time it started, "
        "e.g. 20250101-120000)",
    )


def add_char_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The character language model's size and sampling arguments, shared by
    `char_transformer.py` and `char_transformer_lora.py` (whose models must
    match); `finish_char_model_arguments` fills in their defaults."""
    parser.add_argument("--batch-size", type=int, default=16, help="windows per step")
    parser.add_argument(
        "--context",
        type=int,
        help="characters seen at once (default: 128; --quick: 32)",
    )
    parser.add_argument(
        "--layers", type=int, help="Transformer blocks (default: 3; --quick: 1)"
    )
    parser.add_argument(
        "--width", type=int, help="model size (default: 128; --quick: 32)"
    )
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument(
        "--dropout", type=float, default=0.1, help="residual dropout while training"
    )


def add_sample_arguments(parser: argparse.ArgumentParser, length_help: str) -> None:
    """`--sample-length`, `--temperature` and `--prompt` of the char models."""
    parser.add_argument("--sample-length", type=int, help=length_help)
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        help="sampling temperature (below 1: likelier characters)",
    )
    parser.add_argument("--prompt", default="def ", help="text the samples start with")


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
        "(`snt.precision`; the loss stays float32)",
    )


def finish_arguments(args: argparse.Namespace) -> None:
    """Fills in the defaults that depend on other arguments: `--steps`
    (with `--quick`), and the run's log folder `--logdir/--run-name`."""
    steps, quick_steps = args.__dict__.pop("steps_defaults")
    if args.steps is None:
        args.steps = quick_steps if args.quick else steps
    if args.logdir is None:
        args.logdir = os.path.join(args.out, "logs")
    args.logdir = run_logdir(args.logdir, args.run_name)


def run_logdir(logdir: str, run_name: str | None = None) -> str:
    """`logdir/run_name`, by default named by the time (to the second); a
    second run started within that second gets `-2`, and so on, so that
    TensorBoard never draws two runs as one curve."""
    if run_name:
        return os.path.join(logdir, run_name)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, count = os.path.join(logdir, stamp), 1
    while os.path.exists(path):
        count += 1
        path = os.path.join(logdir, f"{stamp}-{count}")
    return path


def output_width() -> int:
    """The terminal's width when printing to one, else 100 (as `snt.summary`)."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((100, 24)).columns
    return 100


def wrap(text: str) -> str:
    """`text` wrapped to `output_width()`, continuation lines indented."""
    return textwrap.fill(text, output_width(), subsequent_indent="  ")


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

    Use as `with progress(n) as bar: for step in bar: ... bar.record(loss=x)`.
    Without a terminal (output piped to a file or a CI log) it prints one
    line per tenth of the run to stderr, e.g.
    `training: 150/300 steps, 41.2 steps/s, loss=0.153`: the values are the
    means of those `record`ed since the line before, and the speed is that
    of the steps since then. The first line also gives the first step's
    time, which includes tracing the step function (and building the
    model), e.g. `first step 1.52 s`. `formats` gives a value's format
    (default `.3f`); `quiet` shows nothing (e.g. on all but one of several
    worker processes). On a terminal the bar shows the same means,
    refreshed twice a second.
    """

    def __init__(
        self,
        steps: int,
        desc: str = "training",
        quiet: bool = False,
        formats: dict[str, str] | None = None,
    ):
        self.steps = steps
        self.desc = desc
        self.quiet = quiet
        self.formats = formats or {}
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._shown = 0.0  # When the bar's values were last refreshed.
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
        steps = self._bar if self._bar is not None else range(self.steps)
        every = max(1, self.steps // 10)
        last_time = time.perf_counter()
        last_done = 0
        first = ""
        for step in steps:
            yield step
            done = step + 1
            now = time.perf_counter()
            if done == 1:  # Tracing and building: not the steady speed.
                first = f", first step {now - last_time:.2f} s"
                last_time, last_done = now, done
                if self._bar is not None:
                    self._bar.write(f"{self.desc}: {first[2:]} (tracing)")
            if self._bar is not None or self.quiet:
                continue
            if done % every == 0 or done == self.steps:
                rate = ""
                if done > last_done:
                    speed = (done - last_done) / max(now - last_time, 1e-9)
                    rate = f", {speed:.1f} steps/s"
                print(
                    f"{self.desc}: {done}/{self.steps} steps{rate}{first}"
                    f"{self._means()}",
                    file=sys.stderr,
                    flush=True,
                )
                first = ""
                last_time, last_done = now, done

    def record(self, **values: Any) -> None:
        """Adds one step's values (numbers or scalar tensors) to the means
        the next line (or the bar) shows."""
        for key, value in values.items():
            self._sums[key] = self._sums.get(key, 0.0) + float(value)
            self._counts[key] = self._counts.get(key, 0) + 1
        if self._bar is not None and time.perf_counter() - self._shown >= 0.5:
            self._shown = time.perf_counter()
            self._bar.set_postfix_str(self._means()[2:], refresh=False)

    def _means(self) -> str:
        """`, key=mean` for each value recorded since the last call."""
        text = "".join(
            f", {key}={total / self._counts[key]:{self.formats.get(key, '.3f')}}"
            for key, total in self._sums.items()
        )
        self._sums.clear()
        self._counts.clear()
        return text


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


def show_summary(name: str, summary: Any) -> None:
    """Prints an `snt.summary` result fitted to the output's width and logs
    the full table (a row per line, full paths) to TensorBoard as `name`."""
    print(summary)
    write_table(name, summary.format(width=0))


def print_sample(text: str, quick: bool) -> None:
    """Prints a sampled text between rules; after a `--quick` run, says that
    it is too short to give readable text."""
    print(f"sampled text:\n{'-' * 60}\n{text}\n{'-' * 60}")
    if quick:
        print(
            wrap(
                "(a --quick run trains for seconds: too little for readable "
                "text; a full run, without --quick, samples Python-like code)"
            )
        )
