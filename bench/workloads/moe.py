"""Mixture-of-experts workload: a Transformer train step with MoE MLPs.

`moe_step`: one `tf.function` train step (forward, mean squared error against
a random target plus the auxiliary losses `0.01 * load_balancing + 0.001 *
router_z`, gradients, AdamW with learning rate 1e-3 and weight decay 0.01) of
`transformer_step`'s causal pre-norm model (4 blocks of width 256, 4 heads,
layer norms, inputs `[16, 128, 256]`) whose MLPs are
`snt.MixtureOfExperts(8, 1024, top_k=2)`: 8 experts, each the bench
Transformer's GELU MLP of width 1024, dropless. Against `moe_step_dense`:
the same model with dense GELU MLPs of width 2048, which have the same
active parameters per token (2 experts of 1024). `moe_step_capacity`: the
MoE step with `capacity_factor=1.25` (the static-shape dispatch XLA can
compile; up to 25% padded rows), for information. The target bounds the
cost of routing at 1.6 x the dense step (a model computing every expert on
every token would take about 4 x).

The blocks are written here from `snt.LayerNorm`, `snt.MultiHeadAttention`
and `snt.Linear`, the same for both models but for the MLP.
`--quick`: `transformer_step`'s quick sizes (1 block of width 32, batch 2 x
16), 4 experts of width 128.

The original Sonnet 2.0.2 has no `MixtureOfExperts`: no `--vs` run.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench.harness import Sampler, timed
from bench.workloads import OURS, Row, Target, Workload
from bench.workloads.transformer import (
    EPSILON,
    FULL,
    LEARNING_RATE,
    QUICK,
    WEIGHT_DECAY,
    Config,
)

TOP_K = 2
BALANCE_WEIGHT, Z_WEIGHT = 0.01, 0.001


def _model(config: Config, experts: int, capacity_factor: float | None) -> Any:
    """A causal pre-norm Transformer whose MLPs are MoEs (`experts > 0`)
    or dense with `TOP_K` x the expert width."""
    import sonnet as snt

    width, hidden = config.width, 4 * config.width

    class Block(snt.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1 = snt.LayerNorm(-1, True, True, eps=EPSILON)
            self.attention = snt.MultiHeadAttention(config.heads, config.key_size)
            self.norm2 = snt.LayerNorm(-1, True, True, eps=EPSILON)
            if experts:
                self.moe = snt.MixtureOfExperts(
                    experts, hidden, TOP_K, capacity_factor=capacity_factor
                )
            else:
                self.mlp_in = snt.Linear(TOP_K * hidden)
                self.mlp_out = snt.Linear(width)

        def __call__(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            x = x + self.attention(self.norm1(x), causal=True)
            h = self.norm2(x)
            if experts:
                h, losses = self.moe(h, return_aux_losses=True)
                aux = (
                    BALANCE_WEIGHT * losses["load_balancing"]
                    + Z_WEIGHT * losses["router_z"]
                )
            else:
                rows = tf.reshape(h, [-1, width])
                h = tf.reshape(self.mlp_out(tf.nn.gelu(self.mlp_in(rows))), x.shape)
                aux = tf.zeros([])
            return x + h, aux

    class Model(snt.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = [Block() for _ in range(config.layers)]
            self.norm = snt.LayerNorm(-1, True, True, eps=EPSILON)

        def __call__(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            aux = tf.zeros([])
            for block in self.blocks:
                x, block_aux = block(x)
                aux += block_aux
            return self.norm(x), aux

    return Model()


def build_moe_step(impl: str, quick: bool) -> dict[str, Sampler]:
    import sonnet as snt

    del impl
    config = QUICK if quick else FULL
    experts = 4 if quick else 8
    shape = [config.batch, config.time, config.width]
    x, y = tf.random.normal(shape, seed=0), tf.random.normal(shape, seed=1)

    def step_of(experts: int, capacity_factor: float | None = None) -> Any:
        model = _model(config, experts, capacity_factor)
        model(x[:1])
        params = list(model.trainable_variables)
        optimizer = snt.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY)

        @tf.function
        def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                outputs, aux = model(x)
                loss = tf.reduce_mean(tf.square(outputs - y)) + aux
            optimizer.apply(tape.gradient(loss, params), params)
            return loss

        return lambda: step(x, y)

    return {
        "moe_step": timed(step_of(experts)),
        "moe_step_dense": timed(step_of(0)),
        "moe_step_capacity": timed(step_of(experts, 1.25)),
    }


_MODEL = "causal Transformer (4 blocks, width 256) AdamW train step, batch 16 x 128"

WORKLOADS = {
    "moe_step": Workload(
        name="moe_step",
        rows=(
            Row(
                "moe_step",
                "ms",
                f"tf.function {_MODEL}, MLPs snt.MixtureOfExperts(8 experts of "
                "1024, top-2, dropless) with aux losses",
            ),
            Row(
                "moe_step_dense",
                "ms",
                "the same with dense MLPs of 2048 (the same active parameters)",
            ),
            Row(
                "moe_step_capacity",
                "ms",
                "the MoE step with capacity_factor=1.25 (static-shape dispatch)",
            ),
        ),
        impls=(OURS,),
        repeats=7,
        number=2,
        quick_repeats=2,
        quick_number=1,
        build=build_moe_step,
        targets=(Target("moe_step", OURS, 1.6, other_row="moe_step_dense"),),
        original=False,
    ),
}
