"""Functional optimizers: Sonnet optimizers as pure `(init, apply)` pairs."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import tensorflow as tf

from sonnet._src import base, errors, utils
from sonnet._src.functional import haiku
from sonnet._src.functional import tensor_variable as tv
from sonnet._src.functional.tensor_variable import TensorVariable
from sonnet._src.optimizers import adam as adam_lib
from sonnet._src.optimizers import momentum as momentum_lib
from sonnet._src.optimizers import rmsprop as rmsprop_lib
from sonnet._src.optimizers import sgd as sgd_lib


class TransformedOptimizer(NamedTuple):
    """The `(init, apply)` pair of a functional optimizer.

    * `init(params) -> opt_state`
    * `apply(opt_state, updates, params) -> (new_params, new_opt_state)`
    """

    init: Callable[[Any], dict[Any, tf.Tensor]]
    apply: Callable[[Any, Any, Any], tuple[Any, dict[Any, tf.Tensor]]]


def _leaf_names(params: Any) -> list[str]:
    """Names for the parameters of `params`, in `tf.nest.flatten` order.

    Keys that are `variable.ref()`s (as in the params of a transformed
    function) give their variable's name, so slot variables are named after
    the parameters as for stateful optimizers.
    """
    if isinstance(params, Mapping):
        named = {}
        for key, value in params.items():
            variable = key.deref() if hasattr(key, "deref") else None
            name = getattr(variable, "name", None)
            name = name.split(":")[0] if isinstance(name, str) else "Variable"
            named[key] = tf.nest.map_structure(lambda _, n=name: n, value)
        return tf.nest.flatten(named)
    return ["Variable"] * len(tf.nest.flatten(params))


def _flatten(argument: str, structure: Any) -> list[Any]:
    try:
        return tf.nest.flatten(structure)
    except (TypeError, ValueError) as e:
        raise errors.bad_type(argument, "must be a nest of tensors", structure) from e


def _wrap(opt: base.Optimizer) -> TransformedOptimizer:
    # Stand-ins for the parameters of the current call, made directly (not
    # through `tf.Variable`) so that `apply` may make them too.
    holders: list[TensorVariable] = []
    # The initial values of the variables the optimizer creates (slots, step
    # counters), recorded by the first eager `init`: `init` leaves them
    # without a value, and a later `init` starts them from these again (the
    # original's later `init`s read zeros from them).
    initial: dict[Any, tf.Tensor] = {}

    # None of these run user code, so AutoGraph need not convert them when
    # they are called inside a `tf.function`.
    @utils.no_autograph
    def step(updates: list[Any], params: list[tf.Tensor], names: list[str]) -> Any:
        holders[:] = [
            TensorVariable(p, trainable=True, name=n) for p, n in zip(params, names)
        ]
        opt.apply(updates, holders)
        return [h.tensor_value for h in holders]

    transformed = haiku.transform_with_state(step)

    @utils.no_autograph
    def init(params: Any) -> dict[Any, tf.Tensor]:
        flat = [utils.to_tensor("params", p) for p in _flatten("params", params)]
        zeros = [tf.zeros_like(p) for p in flat]
        for ref, value in initial.items():
            ref.deref().initial_tensor_value = ref.deref().tensor_value = value
        try:
            trainable, non_trainable = transformed.init(
                zeros, flat, _leaf_names(params)
            )
        finally:
            for ref in initial:
                ref.deref().initial_tensor_value = ref.deref().tensor_value = None
        # Everything the optimizer read but the parameters: its own state, and
        # hyper-parameters that are variables (e.g. a learning rate), whether
        # trainable or not, as in the original.
        own = {h.ref() for h in holders}
        opt_state = {r: v for r, v in trainable.items() if r not in own}
        opt_state.update(non_trainable)
        for ref, value in opt_state.items():
            created = ref.deref().tensor_value is None
            if created and ref not in initial and not tf.is_symbolic_tensor(value):
                initial[ref] = value
        holders.clear()
        return opt_state

    @utils.no_autograph
    def apply(
        opt_state: Any, updates: Any, params: Any
    ) -> tuple[Any, dict[Any, tf.Tensor]]:
        flat_params = [utils.to_tensor("params", p) for p in _flatten("params", params)]
        flat_updates = _flatten("updates", updates)
        if len(flat_updates) != len(flat_params):
            raise errors.bad_value(
                "updates",
                f"must have one entry per parameter ({len(flat_params)} parameters)",
                f"{len(flat_updates)} updates",
            )
        new_params, new_state = transformed.apply(
            {}, opt_state, flat_updates, flat_params, _leaf_names(params)
        )
        holders.clear()
        return tf.nest.pack_sequence_as(params, new_params), new_state

    return TransformedOptimizer(init, apply)


def optimizer(cls: type) -> Callable[..., TransformedOptimizer]:
    """Turns a Sonnet optimizer class into a functional optimizer factory.

    The factory takes `cls`'s constructor arguments and returns a
    `TransformedOptimizer(init, apply)`:

    * `init(params) -> opt_state`: the initial optimizer state (slot variables
      and step counters) for a nest of parameter tensors, as a dict keyed by
      `variable.ref()`.
    * `apply(opt_state, updates, params) -> (new_params, new_opt_state)`:
      one optimizer step. `updates` has the structure of `params` (None
      entries leave their parameter alone).

    Parameters are matched to optimizer slots by their position in
    `tf.nest.flatten(params)`, so pass the same structure to every call (the
    `params` dict from `snt.functional.transform` is flattened in a fixed
    order). The numbers are those of the stateful optimizer.

    Args:
      cls: A subclass of `snt.Optimizer`, e.g. `snt.optimizers.Adam`.

    Returns:
      A function with the constructor signature of `cls`.

    Raises:
      TypeError: if `cls` is not a `snt.Optimizer` subclass.

    >>> sgd = snt.functional.optimizer(snt.optimizers.SGD)(learning_rate=0.1)
    >>> params = [tf.constant(1.0)]
    >>> opt_state = sgd.init(params)
    >>> params, opt_state = sgd.apply(opt_state, [tf.constant(2.0)], params)
    >>> round(float(params[0]), 4)
    0.8
    """
    if not (isinstance(cls, type) and issubclass(cls, base.Optimizer)):
        raise errors.bad_type("cls", "must be a subclass of `snt.Optimizer`", cls)

    def create(*args: Any, **kwargs: Any) -> TransformedOptimizer:
        with tv.variables():
            opt = cls(*args, **kwargs)
        return _wrap(opt)

    create.__name__ = create.__qualname__ = cls.__name__.lower()
    create.__doc__ = (
        f"Creates a functional `{cls.__name__}` (see `snt.functional.optimizer`)."
    )
    signature = inspect.signature(cls.__init__)
    create.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=list(signature.parameters.values())[1:]
    )
    return create


def _prebuilt(cls: type, name: str, kwargs: str, result: str) -> Any:
    factory = optimizer(cls)
    factory.__doc__ = f"""Functional `snt.optimizers.{cls.__name__}`.

    Takes the constructor arguments of `snt.optimizers.{cls.__name__}` and
    returns a `TransformedOptimizer(init, apply)` (see
    `snt.functional.optimizer`); the updates are those of the stateful
    optimizer.

    >>> opt = snt.functional.{name}({kwargs})
    >>> params = {{"w": tf.ones([2])}}
    >>> opt_state = opt.init(params)
    >>> params, opt_state = opt.apply(opt_state, {{"w": tf.ones([2])}}, params)
    >>> params["w"].numpy().round(4)
    array({result}, dtype=float32)
    """
    return factory


sgd = _prebuilt(sgd_lib.SGD, "sgd", "learning_rate=0.1", "[0.9, 0.9]")
adam = _prebuilt(adam_lib.Adam, "adam", "learning_rate=0.1", "[0.9, 0.9]")
rmsprop = _prebuilt(
    rmsprop_lib.RMSProp, "rmsprop", "learning_rate=0.1", "[0.6838, 0.6838]"
)
momentum = _prebuilt(
    momentum_lib.Momentum,
    "momentum",
    "learning_rate=0.1, momentum=0.9",
    "[0.9, 0.9]",
)
