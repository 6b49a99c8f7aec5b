"""`snt.LayerStack`: `num_layers` copies of a layer, stored stacked, run in a loop.

A deep model made of identical blocks costs, unrolled, one trace, one graph
optimisation and one set of Python objects per block. A layer stack stores
each parameter of the block once, as a variable with a leading
`[num_layers, ...]` axis, and applies the block in a `tf.while_loop` whose
body is traced once, whatever the depth (Haiku's `hk.layer_stack`, Flax's
`nn.scan`).

How it works (the one place this is done):

* The constructor builds one layer, the *template* (`stack.layer`): its
  attribute names are the stacked variables' checkpoint paths
  (`layer/mlp_in/w`, ...), and `snt.precision.apply` reaches it.
* The first call builds `num_layers` layers (the template and
  `num_layers - 1` more from `make_layer`) with the variables they would
  create replaced by `TensorVariable`s: their initial values are drawn as
  usual (each layer its own), but no variable exists. When the stack is
  first called inside a `tf.function` its layers are built by tracing their
  calls in a scratch function, which is never run (module initialisation
  happens eagerly, outside that trace). Each of the template's variables is
  then replaced by one real variable holding the `num_layers` initial values
  stacked, with the template variable's name; restore-on-create fills it.
* Each call reads the stacked variables once; the loop body sets the
  template's variable attributes to `TensorVariable`s holding layer `i`'s
  slices, calls the template, and puts the stacked variables back.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np
import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    eager_init,
    errors,
    once,
    precision,
    tf_compat,
    utils,
)
from sonnet._src import remat as remat_lib
from sonnet._src.functional import tensor_variable

_M = TypeVar("_M", bound=tf.Module)

_NOT_A_MODULE = "must return an `snt.Module` each time it is called"
_NO_KERAS = (
    "must build layers made of Sonnet modules: the variables of a Keras layer "
    "are not stacked, so every layer would share one set of them. Use Sonnet "
    "modules in a stacked layer (`snt.Linear` for `keras.layers.Dense`), or an "
    "unstacked model"
)
_NO_UPDATES = (
    "must build layers that do not update their variables: a stack reads them "
    "once per call, so updates would be lost. Layers with state updates (the "
    "moving averages of `snt.BatchNorm`, a counter) cannot be stacked: use "
    "`snt.LayerNorm` or `snt.RMSNorm` for normalisation, or an unstacked model"
)


class _Slot(NamedTuple):
    """Where the template holds one stacked variable."""

    owner: Any  # The object whose attribute holds it.
    attribute: str
    variable: tf.Variable  # The real, stacked variable.
    proxy: tensor_variable.TensorVariable  # Holds one layer's slice in calls.


class _Recorder:
    """Variable creator that makes `TensorVariable`s and records them, and
    the writes to them."""

    def __init__(self) -> None:
        self.made: list[tuple[tensor_variable.TensorVariable, dict[str, Any]]] = []
        self.written: list[tensor_variable.TensorVariable] = []

    def __call__(self, next_creator: Any, **kwargs: Any) -> Any:
        variable = tensor_variable._create(next_creator, **kwargs)
        # Restore-on-create waits for the stacked variable (`tf_compat`).
        variable._snt_restore_later = True  # pyright: ignore[reportAttributeAccessIssue]
        variable.on_write = self.written.append
        self.made.append((variable, kwargs))
        return variable


def _is_tensor(value: Any) -> bool:
    return isinstance(value, (tf.Tensor, tf.Variable, np.ndarray))


def _spec(value: Any) -> Any:
    if _is_tensor(value):
        return tf.TensorSpec(value.shape, tf.as_dtype(value.dtype))
    return value


def _slice_spec(value: Any) -> Any:
    """The spec of one layer's slice of a per-layer input."""
    if _is_tensor(value):
        return tf.TensorSpec(value.shape[1:], tf.as_dtype(value.dtype))
    return value


def _describe(structure: Any) -> str:
    def one(value: Any) -> str:
        if isinstance(value, (tf.Tensor, tf.Variable, tf.TensorSpec)):
            return f"{value.dtype.name}{value.shape}"
        return repr(value)

    return str(tf.nest.map_structure(one, structure))


def _same_signature(a: Any, b: Any, floating_may_change: bool = False) -> bool:
    """Whether `a` and `b` have one structure, dtypes and compatible shapes
    (optionally letting a floating dtype become another floating dtype)."""
    try:
        tf.nest.assert_same_structure(a, b)
    except (ValueError, TypeError):
        return False
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        if hasattr(x, "dtype") != hasattr(y, "dtype"):
            return False
        if not hasattr(x, "dtype"):
            continue
        dx, dy = tf.as_dtype(x.dtype), tf.as_dtype(y.dtype)
        if dx != dy and not (floating_may_change and dx.is_floating and dy.is_floating):
            return False
        if not tf.TensorShape(x.shape).is_compatible_with(y.shape):
            return False
    return True


def _to_spec(value: Any) -> Any:
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return tf.TensorSpec(value.shape, value.dtype)
    return value


