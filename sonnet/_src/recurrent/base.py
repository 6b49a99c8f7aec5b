"""Abstract recurrent bases, `LSTMState` and the argument checks cores share."""

from __future__ import annotations

import abc
import contextlib
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from sonnet._src import base, utils


class LSTMState(NamedTuple):
    """The state of an LSTM: `hidden` (the output) and `cell` (the memory).

    >>> state = snt.LSTMState(hidden=tf.zeros([2, 3]), cell=tf.zeros([2, 4]))
    >>> state.hidden.shape, state.cell.shape
    (TensorShape([2, 3]), TensorShape([2, 4]))
    """

    hidden: Any
    cell: Any


class RNNCore(base.Module):
    """Base class for recurrent cores: one time step `(inputs, prev_state)`.

    A core maps a batch of inputs `[B, ...]` and the previous state (a nest of
    `[B, ...]` tensors) to `(outputs, next_state)`, where `next_state` has the
    structure of `prev_state`. Unroll a core over a time-major sequence with
    `snt.static_unroll` or `snt.dynamic_unroll`.

    Args:
      name: Module name (default: the snake_case class name).

    >>> class Counter(snt.RNNCore):
    ...   def __call__(self, inputs, prev_state):
    ...     return inputs, prev_state + 1
    ...   def initial_state(self, batch_size):
    ...     return tf.zeros([batch_size])
    >>> core = Counter()
    >>> outputs, state = core(tf.ones([2, 3]), core.initial_state(2))
    >>> state.numpy()
    array([1., 1.], dtype=float32)
    """

    @abc.abstractmethod
    def __call__(self, inputs: Any, prev_state: Any) -> tuple[Any, Any]:
        """Performs one step: returns `(outputs, next_state)`."""

    @abc.abstractmethod
    def initial_state(self, batch_size: Any, **kwargs: Any) -> Any:
        """The state at the first time step for a batch of `batch_size`."""


class UnrolledRNN(base.Module):
    """Base class for modules that process a whole time-major sequence at once.

    `__call__(input_sequence, initial_state)` takes `[T, B, ...]` inputs and
    returns `(output_sequence, final_state)` with `[T, B, ...]` outputs.

    Args:
      name: Module name (default: the snake_case class name).

    >>> class Identity(snt.UnrolledRNN):
    ...   def __call__(self, input_sequence, initial_state):
    ...     return input_sequence, initial_state
    ...   def initial_state(self, batch_size):
    ...     return tf.zeros([batch_size, 1])
    >>> rnn = Identity()
    >>> outputs, state = rnn(tf.ones([4, 2, 3]), rnn.initial_state(2))
    >>> outputs.shape, state.shape
    (TensorShape([4, 2, 3]), TensorShape([2, 1]))
    """

    @abc.abstractmethod
    def __call__(self, input_sequence: Any, initial_state: Any) -> tuple[Any, Any]:
        """Processes a sequence: returns `(output_sequence, final_state)`."""

    @abc.abstractmethod
    def initial_state(self, batch_size: Any, **kwargs: Any) -> Any:
        """The state at the first time step for a batch of `batch_size`."""


# ---------------------------------------------------------------------------
# Checks shared by the cores.


def check_dtype_argument(dtype: Any) -> tf.DType:
    """Validates a core's `dtype` constructor argument (a floating dtype)."""
    try:
        result = tf.as_dtype(dtype)
    except (TypeError, ValueError) as e:
        raise utils.bad_type(
            "dtype", "must be a floating point TensorFlow dtype", dtype
        ) from e
    if not result.is_floating:
        raise utils.bad_value("dtype", "must be a floating point dtype", result)
    return result


