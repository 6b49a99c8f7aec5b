"""2.0.2's `sonnet.src.mixed_precision` path (see `sonnet.src`)."""

from sonnet._src.mixed_precision import disable, enable, modes, scope

__all__ = ["disable", "enable", "modes", "scope"]
