"""Training-loop toolkit workloads: gradient accumulation, Muon, weight averaging.

`accumulate_step`: `mlp_adam_step`'s MLP (784-1024-1024-10, Adam 1e-3,
softmax cross-entropy) trained on 256 examples per step. Ours: one
`tf.function` micro-step (`snt.optimizers.Accumulator(Adam, 4)`) called on
4 micro-batches of 64, the last of which applies (one sample is the 4
calls); against `accumulate_step_full`: one step on the batch of 256. Both
rows are per 256 examples, so their ratio is the time per example.
`--quick`: `mlp_adam_step`'s quick MLP, micro-batches of 8.

`muon_step`: `transformer_step`'s causal pre-norm Transformer (4 blocks of
width 256, batch 16 x 128) trained by `snt.optimizers.Muon` (learning rate
0.02, `adjust_lr="original"`) on the 2-D weights, with AdamW (1e-3, weight
decay 0.01) on the biases and norms (`snt.optimizers.muon_route`), against
`muon_step_adamw`: the same step with AdamW on everything
(`transformer_step`'s ours). `muon_newton_schulz`: the 5 Newton-Schulz
iterations alone on matrices of every Muon weight's shape, one
`tf.function`: its share of `muon_step` is `muon_newton_schulz /
muon_step`.

`ema_update`: `mlp_adam_step`'s step followed, in the same `tf.function`,
by `snt.AveragedWeights(mlp, decay=0.999).update()`, against
`ema_update_plain`: the step alone. The target bounds the averaging's
overhead per step at 5%.

These workloads use APIs the original Sonnet 2.0.2 does not have: they do
not run with `--vs`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench.harness import Sampler, timed
from bench.workloads import OURS, Row, Target, Workload, dense
from bench.workloads.transformer import (
    FULL,
    LEARNING_RATE,
    QUICK,
    WEIGHT_DECAY,
    _snt_transformer,
)

MICRO_BATCHES = 4


def _mlp_step(model: Any, apply: Any) -> Any:
    params = list(model.trainable_variables)

    @tf.function
    def step(x: tf.Tensor, y: tf.Tensor) -> Any:
        with tf.GradientTape() as tape:
            loss = dense._xent(model(x), y)  # noqa: SLF001
        return apply(tape.gradient(loss, params), params)

    return step


def build_accumulate_step(impl: str, quick: bool) -> dict[str, Sampler]:
    import sonnet as snt

    del impl
    sizes, batch = dense.adam_sizes(quick)
    x, y = dense._data(batch, sizes[0], sizes[-1])  # noqa: SLF001
    xs, ys = tf.split(x, MICRO_BATCHES), tf.split(y, MICRO_BATCHES)
    full_model, _ = dense._mlp("sonnet", sizes)  # noqa: SLF001
    micro_model, _ = dense._mlp("sonnet", sizes)  # noqa: SLF001
    full = _mlp_step(full_model, snt.optimizers.Adam(1e-3).apply)
    accumulator = snt.optimizers.Accumulator(snt.optimizers.Adam(1e-3), MICRO_BATCHES)
    micro = _mlp_step(micro_model, accumulator.apply)

    def accumulated() -> Any:
        for xi, yi in zip(xs, ys, strict=True):
            applied = micro(xi, yi)
        return applied

    return {
        "accumulate_step": timed(accumulated),
        "accumulate_step_full": timed(lambda: full(x, y)),
    }


def build_muon_step(impl: str, quick: bool) -> dict[str, Sampler]:
    import sonnet as snt
    from sonnet._src.optimizers import muon

    del impl
    config = QUICK if quick else FULL
    shape = [config.batch, config.time, config.width]
    x, y = tf.random.normal(shape, seed=0), tf.random.normal(shape, seed=1)

    def step_of(make_optimizer: Any) -> tuple[Any, Any]:
        model = _snt_transformer(config)
        model(x[:1])
        params = list(model.trainable_variables)
        optimizer = make_optimizer(model)

        @tf.function
        def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            optimizer.apply(tape.gradient(loss, params), params)
            return loss

        return step, model

    def adamw(model: Any = None) -> Any:
        del model
        return snt.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY)

    def muon_optimizer(model: Any) -> Any:
        return snt.optimizers.Muon(
            0.02, fallback=adamw(), route=snt.optimizers.muon_route(model)
        )

    muon_step, model = step_of(muon_optimizer)
    adamw_step, _ = step_of(adamw)
    route = snt.optimizers.muon_route(model)
    matrices = [
        tf.random.normal(v.shape, seed=i)
        for i, v in enumerate(model.trainable_variables)
        if route(v)
    ]

    @tf.function
    def newton_schulz() -> list[tf.Tensor]:
        return [muon.newton_schulz(m) for m in matrices]

    return {
        "muon_step": timed(lambda: muon_step(x, y)),
        "muon_step_adamw": timed(lambda: adamw_step(x, y)),
        "muon_newton_schulz": timed(newton_schulz),
    }


def build_ema_update(impl: str, quick: bool) -> dict[str, Sampler]:
    import sonnet as snt

    del impl
    sizes, batch = dense.adam_sizes(quick)
    x, y = dense._data(batch, sizes[0], sizes[-1])  # noqa: SLF001
    samplers = {}
    for row, average in (("ema_update", True), ("ema_update_plain", False)):
        model, _ = dense._mlp("sonnet", sizes)  # noqa: SLF001
        optimizer = snt.optimizers.Adam(1e-3)
        averages = snt.AveragedWeights(model, decay=0.999) if average else None
        params = list(model.trainable_variables)

        @tf.function
        def step(
            x: tf.Tensor,
            y: tf.Tensor,
            model: Any = model,
            optimizer: Any = optimizer,
            averages: Any = averages,
            params: Any = params,
        ) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = dense._xent(model(x), y)  # noqa: SLF001
            optimizer.apply(tape.gradient(loss, params), params)
            if averages is not None:
                averages.update()
            return loss

        samplers[row] = timed(lambda step=step: step(x, y))
    return samplers


_MLP = "MLP 784-1024-1024-10 Adam step"
_MODEL = "causal Transformer (4 blocks, width 256)"

WORKLOADS = {
    "accumulate_step": Workload(
        name="accumulate_step",
        rows=(
            Row(
                "accumulate_step",
                "ms",
                f"{_MLP} over 256 examples as {MICRO_BATCHES} micro-batches of 64 "
                "(snt.optimizers.Accumulator; 4 tf.function calls)",
            ),
            Row("accumulate_step_full", "ms", "the same step on one batch of 256"),
        ),
        impls=(OURS,),
        repeats=9,
        number=3,
        quick_repeats=2,
        quick_number=1,
        build=build_accumulate_step,
        targets=(
            Target("accumulate_step", OURS, 1.05, other_row="accumulate_step_full"),
        ),
        original=False,
    ),
    "muon_step": Workload(
        name="muon_step",
        rows=(
            Row(
                "muon_step",
                "ms",
                f"tf.function {_MODEL} train step, batch 16 x 128: Muon on the "
                "2-D weights, AdamW on biases and norms (muon_route)",
            ),
            Row("muon_step_adamw", "ms", "the same step, AdamW on everything"),
            Row(
                "muon_newton_schulz",
                "ms",
                "5 Newton-Schulz iterations on every Muon weight's shape, alone",
            ),
        ),
        impls=(OURS,),
        repeats=7,
        number=2,
        quick_repeats=2,
        quick_number=1,
        build=build_muon_step,
        original=False,
    ),
    "ema_update": Workload(
        name="ema_update",
        rows=(
            Row(
                "ema_update",
                "ms",
                f"{_MLP}, batch 256, then snt.AveragedWeights.update() (EMA), "
                "one tf.function",
            ),
            Row("ema_update_plain", "ms", "the step alone"),
        ),
        impls=(OURS,),
        repeats=9,
        number=5,
        quick_repeats=2,
        quick_number=1,
        build=build_ema_update,
        targets=(Target("ema_update", OURS, 1.05, other_row="ema_update_plain"),),
        original=False,
    ),
}
