"""`snt.format_variables` and `snt.log_variables`: a table of variables."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import tabulate
import tensorflow as tf
from absl import logging

from sonnet._src import errors

_DTYPE_ABBREVIATIONS = {
    tf.float16: "f16",
    tf.float32: "f32",
    tf.float64: "f64",
    tf.bfloat16: "bf16",
    tf.complex64: "c64",
    tf.complex128: "c128",
    tf.uint8: "u8",
    tf.uint16: "u16",
    tf.uint32: "u32",
    tf.uint64: "u64",
    tf.int8: "i8",
    tf.int16: "i16",
    tf.int32: "i32",
    tf.int64: "i64",
    tf.qint8: "qi8",
    tf.qint16: "qi16",
    tf.qint32: "qi32",
    tf.quint8: "qu8",
    tf.quint16: "qu16",
}


def _name(variable: tf.Variable) -> str:
    return variable.name.split(":")[0]


def _spec(variable: tf.Variable) -> str:
    dtype = _DTYPE_ABBREVIATIONS.get(variable.dtype, variable.dtype.name)
    dims = ",".join(str(d) for d in variable.shape.as_list())
    return f"{dtype}[{dims}]"


def _device(variable: tf.Variable) -> str:
    spec = tf.DeviceSpec.from_string(variable.device or "")
    if spec.job == "localhost" and spec.replica == 0 and spec.task == 0:
        if spec.device_index == 0:
            return str(spec.device_type)
        return f"{spec.device_type} {spec.device_index}"
    return str(spec)


def _sort_key(variable: tf.Variable) -> tuple[str, int, str]:
    name = _name(variable)
    scope = name.rsplit("/", 1)[0] if "/" in name else ""
    return scope, -variable.shape.rank, name


def _check_variables(variables: Any) -> list[tf.Variable]:
    error = errors.bad_type(
        "variables", "must be an iterable of tf.Variables", variables
    )
    if isinstance(variables, (str, bytes, tf.Tensor, tf.Variable)):
        raise error
    try:
        found = list(variables)
    except TypeError as e:  # Not iterable (e.g. a 0-d array).
        raise error from e
    for v in found:
        if not isinstance(v, tf.Variable):
            raise errors.bad_type("variables", "must contain only tf.Variables", v)
    return found


def format_variables(variables: Iterable[tf.Variable], tablefmt: str = "orgtbl") -> str:
    """Formats variables as a table: name, dtype and shape, trainable, device.

    Rows are grouped by name scope, higher-rank variables first.

    Args:
      variables: The variables to list.
      tablefmt: A `tabulate` table format (default `"orgtbl"`).

    Returns:
      The table as a string.

    >>> with tf.device("/cpu:0"):
    ...   lin = snt.Linear(2)
    ...   _ = lin(tf.ones([1, 3]))
    >>> print(snt.format_variables(lin.variables))
    | Variable   | Spec     | Trainable   | Device   |
    |------------+----------+-------------+----------|
    | linear/w   | f32[3,2] | True        | CPU      |
    | linear/b   | f32[2]   | True        | CPU      |
    """
    variables = _check_variables(variables)
    if not isinstance(tablefmt, (str, tabulate.TableFormat)):
        raise errors.bad_type("tablefmt", "must be a tabulate table format", tablefmt)
    rows = [
        (_name(v), _spec(v), str(v.trainable), _device(v))
        for v in sorted(variables, key=_sort_key)
    ]
    return tabulate.tabulate(
        rows, headers=("Variable", "Spec", "Trainable", "Device"), tablefmt=tablefmt
    )


def log_variables(variables: Iterable[tf.Variable]) -> None:
    """Logs `format_variables(variables)` with `absl.logging.info`, line by line.

    Args:
      variables: The variables to log.

    >>> snt.log_variables([tf.Variable(1.0, name="x")])
    """
    for line in format_variables(variables).split("\n"):
        logging.info(line)
