"""Fine-tuning and inference workloads: LoRA train step, int8 inference.

`lora_step`: `transformer_step`'s causal pre-norm Transformer (4 blocks of
width 256, 4 heads, GELU MLPs of width 1024; `transformer.FULL`, or
`transformer.QUICK` with `--quick`), with rank-8 low-rank adapters on every
`snt.Linear` (`snt.lora.add(model, rank=8)`: the attention's query, key,
value and output projections and both MLP layers of every block), trained
by `transformer_step`'s step (mean squared error against a random target,
`snt.optimizers.AdamW` with learning rate 1e-3 and weight decay 0.01, one
`tf.function`) over `model.trainable_variables`: the adapters only. Against
`lora_step_full`: the same step of the same plain model training all of
its variables (full fine-tuning; that is `transformer_step`'s ours). The
adapters skip every weight gradient of the frozen model (the backward pass
still carries the activations' gradients through every layer) and AdamW
updates 4.7% of the parameters. `lora_params` (a value): the adapters'
parameters over the plain model's; the counts are printed to stderr.

`int8_inference`: a `tf.function` forward pass (inference) of that
Transformer on `[16, 128, 256]` after `snt.int8.quantize(model)` (int8
weights, per-output-channel float scales, multiplied back to float32 on
every call), against the same model in float32 (`_f32`: the values it was
quantized from), same inputs; and the same for `mlp_adam_step`'s MLP
(784-1024-1024-10, batch 256: `_mlp`). For information, no target: the
arithmetic stays float32, so int8 weights save memory, not compute.
`int8_time_ratio*` (values): int8 / float32 time, each repetition's two
samples divided, median of the quotients (like `utilisation`'s rows).
`int8_bytes*` (values): bytes of all the int8 model's variables over the
float32 model's (int8 weights, float scales, biases and norms).

These workloads use `snt.lora`, `snt.int8` and `snt.nets.Transformer`, which
the original Sonnet 2.0.2 does not have: they do not run with `--vs`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from bench.harness import Sampler, Samples, interleave, timed
from bench.workloads import OURS, Results, Row, Target, Workload, dense
from bench.workloads.deep import _train_step
from bench.workloads.transformer import FULL, QUICK, Config, _snt_transformer

RANK = 8


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _count(variables: Any) -> int:
    return sum(v.shape.num_elements() for v in variables)


def _bytes(variables: Any) -> int:
    return sum(v.shape.num_elements() * v.dtype.size for v in variables)


def _value(value: float) -> Sampler:
    """A sampler of a value (a row in a value unit), the same every repetition."""
    return lambda number: (value, value)


def parameter_counts(config: Config, rank: int) -> tuple[int, int]:
    """`(adapters, model)`: parameters of rank-`rank` adapters on every Linear
    of `snt.nets.Transformer` with `config`, and of the plain model.

    Per block: query, key, value and output projections `D x D`, the MLP `D x
    4D` and `4D x D` (each with a bias), two layer norms (scale and offset);
    a final layer norm. An adapter on an `n x m` weight has `rank (n + m)`.
    """
    d = config.width
    shapes = [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)]
    adapters = sum(rank * (n + m) for n, m in shapes)
    block = sum(n * m + m for n, m in shapes) + 2 * 2 * d
    return config.layers * adapters, config.layers * block + 2 * d


def _data(config: Config) -> tuple[tf.Tensor, tf.Tensor]:
    shape = [config.batch, config.time, config.width]
    return tf.random.normal(shape, seed=0), tf.random.normal(shape, seed=1)


def build_lora_step(impl: str, quick: bool) -> dict[str, Sampler]:
    import sonnet as snt

    config = QUICK if quick else FULL
    x, y = _data(config)
    full = _snt_transformer(config)
    full(x[:1])
    adapted = _snt_transformer(config)
    adapted(x[:1])
    snt.lora.add(adapted, rank=RANK)
    adapters = _count(adapted.trainable_variables)
    model = _count(full.trainable_variables)
    expected = parameter_counts(config, RANK)
    if (adapters, model) != expected:
        raise RuntimeError(
            f"lora_step: {adapters} adapter parameters of {model}; expected "
            f"{expected[0]} of {expected[1]} (an adapter on every Linear)"
        )
    _log(
        f"    lora_step: rank-{RANK} adapters {adapters:,} parameters "
        f"({len(adapted.trainable_variables)} variables), full model {model:,} "
        f"({len(full.trainable_variables)} variables): {adapters / model:.2%}"
    )
    lora_step = tf.function(_train_step(adapted))
    full_step = tf.function(_train_step(full))
    return {
        "lora_step": timed(lambda: lora_step(x, y)),
        "lora_step_full": timed(lambda: full_step(x, y)),
        "lora_params": _value(adapters / model),
    }


def _quantized_pair(
    make: Callable[[], Any], x: tf.Tensor
) -> tuple[Callable[[tf.Tensor], Any], Callable[[tf.Tensor], Any], float]:
    """A float32 model, an int8 copy of it (`snt.int8.quantize`), and the
    ratio of their variables' bytes (int8 / float32)."""
    import sonnet as snt

    f32, int8 = make(), make()
    f32(x)
    int8(x)
    for source, target in zip(f32.variables, int8.variables, strict=True):
        target.assign(source)
    snt.int8.quantize(int8)
    ratio = _bytes(int8.variables) / _bytes(f32.variables)
    return f32, int8, ratio


def _forward(model: Any) -> Callable[[tf.Tensor], Any]:
    return tf.function(lambda x: model(x))


