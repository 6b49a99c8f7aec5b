"""`transform_with_state`, `transform`, `without_state`: modules as functions.

A transformed function is a pair of pure functions:

* `init(*args, **kwargs) -> (params, state)` runs the code once, creating its
  variables as `TensorVariable`s, and returns the initial value of every
  variable the code used: trainable ones in `params`, the others in `state`,
  both dicts keyed by `variable.ref()`.
* `apply(params, state, *args, **kwargs) -> (out, new_state)` runs the code
  with those values swapped into the variables and returns the result and
  the state after the call. Afterwards those variables are put back as they
  were, so the Python objects carry no values between calls.

The semantics are the original's: `init` returns each variable's
`initial_tensor_value`, and leaves the variables it created without a value
(`tensor_value` and `initial_tensor_value` None). One deliberate difference:
reading a variable without a value raises a `ValueError` that says why,
where the original's tensor conversion silently read zeros.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import tensorflow as tf

from sonnet._src import errors, utils
from sonnet._src.functional import tensor_variable as tv
from sonnet._src.functional.tensor_variable import TensorVariable

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


_Value = Any  # A variable's `tensor_value`: a tensor or None.


class _Touched:
    """The TensorVariables used during a call, with their initial and current
    values beforehand (in order of first use)."""

    def __init__(self) -> None:
        self.before: dict[Ref, tuple[TensorVariable, _Value, _Value]] = {}

    def __call__(self, variable: TensorVariable) -> None:
        ref = variable.ref()
        if ref not in self.before:
            self.before[ref] = (
                variable,
                variable.initial_tensor_value,
                variable.tensor_value,
            )


def _new_variables(
    created: set[Ref],
) -> contextlib.AbstractContextManager[Any]:
    """Adds a reference to every variable created in the block to `created`."""

    def creator(next_creator: Any, **kwargs: Any) -> tf.Variable:
        variable = next_creator(**kwargs)
        created.add(variable.ref())
        return variable

    return tf.variable_creator_scope(creator)


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


def _check_values(argument: str, values: Any) -> list[tuple[TensorVariable, Any]]:
    # The original read `values.items()` and `key.deref()`: other values
    # failed there with `AttributeError`.
    if not isinstance(values, Mapping):
        raise errors.lacks_attribute(
            argument,
            "must be a dict keyed by `variable.ref()`, as `init` returns",
            values,
        )
    pairs = []
    for key, value in values.items():
        variable = key.deref() if hasattr(key, "deref") else None
        if not isinstance(variable, TensorVariable):
            raise errors.lacks_attribute(
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
        self.created: set[Ref] = set()
        self.params: Params = {}
        self.state: State = {}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> None:
        stack = self._stack
        stack.enter_context(tv.variables())
        stack.enter_context(_new_variables(self.created))
        stack.enter_context(tv.observe(self.touched))

    def __exit__(self, exc_type: Any, *exc_info: Any) -> None:
        try:
            self._stack.close()
        finally:
            for ref, (variable, initial, value) in self.touched.before.items():
                if exc_type is None:
                    result = self.params if variable.trainable else self.state
                    result[ref] = variable.initial_tensor_value
                # Variables `f` created are left without a value (they may
                # belong to a trace); the others get theirs back.
                if ref in self.created:
                    variable.initial_tensor_value = variable.tensor_value = None
                else:
                    variable.initial_tensor_value = initial
                    variable.tensor_value = value


class _ApplyCall:
    """Bookkeeping of one `apply` call (a context manager around `f`)."""

    def __init__(self, params: Any, state: Any):
        self._param_values = _check_values("params", params)
        self._state_values = _check_values("state", state)
        self.new_state: State = {}
        self._before: list[tuple[TensorVariable, Any, Any]] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> None:
        self._stack.enter_context(tf.variable_creator_scope(_forbid_creation))
        try:
            for variable, value in self._param_values + self._state_values:
                self._before.append(
                    (variable, variable.initial_tensor_value, variable.tensor_value)
                )
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
            # Only the variables given values are restored, as in the original.
            for variable, initial, value in reversed(self._before):
                variable.initial_tensor_value = initial
                variable.tensor_value = value


def transform_with_state(f: Callable[..., Any]) -> TransformedWithState:
    """Turns a function using Sonnet modules into a pure `(init, apply)` pair.

    `f` may create variables (e.g. by calling a module for the first time);
    `init` creates them as `TensorVariable`s. Modules built earlier must have
    been created under `snt.functional.variables()`.

    * `init(*args, **kwargs)` runs `f` once and returns `(params, state)`:
      dicts keyed by `variable.ref()` mapping each variable `f` used to its
      initial value (`initial_tensor_value`: for variables `f` created, the
      value they were created with), trainable variables in `params` and the
      others in `state`. The output of `f` is discarded. Afterwards the
      variables `f` created have no value (their `tensor_value` and
      `initial_tensor_value` are None, so a second `init` that reads them
      raises) and the others are restored.
    * `apply(params, state, *args, **kwargs)` sets the variables to the given
      values, runs `f` and returns `(out, new_state)`, where `new_state` maps
      each key of `state` to its variable's value after `f`. The variables
      given values are restored afterwards (also if `f` raises). `f` may not
      create variables here.

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
        raise errors.bad_type("f", "must be callable", f)

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


@utils.no_autograph
def _check_no_state(state: State) -> None:
    if state:
        names = sorted(ref.deref().name for ref in state)
        raise errors.bad_value("f", _STATEFUL, f"state variables {names}")


def without_state(with_state: TransformedWithState) -> Transformed:
    """Drops the state from a transformed function that has none.

    Args:
      with_state: The result of `transform_with_state` (the original's name
        for this argument).

    Returns:
      `Transformed(init, apply)`: `init(*args, **kwargs) -> params` and
      `apply(params, *args, **kwargs) -> out` (which passes no state). Both
      raise a `ValueError` if the pair returns state.

    Raises:
      TypeError: if `with_state` is not an `(init, apply)` pair of callables
        (also an `AttributeError`, as in the original).

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
        raise errors.lacks_attribute(
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
        out, state = apply_f(params, {}, *args, **kwargs)
        _check_no_state(state)
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
