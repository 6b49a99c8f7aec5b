"""Transformer workloads: a train step, decoding with the cache, eager attention.

`transformer_step`: one `tf.function` train step (forward, mean squared
error against a random target, gradients, AdamW with learning rate 1e-3 and
weight decay 0.01) of a causal pre-norm Transformer: 4 blocks of width 256
with 4 heads (key size 64), GELU MLPs of width 1024, layer norms, biases;
inputs `[16, 128, 256]`. Ours is `snt.nets.Transformer` +
`snt.optimizers.AdamW`; Keras builds the same blocks from
`keras.layers.MultiHeadAttention` (with `use_causal_mask=True`),
`LayerNormalization` and `Dense` and trains them with
`keras.optimizers.AdamW`; raw is the same maths written by hand (matmuls,
einsums, `tf.nn.moments`, decoupled decay + the fused `ResourceApplyAdam`).
Peers in rows of their own (ours column): `transformer_step_torch`, PyTorch
eager: 4 `torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0,
activation="gelu", batch_first=True, norm_first=True)` (the same exact GELU,
biases, layer norms with epsilon 1e-5 and 3,159,552 parameters, the query,
key and value projections as one `[768, 256]` weight) and a final
`torch.nn.LayerNorm`, called with the causal mask and `is_causal=True` (its
fused scaled-dot-product attention), `torch.optim.AdamW` with the same
hyper-parameters (its default per-tensor loop on CPUs), the same loss, at
PyTorch's default threads (one per core, as TensorFlow's pools);
`transformer_step_torch_compile`: the same with the forward pass and loss
under `torch.compile` (the optimizer eager). Skipped with the reason when
PyTorch is not installed or compiling fails.

`decode_tokens`: greedy generation of 256 tokens (batch 1, one prompt token)
with a small language model (`snt.Embed(256, 256)`, the Transformer above
with rotary embeddings, an `snt.Linear(256)` head), the whole loop in one
`tf.function`: with the cache (`decode_tokens`: one position per step) and
without (`decode_tokens_no_cache`: the whole prefix again at every step), and with
the cache compiled by XLA (`decode_tokens_xla`, for information: the
shapes of a decoding loop without the cache change at every step, so it
cannot be compiled).

`mha_eager_overhead`: one eager `snt.MultiHeadAttention(4, 8)` self-attention
call on `[2, 8, 32]`, causal, against the same ops called eagerly by hand
(small sizes: per-call overhead, not arithmetic, decides).

The sonnet side uses `snt.nets.Transformer` and `snt.MultiHeadAttention`,
which the original Sonnet 2.0.2 does not have: these workloads do not run
with `--vs`.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from bench.harness import Sampler, Skip, timed
from bench.workloads import KERAS, OURS, RAW, Row, Target, Workload
from bench.workloads.steps import raw_adam

LEARNING_RATE = 1e-3
WEIGHT_DECAY = 0.01
EPSILON = 1e-5  # Layer norm.


@dataclass(frozen=True)
class Config:
    layers: int
    width: int
    heads: int
    time: int
    batch: int

    @property
    def key_size(self) -> int:
        return self.width // self.heads


FULL = Config(layers=4, width=256, heads=4, time=128, batch=16)
QUICK = Config(layers=1, width=32, heads=4, time=16, batch=2)


# ---------------------------------------------------------------------------
# Hand-written TensorFlow.


def _weight(fan_in: int, fan_out: int) -> tf.Variable:
    stddev = 1 / math.sqrt(fan_in)
    return tf.Variable(tf.random.truncated_normal([fan_in, fan_out], stddev=stddev))


def _zeros(size: int) -> tf.Variable:
    return tf.Variable(tf.zeros([size]))


def _ones(size: int) -> tf.Variable:
    return tf.Variable(tf.ones([size]))


def _layer_norm(x: tf.Tensor, scale: tf.Variable, offset: tf.Variable) -> tf.Tensor:
    mean, variance = tf.nn.moments(x, [-1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, variance, offset, scale, EPSILON)


def _dense_3d(x: tf.Tensor, w: tf.Variable, b: tf.Variable) -> tf.Tensor:
    return tf.nn.bias_add(tf.matmul(x, w), b)


def _dense(x: tf.Tensor, w: tf.Variable, b: tf.Variable) -> tf.Tensor:
    # Positions as rows of one matrix: a plain matmul, whose weight gradient
    # is one matmul too (a `[B, T, D]` batch matmul's is one per example).
    rows = tf.reshape(x, [-1, x.shape[-1]])
    y = tf.nn.bias_add(tf.matmul(rows, w), b)
    return tf.reshape(y, [*x.shape[:-1], w.shape[-1]])


class RawAttention:
    """Causal self-attention by hand: four projections and two einsums.

    `rows=True` runs the projections as matmuls over `[B * T, D]` rows (the
    fast choice in a graph, see `_dense`); `rows=False` as `tf.matmul` of
    the `[B, T, D]` inputs (fewest ops, for eager calls). The causal mask
    is made once per sequence length.
    """

    def __init__(self, width: int, heads: int, key_size: int, rows: bool = True):
        self.heads, self.key_size = heads, key_size
        self.dense = _dense if rows else _dense_3d
        self.masks: dict[int, tf.Tensor] = {}
        inner = heads * key_size
        self.params = [
            _weight(width, inner),
            _zeros(inner),
            _weight(width, inner),
            _zeros(inner),
            _weight(width, inner),
            _zeros(inner),
            _weight(inner, width),
            _zeros(width),
        ]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        wq, bq, wk, bk, wv, bv, wo, bo = self.params
        dense = self.dense
        batch, time = x.shape[0], x.shape[1]
        split = [batch, time, self.heads, self.key_size]
        q = tf.reshape(dense(x, wq, bq), split) * (1 / math.sqrt(self.key_size))
        k = tf.reshape(dense(x, wk, bk), split)
        v = tf.reshape(dense(x, wv, bv), split)
        logits = tf.einsum("bthk,bshk->bhts", q, k)
        causal = self.masks.get(time)
        if causal is None or not tf.executing_eagerly():
            causal = tf.range(time)[:, None] >= tf.range(time)[None, :]
            if tf.executing_eagerly():
                self.masks[time] = causal
        logits = tf.where(causal, logits, logits.dtype.min)
        heads = tf.einsum("bhts,bshv->bthv", tf.nn.softmax(logits), v)
        return dense(tf.reshape(heads, [batch, time, -1]), wo, bo)


class RawTransformer:
    """The pre-norm causal Transformer of `snt.nets.Transformer`, by hand."""

    def __init__(self, config: Config):
        width = config.width
        self.blocks = []
        for _ in range(config.layers):
            attention = RawAttention(width, config.heads, config.key_size)
            norms = [_ones(width), _zeros(width), _ones(width), _zeros(width)]
            mlp = [
                _weight(width, 4 * width),
                _zeros(4 * width),
                _weight(4 * width, width),
                _zeros(width),
            ]
            self.blocks.append((attention, norms, mlp))
        self.final_norm = [_ones(width), _zeros(width)]
        self.params: list[tf.Variable] = list(self.final_norm)
        for attention, norms, mlp in self.blocks:
            self.params += attention.params + norms + mlp

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        for attention, (s1, o1, s2, o2), (w1, b1, w2, b2) in self.blocks:
            x = x + attention(_layer_norm(x, s1, o1))
            h = tf.nn.gelu(_dense(_layer_norm(x, s2, o2), w1, b1))
            x = x + _dense(h, w2, b2)
        return _layer_norm(x, *self.final_norm)


# ---------------------------------------------------------------------------
# Keras 3.


def _keras_transformer(config: Config) -> tuple[Callable[[tf.Tensor], Any], Any]:
    import keras

    layers = []
    for _ in range(config.layers):
        layers.append(
            (
                keras.layers.LayerNormalization(epsilon=EPSILON),
                keras.layers.MultiHeadAttention(config.heads, config.key_size),
                keras.layers.LayerNormalization(epsilon=EPSILON),
                keras.layers.Dense(4 * config.width, activation="gelu"),
                keras.layers.Dense(config.width),
            )
        )
    final_norm = keras.layers.LayerNormalization(epsilon=EPSILON)

    def forward(x: tf.Tensor) -> tf.Tensor:
        for norm1, attention, norm2, dense1, dense2 in layers:
            h = norm1(x)
            x = x + attention(h, h, use_causal_mask=True, training=True)
            x = x + dense2(dense1(norm2(x)))
        return final_norm(x)

    return forward, (layers, final_norm)


def _keras_variables(modules: Any) -> list[tf.Variable]:
    layers, final_norm = modules
    params = [v for block in layers for layer in block for v in layer.trainable_weights]
    return params + list(final_norm.trainable_weights)


# ---------------------------------------------------------------------------
# Workloads.


def _snt_transformer(config: Config, **kwargs: Any) -> Any:
    import sonnet as snt

    return snt.nets.Transformer(
        num_layers=config.layers,
        num_heads=config.heads,
        model_size=config.width,
        causal=True,
        **kwargs,
    )


def build_transformer_step(impl: str, quick: bool) -> dict[str, Sampler]:
    config = QUICK if quick else FULL
    shape = [config.batch, config.time, config.width]
    x = tf.random.normal(shape, seed=0)
    y = tf.random.normal(shape, seed=1)
    if impl == "sonnet":
        import sonnet as snt

        model = _snt_transformer(config)
        model(x[:1])
        forward, params = model, list(model.trainable_variables)
        optimizer = snt.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY)

        def apply(grads: list[tf.Tensor]) -> None:
            optimizer.apply(grads, params)
    elif impl == "raw":
        raw = RawTransformer(config)
        forward, params = raw, raw.params
        apply = raw_adam(params, LEARNING_RATE, WEIGHT_DECAY)
    else:
        import keras

        forward, modules = _keras_transformer(config)
        forward(x[:1])
        params = _keras_variables(modules)
        keras_optimizer = keras.optimizers.AdamW(
            LEARNING_RATE, weight_decay=WEIGHT_DECAY
        )
        keras_optimizer.build(params)

        def apply(grads: list[tf.Tensor]) -> None:
            keras_optimizer.apply_gradients(zip(grads, params, strict=True))

    @tf.function
    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(x) - y))
        apply(tape.gradient(loss, params))
        return loss

    return {"transformer_step": timed(lambda: step(x, y))}


def torch_model(config: Config) -> Any:
    """PyTorch's model of the same shape (see the module docstring):
    `torch.nn.ModuleList` of the blocks and the final norm."""
    from torch import nn  # pyright: ignore[reportMissingImports]

    width = config.width
    blocks = [
        nn.TransformerEncoderLayer(
            width,
            config.heads,
            4 * width,
            dropout=0.0,
            activation="gelu",
            layer_norm_eps=EPSILON,
            batch_first=True,
            norm_first=True,
        )
        for _ in range(config.layers)
    ]
    return nn.ModuleList([*blocks, nn.LayerNorm(width, eps=EPSILON)])


def torch_transformer_step(config: Config, compile: bool = False) -> Callable[[], Any]:
    """PyTorch's train step of `torch_model`: a function that runs one step
    and returns the loss as a float (so the work is done when it returns)."""
    import torch  # pyright: ignore[reportMissingImports]

    torch.manual_seed(0)
    model = torch_model(config)
    *blocks, final_norm = model
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY, eps=1e-8
    )
    mask = torch.nn.Transformer.generate_square_subsequent_mask(config.time)
    shape = (config.batch, config.time, config.width)
    x, y = torch.randn(shape), torch.randn(shape)

    def loss_fn(x: Any, y: Any) -> Any:
        for block in blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return torch.mean(torch.square(final_norm(x) - y))

    loss_of = torch.compile(loss_fn) if compile else loss_fn

    def step() -> float:
        loss = loss_of(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step


def _torch_samplers(quick: bool) -> dict[str, Sampler | Skip]:
    """The PyTorch rows: samplers, or `Skip`s with the reason."""
    config = QUICK if quick else FULL
    rows = ("transformer_step_torch", "transformer_step_torch_compile")
    if importlib.util.find_spec("torch") is None:
        return dict.fromkeys(rows, Skip("torch not installed (pip install torch)"))
    import torch  # pyright: ignore[reportMissingImports]

    print(
        f"    transformer_step: torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads",
        file=sys.stderr,
        flush=True,
    )
    samplers: dict[str, Sampler | Skip] = {
        rows[0]: timed(torch_transformer_step(config))
    }
    try:
        compiled = torch_transformer_step(config, compile=True)
        compiled()  # Compiles here, not in the timed warm-up.
    except Exception as error:  # noqa: BLE001 - any compiler failure skips.
        reason = f"torch.compile failed: {type(error).__name__}: {error}"
        samplers[rows[1]] = Skip(reason.splitlines()[0][:200])
    else:
        samplers[rows[1]] = timed(compiled)
    return samplers


def build_transformer_step_rows(impl: str, quick: bool) -> dict[str, Sampler | Skip]:
    """`build_transformer_step`, and with ours the PyTorch rows."""
    samplers: dict[str, Sampler | Skip] = dict(build_transformer_step(impl, quick))
    if impl == "sonnet":
        samplers.update(_torch_samplers(quick))
    return samplers


def build_decode(impl: str, quick: bool) -> dict[str, Sampler]:
    import sonnet as snt

    config = QUICK if quick else FULL
    vocab, length = 256, (16 if quick else 256)
    embed = snt.Embed(vocab, config.width)
    transformer = _snt_transformer(config, rotary=True)
    head = snt.Linear(vocab)
    prompt = tf.zeros([1, 1], tf.int32)

    def with_cache(prompt: tf.Tensor) -> tf.Tensor:
        cache = transformer.initial_cache(1, 1 + length)
        tokens = tf.TensorArray(tf.int32, size=length)
        token = prompt
        for i in tf.range(length):
            h, cache = transformer(embed(token), cache=cache)
            token = tf.argmax(head(h[:, -1:]), axis=-1, output_type=tf.int32)
            tokens = tokens.write(i, token[:, 0])
        return tokens.stack()

    @tf.function
    def without_cache(prompt: tf.Tensor) -> tf.Tensor:
        tokens = prompt
        for _ in tf.range(length):
            tf.autograph.experimental.set_loop_options(
                shape_invariants=[(tokens, tf.TensorShape([1, None]))]
            )
            logits = head(transformer(embed(tokens))[:, -1:])
            token = tf.argmax(logits, axis=-1, output_type=tf.int32)
            tokens = tf.concat([tokens, token], axis=1)
        return tokens[:, 1:]

    cached = tf.function(with_cache)
    # The cache keeps every shape fixed, so the whole loop compiles with XLA.
    compiled = tf.function(with_cache, jit_compile=True)
    return {
        "decode_tokens": timed(lambda: cached(prompt)),
        "decode_tokens_no_cache": timed(lambda: without_cache(prompt)),
        "decode_tokens_xla": timed(lambda: compiled(prompt)),
    }


def build_mha_eager(impl: str, quick: bool) -> dict[str, Sampler]:
    heads, key_size = 4, 8
    x = tf.random.normal([2, 8, heads * key_size], seed=0)
    if impl == "sonnet":
        import sonnet as snt

        mha = snt.MultiHeadAttention(heads, key_size)
        mha(x, causal=True)
        return {"mha_eager_overhead": timed(lambda: mha(x, causal=True))}
    if impl == "raw":
        raw = RawAttention(heads * key_size, heads, key_size, rows=False)
        return {"mha_eager_overhead": timed(lambda: raw(x))}
    import keras

    layer = keras.layers.MultiHeadAttention(heads, key_size)
    layer(x, x, use_causal_mask=True)
    return {"mha_eager_overhead": timed(lambda: layer(x, x, use_causal_mask=True))}


WORKLOADS = {
    "transformer_step": Workload(
        name="transformer_step",
        rows=(
            Row(
                "transformer_step",
                "ms",
                "tf.function causal Transformer (4 x width 256, 4 heads) AdamW "
                "train step, batch 16 x 128 positions",
            ),
            Row(
                "transformer_step_torch",
                "ms",
                "the same step in PyTorch, eager (nn.TransformerEncoderLayer, "
                "norm_first, causal fused attention, torch.optim.AdamW)",
            ),
            Row(
                "transformer_step_torch_compile",
                "ms",
                "the PyTorch step with the forward pass and loss under torch.compile",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=7,
        number=2,
        quick_repeats=2,
        quick_number=1,
        build=build_transformer_step_rows,
        targets=(
            Target("transformer_step", RAW, 1.05),
            Target("transformer_step", KERAS, 0.85),
            Target("transformer_step", OURS, 1.0, other_row="transformer_step_torch"),
        ),
        original=False,
    ),
    "decode_tokens": Workload(
        name="decode_tokens",
        rows=(
            Row(
                "decode_tokens",
                "ms",
                "greedy generation of 256 tokens, batch 1, with the cache "
                "(one tf.function)",
            ),
            Row(
                "decode_tokens_no_cache",
                "ms",
                "the same without the cache (the whole prefix at every step)",
            ),
            Row(
                "decode_tokens_xla",
                "ms",
                "the same with the cache, compiled with XLA (jit_compile=True)",
            ),
        ),
        impls=(OURS,),
        repeats=5,
        number=1,
        quick_repeats=2,
        quick_number=1,
        build=build_decode,
        # At least 5 x the tokens per second of decoding without the cache.
        targets=(
            Target("decode_tokens", OURS, 0.2, other_row="decode_tokens_no_cache"),
        ),
        original=False,
    ),
    "mha_eager_overhead": Workload(
        name="mha_eager_overhead",
        rows=(
            Row(
                "mha_eager_overhead",
                "us",
                "eager causal MultiHeadAttention(4 heads x 8) call on [2, 8, 32]",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=21,
        number=100,
        quick_repeats=3,
        quick_number=5,
        build=build_mha_eager,
        targets=(Target("mha_eager_overhead", RAW, 1.1),),
        original=False,
    ),
}
