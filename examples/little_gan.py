"""A little GAN on handwritten digits, with a spectrally normalised discriminator.

    python examples/little_gan.py            # about a minute on a laptop CPU
    python examples/little_gan.py --quick    # a few seconds of training

The generator is an `snt.nets.MLP` from a 32-d Gaussian code to 8x8 images. The
discriminator is an MLP of `snt.Linear`s given spectral normalisation by
`snt.spectral_norm.add`: each layer's weights are divided by their largest
singular value, estimated by power iteration (Miyato et al. 2018,
arXiv:1802.05957), one step per training step (`snt.spectral_norm.update`).

Writes `samples.png` to `--out` (default `examples/out/little_gan`): one row of
samples from the same fixed codes at several points of training; TensorBoard
logs to `--logdir`. A quick run is far too short for the generator to learn to
use its codes: its samples all look alike, and the script says so.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import tools


def parse_args() -> argparse.Namespace:
    parser = tools.parser(__doc__)
    tools.add_common_arguments(parser, "little_gan", steps=3000, quick_steps=60)
    parser.add_argument("--batch-size", type=int, default=64, help="images per step")
    parser.add_argument(
        "--latent-size", type=int, default=32, help="size of the generator's codes"
    )
    parser.add_argument("--snapshots", type=int, default=5, help="rows in samples.png")
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


class Discriminator(snt.Module):
    """An MLP: images -> one real/fake logit each (spectrally normalised by
    `snt.spectral_norm.add` once built)."""

    def __init__(self, hidden_sizes: list[int], name: str | None = None):
        super().__init__(name=name)
        self.layers = [
            snt.Linear(size, name=f"linear_{i}")
            for i, size in enumerate([*hidden_sizes, 1])
        ]

    def __call__(self, images: tf.Tensor) -> tf.Tensor:
        x = tf.reshape(images, [-1, math.prod(images.shape[1:])])
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = tf.nn.leaky_relu(x, alpha=0.2)
        return x[:, 0]


def main(args: argparse.Namespace) -> None:
    tf.random.set_seed(args.seed)
    data = datasets.load(args.data)
    image_shape = data.x_train.shape[1:]
    num_pixels = math.prod(image_shape)
    print(f"{data.name}: {len(data.x_train)} training images of shape {image_shape}")

    generator = snt.nets.MLP([128, 256, num_pixels], name="generator")
    discriminator = Discriminator([256, 128], name="discriminator")
    # Built on one batch, then every layer divides its weights by their
    # spectral norm; the estimates are refined once per training step.
    discriminator(tf.zeros([1, *image_shape]))
    snt.spectral_norm.add(discriminator, seed=args.seed)
    # beta1=0.5 is the usual choice for GANs: less momentum, fewer oscillations.
    # The spectrally normalised discriminator learns at twice the generator's
    # rate (two time scales, Heusel et al. 2017, as in SAGAN/BigGAN).
    g_optimizer = snt.optimizers.Adam(2e-4, beta1=0.5)
    d_optimizer = snt.optimizers.Adam(4e-4, beta1=0.5)

    def generate(codes: tf.Tensor) -> tf.Tensor:
        pixels = tf.sigmoid(generator(codes))
        return tf.reshape(pixels, [-1, *image_shape])

    # Traced on specs, nothing run: this also builds both networks.
    writer = tools.tensorboard(args.logdir)
    for name, net, spec in [
        ("generator", generator, [args.batch_size, args.latent_size]),
        ("discriminator", discriminator, [args.batch_size, *image_shape]),
    ]:
        tools.show_summary(f"{name}/summary", snt.summary(net, tf.TensorSpec(spec)))

    @tf.function
    def train_step(real: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        snt.spectral_norm.update(discriminator)  # Training: refine the estimates.
        codes = tf.random.normal([tf.shape(real)[0], args.latent_size])
        with tf.GradientTape(persistent=True) as tape:
            fake = generate(codes)
            real_logits = discriminator(real)
            fake_logits = discriminator(fake)
            d_loss = tf.reduce_mean(
                tf.nn.softplus(-real_logits) + tf.nn.softplus(fake_logits)
            )
            # The "non-saturating" loss: strong gradients while D wins easily.
            g_loss = tf.reduce_mean(tf.nn.softplus(-fake_logits))
        d_params = discriminator.trainable_variables
        g_params = generator.trainable_variables
        d_optimizer.apply(tape.gradient(d_loss, d_params), d_params)
        g_optimizer.apply(tape.gradient(g_loss, g_params), g_params)
        # How often D tells real from fake (0.5: it cannot; 1: G has lost).
        d_accuracy = 0.5 * (
            tf.reduce_mean(tf.cast(real_logits > 0, tf.float32))
            + tf.reduce_mean(tf.cast(fake_logits < 0, tf.float32))
        )
        return d_loss, g_loss, d_accuracy

    fixed_codes = tf.random.normal([10, args.latent_size], seed=args.seed)
    snapshot_steps = set(np.linspace(0, args.steps, args.snapshots).astype(int))
    rows, labels, history = [], [], []

    def snapshot(step: int) -> None:
        rows.append(generate(fixed_codes).numpy())
        labels.append(f"step {step}")

    batches = iter(datasets.batches(data.x_train, data.y_train, args.batch_size))
    start = time.perf_counter()
    with tools.progress(args.steps) as bar:
        for step in bar:
            if step in snapshot_steps:
                snapshot(step)
            images, _ = next(batches)
            history.append([float(value) for value in train_step(images)])
            bar.record(d_loss=history[-1][0], g_loss=history[-1][1])
            if (step + 1) % 10 == 0:
                d_loss, g_loss, d_accuracy = np.mean(history[-10:], axis=0)
                tf.summary.scalar("train/discriminator_loss", d_loss, step=step + 1)
                tf.summary.scalar("train/generator_loss", g_loss, step=step + 1)
                tf.summary.scalar(
                    "train/discriminator_accuracy", d_accuracy, step=step + 1
                )
    print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f}s")
    snapshot(args.steps)

    if history:
        d_loss, g_loss, d_accuracy = np.mean(history[-50:], axis=0)
        print(
            f"final losses: discriminator {d_loss:.3f}, generator {g_loss:.3f} "
            f"(discriminator accuracy {d_accuracy:.2f})"
        )
    samples = np.concatenate(rows)
    final = samples[-len(fixed_codes) :]
    tf.summary.image("samples", final, step=args.steps, max_outputs=len(final))
    writer.flush()
    print(
        f"sample pixel mean {final.mean():.3f} "
        f"(training images: {data.x_train.mean():.3f})"
    )
    # Early in training (and in a collapsed GAN) every code gives about the
    # same image: compare how far apart samples are with how far apart real
    # images are.
    spread = _mean_distance(final)
    real_spread = _mean_distance(data.x_train[: len(final)])
    print(
        f"sample diversity {spread / real_spread:.2f} (mean distance between "
        "samples / between training images)"
    )
    if spread < 0.3 * real_spread:
        print(
            "the samples are nearly all alike: too little training for the "
            "generator to spread out\n(try --steps 3000), or a collapsed GAN"
        )
    path = os.path.join(args.out, "samples.png")
    plots.save_image_grid(
        path,
        samples,
        columns=10,
        row_labels=labels,
        title="generator samples from 10 fixed codes, during training",
    )
    print(f"wrote {path}; TensorBoard logs in {args.logdir}")


def _mean_distance(images: np.ndarray) -> float:
    """Mean Euclidean distance between the images, over all pairs."""
    flat = images.reshape(len(images), -1)
    distances = np.linalg.norm(flat[:, None] - flat[None, :], axis=-1)
    return float(distances.sum() / (len(flat) * (len(flat) - 1)))


if __name__ == "__main__":
    main(ARGS)
