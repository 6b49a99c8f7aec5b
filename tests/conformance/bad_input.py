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
    except Exception as e:
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


# ---------------------------------------------------------------------------
# More junk for constructor arguments: plausible mistakes (wrong numeric
# types and ranges, non-finite numbers, tensors where Python values belong,
# containers of the wrong kind). Like `JUNK_VALUES`, nothing here is large
# enough to allocate much memory if a constructor accepts it. Nothing here is
# callable either: a callable passes the documented check for initializers
# and activations, and what it does when called is the caller's business.

MORE_JUNK_VALUES: list[Any] = [
    -1.0,
    0.0,
    1e-30,
    float("inf"),
    float("-inf"),
    complex(1, 2),
    np.int64(-3),
    np.float32("nan"),
    np.array(3),
    np.array([]),
    b"bytes",
    "SAME ",
    (1, 2, 3, 4, 5),
    [[1]],
    [None],
    ("a", "b"),
    {1, 2},
    slice(None),
    Ellipsis,
    NotImplemented,
    object(),
]


def _tensor_junk() -> list[Any]:
    # Built on first use: tensors made at import time would pin an eager
    # context before the test session configures its devices.
    return [
        tf.constant(-1),
        tf.constant([1, 2]),
        tf.constant("x"),
        tf.constant(True),
        tf.constant(float("nan")),
        tf.zeros([2, 2]),
    ]


def ctor_junk() -> list[Any]:
    """Junk values for the constructor fuzz: `JUNK_VALUES` and more."""
    return JUNK_VALUES + MORE_JUNK_VALUES + _tensor_junk()


# ---------------------------------------------------------------------------
# Input variants.

BAD_DTYPES = [
    tf.string,
    tf.bool,
    tf.complex64,
    tf.float64,
    tf.float16,
    tf.bfloat16,
    tf.int32,
    tf.int64,
    tf.uint8,
]


def is_float_tensor(x: Any) -> bool:
    return isinstance(x, tf.Tensor) and x.dtype.is_floating


def with_dtype(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """`x` converted to `dtype` (strings and booleans are filled, not cast)."""
    if dtype == tf.string:
        return tf.fill(tf.shape(x), "a")
    if dtype == tf.bool:
        return tf.fill(tf.shape(x), True)
    if x.dtype == tf.string:
        return tf.zeros(tf.shape(x), dtype)
    if x.dtype == tf.bool:
        x = tf.cast(x, tf.int32)
    if x.dtype.is_complex:
        x = tf.math.real(x)
    if dtype == tf.uint8 and not x.dtype.is_unsigned:
        x = tf.abs(x)
    return tf.cast(x, dtype)


def with_rank_change(x: tf.Tensor, delta: int, trailing: bool) -> tf.Tensor:
    """`x` with `delta` size-1 dimensions added (or dimensions dropped)."""
    if delta > 0:
        for _ in range(delta):
            x = tf.expand_dims(x, -1 if trailing else 0)
        return x
    for _ in range(min(-delta, x.shape.rank or 0)):
        axis = x.shape.rank - 1 if trailing else 0
        if x.shape[axis] == 0:
            shape = x.shape.as_list()
            del shape[axis]
            x = tf.zeros(shape, x.dtype)
        else:
            x = x[..., 0] if trailing else x[0]
    return x


def with_size(x: tf.Tensor, axis: int, size: int) -> tf.Tensor:
    """`x` with dimension `axis` cut or tiled (cyclically) to `size`."""
    rank = x.shape.rank or 0
    if rank == 0:
        return tf.fill([size], x)
    axis %= rank
    index = tf.range(size) % max(int(x.shape[axis]), 1)
    if x.shape[axis] == 0:
        shape = x.shape.as_list()
        shape[axis] = size
        return tf.zeros(shape, x.dtype)
    return tf.gather(x, index, axis=axis)


def with_non_finite(x: tf.Tensor, value: float, everywhere: bool) -> tf.Tensor:
    """`x` with `value` (NaN or +-Inf) everywhere or in its first element.

    Tensors that cannot hold the value (integers, strings, ...) are returned
    unchanged.
    """
    if not x.dtype.is_floating:
        return x
    if everywhere:
        return tf.fill(tf.shape(x), tf.constant(value, x.dtype))
    flat = tf.reshape(x, [-1])
    if flat.shape[0] == 0:
        return x
    first = tf.constant([value], x.dtype)
    return tf.reshape(tf.concat([first, flat[1:]], 0), tf.shape(x))


def empty_batch(
    inputs: tuple[Any, ...], time_major_first: bool = False
) -> tuple[Any, ...]:
    """`inputs` with a batch of zero examples.

    Every tensor leaf of rank >= 1 is cut to size 0 along its batch axis: axis
    0, or (when `time_major_first`) axis 1 of the first input, which is a
    time-major sequence, and axis 0 of the others (e.g. a state).
    """
    leaves = tf.nest.flatten(inputs)
    first = len(tf.nest.flatten(inputs[0])) if inputs else 0
    out = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, tf.Tensor) and (leaf.shape.rank or 0) >= 1:
            axis = 1 if time_major_first and i < first and leaf.shape.rank >= 2 else 0
            leaf = with_size(leaf, axis, 0)
        out.append(leaf)
    return tuple(tf.nest.pack_sequence_as(inputs, out))