def _cast_like(value: Any, spec: Any) -> Any:
    if isinstance(spec, tf.TensorSpec) and value.dtype != spec.dtype:
        return tf.cast(value, spec.dtype)
    return value


class _Signature(NamedTuple):
    """What one layer returns for given arguments (specs)."""

    carry: Any  # Its outputs: the loop's carried value.
    per_layer: Any  # Its per-layer outputs, or None.


def _flatten_with_paths(
    module: Any, cls: type | tuple[type, ...]
) -> list[tuple[tuple[Any, ...], Any]]:
    """`(path, value)` for every instance of `cls` under `module`, in
    `tf.Module.variables` order."""
    return list(module._flatten(predicate=lambda v: isinstance(v, cls), with_path=True))


def _replay(
    calls: list[tuple[Callable[..., Any], tuple[Any, ...], Any]],
    paths: dict[int, tuple[Any, ...]],
    layer: base.Module,
) -> bool:
    """Runs the recorded initialisations of another layer's modules on the
    modules at the same paths in `layer`; False if one has no counterpart."""
    for wrapper, args, kwargs in calls:
        path = paths.get(id(args[0]))
        if path is None:
            return False
        target: Any = layer
        for step in path:
            target = target[step] if isinstance(step, int) else getattr(target, step)
        method = inspect.getattr_static(type(target), wrapper.__name__, None)
        if getattr(method, once.ONCE_ATTRIBUTE, None) is not wrapper:
            return False
        method.__get__(target, type(target))(*args[1:], **kwargs)
    return True


def _owner_of(root: Any, path: tuple[Any, ...]) -> tuple[Any, str]:
    """The object holding the variable at `path` below `root`, and the name."""
    owner = root
    for step in path[:-1]:
        owner = owner[step] if isinstance(step, int) else getattr(owner, step)
    attribute = path[-1]
    if not isinstance(attribute, str) or attribute not in vars(owner):
        raise errors.bad_value(
            "make_layer",
            "must build layers that hold each variable in an attribute of a "
            "module (not inside a list, tuple or dict)",
            f"a variable at {'.'.join(map(str, path))}",
        )
    return owner, attribute


def _path_text(path: tuple[Any, ...]) -> str:
    return "/".join(map(str, path))


def _refuse_keras(layer: base.Module) -> None:
    """Raises if `layer` holds a Keras layer or variable."""
    keras = sys.modules.get("keras")
    try:
        kinds = (keras.layers.Layer, keras.Variable)  # pyright: ignore[reportOptionalMemberAccess]
    except AttributeError:  # Keras is not imported: nothing of it to find.
        return
    for path, found in _flatten_with_paths(layer, kinds):
        raise errors.bad_value(
            "make_layer",
            _NO_KERAS,
            f"a layer holding a Keras {type(found).__name__} at `{_path_text(path)}`",
        )


def _updates_error(layer: base.Module, recorder: _Recorder) -> ValueError | None:
    """The error for the first write to a variable of `layer`, if any."""
    if not recorder.written:
        return None
    written = recorder.written[0]
    for path, variable in _flatten_with_paths(layer, tensor_variable.TensorVariable):
        if variable is written:
            return _update_error(_path_text(path))
    return _update_error(written.name)


def _update_error(path: str) -> ValueError:
    return errors.bad_value(
        "make_layer", _NO_UPDATES, f"a layer updating its variable `{path}`"
    )


def _refuse_update(path: str, variable: tensor_variable.TensorVariable) -> None:
    """`on_write` of the template's stand-ins while the stack computes."""
    del variable
    raise _update_error(path)


# Slices of at most this many elements are read through one fused buffer
# (per dtype): for them the loop's cost per tensor and layer outweighs the
# copies that fusing adds (one concatenation of the stacked tensors and one
# split of their gradients per call).
_FUSED_MAX_ELEMENTS = 1 << 15


