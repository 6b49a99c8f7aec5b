"""`snt.mixed_precision`: run chosen methods in float16/bfloat16.

A process-wide mode (a floating dtype or None) selects the compute dtype.
Methods decorated with `modes(valid_types)` run in that dtype when it is one
of their `valid_types`: floating tensor arguments and floating variables read
from module attributes are cast to it, and floating results are cast back to
float32. Variables themselves are never converted, so they stay float32.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, custom_getter, errors, tf_compat

_SEEN = "_mp_seen"

# The mode is deliberately process-global (not thread-local), as in Sonnet 2.
_mode: tf.DType | None = None


def _check_dtype(dtype: Any) -> tf.DType | None:
    # As in the original any dtype is a mode; only the decorated functions'
    # `valid_types` decide whether it is used.
    return None if dtype is None else checks.dtype("dtype", dtype)


def enable(dtype: Any) -> None:
    """Turns mixed precision on with compute dtype `dtype` (None turns it off).

    Only methods decorated with `snt.mixed_precision.modes` are affected, and
    only if `dtype` is one of their valid types.

    Args:
      dtype: A dtype such as `tf.float16` or `tf.bfloat16` (any spelling
        `tf.as_dtype` takes), or None.

    Raises:
      TypeError: if `dtype` is not a dtype or None.

    >>> snt.mixed_precision.enable(tf.float16)
    >>> snt.mixed_precision.disable()
    """
    global _mode
    _mode = _check_dtype(dtype)


def disable() -> None:
    """Turns mixed precision off (the same as `enable(None)`).

    >>> snt.mixed_precision.enable(tf.float16)
    >>> snt.mixed_precision.disable()
    """
    enable(None)


def current_mode() -> tf.DType | None:
    """The current mixed precision dtype, or None when it is off."""
    return _mode


@contextlib.contextmanager
def _scope(dtype: tf.DType | None) -> Iterator[None]:
    global _mode
    previous = _mode
    _mode = dtype
    try:
        yield
    finally:
        _mode = previous


def scope(dtype: Any) -> contextlib.AbstractContextManager[None]:
    """Context manager that enables `dtype` and restores the previous mode.

    Scopes nest: leaving one restores whatever mode was active when it was
    entered.

    Args:
      dtype: A dtype (see `enable`), or None to turn mixed precision off
        inside the block.

    Returns:
      A context manager.

    Raises:
      TypeError: if `dtype` is not a dtype or None.

    >>> with snt.mixed_precision.scope(tf.bfloat16):
    ...   pass
    """
    return _scope(_check_dtype(dtype))


def _cast_leaf(dtype: tf.DType) -> Callable[[Any], Any]:
    def cast(x: Any) -> Any:
        if (
            isinstance(x, (tf.Tensor, tf.Variable))
            and x.dtype.is_floating
            and x.dtype != dtype
        ):
            return tf.cast(x, dtype)
        return x

    return cast


_to_float32 = _cast_leaf(tf.float32)


def _cast_call(f: Callable[..., Any], dtype: tf.DType, args: Any, kwargs: Any) -> Any:
    cast = _cast_leaf(dtype)
    args, kwargs = tf.nest.map_structure(cast, (args, kwargs))
    with custom_getter.custom_variable_getter(cast):
        out = f(*args, **kwargs)
    return tf.nest.map_structure(_to_float32, out)


class _Modes:
    """The wrapper returned by `modes(valid_types)(f)`.

    A descriptor, so that it can replace a method on a class (`instance` is
    then the object the method is called on).
    """

    def __init__(self, wrapped: Callable[..., Any], valid: frozenset[tf.DType]):
        # `updated=()`: never copy a callable object's state into the wrapper.
        functools.update_wrapper(self, wrapped, updated=())
        self._wrapped = wrapped
        self._valid = valid
        self._key = uuid.uuid4()
        # Whose first call is tracked when called directly: a bound method's
        # object, a callable object itself, or (plain functions) this wrapper.
        if inspect.ismethod(wrapped):
            self._owner: Any = wrapped.__self__
        elif inspect.isroutine(wrapped) or inspect.isclass(wrapped):
            self._owner = None
        else:
            self._owner = wrapped
        self._binds = self._owner is None and (
            inspect.isfunction(wrapped) or tf_compat.is_tf_function(wrapped)
        )
        self._called = False

    def __set_name__(self, owner: type, name: str) -> None:
        # Decorated in a `snt.Module` class body: the metaclass only wraps
        # plain functions in the module's name scope, so do it here.
        if (
            issubclass(owner, base.Module)
            and inspect.isfunction(self._wrapped)
            and base._scopes_enabled()
            and base._wants_name_scope(self._wrapped)
        ):
            self._wrapped = base.with_name_scope(self._wrapped)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None or not self._binds:
            return self
        target = self._wrapped.__get__(instance, owner)  # type: ignore[attr-defined]
        return functools.partial(self._run, instance, target)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._owner, self._wrapped, *args, **kwargs)

    def _run(
        self, instance: Any, target: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        dtype = _mode
        if dtype is None or dtype not in self._valid:
            return target(*args, **kwargs)
        if not self._seen(instance):
            # The first call runs in full precision so that variables created
            # by it get their natural dtype.
            out = target(*args, **kwargs)
            self._mark_seen(instance)
            return out
        return _cast_call(target, dtype, args, kwargs)

    def _seen(self, instance: Any) -> bool:
        state = getattr(instance, "__dict__", None)
        if state is None:
            return self._called
        seen = state.get(_SEEN)
        return seen is not None and self._key in seen

    def _mark_seen(self, instance: Any) -> None:
        if instance is None or not hasattr(instance, "__dict__"):
            # Objects without a `__dict__` are tracked per wrapper.
            self._called = True
            return
        # Written straight into `__dict__`: `tf.Module` must not track it.
        instance.__dict__.setdefault(_SEEN, set()).add(self._key)


def modes(
    valid_types: Iterable[Any],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: run the decorated callable in the mixed precision dtype.

    When the current mode (see `enable`/`scope`) is one of `valid_types`:

    * the first call (per object for methods and callable objects, per
      decoration for plain functions) runs unchanged, in full precision, so
      that variables it creates get their natural dtype;
    * later calls cast every floating tensor/variable in the arguments to the
      mode's dtype, run with floating variables read from `snt.Module`
      attributes cast to it too (see `snt.custom_variable_getter`), and cast
      floating tensors in the result to float32.

    Otherwise the callable runs unchanged. Works on plain functions, on
    methods (decorate in the class body, or replace one after the fact as
    below), on bound methods and on callable objects.

    Args:
      valid_types: The dtypes in which the callable may run, e.g.
        `[tf.float32, tf.float16]`.

    Returns:
      A decorator.

    Raises:
      TypeError: if `valid_types` is not a collection of dtypes, or the
        decorated object is not callable.

    >>> class Half(snt.Linear):
    ...   pass
    >>> Half.__call__ = snt.mixed_precision.modes([tf.float16])(snt.Linear.__call__)
    >>> mod = Half(2)
    >>> x = tf.ones([1, 3])
    >>> with snt.mixed_precision.scope(tf.float16):
    ...   first, second = mod(x), mod(x)
    >>> mod.w.dtype.name, first.dtype.name, second.dtype.name
    ('float32', 'float32', 'float32')
    """
    if isinstance(valid_types, (str, bytes)) or not isinstance(valid_types, Iterable):
        raise errors.bad_type(
            "valid_types", "must be a collection of dtypes", valid_types
        )
    valid = set()
    for dtype in valid_types:
        try:
            valid.add(tf.as_dtype(dtype))
        except TypeError as e:
            raise errors.bad_type(
                "valid_types", "must contain only dtypes", dtype
            ) from e
    frozen = frozenset(valid)

    def decorator(f: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(f):
            # The original failed with `AttributeError` here.
            raise errors.lacks_attribute("f", "must be callable", f)
        return _Modes(f, frozen)  # type: ignore[return-value]

    return decorator
