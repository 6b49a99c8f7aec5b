"""A small VQ-VAE on handwritten digits, with `snt.nets.VectorQuantizerEMA`.

    python examples/vqvae.py            # under a minute on a laptop CPU
    python examples/vqvae.py --quick    # a few seconds of training

A convolutional encoder maps each 8x8 digit to a 4x4 grid of 16-d vectors; the
vector quantizer replaces each vector by its nearest codebook entry (the codebook
follows the encoder outputs by exponential moving averages, not by gradients);
a decoder rebuilds the image from the 4x4 grid of codes. The loss is the
reconstruction error plus the quantizer's commitment loss (van den Oord et al.
2017, arXiv:1711.00937).

Writes `reconstructions.png` to `--out` (default `examples/out/vqvae`):
test digits above their reconstructions; TensorBoard logs to `--logdir`.
"""

from __future__ import annotations

import argparse
import os
import time

import tools


def parse_args() -> argparse.Namespace:
    parser = tools.parser(__doc__)
    tools.add_common_arguments(parser, "vqvae", steps=1000, quick_steps=80)
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


class VQVAE(snt.Module):
    """Encoder -> vector quantizer -> decoder, for images with `channels` channels."""

    def __init__(
        self,
        channels: int,
        embedding_dim: int = 16,
        num_embeddings: int = 64,
        hidden: int = 64,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.encoder = snt.Sequential(
            [
                snt.Conv2D(hidden, 4, stride=2, name="down"),
                tf.nn.relu,
                snt.Conv2D(hidden, 3, name="conv"),
                tf.nn.relu,
                snt.Conv2D(embedding_dim, 1, name="to_codes"),
            ]
        )
        self.quantizer = snt.nets.VectorQuantizerEMA(
            embedding_dim=embedding_dim,
            num_embeddings=num_embeddings,
            commitment_cost=0.25,
            decay=0.99,
        )
        self.decoder = snt.Sequential(
            [
                snt.Conv2D(hidden, 3, name="conv"),
                tf.nn.relu,
                snt.Conv2DTranspose(hidden, 4, stride=2, name="up"),
                tf.nn.relu,
                snt.Conv2D(channels, 3, name="to_pixels"),
            ]
        )

    def __call__(self, images: tf.Tensor, is_training: bool) -> dict[str, tf.Tensor]:
        vq = self.quantizer(self.encoder(images), is_training=is_training)
        reconstruction = self.decoder(vq["quantize"])
        return {
            "reconstruction": reconstruction,
            "vq_loss": vq["loss"],
            "perplexity": vq["perplexity"],
        }


def main(args: argparse.Namespace) -> None:
    tf.random.set_seed(args.seed)
    data = datasets.load(args.data)
    # Dividing by the data variance makes the reconstruction loss scale-free.
    data_variance = float(np.var(data.x_train))
    model = VQVAE(channels=data.x_train.shape[-1])
    optimizer = snt.optimizers.Adam(1e-3)
    image_spec = tf.TensorSpec([args.batch_size, *data.x_train.shape[1:]])
    writer = tools.tensorboard(args.logdir)
    tools.show_summary(
        "model/summary", snt.summary(model, image_spec, is_training=True)
    )

    @tf.function
    def train_step(images: tf.Tensor) -> dict[str, tf.Tensor]:
        with tf.GradientTape() as tape:
            out = model(images, is_training=True)
            error = tf.reduce_mean((out["reconstruction"] - images) ** 2)
            loss = error / data_variance + out["vq_loss"]
        params = model.trainable_variables  # The codebook is not among them.
        optimizer.apply(tape.gradient(loss, params), params)
        return {"loss": loss, "error": error, "perplexity": out["perplexity"]}

    @tf.function
    def reconstruct(images: tf.Tensor) -> dict[str, tf.Tensor]:
        return model(images, is_training=False)

    batches = iter(datasets.batches(data.x_train, data.y_train, args.batch_size))
    start = time.perf_counter()
    formats = {"error": ".4f", "perplexity": ".1f"}
    with tools.progress(args.steps, formats=formats) as bar:
        for step in bar:
            images, _ = next(batches)
            stats = train_step(images)
            bar.record(error=stats["error"], perplexity=stats["perplexity"])
            if (step + 1) % 10 == 0:
                for name, value in stats.items():
                    tf.summary.scalar(f"train/{name}", value, step=step + 1)

    print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f}s")
    out = reconstruct(data.x_test)
    error = float(tf.reduce_mean((out["reconstruction"] - data.x_test) ** 2))
    baseline = float(np.mean((data.x_train.mean(axis=0) - data.x_test) ** 2))
    print(
        f"test reconstruction error: {error:.4f} "
        f"(predicting the mean training image: {baseline:.4f})"
    )
    print(
        f"codebook perplexity on the test set: {float(out['perplexity']):.1f} "
        f"of {model.quantizer.num_embeddings} codes"
    )
    tf.summary.scalar("test/reconstruction_error", error, step=args.steps)
    tf.summary.scalar("test/perplexity", out["perplexity"], step=args.steps)
    writer.flush()

    shown = 12
    recon = np.clip(out["reconstruction"].numpy()[:shown], 0.0, 1.0)
    path = os.path.join(args.out, "reconstructions.png")
    plots.save_image_grid(
        path,
        np.concatenate([data.x_test[:shown], recon]),
        columns=shown,
        row_labels=["original", "reconstructed"],
        title=f"{shown} test digits (top) and their reconstructions (bottom) "
        f"after {args.steps} steps",
    )
    print(f"wrote {path}; TensorBoard logs in {args.logdir}")


if __name__ == "__main__":
    main(ARGS)