class _Stacked:
    """Tensors with a leading `num_layers` axis, read one layer at a time in
    a loop body, each from a TensorList of its `num_layers` slices.

    Small slices of one dtype share a list: the tensors are flattened and
    concatenated into one `[num_layers, size]` tensor, and layer `i`'s
    slices are one read of row `i`, split and reshaped. The loop's
    gradient, which TensorFlow builds as a second loop, keeps what the
    first computed in accumulators, one loop variable each, and sums the
    gradients of captured tensors in loop variables too: every list read
    costs ops and loop variables per layer in both loops, which weigh most
    when the layer's own ops are small. Reads have a gradient with static
    shapes: TensorFlow's own (`TensorListGetItem`'s) asks the list for its
    length and element shape, and the gradient loop then keeps both per
    layer, two accumulators for each read. A slice of unknown shape (a
    per-layer input with an unknown batch size) is read TensorFlow's way.
    """

    def __init__(self, tensors: Sequence[tf.Tensor], num: int):
        self.num = num
        self.shapes = [t.shape[1:] for t in tensors]
        groups: dict[Any, list[int]] = {}
        for k, t in enumerate(tensors):
            size = self.shapes[k].num_elements()
            fused = size is not None and size <= _FUSED_MAX_ELEMENTS
            groups.setdefault(t.dtype if fused else k, []).append(k)
        self.groups = list(groups.values())
        self.dtypes = [tensors[members[0]].dtype for members in self.groups]
        self.lists = [self._list(tensors, members) for members in self.groups]
        self.count = len(tensors)

    def _list(self, tensors: Sequence[tf.Tensor], members: list[int]) -> tf.Tensor:
        """The TensorList of the slices of the `tensors` in `members`."""
        if len(members) == 1:
            buffer = tensors[members[0]]
        else:
            flat = [tf.reshape(tensors[k], [self.num, -1]) for k in members]
            buffer = tf.concat(flat, axis=1)
        return tf.raw_ops.TensorListFromTensor(
            tensor=buffer, element_shape=_shape_tensor(buffer.shape[1:])
        )

    def read(self, i: tf.Tensor) -> list[tf.Tensor]:
        """Layer `i`'s slices, in the order of the tensors."""
        slices: list[Any] = [None] * self.count
        for members, rows, dtype in zip(self.groups, self.lists, self.dtypes):
            if len(members) == 1:
                k = members[0]
                slices[k] = _read(rows, i, self.num, self.shapes[k], dtype)
                continue
            sizes = [self.shapes[k].num_elements() for k in members]
            row = _read(rows, i, self.num, tf.TensorShape([sum(sizes)]), dtype)
            for k, piece in zip(members, tf.split(row, sizes)):
                shape = self.shapes[k]
                slices[k] = piece if shape.rank == 1 else tf.reshape(piece, shape)
        return slices


def _shape_tensor(shape: tf.TensorShape) -> tf.Tensor:
    """A TensorList element shape: -1 for an unknown rank or dimension."""
    if shape.rank is None:
        return tf.constant(-1)
    return tf.constant([-1 if d is None else d for d in shape.as_list()], tf.int32)


def _read(
    rows: tf.Tensor, i: tf.Tensor, num: int, shape: tf.TensorShape, dtype: tf.DType
) -> tf.Tensor:
    """Element `i` of the TensorList `rows` (`num` elements of `shape`)."""
    if not shape.is_fully_defined():
        value = tf.raw_ops.TensorListGetItem(
            input_handle=rows,
            index=i,
            element_shape=_shape_tensor(shape),
            element_dtype=dtype,
        )
        value.set_shape(shape)
        return value
    return _read_static(rows, i, num, _shape_tensor(shape), dtype)


def _read_static(
    rows: tf.Tensor, i: tf.Tensor, num: int, shape: Any, dtype: tf.DType
) -> tf.Tensor:
    """`_read` of a fully known shape, with a gradient that uses it."""

    @tf.custom_gradient
    def read(rows: tf.Tensor, i: tf.Tensor) -> Any:
        value = tf.raw_ops.TensorListGetItem(
            input_handle=rows, index=i, element_shape=shape, element_dtype=dtype
        )

        def grad(d_value: tf.Tensor) -> tuple[tf.Tensor, None]:
            zeros = tf.raw_ops.TensorListReserve(
                element_shape=shape, num_elements=num, element_dtype=dtype
            )
            d_rows = tf.raw_ops.TensorListSetItem(
                input_handle=zeros, index=i, item=d_value
            )
            return d_rows, None

        return value, grad

    return read(rows, i)


class _Probe(NamedTuple):
    """What building the first layer by calling it found."""

    recorder: _Recorder
    signature: _Signature
    # The module initialisations its call ran, and each module's path.
    calls: list[tuple[Callable[..., Any], tuple[Any, ...], Any]]
    paths: dict[int, tuple[Any, ...]]


