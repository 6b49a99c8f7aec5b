"""Abstract recurrent bases, `LSTMState` and the argument checks cores share."""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, errors, initializers, precision


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

    @base.no_name_scope
    def _unrolls_sequence(self, initial_state: Any) -> bool:
        """Whether this core's `_unroll_sequence`, if it defines one, can run
        from `initial_state` (decided without creating ops). The protocol of
        `snt.dynamic_unroll`'s whole-sequence path is described in
        `recurrent/sequence.py`."""
        del initial_state
        return True


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


def initializer_or_default(argument: str, value: Any) -> Any:
    """An initializer the original read as `value or default`: any false value
    (None, 0, "") selects the default and comes back as None."""
    if not callable(value):
        try:
            if not value:
                return None
        except (TypeError, ValueError):  # E.g. an array: no truth value.
            pass
    checks.initializer(argument, value)
    return value


def gate_initializers(
    w_i_init: Any, w_h_init: Any, b_init: Any
) -> tuple[Any, Any, Callable[[Any, Any], Any]]:
    """A dense core's `w_i_init`, `w_h_init` and `b_init`, each checked and
    read as the original's `value or default` (`initializer_or_default`):
    None selects the core's default weight initializer, zeros for `b`."""
    w_i_init = initializer_or_default("w_i_init", w_i_init)
    w_h_init = initializer_or_default("w_h_init", w_h_init)
    b_init = initializer_or_default("b_init", b_init)
    return w_i_init, w_h_init, initializers.Zeros() if b_init is None else b_init


def check_variable_dtype(dtype: tf.DType) -> None:
    """Raises unless the core's weights can be created in `dtype`.

    Any dtype is accepted by the constructor (`initial_state` works in it, as
    in the original); creating the weights needs a floating point one.
    """
    if not dtype.is_floating:
        # The original's initializers or ops failed (`ValueError` or
        # `InvalidArgumentError`).
        raise errors.invalid_argument(
            "dtype",
            "must be a floating point dtype to create the core's weights",
            dtype,
        )


def check_forget_bias(value: Any, units: int) -> Any:
    """Validates `forget_bias`: a real number or scalar tensor, or (as the
    original's broadcasting addition allowed) one value per unit, of shape
    `[1]` or `[units]`."""
    if isinstance(value, (tf.Tensor, tf.Variable)):
        if value.shape.rank in (0, None):
            return checks.real("forget_bias", value)
        per_unit = value
        numeric = value.dtype.is_floating or value.dtype.is_integer
    elif isinstance(value, (list, tuple, np.ndarray)):
        try:
            per_unit = np.asarray(value)
        except (TypeError, ValueError) as e:  # Ragged nested lists.
            raise errors.bad_type("forget_bias", "must be a real number", value) from e
        if per_unit.ndim == 0:
            return checks.real("forget_bias", per_unit)
        numeric = per_unit.dtype.kind in "iuf"
    elif value is None or isinstance(value, (str, bytes)):
        # The original's addition failed: a ValueError converting None, an
        # InvalidArgumentError adding a string.
        raise errors.invalid_argument_type(
            "forget_bias", "must be a real number", value
        )
    else:
        return checks.real("forget_bias", value)
    if not numeric:
        raise errors.bad_type("forget_bias", "must be a real number", value)
    shape = tf.TensorShape(per_unit.shape)
    if not (shape.is_compatible_with([1]) or shape.is_compatible_with([units])):
        raise errors.invalid_argument(
            "forget_bias",
            f"must be a number or have shape [1] or [{units}] (one value per unit)",
            value,
        )
    return per_unit


