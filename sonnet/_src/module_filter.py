"""Choosing modules of a tree by kind, enclosing type and name: `snt.lora`, `snt.int8`.

Both features change some modules of a trained tree (its `snt.Linear`s, its
`snt.Embed`s) and take the same two optional filters: `types`, a class (or
tuple of classes) that the module itself or one of the modules enclosing it
must be an instance of (`snt.MultiHeadAttention`: only the attention
projections), and `pattern`, a regular expression searched (`re.search`) in
the module's name path, the prefix of its variables' names
(`"transformer/block_0/attention/query"`). A module reachable twice is chosen
once. A module inside an `snt.LayerStack` (its template layer, `stack.layer`)
is chosen like any other, by the name path of its stacked variables
(`"transformer/stack/block/attention/query"`); `select` says which stack
holds it, since its weights have a leading `num_layers` axis and the
feature must make its variables per layer and rebind the stack
(`LayerStack._new_stacked`, `LayerStack._restack`). Nested stacks are
refused.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import tensorflow as tf

from sonnet._src import errors, freezing, keras_variables, layer_stack


class Chosen(NamedTuple):
    """A module `select` chose, and the `snt.LayerStack` holding it (or None)."""

    module: Any
    stack: layer_stack.LayerStack | None


def check_eager(module: Any, action: str) -> None:
    """Refuses to change a module tree while a `tf.function` is traced: the
    changes (new variables, assignments, Python state) belong to the program
    that builds the model, and a trace would run them once per trace."""
    if tf.inside_function():
        raise errors.bad_value(
            "module",
            f"must be {action} eagerly, not inside a `tf.function` (do it once, "
            "before tracing the functions that call the model)",
            module,
        )


def name_path(module: tf.Module) -> str:
    """The prefix of `module`'s variable names, e.g. `"mlp/linear_0"`."""
    scope: Any = module.name_scope
    return scope.name.rstrip("/")


def check_types(types: Any) -> tuple[type, ...] | None:
    """`types` as a tuple of classes (None: any)."""
    if types is None:
        return None
    found = types if isinstance(types, tuple) else (types,)
    if not found or not all(isinstance(t, type) for t in found):
        raise errors.bad_type(
            "types", "must be a class, a non-empty tuple of classes, or None", types
        )
    return found


def check_pattern(pattern: Any) -> re.Pattern[str] | None:
    """`pattern` compiled (None: any name)."""
    if pattern is None or isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str):
        raise errors.bad_type(
            "pattern", "must be a regular expression (a str) or None", pattern
        )
    try:
        return re.compile(pattern)
    except re.error as e:
        raise errors.bad_value(
            "pattern", f"must be a valid regular expression ({e})", pattern
        ) from e


def select(
    module: Any,
    kinds: tuple[type, ...],
    types: Any = None,
    pattern: Any = None,
) -> list[Chosen]:
    """The instances of `kinds` in `module`'s tree (itself included) that pass
    the filters, in `tf.Module`'s walk order, each with the `snt.LayerStack`
    whose template holds it (None outside stacks).

    Raises a `ValueError` naming `types` or `pattern` when the tree has
    instances of `kinds` but the filters leave none, and one naming `module`
    when it has none at all (saying so when the module is not built yet), or
    when one sits inside nested `snt.LayerStack`s.
    """
    freezing.check_module(module)
    wanted_types = check_types(types)
    wanted_names = check_pattern(pattern)
    # Paths (attribute names and keys from `module`) locate each module's
    # enclosing modules; a module reachable twice counts at its first path.
    by_path: dict[tuple[Any, ...], tf.Module] = {(): module}
    order: list[tuple[tuple[Any, ...], tf.Module]] = [((), module)]
    flatten = module._flatten  # pyright: ignore[reportAttributeAccessIssue]
    for path, found in flatten(with_path=True, predicate=_is_module):
        by_path.setdefault(path, found)
        order.append((path, found))
    seen: set[int] = set()
    typed: set[int] = set()  # Candidates that pass the `types` filter.
    candidates: list[tf.Module] = []
    chosen: list[Chosen] = []
    for path, found in order:
        if not isinstance(found, kinds) or id(found) in seen:
            continue
        seen.add(id(found))
        enclosing = [by_path[path[:i]] for i in range(len(path)) if path[:i] in by_path]
        candidates.append(found)
        if wanted_types is not None and not any(
            isinstance(m, wanted_types) for m in (*enclosing, found)
        ):
            continue
        typed.add(id(found))
        if wanted_names is not None and not wanted_names.search(name_path(found)):
            continue
        stacks = [m for m in enclosing if isinstance(m, layer_stack.LayerStack)]
        if len(stacks) > 1:
            raise errors.bad_value(
                "module",
                f"must not hold `{name_path(found)}` inside nested "
                "`snt.LayerStack`s (its weights have two layer axes); leave it "
                "out with `types` or `pattern`",
                module,
            )
        chosen.append(Chosen(found, stacks[0] if stacks else None))
    kind_names = " or ".join(f"`snt.{k.__name__}`" for k in kinds)
    if not candidates:
        if not _has_variables(module):
            raise errors.bad_value(
                "module",
                f"must be built first (call it once): it has no variables yet, "
                f"so no {kind_names} weights to change",
                module,
            )
        raise errors.bad_value("module", f"must contain a {kind_names}", module)
    if not chosen:
        names = ", ".join(name_path(m) for m in candidates[:4])
        more = ", ..." if len(candidates) > 4 else ""
        # Blame `types` when it alone leaves nothing, else `pattern`.
        by_types = wanted_types is not None and not typed
        argument = "types" if by_types or wanted_names is None else "pattern"
        raise errors.bad_value(
            argument,
            f"must match at least one of the {len(candidates)} {kind_names} of "
            f"`module` ({names}{more}); it matches none",
            types if argument == "types" else pattern,
        )
    return chosen


def check_weight_rank(
    module: Any, layer: Any, attribute: str, stack: layer_stack.LayerStack | None
) -> None:
    """Refuses a chosen layer whose weight `attribute` is stacked
    (`[num_layers, ...]`, rank 3) when `select` found it outside a stack: a
    stack's layer (or a part of it) was given without its stack."""
    weight = getattr(layer, attribute)
    if stack is None and weight.shape.rank == 3:
        raise errors.bad_value(
            "module",
            f"must hold the `snt.LayerStack` of `{name_path(layer)}`, whose "
            f"{attribute} of shape {weight.shape.as_list()} is stacked (pass the "
            "stack, or a module holding it, not its layer)",
            module,
        )


def restack(chosen: list[Chosen]) -> None:
    """Binds each stack holding a changed layer to its template's variables
    as they are now (`LayerStack._restack`), once per stack."""
    stacks = {id(stack): stack for _, stack in chosen if stack is not None}
    for stack in stacks.values():
        stack._restack()


def _is_module(value: Any) -> bool:
    return isinstance(value, tf.Module)


def _has_variables(module: tf.Module) -> bool:
    return bool(keras_variables.variables(module))
