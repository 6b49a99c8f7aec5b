"""Dense workloads: matmul peak, eager `Linear`, MLP steps, tracing.

The eager workloads are deliberately tiny (batch 8, 16 -> 32 -> 32 -> 10) so
per-call Python overhead, not arithmetic, decides the ratio. The raw
versions run the ops the module runs (`tf.matmul` + `tf.nn.bias_add`); the
Keras versions use `keras.layers.Dense` / `keras.Sequential`.

The compiled step is the classic MNIST-sized MLP (784-1024-1024-10, batch
256, softmax cross-entropy, Adam with learning rate 1e-3); the raw version
keeps Adam's moments in its own variables and updates them with the fused
`ResourceApplyAdam` kernel, as someone writing it by hand for speed would.

`peak_matmul`: the machine's matrix-multiply throughput, measured in the run
(a `tf.function` of one `tf.matmul` of two 2048 x 2048 matrices, 8192 on a
GPU), float32 and bfloat16, in GFLOP/s (`2 n^3` FLOPs per product).

`mlp128_trace`: `get_concrete_function` of a fresh `tf.function` calling a
128-layer MLP of width 64 (inputs `[8, 64]`) whose variables exist: the
per-layer Python cost of a traced layer call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from bench.harness import Clock, Sampler, Samples, interleave, self_timed, timed
from bench.workloads import KERAS, ORIGINAL, OURS, RAW, Results, Row, Target, Workload
from bench.workloads.steps import raw_adam

LEARNING_RATE = 0.01


def _data(batch: int, features: int, classes: int) -> tuple[tf.Tensor, tf.Tensor]:
    x = tf.random.normal([batch, features], seed=0)
    y = tf.random.uniform([batch], 0, classes, dtype=tf.int32, seed=1)
    return x, y


class _RawMLP:
    """Hand-written MLP: variables in lists, matmul + bias_add + relu."""

    def __init__(self, sizes: list[int]):
        self.params: list[tf.Variable] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            stddev = 1 / math.sqrt(fan_in)
            init = tf.random.truncated_normal([fan_in, fan_out], stddev=stddev)
            self.params += [tf.Variable(init), tf.Variable(tf.zeros([fan_out]))]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        layers = len(self.params) // 2
        for i in range(layers):
            x = tf.nn.bias_add(tf.matmul(x, self.params[2 * i]), self.params[2 * i + 1])
            if i < layers - 1:
                x = tf.nn.relu(x)
        return x


def _keras_mlp(sizes: list[int]) -> Any:
    import keras

    model = keras.Sequential([keras.Input(shape=(sizes[0],))])
    for i, size in enumerate(sizes[1:]):
        activation = "relu" if i < len(sizes) - 2 else None
        model.add(keras.layers.Dense(size, activation=activation))
    return model


def _mlp(impl: str, sizes: list[int]) -> tuple[Callable[[tf.Tensor], Any], Any]:
    """`(forward, module)` of one implementation; variables are created here."""
    if impl == "sonnet":
        import sonnet as snt

        mlp = snt.nets.MLP(sizes[1:])
        mlp(tf.zeros([1, sizes[0]]))
        return mlp, mlp
    if impl == "raw":
        raw = _RawMLP(sizes)
        return raw, raw
    model = _keras_mlp(sizes)
    return (lambda x: model(x, training=True)), model


def _trainable(impl: str, module: Any) -> list[tf.Variable]:
    if impl == "raw":
        return list(module.params)
    return list(module.trainable_variables)


def _xent(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    )


def build_linear(impl: str, quick: bool) -> dict[str, Sampler]:
    x = tf.random.normal([8, 16], seed=0)
    if impl == "sonnet":
        import sonnet as snt

        layer = snt.Linear(16)
        layer(x)
        return {"linear_eager": timed(lambda: layer(x))}
    if impl == "raw":
        w = tf.Variable(tf.random.truncated_normal([16, 16], stddev=0.25))
        b = tf.Variable(tf.zeros([16]))
        return {"linear_eager": timed(lambda: tf.nn.bias_add(tf.matmul(x, w), b))}
    import keras

    dense = keras.layers.Dense(16)
    dense(x)
    return {"linear_eager": timed(lambda: dense(x))}


def build_mlp_eager_step(impl: str, quick: bool) -> dict[str, Sampler]:
    x, y = _data(8, 16, 10)
    forward, module = _mlp(impl, [16, 32, 32, 10])
    params = _trainable(impl, module)

    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = _xent(forward(x), y)
        for p, g in zip(params, tape.gradient(loss, params), strict=True):
            p.assign_sub(LEARNING_RATE * g)
        return loss

    return {"mlp_eager_step": timed(step)}


def adam_sizes(quick: bool) -> tuple[list[int], int]:
    """`mlp_adam_step`'s layer sizes and batch size."""
    return ([784, 64, 64, 10], 32) if quick else ([784, 1024, 1024, 10], 256)


