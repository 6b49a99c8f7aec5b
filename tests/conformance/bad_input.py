"""Hypothesis-based bad-input harness shared by every module family.

The contract (DEVELOPERS.md, "Clear on bad input"): a module given invalid
constructor arguments or invalid inputs either works or raises a `ValueError`
/ `TypeError` whose message names the argument and shows the received value
(our template ends with "Received: ..."). Anything else -- a TensorFlow
`InvalidArgumentError`, an `AttributeError`, a crash deep inside TF -- fails.
A failed call must leave the module's variables unchanged and the module usable.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st

ACCEPTED = (ValueError, TypeError)


class _Opaque:
    """An object no Sonnet argument accepts."""

    def __repr__(self) -> str:
        return "<opaque>"


# Values that are wrong for almost every argument. Kept small so that a value
# which *is* accepted (e.g. 2 for a size) never allocates much memory.
JUNK_VALUES: list[Any] = [
    None,
    -1,
    -7,
    0,
    2.5,
    float("nan"),
    "foo",
    "",
    [],
    [-1],
    [2, "x"],
    (0,),
    {"a": 1},
    True,
    _Opaque(),
    np.zeros([2, 2]),
]


def junk() -> st.SearchStrategy[Any]:
    """Strategy over generic junk argument values."""
    return st.sampled_from(JUNK_VALUES)


def check_error(error: BaseException, argument_names: Iterable[str]) -> None:
    """Asserts `error` follows the project's template for bad input."""
    names = list(argument_names)
    assert isinstance(error, ACCEPTED), (
        f"expected ValueError/TypeError, got {type(error).__name__}: {error}"
    )
    message = str(error)
    assert "Received" in message, f"message does not show the received value: {message}"
    assert any(name in message for name in names), (
        f"message names none of {names}: {message}"
    )


def outcome(fn: Callable[[], Any], argument_names: Iterable[str]) -> tuple[bool, Any]:
    """Runs `fn`; returns (True, result) or checks the error and returns (False, e)."""
    try:
        return True, fn()
    except Exception as e:  # noqa: BLE001 - the point is to inspect any failure
        check_error(e, argument_names)
        return False, e


def parameter_names(fn: Callable[..., Any]) -> list[str]:
    """Names of the parameters of `fn` (for classes: of `__init__`)."""
    target = fn.__init__ if inspect.isclass(fn) else fn
    target = inspect.unwrap(target)
    return [p for p in inspect.signature(target).parameters if p != "self"]


def snapshot(module: Any) -> list[np.ndarray]:
    """Current values of all the module's variables."""
    return [v.numpy() for v in _all_variables(module)]


def _all_variables(module: Any) -> tuple[tf.Variable, ...]:
    return tuple(tf.Module.variables.fget(module))  # type: ignore[attr-defined]


def assert_unchanged(module: Any, before: list[np.ndarray]) -> None:
    """Asserts the module still has the variables and values of `before`."""
    after = snapshot(module)
    assert len(after) == len(before), "a failed call created or dropped variables"
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)


def wrong_rank_variants(x: tf.Tensor) -> list[tf.Tensor]:
    """`x` with one dimension removed and with one dimension added."""
    variants = [tf.expand_dims(x, 0)]
    if x.shape.rank:
        variants.append(x[0])
    return variants


def wrong_dtype_variants(x: tf.Tensor) -> list[tf.Tensor]:
    """`x` as strings and as booleans (dtypes no numeric module accepts)."""
    shape = x.shape
    return [tf.fill(shape, "a"), tf.fill(shape, True)]


def resized_variants(x: tf.Tensor) -> list[tf.Tensor]:
    """`x` with its last dimension (and, separately, its second) grown by one."""
    out = []
    rank = x.shape.rank or 0
    for axis in {rank - 1, 1} if rank >= 2 else ({0} if rank == 1 else set()):
        pad = [[0, 0]] * rank
        pad[axis] = [0, 1]
        out.append(tf.pad(x, pad))
    return out
