"""Argument checks: the one place that decides what each kind of argument accepts.

The rule is Sonnet 2.0.2's acceptance: whatever spelling of an argument the
original accepts, these checkers accept and normalise (a size given as a NumPy
integer or a scalar integer tensor comes back as a Python `int`). They reject
only what the original also rejects, or what made it crash inside TensorFlow or
return a silently wrong result, and then with the exception type code written
for the original catches:

- `ValueError` / `TypeError` where the original raised those;
- `errors.InvalidArgumentError` where the original let a TensorFlow op fail:
  it is both a `ValueError` and a `tf.errors.InvalidArgumentError`.

The errors and their one message template (the argument, what was expected,
and `Received: ...`) live in `errors.py`, which imports nothing of the library.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import errors


def _static_index(value: Any) -> int | None:
    """The value of a scalar integer tensor known before running, else None."""
    if isinstance(value, (tf.Tensor, tf.Variable)):
        if not value.dtype.is_integer or value.shape.rank not in (0, None):
            return None
        static = tf.get_static_value(value)
        if static is not None and np.ndim(static) == 0:
            return int(static)
    return None


def as_index(value: Any) -> int | None:
    """`value` as a Python int if it is an integer in any spelling, else None.

    Integers are what `operator.index()` accepts (Python and NumPy integers,
    bools, 0-d integer arrays, eager scalar integer tensors) and scalar
    integer tensors whose value is known while tracing.
    """
    if type(value) is int:
        return value
    try:
        return operator.index(value)
    except (TypeError, AttributeError):
        return _static_index(value)


def integer(argument: str, value: Any, minimum: int | None = None) -> int:
    """An integer argument (any spelling `as_index` takes), as a Python int.

    The original passed such arguments to TF ops, which failed with
    `InvalidArgumentError` on a float or a negative size, so the errors here
    are also `tf.errors.InvalidArgumentError`s (and `TypeError`/`ValueError`).
    """
    result = as_index(value)
    if result is None:
        if isinstance(value, (tf.Tensor, tf.Variable)):
            # The original's `operator.index` of a float tensor's NumPy value.
            raise errors.invalid_argument_attribute(
                argument, "must be an integer", value
            )
        raise errors.invalid_argument_type(argument, "must be an integer", value)
    if minimum is not None and result < minimum:
        kind = {0: "a non-negative", 1: "a positive"}.get(minimum)
        expected = f"must be {kind} integer" if kind else f"must be >= {minimum}"
        raise errors.invalid_argument(argument, expected, value)
    return result


def size(argument: str, value: Any, allow_zero: bool = False) -> int:
    """A size or count: a positive (or, if allowed, non-negative) integer."""
    return integer(argument, value, minimum=0 if allow_zero else 1)


def optional_size(argument: str, value: Any, allow_zero: bool = False) -> int | None:
    """`size`, or None."""
    return None if value is None else size(argument, value, allow_zero)


def whole_size(argument: str, value: Any, allow_zero: bool = False) -> int:
    """`size`, also taking a whole float (`3.0`, `np.float32(3)`, a scalar
    float tensor of known value), which the original's shape arithmetic
    took as that integer. A fraction is refused: the original truncated it."""
    whole = value
    if isinstance(value, (tf.Tensor, tf.Variable)) and value.dtype.is_floating:
        whole = tf.get_static_value(value) if value.shape.rank == 0 else None
    if isinstance(whole, (float, np.floating, np.ndarray)) and np.ndim(whole) == 0:
        number = float(whole)
        whole = int(number) if number.is_integer() else value
    else:
        whole = value
    return integer(argument, whole, minimum=0 if allow_zero else 1)


def tensor_size(argument: str, value: Any) -> int | tf.Tensor:
    """A non-negative size that may be a tensor, e.g. a batch size `tf.shape(x)[0]`.

    The original passed such sizes straight to a TensorFlow shape (`tf.zeros`,
    `tf.tile`), so any integer `integer` takes works, and so does a scalar
    tensor or variable of a real or bool dtype (a float is truncated, as
    TensorFlow's conversion did). A value known before running comes back as a
    Python int, any other as a scalar int32 tensor. A negative, non-finite or
    non-scalar value raises `InvalidArgumentError`, as the TensorFlow op did.
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        dtype = value.dtype
        if not (dtype.is_integer or dtype.is_floating or dtype.is_bool):
            raise errors.invalid_argument_type(
                argument, "must be an integer or a scalar tensor", value
            )
        if value.shape.rank not in (0, None):
            raise errors.invalid_argument(argument, "must be a scalar", value)
        known = tf.get_static_value(value)
        if known is None and isinstance(value, tf.Variable) and tf.executing_eagerly():
            known = value.numpy()
        if known is None:
            result = tf.cast(value, tf.int32)
            return result if result.shape.rank == 0 else tf.reshape(result, [])
        if np.ndim(known) != 0 or not np.isfinite(known):
            raise errors.invalid_argument(argument, "must be a finite scalar", value)
        value = int(known)
    result = as_index(value)
    if result is None:
        raise errors.invalid_argument_type(
            argument, "must be an integer or a scalar tensor", value
        )
    if result < 0:
        raise errors.invalid_argument(argument, "must be a non-negative integer", value)
    return result


def integers(
    argument: str, value: Any, minimum: int | None = None, tensor: bool = False
) -> tuple[int, ...]:
    """A sequence of integers (lists, tuples, 1-D arrays, ...), as a tuple.

    Each item may be spelled as `as_index` accepts; a string or a scalar is a
    `TypeError`, an item below `minimum` a `ValueError`. With `tensor`, a 1-D
    integer tensor of known value is such a sequence too (where the original
    iterated its argument, e.g. `snt.nets.MLP`'s `output_sizes`).
    """
    if tensor and isinstance(value, tf.Tensor) and value.dtype.is_integer:
        known = tf.get_static_value(value)
        if known is not None and np.ndim(known) == 1:
            value = known.tolist()
    # The original's `if value:` or `tuple + value` failed (`ValueError` for
    # an array of several elements, `TypeError` otherwise): ours is both.
    if isinstance(value, (str, bytes, tf.Tensor, tf.Variable)) or not isinstance(
        value, Iterable
    ):
        raise errors.invalid_argument_type(
            argument, "must be a sequence of integers", value
        )
    try:
        items = [as_index(v) for v in value]
    except TypeError as e:  # A 0-d NumPy array.
        raise errors.invalid_argument_type(
            argument, "must be a sequence of integers", value
        ) from e
    # Items went to TF ops in the original, which failed with
    # `InvalidArgumentError`s.
    if None in items:
        raise errors.invalid_argument_type(
            argument, "must be a sequence of integers", value
        )
    if minimum is not None and any(v < minimum for v in items):  # type: ignore[operator]
        raise errors.invalid_argument(
            argument, f"must contain only integers >= {minimum}", value
        )
    return tuple(items)  # type: ignore[arg-type]


def seed(argument: str, value: Any) -> int | None:
    """A random seed: None, an integer, or a whole float (as the original)."""
    if value is None:
        return None
    result = as_index(value)
    if result is not None:
        return result
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    raise errors.bad_type(argument, "must be an integer or None", value)


def flag(argument: str, value: Any) -> bool:
    """A Python-side switch such as `with_bias`, read by its truth value.

    The original tests these with `if value:`, so bools, numbers, NumPy
    scalars and eager scalar tensors all work; strings are refused, since
    `"False"` is true (a silently wrong result).
    """
    if value is True or value is False:
        return value
    if isinstance(value, (str, bytes)):
        raise errors.bad_type(argument, "must be a bool", value)
    if isinstance(value, (tf.Tensor, tf.Variable)):
        static = tf.get_static_value(value)
        if static is None:
            raise errors.bad_type(argument, "must be a bool (a Python value)", value)
        value = static
    try:
        return bool(value)
    except ValueError as e:
        # Several elements: `if value:` raised `ValueError` in the original.
        raise errors.bad_value(argument, "must have a single truth value", value) from e
    except TypeError as e:
        raise errors.bad_type(argument, "must be a bool", value) from e


def choice(argument: str, value: Any, options: Sequence[str]) -> str:
    """A string argument that must be one of `options` (`activation="gelu"`)."""
    expected = "must be one of " + ", ".join(f'"{o}"' for o in options)
    if not isinstance(value, str):
        raise errors.bad_type(argument, expected, value)
    if value not in options:
        raise errors.bad_value(argument, expected, value)
    return value


def real(
    argument: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    allow_tensor: bool = True,
    float_tensor: bool = False,
) -> Any:
    """A real number: Python/NumPy numbers, 0-d arrays, or a scalar tensor.

    Numbers come back as Python floats, checked against `[minimum, maximum]`;
    scalar tensors and variables (e.g. a hyper-parameter a schedule assigns)
    come back unchanged, since their value may change. With `float_tensor`,
    a tensor must be floating point: it meets float tensors in TF ops, which
    failed on an integer one in the original (`InvalidArgumentError`).
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        dtype = value.dtype
        if (
            not allow_tensor
            or dtype.is_bool
            or not (dtype.is_floating or dtype.is_integer)
        ):
            raise errors.bad_type(argument, "must be a real number", value)
        if float_tensor and not dtype.is_floating:
            raise errors.invalid_argument_type(
                argument, "must be a number or a float tensor", value
            )
        if value.shape.rank not in (0, None):
            raise errors.bad_value(argument, "must be a scalar", value)
        return value
    if isinstance(value, np.ndarray):
        if value.ndim != 0 or value.dtype.kind not in "biuf":
            raise errors.bad_type(argument, "must be a real number", value)
        value = value[()]
    if not isinstance(value, (numbers.Real, np.bool_)):
        raise errors.bad_type(argument, "must be a real number", value)
    result = float(value)
    # NaN and infinities only ever gave garbage (NaN weights or losses).
    if not math.isfinite(result):
        raise errors.bad_value(argument, "must be finite", value)
    if minimum is not None and result < minimum:
        raise errors.bad_value(argument, f"must be >= {minimum}", value)
    if maximum is not None and result > maximum:
        raise errors.bad_value(argument, f"must be <= {maximum}", value)
    return result


def function(argument: str, value: Any, expected: str = "must be callable") -> None:
    """Raises a `TypeError` unless `value` is callable and not a class.

    Classes are callable, but passing one where a function or an instance is
    expected (`snt.initializers.Ones` for `snt.initializers.Ones()`) is always
    a mistake.
    """
    if not callable(value) or isinstance(value, type):
        raise errors.bad_type(argument, expected, value)


def callable_or_none(argument: str, value: Any, expected: str = "callable") -> None:
    """Raises a `TypeError` unless `value` is None or callable."""
    if value is not None and not callable(value):
        raise errors.bad_type(argument, f"must be {expected} or None", value)


def initializer(argument: str, value: Any) -> None:
    """Raises a `TypeError` unless `value` is None or an initializer.

    An initializer is any callable `(shape, dtype) -> tensor`. A class (e.g.
    `snt.initializers.Ones` instead of `snt.initializers.Ones()`) is refused:
    the original failed later, calling it with the wrong arguments.
    """
    if value is not None and (not callable(value) or isinstance(value, type)):
        raise errors.bad_type(
            argument, "must be a callable `(shape, dtype) -> tensor` or None", value
        )


def dtype(argument: str, value: Any, floating: bool = False) -> tf.DType:
    """A TensorFlow dtype in any spelling `tf.as_dtype` takes."""
    try:
        result = tf.as_dtype(value)
    except (TypeError, ValueError) as e:
        raise errors.bad_type(argument, "must be a TensorFlow dtype", value) from e
    if floating and not result.is_floating:
        raise errors.bad_value(argument, "must be a floating point dtype", result)
    return result


def unused_initializer(argument: str, value: Any, flag_name: str, used: bool) -> None:
    """Rejects an initializer for a parameter the module will not create.

    The original raised a `ValueError` for e.g. `scale_init` given with
    `create_scale=False`.
    """
    if value is not None and not used:
        raise errors.bad_value(
            argument, f"must be None when `{flag_name}=False`", value
        )


def mode_flag(argument: str, value: Any) -> bool | tf.Tensor:
    """A call-time switch such as `is_training`, read by its truth value.

    As `flag`, except that a boolean tensor whose value is unknown while
    tracing comes back as the tensor itself, for the caller to `tf.cond` on.
    """
    if value is True or value is False:
        return value
    if isinstance(value, (tf.Tensor, tf.Variable)):
        if tf.executing_eagerly() and not tf.is_symbolic_tensor(value):
            value = value.numpy()
        elif isinstance(value, tf.Variable) or tf.get_static_value(value) is None:
            if value.dtype == tf.bool and value.shape.rank in (0, None):
                return value  # type: ignore[return-value]
            raise errors.bad_type(
                argument, "must be a Python bool or a scalar boolean tensor", value
            )
    return flag(argument, value)


def tf_real(
    argument: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    float_tensor: bool = False,
) -> Any:
    """`real`, for a number the original handed to TF ops unchecked (an
    optimizer's hyper-parameter, an initializer's bounds, a gradient scale).

    As there, a one-element list or tuple (`[0.1]`, which TF broadcast like
    `0.1`) stands for its element, and None is a `ValueError` (as in
    `tf.convert_to_tensor`).
    """
    if value is None:
        raise errors.bad_value(argument, "must be a real number", value)
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    return real(argument, value, minimum, maximum, float_tensor=float_tensor)


def after(asserts: Sequence[Any], value: tf.Tensor) -> tf.Tensor:
    """`value`, made to depend on the graph-mode assertion ops `asserts`.

    An op that reads the result cannot run before the checks (without the
    edge, TensorFlow may run it first and fail with its own, vaguer error).
    Eager asserts return None and add nothing.
    """
    pending = [a for a in asserts if a is not None]
    if not pending:
        return value
    with tf.control_dependencies(pending):
        return tf.identity(value)
