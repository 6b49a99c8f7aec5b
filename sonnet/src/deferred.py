"""2.0.2's `sonnet.src.deferred` path (see `sonnet.src`)."""

from sonnet._src.deferred import Deferred

__all__ = ["Deferred"]
