"""Eager per-call overhead of `snt.Linear` and `snt.nets.MLP` over raw TF ops.

Prints medians (microseconds per call) and the ratios ours / raw, measured side
by side in one process with interleaved repetitions (warm-up excluded). The
raw versions run exactly the ops the modules run: `tf.matmul` + `tf.add` per layer.

    python bench/eager_overhead.py [--repeats 31] [--number 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import sonnet as snt


def _time(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e6


def compare(
    pairs: dict[str, Callable[[], object]], repeats: int, number: int
) -> dict[str, float]:
    """Median microseconds per call of each function, interleaved."""
    for fn in pairs.values():
        for _ in range(20):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in pairs}
    for _ in range(repeats):
        for key, fn in pairs.items():
            samples[key].append(_time(fn, number))
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--number", type=int, default=300)
    args = parser.parse_args()

    x = tf.random.normal([8, 16])
    linear = snt.Linear(16)
    linear(x)
    w, b = linear.w, linear.b

    mlp = snt.nets.MLP([32, 32, 10])
    mlp(x)
    params = [(layer.w, layer.b) for layer in mlp._layers]

    def raw_linear():
        return tf.add(tf.matmul(x, w), b)

    def raw_mlp():
        h = x
        for i, (lw, lb) in enumerate(params):
            h = tf.add(tf.matmul(h, lw), lb)
            if i < len(params) - 1:
                h = tf.nn.relu(h)
        return h

    times = compare(
        {
            "raw_linear": raw_linear,
            "snt_linear": lambda: linear(x),
            "raw_mlp": raw_mlp,
            "snt_mlp": lambda: mlp(x),
        },
        args.repeats,
        args.number,
    )
    for key, value in times.items():
        print(f"{key:12s} {value:8.2f} us/call")
    print(f"Linear / raw ops: {times['snt_linear'] / times['raw_linear']:.3f}")
    print(f"MLP / raw MLP:    {times['snt_mlp'] / times['raw_mlp']:.3f}")


if __name__ == "__main__":
    main()
