"""`transform_with_state`, `transform`, `without_state`: modules as functions.

A transformed function is a pair of pure functions:

* `init(*args, **kwargs) -> (params, state)` runs the code once, creating its
  variables as `TensorVariable`s, and returns the initial value of every
  variable the code used: trainable ones in `params`, the others in `state`,
  both dicts keyed by `variable.ref()`.
* `apply(params, state, *args, **kwargs) -> (out, new_state)` runs the code
  with those values swapped into the variables and returns the result and
  the state after the call. Afterwards every variable it touched is put back
  as it was, so the Python objects carry no values between calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import tensorflow as tf

from sonnet._src import utils
from sonnet._src.functional import tensor_variable as tv

Ref = Any  # `variable.ref()`: `tf.Variable.ref` returns a private type.
Params = dict[Ref, Any]
State = dict[Ref, Any]


class TransformedWithState(NamedTuple):
    """The `(init, apply)` pair returned by `transform_with_state`."""

    init: Callable[..., tuple[Params, State]]
    apply: Callable[..., tuple[Any, State]]


class Transformed(NamedTuple):
    """The `(init, apply)` pair returned by `transform` (no state)."""

    init: Callable[..., Params]
    apply: Callable[..., Any]


class _Touched:
    """The TensorVariables used during a call, with their values beforehand."""

    def __init__(self) -> None:
        self.before: dict[Ref, tuple[tv.TensorVariable, tf.Tensor | None]] = {}

    def __call__(self, variable: tv.TensorVariable) -> None:
        ref = variable.ref()
        if ref not in self.before:
            self.before[ref] = (variable, variable.tensor_value)

    def restore(self) -> None:
        for variable, value in self.before.values():
            variable.tensor_value = value


def _new_variables(
    created: list[tf.Variable],
) -> contextlib.AbstractContextManager[Any]:
    """Appends every variable created in the block to `created`."""

    def creator(next_creator: Any, **kwargs: Any) -> tf.Variable:
        variable = next_creator(**kwargs)
        created.append(variable)
        return variable

    return tf.variable_creator_scope(creator)


def _fill_from_initial(variable: tv.TensorVariable) -> None:
    # A variable left without a value by an earlier `init` starts again from
    # its initial value, so that `init` can be called more than once.
    if variable.tensor_value is None:
        variable.tensor_value = variable.initial_tensor_value


def _forbid_creation(next_creator: Any, **kwargs: Any) -> tf.Variable:
    del next_creator
    name = kwargs.get("name") or "Variable"
    scope = tf.get_current_name_scope()
    raise ValueError(
        "`apply` cannot create variables: every variable must be created by "
        "`init` (call `init` first with inputs that exercise the same code). "
        f"Received: a request to create a variable named "
        f"{f'{scope}/{name}' if scope else name!r}."
    )


def _check_values(argument: str, values: Any) -> list[tuple[tv.TensorVariable, Any]]:
    if not isinstance(values, Mapping):
        raise utils.bad_type(
            argument,
            "must be a dict keyed by `variable.ref()`, as `init` returns",
            values,
        )
    pairs = []
    for key, value in values.items():
        variable = key.deref() if hasattr(key, "deref") else None
        if not isinstance(variable, tv.TensorVariable):
            raise utils.bad_type(
                argument,
                "must have keys `variable.ref()` of TensorVariables, as `init` returns",
                key,
            )
        pairs.append((variable, value))
    return pairs


class _InitCall:
    """Bookkeeping of one `init` call (a context manager around `f`)."""

    def __init__(self) -> None:
        self.touched = _Touched()
        self.created: list[tf.Variable] = []
        self.params: Params = {}
        self.state: State = {}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> None:
        stack = self._stack
        stack.enter_context(tv.variables())
        stack.enter_context(_new_variables(self.created))
        stack.enter_context(tv.observe(self.touched))
        stack.enter_context(tv.observe(_fill_from_initial))

    def __exit__(self, exc_type: Any, *exc_info: Any) -> None:
        try:
            self._stack.close()
        finally:
            self.touched.restore()
            for variable in self.created:
                if isinstance(variable, tv.TensorVariable):
                    variable.tensor_value = None
                    # Created while tracing (`jit(init)`): the initial value
                    # belongs to that graph and cannot be used again.
                    if tf.is_symbolic_tensor(variable.initial_tensor_value):
                        variable.initial_tensor_value = None
        if exc_type is not None:
            return
        for ref, (variable, before) in self.touched.before.items():
            value = variable.initial_tensor_value if before is None else before
            (self.params if variable.trainable else self.state)[ref] = value


class _ApplyCall:
    """Bookkeeping of one `apply` call (a context manager around `f`)."""

    def __init__(self, params: Any, state: Any):
        self._param_values = _check_values("params", params)
        self._state_values = _check_values("state", state)
        self.touched = _Touched()
        self.new_state: State = {}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> None:
        stack = self._stack
        stack.enter_context(tf.variable_creator_scope(_forbid_creation))
        stack.enter_context(tv.observe(self.touched))
        try:
            for variable, value in self._param_values + self._state_values:
                variable.assign(value)
        except BaseException:
            self.__exit__(None)
            raise

    def __exit__(self, exc_type: Any, *exc_info: Any) -> None:
        try:
            if exc_type is None:
                self.new_state = {
                    v.ref(): v.tensor_value for v, _ in self._state_values
                }
            self._stack.close()
        finally:
            self.touched.restore()


def transform_with_state(f: Callable[..., Any]) -> TransformedWithState:
    """Turns a function using Sonnet modules into a pure `(init, apply)` pair.

    `f` may create variables (e.g. by calling a module for the first time);
    `init` creates them as `TensorVariable`s. Modules built earlier must have
    been created under `snt.functional.variables()`.

    * `init(*args, **kwargs)` runs `f` once and returns `(params, state)`:
      dicts keyed by `variable.ref()` mapping each variable `f` used to the
      value it had when first used (for variables `f` created: their initial
      value), trainable variables in `params` and the others in `state`. The
      output of `f` is discarded. Afterwards the variables `f` created have no
      value and the others are restored.
    * `apply(params, state, *args, **kwargs)` sets the variables to the given
      values, runs `f` and returns `(out, new_state)`, where `new_state` maps
      each key of `state` to its variable's value after `f`. Every variable
      touched is restored afterwards (also if `f` raises). `f` may not create
      variables here.

    Args:
      f: The function to transform.

    Returns:
      A `TransformedWithState(init, apply)` named tuple.

    Raises:
      TypeError: if `f` is not callable.

    >>> with snt.functional.variables():
    ...   ema = snt.ExponentialMovingAverage(0.5)
    >>> f = snt.functional.transform_with_state(ema)
    >>> params, state = f.init(3.0)
    >>> len(params), len(state)
    (0, 3)
    >>> y, state = f.apply(params, state, 3.0)
    >>> y, state = f.apply(params, state, 6.0)
    >>> float(y)
    5.0
    """
    if not callable(f):
        raise utils.bad_type("f", "must be callable", f)

    # These two run inside the user's `tf.function`s, where AutoGraph converts
    # every function they call: they are kept tiny, with the bookkeeping in
    # `_InitCall`/`_ApplyCall` (whose methods AutoGraph does not convert).
    def init_fn(*args: Any, **kwargs: Any) -> tuple[Params, State]:
        call = _InitCall()
        with call:
            f(*args, **kwargs)
        return call.params, call.state

    def apply_fn(
        params: Params, state: State, *args: Any, **kwargs: Any
    ) -> tuple[Any, State]:
        call = _ApplyCall(params, state)
        with call:
            out = f(*args, **kwargs)
        return out, call.new_state

    return TransformedWithState(init_fn, apply_fn)


_STATEFUL = (
    "must not use state (non-trainable variables) when transformed with "
    "`snt.functional.transform`; use `transform_with_state` instead"
)


@tf.autograph.experimental.do_not_convert
def _check_no_state(state: State) -> None:
    if state:
        names = sorted(ref.deref().name for ref in state)
        raise utils.bad_value("f", _STATEFUL, f"state variables {names}")


class _StateWatch:
    """Raises on exit if a (successful) block used non-trainable variables."""

    def __init__(self) -> None:
        self._touched = _Touched()
        self._observer = tv.observe(self._touched)

    def __enter__(self) -> None:
        self._observer.__enter__()

    def __exit__(self, exc_type: Any, *exc_info: Any) -> None:
        self._observer.__exit__(exc_type, *exc_info)
        if exc_type is None:
            stateful = [
                v.name for v, _ in self._touched.before.values() if not v.trainable
            ]
            if stateful:
                raise utils.bad_value("f", _STATEFUL, f"state variables {stateful}")


def without_state(with_state: TransformedWithState) -> Transformed:
    """Drops the state from a transformed function that has none.

    Args:
      with_state: The result of `transform_with_state` (the original's name
        for this argument).

    Returns:
      `Transformed(init, apply)`: `init(*args, **kwargs) -> params` and
      `apply(params, *args, **kwargs) -> out`. Both raise a `ValueError` if the
      function uses state.

    Raises:
      TypeError: if `with_state` is not an `(init, apply)` pair of callables.

    >>> f = snt.functional.without_state(
    ...     snt.functional.transform_with_state(lambda x: x + 1))
    >>> f.init(1.0)
    {}
    >>> f.apply({}, 1.0)
    2.0
    """
    init = getattr(with_state, "init", None)
    apply = getattr(with_state, "apply", None)
    if not callable(init) or not callable(apply):
        raise utils.bad_type(
            "with_state",
            "must be an `(init, apply)` pair from `transform_with_state`",
            with_state,
        )
    init_f: Callable[..., Any] = init
    apply_f: Callable[..., Any] = apply

    def init_fn(*args: Any, **kwargs: Any) -> Params:
        params, state = init_f(*args, **kwargs)
        _check_no_state(state)
        return params

    def apply_fn(params: Params, *args: Any, **kwargs: Any) -> Any:
        watch = _StateWatch()
        with watch:
            out, _ = apply_f(params, {}, *args, **kwargs)
        return out

    return Transformed(init_fn, apply_fn)


def transform(f: Callable[..., Any]) -> Transformed:
    """`transform_with_state` for functions without state.

    Args:
      f: The function to transform; it must not use non-trainable variables.

    Returns:
      `Transformed(init, apply)`: `init(*args, **kwargs) -> params` (a dict
      keyed by `variable.ref()`) and `apply(params, *args, **kwargs) -> out`.

    Raises:
      TypeError: if `f` is not callable.

    >>> with snt.functional.variables():
    ...   linear = snt.Linear(2, w_init=snt.initializers.Ones())
    >>> f = snt.functional.transform(linear)
    >>> x = tf.ones([1, 3])
    >>> params = f.init(x)
    >>> sorted(k.deref().name for k in params)
    ['linear/b:0', 'linear/w:0']
    >>> f.apply(params, x).numpy().tolist()
    [[3.0, 3.0]]
    """
    return without_state(transform_with_state(f))
