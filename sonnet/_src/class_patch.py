"""Class attributes replaced while a scope is open: the one mechanism.

A few features change classes for a while instead of putting a hook on the
hot path: `snt.summary` (module classes' `__call__`, to record calls),
`snt.distribute.create_variables_eagerly` (initializers' `__call__`, to run
them eagerly) and `snt.custom_variable_getter` (`__getattribute__`, to rewrite
variables read). Each is one `ClassPatch`; this module holds the counting,
the lock and the restoring they share.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["ClassPatch"]

# One lock for every `ClassPatch`: opening and closing scopes is rare, and a
# replacement may look at other classes' state (`ClassPatch.original`).
_LOCK = threading.RLock()


class ClassPatch:
    """One feature's replacements of class attributes, made while scopes are
    open.

    `replace(cls, name, original)` returns what `cls.name` becomes; `original`
    is the class's own attribute (`cls.__dict__`), None if it has none. A
    scope, `with patch.scope(targets, value):`, calls `targets()` as it opens
    and replaces each `(cls, name)` pair listed that is not replaced already;
    counts are per pair, so scopes nest and overlap, in one thread or in
    several. A pair is restored when the last open scope that listed it
    closes, also when that scope closes on an exception, and a scope that
    fails while opening restores what it replaced: the class gets its own
    attribute back, or none where it had none. One lock, shared by every
    `ClassPatch`, guards opening and closing; calls of replaced attributes
    take no lock.

    The classes change for every thread. A replacement that should act only
    in the threads inside a scope asks `current()` (the `value` of this
    thread's innermost open scope, None outside any); `values` holds the
    values of all open scopes, every thread's, in the order they opened.
    Two `ClassPatch` instances must not replace the same attribute.
    """

    def __init__(self, replace: Callable[[type, str, Any], Any]) -> None:
        self._replace = replace
        # (cls, name) -> [the class's own attribute or None, open scopes].
        self._replaced: dict[tuple[type, str], list[Any]] = {}
        self._open: list[_Scope] = []
        self._local = threading.local()
        self.values: tuple[Any, ...] = ()

    def scope(
        self, targets: Callable[[], Iterable[tuple[type, str]]], value: Any = True
    ) -> _Scope:
        """A single-use context manager: the scope described above."""
        return _Scope(self, targets, value)

    def current(self) -> Any:
        """The value of this thread's innermost open scope, or None."""
        stack = getattr(self._local, "stack", None)
        return stack[-1].value if stack else None

    @property
    def replaced(self) -> tuple[tuple[type, str], ...]:
        """The `(cls, name)` pairs replaced now (by any thread's scopes)."""
        with _LOCK:
            return tuple(self._replaced)

    def original(self, cls: type, name: str) -> Any:
        """`cls`'s own attribute `name` as it is without this patch, or None."""
        entry = self._replaced.get((cls, name))
        return cls.__dict__.get(name) if entry is None else entry[0]

    def _acquire(self, cls: type, name: str) -> None:
        entry = self._replaced.get((cls, name))
        if entry is not None:
            entry[1] += 1
            return
        original = cls.__dict__.get(name)
        replacement = self._replace(cls, name, original)
        # `type.__setattr__`: a metaclass's own `__setattr__` is not involved.
        type.__setattr__(cls, name, replacement)
        self._replaced[(cls, name)] = [original, 1]

    def _release(self, cls: type, name: str) -> None:
        entry = self._replaced[(cls, name)]
        entry[1] -= 1
        if entry[1]:
            return
        del self._replaced[(cls, name)]
        if entry[0] is None:
            type.__delattr__(cls, name)
        else:
            type.__setattr__(cls, name, entry[0])


class _Scope:
    """One open (or not yet opened) scope of a `ClassPatch`."""

    __slots__ = ("_pairs", "_patch", "_stack", "_targets", "value")

    def __init__(
        self,
        patch: ClassPatch,
        targets: Callable[[], Iterable[tuple[type, str]]],
        value: Any,
    ) -> None:
        self._patch = patch
        self._targets: Callable[[], Iterable[tuple[type, str]]] | None = targets
        self._pairs: list[tuple[type, str]] = []
        self._stack: list[_Scope] | None = None
        self.value = value

    def __enter__(self) -> Any:
        if self._targets is None:
            raise RuntimeError("A ClassPatch scope can be entered only once.")
        targets, self._targets = self._targets, None
        patch = self._patch
        with _LOCK:
            try:
                for cls, name in targets():
                    patch._acquire(cls, name)
                    self._pairs.append((cls, name))
            except BaseException:
                self._restore()
                raise
            patch._open.append(self)
            patch.values = tuple(s.value for s in patch._open)
        stack = getattr(patch._local, "stack", None)
        if stack is None:
            stack = patch._local.stack = []
        stack.append(self)
        self._stack = stack
        return self.value

    def __exit__(self, *exc_info: Any) -> None:
        if self._stack is None:
            return
        stack, self._stack = self._stack, None
        # Out of order if scopes were closed by hand: remove this one.
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is self:
                del stack[i]
                break
        patch = self._patch
        with _LOCK:
            patch._open.remove(self)
            patch.values = tuple(s.value for s in patch._open)
            self._restore()

    def _restore(self) -> None:
        for cls, name in reversed(self._pairs):
            self._patch._release(cls, name)
        self._pairs.clear()
