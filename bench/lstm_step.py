"""Training step of a 1-layer LSTM over a sequence: Sonnet vs Keras 3.

An LSTM with 256 hidden units runs over T=50 steps of a batch of 32 inputs of
size 256 (time-major for Sonnet, batch-major for Keras); the loss is the mean
square of all outputs. One step (inside `tf.function`) computes the loss and
the gradients of all LSTM weights and applies plain SGD with `assign_sub`.

Variants: `snt.UnrolledLSTM`, `snt.dynamic_unroll(snt.LSTM)` (both use one
input matmul for all steps and a hand-written recurrence gradient), the
generic `dynamic_unroll` loop (an LSTM hidden behind a plain function, so the
step is differentiated automatically), and `keras.layers.LSTM`. Prints the
median milliseconds per step (interleaved repetitions in rotating order,
warm-up excluded) and each ratio against Keras, for wall-clock time and for
the process's CPU time (the latter is steadier on a machine shared with other
jobs).

    python bench/lstm_step.py [--repeats 7] [--number 5]
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

T, BATCH, INPUT, HIDDEN = 50, 32, 256, 256
LEARNING_RATE = 0.01


def _sgd_step(
    forward: Callable[[tf.Tensor], tf.Tensor], params: list[tf.Variable]
) -> Callable[[tf.Tensor], tf.Tensor]:
    @tf.function
    def step(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(x)))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(LEARNING_RATE * g)
        return loss

    return step


def unrolled_lstm(x: tf.Tensor) -> Callable[[], tf.Tensor]:
    lstm = snt.UnrolledLSTM(HIDDEN)

    def forward(inputs: tf.Tensor) -> tf.Tensor:
        return lstm(inputs, lstm.initial_state(BATCH))[0]

    forward(x)
    step = _sgd_step(forward, list(lstm.trainable_variables))
    return lambda: step(x)


def dynamic_unroll_lstm(x: tf.Tensor, generic: bool = False) -> Callable[[], tf.Tensor]:
    lstm = snt.LSTM(HIDDEN)
    # A plain function is not recognised as an LSTM: the generic loop runs.
    core = (lambda inputs, state: lstm(inputs, state)) if generic else lstm

    def forward(inputs: tf.Tensor) -> tf.Tensor:
        return snt.dynamic_unroll(core, inputs, lstm.initial_state(BATCH))[0]

    forward(x)
    step = _sgd_step(forward, list(lstm.trainable_variables))
    return lambda: step(x)


def keras_lstm(x: tf.Tensor) -> Callable[[], tf.Tensor]:
    layer = keras.layers.LSTM(HIDDEN, return_sequences=True)
    batch_major = tf.transpose(x, [1, 0, 2])
    layer(batch_major)

    def forward(inputs: tf.Tensor) -> tf.Tensor:
        return layer(inputs)

    step = _sgd_step(forward, list(layer.trainable_variables))
    return lambda: step(batch_major)


def _time_ms(fn: Callable[[], object], number: int) -> tuple[float, float]:
    """Wall-clock and process CPU milliseconds per call."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(number):
        fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / number * 1e3, cpu / number * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=5)
    args = parser.parse_args()

    x = tf.random.normal([T, BATCH, INPUT], seed=0)
    steps = {
        "UnrolledLSTM": unrolled_lstm(x),
        "dynamic_unroll(LSTM)": dynamic_unroll_lstm(x),
        "dynamic_unroll(generic)": dynamic_unroll_lstm(x, generic=True),
        "keras.layers.LSTM": keras_lstm(x),
    }
    for fn in steps.values():  # Warm-up: trace and run a few steps.
        for _ in range(3):
            fn()
    wall: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    keys = list(steps)
    for repeat in range(args.repeats):
        # Rotate the order so that no variant always runs right after another.
        shift = repeat % len(keys)
        for key in keys[shift:] + keys[:shift]:
            wall_ms, cpu_ms = _time_ms(steps[key], args.number)
            wall[key].append(wall_ms)
            cpu[key].append(cpu_ms)
    print(f"medians of {args.repeats} interleaved repeats of {args.number} steps")
    for name, samples in (("wall-clock", wall), ("process CPU time", cpu)):
        medians = {k: statistics.median(v) for k, v in samples.items()}
        keras_ms = medians["keras.layers.LSTM"]
        print(f"{name}:")
        for key, value in medians.items():
            print(
                f"  {key:>24}: {value:8.2f} ms/step   ratio vs keras "
                f"{value / keras_ms:.3f}"
            )


if __name__ == "__main__":
    main()
