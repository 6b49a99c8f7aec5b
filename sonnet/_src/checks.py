"""Argument checks: the one place that decides what each kind of argument accepts.

The rule is Sonnet 2.0.2's acceptance: whatever spelling of an argument the
original accepts, these checkers accept and normalise (a size given as a NumPy
integer or a scalar integer tensor comes back as a Python `int`). They reject
only what the original also rejects, or what made it crash inside TensorFlow or
return a silently wrong result, and then with the exception type code written
for the original catches:

- `ValueError` / `TypeError` where the original raised those;
- `InvalidArgumentError` (below) where the original let a TensorFlow op fail:
  it is both a `ValueError` and a `tf.errors.InvalidArgumentError`.

Every message follows one template: the argument, what was expected, and
`Received: ...` (`utils.bad_value` / `utils.bad_type`).
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import utils

bad_value = utils.bad_value
bad_type = utils.bad_type

# What TF raises when an op cannot handle its operands: eagerly at run time
# (`InvalidArgumentError`; `NotFoundError` when no kernel supports the dtype;
# oneDNN's CPU kernels report some as `AbortedError`) or, while tracing, a
# `ValueError`/`TypeError` from shape and dtype inference. Modules catch these
# around their ops (a zero-cost `try`) to explain the failure in our words.
OP_ERRORS = (
    tf.errors.InvalidArgumentError,
    tf.errors.NotFoundError,
    tf.errors.UnimplementedError,
    tf.errors.AbortedError,
    ValueError,
    TypeError,
)


class InvalidArgumentError(ValueError, tf.errors.InvalidArgumentError):
    """A clean error for an input on which the original's TF op failed.

    Code written for Sonnet 2.0.2 catches such failures as
    `tf.errors.InvalidArgumentError`; new code catches `ValueError`. This
    class is both.
    """

    def __init__(self, message: str):
        tf.errors.InvalidArgumentError.__init__(self, None, None, message)

    def __reduce__(self) -> Any:
        return (type(self), (self.message,))


def invalid_argument(
    argument: str, expected: str, received: Any
) -> InvalidArgumentError:
    """`InvalidArgumentError` in the project's template (see `utils.bad_value`)."""
    return InvalidArgumentError(str(bad_value(argument, expected, received)))


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
    """An integer argument (any spelling `as_index` takes), as a Python int."""
    result = as_index(value)
    if result is None:
        raise bad_type(argument, "must be an integer", value)
    if minimum is not None and result < minimum:
        kind = {0: "a non-negative", 1: "a positive"}.get(
            minimum, f"an integer >= {minimum}, not"
        )
        raise bad_value(argument, f"must be {kind} integer", value)
    return result


def size(argument: str, value: Any, allow_zero: bool = False) -> int:
    """A size or count: a positive (or, if allowed, non-negative) integer."""
    return integer(argument, value, minimum=0 if allow_zero else 1)


def optional_size(argument: str, value: Any, allow_zero: bool = False) -> int | None:
    """`size`, or None."""
    return None if value is None else size(argument, value, allow_zero)


def seed(argument: str, value: Any) -> int | None:
    """A random seed: None, an integer, or a whole float (as the original)."""
    if value is None:
        return None
    result = as_index(value)
    if result is not None:
        return result
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    raise bad_type(argument, "must be an integer or None", value)


def flag(argument: str, value: Any) -> bool:
    """A Python-side switch such as `with_bias`, read by its truth value.

    The original tests these with `if value:`, so bools, numbers, NumPy
    scalars and eager scalar tensors all work; strings are refused, since
    `"False"` is true (a silently wrong result).
    """
    if value is True or value is False:
        return value
    if isinstance(value, (str, bytes)):
        raise bad_type(argument, "must be a bool", value)
    if isinstance(value, (tf.Tensor, tf.Variable)):
        static = tf.get_static_value(value)
        if static is None or np.ndim(static) != 0:
            raise bad_type(argument, "must be a bool (a Python value)", value)
        return bool(static)
    try:
        return bool(value)
    except (TypeError, ValueError) as e:
        raise bad_type(argument, "must be a bool", value) from e


def real(
    argument: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    allow_tensor: bool = True,
) -> Any:
    """A real number: Python/NumPy numbers, 0-d arrays, or a scalar tensor.

    Numbers come back as Python floats, checked against `[minimum, maximum]`;
    scalar tensors and variables (e.g. a hyper-parameter a schedule assigns)
    come back unchanged, since their value may change.
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        dtype = value.dtype
        if (
            not allow_tensor
            or dtype.is_bool
            or not (dtype.is_floating or dtype.is_integer)
        ):
            raise bad_type(argument, "must be a real number", value)
        if value.shape.rank not in (0, None):
            raise bad_value(argument, "must be a scalar", value)
        return value
    if isinstance(value, np.ndarray):
        if value.ndim != 0 or value.dtype.kind not in "biuf":
            raise bad_type(argument, "must be a real number", value)
        value = value[()]
    if not isinstance(value, (numbers.Real, np.bool_)):
        raise bad_type(argument, "must be a real number", value)
    result = float(value)
    if math.isnan(result):
        raise bad_value(argument, "must not be NaN", value)
    if minimum is not None and result < minimum:
        raise bad_value(argument, f"must be >= {minimum}", value)
    if maximum is not None and result > maximum:
        raise bad_value(argument, f"must be <= {maximum}", value)
    return result


def function(argument: str, value: Any, expected: str = "must be callable") -> None:
    """Raises a `TypeError` unless `value` is callable and not a class.

    Classes are callable, but passing one where a function or an instance is
    expected (`snt.initializers.Ones` for `snt.initializers.Ones()`) is always
    a mistake.
    """
    if not callable(value) or isinstance(value, type):
        raise bad_type(argument, expected, value)


def callable_or_none(argument: str, value: Any, expected: str = "callable") -> None:
    """Raises a `TypeError` unless `value` is None or callable."""
    if value is not None and not callable(value):
        raise bad_type(argument, f"must be {expected} or None", value)


def initializer(argument: str, value: Any) -> None:
    """Raises a `TypeError` unless `value` is None or an initializer.

    An initializer is any callable `(shape, dtype) -> tensor`. A class (e.g.
    `snt.initializers.Ones` instead of `snt.initializers.Ones()`) is refused:
    the original failed later, calling it with the wrong arguments.
    """
    if value is not None and (not callable(value) or isinstance(value, type)):
        raise bad_type(
            argument, "must be a callable `(shape, dtype) -> tensor` or None", value
        )


def dtype(argument: str, value: Any, floating: bool = False) -> tf.DType:
    """A TensorFlow dtype in any spelling `tf.as_dtype` takes."""
    try:
        result = tf.as_dtype(value)
    except (TypeError, ValueError) as e:
        raise bad_type(argument, "must be a TensorFlow dtype", value) from e
    if floating and not result.is_floating:
        raise bad_value(argument, "must be a floating point dtype", result)
    return result


def unused_initializer(argument: str, value: Any, flag_name: str, used: bool) -> None:
    """Rejects an initializer for a parameter the module will not create.

    The original raised a `ValueError` for e.g. `scale_init` given with
    `create_scale=False`.
    """
    if value is not None and not used:
        raise bad_value(argument, f"must be None when `{flag_name}=False`", value)
