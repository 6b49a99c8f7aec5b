"""The one place that touches TensorFlow behaviour with no public API.

`tf.function` objects defined in a module's class body must enter the module's
name scope *inside* the traced Python function (so that variables created
during tracing get the module's prefix) while remaining `tf.function` objects
(so `get_concrete_function` keeps working). TF offers no public hook for that;
`Function._decorate` does exactly this and is what `tf.Module` itself uses.
If it ever disappears we rebuild the function from its public attributes.

`snt.KerasLayer` gives Keras 3 the module's own `tf.Variable`s: Keras has
no public way to make a Keras variable backed by an existing `tf.Variable`
(its constructor copies the value into a new one), so `keras_variable_of`
overrides the hook that creates the storage (`_initialize_with_initializer`).

`snt.summary` counts the FLOPs of the functions a traced op calls (a
`tf.function` call, `tf.cond` branches, a `tf.while_loop` body): finding the
graph of a library function by name (`Graph._get_function`) has no public API
either; without it those ops would count as 0 FLOPs.

`eager_init` runs a module's lazy initialisation outside the `tf.function`
being traced (`outside_trace`). That relies on behaviour of `tf.function` no
public API promises: a variable created with
`experimental_enable_variable_lifting=False` is not registered with the
function being traced, which then neither traces a second time nor refuses
variables in a later trace; and, as no public API tells the current device
scope, an op created in the graph is what shows it (`in_device_scope`).

A name scope entered while a `tf.function` is traced gets a name unique in
its graph (`m/linear_1`); entered eagerly, names repeat. An initialisation
moved out of the trace enters its scopes (submodules built there, optimizer
slots) as the trace would have (`TracedNames`): no public API enters a scope
eagerly under a graph's unique name, or gives a taken name back when the
initialisation must run in the graph after all, so this reads a name scope's
name (`_name`) and the graph's names in use (`Graph._names_in_use`).

Restore-on-create (`tf.train.Checkpoint.read` before a module's variables
exist) restores each variable when the module first tracks it, through
`Trackable._handle_deferred_dependencies`, TensorFlow's general restore
machinery: ~2 ms of Python per variable (about 0.9 s for the 373 variables
that a ResNet-50's first call creates and restores).
`handle_deferred_dependencies`, which `snt.Module` installs in its place,
restores a plain eager variable waiting for one checkpoint value of the same
shape and dtype with one `RestoreV2` and an `assign`, doing the bookkeeping
TensorFlow does (the object is matched for `assert_consumed`, later reads of
older checkpoints skip it); anything else goes to TensorFlow's own method.
The variable is restored at the same moment (when it is assigned to the
module), with the same value, so module code sees no difference.

Module code opts out of AutoGraph with `utils.no_autograph`, which marks the
function itself (`mark_do_not_convert`) instead of wrapping it as
`tf.autograph.experimental.do_not_convert` does: the attribute AutoGraph
checks is not public. Two names without a public spelling are re-exported
here: the checkpoint's object graph proto (`TrackableObjectGraph`) and the
base class of composite tensors (`CompositeTensor`).

`snt.optimizers.Accumulator` sums gradients over the replicas of a
`MirroredStrategy` (so a `snt.distribute.Replicator`) inside a `tf.cond`:
the public `ReplicaContext.all_reduce` synchronises the replica threads
with `merge_call`, which TensorFlow refuses inside control flow while
tracing. `replica_all_reduce_sum` runs the strategy's own collective
all-reduce there (its `_collective_ops._all_reduce`, what `MirroredStrategy`
itself uses for XLA), which needs no synchronisation point.

`snt.MixtureOfExperts` refuses its dropless (dynamic-shape) dispatch while a
function is traced for XLA (`jit_compile=True`), where it cannot compile:
whether the graph being traced is compiled by XLA has no public API
(`in_xla_trace`, TensorFlow's `control_flow_util.GraphOrParentsInXlaContext`).

Whether TensorFlow runs its oneDNN CPU kernels (`onednn_enabled`) has no
public API either: TensorFlow turns them on by default only on CPUs with
AVX-512-VNNI, AVX-512-BF16, AVX-VNNI or AMX (and `TF_ENABLE_ONEDNN_OPTS`
overrides it), and their bfloat16 convolutions are the fast ones.

TensorFlow's CPU tensors come from the C library's `malloc` unless
`TF_CPU_ALLOCATOR_USE_BFC` asks for its pooled (best-fit with coalescing)
allocator, which it already uses for GPU memory; the variable, read when
TensorFlow creates its CPU device, has no Python API. `malloc` hands
buffers of a few MiB back to the system when they are freed and maps them
again, zeroed, on the next allocation: a training step of the bench
Transformer (`[16, 128, 256]` activations) took 10,000-25,000 page faults,
about 6% of its time, and none with the pool. `prefer_pooled_allocator`,
called first by `import sonnet`, sets the variable unless the user did
(`TF_CPU_ALLOCATOR_USE_BFC=false` keeps `malloc`), with the pool's cap
(`TF_CPU_BFC_MEM_LIMIT_IN_MB`, 64 GiB in TensorFlow) raised to the host's
memory; it takes effect when TensorFlow had not run an op before.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.ops import resource_variable_ops

# The checkpoint's object graph proto: TensorFlow exports no public name for
# it (`tf.train` reads checkpoints but does not expose their object graph).
TrackableObjectGraph = trackable_object_graph_pb2.TrackableObjectGraph

# The base class of `tf.RaggedTensor`, `tf.SparseTensor`, extension types...:
# public only under `tf.__internal__`.
CompositeTensor = tf.__internal__.CompositeTensor

_POLYMORPHIC = tf.types.experimental.PolymorphicFunction


POOLED_ALLOCATOR = "TF_CPU_ALLOCATOR_USE_BFC"
POOL_LIMIT = "TF_CPU_BFC_MEM_LIMIT_IN_MB"


def prefer_pooled_allocator(environ: Any = None) -> None:
    """Asks TensorFlow for its pooled CPU allocator unless the user chose.

    Sets `TF_CPU_ALLOCATOR_USE_BFC=true` and, if unset, the pool's cap to
    the host's physical memory in MiB (TensorFlow's own cap is 64 GiB, below
    what `malloc` would give on larger hosts). `environ` defaults to
    `os.environ`. TensorFlow reads both when it creates its CPU device, so
    this changes nothing in a process that has already run an op.
    """
    environ = os.environ if environ is None else environ
    if POOLED_ALLOCATOR in environ:
        return
    environ[POOLED_ALLOCATOR] = "true"
    if POOL_LIMIT not in environ:
        megabytes = _physical_megabytes()
        if megabytes is not None:
            environ[POOL_LIMIT] = str(max(megabytes, 1 << 16))


def _physical_megabytes() -> int | None:
    """The host's physical memory in MiB, or None where the OS won't say."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if pages <= 0 or page_size <= 0:
        return None
    return pages * page_size >> 20


