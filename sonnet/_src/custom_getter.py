"""`snt.custom_variable_getter`: rewrite variables read from module attributes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import tensorflow as tf

from sonnet._src import base, class_patch, errors

_GETATTRIBUTE = "__getattribute__"
_NESTS = (list, tuple, dict)


class _Entry:
    """One active `custom_variable_getter` block."""

    __slots__ = ("classes", "getter", "instance_ids", "instances")

    def __init__(
        self,
        getter: Callable[[tf.Variable], Any],
        classes: tuple[type, ...],
        instances: list[Any] | None,
    ):
        self.getter = getter
        self.classes = classes
        # The instances are held so that their ids stay unique while active.
        self.instances = instances
        self.instance_ids = (
            None if instances is None else frozenset(id(i) for i in instances)
        )

    def applies_to(self, obj: Any) -> bool:
        if self.instance_ids is not None and id(obj) not in self.instance_ids:
            return False
        return isinstance(obj, self.classes)


def _apply_getters(entries: list[_Entry], value: Any) -> Any:
    """`value` with each entry's getter applied, in turn, to its variables."""
    if isinstance(value, tf.Variable):
        for entry in entries:
            value = entry.getter(value)
        return value
    if not isinstance(value, _NESTS) or not value:
        return value
    try:
        leaves = tf.nest.flatten(value)
    except (TypeError, ValueError):
        # Not a structure `tf.nest` understands (e.g. unsortable dict keys):
        # such attributes are returned untouched.
        return value
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, tf.Variable)]
    if not positions:
        return value
    for i in positions:
        for entry in entries:
            leaves[i] = entry.getter(leaves[i])
    return tf.nest.pack_sequence_as(value, leaves)


def _unpatched_lookup(cls: type) -> Callable[[Any, str], Any]:
    """The `__getattribute__` `cls` would use if nothing were patched."""
    for klass in cls.__mro__:
        own = _PATCH.original(klass, _GETATTRIBUTE)
        if own is not None:
            return own
    return object.__getattribute__  # pragma: no cover - `object` is in every MRO


def _dispatching(cls: type, attr: str, own: Any) -> Callable[[Any, str], Any]:
    """`cls`'s replacement `__getattribute__`: its unpatched lookup, then the
    getters of the active blocks that apply to the object."""
    lookup = _unpatched_lookup(cls)

    def __getattribute__(obj: Any, name: str) -> Any:
        value = lookup(obj, name)
        # Dunder attributes (`__dict__` above all, which `vars()` and
        # `tf.Module` use to find and mutate state) are never rewritten.
        if name.startswith("__") and name.endswith("__"):
            return value
        entries = [e for e in _PATCH.values if e.applies_to(obj)]
        if not entries:
            return value
        return _apply_getters(entries, value)

    return __getattribute__


# Patched classes are process-global: a block's getter applies in every
# thread. The scopes' values are the active blocks' `_Entry`s, outermost
# first.
_PATCH = class_patch.ClassPatch(_dispatching)


class _CustomVariableGetter:
    """Context manager returned by `custom_variable_getter` (reusable)."""

    def __init__(
        self,
        getter: Callable[[tf.Variable], Any],
        classes: list[type],
        instances: list[Any] | None,
    ):
        self._getter = getter
        self._classes = tuple(classes)
        self._instances = instances
        self._scopes: list[contextlib.AbstractContextManager[Any]] = []

    def __enter__(self) -> None:
        entry = _Entry(self._getter, self._classes, self._instances)
        targets = [(cls, _GETATTRIBUTE) for cls in self._classes]
        scope = _PATCH.scope(lambda: targets, entry)
        scope.__enter__()
        self._scopes.append(scope)

    def __exit__(self, *exc_info: Any) -> None:
        self._scopes.pop().__exit__(*exc_info)


# CPython type flags: only heap types that are not immutable (i.e. classes
# defined in Python) accept a new `__getattribute__`.
_HEAPTYPE = 1 << 9
_IMMUTABLETYPE = 1 << 8


def _patchable(cls: type) -> bool:
    flags = cls.__flags__
    return bool(flags & _HEAPTYPE) and not flags & _IMMUTABLETYPE


def _check_classes(classes: Any) -> list[type]:
    if isinstance(classes, type):
        classes = [classes]
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Iterable):
        raise errors.bad_type(
            "classes", "must be a sequence of classes or None", classes
        )
    result: list[type] = []
    for cls in classes:
        if not isinstance(cls, type):
            raise errors.bad_type("classes", "must contain only classes", cls)
        if not _patchable(cls):
            raise errors.bad_type(
                "classes",
                "must contain classes defined in Python (built-in types cannot "
                "be patched)",
                cls,
            )
        if cls not in result:
            result.append(cls)
    return result


def _check_instances(instances: Any) -> list[Any]:
    if isinstance(instances, (str, bytes)) or not isinstance(instances, Iterable):
        raise errors.bad_type(
            "instances", "must be a sequence of objects or None", instances
        )
    instances = list(instances)
    for instance in instances:
        if not _patchable(type(instance)):
            raise errors.bad_type(
                "instances",
                "must contain instances of classes defined in Python (built-in "
                "types cannot be patched)",
                instance,
            )
    return instances


def custom_variable_getter(
    getter: Callable[[tf.Variable], Any],
    classes: Iterable[type] | type | None = None,
    instances: Iterable[Any] | None = None,
) -> _CustomVariableGetter:
    """Context manager that applies `getter` to variables read from modules.

    While active, reading an attribute (or property) of an affected object
    whose value is a `tf.Variable`, or a list/tuple/dict containing variables,
    returns the value with `getter` applied to every variable in it; other
    attributes are returned unchanged (mutating them still mutates the
    object). Dunder attributes such as `__dict__` are never rewritten.

    Blocks nest: a variable read inside both an outer and an inner block is
    passed to the outer block's getter, and the result to the inner one's.

    It works by temporarily replacing `__getattribute__` of the affected
    classes, so it affects every thread while active. The original lookup is
    restored when the last block using a class exits, also when a block
    raises.

    Args:
      getter: Called with each variable read; its result is returned in the
        variable's place (e.g. `tf.stop_gradient`, or a cast).
      classes: The classes whose instances are affected (subclasses included).
        Defaults to `snt.Module` when `instances` is also None, else to the
        classes of `instances`.
      instances: If given, only these objects are affected.

    Returns:
      A reusable context manager.

    Raises:
      TypeError: if `getter` is not callable, or `classes`/`instances` are not
        sequences (of classes, for `classes`).

    >>> mod = snt.Linear(1, w_init=snt.initializers.Ones())
    >>> x = tf.ones([1, 2])
    >>> _ = mod(x)
    >>> with tf.GradientTape() as tape:
    ...   with snt.custom_variable_getter(tf.stop_gradient):
    ...     y = mod(x)
    >>> tape.gradient(y, mod.w) is None
    True
    """
    if not callable(getter):
        raise errors.bad_type("getter", "must be callable", getter)
    instance_list = None if instances is None else _check_instances(instances)
    if classes is None:
        if instance_list is None:
            class_list: list[type] = [base.Module]
        else:
            class_list = _check_classes(type(i) for i in instance_list)
    else:
        class_list = _check_classes(classes)
    return _CustomVariableGetter(getter, class_list, instance_list)
