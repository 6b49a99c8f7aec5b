"""Adam training step of an MLP: `snt.optimizers.Adam` vs `keras.optimizers.Adam`.

Both sides train the same network, 784-1024-1024-10 with ReLU (as
`snt.nets.MLP` and as a `keras.Sequential` of `Dense` layers), on a batch of
256 with mean softmax cross-entropy. One step (inside `tf.function`) computes
the loss and gradients and applies Adam (learning rate 1e-3, betas 0.9 and
0.999, epsilon 1e-8). Prints the median milliseconds per step of each
(interleaved repetitions, warm-up excluded) and the ratio ours / keras.

    python bench/adam_step.py [--repeats 7] [--number 10]
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

SIZES = [1024, 1024, 10]
INPUTS = 784
BATCH = 256
ADAM = {"learning_rate": 1e-3, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-8}


def _loss(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    )


def sonnet_step(x: tf.Tensor, y: tf.Tensor) -> Callable[[], tf.Tensor]:
    mlp = snt.nets.MLP(SIZES)
    opt = snt.optimizers.Adam(
        ADAM["learning_rate"], ADAM["beta_1"], ADAM["beta_2"], ADAM["epsilon"]
    )
    mlp(x)  # Create the variables.
    params = list(mlp.trainable_variables)

    @tf.function
    def step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = _loss(mlp(images), labels)
        opt.apply(tape.gradient(loss, params), params)
        return loss

    return lambda: step(x, y)


def keras_step(x: tf.Tensor, y: tf.Tensor) -> Callable[[], tf.Tensor]:
    model = keras.Sequential([keras.Input(shape=(INPUTS,))])
    for i, size in enumerate(SIZES):
        activation = "relu" if i < len(SIZES) - 1 else None
        model.add(keras.layers.Dense(size, activation=activation))
    opt = keras.optimizers.Adam(**ADAM)
    params = model.trainable_variables
    opt.build(params)

    @tf.function
    def step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = _loss(model(images, training=True), labels)
        opt.apply_gradients(zip(tape.gradient(loss, params), params))
        return loss

    return lambda: step(x, y)


def _time_ms(fn: Callable[[], tf.Tensor], number: int) -> float:
    start = time.perf_counter()
    result = None
    for _ in range(number):
        result = fn()
    if result is not None:
        result.numpy()  # Wait for the last step.
    return (time.perf_counter() - start) / number * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=10)
    args = parser.parse_args()

    x = tf.random.normal([BATCH, INPUTS], seed=0)
    y = tf.random.uniform([BATCH], 0, SIZES[-1], dtype=tf.int32, seed=1)
    steps = {"sonnet": sonnet_step(x, y), "keras": keras_step(x, y)}
    for fn in steps.values():  # Warm-up: trace and run a few steps.
        for _ in range(3):
            fn().numpy()
    samples: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(args.repeats):
        for key, fn in steps.items():
            samples[key].append(_time_ms(fn, args.number))
    medians = {k: statistics.median(v) for k, v in samples.items()}
    for key, value in medians.items():
        print(f"{key:>8}: {value:8.2f} ms/step (median of {args.repeats})")
    print(f"ratio sonnet/keras: {medians['sonnet'] / medians['keras']:.3f}")


if __name__ == "__main__":
    main()
