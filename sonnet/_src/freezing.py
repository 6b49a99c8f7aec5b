"""`snt.freeze` / `snt.unfreeze`: keep a module tree out of `trainable_variables`.

Freezing marks a module and every module in its tree at that moment (its
submodules, depth first) as frozen. A variable that a frozen module holds
itself (an attribute of it, or inside a list, tuple or dict attribute, or a
Keras layer or variable held that way) is then left out of the
`trainable_variables` of every `snt.Module` whose tree contains it: the frozen
module's own, its parents', the model's. Nothing else changes: the
variables keep their `trainable` flag, names, `variables` order and
checkpoint paths, so a frozen model saves and restores as before. Modules
added to a frozen tree later (a LoRA adapter, say) are not frozen. A Keras 3
layer given to `freeze` is frozen the Keras way (`layer.trainable = False`,
the flags it changed kept for `unfreeze`), so Keras models see it too.

The mark is a plain attribute in the instance `__dict__` (`_snt_frozen`),
outside `tf.Module`'s tracking and checkpoints; pickle and copy carry it. Its
value says who froze the module: True for `freeze`, or a short tag for a
feature that freezes and later unfreezes only what it froze (`snt.lora`).

Until the first `freeze`, `trainable_variables` does not look for marks at
all (one global read); after it, each call also walks the tree's modules.
Plain `tf.Module` parents (not `snt.Module`s) keep `tf.Module`'s own walk,
which does not know about freezing.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import errors, keras_variables

# The instance attribute holding the mark.
KEY = "_snt_frozen"

# Whether any module was ever frozen (in this process); until then
# `trainable_variables` skips the search for marks.
ACTIVE = False


def check_module(
    module: Any, argument: str = "module", keras_layers: bool = False
) -> Any:
    """`module`, if it is a `tf.Module`, or a Keras 3 layer where `keras_layers`
    allows it (else a TypeError naming `argument`)."""
    if isinstance(module, tf.Module):
        return module
    if keras_layers and keras_variables.is_keras_layer(module):
        return module
    expected = "a `tf.Module` (e.g. an `snt.Module`)"
    if keras_layers:
        expected += " or a Keras layer"
    raise errors.bad_type(argument, f"must be {expected}", module)


def tree(module: tf.Module) -> tuple[tf.Module, ...]:
    """`module` and its submodules (each once, `tf.Module`'s order)."""
    return (module, *module.submodules)


def mark(modules: Iterable[tf.Module], value: Any, warn: bool = True) -> None:
    """Sets the freeze mark of each of `modules` to `value` (None: removes it);
    `warn`: whether to warn about train steps traced before (`warn_if_traced`)."""
    global ACTIVE
    modules = tuple(modules)
    if warn:
        warn_if_traced(modules)
    for module in modules:
        if value is None:
            vars(module).pop(KEY, None)
        else:
            vars(module)[KEY] = value
            ACTIVE = True


def freeze(module: Any) -> Any:
    """Freezes `module` and its submodules: their variables stop being trained.

    The variables that the module and its submodules hold are left out of
    `trainable_variables` of every `snt.Module` containing them (this one
    too), so the usual loop, `optimizer.apply(grads,
    model.trainable_variables)`, leaves them unchanged. Variable names,
    `variables` and checkpoints do not change. Submodules added later are not
    frozen. Undo with `snt.unfreeze`.

    A Keras 3 layer (one an `snt.Module` holds, say) is frozen the Keras
    way, `layer.trainable = False` (its sublayers too; a Keras
    `BatchNormalization` then also normalizes with its moving statistics, as
    Keras does for fine-tuning), so Keras sees it too: its weights leave
    `trainable_variables` of every `snt.Module` holding it, the trainable
    weights of an `snt.KerasLayer` and of Keras models. `snt.unfreeze`
    restores the flags it found.

    Args:
      module: A `tf.Module` (an `snt.Module`, say) or a Keras layer, built or
        not.

    Returns:
      `module`, for chaining.

    Raises:
      TypeError: for anything else.

    >>> encoder, head = snt.Linear(4, name="encoder"), snt.Linear(2, name="head")
    >>> model = snt.Sequential([encoder, head])
    >>> _ = model(tf.ones([1, 3]))
    >>> _ = snt.freeze(encoder)
    >>> [v.name for v in model.trainable_variables]
    ['head/b:0', 'head/w:0']
    >>> len(model.variables)
    4
    """
    if not isinstance(check_module(module, keras_layers=True), tf.Module):
        _freeze_keras(module)
        return module
    mark(tree(module), True)
    return module


def unfreeze(module: Any) -> Any:
    """Undoes `snt.freeze` for `module` and its submodules.

    For a Keras layer: gives it, its sublayers and weights back the
    `trainable` flags `snt.freeze` found; a layer `snt.freeze` did not
    freeze (e.g. one set `trainable = False` by the user) is left alone.

    Args:
      module: A `tf.Module` or a Keras layer.

    Returns:
      `module`, for chaining.

    >>> linear = snt.Linear(2)
    >>> _ = linear(tf.ones([1, 3]))
    >>> len(snt.freeze(linear).trainable_variables)
    0
    >>> len(snt.unfreeze(linear).trainable_variables)
    2
    """
    if not isinstance(check_module(module, keras_layers=True), tf.Module):
        _unfreeze_keras(module)
        return module
    mark(tree(module), None)
    return module


def is_frozen(module: Any) -> bool:
    """Whether `module` itself is marked frozen (by `snt.freeze` or `snt.lora`);
    for a Keras layer, whether it is not trainable (`layer.trainable`).

    >>> snt.is_frozen(snt.freeze(snt.Linear(2)))
    True
    """
    if not isinstance(check_module(module, keras_layers=True), tf.Module):
        return not module.trainable
    return bool(vars(module).get(KEY))


def _freeze_keras(layer: Any) -> None:
    """`layer.trainable = False`, keeping the flags it changes (in the mark)
    for `_unfreeze_keras`; a layer frozen by `snt.freeze` already keeps the
    flags found the first time."""
    if vars(layer).get(KEY) is not None:
        return
    _warn_if_traced_keras(layer)
    # Keras' setter sets the flags of every sublayer and weight.
    layers = tuple((sub, sub.trainable) for sub in layer._flatten_layers())
    weights = tuple((w, w.trainable) for w in layer.weights)
    layer.trainable = False
    vars(layer)[KEY] = (layers, weights)
    global ACTIVE
    ACTIVE = True


def _unfreeze_keras(layer: Any) -> None:
    found = vars(layer).pop(KEY, None)
    if found is None:
        return  # Not frozen by `snt.freeze`.
    _warn_if_traced_keras(layer)
    layers, weights = found
    # Outer layers first (Keras' order): each setter call sets the sublayers
    # below, which come later and get their own flags back.
    for sub, trainable in layers:
        sub.trainable = trainable
    for weight, trainable in weights:
        weight.trainable = trainable


def _warn_if_traced_keras(layer: Any) -> None:
    """`_warn_if_traced` for the modules holding Keras `layer`."""
    holders = [
        root
        for root in list(_TRACED_READS)
        if any(leaf is layer for leaf in walk(root)[0])
    ]
    if holders:
        warn_if_traced(holders)


def _holder(modules: dict[tuple[Any, ...], tf.Module], path: tuple[Any, ...]) -> Any:
    """The module holding the leaf at `path`: the longest module path before it."""
    for end in range(len(path) - 1, -1, -1):
        holder = modules.get(path[:end])
        if holder is not None:
            return holder
    return None


def _is_module_or_leaf(value: Any) -> bool:
    return isinstance(value, tf.Module) or keras_variables.is_leaf(value)


def walk(root: tf.Module) -> tuple[list[Any], set[int]]:
    """One walk of `root`'s tree: its leaves (variables, Keras layers and
    variables) in `tf.Module`'s order, each once, and the `id`s of the
    variables a frozen module holds (a Keras object's storage included).

    `tf.Module`'s walk with paths: the holder of a leaf is the module at the
    longest prefix of its path. A leaf reachable from several modules is
    frozen when any of them is.
    """
    flatten = root._flatten  # pyright: ignore[reportAttributeAccessIssue]
    modules: dict[tuple[Any, ...], tf.Module] = {(): root}
    leaves: list[Any] = []
    seen: set[int] = set()
    frozen: set[int] = set()
    for path, leaf in flatten(
        with_path=True, predicate=_is_module_or_leaf, expand_composites=True
    ):
        if isinstance(leaf, tf.Module):
            modules.setdefault(path, leaf)
            continue
        if id(leaf) not in seen:
            seen.add(id(leaf))
            leaves.append(leaf)
        holder = _holder(modules, path)
        if holder is not None and vars(holder).get(KEY):
            if isinstance(leaf, tf.Variable):
                frozen.add(id(leaf))
            else:
                frozen.update(id(v) for v in keras_variables.expand((leaf,), False))
        elif (
            not isinstance(leaf, tf.Variable)
            and KEY in vars(leaf)
            and not leaf.trainable
        ):
            # A Keras layer `snt.freeze` froze (Keras' flags leave it out of
            # the trainable variables already; this tells they were dropped).
            frozen.update(id(v) for v in keras_variables.expand((leaf,), False))
    return leaves, frozen


def trainable_variables(root: tf.Module) -> tuple[tuple[tf.Variable, ...], bool]:
    """`root`'s trainable variables without those frozen modules hold, and
    whether any variable was left out for that."""
    if not keras_variables.ready():
        keras_variables.trainable_variables(root)  # Looks for Keras once.
    leaves, frozen = walk(root)
    if all(isinstance(leaf, tf.Variable) for leaf in leaves):
        found: Sequence[tf.Variable] = [v for v in leaves if v.trainable]
    else:  # Keras layers decide which of their weights are trainable.
        found = keras_variables.trainable_variables(root)
    if not frozen:
        return tuple(found), False
    return tuple(v for v in found if id(v) not in frozen), True


def frozen_ids(root: tf.Module) -> set[int]:
    """`id`s of the variables in `root`'s tree that frozen modules hold."""
    return walk(root)[1]


# Modules whose `trainable_variables` were read while a `tf.function` was
# traced: that function keeps the list it read, so a later freeze (or
# `snt.lora.add`) does not reach it. `mark` warns once per such module.
_TRACED_READS: weakref.WeakSet[tf.Module] = weakref.WeakSet()

_STALE_TRACE = (
    "`{root}.trainable_variables` was read while a `tf.function` was traced, "
    "before this change to what is frozen: a train step traced then keeps the "
    "list it read, so calling it again would still train the variables frozen "
    "now (and not new ones, such as LoRA adapters). Trace the train step again "
    "(a new `tf.function`, or `model.compile()` for Keras) after `snt.freeze`, "
    "`snt.unfreeze` or `snt.lora.add`."
)


def record_traced_read(root: tf.Module) -> None:
    """Notes that `root.trainable_variables` was read inside a trace."""
    _TRACED_READS.add(root)


def warn_if_traced(changed: Sequence[tf.Module], stacklevel: int = 4) -> None:
    """Warns if a function traced before may hold a list these changes alter
    (`changed`: the modules changed; `stacklevel`: of the user's call)."""
    if not _TRACED_READS:
        return
    ids = {id(m) for m in changed}
    for root in list(_TRACED_READS):
        if any(id(m) in ids for m in tree(root)):
            _TRACED_READS.discard(root)
            warnings.warn(_STALE_TRACE.format(root=root.name), stacklevel=stacklevel)
