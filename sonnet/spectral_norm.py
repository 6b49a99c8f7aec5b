"""Spectral normalisation of weights: `snt.spectral_norm.add(model)`."""

from sonnet._src.spectral_norm import SpectralNorm as SpectralNorm
from sonnet._src.spectral_norm import add as add
from sonnet._src.spectral_norm import remove as remove
from sonnet._src.spectral_norm import update as update

__all__ = ["SpectralNorm", "add", "remove", "update"]
