"""Distribution: `snt.distribute.Replicator`, `TpuReplicator`,
`create_variables_eagerly` and `CrossReplicaBatchNorm`."""

from sonnet._src.distribute.batch_norm import (
    CrossReplicaBatchNorm as CrossReplicaBatchNorm,
)
from sonnet._src.distribute.replicator import Replicator as Replicator
from sonnet._src.distribute.replicator import TpuReplicator as TpuReplicator
from sonnet._src.distribute.replicator import (
    create_variables_eagerly as create_variables_eagerly,
)

__all__ = [
    "create_variables_eagerly",
    "Replicator",
    "TpuReplicator",
    "CrossReplicaBatchNorm",
]
