"""`snt.TrainableState`: a learned initial state for a recurrent core."""

from __future__ import annotations

import collections.abc
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, eager_init, errors, utils


def _paths(structure: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Path of every leaf, in `tf.nest.flatten` order.

    Namedtuple fields by name, mapping keys (sorted, as `tf.nest` does) and
    sequence indices as strings.
    """
    if not tf.nest.is_nested(structure):
        return [prefix]
    if isinstance(structure, tuple) and hasattr(structure, "_fields"):
        items = [(f, getattr(structure, f)) for f in structure._fields]  # type: ignore[attr-defined]
    elif isinstance(structure, collections.abc.Mapping):
        items = [(k, structure[k]) for k in sorted(structure)]
    else:
        items = list(enumerate(structure))
    result = []
    for key, value in items:
        result.extend(_paths(value, (*prefix, str(key))))
    return result


def _as_initial_value(leaf: Any) -> Any:
    """A leaf of `initial_values` as a tensor (variables pass through)."""
    if isinstance(leaf, (tf.Tensor, tf.Variable)):
        return leaf
    if leaf is None:
        raise errors.bad_value("initial_values", "must contain tensors, not None", leaf)
    try:
        return tf.convert_to_tensor(leaf)
    except (TypeError, ValueError) as e:
        raise errors.bad_value(
            "initial_values", "must contain values convertible to tensors", leaf
        ) from e


def _with_batch_dimension(value: Any) -> Any:
    """`value` with a leading dimension of 1; a NumPy array when its value is
    known while tracing (so the variable can be created outside the graph)."""
    if tf.is_symbolic_tensor(value):
        known = tf.get_static_value(value)
        if known is not None:
            return np.expand_dims(known, 0)
    return tf.expand_dims(value, 0)


def _without_batch_dimension(value: Any) -> Any:
    """`value[0]` of a `[1, ...]` state, as `_with_batch_dimension`."""
    if tf.is_symbolic_tensor(value):
        known = tf.get_static_value(value)
        if known is not None:
            return np.squeeze(known, axis=0)
    return tf.squeeze(value, axis=0)


class _Structure:
    """Rebuilds the user's nest from a flat list (not tracked by checkpoints)."""

    def __init__(self, structure: Any):
        self._structure = tf.nest.map_structure(lambda _: None, structure)

    def pack(self, leaves: list[Any]) -> Any:
        return tf.nest.pack_sequence_as(self._structure, leaves)


class TrainableState(base.Module):
    """A trainable initial state: one variable per leaf of a state structure.

    Each leaf `value` of `initial_values` becomes a variable of shape
    `[1, *value.shape]` named after its path in the structure (namedtuple
    fields, dict keys or indices joined by `/`; `state` for a single
    tensor). Calling the module tiles every variable to `batch_size` rows.
    The variables are created by the constructor.

    Args:
      initial_values: A nest of tensors without batch dimension, e.g.
        `LSTMState(hidden=tf.zeros([4]), cell=tf.zeros([4]))` (or of values
        convertible to tensors; an empty nest gives a module without
        variables, whose call returns the empty nest).
      mask: Optional nest of flags (bools, or None for trainable) with the
        structure of `initial_values`: which leaves are trainable (default:
        all).
      name: Module name (default `trainable_state`).

    >>> core = snt.LSTM(4)
    >>> state_module = snt.TrainableState.for_core(core)
    >>> state = state_module(batch_size=3)
    >>> state.hidden.shape, [v.name for v in state_module.variables]
    (TensorShape([3, 4]), ['trainable_state/hidden:0', 'trainable_state/cell:0'])
    """

    def __init__(self, initial_values: Any, mask: Any = None, name: str | None = None):
        super().__init__(name=name)
        values = [_as_initial_value(leaf) for leaf in tf.nest.flatten(initial_values)]
        if mask is None:
            flags = [True] * len(values)
        else:
            try:
                tf.nest.assert_same_structure(initial_values, mask, check_types=False)
            except (ValueError, TypeError) as e:
                raise errors.bad_value(
                    "mask", "must have the structure of `initial_values`", mask
                ) from e
            # None is `tf.Variable`'s default: trainable.
            flags = [
                True if flag is None else checks.flag("mask", flag)
                for flag in tf.nest.flatten(mask)
            ]

        # This constructor is the module's initialisation: inside a
        # `tf.function` (e.g. built by `for_core`), it creates the variables
        # outside the trace as other modules' `_initialize` do.
        @eager_init.outside_trace
        def create() -> list[tf.Variable]:
            return [
                tf.Variable(
                    _with_batch_dimension(value),
                    trainable=trainable,
                    name="/".join(path) if path else "state",
                )
                for path, value, trainable in zip(_paths(initial_values), values, flags)
            ]

        variables = create()
        self._structure = _Structure(initial_values)
        self._template = self._structure.pack(variables)

    @classmethod
    def for_core(
        cls, core: Any, mask: Any = None, name: str | None = None
    ) -> TrainableState:
        """A `TrainableState` initialised from `core.initial_state(1)`.

        Args:
          core: An `snt.RNNCore` (anything with `initial_state(batch_size)`).
          mask: Optional nest of bools, as in the constructor.
          name: Module name.

        Returns:
          The module, with leaves shaped as the core's state without batch.
        """
        initial_state = getattr(core, "initial_state", None)
        if not callable(initial_state):
            raise errors.bad_type(
                "core", "must have an `initial_state(batch_size)` method", core
            )
        values = tf.nest.map_structure(
            _without_batch_dimension, initial_state(batch_size=1)
        )
        return cls(values, mask=mask, name=name)

    @utils.no_autograph
    def __call__(self, batch_size: Any) -> Any:
        """The state tiled to `batch_size` rows.

        Args:
          batch_size: An int or a scalar tensor (a float one is truncated).

        Returns:
          The structure of `initial_values` with `[batch_size, ...]` tensors.
        """
        batch_size = checks.tensor_size("batch_size", batch_size)
        leaves = [
            tf.tile(v, [batch_size] + [1] * (v.shape.rank - 1))
            for v in tf.nest.flatten(self._template)
        ]
        return self._structure.pack(leaves)
