"""Tracing cost of `snt.static_unroll` as the sequence grows.

`static_unroll` adds one copy of the step to the graph per time step, so
tracing it inside `tf.function` must cost time linear in T (no per-step work
that grows with the number of steps already traced). For an `snt.LSTM(64)`
over a batch of 8 inputs of size 32, this traces a fresh `tf.function` of the
forward pass for several T, takes the median of a few repeats per T, and
prints the time per step and a least-squares fit `time = a + b * T`; the
per-step time should stay flat as T grows. `dynamic_unroll` (constant graph
size) is shown for reference.

    python bench/static_unroll_trace.py [--repeats 3] [--lengths 25 50 100 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

import sonnet as snt

BATCH, INPUT, HIDDEN = 8, 32, 64


def trace_seconds(unroll, core: snt.LSTM, steps: int) -> float:
    """Seconds to trace (not run) the unrolled forward pass for `steps`."""
    fn = tf.function(lambda x: unroll(core, x, core.initial_state(BATCH)))
    spec = tf.TensorSpec([steps, BATCH, INPUT])
    start = time.perf_counter()
    fn.get_concrete_function(spec)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[25, 50, 100, 200])
    args = parser.parse_args()

    core = snt.LSTM(HIDDEN)
    core(tf.zeros([BATCH, INPUT]), core.initial_state(BATCH))  # Build once.
    trace_seconds(snt.static_unroll, core, 2)  # Warm-up.
    for name, unroll in (
        ("static_unroll", snt.static_unroll),
        ("dynamic_unroll", snt.dynamic_unroll),
    ):
        times = []
        for steps in args.lengths:
            samples = [trace_seconds(unroll, core, steps) for _ in range(args.repeats)]
            times.append(statistics.median(samples))
        print(f"{name}:")
        for steps, seconds in zip(args.lengths, times):
            print(
                f"  T={steps:4d}: {seconds * 1e3:8.1f} ms   "
                f"{seconds / steps * 1e3:6.2f} ms/step"
            )
        slope, intercept = np.polyfit(args.lengths, times, 1)
        print(
            f"  fit: {intercept * 1e3:.1f} ms + {slope * 1e3:.2f} ms * T; "
            f"per-step time at T={args.lengths[-1]} / at T={args.lengths[0]}: "
            f"{(times[-1] / args.lengths[-1]) / (times[0] / args.lengths[0]):.2f}"
        )


if __name__ == "__main__":
    main()
