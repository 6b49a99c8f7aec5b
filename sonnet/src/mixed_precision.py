"""2.0.2's `sonnet.src.mixed_precision` path (see `sonnet.src`)."""

from sonnet._src.mixed_precision import current_mode, disable, enable, modes, scope

# 2.0.2's private name for the current mode (None when off), which code
# written against it read.
_get_mixed_precision_mode = current_mode

__all__ = ["disable", "enable", "modes", "scope"]