def check_real(argument: str, value: Any) -> float:
    """Validates a finite real Python/NumPy number (e.g. `forget_bias`)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise utils.bad_type(argument, "must be a real number", value)
    if not np.isfinite(value):
        raise utils.bad_value(argument, "must be finite", value)
    return float(value)


def check_callable(argument: str, value: Any, allow_none: bool = True) -> None:
    """Raises a `TypeError` unless `value` is callable (or None if allowed)."""
    if value is None and allow_none:
        return
    if not callable(value):
        expected = "must be callable" + (" or None" if allow_none else "")
        raise utils.bad_type(argument, expected, value)


def as_tensor(argument: str, value: Any) -> tf.Tensor:
    """`value` as a tensor (tensors and variables pass through unchanged)."""
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value  # type: ignore[return-value]
    if value is None or isinstance(value, (str, bytes)):
        raise utils.bad_type(argument, "must be a tensor", value)
    return utils.to_tensor(argument, value)


def check_inputs(
    inputs: Any, dtype: tf.DType, rank: int, argument: str = "inputs"
) -> tf.Tensor:
    """Checks a core's `inputs` tensor for `dtype` and static `rank`."""
    inputs = as_tensor(argument, inputs)
    if inputs.dtype != dtype:
        raise utils.bad_type(
            argument, f"must have dtype {dtype.name}, the core's `dtype`", inputs
        )
    rank_now = inputs.shape.rank
    if rank_now is not None and rank_now != rank:
        raise utils.bad_value(
            argument, f"must have rank {rank}", tuple(inputs.shape.as_list())
        )
    return inputs


def check_input_size(
    inputs: tf.Tensor, expected: int | None, argument: str = "inputs"
) -> int:
    """Checks the last dimension of `inputs` against the size built with.

    `expected` is None before the first call: then the last dimension must be
    known (it sizes the weights) and is returned for the caller to store.
    """
    shape = inputs.shape
    size = shape[-1] if shape.rank else None
    if expected is None:
        if size is None:
            raise utils.bad_value(
                argument,
                "must have a known last dimension on the first call, which "
                "creates the weights",
                shape,
            )
        return size
    if size is not None and size != expected:
        raise utils.bad_value(
            argument,
            f"must have last dimension {expected}, the input size the weights "
            "were created for",
            tuple(shape.as_list()),
        )
    return expected


def _structure_text(spec: Any) -> str:
    def text(leaf: tf.TensorSpec) -> str:
        dims = ", ".join("B" if d is None else str(d) for d in leaf.shape.as_list())
        return f"[{dims}]"

    return repr(tf.nest.map_structure(text, spec)).replace("'", "")


def check_state(
    state: Any,
    spec: Any,
    batch: int | None,
    argument: str = "prev_state",
) -> Any:
    """Checks a state against `spec` (a nest of `tf.TensorSpec`, batch dim None).

    Args:
      state: The state given by the user.
      spec: Expected structure; each leaf a `tf.TensorSpec` with shape
        `[None, ...]` and the core's dtype.
      batch: The static batch size of the inputs (or None if unknown).
      argument: Argument name for error messages.

    Returns:
      `state` with its leaves converted to tensors (plain tuples are kept).
    """
    try:
        tf.nest.assert_same_structure(spec, state, check_types=False)
    except (ValueError, TypeError) as e:
        raise utils.bad_value(
            argument,
            f"must have the structure of the core's state {_structure_text(spec)}",
            state,
        ) from e
    leaves = tf.nest.flatten(state)
    converted = []
    for leaf, leaf_spec in zip(leaves, tf.nest.flatten(spec)):
        leaf = as_tensor(argument, leaf)
        if leaf.dtype != leaf_spec.dtype:
            raise utils.bad_type(
                argument,
                f"must have dtype {leaf_spec.dtype.name}, the core's `dtype`",
                leaf,
            )
        expected_shape = leaf_spec.shape
        if batch is not None:
            expected_shape = tf.TensorShape([batch]).concatenate(expected_shape[1:])
        if not leaf.shape.is_compatible_with(expected_shape):
            raise utils.bad_value(
                argument,
                f"must have the shapes of the core's state {_structure_text(spec)} "
                "with B the batch size of the inputs",
                leaf.shape,
            )
        converted.append(leaf)
    return tf.nest.pack_sequence_as(state, converted)