def as_tensor(argument: str, value: Any) -> tf.Tensor:
    """`value` as a tensor (tensors and variables pass through unchanged).

    Arrays and nested lists are converted. Anything else is a `TypeError`
    that is also an `AttributeError`, the original's error when it read the
    value's `.shape` or `.dtype`.
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value  # type: ignore[return-value]
    if value is None or isinstance(value, (str, bytes)):
        raise errors.lacks_attribute(argument, "must be a tensor", value)
    try:
        return tf.convert_to_tensor(value)
    except (TypeError, ValueError) as e:
        raise errors.lacks_attribute(argument, "must be a tensor", value) from e


def check_inputs(
    inputs: Any,
    dtype: tf.DType,
    rank: int,
    argument: str = "inputs",
    exact_rank: bool = True,
    cast: bool = False,
) -> tf.Tensor:
    """Checks a core's `inputs` tensor for `dtype` and static `rank`.

    A dtype mismatch is a `TypeError` (the original's check on the first call)
    that is also an `InvalidArgumentError` (its matmul's failure on later
    calls). `exact_rank=False` accepts rank `rank` or more. With `cast` (a
    core under a `snt.precision` policy, `dtype` its compute dtype) floating
    inputs are cast to `dtype` first.
    """
    inputs = as_tensor(argument, inputs)
    if cast:
        inputs = precision.cast(inputs, dtype)
    if inputs.dtype != dtype:
        raise errors.invalid_argument_type(
            argument, f"must have dtype {dtype.name}, the core's `dtype`", inputs
        )
    rank_now = inputs.shape.rank
    if rank_now is not None and (rank_now != rank if exact_rank else rank_now < rank):
        raise errors.bad_value(
            argument,
            f"must have rank {rank}{'' if exact_rank else ' or more'}",
            tuple(inputs.shape.as_list()),
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
            raise errors.bad_value(
                argument,
                "must have a known last dimension on the first call, which "
                "creates the weights",
                shape,
            )
        return size
    if size is not None and size != expected:
        raise errors.invalid_argument(
            argument,
            f"must have last dimension {expected}, the input size the weights "
            "were created for",
            tuple(shape.as_list()),
        )
    return expected


def _structure_text(spec: Any) -> str:
    def text(leaf: tf.TensorSpec) -> str:
        if leaf.shape.rank is None:
            return "[...]"
        dims = ", ".join("B" if d is None else str(d) for d in leaf.shape.as_list())
        return f"[{dims}]"

    return repr(tf.nest.map_structure(text, spec)).replace("'", "")


def check_state(
    state: Any,
    spec: Any,
    batch: int | None,
    argument: str = "prev_state",
    cast: bool = False,
) -> Any:
    """Checks a state against `spec` (a nest of `tf.TensorSpec`, batch dim None).

    Every mismatch raises `InvalidArgumentError`, the original's error from
    the TensorFlow op that received such a state (also a `ValueError`, and a
    `TypeError` for a wrong dtype).

    Args:
      state: The state given by the user.
      spec: Expected structure; each leaf a `tf.TensorSpec` with shape
        `[None, ...]` (or of unknown rank) and the core's dtype.
      batch: The static batch size of the inputs (or None if unknown).
      argument: Argument name for error messages.
      cast: Whether floating leaves are cast to the dtype of their spec
        first (a core under a `snt.precision` policy, `spec` in its compute
        dtype).

    Returns:
      `state` with its leaves converted to tensors (plain tuples are kept).
    """
    try:
        tf.nest.assert_same_structure(spec, state, check_types=False)
        # A dict would pass for an `LSTMState` but flatten in another order.
        if isinstance(state, Mapping) != isinstance(spec, Mapping):
            raise TypeError("mapping")
    except (ValueError, TypeError) as e:
        raise errors.invalid_argument(
            argument,
            f"must have the structure of the core's state {_structure_text(spec)}",
            state,
        ) from e
    leaves = tf.nest.flatten(state)
    converted = []
    for leaf, leaf_spec in zip(leaves, tf.nest.flatten(spec)):
        try:
            leaf = as_tensor(argument, leaf)
        except TypeError as e:
            raise errors.invalid_argument_type(
                argument, "must contain tensors", leaf
            ) from e
        if cast:
            leaf = precision.cast(leaf, leaf_spec.dtype)
        if leaf.dtype != leaf_spec.dtype:
            raise errors.invalid_argument_type(
                argument,
                f"must have dtype {leaf_spec.dtype.name}, the core's `dtype`",
                leaf,
            )
        expected_shape = leaf_spec.shape
        if batch is not None and expected_shape.rank is not None:
            expected_shape = tf.TensorShape([batch]).concatenate(expected_shape[1:])
        if not leaf.shape.is_compatible_with(expected_shape):
            raise errors.invalid_argument(
                argument,
                f"must have the shapes of the core's state {_structure_text(spec)} "
                "with B the batch size of the inputs",
                leaf.shape,
            )
        converted.append(leaf)
    return tf.nest.pack_sequence_as(state, converted)


def prepare_call(
    core: Any,
    inputs: Any,
    state: Any,
    policy: precision.Policy | None = None,
    sequence: bool = False,
) -> tuple[tf.Tensor, Any]:
    """Checks the arguments of a core with dense inputs, then builds it.

    `inputs` `[B, input_size]` and `state` are a step's `inputs` and
    `prev_state` or, with `sequence`, a whole-sequence call's `input_sequence`
    `[T, B, input_size]` (at least one step) and `initial_state`: the names
    errors give. They are checked, as the original's ops did, against the
    core's `_dtype`, `_state_spec` and `_input_size` (None before the first
    call), then `core._initialize(inputs)` creates its variables. Under a
    `snt.precision` `policy` floating inputs and state leaves are cast to its
    compute dtype, which the state is checked in.

    Returns:
      `(inputs, state)` as tensors (cast under a policy).
    """
    if sequence:
        rank, input_name, state_name = 3, "input_sequence", "initial_state"
    else:
        rank, input_name, state_name = 2, "inputs", "prev_state"
    dtype, spec, cast = core._dtype, core._state_spec, policy is not None
    if policy is not None:
        dtype = policy.compute_dtype
        spec = spec_in(spec, dtype)
    inputs = check_inputs(inputs, dtype, rank, input_name, cast=cast)
    if sequence and inputs.shape[0] == 0:
        raise errors.invalid_argument(
            input_name, "must have at least one time step", inputs
        )
    # The batch dimension: the leading one of a step, the second of a sequence.
    batch = inputs.shape[rank - 2]
    state = check_state(state, spec, batch, state_name, cast=cast)
    check_input_size(inputs, core._input_size, input_name)
    core._initialize(inputs)
    return inputs, state


def cast_variables(policy: precision.Policy | None, *variables: Any) -> tuple[Any, ...]:
    """`variables` cast to the compute dtype of a `snt.precision` `policy`
    (once per call), or as they are without one; None stays None."""
    if policy is None:
        return variables
    dtype = policy.compute_dtype
    return tuple(None if v is None else precision.cast(v, dtype) for v in variables)


def cast_outputs(policy: precision.Policy | None, outputs: Any) -> Any:
    """`outputs` in the output dtype of a `snt.precision` `policy`, if any."""
    return outputs if policy is None else precision.cast_outputs(policy, outputs)


def zero_state(batch_size: Any, spec: Any, dtype: tf.DType) -> Any:
    """A core's initial state: zeros `[batch_size, ...]` in `dtype` for its
    state `spec`, the `tf.TensorSpec` (or `LSTMState` of them) it checks states
    against.

    Args:
      batch_size: An int or a scalar tensor (a float one is truncated).
      spec: The core's state, each leaf shaped `[None, ...]`.
      dtype: The dtype of the state.
    """
    batch_size = checks.tensor_size("batch_size", batch_size)

    def zeros(leaf: tf.TensorSpec) -> tf.Tensor:
        return tf.zeros([batch_size, *leaf.shape[1:]], dtype=dtype)

    # The states of the library's cores: one tensor or an `LSTMState`.
    if isinstance(spec, LSTMState):
        return LSTMState(*map(zeros, spec))
    return zeros(spec)


def cast_floating(structure: Any, dtype: tf.DType) -> Any:
    """`structure` with its floating tensor and variable leaves cast to
    `dtype` (other leaves as they are): the inputs of a composite core under a
    `snt.precision` policy."""

    def cast(leaf: Any) -> Any:
        if isinstance(leaf, (tf.Tensor, tf.Variable)):
            return precision.cast(leaf, dtype)
        return leaf

    return tf.nest.map_structure(cast, structure)


def state_dtype(core: base.Module, dtype: tf.DType) -> tf.DType:
    """The dtype of a core's state: its policy's compute dtype (see
    `snt.precision`), else the core's `dtype`."""
    policy = core._precision
    return dtype if policy is None else policy.compute_dtype


def state_spec(shape: Any, dtype: tf.DType) -> tf.TensorSpec:
    """A `tf.TensorSpec` `[None, *shape]` describing one state leaf."""
    return tf.TensorSpec([None, *shape], dtype)


@functools.lru_cache(maxsize=256)
def spec_in(spec: Any, dtype: tf.DType) -> Any:
    """`spec` (a nest of `tf.TensorSpec`) with every leaf in `dtype`: the
    state of a core under a `snt.precision` policy (its compute dtype)."""
    return tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape, dtype), spec)


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


def add_forget_bias(bias: tf.Tensor, forget_bias: float) -> tf.Tensor:
    """Adds `forget_bias` to the second (forget gate) quarter of `bias`."""
    i, f, g, o = tf.split(bias, 4)
    return tf.concat([i, f + tf.cast(forget_bias, bias.dtype), g, o], axis=0)


def batch_dim(inputs: tf.Tensor) -> int | None:
    """The static batch size (leading dim) of `inputs`, or None."""
    shape = inputs.shape
    return None if shape.rank is None or shape.rank == 0 else shape[0]
