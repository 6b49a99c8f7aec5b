"""Train an MLP on handwritten digits with the functional API, `snt.functional`.

    python examples/functional_mlp.py                    # Adam, about 98% test accuracy
    python examples/functional_mlp.py --optimizer sgd
    python examples/functional_mlp.py --quick            # a few seconds of training

The JAX/Haiku style on TensorFlow: `snt.functional.transform` turns a module into
a pair of pure functions, `init(inputs) -> params` and
`apply(params, inputs) -> outputs`, where `params` is a dict of tensors (keyed by
the variable each one stands for). Gradients come from
`snt.functional.value_and_grad`, updates from the functional optimizers
`snt.functional.adam` / `snt.functional.sgd`, and the training step is compiled
with `snt.functional.jit`. No `tf.Variable` is updated anywhere: each step takes
params and optimizer state and returns new ones.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import tools


def parse_args() -> argparse.Namespace:
    parser = tools.parser(__doc__)
    tools.add_common_arguments(parser, "functional_mlp", steps=1500, quick_steps=100)
    parser.add_argument(
        "--optimizer",
        choices=["adam", "sgd"],
        default="adam",
        help="snt.functional.adam (learning rate 1e-3) or sgd (0.1)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="images per step")
    args = parser.parse_args()
    tools.finish_arguments(args)
    return args


# The command line is read before TensorFlow loads (seconds): `--help` and
# mistakes in arguments answer at once.
if __name__ == "__main__":
    ARGS = parse_args()
tools.import_tensorflow()

import numpy as np
import tensorflow as tf

import sonnet as snt

import datasets
import plots


def main(args: argparse.Namespace) -> None:
    tf.random.set_seed(args.seed)
    data = datasets.load(args.data)
    x_train = data.x_train.reshape(len(data.x_train), -1)
    x_test = data.x_test.reshape(len(data.x_test), -1)
    print(f"{data.name}: {len(x_train)} training and {len(x_test)} test images")

    # Modules built under `variables()` hold placeholders, not real variables:
    # `transform` gives them values from `params` for each `apply`.
    with snt.functional.variables():
        mlp = snt.nets.MLP([256, 128, data.num_classes])
    model = snt.functional.transform(mlp)
    params = model.init(x_train[:1])
    shapes = ", ".join(f"{k.deref().name} {v.shape}" for k, v in params.items())
    print(tools.wrap(f"parameters: {shapes}"))
    # `apply` runs the module on the params it is given (here, their specs).
    spec = tf.TensorSpec([args.batch_size, x_train.shape[1]])
    writer = tools.tensorboard(args.logdir)
    tools.show_summary("model/summary", snt.summary(model.apply, params, spec))

    if args.optimizer == "adam":
        optimizer = snt.functional.adam(learning_rate=1e-3)
    else:
        optimizer = snt.functional.sgd(learning_rate=0.1)
    opt_state = optimizer.init(params)

    def loss_fn(params: Any, images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        logits = model.apply(params, images)
        return tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        )

    @snt.functional.jit
    def train_step(params: Any, opt_state: Any, images: tf.Tensor, labels: tf.Tensor):
        loss, grads = snt.functional.value_and_grad(loss_fn)(params, images, labels)
        params, opt_state = optimizer.apply(opt_state, grads, params)
        return params, opt_state, loss

    predict = snt.functional.jit(model.apply)

    losses = []
    batches = iter(datasets.batches(x_train, data.y_train, args.batch_size, args.seed))
    start = time.perf_counter()
    with tools.progress(args.steps) as bar:
        for step in bar:
            images, labels = next(batches)
            params, opt_state, loss = train_step(params, opt_state, images, labels)
            losses.append(float(loss))
            bar.record(loss=losses[-1])
            if (step + 1) % 10 == 0:
                tf.summary.scalar("train/loss", np.mean(losses[-10:]), step=step + 1)

    print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f}s")
    predicted = np.argmax(predict(params, x_test), axis=1)
    accuracy = float(np.mean(predicted == data.y_test))
    print(f"test accuracy: {accuracy:.4f}")
    tf.summary.scalar("test/accuracy", accuracy, step=args.steps)
    writer.flush()
    path = os.path.join(args.out, "loss.png")
    plots.save_curve(path, losses, "cross-entropy", f"training loss ({args.optimizer})")
    print(f"wrote {path}; TensorBoard logs in {args.logdir}")


if __name__ == "__main__":
    main(ARGS)
