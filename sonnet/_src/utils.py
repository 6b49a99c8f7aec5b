"""Small helpers shared by the modules: shapes, conversions, autograph."""

from __future__ import annotations

import functools
import inspect
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import tensorflow as tf

from sonnet._src import errors, tf_compat

T = TypeVar("T")


def replicate(element: T | Sequence[T], num_times: int, name: str) -> tuple[T, ...]:
    """Repeats a scalar `num_times`, or checks a sequence has that length.

    Args:
      element: A scalar, a sequence of length 1 (repeated) or of length
        `num_times` (taken as is).
      num_times: The length of the result.
      name: Argument name used in the error message.

    Returns:
      A tuple of length `num_times`.

    >>> from sonnet._src.utils import replicate
    >>> replicate(3, 2, "kernel_shape")
    (3, 3)
    >>> replicate([1, 2], 2, "stride")
    (1, 2)
    """
    if not isinstance(element, Sequence):
        return (element,) * num_times
    if len(element) == 1:
        return tuple(element) * num_times
    if len(element) == num_times:
        return tuple(element)
    raise TypeError(
        f"`{name}` must be a scalar or a sequence of length 1 or {num_times}. "
        f"Received: {errors.describe(element)}."
    )


_CHANNELS_FIRST = re.compile(r"^NC[^C]*$")
_CHANNELS_LAST = re.compile(r"^N[^C]*C$")
_SEQUENTIAL = re.compile(r"^((BT)|(TB))[^D]*D$")


def get_channel_index(data_format: str) -> int:
    """Index of the channel axis for `data_format` (1 or -1).

    >>> from sonnet._src.utils import get_channel_index
    >>> get_channel_index("NCHW"), get_channel_index("channels_last")
    (1, -1)
    """
    if not isinstance(data_format, str):
        raise errors.bad_type(
            "data_format", "must be a string such as 'NHWC'", data_format
        )
    if data_format == "channels_first" or _CHANNELS_FIRST.match(data_format):
        return 1
    if (
        data_format == "channels_last"
        or _CHANNELS_LAST.match(data_format)
        or _SEQUENTIAL.match(data_format)
    ):
        return -1
    raise errors.bad_value(
        "data_format",
        "must name the channel axis: a spatial format (e.g. 'NCHW' or 'NHWC'), "
        "a sequential format (e.g. 'BTHWD'), 'channels_first' or 'channels_last'",
        data_format,
    )


def assert_rank(inputs: Any, rank: int, argument: str = "inputs") -> None:
    """Raises a `ValueError` unless `inputs` has exactly `rank` dimensions."""
    shape = inputs.shape
    if shape.rank is not None and shape.rank != rank:
        raise errors.bad_value(
            argument, f"must have rank {rank}", tuple(shape.as_list())
        )


def assert_minimum_rank(inputs: Any, rank: int, argument: str = "inputs") -> None:
    """Raises a `ValueError` unless `inputs` has at least `rank` dimensions."""
    shape = inputs.shape
    if shape.rank is None:
        raise errors.bad_value(argument, "must have a known rank", shape)
    if shape.rank < rank:
        raise errors.bad_value(
            argument, f"must have rank >= {rank}", tuple(shape.as_list())
        )


def check_floating_or_integer(argument: str, value: Any) -> None:
    """Rejects tensors whose dtype is neither floating point nor integer."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        dtype = tf.as_dtype(dtype)
        if not (dtype.is_floating or dtype.is_integer):
            raise errors.bad_type(argument, "must have a floating point dtype", value)


def check_floating(argument: str, value: Any) -> None:
    """Rejects tensors whose dtype is not floating point."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and not tf.as_dtype(dtype).is_floating:
        raise errors.bad_type(argument, "must have a floating point dtype", value)


def to_tensor(argument: str, value: Any, dtype: Any = None) -> tf.Tensor:
    """`tf.convert_to_tensor` whose failure names the argument."""
    if isinstance(value, (tf.Tensor, tf.Variable)) and dtype is None:
        return value  # type: ignore[return-value]
    try:
        return tf.convert_to_tensor(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        # TF raised `ValueError` (e.g. for None) or `TypeError`; ours is both.
        raise errors.invalid_argument_type(
            argument, "must be convertible to a tensor", value
        ) from e


_autograph_lock = threading.Lock()


def wraps(f: Any) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """`functools.wraps(f)`, but a callable object (e.g. a module) is not
    recorded as `__wrapped__`: AutoGraph follows `__wrapped__` to find the
    source code of a wrapper it converts, which fails on an object (an
    error with `AUTOGRAPH_STRICT_CONVERSION`, else the wrapper runs
    unconverted)."""
    if inspect.isfunction(f) or inspect.ismethod(f):
        return functools.wraps(f)

    def decorate(wrapper: Callable[..., T]) -> Callable[..., T]:
        for attribute in ("__doc__", "__name__", "__qualname__"):
            value = getattr(f, attribute, None)
            if isinstance(value, str):
                setattr(wrapper, attribute, value)
        return wrapper

    return decorate


def smart_autograph(f: Callable[..., T]) -> Callable[..., T]:
    """Runs `f` as plain Python eagerly and AutoGraph-converted when traced.

    This lets a tensor-valued condition (e.g. a boolean `is_training` tensor)
    work inside `tf.function`, even with `autograph=False`.
    """
    converted: list[Callable[..., T]] = []

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        if tf.executing_eagerly():
            return f(*args, **kwargs)
        if not converted:
            with _autograph_lock:
                if not converted:
                    converted.append(tf.autograph.to_graph(f))
        return converted[0](*args, **kwargs)

    return wrapper


def variable_like(
    inputs: tf.Tensor | tf.Variable,
    trainable: bool = False,
    name: str | None = None,
) -> tf.Variable:
    """A zero-filled variable with the shape, dtype and device of `inputs`."""
    if name is None:
        name = getattr(inputs, "name", "Variable")
        name = name.split(":")[0] if name else "Variable"
    with tf.device(inputs.device):
        return tf.Variable(
            tf.zeros(inputs.shape, inputs.dtype), trainable=trainable, name=name
        )


class CompareById:
    """Wraps an object so that equality and hashing use its identity."""

    __slots__ = ("wrapped",)

    def __init__(self, wrapped: Any):
        self.wrapped = wrapped

    def __hash__(self) -> int:
        return id(self.wrapped)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompareById) and other.wrapped is self.wrapped


def no_autograph(f: Callable[..., T]) -> Callable[..., T]:
    """Marks library code that AutoGraph should call as is, never convert.

    Module code that handles tensor-valued flags explicitly (with `tf.cond`)
    gains nothing from conversion, and converting it (plus everything it
    calls) makes tracing several times slower. Keras layers are excluded
    from conversion in the same way.
    """
    return tf_compat.mark_do_not_convert(f)


def accelerator_present() -> bool:
    """Whether TensorFlow sees a GPU or a TPU (where ops run by default)."""
    return bool(
        tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU")
    )
