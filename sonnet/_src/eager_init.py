"""Module initialisation outside the `tf.function` being traced.

This is the one place that decides where a module's variables are created
while a `tf.function` is traced. The rule, for module authors:

* A module's lazy initialisation (its `@snt.once` methods, normally
  `_initialize(inputs)`; `snt.Module`'s metaclass applies `outside_trace` to
  them) runs outside the trace, in the eager context (`tf.init_scope()`).
  Everything it computes is eager: initializer outputs, values derived from
  them (`w_init(shape) * 2`), constants, and the variables made from them,
  which are not registered with the function being traced. TensorFlow then
  traces once instead of twice, and a module first built in a later trace of
  the same function works. Module code needs nothing special for this: read
  the inputs' shapes and dtypes and compute initial values as usual.
* Initialisation that uses the *values* of graph tensors (e.g. a variable
  initialised from the inputs, or a shape taken with `tf.shape(inputs)`)
  cannot run there: TensorFlow refuses such a tensor outside its graph, and
  the initialisation is run again inside the trace, which is TensorFlow's own
  way (variables lifted out by `tf.function`, two traces). Python side effects
  before that point happen twice, so read input values before changing the
  module's state.
* Nothing moves under a distribution strategy, inside an explicit device
  scope (placement must not change; a device scope the module opens itself
  is kept), when the outermost context is a graph, or inside
  `snt.functional.variables()` (`disabled`), whose variables hold the traced
  values. `snt.distribute.create_variables_eagerly` and
  `snt.distribute.CrossReplicaBatchNorm` opt in under a strategy
  (`under_strategies`), whose variable creator places the variables.
* Inside `snt.distribute.create_variables_eagerly` (`constants_created_eagerly`)
  every `snt.initializers.Initializer` also runs eagerly when called from a
  trace, as in Sonnet 2.0.2, so an initializer may use eager values
  (`.numpy()`, NumPy code). One that needs the graph (it reads a traced
  tensor) runs again in the trace. This is done by replacing `__call__` of
  the initializer classes while the outermost such scope is open, and only
  while a function is traced (`_INITIALIZERS`, a `class_patch.ClassPatch`);
  no other call path changes.

Constructors are not moved: a module built inside a trace names its scope
the graph's way (`linear_1`), which the eager context would not do. Name
scopes entered by a moved initialisation (a submodule it builds, an
optimizer's slot scopes, `tf.name_scope` in its code) are named the graph's
way too (`_NAME_SCOPES`), so variables are named as if the initialisation had
run in the trace, as in Sonnet 2.0.2.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import tensorflow as tf

from sonnet._src import class_patch, initializers, once, tf_compat

__all__ = [
    "constants_created_eagerly",
    "disabled",
    "outside_trace",
    "under_strategies",
]

T = TypeVar("T")

_state = threading.local()

# What TensorFlow raises for a graph tensor used outside its graph (and what
# an op may raise for a value it only accepts in a graph).
_REFUSED = (TypeError, ValueError, tf.errors.OpError)


@contextlib.contextmanager
def _flag(name: str) -> Iterator[None]:
    previous = getattr(_state, name, False)
    setattr(_state, name, True)
    try:
        yield
    finally:
        setattr(_state, name, previous)


def disabled() -> contextlib.AbstractContextManager[None]:
    """Scope in which module initialisation stays in the trace."""
    return _flag("disabled")


def under_strategies() -> contextlib.AbstractContextManager[None]:
    """Scope in which module initialisation also moves out of the trace
    under a distribution strategy."""
    return _flag("strategies")


def _moves() -> bool:
    """Whether a module initialisation starting now runs outside the trace."""
    # Not `tf.inside_function()`: it stays True in `tf.init_scope()`, where a
    # nested initialisation already runs outside the trace.
    if tf.executing_eagerly() or getattr(_state, "disabled", False):
        return False
    with tf.init_scope():
        if not tf.executing_eagerly():
            return False
    if tf.distribute.has_strategy():
        # The strategy's variable creator places the variables (its replica
        # device scopes are not the caller's).
        return getattr(_state, "strategies", False)
    return not tf_compat.in_device_scope()


def outside_trace(f: Callable[..., T]) -> Callable[..., T]:
    """Wraps a module initialisation `f` to follow the rule above.

    Applied to `@snt.once` methods of modules (the first call only) and to
    `snt.TrainableState`'s construction of its variables.
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        calls = getattr(_state, "recording", None)
        if calls is not None:
            calls.append((wrapper, args, kwargs))
        if not _moves():
            return f(*args, **kwargs)
        names = tf_compat.TracedNames(tf.compat.v1.get_default_graph())
        try:
            with _NAME_SCOPES.scope(_name_scope_enter, names):
                with tf_compat.outside_trace():
                    return f(*args, **kwargs)
        except _REFUSED:
            names.release()  # It needs the graph: run it there, as TensorFlow would.
        return f(*args, **kwargs)

    return wrapper


