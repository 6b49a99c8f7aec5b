"""`snt.nets.MLP`: a multi-layer perceptron (a stack of `snt.Linear`s)."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import base, checks, errors, tensors
from sonnet._src import dropout as dropout_lib
from sonnet._src import linear as linear_lib


class MLP(base.Module):
    """A multi-layer perceptron: `snt.Linear` layers with activations between.

    Layer `i` is `snt.Linear(output_sizes[i], name=f"linear_{i}")`. The
    activation follows every layer but the last (and the last too with
    `activate_final=True`). With `dropout_rate`, dropout is applied in
    training just before each activation.

    Args:
      output_sizes: Output size of each layer, a non-empty sequence of
        positive ints.
      w_init: Weight initializer shared by all layers; default None means
        each layer's `snt.Linear` default (truncated normal with stddev
        `1 / sqrt(fan_in)`).
      b_init: Bias initializer shared by all layers; default None means zeros.
        Must be None when `with_bias=False`.
      with_bias: Whether the layers have biases (default True).
      activation: Activation function (default `tf.nn.relu`).
      dropout_rate: Probability of dropping activations in training, in
        `[0, 1)`; default None means no dropout. When set, calls need
        `is_training`.
      activate_final: Whether to apply the activation (and dropout) after the
        last layer too (default False, so the outputs are unbounded logits).
      name: Module name (default `mlp`).

    Shapes:
      inputs `[..., input_size]` (rank >= 2) -> outputs `[..., output_sizes[-1]]`.

    >>> mlp = snt.nets.MLP([16, 16, 4])
    >>> mlp(tf.ones([8, 3])).shape
    TensorShape([8, 4])
    >>> [v.name for v in mlp.variables][:2]
    ['mlp/linear_0/b:0', 'mlp/linear_0/w:0']
    >>> mlp.reverse()(tf.ones([8, 4])).shape
    TensorShape([8, 3])
    """

    _TF_MODULE_IGNORED_PROPERTIES = base.Module._TF_MODULE_IGNORED_PROPERTIES | {
        "_layer_tuple"
    }
    _layer_tuple: tuple[linear_lib.Linear, ...]

    def __init__(
        self,
        output_sizes: Iterable[int],
        w_init: tensors.Initializer | None = None,
        b_init: tensors.Initializer | None = None,
        with_bias: bool = True,
        activation: Callable[[tf.Tensor], tf.Tensor] = tf.nn.relu,
        dropout_rate: Any = None,
        activate_final: bool = False,
        name: str | None = None,
    ):
        # The original checked `b_init` against `with_bias` first (ValueError).
        with_bias = checks.flag("with_bias", with_bias)
        if not with_bias and b_init is not None:
            raise errors.bad_value(
                "b_init",
                "must be None when `with_bias=False` (there is no bias)",
                b_init,
            )
        sizes = checks.integers("output_sizes", output_sizes, 0, tensor=True)
        checks.initializer("w_init", w_init)
        checks.initializer("b_init", b_init)
        checks.callable_or_none(
            "activation", activation, "a function from tensor to tensor"
        )
        activate_final = checks.flag("activate_final", activate_final)
        if activation is None and (len(sizes) > 1 or activate_final):
            # The original accepted None and failed (TypeError) when applying it.
            raise errors.bad_type(
                "activation",
                "must be a function from tensor to tensor when it is applied "
                "(more than one layer, or activate_final=True)",
                activation,
            )
        if dropout_rate is not None:
            try:
                dropout_rate = dropout_lib.check_rate("dropout_rate", dropout_rate)
            except TypeError as e:
                # The original failed later, with a `ValueError`.
                raise errors.invalid_argument_type(
                    "dropout_rate", "must be a real number", dropout_rate
                ) from e
        super().__init__(name=name)
        self._with_bias = with_bias
        self._w_init = w_init
        self._b_init = b_init
        self._activation = activation
        self._activate_final = activate_final
        self._dropout_rate = dropout_rate
        # A rate of zero (in any spelling of known value) is no dropout.
        known = (
            tf.get_static_value(dropout_rate)
            if isinstance(dropout_rate, tf.Tensor)
            else dropout_rate
        )
        self._use_dropout = dropout_rate is not None and not (
            isinstance(known, (numbers.Real, np.floating, np.ndarray)) and known == 0
        )
        self._layers = [
            linear_lib.Linear(
                output_size=size,
                w_init=w_init,
                b_init=b_init,
                with_bias=with_bias,
                name=f"linear_{i}",
            )
            for i, size in enumerate(sizes)
        ]
        # A plain tuple for the hot loop (iterating the tracked `_layers` list
        # wrapper costs about as much as a small kernel). Written to `vars(self)`
        # so it is not tracked: checkpoints and `variables` see `_layers` only.
        vars(self)["_layer_tuple"] = tuple(self._layers)

    @base.no_name_scope
    def __call__(self, inputs: tf.Tensor, is_training: Any = None) -> tf.Tensor:
        """Applies the layers, activations and (in training) dropout.

        Args:
          inputs: A tensor of shape `[..., input_size]` (rank >= 2).
          is_training: Required when `dropout_rate` is set (a Python bool or a
            scalar boolean tensor), otherwise must be None.

        Returns:
          A tensor of shape `[..., output_sizes[-1]]`.

        Raises:
          ValueError: if `is_training` is missing although dropout is used, or
            given although it is not.
        """
        if self._use_dropout:
            if is_training is None:
                raise errors.bad_value(
                    "is_training",
                    "must be given (True or False) when the MLP uses dropout",
                    is_training,
                )
            training = checks.mode_flag("is_training", is_training)
        elif is_training is not None:
            raise errors.bad_value(
                "is_training",
                "must be None unless the MLP uses dropout (set `dropout_rate`)",
                is_training,
            )
        else:
            training = False
        # Name scopes have no effect on eager ops and cost as much as a small
        # kernel, so they are only entered while tracing.
        if tf.executing_eagerly():
            return self._forward(inputs, training)
        with self.name_scope:
            return self._forward(inputs, training)

    @base.no_name_scope
    def _forward(self, inputs: tf.Tensor, training: Any) -> tf.Tensor:
        if not self._layer_tuple:  # `MLP([])` is the identity, as the original.
            return inputs
        *hidden, last = self._layer_tuple
        activation = self._activation
        outputs = inputs
        if training is False:
            for layer in hidden:
                outputs = activation(layer(outputs))
            outputs = last(outputs)
            return activation(outputs) if self._activate_final else outputs
        for layer in hidden:
            outputs = activation(self._dropout(layer(outputs), training))
        outputs = last(outputs)
        if self._activate_final:
            outputs = activation(self._dropout(outputs, training))
        return outputs

    @base.no_name_scope
    def _dropout(self, x: tf.Tensor, training: Any) -> tf.Tensor:
        return dropout_lib.when_training(x, self._dropout_rate, training)

    def reverse(
        self, activate_final: bool | None = None, name: str | None = None
    ) -> MLP:
        """An MLP mapping this one's outputs back to its input size (no weight sharing).

        Needs a prior call (the input sizes come from the built layers). The
        new MLP is created inside this one's name scope.

        Args:
          activate_final: For the new MLP; default None means this one's.
          name: Name of the new MLP; default `<this name>_reversed`.

        Returns:
          An MLP with `output_sizes` equal to this one's layer input sizes in
          reverse order, and the same initializers, bias setting, activation
          and dropout rate.
        """
        sizes = [getattr(layer, "input_size", None) for layer in self._layers]
        if any(size is None for size in sizes):
            raise ValueError(
                "`reverse()` needs the input size of every layer, which is known "
                f"only after the MLP has been called. Received: {self!r}, not "
                "called yet."
            )
        if activate_final is None:
            activate_final = self._activate_final
        if name is None:
            name = f"{self.name}_reversed"
        return MLP(
            output_sizes=list(reversed(sizes)),
            w_init=self._w_init,
            b_init=self._b_init,
            with_bias=self._with_bias,
            activation=self._activation,
            dropout_rate=self._dropout_rate,
            activate_final=activate_final,
            name=name,
        )
