"""`Replicator` / `TpuReplicator`: strategies whose variables are replica-local.

Sonnet's training model under data parallelism is "every replica runs the same
program on its shard of the batch, the user all-reduces the gradients, every
replica applies the same update to its own copy of the variables". TensorFlow's
`MirroredStrategy` instead makes variables *mirrored*: writes from a replica
must be aggregated, which is the job of Keras optimizers. The two strategies
here only change how variables are created inside `scope()` (and therefore
inside `run`, which enters `scope()`): by default they are replica-local
(`ON_READ` synchronization), so each replica updates its own copy, and a read
from cross-replica context returns the first replica's value.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import tensorflow as tf

from sonnet._src import eager_init, utils

T = TypeVar("T")


def replica_local_creator(
    next_creator: Callable[..., tf.Variable], **kwargs: Any
) -> tf.Variable:
    """Variable creator that makes variables replica-local unless told otherwise.

    Only variables that left `synchronization` at `AUTO` are changed: they
    become `ON_READ`, with aggregation `ONLY_FIRST_REPLICA` (if `NONE` was
    asked) and trainable by default. Explicit settings are kept, including
    `trainable=False`.
    """
    if kwargs.get("synchronization") == tf.VariableSynchronization.AUTO:
        kwargs["synchronization"] = tf.VariableSynchronization.ON_READ
        if kwargs.get("aggregation") in (None, tf.VariableAggregation.NONE):
            kwargs["aggregation"] = tf.VariableAggregation.ONLY_FIRST_REPLICA
        if kwargs.get("trainable") is None:
            kwargs["trainable"] = True
    return next_creator(**kwargs)


# `MirroredStrategy` names the copies of a variable `<name>/replica_<i>/`.
_COPY_NAME = re.compile(r"^(.+)/replica_[1-9][0-9]*/$")


class _CopyInitialValues(threading.local):
    """Lets the copies of a variable made inside `tf.function` share its
    initial value, so that `tf.function` can lift their initialization.

    Inside a `tf.function`, `MirroredStrategy` initializes copy `i > 0` of a
    new variable by *reading* copy 0, which is a captured input of the
    function. `tf.function` cannot lift such an initializer out of the
    function, so it falls back to initializing variables under a `tf.cond`
    on every call; TensorFlow (2.21) then fails at run time with "You must
    feed a value for placeholder tensor" as soon as the same first call also
    all-reduces (e.g. `CrossReplicaBatchNorm` in training, or gradients).
    This creator sits below the strategy's own: it remembers the initial
    value given to copy 0 and hands the same tensor to the other copies,
    which is liftable (and gives identical values, random ones included).
    Anything it does not recognise is passed through unchanged.
    """

    name: str | None = None
    value: tf.Tensor | None = None

    def __call__(
        self, next_creator: Callable[..., tf.Variable], **kwargs: Any
    ) -> tf.Variable:
        if not tf.inside_function():
            return next_creator(**kwargs)
        initial_value = kwargs.get("initial_value")
        name = kwargs.get("name")
        match = _COPY_NAME.match(name) if isinstance(name, str) else None
        if match is not None and callable(initial_value):
            if self.value is not None and match.group(1) == self.name:
                kwargs["initial_value"] = tf.identity(self.value)
            return next_creator(**kwargs)
        variable = next_creator(**kwargs)
        if isinstance(initial_value, tf.Tensor) and tf.is_symbolic_tensor(
            initial_value
        ):
            self.name, self.value = variable.name.split(":")[0], initial_value
        else:
            self.name = self.value = None
        return variable


_copy_initial_values = _CopyInitialValues()


@contextlib.contextmanager
def _replica_local_scope(parent: Any) -> Iterator[None]:
    try:
        with (
            tf.variable_creator_scope(_copy_initial_values),
            parent,
            tf.variable_creator_scope(replica_local_creator),
        ):
            yield
    finally:
        # Do not keep a traced graph alive through the remembered tensor.
        _copy_initial_values.name = _copy_initial_values.value = None


_KEY_BASE_LOCK = threading.Lock()
_key_base = 0


def _next_collective_key_base() -> int:
    global _key_base
    with _KEY_BASE_LOCK:
        _key_base += 100_000
        return _key_base


class Replicator(tf.distribute.MirroredStrategy):
    """A `MirroredStrategy` whose variables are replica-local.

    Use it exactly like `tf.distribute.MirroredStrategy` (same constructor,
    `run`, `reduce`, `experimental_local_results`, ...). The difference is in
    `scope()`: variables created there (or inside `run`) default to one
    independent copy per replica, so Sonnet modules and optimizers behave
    inside the strategy exactly as outside it. Keep the copies in sync by
    all-reducing gradients before applying them, e.g. with
    `tf.distribute.get_replica_context().all_reduce("mean", grads)`.

    Args:
      devices: Device strings to replicate over; default all local GPUs (or
        the CPU when there are none), as for `MirroredStrategy`.
      cross_device_ops: Optional `tf.distribute.CrossDeviceOps` used for
        all-reduces; default lets TensorFlow choose.

    >>> replicator = snt.distribute.Replicator(["/cpu:0"])
    >>> with replicator.scope():
    ...   v = tf.Variable(1.0)
    >>> v.trainable, v.synchronization == tf.VariableSynchronization.ON_READ
    (True, True)
    """

    def __init__(
        self,
        devices: list[str] | None = None,
        cross_device_ops: tf.distribute.CrossDeviceOps | None = None,
    ):
        # Collective all-reduces are keyed by (group, instance) process-wide,
        # and every `MirroredStrategy` over the same devices starts from the
        # same keys: a second strategy in one process whose all-reduce has a
        # different shape than the first one's fails ("Shape mismatch in the
        # collective instance"). Give each replicator its own key range.
        self._collective_key_base = _next_collective_key_base()
        super().__init__(devices=devices, cross_device_ops=cross_device_ops)

    def scope(self) -> contextlib.AbstractContextManager[None]:  # type: ignore[override]
        """Enters the strategy and makes new variables replica-local.

        Returns:
          A context manager; inside it `tf.Variable`s are created as
          replica-local variables of this strategy.
        """
        return _replica_local_scope(super().scope())


class TpuReplicator(tf.distribute.TPUStrategy):
    """A `tf.distribute.TPUStrategy` whose variables are replica-local.

    The TPU counterpart of `snt.distribute.Replicator` (same `scope()`
    behaviour). It needs a TPU, takes the same arguments as
    `tf.distribute.TPUStrategy` (e.g. a `TPUClusterResolver`), and, like any
    TPU strategy, `run` must be called inside a `tf.function`.

    >>> issubclass(snt.distribute.TpuReplicator, tf.distribute.TPUStrategy)
    True
    """

    def scope(self) -> contextlib.AbstractContextManager[None]:  # type: ignore[override]
        """Enters the strategy and makes new variables replica-local."""
        return _replica_local_scope(super().scope())


def create_variables_eagerly(f: Callable[..., T]) -> Callable[..., T]:
    """Wraps `f` so that variables it creates get their initial values eagerly.

    Inside a `tf.function` (and especially on TPU), a variable's initializer
    normally becomes part of the traced graph and must be lifted out of it.
    Sonnet modules initialise outside the trace by themselves, except under a
    distribution strategy; while the wrapper runs `f` they do so under a
    strategy too (their initializers compute eagerly), and any other
    variable whose initial value is eager or a constant of the graph is
    created eagerly from that value. Initial values that depend on the
    function's inputs are left alone. Results are the same as without the
    wrapper.

    Args:
      f: Any callable (a function, a module, ...), typically a step function
        run under `tf.function`.

    Returns:
      A callable with the signature of `f`.

    >>> mod = snt.Linear(3)
    >>> @tf.function
    ... @snt.distribute.create_variables_eagerly
    ... def step(x):
    ...   return mod(x)
    >>> step(tf.ones([1, 2])).shape
    TensorShape([1, 3])
    """

    @utils.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        with eager_init.constants_created_eagerly():
            return f(*args, **kwargs)

    return wrapper
