"""Conv + batch norm train step (`bench/conv_bn_step.py`'s networks, plus raw TF).

4 x (3x3 conv with bias, 32 channels -> batch norm -> ReLU), spatial mean,
mean-square loss, plain SGD, inside `tf.function`; batch 32 of 32x32x3. The
Sonnet and Keras networks come from `bench/conv_bn_step.py`. The raw version
does by hand what `snt.BatchNorm(True, True, decay_rate=0.99)` does in
training: the fused batch-norm kernel, then moving averages of the batch mean
and (unbiased) variance with zero-debiased exponential averages.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

from bench import conv_bn_step
from bench.harness import Sampler, timed
from bench.workloads import KERAS, OURS, RAW, Row, Target, Workload


class _DebiasedAverage:
    """`hidden -= (hidden - x) * (1 - decay)`, `average = hidden / (1 - decay^t)`."""

    def __init__(self, size: int, decay: float):
        self.decay = decay
        self.counter = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.hidden = tf.Variable(tf.zeros([size]), trainable=False)
        self.average = tf.Variable(tf.zeros([size]), trainable=False)

    def update(self, value: tf.Tensor) -> None:
        counter = tf.cast(self.counter.assign_add(1), tf.float32)
        hidden = self.hidden.assign_sub((self.hidden - value) * (1 - self.decay))
        self.average.assign(hidden / (1 - tf.pow(self.decay, counter)))


def _raw_step(x: tf.Tensor) -> Callable[[], tf.Tensor]:
    channels, layers = conv_bn_step.CHANNELS, conv_bn_step.LAYERS
    params: list[tf.Variable] = []
    averages: list[tuple[_DebiasedAverage, _DebiasedAverage]] = []
    fan_in = x.shape[-1]
    for _ in range(layers):
        stddev = 1 / math.sqrt(9 * fan_in)
        w = tf.random.truncated_normal([3, 3, fan_in, channels], stddev=stddev)
        params += [
            tf.Variable(w),
            tf.Variable(tf.zeros([channels])),
            tf.Variable(tf.ones([channels])),
            tf.Variable(tf.zeros([channels])),
        ]
        averages.append(
            (_DebiasedAverage(channels, 0.99), _DebiasedAverage(channels, 0.99))
        )
        fan_in = channels
    empty = tf.constant([], tf.float32)

    def forward(images: tf.Tensor) -> tf.Tensor:
        net = images
        for i, (mean_average, var_average) in enumerate(averages):
            w, b, scale, offset = params[4 * i : 4 * i + 4]
            net = tf.nn.bias_add(tf.nn.conv2d(net, w, 1, "SAME"), b)
            net, mean, var, _, _, _ = tf.raw_ops.FusedBatchNormV3(
                x=net,
                scale=scale,
                offset=offset,
                mean=empty,
                variance=empty,
                epsilon=1e-5,
                exponential_avg_factor=1.0,
                is_training=True,
            )
            mean_average.update(mean)
            var_average.update(var)
            net = tf.nn.relu(net)
        return tf.reduce_mean(net, axis=[1, 2])

    @tf.function
    def step(images: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(images)))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads, strict=True):
            p.assign_sub(conv_bn_step.LEARNING_RATE * g)
        return loss

    return lambda: step(x)


def build(impl: str, quick: bool) -> dict[str, Sampler]:
    x = tf.random.normal([8, 16, 16, 3] if quick else [32, 32, 32, 3], seed=0)
    if impl == "sonnet":
        return {"conv_bn_step": timed(conv_bn_step.sonnet_step(x))}
    if impl == "keras":
        return {"conv_bn_step": timed(conv_bn_step.keras_step(x))}
    return {"conv_bn_step": timed(_raw_step(x))}


WORKLOADS = {
    "conv_bn_step": Workload(
        name="conv_bn_step",
        rows=(
            Row(
                "conv_bn_step",
                "ms",
                "tf.function 4x(conv3x3-32 + BN + relu) SGD step, batch 32 of 32x32x3",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=15,
        number=10,
        quick_repeats=3,
        quick_number=2,
        build=build,
        targets=(
            Target("conv_bn_step", RAW, 1.02),
            Target("conv_bn_step", KERAS, 0.9),
        ),
    ),
}
