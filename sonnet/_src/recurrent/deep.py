"""`snt.DeepRNN` and the skip/residual-connection factories: stacked cores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, errors, utils
from sonnet._src.recurrent import base as rnn_base
from sonnet._src.recurrent import sequence


def _layer_list(layers: Any, expected: str) -> Any:
    """A sequence of layers as given (it may be a tracked list of modules);
    another iterable read once into a list."""
    if isinstance(layers, Sequence) and not isinstance(layers, (str, bytes)):
        return layers
    try:
        return list(layers)
    except TypeError as e:
        raise errors.bad_type("layers", expected, layers) from e


def _check_layers(layers: Any) -> Any:
    """`layers` of a `DeepRNN`: RNN cores and callables (None: no layers, as
    in the original)."""
    if layers is None:
        return []
    expected = "must be a sequence of RNN cores and callables"
    if isinstance(layers, (str, bytes)):
        raise errors.bad_type("layers", expected, layers)
    layers = _layer_list(layers, expected)
    for layer in layers:
        if not callable(layer):
            raise errors.bad_type(
                "layers", "must contain only RNN cores and callables", layer
            )
    return layers


def _leafwise(fn: Callable[..., tf.Tensor], *structures: Any) -> Any:
    """`fn` over matching leaves; a structure mismatch blames `inputs`."""
    for other in structures[1:]:
        try:
            tf.nest.assert_same_structure(structures[0], other, check_types=False)
        except (ValueError, TypeError) as e:
            raise errors.bad_value(
                "inputs",
                "must have the nested structure of the layer outputs it is "
                f"combined with ({e})",
                structures[0],
            ) from e
    return tf.nest.map_structure(fn, *structures)


def _concat(*values: Any) -> tf.Tensor:
    try:
        return tf.concat(values, axis=-1)
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as e:
        raise errors.invalid_argument(
            "inputs",
            "could not be concatenated (last axis) with the layer outputs for "
            f"a skip connection ({e})",
            values[0],
        ) from e


def _add(inputs: Any, outputs: Any) -> tf.Tensor:
    # Broadcasting, as the original's `inputs + outputs`.
    inputs = rnn_base.as_tensor("inputs", inputs)
    try:
        tf.broadcast_static_shape(inputs.shape, outputs.shape)
    except ValueError as e:
        raise errors.invalid_argument(
            "inputs",
            f"must broadcast against the wrapped core's outputs {outputs.shape} "
            "for a residual connection",
            inputs.shape,
        ) from e
    return inputs + outputs


class _LegacyDeepRNN(rnn_base.RNNCore):
    """Stacks layers (cores or plain callables), optionally with skip connections.

    Args:
      layers: The layers, applied in order; `snt.RNNCore`s consume and
        produce one entry of the state each, other callables map the current
        value. A sequence is kept as given (not copied), another iterable
        is read into a list, None means no layers.
      skip_connections: If True, every layer after the first sees the
        original inputs concatenated (last axis, leaf-wise) with the previous
        layer's outputs.
      concat_final_output_if_skip: With skip connections, output the
        concatenation of every layer's outputs instead of the last ones.
      name: Module name.
    """

    def __init__(
        self,
        layers: Sequence[Any],
        skip_connections: bool,
        concat_final_output_if_skip: bool = True,
        name: str | None = None,
    ):
        super().__init__(name)
        layers = _check_layers(layers)
        self._layers = layers
        self._skip_connections = checks.flag("skip_connections", skip_connections)
        self._concat_final_output_if_skip = checks.flag(
            "concat_final_output_if_skip", concat_final_output_if_skip
        )
        self._num_cores = sum(isinstance(x, rnn_base.RNNCore) for x in layers)

    def __call__(self, inputs: Any, prev_state: Sequence[Any]) -> tuple[Any, Any]:
        """One step through every layer.

        Args:
          inputs: The inputs of the first layer.
          prev_state: A tuple with one state per `snt.RNNCore` layer, in order.

        Returns:
          `(outputs, next_state)`: the last layer's outputs (or, with skip
          connections and `concat_final_output_if_skip`, all layers' outputs
          concatenated) and a tuple of the cores' next states.

        Raises:
          TypeError: if `prev_state` cannot be indexed (and there are cores).
          ValueError: if `prev_state` has fewer entries than there are cores,
            or there are no layers to concatenate with skip connections.
        """
        if self._num_cores:
            # The original indexed `prev_state`: extra entries are ignored.
            if not hasattr(type(prev_state), "__getitem__"):
                raise errors.bad_type(
                    "prev_state",
                    f"must be a tuple of {self._num_cores} states, one per RNN "
                    "core in `layers`",
                    prev_state,
                )
            try:
                entries = len(prev_state)
            except TypeError:  # E.g. a symbolic tensor of unknown length.
                entries = self._num_cores
            if entries < self._num_cores:
                raise errors.bad_value(
                    "prev_state",
                    f"must be a tuple of {self._num_cores} states, one per RNN "
                    "core in `layers`",
                    prev_state,
                )
        policy = self._precision
        if policy is not None:
            # The skip connections concatenate the inputs with layer outputs
            # in the compute dtype; each layer casts its own inputs anyway.
            inputs = rnn_base.cast_floating(inputs, policy.compute_dtype)
        current = inputs
        outputs = []
        next_states = []
        core_index = 0
        for index, layer in enumerate(self._layers):
            if self._skip_connections and index > 0:
                current = _leafwise(_concat, inputs, current)
            if isinstance(layer, rnn_base.RNNCore):
                current, state = layer(current, prev_state[core_index])
                next_states.append(state)
                core_index += 1
            else:
                current = layer(current)
            if policy is not None and policy.output_dtype is not None:
                # Concatenated and fed on in the compute dtype.
                current = rnn_base.cast_floating(current, policy.compute_dtype)
            outputs.append(current)
        if self._skip_connections and self._concat_final_output_if_skip:
            if not outputs:
                raise errors.bad_value(
                    "layers",
                    "must not be empty to concatenate the layers' outputs "
                    "(`concat_final_output`)",
                    self._layers,
                )
            current = _leafwise(_concat, *outputs)
        if policy is not None and policy.output_dtype is not None:
            current = rnn_base.cast_floating(current, policy.output_dtype)
        return current, tuple(next_states)

    @base.no_name_scope
    def _unrolls_sequence(self, initial_state: Any) -> bool:
        """Whether the stack can run layer by layer: no skip connections, and
        every layer a core that can unroll its entry of `initial_state`."""
        return (
            not self._skip_connections
            and bool(self._layers)
            and isinstance(initial_state, (tuple, list))
            and len(initial_state) == len(self._layers)
            and all(
                sequence.can_unroll(layer, state)
                for layer, state in zip(self._layers, initial_state)
            )
        )

    @utils.no_autograph
    def _unroll_sequence(
        self,
        input_sequence: tf.Tensor,
        initial_state: Sequence[Any],
        sequence_length: tf.Tensor | None,
    ) -> tuple[Any, tuple[Any, ...]]:
        """`dynamic_unroll` of the stack, one layer at a time.

        Each layer runs over the whole sequence with its own fast path (for
        LSTM/GRU: one input matmul, hand-written gradient) and feeds its output
        sequence to the next: the same outputs, states and gradients as
        stepping the stack, since no layer sees a later layer's values. Past a
        row's sequence length a layer's outputs repeat its last valid outputs,
        as the stack's do, and only feed the next layer's masked (discarded)
        steps.
        """
        current = input_sequence
        states = []
        for layer, state in zip(self._layers, initial_state):
            current, state = sequence.unroll(layer, current, state, sequence_length)
            states.append(state)
        return current, tuple(states)

    def initial_state(self, batch_size: Any, **kwargs: Any) -> tuple[Any, ...]:
        """A tuple of each core layer's `initial_state(batch_size, **kwargs)`."""
        return tuple(
            layer.initial_state(batch_size, **kwargs)
            for layer in self._layers
            if isinstance(layer, rnn_base.RNNCore)
        )


