"""The one place that touches TensorFlow behaviour with no public API.

`tf.function` objects defined in a module's class body must enter the module's
name scope *inside* the traced Python function (so that variables created
during tracing get the module's prefix) while remaining `tf.function` objects
(so `get_concrete_function` keeps working). TF offers no public hook for that;
`Function._decorate` does exactly this and is what `tf.Module` itself uses.
If it ever disappears we rebuild the function from its public attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

_POLYMORPHIC = tf.types.experimental.PolymorphicFunction


def is_tf_function(value: Any) -> bool:
    """True for objects created by `tf.function`."""
    return isinstance(value, _POLYMORPHIC)


def decorate_tf_function(
    fn: Any, decorator: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Any:
    """Applies `decorator` to the Python function traced by `fn`, in place.

    Returns the (possibly new) `tf.function` object to use.
    """
    decorate = getattr(fn, "_decorate", None)
    if decorate is not None:
        decorate(decorator)
        return fn
    return tf.function(  # pragma: no cover - only on TF versions without _decorate
        decorator(fn.python_function), input_signature=fn.input_signature
    )


def mark_do_not_convert(f: Any) -> Any:
    """Makes AutoGraph call `f` as is (unconverted), at no per-call cost.

    AutoGraph never converts functions carrying the `autograph_info__`
    attribute; `tf.autograph.experimental.do_not_convert` sets it on a wrapper
    that adds a few microseconds to every eager call. Setting it on `f`
    itself (and `functools.wraps` copies it onto the name-scope wrappers)
    gives the same effect for free. If a TF version stops honouring it,
    functions are simply converted again (slower tracing, same results).
    """
    f.autograph_info__ = None
    return f
