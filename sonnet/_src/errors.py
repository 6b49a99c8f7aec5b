"""The error constructors: one message template, and the classes that carry it.

Every error the library raises for a bad argument reads: the argument in
backticks, what was expected, then `Received: ...` (`bad_value`,
`bad_type`). Where Sonnet 2.0.2 let a TensorFlow op fail, or read an
attribute the value lacked, the error is also an instance of that class
(`InvalidArgumentError` is a `ValueError` and a
`tf.errors.InvalidArgumentError`, `AttributeTypeError` a `TypeError` and an
`AttributeError`, ...), so code written for the original still catches it.

This module is the lowest of the library: it imports nothing of it.
`checks.py` decides what each argument accepts and raises these;
`utils.py` and the modules raise them too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

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


def describe(value: Any) -> str:
    """Short repr of `value` for error messages (tensors show shape and dtype)."""
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return f"<{type(value).__name__} shape={value.shape} dtype={value.dtype.name}>"
    if isinstance(value, np.ndarray):
        return f"<ndarray shape={value.shape} dtype={value.dtype}>"
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def bad_value(argument: str, expected: str, received: Any) -> ValueError:
    """A `ValueError` in the project's template: argument, expectation, received."""
    return ValueError(f"`{argument}` {expected}. Received: {describe(received)}.")


def bad_type(argument: str, expected: str, received: Any) -> TypeError:
    """A `TypeError` in the project's template: argument, expectation, received."""
    return TypeError(
        f"`{argument}` {expected}. Received: {describe(received)} "
        f"of type {type(received).__name__}."
    )


def error_like(
    error: Exception, argument: str, expected: str, received: Any
) -> ValueError | TypeError:
    """Our message, with the class (`ValueError` or `TypeError`) of the TF
    `error` the original let through, e.g. from `tf.convert_to_tensor`
    (`ValueError` for None or a tensor of another dtype, `TypeError` for a
    value of the wrong kind)."""
    make = bad_value if isinstance(error, ValueError) else bad_type
    return make(argument, expected, received)


class InvalidArgumentError(ValueError, tf.errors.InvalidArgumentError):
    """A clean error for an input on which the original's TF op failed.

    Code written for Sonnet 2.0.2 catches such failures as
    `tf.errors.InvalidArgumentError`; new code catches `ValueError`. This
    class is both.
    """

    # TF's own signature: AutoGraph rebuilds errors raised while tracing
    # with it (other signatures would turn them into `StagingError`s).
    def __init__(self, node_def: Any, op: Any, message: str, *args: Any):
        tf.errors.InvalidArgumentError.__init__(self, node_def, op, message, *args)

    def __reduce__(self) -> Any:
        return (type(self), (None, None, self.message))


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """`InvalidArgumentError` for a value of the wrong type (also a `TypeError`).

    E.g. a float size, or inputs of the wrong dtype: the original's TF op
    failed with `InvalidArgumentError`; new code catches `TypeError`.
    """


def invalid_argument(
    argument: str, expected: str, received: Any
) -> InvalidArgumentError:
    """`InvalidArgumentError` in the project's template (see `bad_value`)."""
    message = str(bad_value(argument, expected, received))
    return InvalidArgumentError(None, None, message)


def invalid_argument_type(
    argument: str, expected: str, received: Any
) -> InvalidArgumentTypeError:
    """`InvalidArgumentTypeError` in the project's template (see `bad_type`)."""
    message = str(bad_type(argument, expected, received))
    return InvalidArgumentTypeError(None, None, message)


class InvalidArgumentAttributeError(InvalidArgumentTypeError, AttributeError):
    """`InvalidArgumentTypeError` for a float tensor given as an integer: the
    original took its NumPy value's `__index__` (an `AttributeError`) or fed
    it to a TF op (`InvalidArgumentError`)."""


def invalid_argument_attribute(
    argument: str, expected: str, received: Any
) -> InvalidArgumentAttributeError:
    """`InvalidArgumentAttributeError` in the project's template (`bad_type`)."""
    message = str(bad_type(argument, expected, received))
    return InvalidArgumentAttributeError(None, None, message)


class InvalidArgumentIndexError(InvalidArgumentError, IndexError):
    """As `InvalidArgumentError`, where the original indexed past the end of
    something it was given (e.g. the shape of a scalar input), raising
    `IndexError`."""


def invalid_argument_index(
    argument: str, expected: str, received: Any
) -> InvalidArgumentIndexError:
    """`InvalidArgumentIndexError` in the project's template (see `bad_value`)."""
    message = str(bad_value(argument, expected, received))
    return InvalidArgumentIndexError(None, None, message)


class InvalidArgumentZeroDivisionError(InvalidArgumentError, ZeroDivisionError):
    """As `InvalidArgumentError`, where the original divided by a zero count
    it was given (`ZeroDivisionError`, e.g. zero channel groups)."""


def invalid_argument_zero(
    argument: str, expected: str, received: Any
) -> InvalidArgumentZeroDivisionError:
    """`InvalidArgumentZeroDivisionError` in the project's template."""
    message = str(bad_value(argument, expected, received))
    return InvalidArgumentZeroDivisionError(None, None, message)


class InternalError(InvalidArgumentError, tf.errors.InternalError):
    """As `InvalidArgumentError`, where the original's TF kernel failed with
    `tf.errors.InternalError` (oneDNN's CPU kernels report some invalid
    arguments so, e.g. an empty filter in a transposed convolution)."""


def internal(argument: str, expected: str, received: Any) -> InternalError:
    """`InternalError` in the project's template (see `bad_value`)."""
    return InternalError(None, None, str(bad_value(argument, expected, received)))


class UnimplementedError(ValueError, tf.errors.UnimplementedError):
    """As `InvalidArgumentError`, where the original's TF op had no kernel for
    the input's dtype (`tf.errors.UnimplementedError`, e.g. arithmetic on
    strings)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any):
        tf.errors.UnimplementedError.__init__(self, node_def, op, message, *args)

    def __reduce__(self) -> Any:
        return (type(self), (None, None, self.message))


class UnimplementedTypeError(UnimplementedError, TypeError):
    """`UnimplementedError` for a value of the wrong type (also a `TypeError`),
    e.g. a string hyper-parameter, which the original's `tf.cast` had no
    kernel for."""


def unimplemented_type(
    argument: str, expected: str, received: Any
) -> UnimplementedTypeError:
    """`UnimplementedTypeError` in the project's template (see `bad_type`)."""
    message = str(bad_type(argument, expected, received))
    return UnimplementedTypeError(None, None, message)


class AttributeTypeError(TypeError, AttributeError):
    """A clean `TypeError` for an argument on which the original failed with
    `AttributeError` (it used an attribute the value lacks, e.g. `.items()` of
    a list given for a dict).

    Code written for Sonnet 2.0.2 may catch `AttributeError`; new code
    catches `TypeError`. This class is both. Not for use inside properties or
    `__getattr__`, where Python treats an `AttributeError` as "no attribute".
    """


def lacks_attribute(argument: str, expected: str, received: Any) -> AttributeTypeError:
    """`AttributeTypeError` in the project's template (see `bad_type`)."""
    return AttributeTypeError(str(bad_type(argument, expected, received)))


class AttributeValueError(ValueError, AttributeError):
    """As `AttributeTypeError`, for a clean `ValueError` (e.g. no tensor among
    arguments whose `.shape` the original read)."""


def lacks_attribute_value(
    argument: str, expected: str, received: Any
) -> AttributeValueError:
    """`AttributeValueError` in the project's template (see `bad_value`)."""
    return AttributeValueError(str(bad_value(argument, expected, received)))