def build_mlp_adam_step(impl: str, quick: bool) -> dict[str, Sampler]:
    sizes, batch = adam_sizes(quick)
    x, y = _data(batch, sizes[0], sizes[-1])
    forward, module = _mlp(impl, sizes)
    params = _trainable(impl, module)
    if impl == "sonnet":
        import sonnet as snt

        optimizer = snt.optimizers.Adam(1e-3)

        def apply(grads: list[tf.Tensor]) -> None:
            optimizer.apply(grads, params)
    elif impl == "raw":
        apply = raw_adam(params)
    else:
        import keras

        keras_optimizer = keras.optimizers.Adam(1e-3)
        keras_optimizer.build(params)

        def apply(grads: list[tf.Tensor]) -> None:
            keras_optimizer.apply_gradients(zip(grads, params, strict=True))

    @tf.function
    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = _xent(forward(x), y)
        apply(tape.gradient(loss, params))
        return loss

    return {"mlp_adam_step": timed(lambda: step(x, y))}


class _RawBf16MLP(_RawMLP):
    """`_RawMLP` in bfloat16: float32 master variables, each cast once per step."""

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        params = [tf.cast(p, tf.bfloat16) for p in self.params]
        x = tf.cast(x, tf.bfloat16)
        layers = len(params) // 2
        for i in range(layers):
            x = tf.nn.bias_add(tf.matmul(x, params[2 * i]), params[2 * i + 1])
            if i < layers - 1:
                x = tf.nn.relu(x)
        return x


def _bf16_mlp(impl: str, sizes: list[int]) -> tuple[Callable[[tf.Tensor], Any], Any]:
    """`_mlp` computing in bfloat16 with float32 variables."""
    if impl == "sonnet":
        import sonnet as snt

        mlp = snt.precision.apply(snt.nets.MLP(sizes[1:]), "mixed_bfloat16")
        mlp(tf.zeros([1, sizes[0]]))
        return mlp, mlp
    if impl == "raw":
        raw = _RawBf16MLP(sizes)
        return raw, raw
    import keras

    # The policy applies to layers built while it is set: only this model.
    previous = keras.mixed_precision.dtype_policy()
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        model = _keras_mlp(sizes)
    finally:
        keras.mixed_precision.set_dtype_policy(previous)
    return (lambda x: model(x, training=True)), model


def build_mlp_adam_step_bf16(impl: str, quick: bool) -> dict[str, Sampler]:
    sizes, batch = adam_sizes(quick)
    x, y = _data(batch, sizes[0], sizes[-1])
    samplers = {"mlp_adam_step_bf16": _adam_step(impl, _bf16_mlp, sizes, x, y)}
    if impl == "sonnet":
        samplers["mlp_adam_step_bf16_f32"] = _adam_step(impl, _mlp, sizes, x, y)
    return samplers


def _adam_step(
    impl: str, make: Callable[..., Any], sizes: list[int], x: tf.Tensor, y: tf.Tensor
) -> Sampler:
    """Times a `tf.function` Adam step of the MLP `make(impl, sizes)` builds."""
    forward, module = make(impl, sizes)
    params = _trainable(impl, module)
    apply = _adam_apply(impl, params)

    @tf.function
    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            # Inputs float32 (cast by the model), the loss in float32.
            loss = _xent(tf.cast(forward(x), tf.float32), y)
        apply(tape.gradient(loss, params))
        return loss

    return timed(lambda: step(x, y))


def _adam_apply(impl: str, params: list[tf.Variable]) -> Callable[..., None]:
    """Adam over `params`: ours, the fused kernel by hand, or Keras'."""
    if impl == "sonnet":
        import sonnet as snt

        optimizer = snt.optimizers.Adam(1e-3)
        return lambda grads: optimizer.apply(grads, params)
    if impl == "raw":
        return raw_adam(params)
    import keras

    keras_optimizer = keras.optimizers.Adam(1e-3)
    keras_optimizer.build(params)
    return lambda grads: keras_optimizer.apply_gradients(
        zip(grads, params, strict=True)
    )


def peak_size(quick: bool, device: str) -> int:
    if quick:
        return 512
    return 8192 if device == "gpu" else 2048


PEAK_ROWS = {"peak_matmul_f32": tf.float32, "peak_matmul_bf16": tf.bfloat16}


def square_matmul(n: int, dtype: tf.DType = tf.float32) -> Sampler:
    """Times a `tf.function` of one `tf.matmul` of two `n x n` matrices."""
    a = tf.cast(tf.random.normal([n, n], seed=0), dtype)
    b = tf.cast(tf.random.normal([n, n], seed=1), dtype)
    matmul = tf.function(tf.matmul)
    return timed(lambda: matmul(a, b))


