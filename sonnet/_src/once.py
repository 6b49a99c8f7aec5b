"""`@snt.once`: run a function (or a method, per instance) at most once."""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable
from typing import Any

from sonnet._src import errors

ONCE_ATTRIBUTE = "__snt_once_wrapped__"
_RECORD = "_snt_once"


def _no_return_value(result: Any) -> None:
    if result is not None:
        raise ValueError(
            "A function decorated with `@snt.once` must return None. "
            f"Received: {result!r}."
        )


def _run(f: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    _no_return_value(f(*args, **kwargs))


def _record_of(instance: Any) -> set[uuid.UUID] | None:
    state = getattr(instance, "__dict__", None)
    return None if state is None else state.get(_RECORD)


def _mark_done(instance: Any, key: uuid.UUID) -> None:
    # Written straight into `__dict__` so that modules which forward attribute
    # writes (e.g. `snt.Deferred`) or track them (`tf.Module`) are bypassed.
    state = instance.__dict__
    record = state.get(_RECORD)
    if record is None:
        state[_RECORD] = record = set()
    record.add(key)


class _Once:
    """Descriptor returned by `once`: per-instance for methods, global otherwise."""

    def __init__(self, f: Callable[..., Any]):
        functools.update_wrapper(self, f)
        setattr(self, ONCE_ATTRIBUTE, f)
        key = uuid.uuid4()
        self._key = key
        self._done = False

        def method(instance: Any, *args: Any, **kwargs: Any) -> None:
            record = _record_of(instance)
            if record is not None and key in record:
                return
            _run(f, instance, *args, **kwargs)
            _mark_done(instance, key)

        self._method = method

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return self._method.__get__(instance, owner)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self._done:
            return
        _run(self.__wrapped__, *args, **kwargs)  # type: ignore[attr-defined]
        self._done = True


def once(f: Callable[..., Any]) -> Any:
    """Decorator that runs `f` at most once (once per instance for methods).

    If `f` raises, it has not run: the next call tries again. `f` must return
    None. Typical use is lazily creating variables from the first input. In
    an `snt.Module` class, such a method first called while a `tf.function`
    is traced runs outside the trace (`tf.init_scope()`), so its initial
    values and variables are eager and TensorFlow traces once instead of
    twice; if it needs the values of graph tensors (e.g. of the inputs), it
    runs again inside the trace.

    Args:
      f: A function, a method defined in a class body, a bound method or a
        callable object.

    Returns:
      A wrapper with the same calling convention as `f`.

    Raises:
      TypeError: if `f` is not callable (also an `AttributeError`, as in the
        original).

    >>> class Counter:
    ...   calls = 0
    ...   @snt.once
    ...   def setup(self):
    ...     Counter.calls += 1
    >>> c = Counter()
    >>> c.setup(); c.setup()
    >>> Counter.calls
    1
    """
    if not callable(f):
        # The original failed with `AttributeError` here.
        raise errors.lacks_attribute("f", "must be callable", f)
    if inspect.ismethod(f):
        instance, func = f.__self__, f.__func__
        key = uuid.uuid4()

        @functools.wraps(func)
        def bound(*args: Any, **kwargs: Any) -> None:
            record = _record_of(instance)
            if record is not None and key in record:
                return
            _run(func, instance, *args, **kwargs)
            _mark_done(instance, key)

        setattr(bound, ONCE_ATTRIBUTE, f)
        return bound
    return _Once(f)
