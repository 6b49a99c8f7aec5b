"""Deep models (issue 24): a 48-block Transformer stacked or unrolled, and remat.

Every row is our library in two configurations, so every implementation
column is "ours"; the targets compare rows (like `decode_tokens` against
`decode_tokens_no_cache`). The model is `transformer_step`'s causal pre-norm
Transformer (width 256, 4 heads, GELU MLP 1024, layer norms) with 48 blocks
(37.8 M parameters), trained by the same step: mean squared error against a
random target, `snt.optimizers.AdamW` (learning rate 1e-3, weight decay
0.01), in one `tf.function`.

- `transformer48_first_result`: construct the model and the optimizer, call
  a fresh `tf.function` of the train step on `[8, 128, 256]` (trace, create
  the variables and the optimizer's slots, execute) and fetch the loss:
  `snt.nets.Transformer(..., stacked=True)` (the blocks' parameters stacked
  in an `snt.LayerStack`, run in a `tf.while_loop` traced once) against
  `_unrolled`: 48 `snt.nets.TransformerBlock`s, each traced.
- `transformer48_step`: executing that compiled step, stacked against
  `_unrolled`, and both again with `jit_compile=True` (`_xla`); `_w64`: the
  same model at width 64 (4 heads, MLP 256) on `[8, 64, 64]`, where each
  block's ops are small and the loop's own cost per layer shows most.
- `remat_memory`: peak RSS increase of a fresh process that builds the
  stacked model with `remat=True` (`snt.remat` around each block's call in
  the loop body: one checkpoint per layer) and runs 2 train steps on
  `[4, 512, 256]` (the first traces, and creates the optimizer's slots),
  against the same without remat (`_plain`); at this length the activations
  kept for the backward pass (attention probabilities `[4, 4, 512, 512]` and
  MLP activations `[2048, 1024]` per block) are most of the memory. One
  process each (like `memory`'s rows). `remat_step` / `remat_step_plain`:
  the compiled step of both models, timed in this process, interleaved.
  `remat_memory_unrolled` (only with `--only`) measures the unrolled model
  the same way: there the recomputation and the forward pass are in one
  graph, which is what TensorFlow's graph optimiser could merge back.

These rows use `stacked=`/`remat=` and `snt.nets.Transformer`, which the
original Sonnet 2.0.2 does not have: they do not run with `--vs`.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from bench.harness import (
    Builder,
    Clock,
    Sampler,
    Samples,
    fetch,
    interleave,
    self_timed,
    timed,
)
from bench.workloads import OURS, ProcessRunner, Row, Target, Workload, get
from bench.workloads.transformer import LEARNING_RATE, WEIGHT_DECAY, Config

DEEP = Config(layers=48, width=256, heads=4, time=128, batch=8)
DEEP_QUICK = Config(layers=3, width=32, heads=4, time=16, batch=2)
# Small widths: per-layer overheads of the loop weigh most.
DEEP_W64 = Config(layers=48, width=64, heads=4, time=64, batch=8)
DEEP_W64_QUICK = Config(layers=3, width=16, heads=4, time=16, batch=2)
# Long sequences for the remat rows: activations dominate the memory.
REMAT = Config(layers=48, width=256, heads=4, time=512, batch=4)
REMAT_QUICK = Config(layers=3, width=32, heads=4, time=64, batch=2)


def _model(config: Config, stacked: bool, remat: bool = False) -> Any:
    import sonnet as snt

    return snt.nets.Transformer(
        num_layers=config.layers,
        num_heads=config.heads,
        model_size=config.width,
        causal=True,
        stacked=stacked,
        remat=remat,
    )


def _train_step(model: Any) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """The plain Python train step (variables and slots made by its first call)."""
    import sonnet as snt

    optimizer = snt.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY)

    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        params = model.trainable_variables
        optimizer.apply(tape.gradient(loss, params), params)
        return loss

    return step


def _data(config: Config) -> tuple[tf.Tensor, tf.Tensor]:
    shape = [config.batch, config.time, config.width]
    return tf.random.normal(shape, seed=0), tf.random.normal(shape, seed=1)


def build_first_result(impl: str, quick: bool) -> dict[str, Sampler]:
    config = DEEP_QUICK if quick else DEEP
    x, y = _data(config)

    def first_result(stacked: bool) -> Sampler:
        def sample() -> tuple[float, float]:
            gc.collect()
            with Clock() as clock:
                fetch(tf.function(_train_step(_model(config, stacked)))(x, y))
            return clock.both

        return self_timed(sample)

    return {
        "transformer48_first_result": first_result(True),
        "transformer48_first_result_unrolled": first_result(False),
    }


def build_step(impl: str, quick: bool) -> dict[str, Sampler]:
    """The models are built (and the steps traced) by the first samples."""
    wide = DEEP_QUICK if quick else DEEP
    narrow = DEEP_W64_QUICK if quick else DEEP_W64
    steps: dict[tuple[Config, bool], Callable[..., Any]] = {}

    def step_of(config: Config, stacked: bool) -> Callable[..., Any]:
        # One model and optimizer per configuration and layout, shared by
        # its two functions.
        if (config, stacked) not in steps:
            steps[config, stacked] = _train_step(_model(config, stacked))
        return steps[config, stacked]

    def compiled(config: Config, stacked: bool, xla: bool = False) -> Sampler:
        x, y = _data(config)
        function: list[Callable[..., Any]] = []

        def run() -> Any:
            if not function:
                step = step_of(config, stacked)
                function.append(tf.function(step, jit_compile=xla))
            return function[0](x, y)

        return timed(run)

    return {
        "transformer48_step": compiled(wide, True),
        "transformer48_step_unrolled": compiled(wide, False),
        "transformer48_step_xla": compiled(wide, True, xla=True),
        "transformer48_step_xla_unrolled": compiled(wide, False, xla=True),
        "transformer48_step_w64": compiled(narrow, True),
        "transformer48_step_w64_unrolled": compiled(narrow, False),
    }


# Remat: peak memory in fresh processes (`bench/_worker.py --memory`), step
# times in this one, interleaved.


def _remat_sampler(config: Config, stacked: bool, remat: bool) -> Sampler:
    """Times the compiled step; its first sample builds the model and runs
    the first (tracing) step before the timed ones."""
    x, y = _data(config)
    step: list[Callable[..., Any]] = []

    def sample(number: int) -> tuple[float, float]:
        if not step:
            step.append(tf.function(_train_step(_model(config, stacked, remat))))
            fetch(step[0](x, y))
        return timed(lambda: step[0](x, y))(number)

    return sample


def _remat_builder(stacked: bool, rows: tuple[str, str]) -> Builder:
    def build(impl: str, quick: bool) -> dict[str, Sampler]:
        config = REMAT_QUICK if quick else REMAT
        with_remat, plain = rows
        return {
            with_remat: _remat_sampler(config, stacked, True),
            plain: _remat_sampler(config, stacked, False),
        }

    return build


def _remat_runner(
    workload: str, memory_rows: tuple[str, str], step_rows: tuple[str, str]
) -> ProcessRunner:
    """Memory rows: one fresh process per configuration that builds the model
    and runs 2 steps (the first traces; the slots exist after it), measured
    like `memory`'s rows. Step rows: `repeats` interleaved samples of both
    configurations in this process."""

    def run(
        impls: tuple[str, ...],
        other_python: str | None,
        quick: bool,
        device: str,
        repeats: int,
    ) -> dict[tuple[str, str], Samples]:
        from bench.workloads.process import memory_sample, our_root

        results: dict[tuple[str, str], Samples] = {}
        for memory_row, step_row in zip(memory_rows, step_rows, strict=True):
            samples = results[memory_row, OURS] = Samples()
            args = (workload, step_row, "sonnet", 1, quick, device, our_root())
            memory_sample(samples, sys.executable, *args, timeout=1800)
        build = get(workload).build
        assert build is not None
        samplers = {(row, OURS): s for row, s in build("sonnet", quick).items()}
        warmup = 0 if quick else 1
        results.update(interleave(samplers, repeats, 1, warmup=warmup))
        return results

    return run


_DEEP = "48-block causal Transformer (width 256, 4 heads)"

WORKLOADS = {
    "transformer48_first_result": Workload(
        name="transformer48_first_result",
        rows=(
            Row(
                "transformer48_first_result",
                "s",
                f"{_DEEP}, stacked=True: construct + first call of a tf.function "
                "AdamW train step on [8, 128, 256] (trace, create the variables, "
                "execute) + fetch",
            ),
            Row(
                "transformer48_first_result_unrolled",
                "s",
                "the same with the blocks unrolled (stacked=False)",
            ),
        ),
        impls=(OURS,),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_first_result,
        targets=(
            Target(
                "transformer48_first_result",
                OURS,
                0.2,
                other_row="transformer48_first_result_unrolled",
            ),
        ),
        original=False,
    ),
    "transformer48_step": Workload(
        name="transformer48_step",
        rows=(
            Row(
                "transformer48_step",
                "s",
                f"{_DEEP}, stacked=True: compiled AdamW train step on [8, 128, 256]",
            ),
            Row("transformer48_step_unrolled", "s", "the same, blocks unrolled"),
            Row(
                "transformer48_step_xla",
                "s",
                "stacked, the step compiled with XLA (jit_compile=True)",
            ),
            Row(
                "transformer48_step_xla_unrolled",
                "s",
                "unrolled, the step compiled with XLA (jit_compile=True)",
            ),
            Row(
                "transformer48_step_w64",
                "s",
                "48 blocks of width 64 (4 heads), stacked=True: compiled AdamW "
                "train step on [8, 64, 64]",
            ),
            Row("transformer48_step_w64_unrolled", "s", "the same, blocks unrolled"),
        ),
        impls=(OURS,),
        repeats=5,
        number=1,
        quick_repeats=2,
        quick_number=1,
        build=build_step,
        targets=(
            Target(
                "transformer48_step", OURS, 1.1, other_row="transformer48_step_unrolled"
            ),
            Target(
                "transformer48_step_xla",
                OURS,
                1.1,
                other_row="transformer48_step_xla_unrolled",
            ),
            Target(
                "transformer48_step_w64",
                OURS,
                1.1,
                other_row="transformer48_step_w64_unrolled",
            ),
        ),
        original=False,
    ),
    "remat_memory": Workload(
        name="remat_memory",
        rows=(
            Row(
                "remat_memory",
                "MiB",
                f"peak RSS increase of a fresh process: build the {_DEEP} "
                "(stacked) with remat=True + 2 AdamW train steps on [4, 512, 256]",
            ),
            Row("remat_memory_plain", "MiB", "the same without remat"),
            Row(
                "remat_step",
                "s",
                "that compiled train step with remat (in this process, "
                "interleaved with remat_step_plain)",
            ),
            Row("remat_step_plain", "s", "the same without remat"),
        ),
        impls=(OURS,),
        repeats=5,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=_remat_builder(True, ("remat_step", "remat_step_plain")),
        run=_remat_runner(
            "remat_memory",
            ("remat_memory", "remat_memory_plain"),
            ("remat_step", "remat_step_plain"),
        ),
        targets=(
            Target("remat_memory", OURS, 0.6, other_row="remat_memory_plain"),
            Target("remat_step", OURS, 1.4, other_row="remat_step_plain"),
        ),
        original=False,
    ),
    "remat_memory_unrolled": Workload(
        name="remat_memory_unrolled",
        rows=(
            Row(
                "remat_memory_unrolled",
                "MiB",
                "as remat_memory with the blocks unrolled (stacked=False)",
            ),
            Row("remat_memory_unrolled_plain", "MiB", "the same without remat"),
            Row("remat_step_unrolled", "s", "their train step, with remat"),
            Row("remat_step_unrolled_plain", "s", "the same without remat"),
        ),
        impls=(OURS,),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=_remat_builder(
            False, ("remat_step_unrolled", "remat_step_unrolled_plain")
        ),
        run=_remat_runner(
            "remat_memory_unrolled",
            ("remat_memory_unrolled", "remat_memory_unrolled_plain"),
            ("remat_step_unrolled", "remat_step_unrolled_plain"),
        ),
        targets=(
            Target(
                "remat_memory_unrolled",
                OURS,
                0.6,
                other_row="remat_memory_unrolled_plain",
            ),
            Target(
                "remat_step_unrolled", OURS, 1.4, other_row="remat_step_unrolled_plain"
            ),
        ),
        original=False,
        default=False,
    ),
}
