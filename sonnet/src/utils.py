"""Sonnet 2.0.2's `sonnet.src.utils`: the helpers code built on it used."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src import initializers
from sonnet._src import utils as _utils
from sonnet._src.utils import (
    CompareById,
    get_channel_index,
    replicate,
    smart_autograph,
)
from sonnet._src.variable_table import format_variables, log_variables

_ZEROS = initializers.Zeros()


def _shaped(inputs: Any) -> Any:
    """`inputs`, or a tensor for NumPy arrays and lists (2.0.2 took both)."""
    return (
        inputs
        if isinstance(getattr(inputs, "shape", None), tf.TensorShape)
        else (tf.convert_to_tensor(inputs))
    )


def assert_rank(inputs: Any, rank: int) -> None:
    """Raises a `ValueError` unless `inputs` has exactly `rank` dimensions."""
    _utils.assert_rank(_shaped(inputs), rank)


def assert_minimum_rank(inputs: Any, rank: int) -> None:
    """Raises a `ValueError` unless `inputs` has at least `rank` dimensions."""
    _utils.assert_minimum_rank(_shaped(inputs), rank)


def variable_like(
    inputs: tf.Tensor | tf.Variable,
    initializer: initializers.Initializer = _ZEROS,
    trainable: bool | None = None,
    name: str | None = None,
) -> tf.Variable:
    """A variable with the shape, dtype and device of `inputs`, as 2.0.2 made it.

    Args:
      inputs: A tensor or variable.
      initializer: Its initial value (default zeros).
      trainable: Default None: a variable's own flag, True for a tensor.
      name: Default None: the name of `inputs` (without its `:0`).

    >>> from sonnet.src import utils
    >>> v = utils.variable_like(tf.Variable(tf.ones([2]), trainable=False))
    >>> v.numpy().tolist(), v.trainable
    ([0.0, 0.0], False)
    """
    if trainable is None:
        trainable = getattr(inputs, "trainable", True)
    if name is None:
        name = (getattr(inputs, "name", None) or "Variable").split(":")[0]
    with tf.device(inputs.device):
        return tf.Variable(
            initializer(inputs.shape, inputs.dtype), trainable=trainable, name=name
        )


def decorator(
    decorator_fn: Callable[
        [Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any
    ],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turns `decorator_fn(wrapped, instance, args, kwargs)` into a decorator.

    The wrapt-style helper 2.0.2 kept in `sonnet.src.utils`: the decorator
    made calls `decorator_fn` with the function it wraps, the object it is
    bound to (None for a plain function) and the call's arguments. It
    decorates plain functions, functions defined in a class body whose
    first parameter is `self` (bound per call), bound methods and callable
    objects (their `__call__`, bound to the object).

    >>> from sonnet.src import utils
    >>> @utils.decorator
    ... def twice(wrapped, instance, args, kwargs):
    ...   return 2 * wrapped(*args, **kwargs)
    >>> twice(lambda x: x + 1)(3)
    8
    """

    @functools.wraps(decorator_fn)
    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.ismethod(f):

            @functools.wraps(f)
            def bound(*args: Any, **kwargs: Any) -> Any:
                return decorator_fn(f, f.__self__, args, kwargs)

            return bound
        if inspect.isfunction(f):
            parameters = list(inspect.signature(f).parameters)
            if parameters and parameters[0] == "self":

                @functools.wraps(f)
                def unbound(self: Any, *args: Any, **kwargs: Any) -> Any:
                    return decorator_fn(f.__get__(self, type(self)), self, args, kwargs)

                return unbound

            @functools.wraps(f)
            def plain(*args: Any, **kwargs: Any) -> Any:
                return decorator_fn(f, None, args, kwargs)

            return plain
        call = f.__call__

        @functools.wraps(call)
        def of_object(*args: Any, **kwargs: Any) -> Any:
            return decorator_fn(call, f, args, kwargs)

        return of_object

    return decorate


__all__ = [
    "CompareById",
    "assert_minimum_rank",
    "assert_rank",
    "decorator",
    "format_variables",
    "get_channel_index",
    "log_variables",
    "replicate",
    "smart_autograph",
    "variable_like",
]
