"""2.0.2's `sonnet.src.nets.vqvae` path (see `sonnet.src`)."""

from sonnet._src.nets.vqvae import VectorQuantizer, VectorQuantizerEMA

__all__ = ["VectorQuantizer", "VectorQuantizerEMA"]
