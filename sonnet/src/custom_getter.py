"""2.0.2's `sonnet.src.custom_getter` path (see `sonnet.src`)."""

from sonnet._src.custom_getter import custom_variable_getter

__all__ = ["custom_variable_getter"]
