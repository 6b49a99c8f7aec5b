"""Dense workloads: eager `Linear`, eager MLP train step, `tf.function` MLP + Adam.

The eager workloads are deliberately tiny (batch 8, 16 -> 32 -> 32 -> 10) so
per-call Python overhead, not arithmetic, decides the ratio. The raw
versions run the ops the module runs (`tf.matmul` + `tf.nn.bias_add`); the
Keras versions use `keras.layers.Dense` / `keras.Sequential`.

The compiled step is the classic MNIST-sized MLP (784-1024-1024-10, batch
256, softmax cross-entropy, Adam with learning rate 1e-3); the raw version
keeps Adam's moments in its own variables and updates them with the fused
`ResourceApplyAdam` kernel, as someone writing it by hand for speed would.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from bench.harness import Sampler, timed
from bench.workloads import KERAS, OURS, RAW, Row, Target, Workload

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


def _raw_adam(params: list[tf.Variable], lr: float = 1e-3) -> Callable[..., None]:
    """Adam by hand: moment variables and the fused kernel per parameter."""
    beta1, beta2, epsilon = 0.9, 0.999, 1e-8
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    m = [tf.Variable(tf.zeros_like(p)) for p in params]
    v = [tf.Variable(tf.zeros_like(p)) for p in params]

    def apply(grads: list[tf.Tensor]) -> None:
        t = tf.cast(step.assign_add(1), tf.float32)
        beta1_power, beta2_power = tf.pow(beta1, t), tf.pow(beta2, t)
        # Epsilon after bias correction (the paper's rule), as `snt` does.
        fused_epsilon = epsilon * tf.sqrt(1 - beta2_power)
        for p, g, mp, vp in zip(params, grads, m, v, strict=True):
            tf.raw_ops.ResourceApplyAdam(
                var=p.handle,
                m=mp.handle,
                v=vp.handle,
                beta1_power=beta1_power,
                beta2_power=beta2_power,
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                epsilon=fused_epsilon,
                grad=g,
            )

    return apply


def build_mlp_adam_step(impl: str, quick: bool) -> dict[str, Sampler]:
    sizes = [784, 64, 64, 10] if quick else [784, 1024, 1024, 10]
    x, y = _data(32 if quick else 256, sizes[0], sizes[-1])
    forward, module = _mlp(impl, sizes)
    params = _trainable(impl, module)
    if impl == "sonnet":
        import sonnet as snt

        optimizer = snt.optimizers.Adam(1e-3)

        def apply(grads: list[tf.Tensor]) -> None:
            optimizer.apply(grads, params)
    elif impl == "raw":
        apply = _raw_adam(params)
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


WORKLOADS = {
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
}