def compatible_empty_result(reference: Any, result: Any) -> None:
    """Asserts `result` looks like `reference` with some dimensions set to 0."""
    ref_leaves = tf.nest.flatten(reference, expand_composites=True)
    leaves = tf.nest.flatten(result, expand_composites=True)
    assert len(ref_leaves) == len(leaves), "empty batch changed the output structure"
    for r, x in zip(ref_leaves, leaves):
        r_shape, x_shape = np.shape(r), np.shape(x)
        assert len(r_shape) == len(x_shape), (
            f"empty batch: output rank {len(x_shape)}, expected {len(r_shape)}"
        )
        for rd, xd in zip(r_shape, x_shape):
            assert xd in (rd, 0), f"empty batch: output shape {x_shape} vs {r_shape}"


def state_variants(state: Any) -> list[tuple[str, Any]]:
    """Mismatched versions of an RNN state: nesting, batch size, sizes."""
    leaves = tf.nest.flatten(state)
    variants: list[tuple[str, Any]] = [
        ("wrapped", (state,)),
        ("as_list", list(leaves)),
        ("extra_leaf", (*leaves, leaves[0])),
        ("dict", {"state": state}),
    ]
    if len(leaves) > 1:
        variants.append(("first_leaf_only", leaves[0]))
        variants.append(("dropped_leaf", tuple(leaves[:-1])))
        variants.append(("reversed", tf.nest.pack_sequence_as(state, leaves[::-1])))
    for delta in (1, -1):

        def rebatch(x: Any, delta: int = delta) -> Any:
            if not isinstance(x, tf.Tensor) or not x.shape.rank:
                return x
            return with_size(x, 0, max(int(x.shape[0]) + delta, 0))

        variants.append((f"batch{delta:+d}", tf.nest.map_structure(rebatch, state)))
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, tf.Tensor) and leaf.shape.rank:
            for size_delta in (1, -1):
                size = int(leaf.shape[-1]) + size_delta
                changed = list(leaves)
                changed[i] = with_size(leaf, -1, max(size, 0))
                variants.append(
                    (
                        f"leaf{i}_size{size_delta:+d}",
                        tf.nest.pack_sequence_as(state, changed),
                    )
                )
            changed = list(leaves)
            changed[i] = leaf[0]
            variants.append(
                (f"leaf{i}_rank-1", tf.nest.pack_sequence_as(state, changed))
            )
    return variants
