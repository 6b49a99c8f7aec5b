"""Shared machinery of the Sonnet optimizers: validation, routing, variable access.

Every optimizer's `apply(updates, parameters)` does the same three things:

1. validate *everything* (strategy, lengths, types, dtypes, shapes, sparse
   indices) before touching any variable, so a bad call changes nothing;
2. create slot variables on the first call;
3. update each (parameter, update, slots...) group with a per-variable rule.

Step 3 runs either directly (plain variables, or replica-local variables from
inside `strategy.run`) or, for distributed variables seen from cross-replica
context, once per replica copy through `strategy.extended.update`. The rule
itself receives plain per-device variables and works on their resource
handles, so it can use TensorFlow's fused `ResourceApply*` kernels and raw
gather/scatter ops (which replica-local variables do not offer as methods).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import checks, errors, utils
from sonnet._src.distribute import replicator

# Dtypes for which the fused `ResourceApply*` kernels exist on every device.
FUSED_DTYPES = frozenset({tf.float16, tf.float32, tf.float64})

Update = tf.Tensor | tf.IndexedSlices | None


# ---------------------------------------------------------------------------
# Constructor checks.


def hyper_parameter(argument: str, value: Any) -> Any:
    """Checks a hyper-parameter (`checks.tf_real`); returns it as given, or a
    one-element list as its element.

    A string failed in the original's `tf.cast` (`UnimplementedError`); NaN
    and infinities only give NaN parameters.
    """
    if isinstance(value, (str, bytes)):
        raise errors.unimplemented_type(argument, "must be a real number", value)
    checks.tf_real(argument, value)
    if isinstance(value, (list, tuple)):
        return value[0]
    return value


def learning_rate(value: Any) -> tuple[Any, bool]:
    """Checks a `learning_rate`; returns `(value, is_schedule)`.

    A schedule is any callable other than a class (tensors and variables are
    not callable); every other value is a `hyper_parameter`. Optimizers decide
    once, here, which of the two they hold, so that `apply` with a plain rate
    pays one attribute read for the feature.
    """
    if not callable(value):
        return hyper_parameter("learning_rate", value), False
    checks.function(
        "learning_rate",
        value,
        "must be a real number, a scalar tensor, a `tf.Variable` or a schedule "
        "(an instance, not a class, called as `schedule(step)`)",
    )
    return value, True


def step_counter() -> tf.Variable:
    """The int64 scalar `step` variable (name `t`, in the caller's scope): the
    number of `apply` calls so far."""
    return tf.Variable(tf.constant(0, tf.int64), trainable=False, name="t")


def scheduled_rate(schedule: Callable[[tf.Tensor], Any], step: tf.Variable) -> Any:
    """`schedule(step)` at the current value of `step`, checked to be a real
    scalar (a tensor of unknown rank is taken as is)."""
    return checks.real("learning_rate(step)", schedule(tf.convert_to_tensor(step)))


def begin_apply(
    optimizer: Any,
    updates: Sequence[Any],
    parameters: Sequence[tf.Variable],
    slots: Sequence[tf.Variable] | None = None,
    *,
    step_every_apply: bool = False,
) -> tuple[list[Update], Any]:
    """The opening of every `apply`: checks the call, creates the slots on the
    first one (`optimizer._initialize(parameters)`, when `slots` is given) and
    checks that they match, then returns the checked updates and this call's
    learning rate (a schedule's at `optimizer.step` before its increment).

    `optimizer.step` counts every `apply` with `step_every_apply` (Adam; then
    it is checked before the slots are made), otherwise only with a schedule
    (checked after the slots).
    """
    checked = check_updates_parameters(updates, parameters)
    if step_every_apply:
        check_replicated("step", optimizer.step)
    if slots is not None:
        optimizer._initialize(parameters)  # The caller's own.
        check_same_parameters(parameters, slots)
    learning_rate = optimizer.learning_rate
    if optimizer._scheduled:  # The caller's own.
        if not step_every_apply:
            check_replicated("step", optimizer.step)
        learning_rate = scheduled_rate(learning_rate, optimizer.step)
    if step_every_apply or optimizer._scheduled:
        optimizer.step.assign_add(1, read_value=False)
    return checked, learning_rate


# ---------------------------------------------------------------------------
# `apply` checks.


def check_distribution_strategy() -> None:
    """Rejects strategies whose variables are not replica-local.

    Under e.g. `tf.distribute.MirroredStrategy` variables are mirrored and
    writes from a replica must be aggregated, which Sonnet optimizers do not
    do; `snt.distribute.Replicator` makes variables replica-local instead.
    """
    if not tf.distribute.has_strategy():
        return
    strategy = tf.distribute.get_strategy()
    if not isinstance(
        strategy,
        (
            tf.distribute.OneDeviceStrategy,
            replicator.Replicator,
            replicator.TpuReplicator,
        ),
    ):
        raise ValueError(
            "Sonnet optimizers must run outside any distribution strategy or "
            "under `tf.distribute.OneDeviceStrategy`, "
            "`snt.distribute.Replicator` or `snt.distribute.TpuReplicator` "
            "(whose variables are replica-local). Received: a "
            f"`{type(strategy).__name__}`."
        )


def _check_sequence(argument: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)):
        raise errors.bad_type(argument, "must be a list or tuple", value)


def _to_update(index: int, update: Any, parameter: tf.Variable) -> Update:
    """Converts and checks one update against its parameter."""
    argument = f"updates[{index}]"
    if update is None:
        return None
    if isinstance(update, tf.IndexedSlices):
        values = _as_tensor(f"{argument}.values", update.values)
        indices = _as_tensor(f"{argument}.indices", update.indices)
        if values.dtype != parameter.dtype:
            raise _dtype_error(argument, values, parameter)
        if not indices.dtype.is_integer:
            raise errors.bad_type(
                f"{argument}.indices", "must have an integer dtype", indices
            )
        if indices.dtype not in (tf.int32, tf.int64):
            # The gather/scatter kernels take only these; any valid row index
            # fits in int64 (negative ones are rejected below).
            indices = tf.cast(indices, tf.int64)
        if values is not update.values or indices is not update.indices:
            update = tf.IndexedSlices(values, indices, update.dense_shape)
        if indices.shape.rank not in (None, 1):
            raise errors.bad_value(f"{argument}.indices", "must be 1-D", indices)
        _check_sparse_shapes(index, values, indices, parameter)
        _check_indices(argument, indices, parameter)
        return update
    update = _as_tensor(argument, update)
    if update.dtype != parameter.dtype:
        raise _dtype_error(argument, update, parameter)
    if not update.shape.is_compatible_with(parameter.shape):
        # The original's TF op failed (`InvalidArgumentError`).
        raise errors.invalid_argument(
            argument,
            f"must have the shape of `parameters[{index}]` "
            f"({parameter.shape.as_list()})",
            update,
        )
    return update


def _as_tensor(argument: str, value: Any) -> Any:
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value
    try:
        return tf.convert_to_tensor(value)
    except (TypeError, ValueError) as e:
        raise errors.bad_type(
            argument, "must be a tensor, tf.IndexedSlices or None", value
        ) from e


def _check_sparse_shapes(
    index: int, values: tf.Tensor, indices: tf.Tensor, parameter: tf.Variable
) -> None:
    shape = parameter.shape
    if shape.rank is None:
        return
    argument = f"updates[{index}].values"
    if shape.rank == 0:
        raise errors.bad_type(
            f"updates[{index}]",
            f"must be a dense tensor: `parameters[{index}]` is a scalar",
            values,
        )
    rows = tf.TensorShape([None]).concatenate(shape[1:])
    if not values.shape.is_compatible_with(rows):
        raise errors.bad_value(
            argument,
            f"must have shape [num_indices] + {shape.as_list()[1:]} to update "
            f"rows of `parameters[{index}]` (shape {shape.as_list()})",
            values,
        )
    if indices.shape.rank == 1 and values.shape.rank:
        if not indices.shape[:1].is_compatible_with(values.shape[:1]):
            raise errors.bad_value(
                argument,
                f"must have one row per index ({indices.shape[0]} indices)",
                values,
            )


def _check_indices(argument: str, indices: tf.Tensor, parameter: tf.Variable) -> None:
    # Out-of-range rows would fail inside a scatter kernel, possibly after
    # other variables were already updated. Eagerly this is cheap to check
    # up front; inside a `tf.function` the kernels' own checks remain.
    if not tf.executing_eagerly() or parameter.shape.rank is None:
        return
    rows = parameter.shape[0]
    if rows is None:
        return
    found = indices.numpy()
    if found.size and (found.min() < 0 or found.max() >= rows):
        raise errors.bad_value(
            f"{argument}.indices",
            f"must lie in [0, {rows}) (rows of the parameter)",
            found.tolist(),
        )


def _dtype_error(argument: str, update: Any, parameter: tf.Variable) -> ValueError:
    return errors.bad_value(
        argument,
        f"must have the dtype of its parameter ({parameter.dtype.name}, "
        f"variable {parameter.name!r})",
        update,
    )


def check_updates_parameters(
    updates: Sequence[Any], parameters: Sequence[tf.Variable]
) -> list[Update]:
    """Validates an `apply` call; returns the updates as tensors/IndexedSlices.

    Raises before anything is modified if the strategy is unsupported, the
    lengths differ, `parameters` is empty, every update is None, a parameter
    is not a floating point `tf.Variable`, or an update's type, dtype or shape
    does not fit its parameter.
    """
    check_distribution_strategy()
    _check_sequence("updates", updates)
    _check_sequence("parameters", parameters)
    if len(updates) != len(parameters):
        raise errors.bad_value(
            "updates",
            f"must have one entry per parameter ({len(parameters)} parameters)",
            f"{len(updates)} updates",
        )
    if not parameters:
        raise errors.bad_value("parameters", "must not be empty", parameters)
    if all(u is None for u in updates):
        raise errors.bad_value(
            "updates", "must contain at least one update that is not None", updates
        )
    replicas = _replicas_in_replica_context()
    for i, p in enumerate(parameters):
        if not isinstance(p, tf.Variable):
            raise errors.bad_type(f"parameters[{i}]", "must be a tf.Variable", p)
        if not p.dtype.is_floating:
            raise errors.bad_type(
                f"parameters[{i}]", "must have a floating point dtype", p
            )
        if replicas > 1 and not isinstance(p, tf.distribute.DistributedValues):
            raise _not_replicated(f"parameters[{i}]", p)
    return [_to_update(i, u, p) for i, (u, p) in enumerate(zip(updates, parameters))]


def _replicas_in_replica_context() -> int:
    """Replicas in sync when called inside `strategy.run`, else 0."""
    if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
        return 0
    context = tf.distribute.get_replica_context()
    return 0 if context is None else context.num_replicas_in_sync


def _not_replicated(argument: str, variable: tf.Variable) -> ValueError:
    # Every replica would update the same single variable.
    return errors.bad_value(
        argument,
        "must have one copy per replica inside `strategy.run`: create it (and "
        "the optimizer) inside `strategy.scope()`",
        variable,
    )


def check_replicated(argument: str, variable: tf.Variable) -> None:
    """Rejects a non-replicated optimizer variable used inside `strategy.run`."""
    if _replicas_in_replica_context() > 1 and not isinstance(
        variable, tf.distribute.DistributedValues
    ):
        raise _not_replicated(argument, variable)


def check_same_parameters(
    parameters: Sequence[tf.Variable], slots: Sequence[tf.Variable]
) -> None:
    """Checks that `parameters` match the slots made on the first `apply`.

    Slots are matched to parameters by position, so every call must pass the
    same variables in the same order.
    """
    if len(parameters) != len(slots):
        raise errors.bad_value(
            "parameters",
            "must be the same variables, in the same order, as in the first "
            f"call to `apply` ({len(slots)} variables)",
            f"{len(parameters)} variables",
        )
    replicas = _replicas_in_replica_context()
    for i, (p, s) in enumerate(zip(parameters, slots)):
        if replicas > 1 and not isinstance(s, tf.distribute.DistributedValues):
            raise errors.bad_value(
                "parameters",
                "must have replica-local optimizer state inside `strategy.run`, "
                "but this optimizer's slots were made by a first `apply` outside "
                "the strategy; make the first `apply` inside `strategy.run`",
                f"{len(parameters)} variables",
            )
        if p.dtype != s.dtype or not p.shape.is_compatible_with(s.shape):
            raise errors.bad_value(
                f"parameters[{i}]",
                "must be the same variables, in the same order, as in the first "
                f"call to `apply` (position {i} had shape {s.shape.as_list()} "
                f"and dtype {s.dtype.name})",
                p,
            )


# ---------------------------------------------------------------------------
# Slot variables.


def slot_like(parameter: tf.Variable) -> tf.Variable:
    """A zero slot variable shaped, typed and placed like `parameter`.

    The slot is named after the parameter (inside the caller's name scope). A
    distributed parameter gets a slot of the same strategy, with one copy per
    replica, even if the first `apply` runs outside that strategy's scope.
    """
    if isinstance(parameter, tf.distribute.DistributedValues) and (
        not tf.distribute.has_strategy()
    ):
        with parameter.distribute_strategy.scope():  # type: ignore[attr-defined]
            return utils.variable_like(parameter)
    return utils.variable_like(parameter)


def create_slots(
    parameters: Sequence[tf.Variable], /, **slot_lists: list[tf.Variable]
) -> None:
    """Extends each of `slot_lists`, in order, with one `slot_like` per
    parameter, made in a name scope named by its keyword."""
    for scope, slots in slot_lists.items():
        with tf.name_scope(scope):
            slots.extend(slot_like(p) for p in parameters)


# ---------------------------------------------------------------------------
# Routing updates to variables.


def for_each_update(
    rule: Callable[..., Any],
    updates: Sequence[Update],
    parameters: Sequence[tf.Variable],
    *slot_lists: Sequence[tf.Variable],
) -> None:
    """Calls `rule(parameter, update, *slots)` for every non-None update.

    `rule` always receives variables that can be updated in place: the
    variables themselves, or (for a distributed variable seen from
    cross-replica context) each replica's copy in turn.
    """
    in_replica = tf.distribute.has_strategy() and not (
        tf.distribute.in_cross_replica_context()
    )
    for i, (update, parameter) in enumerate(zip(updates, parameters)):
        if update is None:
            continue
        slots = [s[i] for s in slot_lists]
        if in_replica or not isinstance(parameter, tf.distribute.DistributedValues):
            rule(parameter, update, *slots)
            continue
        strategy = parameter.distribute_strategy  # type: ignore[attr-defined]
        with strategy.scope():
            strategy.extended.update(parameter, rule, args=(update, *slots))


def deduplicate(update: tf.IndexedSlices) -> tuple[tf.Tensor, tf.Tensor]:
    """Sums the rows of `update` that share an index.

    Returns:
      `(values, indices)` with unique indices.
    """
    unique, positions = tf.unique(update.indices, out_idx=update.indices.dtype)
    values = tf.math.unsorted_segment_sum(
        update.values, positions, tf.shape(unique, out_type=unique.dtype)[0]
    )
    return values, unique


def fused_apply(
    kernels: tuple[Callable[..., Any], Callable[..., Any]],
    update: Update,
    **arguments: Any,
) -> None:
    """Runs one of a `(dense, sparse)` pair of fused `ResourceApply*` kernels:
    the sparse one on the de-duplicated rows of a `tf.IndexedSlices` update,
    the dense one on a dense update (`grad`; `arguments` are the rest)."""
    dense, sparse = kernels
    if isinstance(update, tf.IndexedSlices):
        values, indices = deduplicate(update)
        sparse(grad=values, indices=indices, **arguments)
    else:
        dense(grad=update, **arguments)


class Ref:
    """Reads and writes one variable through its resource handle.

    Replica-local variables do not offer `sparse_read`/`scatter_*` as methods,
    but their handle (the local copy's, inside `strategy.run`) supports the
    raw ops. A variable without a resource handle (`snt.functional`'s) makes
    a `_MethodRef` instead, which uses its methods: the class is chosen once,
    on construction, so no method tests for the handle.

    Reads return `compute_dtype` and writes accept it: half-precision
    variables are computed on in float32 (bfloat16 rounds e.g. 0.999 to 1.0,
    which would turn Adam's bias correction into 0 / 0), then rounded once
    when stored.
    """

    __slots__ = ("compute_dtype", "dtype", "handle", "variable")

    def __init__(self, variable: tf.Variable):
        self.variable = variable
        self.dtype = variable.dtype
        self.compute_dtype = tf.float32 if self.dtype.size < 4 else self.dtype
        try:
            self.handle = variable.handle  # type: ignore[attr-defined]
        except AttributeError:
            self.handle = None
            # The same slots; only the methods change.
            self.__class__ = _MethodRef  # pyright: ignore[reportAttributeAccessIssue]

    def _load(self, value: tf.Tensor) -> tf.Tensor:
        return tf.cast(value, self.compute_dtype)

    def _store(self, value: tf.Tensor) -> tf.Tensor:
        return tf.cast(value, self.dtype)

    def read(self) -> tf.Tensor:
        return self._load(
            tf.raw_ops.ReadVariableOp(resource=self.handle, dtype=self.dtype)
        )

    def assign(self, value: tf.Tensor) -> None:
        tf.raw_ops.AssignVariableOp(resource=self.handle, value=self._store(value))

    def assign_sub(self, value: tf.Tensor) -> None:
        tf.raw_ops.AssignSubVariableOp(resource=self.handle, value=self._store(value))

    def gather(self, indices: tf.Tensor) -> tf.Tensor:
        return self._load(
            tf.raw_ops.ResourceGather(
                resource=self.handle, indices=indices, dtype=self.dtype
            )
        )

    def scatter_update(self, indices: tf.Tensor, values: tf.Tensor) -> None:
        tf.raw_ops.ResourceScatterUpdate(
            resource=self.handle, indices=indices, updates=self._store(values)
        )

    def scatter_sub(self, indices: tf.Tensor, values: tf.Tensor) -> None:
        tf.raw_ops.ResourceScatterSub(
            resource=self.handle, indices=indices, updates=self._store(values)
        )

    def fused(self, *others: Ref) -> bool:
        """True if the fused kernels apply: resource variables of a fused
        dtype (the kernels then work in the variables' own dtype)."""
        return (
            self.handle is not None
            and self.dtype in FUSED_DTYPES
            and all(r.handle is not None for r in others)
        )


class _MethodRef(Ref):
    """A `Ref` of a variable without a resource handle: uses its methods."""

    __slots__ = ()

    def read(self) -> tf.Tensor:
        return self._load(tf.convert_to_tensor(self.variable))

    def assign(self, value: tf.Tensor) -> None:
        self.variable.assign(self._store(value))

    def assign_sub(self, value: tf.Tensor) -> None:
        self.variable.assign_sub(self._store(value))

    def gather(self, indices: tf.Tensor) -> tf.Tensor:
        return self._load(self.variable.sparse_read(indices))

    def scatter_update(self, indices: tf.Tensor, values: tf.Tensor) -> None:
        self.variable.scatter_update(tf.IndexedSlices(self._store(values), indices))

    def scatter_sub(self, indices: tf.Tensor, values: tf.Tensor) -> None:
        self.variable.scatter_sub(tf.IndexedSlices(self._store(values), indices))


def cast(value: Any, dtype: tf.DType) -> tf.Tensor:
    """`value` as a `dtype` tensor; Python numbers are converted directly (not
    through float32), so float64 updates get float64-exact hyper-parameters."""
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return tf.cast(value, dtype)
    return tf.constant(value, dtype)


def casts(*values: Any) -> Callable[[tf.DType], list[tf.Tensor]]:
    """For `CastCache`: the hyper-parameters `values`, each `cast` to a dtype."""
    return lambda dtype: [cast(value, dtype) for value in values]


class CastCache:
    """Casts hyper-parameters to each compute dtype once per `apply` call."""

    __slots__ = ("_cache", "_make")

    def __init__(self, make: Callable[[tf.DType], Any]):
        self._make = make
        self._cache: dict[tf.DType, Any] = {}

    def __call__(self, dtype: tf.DType) -> Any:
        value = self._cache.get(dtype)
        if value is None:
            value = self._cache[dtype] = self._make(dtype)
        return value
