"""Sonnet 2.0.2's `sonnet.src.optimizers.optimizer_utils`: the checks a
custom optimizer's `apply` calls."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import errors
from sonnet._src.optimizers import optimizer_utils as _utils
from sonnet._src.optimizers.optimizer_utils import check_distribution_strategy


def check_updates_parameters(updates: Any, parameters: Any) -> None:
    """Raises a `ValueError` for `apply` arguments no optimizer can use, the
    checks 2.0.2 made here (no more): lengths that differ, no parameters, or
    no update that is not None.

    >>> from sonnet.src.optimizers import optimizer_utils
    >>> optimizer_utils.check_updates_parameters([None, 1.0], [1, 2])
    """
    if len(updates) != len(parameters):
        raise errors.bad_value(
            "updates",
            f"must have one entry per parameter ({len(parameters)} parameters)",
            f"{len(updates)} updates",
        )
    if not parameters:
        raise errors.bad_value("parameters", "must not be empty", parameters)
    if all(update is None for update in updates):
        raise errors.bad_value(
            "updates", "must contain at least one update that is not None", updates
        )


def check_same_dtype(update: Any, parameter: tf.Variable) -> None:
    """Raises a `ValueError` unless `update` has the dtype of `parameter`."""
    if update.dtype != parameter.dtype:
        raise errors.bad_value(
            "updates",
            f"must have the dtype of their parameter ({parameter.dtype.name})",
            update,
        )


def deduplicate_indexed_slices(
    indexed_slice: tf.IndexedSlices,
) -> tuple[tf.Tensor, tf.Tensor]:
    """`(values, indices)` of `indexed_slice` with the rows that share an
    index summed.

    >>> from sonnet.src.optimizers import optimizer_utils
    >>> update = tf.IndexedSlices(tf.constant([[1.0], [2.0], [4.0]]),
    ...                           tf.constant([0, 3, 0]))
    >>> values, indices = optimizer_utils.deduplicate_indexed_slices(update)
    >>> values.numpy().tolist(), indices.numpy().tolist()
    ([[5.0], [2.0]], [0, 3])
    """
    return _utils.deduplicate(indexed_slice)


__all__ = [
    "check_distribution_strategy",
    "check_same_dtype",
    "check_updates_parameters",
    "deduplicate_indexed_slices",
]
