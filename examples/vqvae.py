"""A small VQ-VAE on handwritten digits, with `snt.nets.VectorQuantizerEMA`.

    python examples/vqvae.py            # under a minute on a laptop CPU
    python examples/vqvae.py --quick    # a few seconds, for tests

A convolutional encoder maps each 8x8 digit to a 4x4 grid of 16-d vectors; the
vector quantizer replaces each vector by its nearest codebook entry (the codebook
follows the encoder outputs by exponential moving averages, not by gradients);
a decoder rebuilds the image from the 4x4 grid of codes. The loss is the
reconstruction error plus the quantizer's commitment loss (van den Oord et al.
2017, arXiv:1711.00937).

Writes `reconstructions.png` to `--out` (default `examples/out/vqvae`):
test digits above their reconstructions.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import tensorflow as tf
import tqdm

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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="MNIST/CIFAR-10 .npz or tarball (optional)")
    parser.add_argument("--steps", type=int, help="training steps (default 1000)")
    parser.add_argument("--quick", action="store_true", help="a few seconds' run")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join("examples", "out", "vqvae"))
    args = parser.parse_args()
    if args.steps is None:
        args.steps = 80 if args.quick else 1000
    return args


def main() -> None:
    args = parse_args()
    tf.random.set_seed(args.seed)
    data = datasets.load(args.data)
    # Dividing by the data variance makes the reconstruction loss scale-free.
    data_variance = float(np.var(data.x_train))
    model = VQVAE(channels=data.x_train.shape[-1])
    optimizer = snt.optimizers.Adam(1e-3)

    @tf.function
    def train_step(images: tf.Tensor) -> dict[str, tf.Tensor]:
        with tf.GradientTape() as tape:
            out = model(images, is_training=True)
            error = tf.reduce_mean((out["reconstruction"] - images) ** 2)
            loss = error / data_variance + out["vq_loss"]
        params = model.trainable_variables  # The codebook is not among them.
        optimizer.apply(tape.gradient(loss, params), params)
        return {"error": error, "perplexity": out["perplexity"]}

    @tf.function
    def reconstruct(images: tf.Tensor) -> dict[str, tf.Tensor]:
        return model(images, is_training=False)

    batches = iter(datasets.batches(data.x_train, data.y_train, args.batch_size))
    with tqdm.trange(args.steps, desc="training", mininterval=0.5) as bar:
        for step in bar:
            images, _ = next(batches)
            stats = train_step(images)
            if step % 25 == 0:
                bar.set_postfix(
                    error=f"{float(stats['error']):.4f}",
                    perplexity=f"{float(stats['perplexity']):.1f}",
                )

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

    shown = 12
    recon = np.clip(out["reconstruction"].numpy()[:shown], 0.0, 1.0)
    path = os.path.join(args.out, "reconstructions.png")
    plots.save_image_grid(
        path,
        np.concatenate([data.x_test[:shown], recon]),
        columns=shown,
        row_labels=["original", "reconstructed"],
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
