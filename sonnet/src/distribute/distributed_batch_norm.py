"""2.0.2's `sonnet.src.distribute.distributed_batch_norm` path (see `sonnet.src`)."""

from sonnet._src.distribute.batch_norm import CrossReplicaBatchNorm

__all__ = ["CrossReplicaBatchNorm"]
