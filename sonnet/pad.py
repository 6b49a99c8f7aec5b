"""Padding functions for convolutions: `same`, `valid`, `full`, causal ones."""

from sonnet._src.pad import causal as causal
from sonnet._src.pad import create as create
from sonnet._src.pad import full as full
from sonnet._src.pad import reverse_causal as reverse_causal
from sonnet._src.pad import same as same
from sonnet._src.pad import valid as valid

__all__ = ("causal", "create", "full", "reverse_causal", "same", "valid")
