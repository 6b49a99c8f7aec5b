"""JAX-style helpers for `snt.functional`: gradients, `jit` and devices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import checks, errors, utils


def device_put(t: Any, device: str | None = None) -> Any:
    """Copies every leaf of the nest `t` to `device` as a tensor.

    Args:
      t: A nest of tensors (or values convertible to tensors).
      device: A device name such as `"/device:CPU:0"`. Default None keeps
        TensorFlow's default placement.

    Returns:
      The same nest, each leaf a tensor on `device`.

    Raises:
      TypeError: if a leaf cannot be converted to a tensor.

    >>> snt.functional.device_put({"a": 1.0}, "/device:CPU:0")["a"].device
    '/job:localhost/replica:0/task:0/device:CPU:0'
    """
    return _device_put(t, device)


@utils.no_autograph
def _device_put(t: Any, device: Any) -> Any:
    if device is not None and not isinstance(device, str):
        # What `tf.device` raised in the original.
        raise errors.bad_value("device", "must be a device name string or None", device)

    def put(leaf: Any) -> tf.Tensor:
        try:
            return tf.identity(leaf)
        except (TypeError, ValueError) as e:
            raise errors.bad_type(
                "t", "must be a nest of values convertible to tensors", leaf
            ) from e

    with tf.device(device):
        return tf.nest.map_structure(put, t)


def device_get(t: Any) -> Any:
    """Fetches every tensor in the nest `t` to the host as a NumPy array.

    Leaves that are not tensors or variables are returned unchanged.

    Args:
      t: A nest of (eager) tensors.

    Returns:
      The same nest with NumPy arrays in place of the tensors.

    Raises:
      TypeError: if a leaf is a symbolic tensor (inside `tf.function`).

    >>> snt.functional.device_get([tf.ones([2])])
    [array([1., 1.], dtype=float32)]
    """
    return _device_get(t)


@utils.no_autograph
def _device_get(t: Any) -> Any:
    def get(leaf: Any) -> Any:
        if not isinstance(leaf, (tf.Tensor, tf.Variable)):
            return leaf
        if tf.is_symbolic_tensor(leaf):
            raise errors.bad_type(
                "t",
                "must contain eager tensors (a symbolic tensor inside "
                "`tf.function` has no value to fetch)",
                leaf,
            )
        return leaf.numpy()  # type: ignore[union-attr]

    return tf.nest.map_structure(get, t)


def _default_device() -> str:
    for kind in ("TPU", "GPU"):
        found = tf.config.list_logical_devices(kind)
        if found:
            return found[0].name
    return "/device:CPU:0"


def jit(f: Callable[..., Any], device: str | None = None) -> Callable[..., Any]:
    """Compiles `f` with `tf.function` and runs it on one device.

    Tensor, variable and NumPy array arguments are first copied to the device
    (`tf.identity`); other Python values are passed as they are (so, as in
    `tf.function`, each new value traces again). XLA is not used.

    Args:
      f: The function to compile.
      device: Device to run on. Default None picks the first TPU, else the
        first GPU, else the CPU.

    Returns:
      A function with the calling convention of `f`.

    Raises:
      ValueError: if `f` is not callable (as `tf.function` raised).
      TypeError: if `device` is not a string (also an `AttributeError`, which
        the original raised when called).

    >>> double = snt.functional.jit(lambda x: x * 2)
    >>> double(tf.ones([2])).numpy().tolist()
    [2.0, 2.0]
    """
    if not callable(f):
        raise errors.bad_value("f", "must be callable", f)
    if device is not None and not isinstance(device, str):
        raise errors.lacks_attribute(
            "device", "must be a device name string or None", device
        )
    target = _default_device() if device is None else device
    compiled = tf.function(f)

    def put(leaf: Any) -> Any:
        if isinstance(leaf, (tf.Tensor, tf.Variable, np.ndarray)):
            return tf.identity(leaf)
        return leaf

    @utils.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with tf.device(target):
            args, kwargs = tf.nest.map_structure(put, (args, kwargs))
            return compiled(*args, **kwargs)

    return wrapper


def _check_argnums(argnums: Any) -> list[int]:
    # Any integer spelling, as the original indexed `args` with it.
    try:
        flat = tf.nest.flatten(argnums)
    except (TypeError, ValueError) as e:
        raise _bad_argnums(argnums) from e
    positions = [checks.as_index(i) for i in flat]
    if None in positions:
        raise _bad_argnums(argnums)
    return positions  # type: ignore[return-value]


def _bad_argnums(argnums: Any) -> TypeError:
    return errors.bad_type(
        "argnums", "must be an int or a nest of ints (argument positions)", argnums
    )


class _ArgnumsOutOfRange(ValueError, IndexError):
    """`argnums` selects a missing argument (the original's `IndexError`)."""


def _watchable(leaf: Any) -> Any:
    if isinstance(leaf, (tf.Tensor, tf.Variable)):
        # As with `tf.GradientTape`, a non-floating tensor gets a None
        # gradient.
        return leaf
    try:
        tensor = tf.convert_to_tensor(leaf)
    except (TypeError, ValueError):
        tensor = None
    if tensor is None or not (tensor.dtype.is_floating or tensor.dtype.is_integer):
        # What `tape.watch` raised in the original.
        raise errors.bad_value(
            "argnums", "must select arguments that are nests of numbers", leaf
        )
    return tensor


def value_and_grad(
    f: Callable[..., Any], argnums: Any = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """Makes a function returning `f`'s value and its gradients.

    The gradients are with respect to the positional arguments selected by
    `argnums` (each a nest of tensors, e.g. the `params` dict from
    `snt.functional.transform`). Python numbers and NumPy arrays in those
    arguments are converted to tensors first. As with `tf.GradientTape`, a
    non-scalar output is differentiated as its sum, and a leaf the output
    does not depend on gets a None gradient. Variables read by `f` are not
    watched.

    Args:
      f: The function to differentiate.
      argnums: An int, or a nest of ints, selecting positional arguments.
        The gradients have the same nest structure. Default 0.
      has_aux: If True, `f` returns `(output, aux)` and only `output` is
        differentiated.

    Returns:
      A function returning `(output, grads)`, or `((output, aux), grads)`
      with `has_aux=True`.

    Raises:
      TypeError: for a non-callable `f`, a bad `argnums` or `has_aux`; when
        called, for `f` not returning a pair with `has_aux=True`.
      ValueError: when called, if `argnums` selects a missing argument (also
        an `IndexError`, as in the original) or a value that is not a number,
        or `f` returns a sequence of another length than 2 with
        `has_aux=True`.

    >>> f = snt.functional.value_and_grad(lambda x, y: x * y, argnums=(0, 1))
    >>> value, (dx, dy) = f(2.0, 3.0)
    >>> float(value), float(dx), float(dy)
    (6.0, 3.0, 2.0)
    """
    return _value_and_grad(f, argnums, has_aux)


class _GradCall:
    """One call of a `value_and_grad` function: argument checks and the tape."""

    def __init__(
        self, positions: list[int], argnums: Any, has_aux: bool, args: tuple[Any, ...]
    ):
        args_list = list(args)
        for i in positions:
            if not -len(args_list) <= i < len(args_list):
                error = errors.bad_value(
                    "argnums",
                    f"must select positional arguments of the call "
                    f"({len(args_list)} given)",
                    argnums,
                )
                raise _ArgnumsOutOfRange(str(error))
        for i in set(positions):
            args_list[i] = tf.nest.map_structure(_watchable, args_list[i])
        self.args = args_list
        self._has_aux = has_aux
        self._selected = tf.nest.pack_sequence_as(
            argnums, [args_list[i] for i in positions]
        )
        self._tape = tf.GradientTape(watch_accessed_variables=False)

    def __enter__(self) -> None:
        self._tape.__enter__()
        self._tape.watch(self._selected)

    def __exit__(self, *exc_info: Any) -> None:
        self._tape.__exit__(*exc_info)

    @utils.no_autograph
    def finish(self, out: Any) -> tuple[Any, Any]:
        """Returns `(out, grads)`."""
        if self._has_aux:
            expected = "was True, so `f` must return a pair `(output, aux)`"
            if not isinstance(out, (tuple, list)):
                raise errors.bad_type("has_aux", expected, out)
            if len(out) != 2:
                raise errors.bad_value("has_aux", expected, out)
            value = out[0]
        else:
            value = out
        return out, self._tape.gradient(value, self._selected)


@utils.no_autograph
def _value_and_grad(
    f: Callable[..., Any], argnums: Any, has_aux: bool
) -> Callable[..., Any]:
    if not callable(f):
        raise errors.bad_type("f", "must be callable", f)
    positions = _check_argnums(argnums)
    has_aux = checks.flag("has_aux", has_aux)

    # Runs inside the user's `tf.function`s, where AutoGraph converts every
    # function it calls (and so `f`): kept tiny, the work is in `_GradCall`.
    @utils.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = _GradCall(positions, argnums, has_aux, args)
        with call:
            out = f(*call.args, **kwargs)
        return call.finish(out)

    return wrapper


def grad(
    f: Callable[..., Any], argnums: Any = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """Makes a function returning the gradients of `f` (see `value_and_grad`).

    Args:
      f: The function to differentiate.
      argnums: An int, or a nest of ints, selecting positional arguments.
        Default 0.
      has_aux: If True, `f` returns `(output, aux)`.

    Returns:
      A function returning `grads`, or `(grads, aux)` with `has_aux=True`.

    >>> df = snt.functional.grad(lambda x: x ** 2)
    >>> float(df(3.0))
    6.0
    """
    return _grad(f, argnums, has_aux)


@utils.no_autograph
def _grad(f: Callable[..., Any], argnums: Any, has_aux: bool) -> Callable[..., Any]:
    value_and_grad_f = _value_and_grad(f, argnums, has_aux)
    has_aux = checks.flag("has_aux", has_aux)

    @utils.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out, grads = value_and_grad_f(*args, **kwargs)
        return (grads, out[1]) if has_aux else grads

    return wrapper