def _name_scope_enter() -> list[tuple[type, str]]:
    return [(tf.name_scope, "__enter__")]


def _enter_as_traced(cls: type, name: str, original: Any) -> Any:
    """`tf.name_scope.__enter__` while an initialisation runs moved out of a
    trace: in the thread running it, a relative scope gets the name the traced
    graph would give it (`TracedNames`)."""
    del cls, name

    def __enter__(scope: Any) -> str:
        names = _NAME_SCOPES.current()
        if names is None:
            return original(scope)
        return names.enter(scope, original)

    return __enter__


# A name scope entered in a `tf.function` is made unique within its graph
# (a second `linear` under `m/` is `m/linear_1`; eagerly, names repeat). Module
# initialisation moved out of the trace enters its scopes (submodules' and
# optimizer slots' among them) as the trace would have, so variables are
# named as when the initialisation ran in the trace (as in Sonnet 2.0.2).
_NAME_SCOPES = class_patch.ClassPatch(_enter_as_traced)


def initialization_of(value: Any) -> Callable[..., Any] | None:
    """The function an `@snt.once` method (a value in a class body) wraps,
    or None for any other value."""
    return getattr(value, once.ONCE_ATTRIBUTE, None)


def lazy(f: Callable[..., Any]) -> Any:
    """`f` as a module's lazy initialisation: run at most once per instance
    (`snt.once`), and outside any `tf.function` being traced (the rule above).

    The module metaclass (`base.py`) makes every `@snt.once` method of a
    module class one of these.
    """
    return once.once(outside_trace(f))


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[Callable[..., Any], tuple[Any, ...], Any]]]:
    """Scope that lists the module initialisations started in it, in order:
    `(wrapper, args, kwargs)` per call of an `outside_trace` wrapper (args
    start with the module), so that `snt.LayerStack` can run the same
    initialisations on other layers without tracing their calls."""
    previous = getattr(_state, "recording", None)
    calls: list[tuple[Callable[..., Any], tuple[Any, ...], Any]] = []
    _state.recording = calls
    try:
        yield calls
    finally:
        _state.recording = previous


def _constant_creator(next_creator: Callable[..., tf.Variable], **kwargs: Any) -> Any:
    initial_value = kwargs.get("initial_value")
    if not (isinstance(initial_value, tf.Tensor) and tf.inside_function()):
        return next_creator(**kwargs)
    if tf.is_symbolic_tensor(initial_value):
        value = tf.get_static_value(initial_value)
        if value is None:
            return next_creator(**kwargs)
        with tf.init_scope():
            kwargs["initial_value"] = tf.constant(value, initial_value.dtype)
            return next_creator(**kwargs)
    with tf.init_scope():
        return next_creator(**kwargs)


def _initializer_calls() -> list[tuple[type, str]]:
    """`(cls, "__call__")` for each `Initializer` subclass defining one."""
    replaced = _INITIALIZERS.replaced
    if replaced:
        # The outermost open scope chose: classes defined while one is open
        # are not changed.
        return list(replaced)
    return [
        (cls, "__call__")
        for cls in _subclasses(initializers.Initializer)
        if cls.__dict__.get("__call__") is not None
        and not getattr(cls.__dict__["__call__"], "__isabstractmethod__", False)
    ]


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    pending = list(cls.__subclasses__())
    while pending:
        sub = pending.pop()
        if sub not in found:
            found.append(sub)
            pending.extend(sub.__subclasses__())
    return found


def _run_eagerly(cls: type, name: str, call: Callable[..., T]) -> Callable[..., T]:
    """`call`, run in `tf.init_scope()` when this thread is in a scope and
    tracing; in the current context if that fails."""

    @functools.wraps(call)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        if tf.executing_eagerly() or _INITIALIZERS.current() is None:
            return call(*args, **kwargs)
        try:
            with tf.init_scope():
                return call(*args, **kwargs)
        except Exception:  # Any failure: run it in the trace instead.
            pass
        return call(*args, **kwargs)

    return tf_compat.mark_do_not_convert(wrapper)


# While at least one `constants_created_eagerly` scope is open in a trace (in
# any thread), every `Initializer` subclass's own `__call__` is replaced; the
# replacement acts only in the threads inside a scope.
_INITIALIZERS = class_patch.ClassPatch(_run_eagerly)


@contextlib.contextmanager
def _initializers_eagerly() -> Iterator[None]:
    if tf.executing_eagerly():  # Initializers already run eagerly.
        yield
        return
    with _INITIALIZERS.scope(_initializer_calls):
        yield


@contextlib.contextmanager
def constants_created_eagerly() -> Iterator[None]:
    """Scope of `snt.distribute.create_variables_eagerly`: module
    initialisation moves out of the trace under strategies too, any
    `snt.initializers.Initializer` called in a trace runs eagerly, and any
    other variable whose initial value is eager, or a constant of the graph,
    is created outside the graph from that value."""
    with (
        under_strategies(),
        _initializers_eagerly(),
        tf.variable_creator_scope(_constant_creator),
    ):
        yield