def run_peak_matmul(
    impls: tuple[str, ...],
    other_python: str | None,
    quick: bool,
    device: str,
    repeats: int,
) -> Results:
    """GFLOP/s of a square `tf.matmul`, per wall-clock and per CPU second."""
    del impls, other_python  # TensorFlow's kernels only ("raw").
    n = peak_size(quick, device)
    flops = 2.0 * n**3
    samplers = {(row, RAW): square_matmul(n, dtype) for row, dtype in PEAK_ROWS.items()}
    number = 1 if quick else (5 if device == "cpu" else 50)
    times = interleave(samplers, repeats, number, warmup=0 if quick else 1)
    return {
        key: Samples(
            wall=[flops / t / 1e9 for t in samples.wall],
            cpu=[flops / t / 1e9 for t in samples.cpu],
        )
        for key, samples in times.items()
    }


MLP128 = 128


def build_mlp128_trace(impl: str, quick: bool) -> dict[str, Sampler]:
    layers = 8 if quick else MLP128
    sizes = [64] * (layers + 1)
    spec = tf.TensorSpec([8, 64], tf.float32)
    forward, _ = _mlp(impl, sizes)
    if impl == "keras":
        forward(tf.zeros([1, 64]))

    def trace() -> tuple[float, float]:
        function = tf.function(lambda x: forward(x))
        with Clock() as clock:
            function.get_concrete_function(spec)
        return clock.both

    return {"mlp128_trace": self_timed(trace)}


WORKLOADS = {
    "peak_matmul": Workload(
        name="peak_matmul",
        rows=(
            Row(
                "peak_matmul_f32",
                "GFLOP/s",
                "float32 tf.matmul of 2048 x 2048 matrices (8192 on a GPU)",
            ),
            Row("peak_matmul_bf16", "GFLOP/s", "the same in bfloat16"),
        ),
        impls=(RAW,),
        repeats=7,
        number=5,
        quick_repeats=1,
        quick_number=1,
        run=run_peak_matmul,
        original=False,
    ),
    "linear_eager": Workload(
        name="linear_eager",
        rows=(Row("linear_eager", "us", "eager Linear(16) call, batch 8"),),
        impls=(OURS, RAW, KERAS),
        repeats=31,
        number=300,
        quick_repeats=3,
        quick_number=20,
        build=build_linear,
        targets=(Target("linear_eager", RAW, 1.05),),
    ),
    "mlp_eager_step": Workload(
        name="mlp_eager_step",
        rows=(
            Row(
                "mlp_eager_step",
                "us",
                "eager MLP 16-32-32-10 train step (tape, xent, SGD), batch 8",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=21,
        number=50,
        quick_repeats=3,
        quick_number=5,
        build=build_mlp_eager_step,
    ),
    "mlp_adam_step": Workload(
        name="mlp_adam_step",
        rows=(
            Row(
                "mlp_adam_step",
                "ms",
                "tf.function MLP 784-1024-1024-10 Adam train step, batch 256",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=15,
        number=10,
        quick_repeats=3,
        quick_number=2,
        build=build_mlp_adam_step,
        targets=(
            Target("mlp_adam_step", RAW, 1.02),
            Target("mlp_adam_step", KERAS, 0.9),
        ),
    ),
    "mlp_adam_step_bf16": Workload(
        name="mlp_adam_step_bf16",
        rows=(
            Row(
                "mlp_adam_step_bf16",
                "ms",
                "mlp_adam_step in bfloat16 (float32 variables, inputs and loss)",
            ),
            Row(
                "mlp_adam_step_bf16_f32",
                "ms",
                "the same step in float32 (ours only, for the bf16 speed-up)",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=15,
        number=10,
        quick_repeats=3,
        quick_number=2,
        build=build_mlp_adam_step_bf16,
        targets=(
            Target("mlp_adam_step_bf16", RAW, 1.02),
            Target("mlp_adam_step_bf16", KERAS, 0.85),
            Target(
                "mlp_adam_step_bf16", OURS, 0.72, other_row="mlp_adam_step_bf16_f32"
            ),
        ),
        # `snt.precision` is new (issue 16): 2.0.2 has no such path.
        original=False,
    ),
    "mlp128_trace": Workload(
        name="mlp128_trace",
        rows=(
            Row(
                "mlp128_trace",
                "ms",
                "tf.function trace (get_concrete_function) of a 128-layer MLP of "
                "width 64 whose variables exist, inputs [8, 64]",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=11,
        number=3,
        quick_repeats=1,
        quick_number=1,
        build=build_mlp128_trace,
        targets=(Target("mlp128_trace", ORIGINAL, 0.9),),
    ),
}
