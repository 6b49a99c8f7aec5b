"""Sonnet: composable neural-network modules for TensorFlow 2.

Use as `import sonnet as snt`. Everything public is re-exported here from the
private implementation package `sonnet._src`.
"""

from sonnet import initializers
from sonnet._src.base import Module, Optimizer, allow_empty_variables, no_name_scope
from sonnet._src.once import once

__version__ = "2.1.0.dev0"

__all__ = [
    "Module",
    "Optimizer",
    "allow_empty_variables",
    "initializers",
    "no_name_scope",
    "once",
]