class _Builder:
    """Builds the layers of a first call: by calling them, or by replaying
    the module initialisations the probe layer's call ran."""

    def __init__(
        self,
        stack: LayerStack,
        inputs: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        per_layer: dict[str, Any] | None,
    ):
        self.stack = stack
        self.inputs, self.args, self.kwargs = inputs, args, kwargs
        self.per_layer = per_layer
        leaves = tf.nest.flatten((inputs, args, kwargs, per_layer))
        # Called from a trace, this runs outside it (`eager_init`).
        self.scratch = tf.executing_eagerly() and any(
            tf.is_symbolic_tensor(t) for t in leaves
        )

    def call(self, layer: base.Module, recorder: _Recorder) -> Any:
        """Initialises `layer` by calling it, `recorder` making its variables;
        returns its outputs (specs, from a trace)."""
        if self.scratch:
            return self._trace(layer, recorder)
        pl = tf.nest.map_structure(
            lambda t: t[0] if _is_tensor(t) else t, self.per_layer
        )
        with tf.variable_creator_scope(recorder):
            return self.stack._call_layer(
                layer, self.inputs, self.args, self.kwargs, pl
            )

    def _trace(self, layer: base.Module, recorder: _Recorder) -> Any:
        """Traces the layer's call in a function that is never run."""
        x, a, kw = tf.nest.map_structure(_spec, (self.inputs, self.args, self.kwargs))
        pl = tf.nest.map_structure(_slice_spec, self.per_layer)
        f = tf.function(self.stack._call_layer, autograph=False)
        with tf.variable_creator_scope(recorder):
            traced = f.get_concrete_function(layer, x, a, kw, pl)
        for variable, _ in recorder.made:
            if tf.is_symbolic_tensor(variable.initial_tensor_value):
                # Initialised from input values: build the layers in the
                # trace instead (`eager_init` runs the first call's
                # initialisation there after a `ValueError`).
                raise ValueError("initial values depend on the inputs")
        return traced.structured_outputs

    @staticmethod
    def replay(layer: base.Module, recorder: _Recorder, probe: _Probe) -> bool:
        """Whether replaying the probe's initialisations on `layer` built it
        like the probe (the same variables)."""
        with tf.variable_creator_scope(recorder):
            try:
                replayed = _replay(probe.calls, probe.paths, layer)
            except Exception:  # It needs its own call: build it so.
                replayed = False
        expected = [(v.shape, v.dtype) for v, _ in probe.recorder.made]
        return replayed and [(v.shape, v.dtype) for v, _ in recorder.made] == expected


