"""2.0.2's `sonnet.src.pad` path (see `sonnet.src`)."""

from __future__ import annotations

from collections.abc import Sequence

from sonnet._src.pad import Padding, causal, create, full, reverse_causal, same, valid

# One padding function, or one per spatial dimension.
Paddings = Padding | Sequence[Padding]

__all__ = [
    "Padding",
    "Paddings",
    "causal",
    "create",
    "full",
    "reverse_causal",
    "same",
    "valid",
]