# Rows of `int8_inference` by model: (int8 time, float32 time, time ratio,
# bytes ratio).
_INT8_ROWS = {
    "transformer": (
        "int8_inference",
        "int8_inference_f32",
        "int8_time_ratio",
        "int8_bytes",
    ),
    "mlp": (
        "int8_inference_mlp",
        "int8_inference_mlp_f32",
        "int8_time_ratio_mlp",
        "int8_bytes_mlp",
    ),
}


def run_int8_inference(
    impls: tuple[str, ...],
    other_python: str | None,
    quick: bool,
    device: str,
    repeats: int,
) -> Results:
    """Float32 and int8 forward passes interleaved; their per-repetition
    time ratios and the byte ratios as value rows."""
    del impls, other_python, device  # Ours only.
    import sonnet as snt

    config = QUICK if quick else FULL
    x, _ = _data(config)
    sizes, batch = dense.adam_sizes(quick)
    mlp_x = tf.random.normal([batch, sizes[0]], seed=0)
    models = {
        "transformer": (lambda: _snt_transformer(config), x),
        "mlp": (lambda: snt.nets.MLP(sizes[1:]), mlp_x),
    }
    samplers: dict[tuple[str, str], Sampler] = {}
    bytes_ratio: dict[str, float] = {}
    for name, (make, inputs) in models.items():
        int8_row, f32_row, _, _ = _INT8_ROWS[name]
        f32, int8, bytes_ratio[name] = _quantized_pair(make, inputs)
        error = tf.reduce_max(tf.abs(int8(inputs) - f32(inputs)))
        scale = tf.reduce_max(tf.abs(f32(inputs)))
        _log(
            f"    int8_inference ({name}): variables {bytes_ratio[name]:.4f} x "
            f"float32's bytes; outputs differ by at most {float(error):.3g} "
            f"(largest output {float(scale):.3g})"
        )
        int8_forward, f32_forward = _forward(int8), _forward(f32)
        samplers[int8_row, OURS] = timed(lambda f=int8_forward, i=inputs: f(i))
        samplers[f32_row, OURS] = timed(lambda f=f32_forward, i=inputs: f(i))
    numbers = {key: 1 if quick else _NUMBERS[key[0]] for key in samplers}
    times = interleave(samplers, repeats, numbers, warmup=0 if quick else 1)
    results: Results = dict(times)
    for name, (int8_row, f32_row, time_row, bytes_row) in _INT8_ROWS.items():
        int8_samples, f32_samples = times[int8_row, OURS], times[f32_row, OURS]
        results[time_row, OURS] = Samples(
            wall=[
                a / b for a, b in zip(int8_samples.wall, f32_samples.wall, strict=True)
            ],
            cpu=[a / b for a, b in zip(int8_samples.cpu, f32_samples.cpu, strict=True)],
        )
        value = bytes_ratio[name]
        results[bytes_row, OURS] = Samples(wall=[value], cpu=[value])
    return results


# Runs per sample (CPU): about 0.3-0.5 s each on this project's 2-core CPU.
_NUMBERS = {
    "int8_inference": 5,
    "int8_inference_f32": 5,
    "int8_inference_mlp": 50,
    "int8_inference_mlp_f32": 50,
}

_MODEL = "causal Transformer (4 x width 256, 4 heads)"

WORKLOADS = {
    "lora_step": Workload(
        name="lora_step",
        rows=(
            Row(
                "lora_step",
                "ms",
                f"tf.function {_MODEL} AdamW train step, batch 16 x 128 positions, "
                f"rank-{RANK} adapters on every Linear (snt.lora.add): the "
                "adapters' variables only",
            ),
            Row(
                "lora_step_full",
                "ms",
                "the same step of the plain model, all variables (full fine-tuning)",
            ),
            Row(
                "lora_params",
                "fraction",
                "adapter parameters / the plain model's (counts on stderr)",
            ),
        ),
        impls=(OURS,),
        repeats=7,
        number=2,
        quick_repeats=2,
        quick_number=1,
        build=build_lora_step,
        targets=(Target("lora_step", OURS, 0.8, other_row="lora_step_full"),),
        original=False,
    ),
    "int8_inference": Workload(
        name="int8_inference",
        rows=(
            Row(
                "int8_inference",
                "ms",
                f"tf.function forward pass of the {_MODEL} on [16, 128, 256] "
                "after snt.int8.quantize",
            ),
            Row("int8_inference_f32", "ms", "the same model in float32"),
            Row(
                "int8_inference_mlp",
                "ms",
                "tf.function forward pass of MLP 784-1024-1024-10, batch 256, "
                "after snt.int8.quantize",
            ),
            Row("int8_inference_mlp_f32", "ms", "the same MLP in float32"),
            Row(
                "int8_time_ratio",
                "fraction",
                "int8_inference / int8_inference_f32, per repetition (median)",
            ),
            Row(
                "int8_time_ratio_mlp",
                "fraction",
                "int8_inference_mlp / int8_inference_mlp_f32, per repetition",
            ),
            Row(
                "int8_bytes",
                "fraction",
                "bytes of the int8 Transformer's variables / the float32 one's",
            ),
            Row(
                "int8_bytes_mlp",
                "fraction",
                "bytes of the int8 MLP's variables / the float32 one's",
            ),
        ),
        impls=(OURS,),
        repeats=9,
        number=1,
        quick_repeats=2,
        quick_number=1,
        run=run_int8_inference,
        original=False,
    ),
}