class LayerStack(base.Module):
    """Applies `num_layers` copies of a layer in sequence, stored stacked.

    `stack(x, *args, **kwargs)` computes what this plain loop computes::

        layers = [make_layer() for _ in range(num_layers)]
        for layer in layers:
            x = layer(x, *args, **kwargs)
        return x

    each layer with its own parameters, but every parameter is stored once,
    as a variable with a leading `[num_layers, ...]` axis (layer `i`'s is
    slice `i`), and the layers run as a loop: inside `tf.function` the body
    is traced once, so tracing, graph optimisation and the first result cost
    about what one layer costs, whatever the depth. Outputs and gradients
    are those of the unrolled stack with the same weights.

    The layer's outputs must have the structure, dtypes and shapes of its
    inputs. Extra positional and keyword arguments are passed to every layer
    unchanged (a mask, `is_training`). Arguments that differ per layer go in
    `per_layer`, a dict of keyword arguments whose values have a leading
    `num_layers` axis (e.g. a stack of decoding caches); the layer then
    returns `(outputs, per_layer_outputs)`, and the stack returns the final
    outputs and each layer's `per_layer_outputs` stacked along a new leading
    axis. (Pass `per_layer={}` to collect per-layer outputs without
    per-layer inputs.)

    Layers must create their variables as attributes of Sonnet modules
    (`self.w = tf.Variable(...)`, as every Sonnet module does) and must not
    update them in the call (a `snt.BatchNorm`'s moving averages): the stack
    reads its variables once per call. (Layers whose initial values depend
    on the values of their inputs work, but are then built inside the trace,
    one by one, which costs a forward trace per layer once.) The layer is
    called as is, without AutoGraph conversion (use `tf.cond` and friends
    for tensor-dependent control flow in it).

    Args:
      make_layer: A function without arguments returning a new, unbuilt
        `snt.Module` (e.g. `lambda: snt.nets.TransformerBlock(4, 256)`, or a
        module class whose arguments all have defaults). It
        is called `num_layers + 1` times in all: once by the constructor
        (the template), then on the first call once for each layer and once
        to check the layer before anything is created.
      num_layers: The number of layers, a positive int.
      remat: Whether each layer's activations are recomputed in the backward
        pass instead of being kept (`snt.remat`, one checkpoint per layer):
        less memory for about one more forward pass of compute. Default
        False.
      name: Module name (default `layer_stack`).

    Attributes:
      layer: The template layer; its variables are the stacked ones, of shape
        `[num_layers, ...]` (their checkpoint paths are `layer/...`).

    Shapes:
      inputs -> outputs of the same structure and shapes.

    >>> stack = snt.LayerStack(lambda: snt.Linear(8), num_layers=4)
    >>> x = tf.ones([2, 8])
    >>> y = stack(x)
    >>> y.shape
    TensorShape([2, 8])
    >>> [v.shape.as_list() for v in stack.variables]
    [[4, 8], [4, 8, 8]]

    The same as the loop, with layer `i`'s slices of the stacked variables:

    >>> w, b = stack.layer.w, stack.layer.b
    >>> for i in range(4):
    ...     x = x @ w[i] + b[i]
    >>> float(tf.reduce_max(tf.abs(y - x))) < 1e-5
    True
    """

    _TF_MODULE_IGNORED_PROPERTIES = base.Module._TF_MODULE_IGNORED_PROPERTIES | {
        "_make_layer",
        "_slots",
        "_recorder",
        "_signatures",
    }
    # Set through `vars(self)`: neither tracked nor in checkpoints.
    _make_layer: Callable[[], base.Module]
    _slots: tuple[_Slot, ...]
    _recorder: _Recorder
    _signatures: dict[str, _Signature]

    def __init__(
        self,
        make_layer: Callable[[], base.Module],
        num_layers: int,
        *,
        remat: bool = False,
        name: str | None = None,
    ):
        if not callable(make_layer) or isinstance(make_layer, base.Module):
            raise errors.bad_type(
                "make_layer", f"must be callable and {_NOT_A_MODULE}", make_layer
            )
        num_layers = checks.size("num_layers", num_layers)
        remat = checks.flag("remat", remat)
        super().__init__(name=name)
        self.num_layers = num_layers
        self.remat = remat
        state = vars(self)  # Untracked: not in `variables` or checkpoints.
        state["_make_layer"] = make_layer
        state["_slots"] = ()
        state["_signatures"] = {}
        recorder = _Recorder()
        with tf.variable_creator_scope(recorder):
            self.layer = self._new_layer()
        state["_recorder"] = recorder

    def _new_layer(self) -> base.Module:
        layer = self._make_layer()
        if not isinstance(layer, base.Module):
            raise errors.bad_type("make_layer", _NOT_A_MODULE, layer)
        return layer

    @once.once
    def _initialize(
        self,
        inputs: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        per_layer: dict[str, Any] | None,
    ) -> None:
        """Builds the layers (the template last) and stacks their variables."""
        builder = _Builder(self, inputs, args, kwargs, per_layer)
        probe = self._probe(builder)
        others, replayable = self._build_others(builder, probe)
        self._build_template(builder, probe, replayable)
        made = [self._recorder.made] + [r.made for r in (probe.recorder, *others)]
        self._stack_variables(made[: self.num_layers])
        self._signatures[_signature_key(inputs, args, kwargs, per_layer)] = (
            probe.signature
        )

    def _probe(self, builder: _Builder) -> _Probe:
        """Builds a first layer by calling it; checks what it holds and does."""
        recorder = _Recorder()
        layer = self._new_layer_like(recorder)
        _refuse_keras(layer)
        with eager_init.recording() as calls:
            try:
                outputs = builder.call(layer, recorder)
            except Exception as e:
                error = _updates_error(layer, recorder)
                if error is None:
                    raise
                raise error from e  # E.g. a moving average's raw update op.
        _refuse_keras(layer)
        error = _updates_error(layer, recorder)
        if error is not None:
            raise error
        signature = self._check_outputs(builder.inputs, builder.per_layer, outputs)
        paths = {id(layer): ()}
        for path, module in _flatten_with_paths(layer, tf.Module):
            paths[id(module)] = path
        return _Probe(recorder, signature, calls, paths)

    def _build_others(
        self, builder: _Builder, probe: _Probe
    ) -> tuple[list[_Recorder], bool]:
        """Builds the layers between the probe and the template; returns their
        recorders and whether replaying the probe's initialisations works.

        Whether it works is tried on a first other layer (kept if the stack
        has room for it); a layer it fails for is built by calling it.
        """
        first = _Recorder()
        replayable = builder.replay(self._new_layer_like(first), first, probe)
        recorders = []
        for i in range(self.num_layers - 2):
            if i == 0 and replayable:
                recorders.append(first)
                continue
            recorder = _Recorder()
            if not (
                replayable
                and builder.replay(self._new_layer_like(recorder), recorder, probe)
            ):
                recorder = _Recorder()
                builder.call(self._new_layer_like(recorder), recorder)
            recorders.append(recorder)
        return recorders, replayable

    def _build_template(
        self, builder: _Builder, probe: _Probe, replayable: bool
    ) -> None:
        """Builds the template, last: if a layer fails, it is still unbuilt
        and the next call starts again."""
        if not replayable:
            builder.call(self.layer, self._recorder)
        elif not builder.replay(self.layer, self._recorder, probe):
            raise errors.bad_value(
                "make_layer",
                "must build layers whose initialisation does the same each time",
                self.layer,
            )

    @staticmethod
    def _call_layer(
        layer: Any,
        inputs: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        per_layer: dict[str, Any] | None,
    ) -> Any:
        if per_layer is not None:
            kwargs = {**kwargs, **per_layer}
        return layer(inputs, *args, **kwargs)

    def _new_layer_like(self, recorder: _Recorder) -> base.Module:
        """A new layer, `recorder` making its variables (its constructor's
        too), with the template's precision policies."""
        with tf.variable_creator_scope(recorder):
            layer = self._new_layer()
        precision.copy_policies(self.layer, layer)
        return layer

    def _check_outputs(
        self, inputs: Any, per_layer: dict[str, Any] | None, outputs: Any
    ) -> _Signature:
        """Checks what a layer returned for `inputs`; returns its specs."""
        carry, extra = outputs, None
        if per_layer is not None:
            if not (isinstance(outputs, tuple) and len(outputs) == 2):
                raise errors.bad_value(
                    "make_layer",
                    "must build layers that return `(outputs, per_layer_outputs)` "
                    "when the stack is given `per_layer`",
                    _describe(outputs),
                )
            carry, extra = outputs
            extra = tf.nest.map_structure(_to_spec, extra)
        self._check_carry(inputs, carry, floating_may_change=True)
        return _Signature(tf.nest.map_structure(_to_spec, carry), extra)

    def _stack_variables(
        self, made: Sequence[list[tuple[tensor_variable.TensorVariable, Any]]]
    ) -> None:
        """Replaces the template's variables by stacked real ones."""
        template = made[0]
        for other in made[1:]:
            if [(v.shape, v.dtype) for v, _ in other] != [
                (v.shape, v.dtype) for v, _ in template
            ]:
                raise errors.bad_value(
                    "make_layer",
                    "must build layers with the same variables each time",
                    f"{[v.name for v, _ in template]} and {[v.name for v, _ in other]}",
                )
        paths = {
            id(v): path
            for path, v in _flatten_with_paths(
                self.layer, tensor_variable.TensorVariable
            )
        }
        slots = []
        for k, (proxy, kwargs) in enumerate(template):
            path = paths.get(id(proxy))
            if path is None:
                continue  # Created but not kept.
            owner, attribute = _owner_of(self.layer, path)
            variable = _stacked_variable(proxy, kwargs, [layer[k][0] for layer in made])
            setattr(owner, attribute, variable)
            tf_compat.restore_replacement(owner, attribute, variable)
            proxy.tensor_value = proxy.initial_tensor_value = None
            proxy.on_write = functools.partial(_refuse_update, _path_text(path))
            slots.append(_Slot(owner, attribute, variable, proxy))
        vars(self)["_slots"] = tuple(slots)
        self._recorder.made.clear()

    @contextlib.contextmanager
    def _bound(self, params: Sequence[tf.Tensor]) -> Iterator[None]:
        """The template computes with `params`, one layer's slices."""
        slots = self._slots
        for slot, value in zip(slots, params):
            slot.proxy.tensor_value = value
            object.__setattr__(slot.owner, slot.attribute, slot.proxy)
        try:
            yield
        finally:
            for slot in slots:
                object.__setattr__(slot.owner, slot.attribute, slot.variable)
                slot.proxy.tensor_value = None

    def layer_variables(self) -> list[tuple[str, tf.Variable]]:
        """The stacked variables with their paths in the template.

        Returns:
          `(path, variable)` pairs in `variables` order, the path relative to
          the template layer (`"mlp_in/w"`), each variable of shape
          `[num_layers, ...]`.

        Raises:
          ValueError: if the stack has not been called yet.
        """
        if not self._slots:
            raise errors.bad_value(
                "self", "must be called once before its variables are read", self
            )
        return [
            ("/".join(map(str, path)), v)
            for path, v in _flatten_with_paths(self.layer, tf.Variable)
        ]

    def _check_per_layer(self, per_layer: Any) -> dict[str, Any]:
        if not isinstance(per_layer, dict):
            raise errors.bad_type(
                "per_layer", "must be a dict of keyword arguments or None", per_layer
            )
        converted = {}
        for key, value in per_layer.items():

            def leading(t: Any, key: str = key) -> Any:
                if not isinstance(t, (tf.Tensor, tf.Variable)):
                    t = utils.to_tensor("per_layer", t)
                if t.shape.rank == 0 or t.shape[0] not in (None, self.num_layers):
                    raise errors.bad_value(
                        "per_layer",
                        f"must hold tensors with a leading axis of num_layers="
                        f"{self.num_layers}",
                        f"{key}: {t.dtype.name}{t.shape}",
                    )
                return t

            converted[key] = tf.nest.map_structure(leading, value)
        return converted

    @utils.no_autograph
    def __call__(
        self,
        inputs: Any,
        *args: Any,
        per_layer: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Applies the layers in turn.

        Args:
          inputs: The first layer's inputs (any structure of tensors).
          *args: Passed to every layer.
          per_layer: Optional dict of keyword arguments for the layers whose
            values (structures of tensors) have a leading `num_layers` axis:
            layer `i` gets slice `i`. With it the layers return
            `(outputs, per_layer_outputs)`.
          **kwargs: Passed to every layer.

        Returns:
          The last layer's outputs; with `per_layer`, the pair
          `(outputs, per_layer_outputs)`, the latter stacked over layers.

        Raises:
          ValueError: if a layer's outputs do not match its inputs, or
            `per_layer` values do not have a leading `num_layers` axis.
          TypeError: if `per_layer` is not a dict.
        """
        if per_layer is not None:
            per_layer = self._check_per_layer(per_layer)
        self._initialize(inputs, args, kwargs, per_layer)
        params = [tf.convert_to_tensor(slot.variable) for slot in self._slots]
        if tf.executing_eagerly():
            return self._unrolled(inputs, args, kwargs, per_layer, params)
        return self._looped(inputs, args, kwargs, per_layer, params)

    @base.no_name_scope
    def _layer_step(
        self,
        inputs: Any,
        params: Sequence[tf.Tensor],
        per_layer: dict[str, Any] | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """One layer: the template computing with `params`, its slices."""
        with self._bound(params):
            return self._call_layer(self.layer, inputs, args, kwargs, per_layer)

    def _step(self) -> Callable[..., Any]:
        """`_layer_step`, rematerialised if the stack was asked to."""
        if not self.remat:
            return self._layer_step
        return remat_lib.remat(self._layer_step)

    def _unrolled(
        self,
        inputs: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        per_layer: dict[str, Any] | None,
        params: list[tf.Tensor],
    ) -> Any:
        """Eager calls: a Python loop (each parameter unstacked once)."""
        num = self.num_layers
        step = self._step()
        layer_params = (
            list(zip(*[tf.unstack(p, num=num) for p in params])) or [()] * num
        )
        slices: list[Any] = [None] * num
        if per_layer is not None:
            flat = [tf.unstack(t, num=num) for t in tf.nest.flatten(per_layer)]
            slices = [
                tf.nest.pack_sequence_as(per_layer, [f[i] for f in flat])
                for i in range(num)
            ]
        x = inputs
        outs = []
        for i in range(num):
            y = step(x, layer_params[i], slices[i], args, kwargs)
            if per_layer is not None:
                y, out = y
                outs.append(out)
            # The first layer may return another floating dtype (a precision
            # policy's); the others must keep it.
            self._check_carry(x, y, floating_may_change=i == 0)
            x = y
        if per_layer is None:
            return x
        return x, tf.nest.map_structure(lambda *ts: tf.stack(ts), *outs)

    def _check_carry(
        self, inputs: Any, outputs: Any, floating_may_change: bool = False
    ) -> None:
        if not _same_signature(inputs, outputs, floating_may_change):
            raise errors.bad_value(
                "make_layer",
                "must build layers whose outputs have the structure, dtypes and "
                f"shapes of their inputs {_describe(inputs)}",
                _describe(outputs),
            )

    def _looped(
        self,
        inputs: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        per_layer: dict[str, Any] | None,
        params: list[tf.Tensor],
    ) -> Any:
        """Traced calls: one `tf.while_loop` whose body is traced once."""
        num = self.num_layers
        step = self._step()
        signature = self._signature(inputs, args, kwargs, per_layer)
        # Layers under a precision policy return its compute dtype: the loop
        # carries that (casting the first layer's inputs changes nothing,
        # the layer casts them itself).
        inputs = tf.nest.map_structure(_cast_like, inputs, signature.carry)
        flat_per_layer = [] if per_layer is None else tf.nest.flatten(per_layer)
        stacked = _Stacked([*params, *flat_per_layer], num)
        output_arrays = [
            tf.TensorArray(
                spec.dtype, size=num, element_shape=spec.shape, infer_shape=True
            )
            for spec in (
                [] if per_layer is None else tf.nest.flatten(signature.per_layer)
            )
        ]

        def body(i: tf.Tensor, x: Any, arrays: list[tf.TensorArray]) -> Any:
            slices = stacked.read(i)
            layer_params = slices[: len(params)]
            layer_inputs = None
            if per_layer is not None:
                layer_inputs = tf.nest.pack_sequence_as(
                    per_layer, slices[len(params) :]
                )
            y = step(x, layer_params, layer_inputs, args, kwargs)
            if per_layer is not None:
                y, out = y
                flat = tf.nest.flatten(out)
                if len(flat) != len(arrays):
                    raise errors.bad_value(
                        "make_layer",
                        "must build layers whose per-layer outputs keep the "
                        "structure of the first call's",
                        _describe(out),
                    )
                arrays = [a.write(i, o) for a, o in zip(arrays, flat)]
            self._check_carry(x, y)
            y = tf.nest.map_structure(_with_shape_of, y, x)
            return i + 1, y, arrays

        _, outputs, arrays = tf.while_loop(
            lambda i, x, arrays: i < num,
            body,
            (tf.constant(0), inputs, output_arrays),
            maximum_iterations=num,
        )
        if per_layer is None:
            return outputs
        stacked_outputs = [a.stack() for a in arrays]
        return outputs, tf.nest.pack_sequence_as(signature.per_layer, stacked_outputs)

    def _signature(
        self,
        inputs: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        per_layer: dict[str, Any] | None,
    ) -> _Signature:
        """What one layer returns for these arguments.

        The loop needs it before its body is traced (the carried dtype and
        the per-layer output arrays). The first call's is known from
        building the layers; for others, the template's call is traced once
        in a function that is never run.
        """
        key = _signature_key(inputs, args, kwargs, per_layer)
        known = self._signatures.get(key)
        if known is not None:
            return known
        params = [
            tf.TensorSpec(slot.variable.shape[1:], slot.variable.dtype)
            for slot in self._slots
        ]

        x, a, kw = tf.nest.map_structure(_spec, (inputs, args, kwargs))
        pl = tf.nest.map_structure(_slice_spec, per_layer)
        f = tf.function(self._layer_step, autograph=False)
        outputs = f.get_concrete_function(x, params, pl, a, kw).structured_outputs
        signature = self._check_outputs(inputs, per_layer, outputs)
        self._signatures[key] = signature
        return signature

    # Hooks for features that change the template of a built stack
    # (`snt.lora.add` adds adapters, `snt.int8.quantize` replaces weights):
    # `_new_stacked` makes a new submodule's variables for every layer, and
    # `_restack` binds the loop to the template's variables as they are now.

    def _new_stacked(self, make: Callable[[], _M]) -> _M:
        """`make()`'s module with the variables of every layer, stacked.

        Calls `make` (no arguments; it returns a new `tf.Module`, e.g. an
        adapter for one of the template's layers) `num_layers` times with
        its variables recorded, not created, so each call draws its own
        initial values, in order, as `num_layers` unstacked layers would.
        Returns the first module, each of its variables replaced by one
        real variable of the same name holding every call's value stacked
        (`[num_layers, ...]`). The caller attaches it to the template, then
        calls `_restack`.
        """
        modules: list[_M] = []
        made: list[list[tuple[tensor_variable.TensorVariable, Any]]] = []
        for _ in range(self.num_layers):
            recorder = _Recorder()
            with tf.variable_creator_scope(recorder):
                modules.append(make())
            made.append(recorder.made)
        first = modules[0]
        index = {id(v): k for k, (v, _) in enumerate(made[0])}
        for path, proxy in _flatten_with_paths(first, tensor_variable.TensorVariable):
            k = index[id(proxy)]
            owner, attribute = _owner_of(first, path)
            setattr(
                owner,
                attribute,
                _stacked_variable(proxy, made[0][k][1], [m[k][0] for m in made]),
            )
        return first

    def _restack(self) -> None:
        """Binds the loop to the template's variables as they are now.

        The contract for features that replace or add variables of a built
        stack's template (through attributes of its modules, as layers
        hold variables): afterwards every variable under the template must
        be a real variable with the leading `num_layers` axis (`[num_layers,
        ...]`, e.g. made by `_new_stacked`, or computed from a stacked
        variable). Variables still at their place keep their slot; the
        others get one. Calls traced before must be traced again.

        Raises:
          ValueError: if the stack was never called, or a variable under the
            template lacks the leading axis (or is a layer's slice: called
            from inside the stack's call). Nothing is changed then.
        """
        if not self._slots:
            raise errors.bad_value(
                "self", "must be called once before its layers change", self
            )
        old = {(id(slot.owner), slot.attribute): slot for slot in self._slots}
        kept: dict[tuple[int, str], _Slot] = {}
        added = []
        for path, variable in _flatten_with_paths(self.layer, tf.Variable):
            shape = variable.shape
            if (
                isinstance(variable, tensor_variable.TensorVariable)
                or shape.rank == 0
                or shape[0] != self.num_layers
            ):
                raise errors.bad_value(
                    "self",
                    f"must hold variables with a leading axis of num_layers="
                    f"{self.num_layers} in its layer",
                    f"{'/'.join(map(str, path))} of shape {shape.as_list()}",
                )
            owner, attribute = _owner_of(self.layer, path)
            key = (id(owner), attribute)
            slot = old.get(key)
            if slot is not None and slot.variable is variable:
                kept[key] = slot
                continue
            proxy = tensor_variable.TensorVariable(
                tf.zeros(shape[1:], variable.dtype),
                trainable=variable.trainable,
                name=variable.name,
            )
            proxy.tensor_value = proxy.initial_tensor_value = None
            proxy.on_write = functools.partial(_refuse_update, _path_text(path))
            added.append(_Slot(owner, attribute, variable, proxy))
        # Kept slots keep their order; new ones follow, in `variables` order.
        slots = [slot for key, slot in old.items() if key in kept] + added
        vars(self)["_slots"] = tuple(slots)
        self._signatures.clear()


def _stacked_variable(
    proxy: tensor_variable.TensorVariable,
    kwargs: dict[str, Any],
    layers: Sequence[tensor_variable.TensorVariable],
) -> tf.Variable:
    """A real variable named as `proxy`, holding `layers`' initial values
    stacked."""
    scope, _, name = proxy.name.rpartition(":")[0].rpartition("/")
    extra = {
        key: kwargs[key]
        for key in ("synchronization", "aggregation")
        if kwargs.get(key) is not None
    }
    with tf.name_scope(f"{scope}/" if scope else ""):
        return tf.Variable(
            tf.stack([v.initial_tensor_value for v in layers]),
            name=name,
            trainable=proxy.trainable,
            **extra,
        )


def _signature_key(
    inputs: Any, args: tuple[Any, ...], kwargs: dict[str, Any], per_layer: Any
) -> str:
    specs = tf.nest.map_structure(_spec, (inputs, args, kwargs))
    return _describe((specs, tf.nest.map_structure(_slice_spec, per_layer)))


def _with_shape_of(value: Any, like: Any) -> Any:
    """`value` with the static shape of `like` (a loop variable keeps one)."""
    if isinstance(value, tf.Tensor) and isinstance(like, tf.Tensor):
        value.set_shape(like.shape)
    return value
