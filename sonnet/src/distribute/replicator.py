"""2.0.2's `sonnet.src.distribute.replicator` path (see `sonnet.src`)."""

from sonnet._src.distribute.replicator import (
    Replicator,
    TpuReplicator,
    create_variables_eagerly,
    replica_local_creator,
)

__all__ = [
    "Replicator",
    "TpuReplicator",
    "create_variables_eagerly",
    "replica_local_creator",
]
