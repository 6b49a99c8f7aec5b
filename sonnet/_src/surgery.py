"""`snt.surgery`: get, set and replace the submodules of a model by path.

A path names a submodule the way `tf.Module` tracks it, and so the way
checkpoints name it: attribute names, list and tuple indices, and dict keys,
joined by `/` (`"blocks/3/mlp_in"`, or the tuple `("blocks", 3, "mlp_in")`);
a namedtuple's elements by field name (as tracking names them) or index.
`snt.surgery.find(model)` lists them. Attributes are those stored on the
module (its `vars`, where `tf.Module` finds its variables and submodules),
private ones included (`snt.nets.MLP` keeps its layers in `_layers`), not
properties.

Setting a submodule assigns the module's attribute again: TensorFlow's
tracking then checkpoints the new value under the same path. A list, tuple
or dict on the way is rebuilt with the new element and assigned again as a
whole, not changed in place: TensorFlow refuses to checkpoint a tracked list
whose elements were replaced (it tracks append-only lists), and tuples cannot
change. The variables of a module that stays in the tree (a replacement that
wraps or reuses the old module) keep their names and values; the checkpoint
paths of what changed follow the new structure.

A module that keeps its own copies of its submodules outside tracking (a
plain tuple for a fast loop, e.g. `snt.nets.MLP`'s) is kept up to date: it
may define `_refresh_submodules()`, which is called on each module along a
changed path; without it, the untracked tuples and lists (its
`_TF_MODULE_IGNORED_PROPERTIES`) of the module holding the old submodule
get the new one in its place.

What is not carried over: `snt.freeze` and `snt.precision.apply` marks are
per module (apply them to the new one), and functions traced before see the
old structure (trace them again). Submodules of an `snt.LayerStack` (its
template layer, whose variables are stacked) are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import checks, errors, freezing, layer_stack, module_filter

Part = str | int
Path = str | Sequence[Part]


def _parts(path: Any) -> tuple[Part, ...]:
    """`path` as a tuple of attribute names, indices and keys."""
    if isinstance(path, str):
        parts: tuple[Part, ...] = tuple(path.split("/")) if path else ()
    elif isinstance(path, (tuple, list)):
        parts = tuple(path)
    else:
        raise errors.bad_type(
            "path", "must be a str like 'blocks/3/mlp' or a tuple of parts", path
        )
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, (str, int)):
            raise errors.bad_type("path", "must have str or int parts", path)
        if part == "":
            raise errors.bad_value("path", "must not have empty parts", path)
    return parts


def _join(parts: Sequence[Part]) -> str:
    return "/".join(str(p) for p in parts)


def _missing(path: Any, parts: Sequence[Part], i: int, why: str) -> ValueError:
    where = f"`{_join(parts[:i])}`" if i else "`module`"
    return errors.bad_value(
        "path",
        f"must name a submodule of `module`: {where} {why}, so "
        f"`{_join(parts[: i + 1])}` does not exist",
        path,
    )


def _child(value: Any, path: Any, parts: Sequence[Part], i: int) -> Any:
    """The element `parts[i]` of `value` (reached by `parts[:i]`)."""
    part = parts[i]
    if isinstance(value, Mapping):
        if part in value:
            return value[part]
        if isinstance(part, str) and part.lstrip("-").isdigit() and int(part) in value:
            return value[int(part)]
        keys = ", ".join(repr(k) for k in list(value)[:6])
        raise _missing(path, parts, i, f"has no key {part!r} (its keys: {keys})")
    if isinstance(value, (list, tuple)):
        fields = _fields(value)
        if part in fields:  # A namedtuple's field, as tracking names it.
            return value[fields.index(part)]
        index = checks.as_index(part) if isinstance(part, int) else None
        if isinstance(part, str) and part.lstrip("-").isdigit():
            index = int(part)
        if index is None or not -len(value) <= index < len(value):
            raise _missing(
                path, parts, i, f"has no item {part!r} (it has {len(value)} items)"
            )
        return value[index]
    if isinstance(value, tf.Module):
        found = vars(value)
        if isinstance(part, str) and part in found:
            return found[part]
        names = sorted(
            k
            for k, v in found.items()
            if k not in value._TF_MODULE_IGNORED_PROPERTIES  # pyright: ignore[reportAttributeAccessIssue]
            and _holds_modules(v)
        )
        listed = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        hint = f" (its submodules are under: {listed})" if names else ""
        raise _missing(path, parts, i, f"has no attribute {part!r}{hint}")
    raise _missing(
        path, parts, i, f"is a {type(value).__name__}, which holds no submodules"
    )


def _fields(value: Any) -> tuple[str, ...]:
    """The field names of a namedtuple (also wrapped by tracking), else ()."""
    return getattr(getattr(value, "__wrapped__", value), "_fields", ())


def _holds_modules(value: Any) -> bool:
    return any(isinstance(v, tf.Module) for v in tf.nest.flatten(value))


def _chain(module: Any, path: Any) -> tuple[tuple[Part, ...], list[Any]]:
    """The parts of `path` and the values along it, `module` first."""
    freezing.check_module(module)
    parts = _parts(path)
    chain = [module]
    for i in range(len(parts)):
        chain.append(_child(chain[-1], path, parts, i))
    return parts, chain


def get(module: Any, path: Path) -> Any:
    """The submodule (or other value) of `module` at `path`.

    Args:
      module: A `tf.Module`, e.g. a model.
      path: Attribute names, list indices and dict keys joined by `/`
        (`"blocks/3/mlp_in"`), or a tuple of them; `""` is `module` itself.

    Returns:
      The value at `path`.

    Raises:
      ValueError: if `path` does not exist, naming its first missing part.
      TypeError: if `module` is not a `tf.Module` or `path` is malformed.

    >>> mlp = snt.nets.MLP([4, 2])
    >>> snt.surgery.get(mlp, "_layers/1")
    Linear(output_size=2, name='linear_1')
    >>> snt.surgery.get(mlp, "_layers/2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `path` must name a submodule of `module`: `_layers` has no item '2' ...
    """
    return _chain(module, path)[1][-1]


def _check_settable(path: Any, parts: Sequence[Part], chain: list[Any]) -> None:
    if not parts:
        raise errors.bad_value(
            "path", "must name a submodule of `module`, not `module` itself", path
        )
    for i, value in enumerate(chain[:-1]):
        if isinstance(value, layer_stack.LayerStack):
            where = f"`{_join(parts[:i])}`" if i else "`module`"
            raise errors.bad_value(
                "path",
                f"must not lead into an `snt.LayerStack` ({where}): its layer's "
                "variables are stacked; replace the whole stack",
                path,
            )
    if isinstance(chain[-1], tf.Variable):
        raise errors.bad_value(
            "path",
            "must name a submodule, not a variable (assign variables with "
            "`variable.assign`)",
            path,
        )


def _rebuilt(container: Any, part: Part, value: Any) -> Any:
    """A copy of the list, tuple or dict `container` with `value` at `part`."""
    if isinstance(container, Mapping):
        items = dict(container)
        key = part if part in items else int(part)
        items[key] = value
        return items
    items = list(container)
    fields = _fields(container)
    items[fields.index(part) if part in fields else int(part)] = value
    original = getattr(container, "__wrapped__", container)
    if isinstance(original, tuple):
        make = getattr(type(original), "_make", None)  # A namedtuple.
        return make(items) if make is not None else tuple(items)
    return items


def _assign(parts: Sequence[Part], chain: list[Any], value: Any) -> None:
    """Puts `value` at `parts`: containers on the way are rebuilt and set
    again on the module holding them, whose copies are then refreshed."""
    old, new = chain[-1], value
    for i in range(len(parts) - 1, -1, -1):
        holder = chain[i]
        if isinstance(holder, (Mapping, list, tuple)):
            value = _rebuilt(holder, parts[i], value)
        else:
            setattr(holder, str(parts[i]), value)
            _refresh(holder, old, new, chain)
            return


def _refresh(holder: Any, old: Any, new: Any, chain: list[Any]) -> None:
    """Brings the modules along a changed path up to date.

    A module that keeps its own copies of its submodules (a plain tuple for
    a fast loop, outside tracking) defines `_refresh_submodules()`, called
    on each module along the path. Without it, the untracked tuples and
    lists of the module that held `old` get `new` in `old`'s place.
    """
    for module in chain[:-1]:
        refresh = getattr(module, "_refresh_submodules", None)
        if isinstance(module, tf.Module) and refresh is not None:
            refresh()
    if getattr(holder, "_refresh_submodules", None) is not None:
        return
    ignored = holder._TF_MODULE_IGNORED_PROPERTIES  # pyright: ignore[reportAttributeAccessIssue]
    for name in ignored & vars(holder).keys():
        copy = vars(holder)[name]
        if isinstance(copy, (tuple, list)) and any(x is old for x in copy):
            items = [new if x is old else x for x in copy]
            vars(holder)[name] = type(copy)(items)


def set(module: Any, path: Path, new: Any) -> Any:
    """Replaces the submodule of `module` at `path` by `new`.

    The attribute (or the list, tuple or dict element) at `path` is assigned
    `new`; containers on the way are rebuilt (see `snt.surgery`). Only this
    path changes: a module also reachable elsewhere stays there.

    Args:
      module: A `tf.Module`, e.g. a model.
      path: The existing submodule's path (see `snt.surgery.get`).
      new: The replacement, usually a module (a function works where the
        model calls it, e.g. in `snt.Sequential`).

    Returns:
      The value that was at `path`.

    Raises:
      ValueError: if `path` does not exist (naming its first missing part),
        is empty, names a variable, or leads into an `snt.LayerStack`, or
        when called inside a `tf.function`. Nothing is changed then.
      TypeError: if `module` is not a `tf.Module` or `path` is malformed.

    >>> mlp = snt.nets.MLP([4, 2])
    >>> old = snt.surgery.set(mlp, "_layers/1", snt.Linear(3, name="head"))
    >>> mlp(tf.ones([1, 5])).shape
    TensorShape([1, 3])
    """
    module_filter.check_eager(module, "changed")
    parts, chain = _chain(module, path)
    _check_settable(path, parts, chain)
    _assign(parts, chain, new)
    return chain[-1]


def _predicate(predicate: Any) -> Callable[[Any], bool]:
    if isinstance(predicate, type) or (
        isinstance(predicate, tuple)
        and predicate
        and all(isinstance(t, type) for t in predicate)
    ):
        kinds = predicate
        return lambda m: isinstance(m, kinds)
    if not callable(predicate):
        raise errors.bad_type(
            "predicate",
            "must be a class, a tuple of classes or a callable `module -> bool`",
            predicate,
        )
    return lambda m: bool(predicate(m))


def _submodules(module: tf.Module) -> list[tuple[tuple[Part, ...], tf.Module]]:
    """Every `(path, submodule)` of `module`, a shared one at each path."""
    flatten = module._flatten  # pyright: ignore[reportAttributeAccessIssue]
    return list(flatten(with_path=True, predicate=_is_module))


def _is_module(value: Any) -> bool:
    return isinstance(value, tf.Module)


def find(module: Any, predicate: Any = None) -> dict[str, Any]:
    """The submodules of `module` by path (those matching `predicate`).

    Args:
      module: A `tf.Module`.
      predicate: A class or tuple of classes (instances match), a callable
        `module -> bool`, or None (default: every submodule).

    Returns:
      `{path: submodule}` in `tf.Module`'s walk order; a submodule reachable
      by several paths appears under each.

    >>> mlp = snt.nets.MLP([4, 2])
    >>> snt.surgery.find(mlp)  # doctest: +NORMALIZE_WHITESPACE
    {'_layers/0': Linear(output_size=4, name='linear_0'),
     '_layers/1': Linear(output_size=2, name='linear_1')}
    """
    freezing.check_module(module)
    matches = (lambda m: True) if predicate is None else _predicate(predicate)
    return {_join(p): m for p, m in _submodules(module) if matches(m)}


def replace(module: Any, predicate: Any, factory: Callable[[Any], Any]) -> dict:
    """Replaces every submodule matching `predicate` by `factory(old)`.

    The walk goes from `module` down and does not enter a matched module
    (its own submodules are the factory's business) nor `module` itself. A
    module reachable by several paths is replaced by one new module at each.
    `factory(old)` runs in the name scope of the module holding `old`, as
    that module's constructor built its children: `snt.Linear(8,
    name=old.name)` gets `old`'s variable names. A factory that wraps or
    reuses `old` keeps its variables (names and values). Every factory call
    runs before anything changes, so a failing one changes nothing.

    Args:
      module: A `tf.Module`, e.g. a model.
      predicate: A class or tuple of classes (instances match), or a
        callable `module -> bool`.
      factory: A callable `old -> new`.

    Returns:
      `{path: new}` for every path replaced.

    Raises:
      ValueError: if nothing matches, a match is inside an `snt.LayerStack`,
        or when called inside a `tf.function`. Nothing is changed then.
      TypeError: if `module` is not a `tf.Module`, or `predicate` or
        `factory` is not callable.

    >>> mlp = snt.nets.MLP([4, 2])
    >>> _ = mlp(tf.ones([1, 3]))
    >>> new = snt.surgery.replace(
    ...     mlp, snt.Linear, lambda old: snt.Linear(old.output_size, name=old.name))
    >>> sorted(new)
    ['_layers/0', '_layers/1']
    >>> _ = mlp(tf.ones([1, 3]))
    >>> [v.name for v in mlp.variables]  # doctest: +NORMALIZE_WHITESPACE
    ['mlp/linear_0/b:0', 'mlp/linear_0/w:0', 'mlp/linear_1/b:0', 'mlp/linear_1/w:0']
    """
    module_filter.check_eager(module, "changed")
    freezing.check_module(module)
    matches = _predicate(predicate)
    if not callable(factory):
        raise errors.bad_type("factory", "must be a callable `old -> new`", factory)
    found: list[tuple[tuple[Part, ...], tf.Module]] = []
    for path, sub in _submodules(module):
        if any(path[: len(p)] == p for p, _ in found) or not matches(sub):
            continue
        _, chain = _chain(module, path)
        _check_settable(_join(path), path, chain)
        found.append((path, sub))
    if not found:
        raise errors.bad_value(
            "predicate", "must match at least one submodule of `module`", predicate
        )
    made: dict[int, Any] = {}
    for path, old in found:
        if id(old) not in made:
            _, chain = _chain(module, path)
            holder = next(v for v in reversed(chain[:-1]) if isinstance(v, tf.Module))
            with holder.name_scope:
                made[id(old)] = factory(old)
    for path, old in found:
        parts, chain = _chain(module, path)  # Containers may have been rebuilt.
        _assign(parts, chain, made[id(old)])
    return {_join(path): made[id(old)] for path, old in found}
