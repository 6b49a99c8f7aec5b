"""2.0.2's `sonnet.src.base` path (see `sonnet.src`)."""

from sonnet._src.base import (
    Module,
    ModuleMetaclass,
    Optimizer,
    allow_empty_variables,
    auto_repr,
    no_name_scope,
    with_name_scope,
)

__all__ = [
    "Module",
    "ModuleMetaclass",
    "Optimizer",
    "allow_empty_variables",
    "auto_repr",
    "no_name_scope",
    "with_name_scope",
]
