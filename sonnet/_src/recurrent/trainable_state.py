"""`snt.TrainableState`: a learned initial state for a recurrent core."""

from __future__ import annotations

import collections.abc
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, utils
from sonnet._src.recurrent import base as rnn_base


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
        `LSTMState(hidden=tf.zeros([4]), cell=tf.zeros([4]))`.
      mask: Optional nest of Python bools with the structure of
        `initial_values`: which leaves are trainable (default: all).
      name: Module name (default `trainable_state`).

    >>> core = snt.LSTM(4)
    >>> state_module = snt.TrainableState.for_core(core)
    >>> state = state_module(batch_size=3)
    >>> state.hidden.shape, [v.name for v in state_module.variables]
    (TensorShape([3, 4]), ['trainable_state/hidden:0', 'trainable_state/cell:0'])
    """

    def __init__(self, initial_values: Any, mask: Any = None, name: str | None = None):
        super().__init__(name=name)
        leaves = tf.nest.flatten(initial_values)
        if not leaves:
            raise utils.bad_value(
                "initial_values", "must contain at least one tensor", initial_values
            )
        values = [rnn_base.as_tensor("initial_values", leaf) for leaf in leaves]
        for value in values:
            if value.dtype in (tf.string, tf.variant, tf.resource):
                raise utils.bad_type(
                    "initial_values", "must contain numeric tensors", value
                )
        if mask is None:
            flags = [True] * len(values)
        else:
            try:
                tf.nest.assert_same_structure(initial_values, mask, check_types=False)
            except (ValueError, TypeError) as e:
                raise utils.bad_value(
                    "mask", "must have the structure of `initial_values`", mask
                ) from e
            flags = tf.nest.flatten(mask)
            for flag in flags:
                if not isinstance(flag, (bool, np.bool_)):
                    raise utils.bad_type("mask", "must contain only bools", mask)
            flags = [bool(f) for f in flags]
        variables = []
        for path, value, trainable in zip(_paths(initial_values), values, flags):
            variables.append(
                tf.Variable(
                    tf.expand_dims(value, 0),
                    trainable=trainable,
                    name="/".join(path) if path else "state",
                )
            )
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
            raise utils.bad_type(
                "core", "must have an `initial_state(batch_size)` method", core
            )
        values = tf.nest.map_structure(
            lambda s: tf.squeeze(s, axis=0), initial_state(batch_size=1)
        )
        return cls(values, mask=mask, name=name)

    @utils.no_autograph
    def __call__(self, batch_size: Any) -> Any:
        """The state tiled to `batch_size` rows.

        Args:
          batch_size: An int or a scalar integer tensor.

        Returns:
          The structure of `initial_values` with `[batch_size, ...]` tensors.
        """
        batch_size = rnn_base.check_batch_size(batch_size)
        leaves = [
            tf.tile(v, [batch_size] + [1] * (v.shape.rank - 1))
            for v in tf.nest.flatten(self._template)
        ]
        return self._structure.pack(leaves)
