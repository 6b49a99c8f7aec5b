"""`snt.lstm_with_recurrent_dropout`: an LSTM with dropout on its recurrent state."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import checks, errors
from sonnet._src.recurrent import base as rnn_base
from sonnet._src.recurrent import lstm as lstm_lib


class _RecurrentDropoutWrapper(rnn_base.RNNCore):
    """Multiplies a core's previous state by fixed dropout masks at every step.

    The state is `(core_state, masks)`. `initial_state` samples the masks
    (one per state leaf whose rate is not None; kept units are scaled by
    `1 / (1 - rate)`), and they stay the same for the whole sequence
    (Gal & Ghahramani, 2016). Masks are sampled afresh by every
    `initial_state` call, so nothing is cached across `tf.function` traces.
    """

    def __init__(
        self, base_core: rnn_base.RNNCore, rates: Any, seed: int | None = None
    ):
        super().__init__(name=f"{base_core.name}_recurrent_dropout")
        self._base_core = base_core
        self._rates = rates
        self._seed = seed

    def __call__(self, inputs: Any, prev_state: Any) -> tuple[Any, Any]:
        """One step of the wrapped core on the masked previous state.

        Args:
          inputs: The wrapped core's inputs.
          prev_state: `(core_state, masks)` as returned by `initial_state` or
            by the previous step.

        Returns:
          `(outputs, (next_core_state, masks))`.

        Raises:
          ValueError: if `prev_state` is not a `(core_state, masks)` pair
            with masks matching the core state.
        """
        if not isinstance(prev_state, (tuple, list)) or len(prev_state) != 2:
            raise errors.bad_value(
                "prev_state",
                "must be a pair `(core_state, dropout_masks)` as returned by "
                "`initial_state`",
                prev_state,
            )
        core_state, masks = prev_state
        try:
            tf.nest.assert_same_structure(core_state, masks, check_types=False)
        except (ValueError, TypeError) as e:
            raise errors.bad_value(
                "prev_state",
                f"must hold dropout masks with the structure of the core state ({e})",
                prev_state,
            ) from e
        masked = tf.nest.map_structure(_apply_mask, core_state, masks)
        outputs, next_core_state = self._base_core(inputs, masked)
        return outputs, (next_core_state, masks)

    def initial_state(self, batch_size: Any, **kwargs: Any) -> tuple[Any, Any]:
        """`(core initial state, freshly sampled dropout masks)`."""
        core_state = self._base_core.initial_state(batch_size, **kwargs)
        masks = tf.nest.map_structure(self._sample_mask, self._rates, core_state)
        return core_state, masks

    def _sample_mask(self, rate: Any, state: Any) -> Any:
        if rate is None:
            return None
        if isinstance(rate, (tf.Tensor, tf.Variable)):
            rate = tf.cast(rate, state.dtype)  # E.g. an integer tensor.
        return tf.nn.dropout(tf.ones_like(state), rate=rate, seed=self._seed)


def _apply_mask(state: Any, mask: Any) -> Any:
    return state if mask is None else state * mask


def _check_dropout(dropout: Any) -> Any:
    """A rate in `[0, 1)`: a number or a scalar tensor (e.g. a variable a
    schedule assigns), whose value is checked when it is known."""
    rate = checks.real("dropout", dropout, minimum=0.0)
    if isinstance(rate, float):
        value: Any = rate
    elif isinstance(rate, tf.Variable) and tf.executing_eagerly():
        value = rate.numpy()
    else:
        value = tf.get_static_value(rate)
    if value is not None and not 0 <= value < 1:
        raise errors.bad_value("dropout", "must be in [0, 1)", dropout)
    return rate


def lstm_with_recurrent_dropout(
    hidden_size: int,
    dropout: float = 0.5,
    seed: int | None = None,
    **kwargs: Any,
) -> tuple[rnn_base.RNNCore, lstm_lib.LSTM]:
    """An `snt.LSTM` for training with recurrent dropout, and its test core.

    The training core applies dropout to the previous hidden state at every
    step, with one mask per sequence sampled by its `initial_state` (Gal &
    Ghahramani, 2016, "A Theoretically Grounded Application of Dropout in
    Recurrent Neural Networks"). The cell state is not dropped. Both cores
    share the same variables; use the plain LSTM for evaluation. Works eagerly
    and inside `tf.function` (masks are sampled by each `initial_state` call).

    Args:
      hidden_size: `snt.LSTM`'s `hidden_size`.
      dropout: Probability of dropping a hidden unit, in `[0, 1)` (default
        0.5): a number or a scalar tensor.
      seed: Optional op-level seed of the mask sampling (an integer, or a
        whole float).
      **kwargs: Other `snt.LSTM` constructor arguments.

    Returns:
      `(train_core, test_core)`: the training core's state is
      `(LSTMState, masks)`; `test_core` is the wrapped `snt.LSTM`.

    >>> train_lstm, test_lstm = snt.lstm_with_recurrent_dropout(4, dropout=0.3)
    >>> state = train_lstm.initial_state(2)
    >>> outputs, state = train_lstm(tf.ones([2, 3]), state)
    >>> outputs.shape, train_lstm.trainable_variables == test_lstm.trainable_variables
    (TensorShape([2, 4]), True)
    """
    dropout = _check_dropout(dropout)
    seed = checks.seed("seed", seed)
    lstm = lstm_lib.LSTM(hidden_size, **kwargs)
    rates = rnn_base.LSTMState(hidden=dropout, cell=None)
    return _RecurrentDropoutWrapper(lstm, rates, seed), lstm
