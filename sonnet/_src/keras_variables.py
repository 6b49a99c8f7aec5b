"""The variables of a module, Keras 3 layers and variables it holds included.

`tf.Module` finds variables by walking a module's attributes (in sorted name
order, into lists, tuples and dicts; then each submodule the same way, depth
first) and keeping the `tf.Variable`s. Keras 3 layers and `keras.Variable`s
are not `tf.Variable`s, nor `tf.Module`s, so that walk misses them: a Keras
layer inside a Sonnet module would be silently left out of
`trainable_variables`, and so of training. Here the walk also stops at Keras
layers and Keras variables, and each stands for the `tf.Variable`s that hold
its values (on the TensorFlow backend, a Keras variable's `value`), in its
place in the walk:

- a Keras layer (a model too) for its weights, in `layer.weights` order (the
  layer's own, then its sublayers'): all of them in `variables`,
  `layer.trainable_weights` in `trainable_variables`. A layer not built yet
  has none. (Keras' seed-generator and metric state are not weights.)
- a `keras.Variable` for its storage, in `trainable_variables` when Keras
  calls it trainable (`variable.trainable`; freezing a layer clears it).

A variable reachable twice is listed once, where it is first found. These are
the `tf.Variable`s TensorFlow differentiates and Sonnet optimizers update, so
Keras layers in a Sonnet module train the Sonnet way. Keras itself is never
imported here: without it loaded there is nothing of Keras to find, and the
walk is `tf.Module`'s, with one type test more per attribute value.
"""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf

# `(keras.layers.Layer, keras.Variable)` once Keras 3 has been imported.
_KERAS: tuple[type, ...] = ()
# What the walk keeps: `tf.Variable`s, and Keras layers and variables.
_LEAVES: tuple[type, ...] = (tf.Variable,)


def _find_keras() -> None:
    global _KERAS, _LEAVES
    keras = sys.modules.get("keras")
    try:
        found = (keras.layers.Layer, keras.Variable)  # pyright: ignore[reportOptionalMemberAccess]
    except AttributeError:  # Not imported, or halfway through its import.
        return
    _KERAS = found
    _LEAVES = (tf.Variable, *found)


def is_leaf(obj: Any) -> bool:
    """Whether the walk keeps `obj`: a `tf.Variable`, a Keras layer or variable."""
    return isinstance(obj, _LEAVES)


def is_keras_layer(obj: Any) -> bool:
    """Whether `obj` is a Keras 3 layer (a model too)."""
    if not _KERAS:
        _find_keras()
    return bool(_KERAS) and isinstance(obj, _KERAS[0])


def ready() -> bool:
    """Whether Keras' classes are known (or Keras is not imported yet)."""
    return bool(_KERAS) or "keras" not in sys.modules


def _is_trainable_leaf(obj: Any) -> bool:
    if isinstance(obj, tf.Variable):
        return getattr(obj, "trainable", False)  # `tf.Module`'s rule.
    return isinstance(obj, _KERAS)


def _walk(module: tf.Module, predicate: Any) -> tuple[Any, ...]:
    # `tf.Module._flatten` is the walk `tf.Module.variables` itself makes (a
    # documented method of `tf.Module`, absent from its type stubs).
    flatten = module._flatten  # pyright: ignore[reportAttributeAccessIssue]
    return tuple(flatten(predicate=predicate, expand_composites=True))


def variables(module: tf.Module) -> tuple[tf.Variable, ...]:
    """All variables of `module` (a `tf.Module`), in the order above."""
    if not _KERAS:
        _find_keras()
    return expand(_walk(module, is_leaf), trainable=False)


def trainable_variables(module: tf.Module) -> tuple[tf.Variable, ...]:
    """The trainable variables of `module`, in the order above."""
    if not _KERAS:
        _find_keras()
    return expand(_walk(module, _is_trainable_leaf), trainable=True)


def expand(found: tuple[Any, ...], trainable: bool) -> tuple[tf.Variable, ...]:
    """`found` with each Keras layer or variable replaced by its storage."""
    for leaf in found:
        if not isinstance(leaf, tf.Variable):
            break
    else:
        return found  # The plain case: no Keras objects.
    result: list[tf.Variable] = []
    seen: set[int] = set()
    for leaf in found:
        if isinstance(leaf, tf.Variable):
            candidates: Any = (leaf,)
        elif isinstance(leaf, _KERAS[0]):
            weights = leaf.trainable_weights if trainable else leaf.weights
            candidates = (storage(w) for w in weights)
        elif trainable and not leaf.trainable:
            continue
        else:
            candidates = (storage(leaf),)
        for variable in candidates:
            if variable is not None and id(variable) not in seen:
                seen.add(id(variable))
                result.append(variable)
    return tuple(result)


def storage(variable: Any) -> tf.Variable | None:
    """The `tf.Variable` holding a `keras.Variable`'s value (None if none).

    On the TensorFlow backend the public `value` is that variable, except
    inside a Keras autocast or stateless scope, where it is a read of it (a
    cast, or the scope's value); only the private `_value` gives the storage
    there. On other backends there is no `tf.Variable`.
    """
    value = variable.value
    if isinstance(value, tf.Variable):
        return value
    value = getattr(variable, "_value", None)
    return value if isinstance(value, tf.Variable) else None
