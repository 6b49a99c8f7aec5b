"""Train an MLP on handwritten digits with the functional API, `snt.functional`.

    python examples/functional_mlp.py                    # Adam, about 98% test accuracy
    python examples/functional_mlp.py --optimizer sgd
    python examples/functional_mlp.py --quick            # a few seconds, for tests

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
from typing import Any

import numpy as np
import tensorflow as tf
import tqdm

import sonnet as snt

import datasets
import plots


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="MNIST/CIFAR-10 .npz or tarball (optional)")
    parser.add_argument("--steps", type=int, help="training steps (default 1500)")
    parser.add_argument("--quick", action="store_true", help="a few seconds' run")
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", default=os.path.join("examples", "out", "functional_mlp")
    )
    args = parser.parse_args()
    if args.steps is None:
        args.steps = 100 if args.quick else 1500
    return args


def main() -> None:
    args = parse_args()
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
    print(
        "parameters:",
        ", ".join(f"{k.deref().name} {v.shape}" for k, v in params.items()),
    )

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
    with tqdm.trange(args.steps, desc="training", mininterval=0.5) as bar:
        for step in bar:
            images, labels = next(batches)
            params, opt_state, loss = train_step(params, opt_state, images, labels)
            losses.append(float(loss))
            if step % 25 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-25:]):.3f}")

    predicted = np.argmax(predict(params, x_test), axis=1)
    accuracy = float(np.mean(predicted == data.y_test))
    print(f"test accuracy: {accuracy:.4f}")
    path = os.path.join(args.out, "loss.png")
    plots.save_curve(path, losses, "cross-entropy", f"training loss ({args.optimizer})")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