@functools.cache
def onednn_enabled() -> bool:
    """Whether this process's TensorFlow runs its oneDNN CPU kernels (cached).

    False where TensorFlow cannot tell (a build without oneDNN, or one whose
    internal query moved).
    """
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:
        return False
    return bool(_pywrap_util_port.IsMklEnabled())


def is_tf_function(value: Any) -> bool:
    """True for objects created by `tf.function`."""
    return isinstance(value, _POLYMORPHIC)


def decorate_tf_function(
    fn: Any, decorator: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Any:
    """Applies `decorator` to the Python function traced by `fn`, in place.

    Returns the (possibly new) `tf.function` object to use.
    """
    decorate = getattr(fn, "_decorate", None)
    if decorate is not None:
        decorate(decorator)
        return fn
    return tf.function(  # pragma: no cover - only on TF versions without _decorate
        decorator(fn.python_function), input_signature=fn.input_signature
    )


def mark_do_not_convert(f: Any) -> Any:
    """Makes AutoGraph call `f` as is (unconverted), at no per-call cost.

    AutoGraph never converts functions carrying the `autograph_info__`
    attribute; `tf.autograph.experimental.do_not_convert` sets it on a wrapper
    that adds a few microseconds to every eager call. Setting it on `f`
    itself (and `functools.wraps` copies it onto the name-scope wrappers)
    gives the same effect for free. If a TF version stops honouring it,
    functions are simply converted again (slower tracing, same results).
    """
    f.autograph_info__ = None
    return f


def _converted_again(self: Any) -> None:
    raise AttributeError("autograph_info__")


def mark_instances_do_not_convert(cls: type, call: Any) -> None:
    """Makes AutoGraph call instances of `cls` as is if its `call` is marked.

    AutoGraph looks for the marker of `mark_do_not_convert` on the object it
    calls (a module instance), not on its class's `__call__`, so a marked
    `__call__` alone was still converted, with every method it calls, when
    the module was called from converted code. The marker is therefore set
    on the class; a subclass defining an unmarked `__call__` hides it again
    (a property that raises `AttributeError` reads as missing to `hasattr`),
    so that its own `__call__` is converted.
    """
    if hasattr(call, "autograph_info__"):
        cls.autograph_info__ = None  # type: ignore[attr-defined]
    elif hasattr(cls, "autograph_info__"):
        cls.autograph_info__ = property(_converted_again)  # type: ignore[attr-defined]


# Ops that call functions of the graph's library (`tf.function` calls,
# `tf.cond`/`tf.case` branches, `tf.while_loop` conditions and bodies).
_CALLING_OPS = frozenset(
    {"PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf"}
    | {"Case", "StatelessCase", "While", "StatelessWhile"}
)


def called_graphs(op: tf.Operation) -> dict[str, list[Any]]:
    """The graphs of the functions `op` calls, by the attribute naming them.

    E.g. `{"cond": [...], "body": [...]}` for a while loop, `{"f": [...]}` for
    a `tf.function` call. A function's graph comes from the graph library
    (`Graph._get_function(name).graph`, which has no public counterpart);
    functions whose graphs cannot be found are left out. Ops that call none
    give `{}`.
    """
    graph: Any = op.graph
    if op.type not in _CALLING_OPS and not _find_function(graph, op.type):
        return {}
    names: dict[str, list[str]] = {}
    if op.type not in _CALLING_OPS:
        names["f"] = [op.type]  # A function called by name, as an op.
    for key, value in op.node_def.attr.items():
        if value.HasField("func"):
            names[key] = [value.func.name]
        elif value.HasField("list") and value.list.func:
            names[key] = [f.name for f in value.list.func]
    result: dict[str, list[Any]] = {}
    for key, function_names in names.items():
        graphs = [
            getattr(_find_function(graph, n), "graph", None) for n in function_names
        ]
        found = [g for g in graphs if g is not None]
        if found:
            result[key] = found
    return result


def _find_function(graph: Any, name: str) -> Any:
    """The library function `name` of `graph` or of a graph it is nested in."""
    while graph is not None:
        get = getattr(graph, "_get_function", None)
        function = get(name) if get is not None else None
        if function is not None:
            return function
        graph = getattr(graph, "outer_graph", None)
    return None


_keras_variable_class: Any = None


def keras_variable_of(variable: tf.Variable) -> Any:
    """A `keras.Variable` whose storage is `variable` itself (not a copy).

    Reads, Keras optimizer updates and `load_weights` go to `variable`. The
    Keras name is the variable's, with "/" (not allowed there) as ".".
    """
    global _keras_variable_class
    if _keras_variable_class is None:
        import keras

        class ModuleVariable(keras.Variable):  # pyright: ignore[reportGeneralTypeIssues]
            def __init__(self, existing: tf.Variable):
                self._existing = existing
                super().__init__(
                    initializer=lambda shape, dtype: None,
                    shape=existing.shape,
                    dtype=existing.dtype.name,
                    trainable=existing.trainable,
                    name=existing.name.split(":")[0].replace("/", "."),
                )

            def _initialize_with_initializer(self, initializer: Any) -> None:
                del initializer
                self._initialize(self._existing)

        _keras_variable_class = ModuleVariable
    return _keras_variable_class(variable)


_creating = threading.local()


def _not_registered(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
    kwargs["experimental_enable_variable_lifting"] = False
    # The name scopes TensorFlow enters to name the variable are eager ones in
    # a trace too (`TracedNames` leaves them alone).
    _creating.depth = getattr(_creating, "depth", 0) + 1
    try:
        return next_creator(**kwargs)
    finally:
        _creating.depth -= 1


@contextlib.contextmanager
def outside_trace() -> Iterator[None]:
    """Runs its body in the eager context outside the function being traced
    (`tf.init_scope()`); variables created there are not registered with that
    function (whose other variable creators still see them)."""
    with tf.init_scope(), tf.variable_creator_scope(_not_registered):
        yield


class TracedNames:
    """Scope names of a graph being traced, for an initialisation run outside it.

    `enter(scope, original)` enters the `tf.name_scope` object `scope`
    eagerly (`original` is `tf.name_scope.__enter__`) under the name the
    traced graph would have given it: a relative name, made unique among the
    graph's names under the current (eager) scope and marked used there, as
    entering it in the graph would. `release()` gives the names taken back,
    for an initialisation that is then run in the graph after all. Reads
    and writes the graph's names in use (`Graph._names_in_use`) and a name
    scope's name (`_name`): no public API enters a given scope eagerly under
    a graph's unique name or takes such a name back.
    """

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        # (key, count before) per name marked, to give them back in reverse.
        self._taken: list[tuple[str, int | None]] = []

    def enter(self, scope: Any, original: Callable[[Any], str]) -> str:
        name = scope._name
        if (
            not name
            or name[-1] == "/"
            or getattr(_creating, "depth", 0)
            or not tf.executing_eagerly()
        ):
            return original(scope)
        current = tf.get_current_name_scope()
        graph = self.graph
        in_use = graph._names_in_use
        # The key `unique_name` counts the name under (it returns another
        # key, marked too, when that one is taken).
        base = f"{current}/{name}".lower() if current else name.lower()
        before = in_use.get(base)
        with graph.as_default(), graph.name_scope(f"{current}/" if current else ""):
            unique = graph.unique_name(name)
        self._taken.append((base, before))
        if unique.lower() != base:
            self._taken.append((unique.lower(), None))
        scope._name = f"{unique}/"
        try:
            return original(scope)
        finally:
            scope._name = name

    def release(self) -> None:
        in_use = self.graph._names_in_use
        for key, before in reversed(self._taken):
            if before is None:
                in_use.pop(key, None)
            else:
                in_use[key] = before
        self._taken.clear()


def in_device_scope() -> bool:
    """Whether the graph being built has an explicit device scope.

    Creates a `NoOp` without inputs, which graph pruning removes.
    """
    return bool(tf.raw_ops.NoOp().device)


# `checkpoint_key` of a variable's value in the checkpoint's object graph.
_VARIABLE_VALUE = "VARIABLE_VALUE"
# The class of an ordinary eager `tf.Variable` (no public name): its type, not
# taken from a variable made here, which under a strategy would be distributed.
_PLAIN_VARIABLE: Any = resource_variable_ops.ResourceVariable


def _is_plain_variable(value: Any) -> bool:
    """Whether `value` is an ordinary eager `tf.Variable` (a resource variable,
    not distributed, not a `snt.functional` `TensorVariable`)."""
    return type(value) is _PLAIN_VARIABLE


def _quick_restore_key(position: Any, variable: Any) -> str | None:
    """The checkpoint key holding `variable`'s value in `position`, where the
    quick path may restore it; None where TensorFlow's method must."""
    proto = position.object_proto
    if (
        len(proto.attributes) != 1
        or proto.attributes[0].name != _VARIABLE_VALUE
        or proto.children
        or proto.registered_saver.name
        or position.has_non_trivial_reshard_callback()
        or getattr(position, "skip_restore", False)
    ):
        return None
    checkpoint = position.checkpoint
    proto_id = position.proto_id
    if checkpoint.slot_restorations.get(proto_id) or (
        checkpoint.deferred_slot_restorations.get(proto_id)
    ):
        return None  # Optimizer slots hang on this variable: TF's method.
    variable._maybe_initialize_trackable()
    if checkpoint.restore_uid <= variable._update_uid:
        return None
    key = proto.attributes[0].checkpoint_key
    if checkpoint.dtype_map.get(key) != variable.dtype or checkpoint.shape_map.get(
        key
    ) != list(variable.shape):
        return None  # TensorFlow's method raises its error for a mismatch.
    return key


def _restore_quickly(owner: Any, name: str, variable: Any) -> bool:
    """Restores the one checkpoint value waiting for `owner.<name>` into the
    plain variable `variable`; False (nothing changed) where it cannot."""
    deferred = getattr(owner, "_self_unconditional_deferred_dependencies", None)
    if not deferred:
        return False
    positions = deferred.get(name)
    if (
        positions is None
        or len(positions) != 1
        or getattr(owner, "_self_name_based_restores", None)
        or not _is_plain_variable(variable)
        or tf.distribute.has_strategy()
    ):
        return False
    (position,) = positions
    with tf.init_scope():
        if not tf.executing_eagerly():
            return False
        try:
            key = _quick_restore_key(position, variable)
            if key is None:
                return False
            checkpoint = position.checkpoint
            with tf.device(checkpoint.options.experimental_io_device or "cpu:0"):
                (value,) = tf.raw_ops.RestoreV2(
                    prefix=checkpoint.save_path_tensor,
                    tensor_names=[key],
                    shape_and_slices=[""],
                    dtypes=[variable.dtype],
                )
        except (AttributeError, KeyError, TypeError, tf.errors.OpError):
            return False  # TensorFlow's method restores it (or raises).
        del deferred[name]
        if position.bind_object(variable):
            variable.assign(value, read_value=False)
            variable._update_uid = checkpoint.restore_uid
    return True


def handle_deferred_dependencies(owner: Any, name: str, trackable: Any) -> None:
    """`snt.Module`'s `_handle_deferred_dependencies` (see the module
    docstring): restores what a checkpoint holds for `owner.<name>`, the
    trackable `owner` has just started tracking.

    A trackable marked `_snt_restore_later` (the stand-ins `snt.LayerStack`
    builds its layers with) is skipped: the value waits for the variable
    that replaces it under the same name."""
    if getattr(trackable, "_snt_restore_later", False):
        return
    if not _restore_quickly(owner, name, trackable):
        tf.Module._handle_deferred_dependencies(owner, name, trackable)  # pyright: ignore[reportAttributeAccessIssue]


def restore_replacement(owner: Any, name: str, trackable: Any) -> None:
    """Restores a checkpoint value waiting for `owner.<name>` into `trackable`,
    which has just replaced the object `owner` tracked under that name.

    TensorFlow restores on create only when a name is tracked the first time
    (`Trackable._track_trackable`); `snt.LayerStack` replaces its layers'
    stand-in variables by stacked ones under the same names.
    """
    owner._handle_deferred_dependencies(name=name, trackable=trackable)


def replica_all_reduce_sum(
    context: tf.distribute.ReplicaContext, values: list[tf.Tensor]
) -> list[tf.Tensor] | None:
    """`values` summed over the replicas without `merge_call` (usable inside
    `tf.cond` while tracing), or None where the strategy has no collective
    all-reduce of its own (then use `context.all_reduce`)."""
    collective = getattr(context.strategy.extended, "_collective_ops", None)
    if collective is None:
        return None
    return list(
        collective._all_reduce(
            tf.distribute.ReduceOp.SUM,
            values,
            context._replica_id,  # pyright: ignore[reportAttributeAccessIssue]
            tf.distribute.experimental.CommunicationOptions(),
        )
    )


def in_xla_trace() -> bool:
    """Whether the graph being traced is compiled by XLA (`jit_compile=True`,
    which traces inside an XLA control-flow context)."""
    from tensorflow.python.ops import (  # pyright: ignore[reportMissingImports]
        control_flow_util,
    )

    graph = tf.compat.v1.get_default_graph()
    return control_flow_util.GraphOrParentsInXlaContext(graph)