class DeepRNN(_LegacyDeepRNN):
    """A stack of layers that behaves as a single recurrent core.

    Each layer's outputs are the next layer's inputs. `snt.RNNCore` layers
    take one entry of the state tuple each; any other callable (e.g.
    `tf.nn.relu` or a feed-forward module) is applied to the value passing
    through. Use `snt.deep_rnn_with_skip_connections` or
    `snt.deep_rnn_with_residual_connections` for the connected variants.

    Under a `snt.precision` policy (applied to the stack, it reaches every
    layer) floating inputs are cast to the compute dtype, each core computes
    and keeps its state in it, and `snt.dynamic_unroll` still runs a stack
    of `snt.LSTM`s and `snt.GRU`s layer by layer with their fused loops.

    Args:
      layers: The layers, in order (a sequence is kept as given, not copied;
        checkpoint paths are `_layers/<i>/...`). None means no layers.
      name: Module name (default `deep_rnn`).

    >>> deep = snt.DeepRNN([snt.LSTM(4), tf.nn.relu, snt.GRU(2)])
    >>> outputs, state = deep(tf.ones([3, 5]), deep.initial_state(3))
    >>> outputs.shape, len(state)
    (TensorShape([3, 2]), 2)
    """

    def __init__(self, layers: Sequence[Any], name: str | None = None):
        super().__init__(layers, skip_connections=False, name=name)


