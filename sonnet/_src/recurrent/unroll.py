"""`snt.static_unroll` and `snt.dynamic_unroll`: run a core over a sequence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src import errors, precision, utils
from sonnet._src.recurrent import base as rnn_base
from sonnet._src.recurrent import sequence

Core = Callable[[Any, Any], tuple[Any, Any]]


# The helpers below have no tensor-dependent Python control flow: AutoGraph
# calls them as they are (converting them only slowed tracing down).
@utils.no_autograph
def _check_core(core: Any) -> None:
    if not callable(core):
        raise errors.bad_type(
            "core", "must be callable as `core(inputs, prev_state)`", core
        )


@utils.no_autograph
def _check_input_sequence(
    input_sequence: Any, static: bool
) -> tuple[list[tf.Tensor], int | None]:
    """Converts the leaves and finds the (static) number of time steps."""
    leaves = tf.nest.flatten(input_sequence)
    if not leaves:
        raise errors.bad_value(
            "input_sequence", "must contain at least one tensor", input_sequence
        )
    for leaf in leaves:
        # The original read `leaf.shape`: Python numbers, strings and None
        # failed there.
        if not hasattr(leaf, "shape"):
            raise errors.lacks_attribute(
                "input_sequence", "must contain tensors `[T, ...]`", leaf
            )
    tensors = [rnn_base.as_tensor("input_sequence", leaf) for leaf in leaves]
    lengths = set()
    for tensor in tensors:
        if tensor.shape.rank == 0:
            # The original read the time dimension off the shape (IndexError).
            raise errors.invalid_argument_index(
                "input_sequence",
                "must be time-major tensors `[T, ...]` (rank >= 1)",
                tensor,
            )
        if tensor.shape.rank is not None and tensor.shape[0] is not None:
            lengths.add(tensor.shape[0])
    if len(lengths) > 1:
        raise errors.bad_value(
            "input_sequence",
            "tensors must all have the same number of time steps (leading dimension)",
            [tuple(t.shape.as_list()) if t.shape.rank else None for t in tensors],
        )
    steps = lengths.pop() if lengths else None
    if steps == 0:
        raise errors.bad_value(
            "input_sequence", "must have at least one time step", tensors[0]
        )
    if steps is None and static:
        raise errors.bad_value(
            "input_sequence",
            "must have a statically known number of time steps (use "
            "`snt.dynamic_unroll` for sequences of unknown length)",
            tensors[0],
        )
    return tensors, steps


@utils.no_autograph
def _check_sequence_length(
    sequence_length: Any, tensors: list[tf.Tensor]
) -> tf.Tensor | None:
    """`[B]` lengths as an int32/int64 or floating point tensor (a scalar is
    one length for every row, as the original's comparison broadcast it)."""
    if sequence_length is None:
        return None
    lengths = rnn_base.as_tensor("sequence_length", sequence_length)
    dtype = lengths.dtype
    if not (dtype.is_integer or dtype.is_floating):
        raise errors.bad_type(
            "sequence_length",
            "must be an integer (or float) tensor of shape [B]",
            lengths,
        )
    if dtype.is_integer and dtype not in (tf.int32, tf.int64):
        lengths = tf.cast(lengths, tf.int64)
    if lengths.shape.rank not in (0, 1, None):
        raise errors.invalid_argument(
            "sequence_length", "must have shape [B] (rank 1)", lengths
        )
    batched = [t for t in tensors if t.shape.rank is not None and t.shape.rank >= 2]
    for tensor in batched:
        if lengths.shape.rank == 1 and not lengths.shape.is_compatible_with(
            tensor.shape[1:2]
        ):
            raise errors.invalid_argument(
                "sequence_length",
                f"must have one length per batch entry ({tensor.shape[1]}, the "
                "second dimension of `input_sequence`)",
                lengths,
            )
    if lengths.shape.rank == 0:
        batch = batched[0].shape[1] if batched else 1
        if batch is None:
            batch = tf.shape(batched[0])[1]
        lengths = tf.broadcast_to(lengths, tf.reshape(batch, [1]))
    return lengths


@utils.no_autograph
def _loop_options(parallel_iterations: Any, swap_memory: Any) -> tuple[Any, Any]:
    """`tf.while_loop` options of a traced unroll.

    Eagerly the original ran a Python loop, which ignored both; traced, the
    loop checks `parallel_iterations` as `tf.while_loop` does (a `TypeError`
    unless it is >= 1). `swap_memory` is passed on as given.
    """
    if tf.executing_eagerly():
        return 1, False
    try:
        positive = bool(parallel_iterations >= 1)
    except (TypeError, ValueError) as e:
        raise errors.bad_type(
            "parallel_iterations", "must be a positive integer", parallel_iterations
        ) from e
    if not positive:
        raise errors.bad_type(
            "parallel_iterations", "must be a positive integer", parallel_iterations
        )
    return parallel_iterations, swap_memory


@utils.no_autograph
def _check_same_structure(initial_state: Any, state: Any) -> None:
    try:
        tf.nest.assert_same_structure(initial_state, state, check_types=False)
    except (ValueError, TypeError) as e:
        raise errors.bad_value(
            "initial_state",
            "must have the structure of the state `core` returns "
            f"({_describe_structure(state)})",
            initial_state,
        ) from e


@utils.no_autograph
def _describe_structure(structure: Any) -> str:
    return repr(tf.nest.map_structure(lambda _: "*", structure)).replace("'", "")


@utils.no_autograph
def _in_compute_dtype(core: Any, state: Any) -> Any:
    """`state`'s floating leaves in the compute dtype of `core`'s
    `snt.precision` policy (the dtype its steps return), else `state`."""
    policy = getattr(core, "_precision", None)
    if policy is None:
        return state
    dtype = policy.compute_dtype
    return tf.nest.map_structure(
        lambda leaf: (
            precision.cast(leaf, dtype)
            if isinstance(leaf, (tf.Tensor, tf.Variable))
            else leaf
        ),
        state,
    )


def _select(alive: tf.Tensor, new: Any, old: Any) -> Any:
    """Per batch row: `new` where `alive` else `old` (scalars always `new`)."""

    def select(n: Any, o: Any) -> Any:
        if n is None:
            return None
        rank = n.shape.rank
        if rank == 0:
            return n
        if rank is None:
            rank = tf.rank(n)
            keep = tf.reshape(
                alive, tf.concat([[-1], tf.ones([rank - 1], tf.int32)], 0)
            )
        else:
            keep = tf.reshape(alive, [-1] + [1] * (rank - 1))
        return tf.where(keep, n, o)

    # `old` may be e.g. a list where the core returns a namedtuple.
    selected = [
        select(n, o) for n, o in zip(tf.nest.flatten(new), tf.nest.flatten(old))
    ]
    return tf.nest.pack_sequence_as(new, selected)


@utils.no_autograph
def _hold_finished(valid_steps: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
    """`[T, B, ...]` outputs that, past row b's last valid step
    (`valid_steps[b] - 1`), repeat that step's outputs; zeros for a row
    without valid steps. Outputs of rank < 2 (no batch) are kept."""
    rank = outputs.shape.rank
    if rank is not None and rank < 2:
        return outputs
    shape = tf.shape(outputs)
    steps, batch = shape[0], shape[1]
    counts = tf.broadcast_to(valid_steps, [batch])
    source = tf.maximum(tf.minimum(tf.range(steps)[:, None], counts[None, :] - 1), 0)
    rows = tf.broadcast_to(tf.range(batch)[None, :], [steps, batch])
    held = tf.gather_nd(outputs, tf.stack([source, rows], axis=-1))
    if rank is None:
        keep_shape = tf.concat(
            [[1, batch], tf.ones([tf.rank(outputs) - 2], tf.int32)], 0
        )
    else:
        keep_shape = [1, -1] + [1] * (rank - 2)
    keep = tf.reshape(counts > 0, keep_shape)
    return tf.where(keep, held, tf.zeros_like(held))


@utils.no_autograph
def _stack_outputs(
    structure: Any, columns: list[tf.Tensor], alive: tf.Tensor | None
) -> Any:
    if alive is not None:
        valid_steps = tf.reduce_sum(tf.cast(alive, tf.int32), axis=0)
        columns = [_hold_finished(valid_steps, c) for c in columns]
    return tf.nest.pack_sequence_as(structure, columns)


def static_unroll(
    core: Core,
    input_sequence: Any,
    initial_state: Any,
    sequence_length: Any = None,
) -> tuple[Any, Any]:
    """Unrolls `core` over `input_sequence` with a Python loop.

    Every time step adds its own ops to the graph, so under `tf.function` the
    traced graph (and tracing time) grows linearly with `T`, which must be
    known statically. Prefer `snt.dynamic_unroll` for long sequences.

    Args:
      core: An `snt.RNNCore` or any callable `(inputs, prev_state) ->
        (outputs, next_state)`.
      input_sequence: A nest of time-major tensors `[T, B, ...]`, all with
        the same statically known `T >= 1`.
      initial_state: The state before the first step, e.g.
        `core.initial_state(B)`.
      sequence_length: Optional `[B]` tensor of lengths (integer or float;
        a scalar applies to every row). Past a row's length its outputs
        repeat those of its last valid step (zeros for a row of length 0, so
        the last time step holds each row's final outputs) and its state is
        carried through unchanged, so the final state is the state after the
        row's last valid step (the initial state for length 0). Scalar
        output and state leaves are never masked.

    Returns:
      `(output_sequence, final_state)`: the step outputs stacked along a new
      leading time axis, and the state after the last step.

    Raises:
      TypeError: if `core` is not callable or `sequence_length` is not a
        real tensor.
      ValueError: if `input_sequence` is empty, has inconsistent, zero or
        statically unknown `T`, or `initial_state` does not match the state
        structure the core returns. `InvalidArgumentError` (also a
        `ValueError`) if `sequence_length` does not have shape `[B]`.

    >>> core = snt.LSTM(4)
    >>> outputs, state = snt.static_unroll(
    ...     core, tf.ones([6, 2, 3]), core.initial_state(2))
    >>> outputs.shape
    TensorShape([6, 2, 4])
    """
    _check_core(core)
    tensors, steps = _check_input_sequence(input_sequence, static=True)
    assert steps is not None
    lengths = _check_sequence_length(sequence_length, tensors)
    per_step = [tf.unstack(t, num=steps) for t in tensors]
    alive = None if lengths is None else sequence.time_mask(steps, lengths)
    alive_steps = None if alive is None else tf.unstack(alive, num=steps)
    state = _in_compute_dtype(core, initial_state)
    columns: list[list[tf.Tensor]] | None = None
    outputs: Any = None
    for t in range(steps):
        inputs = tf.nest.pack_sequence_as(input_sequence, [s[t] for s in per_step])
        outputs, next_state = core(inputs, state)
        if t == 0:
            _check_same_structure(initial_state, next_state)
        if alive_steps is not None:
            next_state = _select(alive_steps[t], next_state, state)
        state = next_state
        flat = tf.nest.flatten(outputs)
        if columns is None:
            columns = [[] for _ in flat]
        elif len(flat) != len(columns):
            raise errors.bad_value(
                "core",
                "must return outputs of the same structure at every step",
                outputs,
            )
        for column, value in zip(columns, flat):
            column.append(value)
    assert columns is not None
    stacked = [tf.stack(column) for column in columns]
    return _stack_outputs(outputs, stacked, alive), state


# Converted by AutoGraph when traced (so user cores with Python control flow on
# tensors work, even under `tf.function(autograph=False)`); the outer AutoGraph
# pass leaves the wrapper alone.
@utils.no_autograph
@utils.smart_autograph
def dynamic_unroll(
    core: Core,
    input_sequence: Any,
    initial_state: Any,
    sequence_length: Any = None,
    parallel_iterations: int = 1,
    swap_memory: bool = False,
) -> tuple[Any, Any]:
    """Unrolls `core` over `input_sequence` with a `tf.while_loop`.

    The first step runs before the loop (it creates the core's variables and
    fixes the output structure); the others run in a `tf.while_loop`, so the
    graph has one copy of the step whatever `T` is, and `T` may be unknown
    until run time. Eagerly the loop is a Python loop. For `snt.LSTM` and
    `snt.GRU` cores (and `snt.DeepRNN` stacks of them) and a single input
    tensor, the input projection of all steps is one matmul and only the
    recurrence runs in the loop.

    Args:
      core: An `snt.RNNCore` or any callable `(inputs, prev_state) ->
        (outputs, next_state)`.
      input_sequence: A nest of time-major tensors `[T, B, ...]` with the same
        `T >= 1` (static or dynamic).
      initial_state: The state before the first step.
      sequence_length: Optional `[B]` tensor of lengths, masked as by
        `snt.static_unroll` (integer or float, or a scalar for every row):
        past its length a row repeats the outputs of its last valid step
        (zeros if there is none) and keeps its state, so the final state is
        the one after the row's last valid step.
      parallel_iterations: Passed to `tf.while_loop` when traced, which needs
        it >= 1 (default 1: steps of a recurrence depend on each other
        anyway). Ignored eagerly, as by the original.
      swap_memory: Passed to `tf.while_loop` when traced (default False).
        Ignored eagerly, as by the original.

    Returns:
      `(output_sequence, final_state)` as `snt.static_unroll`.

    Raises:
      TypeError: if `core` is not callable, `sequence_length` is not a real
        tensor, or (when traced) `parallel_iterations` is not >= 1.
      ValueError: as `snt.static_unroll`, except that an unknown `T` is fine.

    >>> core = snt.GRU(4)
    >>> outputs, state = snt.dynamic_unroll(
    ...     core, tf.ones([6, 2, 3]), core.initial_state(2))
    >>> outputs.shape, state.shape
    (TensorShape([6, 2, 4]), TensorShape([2, 4]))
    """
    _check_core(core)
    tensors, steps = _check_input_sequence(input_sequence, static=False)
    lengths = _check_sequence_length(sequence_length, tensors)
    parallel_iterations, swap_memory = _loop_options(parallel_iterations, swap_memory)
    if not tf.nest.is_nested(input_sequence) and sequence.can_unroll(
        core, initial_state
    ):
        return sequence.unroll(core, tensors[0], initial_state, lengths)
    num_steps: Any = steps if steps is not None else tf.shape(tensors[0])[0]
    arrays = [
        tf.TensorArray(t.dtype, size=num_steps, element_shape=t.shape[1:]).unstack(t)
        for t in tensors
    ]
    alive = None if lengths is None else sequence.time_mask(num_steps, lengths)
    alive_steps = (
        None
        if alive is None
        else tf.TensorArray(
            tf.bool, size=num_steps, element_shape=alive.shape[1:]
        ).unstack(alive)
    )

    def step(t: Any, state: Any) -> tuple[Any, Any]:
        inputs = tf.nest.pack_sequence_as(input_sequence, [a.read(t) for a in arrays])
        outputs, next_state = core(inputs, state)
        _check_same_structure(initial_state, next_state)
        if alive_steps is not None:
            next_state = _select(alive_steps.read(t), next_state, state)
        return outputs, next_state

    first_outputs, state = step(0, _in_compute_dtype(core, initial_state))
    flat_outputs = tf.nest.flatten(first_outputs)
    output_arrays = [
        tf.TensorArray(o.dtype, size=num_steps, element_shape=o.shape).write(0, o)
        for o in flat_outputs
    ]
    # `None` leaves (e.g. unused dropout masks) cannot be loop variables: they
    # are kept out of the loop and put back into the state at every step.
    flat_state = tf.nest.flatten(state)
    present = [i for i, leaf in enumerate(flat_state) if leaf is not None]

    def rebuild(values: list[Any]) -> Any:
        leaves: list[Any] = [None] * len(flat_state)
        for i, value in zip(present, values):
            leaves[i] = value
        return tf.nest.pack_sequence_as(state, leaves)

    def body(t: Any, values: list[Any], output_arrays: list[Any]) -> Any:
        outputs, next_state = step(t, rebuild(values))
        flat = tf.nest.flatten(outputs)
        if len(flat) != len(output_arrays):
            raise errors.bad_value(
                "core",
                "must return outputs of the same structure at every step",
                outputs,
            )
        next_leaves = tf.nest.flatten(next_state)
        return (
            t + 1,
            [next_leaves[i] for i in present],
            [a.write(t, o) for a, o in zip(output_arrays, flat)],
        )

    _, values, output_arrays = tf.while_loop(
        lambda t, *_: t < num_steps,
        body,
        (1, [flat_state[i] for i in present], output_arrays),
        parallel_iterations=parallel_iterations,
        swap_memory=swap_memory,
        maximum_iterations=num_steps - 1,
    )
    stacked = [a.stack() for a in output_arrays]
    return _stack_outputs(first_outputs, stacked, alive), rebuild(values)
