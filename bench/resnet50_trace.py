"""Time to trace a ResNet-50 training step: `snt.nets.ResNet50` vs Keras 3.

For each model the variables are created first (one eager call / build); then
a fresh `tf.function` step (forward in training mode, loss, gradients, SGD
`assign_sub` updates) is traced with `get_concrete_function` on a
`[8, 224, 224, 3]` input spec. Only tracing is timed (no execution). Prints
the median seconds per trace (interleaved repetitions; the first trace of
each, which warms up AutoGraph caches, is excluded) and the ratio
ours / keras.

    python bench/resnet50_trace.py [--repeats 3]
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

SPEC = tf.TensorSpec([8, 224, 224, 3], tf.float32)
LEARNING_RATE = 0.01


def _sgd_step(
    forward: Callable[[tf.Tensor], tf.Tensor], params: list
) -> Callable[[tf.Tensor], tf.Tensor]:
    def step(images: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(images)))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(LEARNING_RATE * g)
        return loss

    return step


def sonnet_trace() -> Callable[[], float]:
    net = snt.nets.ResNet50(num_classes=1000)
    net(tf.zeros([1, 224, 224, 3]), is_training=True)  # Create the variables.
    step = _sgd_step(lambda x: net(x, is_training=True), list(net.trainable_variables))
    return lambda: _time_trace(step)


def keras_trace() -> Callable[[], float]:
    model = keras.applications.ResNet50(weights=None)
    step = _sgd_step(lambda x: model(x, training=True), list(model.trainable_variables))
    return lambda: _time_trace(step)


def _time_trace(step: Callable[[tf.Tensor], tf.Tensor]) -> float:
    function = tf.function(step)
    start = time.perf_counter()
    function.get_concrete_function(SPEC)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    traces = {"sonnet": sonnet_trace(), "keras": keras_trace()}
    for trace in traces.values():  # Warm-up trace, not counted.
        trace()
    samples: dict[str, list[float]] = {k: [] for k in traces}
    for _ in range(args.repeats):
        for key, trace in traces.items():
            samples[key].append(trace())
    medians = {k: statistics.median(v) for k, v in samples.items()}
    for key, value in medians.items():
        print(f"{key:>8}: {value:7.2f} s/trace (median of {args.repeats})")
    print(f"ratio sonnet/keras: {medians['sonnet'] / medians['keras']:.3f}")


if __name__ == "__main__":
    main()
