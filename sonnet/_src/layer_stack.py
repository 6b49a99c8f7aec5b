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
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

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

_NOT_A_MODULE = "must return an `snt.Module` each time it is called"


class _Slot(NamedTuple):
    """Where the template holds one stacked variable."""

    owner: Any  # The object whose attribute holds it.
    attribute: str
    variable: tf.Variable  # The real, stacked variable.
    proxy: tensor_variable.TensorVariable  # Holds one layer's slice in calls.


class _Recorder:
    """Variable creator that makes `TensorVariable`s and records them."""

    def __init__(self) -> None:
        self.made: list[tuple[tensor_variable.TensorVariable, dict[str, Any]]] = []

    def __call__(self, next_creator: Any, **kwargs: Any) -> Any:
        variable = tensor_variable._create(next_creator, **kwargs)
        # Restore-on-create waits for the stacked variable (`tf_compat`).
        variable._snt_restore_later = True  # pyright: ignore[reportAttributeAccessIssue]
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


def _flatten_with_paths(module: Any, cls: type) -> list[tuple[tuple[Any, ...], Any]]:
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


class LayerStack(base.Module):
    """Applies `num_layers` copies of a layer in sequence, stored stacked.

    `stack(x)` is `layer_{n-1}(... layer_1(layer_0(x)))` for `num_layers`
    layers built by `make_layer()`, each with its own parameters, but every
    parameter is stored once, as a variable with a leading `[num_layers,
    ...]` axis, and the layers run as a loop: inside `tf.function` the body
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
    >>> stack(tf.ones([2, 8])).shape
    TensorShape([2, 8])
    >>> [v.shape.as_list() for v in stack.variables]
    [[4, 8], [4, 8, 8]]
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
        leaves = tf.nest.flatten((inputs, args, kwargs, per_layer))
        scratch = tf.executing_eagerly() and any(
            tf.is_symbolic_tensor(t) for t in leaves
        )

        def build(layer: base.Module, recorder: _Recorder) -> Any:
            """Initialises `layer` with `recorder` making its variables."""
            if scratch:
                # Called from a trace, run outside it: trace the layer's call
                # in a function that is never run.
                x, a, kw = tf.nest.map_structure(_spec, (inputs, args, kwargs))
                pl = tf.nest.map_structure(_slice_spec, per_layer)
                f = tf.function(self._call_layer, autograph=False)
                with tf.variable_creator_scope(recorder):
                    traced = f.get_concrete_function(layer, x, a, kw, pl)
                for variable, _ in recorder.made:
                    if tf.is_symbolic_tensor(variable.initial_tensor_value):
                        # Initialised from input values: build the layers
                        # in the trace instead (`eager_init` runs this method
                        # there after a `ValueError`).
                        raise ValueError("initial values depend on the inputs")
                return traced.structured_outputs
            pl = tf.nest.map_structure(
                lambda t: t[0] if _is_tensor(t) else t, per_layer
            )
            with tf.variable_creator_scope(recorder):
                return self._call_layer(layer, inputs, args, kwargs, pl)

        # A first layer checks what the layer returns before anything else;
        # the initialisations its call ran are then run on the other layers
        # directly (no call to trace), as long as that gives them the same
        # variables.
        probe = self._new_layer_like()
        probe_recorder = _Recorder()
        with eager_init.recording() as calls:
            outputs = build(probe, probe_recorder)
        signature = self._check_outputs(inputs, per_layer, outputs)
        key = _signature_key(inputs, args, kwargs, per_layer)
        expected = [(v.shape, v.dtype) for v, _ in probe_recorder.made]
        paths = {id(probe): ()}
        for path, module in _flatten_with_paths(probe, tf.Module):
            paths[id(module)] = path

        def initialised(layer: base.Module, recorder: _Recorder) -> bool:
            """Whether replaying `calls` built `layer` like the probe."""
            with tf.variable_creator_scope(recorder):
                try:
                    replayed = _replay(calls, paths, layer)
                except Exception:  # It needs its own call: build it so.
                    replayed = False
            return replayed and [(v.shape, v.dtype) for v, _ in recorder.made] == (
                expected
            )

        # Whether replaying works is tried on a first other layer (kept if
        # the stack has room for it).
        first = _Recorder()
        replayable = initialised(self._new_layer_like(), first)
        recorders = [probe_recorder]
        for i in range(self.num_layers - 2):
            recorder = first if i == 0 and replayable else _Recorder()
            if recorder is not first and not (
                replayable and initialised(self._new_layer_like(), recorder)
            ):
                recorder = _Recorder()
                build(self._new_layer_like(), recorder)
            recorders.append(recorder)
        # The template last: if a layer fails, it is still unbuilt and the
        # next call starts again.
        if not replayable:
            build(self.layer, self._recorder)
        elif not initialised(self.layer, self._recorder):
            raise errors.bad_value(
                "make_layer",
                "must build layers whose initialisation does the same each time",
                self.layer,
            )
        made = [self._recorder.made] + [r.made for r in recorders]
        self._stack_variables(made[: self.num_layers])
        self._signatures[key] = signature

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

    def _new_layer_like(self) -> base.Module:
        """A new layer with the template's precision policies."""
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
            values = [layer[k][0].initial_tensor_value for layer in made]
            scope, _, name = proxy.name.rpartition(":")[0].rpartition("/")
            extra = {
                key: kwargs[key]
                for key in ("synchronization", "aggregation")
                if kwargs.get(key) is not None
            }
            with tf.name_scope(f"{scope}/" if scope else ""):
                variable = tf.Variable(
                    tf.stack(values), name=name, trainable=proxy.trainable, **extra
                )
            setattr(owner, attribute, variable)
            tf_compat.restore_replacement(owner, attribute, variable)
            proxy.tensor_value = proxy.initial_tensor_value = None
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

        def unstacked(t: tf.Tensor) -> tf.TensorArray:
            array = tf.TensorArray(
                t.dtype, size=num, element_shape=t.shape[1:], infer_shape=True
            )
            return array.unstack(t)

        param_arrays = [unstacked(p) for p in params]
        signature = self._signature(inputs, args, kwargs, per_layer)
        # Layers under a precision policy return its compute dtype: the loop
        # carries that (casting the first layer's inputs changes nothing,
        # the layer casts them itself).
        inputs = tf.nest.map_structure(_cast_like, inputs, signature.carry)
        input_arrays: list[tf.TensorArray] = []
        output_arrays: list[tf.TensorArray] = []
        if per_layer is not None:
            input_arrays = [unstacked(t) for t in tf.nest.flatten(per_layer)]
            output_arrays = [
                tf.TensorArray(
                    spec.dtype, size=num, element_shape=spec.shape, infer_shape=True
                )
                for spec in tf.nest.flatten(signature.per_layer)
            ]

        def body(i: tf.Tensor, x: Any, arrays: list[tf.TensorArray]) -> Any:
            layer_params = [a.read(i) for a in param_arrays]
            layer_inputs = None
            if per_layer is not None:
                layer_inputs = tf.nest.pack_sequence_as(
                    per_layer, [a.read(i) for a in input_arrays]
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
        stacked = [a.stack() for a in arrays]
        return outputs, tf.nest.pack_sequence_as(signature.per_layer, stacked)

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