def check_batch_size(batch_size: Any) -> Any:
    """Validates `initial_state`'s `batch_size`: an int or scalar int tensor."""
    if isinstance(batch_size, (tf.Tensor, tf.Variable)):
        if not batch_size.dtype.is_integer:
            raise utils.bad_type(
                "batch_size",
                "must be an integer or a scalar integer tensor",
                batch_size,
            )
        if batch_size.shape.rank not in (0, None):
            raise utils.bad_value(
                "batch_size", "must be a scalar", tuple(batch_size.shape.as_list())
            )
        static = tf.get_static_value(batch_size)
        if static is not None:
            return check_batch_size(int(static))
        return tf.reshape(tf.cast(batch_size, tf.int32), [])
    if isinstance(batch_size, (bool, np.bool_)) or not isinstance(
        batch_size, (int, np.integer)
    ):
        raise utils.bad_type(
            "batch_size", "must be an integer or a scalar integer tensor", batch_size
        )
    if batch_size < 0:
        raise utils.bad_value(
            "batch_size", "must be a non-negative integer", batch_size
        )
    return int(batch_size)


def zeros(batch_size: Any, shape: Any, dtype: tf.DType) -> tf.Tensor:
    """A `[batch_size, *shape]` tensor of zeros (`batch_size` already checked)."""
    return tf.zeros([batch_size, *shape], dtype=dtype)


def state_spec(shape: Any, dtype: tf.DType) -> tf.TensorSpec:
    """A `tf.TensorSpec` `[None, *shape]` describing one state leaf."""
    return tf.TensorSpec([None, *shape], dtype)


def lstm_update(
    gates: tf.Tensor, prev_cell: tf.Tensor, axis: int = -1
) -> tuple[tf.Tensor, tf.Tensor]:
    """The LSTM cell update from pre-activation gates laid out `[i | f | g | o]`.

    Returns `(hidden, cell)` with `cell = sigmoid(f) * prev_cell +
    sigmoid(i) * tanh(g)` and `hidden = sigmoid(o) * tanh(cell)`.
    """
    i, f, g, o = tf.split(gates, 4, axis=axis)
    cell = tf.sigmoid(f) * prev_cell + tf.sigmoid(i) * tf.tanh(g)
    hidden = tf.sigmoid(o) * tf.tanh(cell)
    return hidden, cell


def check_sequence_and_state(
    core: Any, input_sequence: Any, initial_state: Any
) -> tuple[tf.Tensor, Any]:
    """Checks a `[T, B, input_size]` sequence and an initial state for a core's
    whole-sequence unroll (against its `_dtype`, `_state_spec`, `_input_size`).

    Errors name `input_sequence` and `initial_state`, the unroll's arguments.
    """
    input_sequence = check_inputs(input_sequence, core._dtype, 3, "input_sequence")  # noqa: SLF001
    initial_state = check_state(
        initial_state,
        core._state_spec,  # noqa: SLF001
        input_sequence.shape[1],
        "initial_state",
    )
    check_input_size(input_sequence, core._input_size, "input_sequence")  # noqa: SLF001
    return input_sequence, initial_state


def add_forget_bias(bias: tf.Tensor, forget_bias: float) -> tf.Tensor:
    """Adds `forget_bias` to the second (forget gate) quarter of `bias`.

    An eager `bias` (e.g. computed eagerly inside a trace by `snt.once`)
    gives an eager result, so the variable can be created outside the graph
    like the others: a mix of variables created inside and outside a traced
    function made TensorFlow fall back to conditional initialization, which
    intermittently broke the gradient of a `dynamic_unroll` loop.
    """
    context = (
        tf.init_scope()
        if isinstance(bias, tf.Tensor) and not tf.is_symbolic_tensor(bias)
        else contextlib.nullcontext()
    )
    with context:
        i, f, g, o = tf.split(bias, 4)
        return tf.concat([i, f + tf.cast(forget_bias, bias.dtype), g, o], axis=0)


def batch_dim(inputs: tf.Tensor) -> int | None:
    """The static batch size (leading dim) of `inputs`, or None."""
    shape = inputs.shape
    return None if shape.rank is None or shape.rank == 0 else shape[0]
