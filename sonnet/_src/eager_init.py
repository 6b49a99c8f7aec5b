"""Creating a module's variables eagerly while a `tf.function` is traced.

A module usually creates its variables on its first call (`@snt.once`). When
that call happens while a `tf.function` is traced, TensorFlow would create
each variable with its initializer guarded by a conditional in the graph,
lift the initializers out afterwards, and then trace the function a second
time because variables were created. Most of that is wasted: Sonnet's
initializers and constant initial values do not depend on the function's
inputs. So, while `once` runs a module's initialization inside a trace:

* Sonnet initializers (`snt.initializers.Initializer` subclasses, including
  users' own) compute their value outside the graph (`tf.init_scope`), and
  fall back to the graph when they cannot (e.g. a shape that is a graph
  tensor);
* a variable whose initial value is then an eager tensor, a constant of the
  graph (zeros, ones, ...) or a Python/NumPy value is created outside the
  graph, with the same name and value, and without registering it with the
  function being traced (`experimental_enable_variable_lifting=False`), so
  TensorFlow does not need a second trace when all variables were created
  this way.

Nothing changes under a distribution strategy or an explicit device scope
(placement must not move), or when the outermost context is a graph.
Consequence: a module built during a later trace of the same function (not
only the first) works instead of raising TensorFlow's "variables on a
non-first call" error.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

__all__ = [
    "disabled",
    "initializer_call",
    "initializers_run_eagerly",
    "variables_created_eagerly",
]

_state = threading.local()


def _active() -> bool:
    return getattr(_state, "active", False)


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Scope in which variables are created normally (used by
    `snt.functional.variables()`: its variables hold the traced values)."""
    previous = getattr(_state, "disabled", False)
    _state.disabled = True
    try:
        yield
    finally:
        _state.disabled = previous


def initializer_call(call: Callable[..., tf.Tensor]) -> Callable[..., tf.Tensor]:
    """Wraps an initializer's `__call__` to compute eagerly when requested."""

    @functools.wraps(call)
    def wrapper(self: Any, shape: Any, dtype: Any) -> tf.Tensor:
        if not _active():
            return call(self, shape, dtype)
        try:
            with tf.init_scope():
                return call(self, shape, dtype)
        except (TypeError, ValueError, tf.errors.OpError):
            # E.g. a shape computed from a graph tensor: stay in the graph.
            return call(self, shape, dtype)

    wrapper.__snt_initializer_call__ = call  # type: ignore[attr-defined]
    return wrapper


def _in_device_scope() -> bool:
    # No public API tells the current device scope; an op created here shows
    # it (a NoOp with no inputs, which graph pruning removes). Probed once per
    # module initialization, not per variable: a device scope the module
    # opens itself is kept anyway (`tf.init_scope` carries device strings).
    return bool(tf.raw_ops.NoOp().device)


def _eager_initial_value(value: Any) -> Any:
    """`value` as something to create a variable from outside the graph, or
    None if it depends on the graph being built."""
    if isinstance(value, tf.Tensor) and tf.is_symbolic_tensor(value):
        if value.device:
            return None
        constant = tf.get_static_value(value)
        if constant is None:
            return None
        with tf.init_scope():
            return tf.constant(constant, value.dtype)
    if not isinstance(
        value, (tf.Tensor, bool, int, float, complex, np.ndarray, np.generic)
    ):
        return None  # Callables, variables, nests: left to TensorFlow.
    return value


def _eager_creator(next_creator: Callable[..., tf.Variable], **kwargs: Any) -> Any:
    if tf.executing_eagerly() or tf.distribute.has_strategy():
        return next_creator(**kwargs)
    value = _eager_initial_value(kwargs.get("initial_value"))
    if value is None:
        return next_creator(**kwargs)
    kwargs["initial_value"] = value
    kwargs["experimental_enable_variable_lifting"] = False
    with tf.init_scope():
        return next_creator(**kwargs)


def _can_lift() -> bool:
    """No distribution strategy, and the outermost context is eager."""
    if tf.distribute.has_strategy():
        return False
    with tf.init_scope():
        return tf.executing_eagerly()


@contextlib.contextmanager
def initializers_run_eagerly() -> Iterator[None]:
    """Scope in which Sonnet initializers compute their values eagerly."""
    previous = _active()
    _state.active = True
    try:
        yield
    finally:
        _state.active = previous


@contextlib.contextmanager
def variables_created_eagerly() -> Iterator[None]:
    """Scope in which new variables are created eagerly where possible."""
    if (
        getattr(_state, "creating", False)
        or getattr(_state, "disabled", False)
        or not tf.inside_function()
        or not _can_lift()
    ):
        yield
        return
    _state.creating = True
    try:
        with initializers_run_eagerly():
            if _in_device_scope():  # Placement must not move: TF's default.
                yield
            else:
                with tf.variable_creator_scope(_eager_creator):
                    yield
    finally:
        _state.creating = False
