"""2.0.2's `sonnet.src.batch_norm` path (see `sonnet.src`)."""

from sonnet._src.batch_norm import BaseBatchNorm, BatchNorm

__all__ = ["BaseBatchNorm", "BatchNorm"]
