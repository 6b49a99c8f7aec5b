"""`snt.remat`: recompute a call's forward pass in its backward pass.

Rematerialisation (gradient checkpointing, Chen et al. 2016,
arXiv:1604.06174) trades compute for memory: the backward pass of a
rematerialised call keeps only the call's inputs, and computes the call once
more, under its own gradient tape, when the gradient reaches it. The
activations inside the call are then alive only while that call's gradient
is computed, instead of from the forward pass to the end of the backward
pass.

The engine is TensorFlow's `tf.recompute_grad` (a `tf.custom_gradient`):
in graphs it makes the recomputation depend on the incoming gradient through
a data dependency, so neither TensorFlow's graph optimiser (Grappler's common
subexpression elimination) nor XLA can merge it back into the forward pass
(`bench/README.md`, `remat_memory`, measures the saving). This module adds
what a Sonnet call needs around it: nested inputs and outputs, keyword
arguments and Python values (passed to the call as they are, not as
tensors), and a clean error where recomputing would not reproduce the call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import tensorflow as tf

from sonnet._src import errors, tf_compat, utils

__all__ = ["remat"]

T = TypeVar("T")

_COMPOSITES = (tf.RaggedTensor, tf.SparseTensor, tf.IndexedSlices)

# Stateful random ops draw new numbers when they run again (stateless ones,
# "StatelessRandomUniformV2", ..., repeat themselves for the same seed):
# `tf.random.uniform`, `tf.nn.dropout`, ... ("RandomUniform", ...), and
# `tf.random.Generator` ("StatefulUniform", ..., "RngReadAndSkip").
_RANDOM_OP_PREFIXES = (
    "Random",
    "StatefulRandom",
    "StatefulStandardNormal",
    "StatefulTruncatedNormal",
    "StatefulUniform",
)
_RANDOM_OP_TYPES = frozenset(
    {
        "Multinomial",
        "ParameterizedTruncatedNormal",
        "RngReadAndSkip",
        "RngSkip",
        "TruncatedNormal",
    }
)


def remat(f: Callable[..., T]) -> Callable[..., T]:
    """Returns `f`, but recomputed in the backward pass instead of stored.

    Calling `snt.remat(f)(*args, **kwargs)` returns what `f(*args, **kwargs)`
    returns, with the same gradients (with respect to the inputs and to
    every variable `f` reads), but a gradient tape keeps none of `f`'s
    intermediate activations: the backward pass runs `f` once more from its
    inputs when the gradient reaches it (rematerialisation, or gradient
    checkpointing: Chen et al. 2016, arXiv:1604.06174). Wrapping each layer
    of a deep model keeps one tensor per layer (its input) instead of all of
    its activations, for about one more forward pass of compute: a train
    step takes about 1.3 x as long.

    `f` may be a module, a bound method or a function; a module may create
    its variables in its first call through the returned function. It works
    in eager mode, in `tf.function` (with or without AutoGraph, and with
    `jit_compile=True`), under a distribution strategy
    (`snt.distribute.Replicator`) and with `snt.precision` policies. For
    deep models, `snt.LayerStack(..., remat=True)` and
    `snt.nets.Transformer(..., remat=True)` rematerialise each layer.

    Arguments may be nested in lists, tuples, dicts and namedtuples.
    Floating point tensors among them are the differentiable inputs; every
    other value (Python bools such as `is_training`, integer tensors, NumPy
    arrays, variables) is passed to `f` as it is in both computations.
    Outputs may be nested likewise; only floating point tensors among them
    carry gradients.

    The recomputation must reproduce the call:

    * Random ops draw new numbers when run again (dropout while training):
      inside a `tf.function` the gradient raises a `ValueError` if `f` uses
      stateful random ops; in eager mode this cannot be detected, and the
      gradient would belong to other random numbers. Use stateless random
      ops with a seed given as an argument (e.g.
      `tf.nn.experimental.stateless_dropout`), or leave the random part out.
    * Side effects happen again: variable updates inside `f` (a batch norm's
      moving averages while training) are applied twice per step.

    Inside the body of a `tf.while_loop`, `f` must receive the values of
    the variables it uses as arguments rather than read the variables
    itself: TensorFlow cannot build the gradient of a loop whose backward
    body reads a variable anew (a `ValueError` about
    `internal_capture_to_output`). `snt.LayerStack` passes them so.
    Higher-order gradients through a rematerialised call are not supported
    (TensorFlow's `tf.recompute_grad` raises `NotImplementedError`).

    Args:
      f: The callable to rematerialise.

    Returns:
      A function with `f`'s signature (`__signature__`), name and docstring.

    Raises:
      TypeError: if `f` is not callable; on a call, if a `tf.RaggedTensor`,
        `tf.SparseTensor` or `tf.IndexedSlices` of floating point values is
        among the arguments or outputs (pass its component tensors instead).

    >>> mlp = snt.nets.MLP([64, 64, 1])
    >>> layer = snt.remat(mlp)
    >>> x = tf.ones([8, 16])
    >>> with tf.GradientTape() as tape:
    ...   loss = tf.reduce_sum(layer(x))  # Creates the variables too.
    >>> grads = tape.gradient(loss, mlp.trainable_variables)
    >>> len(grads), all(g is not None for g in grads)
    (6, True)

    The same gradients as the plain call:

    >>> with tf.GradientTape() as tape:
    ...   plain_loss = tf.reduce_sum(mlp(x))
    >>> plain = tape.gradient(plain_loss, mlp.trainable_variables)
    >>> all(bool(tf.reduce_all(tf.abs(a - b) < 1e-6)) for a, b in zip(grads, plain))
    True
    """
    if not callable(f):
        raise errors.bad_type(
            "f", "must be callable (a module, a method or a function)", f
        )

    def rematerialised(*args: Any, **kwargs: Any) -> Any:
        # Called from AutoGraph-converted code, this function is converted,
        # and with it the call of `f` in the lambda, as a plain call of `f`
        # would be; the machinery in `_call` is not.
        return _call(lambda *a, **k: f(*a, **k), args, kwargs)

    # Not `functools.wraps`: its `__dict__` update would copy a module's
    # attributes onto the function, and AutoGraph, which finds source code
    # through `__wrapped__`, cannot convert this function (and logs a
    # warning) when `__wrapped__` is a module.
    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        if hasattr(f, attribute):
            setattr(rematerialised, attribute, getattr(f, attribute))
    try:
        rematerialised.__signature__ = inspect.signature(f)
    except (TypeError, ValueError):  # Callables without one (some builtins).
        pass
    return rematerialised


def _is_differentiable(value: Any) -> bool:
    """Whether `value` is a tensor that can carry a gradient."""
    if isinstance(value, _COMPOSITES) and (
        value.dtype.is_floating or value.dtype.is_complex
    ):
        raise errors.bad_type(
            "f",
            "must take and return gradient-carrying values as tensors; pass the "
            "component tensors of a floating point composite tensor",
            value,
        )
    return isinstance(value, tf.Tensor) and (
        value.dtype.is_floating or value.dtype.is_complex
    )


@utils.no_autograph
def _call(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    structure = (args, kwargs)
    leaves = tf.nest.flatten(structure)
    positions = [i for i, leaf in enumerate(leaves) if _is_differentiable(leaf)]
    # The forward call's outputs (every leaf), and which leaves are
    # differentiable: only those go through the custom gradient.
    forward: dict[str, Any] = {}

    def call(*tensors: tf.Tensor) -> list[tf.Tensor]:
        new_leaves = list(leaves)
        for position, tensor in zip(positions, tensors, strict=True):
            new_leaves[position] = tensor
        call_args, call_kwargs = tf.nest.pack_sequence_as(structure, new_leaves)
        if forward:  # The recomputation, in the backward pass.
            flat = tf.nest.flatten(_recompute(f, call_args, call_kwargs))
            return [flat[i] for i in forward["differentiable"]]
        outputs = f(*call_args, **call_kwargs)
        flat = tf.nest.flatten(outputs)
        differentiable = [i for i, leaf in enumerate(flat) if _is_differentiable(leaf)]
        forward.update(outputs=outputs, flat=flat, differentiable=differentiable)
        return [flat[i] for i in differentiable]

    differentiable_outputs = tf.recompute_grad(call)(*(leaves[i] for i in positions))
    flat = list(forward["flat"])
    for position, tensor in zip(
        forward["differentiable"], differentiable_outputs, strict=True
    ):
        flat[position] = tensor
    return tf.nest.pack_sequence_as(forward["outputs"], flat)


def _recompute(
    f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """`f(*args, **kwargs)` again; in a graph, raises if it runs stateful
    random ops (their numbers would differ from the forward pass's).

    Checked here rather than in the forward pass, whose graph may also hold
    the initializers of variables created by the first call.
    """
    if tf.executing_eagerly():
        return f(*args, **kwargs)
    graph = tf.compat.v1.get_default_graph()
    start = len(graph.get_operations())
    outputs = f(*args, **kwargs)
    random_op = _random_op(graph.get_operations()[start:])
    if random_op is not None:
        raise errors.bad_value(
            "f",
            "must compute the same values when called again to be rematerialised, "
            "but it runs stateful random ops, which draw new numbers (e.g. "
            "dropout while training); use stateless random ops with a seed passed "
            "as an argument, or leave them out of `snt.remat`",
            random_op,
        )
    return outputs


def _random_op(operations: list[tf.Operation]) -> str | None:
    """The type of a stateful random op among `operations` or the functions
    they call (`tf.cond` branches, loop bodies, `tf.function`s), or None."""
    pending = list(operations)
    seen: set[int] = set()
    while pending:
        op = pending.pop()
        if op.type.startswith(_RANDOM_OP_PREFIXES) or op.type in _RANDOM_OP_TYPES:
            return op.type
        for graphs in tf_compat.called_graphs(op).values():
            for graph in graphs:
                if id(graph) not in seen:
                    seen.add(id(graph))
                    pending.extend(graph.get_operations())
    return None
