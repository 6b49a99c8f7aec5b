"""2.0.2's `sonnet.src.base` path (see `sonnet.src`)."""

import tensorflow as tf

from sonnet._src.base import (
    Module,
    ModuleMetaclass,
    Optimizer,
    allow_empty_variables,
    auto_repr,
    no_name_scope,
    with_name_scope,
)

# The class of `tf.function` objects (2.0.2 named it here).
TFFunctionType = type(tf.function(lambda: None, autograph=False))

__all__ = [
    "Module",
    "ModuleMetaclass",
    "Optimizer",
    "TFFunctionType",
    "allow_empty_variables",
    "auto_repr",
    "no_name_scope",
    "with_name_scope",
]
