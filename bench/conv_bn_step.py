"""Training step of a small conv + batch-norm network: Sonnet vs Keras 3.

Both networks are 4 x (3x3 conv with bias, 32 channels -> batch norm with scale
and offset -> ReLU) on a batch of 32 images 32x32x3, followed by a spatial mean;
the loss is the mean square of the result. One step (inside `tf.function`)
computes the loss and gradients in training mode (batch statistics and
moving-average updates) and applies plain SGD with `assign_sub`. Prints the
median milliseconds per step of each (interleaved repetitions, warm-up
excluded) and the ratio ours / keras; also ours without the fused batch-norm
kernel, to show what the kernel choice buys.

    python bench/conv_bn_step.py [--repeats 9] [--number 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf

import sonnet as snt

CHANNELS = 32
LAYERS = 4
LEARNING_RATE = 0.01


class _UnfusedBatchNorm(snt.BatchNorm):
    """`snt.BatchNorm` forced onto `tf.nn.moments` + `tf.nn.batch_normalization`."""

    _use_fused_kernel = False


def sonnet_step(x: tf.Tensor, fused: bool = True) -> Callable[[], tf.Tensor]:
    batch_norm = snt.BatchNorm if fused else _UnfusedBatchNorm
    layers = []
    for i in range(LAYERS):
        layers.append(snt.Conv2D(CHANNELS, 3, name=f"conv_{i}"))
        layers.append(batch_norm(True, True, decay_rate=0.99, name=f"bn_{i}"))

    def forward(images: tf.Tensor) -> tf.Tensor:
        net = images
        for conv, bn in zip(layers[::2], layers[1::2]):
            net = tf.nn.relu(bn(conv(net), is_training=True))
        return tf.reduce_mean(net, axis=[1, 2])

    forward(x)  # Create the variables.
    params = [v for layer in layers for v in layer.trainable_variables]

    @tf.function
    def step(images: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(images)))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(LEARNING_RATE * g)
        return loss

    return lambda: step(x)


def keras_step(x: tf.Tensor) -> Callable[[], tf.Tensor]:
    model = keras.Sequential()
    model.add(keras.Input(shape=x.shape[1:]))
    for _ in range(LAYERS):
        model.add(keras.layers.Conv2D(CHANNELS, 3, padding="same"))
        model.add(keras.layers.BatchNormalization(momentum=0.99, epsilon=1e-5))
        model.add(keras.layers.ReLU())
    model.add(keras.layers.GlobalAveragePooling2D())
    params = model.trainable_variables

    @tf.function
    def step(images: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(images, training=True)))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(LEARNING_RATE * g)
        return loss

    return lambda: step(x)


def _time_ms(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--number", type=int, default=20)
    args = parser.parse_args()

    x = tf.random.normal([32, 32, 32, 3], seed=0)
    steps = {
        "sonnet": sonnet_step(x),
        "keras": keras_step(x),
        # For reference: the same module without the fused kernel.
        "unfused": sonnet_step(x, fused=False),
    }
    for fn in steps.values():  # Warm-up: trace and run a few steps.
        for _ in range(5):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(args.repeats):
        for key, fn in steps.items():
            samples[key].append(_time_ms(fn, args.number))
    medians = {k: statistics.median(v) for k, v in samples.items()}
    for key, value in medians.items():
        print(f"{key:>8}: {value:8.2f} ms/step (median of {args.repeats})")
    print(f"ratio sonnet/keras: {medians['sonnet'] / medians['keras']:.3f}")
    print(f"ratio sonnet/unfused: {medians['sonnet'] / medians['unfused']:.3f}")


if __name__ == "__main__":
    main()
