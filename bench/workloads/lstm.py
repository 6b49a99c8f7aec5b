"""LSTM(256) over T=50 steps, batch 32: forward + backward + SGD in `tf.function`.

Sonnet's `snt.UnrolledLSTM` and `keras.layers.LSTM` come from
`bench/lstm_step.py` (same sizes: inputs of size 256, loss the mean square of
all outputs). The raw version is what one writes by hand: one input
projection for all steps, then the recurrence as a Python loop unrolled in
the graph, differentiated automatically.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

from bench import lstm_step
from bench.harness import Sampler, timed
from bench.workloads import KERAS, OURS, RAW, Row, Target, Workload


def _raw_lstm(x: tf.Tensor) -> Callable[[], tf.Tensor]:
    steps, batch, inputs = x.shape
    hidden = lstm_step.HIDDEN
    w_i = tf.Variable(
        tf.random.truncated_normal([inputs, 4 * hidden], stddev=1 / math.sqrt(inputs))
    )
    w_h = tf.Variable(
        tf.random.truncated_normal([hidden, 4 * hidden], stddev=1 / math.sqrt(hidden))
    )
    b = tf.Variable(tf.zeros([4 * hidden]))
    params = [w_i, w_h, b]

    def forward(sequence: tf.Tensor) -> tf.Tensor:
        flat = tf.reshape(sequence, [steps * batch, inputs])
        xw = tf.reshape(tf.nn.bias_add(tf.matmul(flat, w_i), b), [steps, batch, -1])
        h = c = tf.zeros([batch, hidden])
        outputs = []
        for t in range(steps):
            gates = xw[t] + tf.matmul(h, w_h)
            i, g, f, o = tf.split(gates, 4, axis=1)
            c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            outputs.append(h)
        return tf.stack(outputs)

    step = lstm_step._sgd_step(forward, params)
    return lambda: step(x)


def build(impl: str, quick: bool) -> dict[str, Sampler]:
    steps = 5 if quick else lstm_step.T
    x = tf.random.normal([steps, lstm_step.BATCH, lstm_step.INPUT], seed=0)
    if impl == "sonnet":
        return {"lstm_step": timed(lstm_step.unrolled_lstm(x))}
    if impl == "keras":
        return {"lstm_step": timed(lstm_step.keras_lstm(x))}
    return {"lstm_step": timed(_raw_lstm(x))}


WORKLOADS = {
    "lstm_step": Workload(
        name="lstm_step",
        rows=(
            Row(
                "lstm_step",
                "ms",
                "tf.function LSTM(256) T=50 batch 32 forward+backward+SGD "
                "(snt.UnrolledLSTM)",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=11,
        number=3,
        quick_repeats=2,
        quick_number=1,
        build=build,
        targets=(Target("lstm_step", KERAS, 0.8),),
    ),
}