def _check_all_cores(layers: Any, factory: str) -> Any:
    layers = _layer_list(layers, "must be a sequence of `snt.RNNCore`s")
    for layer in layers:
        if not isinstance(layer, rnn_base.RNNCore):
            # A ValueError, as the original's.
            raise errors.bad_value(
                "layers", f"must contain only `snt.RNNCore`s for `{factory}`", layer
            )
    return layers


def deep_rnn_with_skip_connections(
    layers: Sequence[rnn_base.RNNCore],
    concat_final_output: bool = True,
    name: str = "deep_rnn_with_skip_connections",
) -> rnn_base.RNNCore:
    """A deep RNN where every core also sees the original inputs.

    Each core after the first gets its predecessor's outputs concatenated
    (along the last axis) with the inputs of the whole stack.

    Args:
      layers: The `snt.RNNCore`s, in order (all must be cores).
      concat_final_output: If true (default), the outputs are all cores'
        outputs concatenated; else only the last core's.
      name: Module name.

    Returns:
      An `snt.RNNCore` with a tuple state (one entry per core).

    Raises:
      ValueError: if a layer is not an `snt.RNNCore`.

    >>> deep = snt.deep_rnn_with_skip_connections([snt.LSTM(4), snt.LSTM(2)])
    >>> outputs, _ = deep(tf.ones([3, 5]), deep.initial_state(3))
    >>> outputs.shape
    TensorShape([3, 6])
    """
    layers = _check_all_cores(layers, "deep_rnn_with_skip_connections")
    return _LegacyDeepRNN(
        layers,
        skip_connections=True,
        concat_final_output_if_skip=checks.flag(
            "concat_final_output", concat_final_output
        ),
        name=name,
    )


class _ResidualWrapper(rnn_base.RNNCore):
    """Adds a core's inputs to its outputs (leaf-wise); the state is unchanged."""

    def __init__(self, base_core: rnn_base.RNNCore):
        super().__init__(name=f"{base_core.name}_residual")
        self._base_core = base_core

    def __call__(self, inputs: Any, prev_state: Any) -> tuple[Any, Any]:
        policy = self._precision
        outputs, next_state = self._base_core(inputs, prev_state)
        if policy is not None:  # Added in the compute dtype.
            inputs = rnn_base.cast_floating(inputs, policy.compute_dtype)
            outputs = rnn_base.cast_floating(outputs, policy.compute_dtype)
        residual = _leafwise(_add, inputs, outputs)
        if policy is not None and policy.output_dtype is not None:
            residual = rnn_base.cast_floating(residual, policy.output_dtype)
        return residual, next_state

    def initial_state(self, batch_size: Any, **kwargs: Any) -> Any:
        return self._base_core.initial_state(batch_size, **kwargs)


def deep_rnn_with_residual_connections(
    layers: Sequence[rnn_base.RNNCore],
    name: str = "deep_rnn_with_residual_connections",
) -> rnn_base.RNNCore:
    """A deep RNN where every core's outputs are added to its inputs.

    Each core's outputs must therefore broadcast against its inputs
    (normally: have their shape). Checkpoint paths of the cores are
    `_layers/<i>/_base_core/...`.

    Args:
      layers: The `snt.RNNCore`s, in order (all must be cores).
      name: Module name.

    Returns:
      An `snt.RNNCore` whose outputs are the last core's outputs plus its
      inputs, with a tuple state (one entry per core).

    Raises:
      ValueError: if a layer is not an `snt.RNNCore`.

    >>> deep = snt.deep_rnn_with_residual_connections([snt.LSTM(5), snt.GRU(5)])
    >>> outputs, state = deep(tf.ones([3, 5]), deep.initial_state(3))
    >>> outputs.shape, len(state)
    (TensorShape([3, 5]), 2)
    """
    layers = _check_all_cores(layers, "deep_rnn_with_residual_connections")
    return _LegacyDeepRNN(
        [_ResidualWrapper(core) for core in layers],
        skip_connections=False,
        name=name,
    )
