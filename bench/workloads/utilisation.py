"""Utilisation: train steps' matmul FLOP/s as a fraction of the machine's peak.

`utilisation_mlp_adam_step` and `utilisation_transformer_step`: the FLOP/s
achieved by the `mlp_adam_step` and `transformer_step` train steps (built by
their workloads, for every implementation), their matmul FLOPs counted
analytically (`mlp_products`, `transformer_products`), over the float32 peak:
a 2048 x 2048 `tf.matmul` (8192 on a GPU) timed in the same repetitions.
The peak is not taken from `peak_matmul`'s median: on a shared machine the
host's load moves both the steps and the peak by 10-30% between minutes, so
each repetition's step sample is divided by the peak sample of the same
repetition, and the median of those fractions is reported.

`*_matmuls` (in the raw column): the same products alone (each step's
forward and backward matmuls, of the same shapes, in one `tf.function`, and
nothing else but a sum of each result), over the same peak: the ceiling the
step's shapes allow. Matmuls of a few hundred rows or of 64-wide attention
heads run below a 2048 x 2048 product's rate, so a step's utilisation is
bounded by this row, not by 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tensorflow as tf

from bench.harness import Sampler, Samples, interleave, timed
from bench.workloads import (
    KERAS,
    OURS,
    RAW,
    Results,
    Row,
    Target,
    Workload,
    dense,
    transformer,
)


@dataclass(frozen=True)
class Product:
    """A matmul `[batch,] m x k` times `k x n` of a train step's forward pass.

    Its backward pass computes the gradient of the second operand (`k x n`,
    the same FLOPs) and, if `input_grad`, of the first one (again the same).
    """

    m: int
    k: int
    n: int
    batch: int = 1
    input_grad: bool = True

    @property
    def forward_flops(self) -> float:
        return 2.0 * self.batch * self.m * self.k * self.n

    @property
    def train_flops(self) -> float:
        return self.forward_flops * (3 if self.input_grad else 2)


def train_flops(products: list[Product]) -> float:
    """Matmul FLOPs of one train step (forward + backward) made of `products`."""
    return sum(p.train_flops for p in products)


def mlp_products(sizes: list[int], batch: int) -> list[Product]:
    """`mlp_adam_step`'s products: `[B, n] x [n, m]` per layer.

    The inputs are not differentiated, so the first layer has no input
    gradient: `3 F - 2 B n_0 n_1` FLOPs for forward FLOPs `F`. Bias adds,
    activations, the loss and the optimizer (O(B n) or O(n m) each, against
    O(B n m)) are not counted.
    """
    return [
        Product(batch, n, m, input_grad=i > 0)
        for i, (n, m) in enumerate(zip(sizes[:-1], sizes[1:], strict=True))
    ]


def transformer_products(config: transformer.Config) -> list[Product]:
    """`transformer_step`'s products, per block.

    With `N = B T` positions of width `D`, `H` heads of size `K = D / H`: the
    q, k, v and output projections (`N x D` times `D x D`), the MLP (`D ->
    4D -> D`), the attention logits (`T x K` times `K x T` per example and
    head) and the weighted sum of values (`T x T` times `T x K`; all `T x T`
    pairs: the causal mask is applied to the full product). Forward `24 N D^2
    + 4 B T^2 D` FLOPs per block; every product's inputs are differentiated
    (the first projections' inputs feed the first layer norm's scale and
    offset), so `3 x` that per train step. Layer norms, GELU, softmax, the
    loss and AdamW (O(N D) or O(D^2) each) are not counted.
    """
    n, d = config.batch * config.time, config.width
    heads = config.batch * config.heads
    t, k = config.time, config.key_size
    block = [Product(n, d, d)] * 4
    block += [Product(n, d, 4 * d), Product(n, 4 * d, d)]
    block += [Product(t, k, t, batch=heads), Product(t, t, k, batch=heads)]
    return block * config.layers


Operands = list[tuple[tf.Variable, tf.Variable, tf.Variable]]


def matmuls(products: list[Product]) -> tuple[Callable[[], tf.Tensor], Operands]:
    """A function computing `products`' forward and backward matmuls alone.

    Returns the `tf.function` and its operands, `(x, w, g)` per product: the
    forward product is `x @ w`, the backward ones `x^T @ g` and `g @ w^T`.
    """

    def operand(p: Product, rows: int, cols: int) -> tf.Variable:
        # Variables: operands that graph optimisation cannot take as constants.
        shape = [rows, cols] if p.batch == 1 else [p.batch, rows, cols]
        return tf.Variable(tf.random.normal(shape, seed=0))

    # x: [m, k], w: [k, n], g (the output's gradient): [m, n].
    operands = [
        (operand(p, p.m, p.k), operand(p, p.k, p.n), operand(p, p.m, p.n))
        for p in products
    ]

    @tf.function
    def run() -> tf.Tensor:
        outputs = []
        for p, (x, w, g) in zip(products, operands, strict=True):
            outputs += [tf.matmul(x, w), tf.matmul(x, g, transpose_a=True)]
            if p.input_grad:
                outputs.append(tf.matmul(g, w, transpose_b=True))
        # Whole sums (an addition per output element, against `k` multiply-adds
        # per element for the product): graph optimisation drops a product
        # of which a single element is read.
        return tf.add_n([tf.reduce_sum(o) for o in outputs])

    return run, operands


def matmuls_sampler(products: list[Product]) -> Sampler:
    """Times `matmuls(products)`."""
    return timed(matmuls(products)[0])


# Runs per sample: about 0.2-0.5 s each on this project's 2-core CPU.
_NUMBERS = {
    "cpu": {"peak": 2, "mlp_adam_step": 10, "transformer_step": 1},
    "gpu": {"peak": 20, "mlp_adam_step": 100, "transformer_step": 20},
}
PEAK = "utilisation_peak"


def run_utilisation(
    impls: tuple[str, ...],
    other_python: str | None,
    quick: bool,
    device: str,
    repeats: int,
) -> Results:
    """Per-repetition step FLOP/s / peak FLOP/s, for each implementation."""
    del other_python  # A goal against the machine: no original.
    sizes, batch = dense.adam_sizes(quick)
    config = transformer.QUICK if quick else transformer.FULL
    steps: dict[str, tuple[Callable[[str, bool], dict], list[Product]]] = {
        "mlp_adam_step": (dense.build_mlp_adam_step, mlp_products(sizes, batch)),
        "transformer_step": (
            transformer.build_transformer_step,
            transformer_products(config),
        ),
    }
    n = dense.peak_size(quick, device)
    samplers: dict[tuple[str, str], Sampler] = {(PEAK, RAW): dense.square_matmul(n)}
    numbers = {(PEAK, RAW): _NUMBERS[device]["peak"]}
    flops = {PEAK: 2.0 * n**3}
    for step, (build, products) in steps.items():
        row = f"utilisation_{step}"
        for impl in impls:
            code_path = "sonnet" if impl == OURS else impl
            samplers[row, impl] = build(code_path, quick)[step]
            numbers[row, impl] = _NUMBERS[device][step]
        samplers[f"{row}_matmuls", RAW] = matmuls_sampler(products)
        numbers[f"{row}_matmuls", RAW] = _NUMBERS[device][step]
        flops[row] = flops[f"{row}_matmuls"] = train_flops(products)
    if quick:
        numbers = dict.fromkeys(numbers, 1)
    times = interleave(samplers, repeats, numbers, warmup=0 if quick else 1)
    peak = times.pop((PEAK, RAW))
    results: Results = {}
    for (row, impl), samples in times.items():
        scale = flops[row] / flops[PEAK]
        results[row, impl] = Samples(
            wall=[scale * p / s for p, s in zip(peak.wall, samples.wall, strict=True)],
            cpu=[scale * p / s for p, s in zip(peak.cpu, samples.cpu, strict=True)],
        )
    return results


WORKLOADS = {
    "utilisation": Workload(
        name="utilisation",
        rows=(
            Row(
                "utilisation_mlp_adam_step",
                "fraction",
                "mlp_adam_step's matmul FLOP/s / float32 peak of the same repetition",
            ),
            Row(
                "utilisation_mlp_adam_step_matmuls",
                "fraction",
                "mlp_adam_step's matmuls alone / the same peak (the shapes' ceiling)",
            ),
            Row(
                "utilisation_transformer_step",
                "fraction",
                "transformer_step's matmul FLOP/s / float32 peak of the same "
                "repetition",
            ),
            Row(
                "utilisation_transformer_step_matmuls",
                "fraction",
                "transformer_step's matmuls alone / the same peak (the shapes' "
                "ceiling)",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=9,
        number=1,
        quick_repeats=1,
        quick_number=1,
        run=run_utilisation,
        original=False,
        targets=(
            Target("utilisation_mlp_adam_step", None, 0.8, at_least=True),
            Target("utilisation_transformer_step", None, 0.8, at_least=True),
        ),
    ),
}
