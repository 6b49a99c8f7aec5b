"""2.0.2's `sonnet.src.parallel_linear`: `ParallelLinears`, n linear layers
applied to n inputs as one batched product."""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, errors, initializers, once, utils


class ParallelLinears(base.Module):
    """`n` separate linear layers, the `i`-th applied to `inputs[i]`.

    One batched product of `[n, batch, in]` inputs by an `[n, in, out]`
    kernel (plus an `[n, 1, out]` bias): `n` and `in` must be known when the
    module is first called.

    Args:
      output_size: Output size of each layer.
      with_bias: Whether to add a bias (default True).
      w_init: Kernel initializer (default truncated normal with standard
        deviation `1 / sqrt(in)`).
      b_init: Bias initializer (default zeros); must be None without a bias.
      name: Module name.

    >>> from sonnet.src.parallel_linear import ParallelLinears
    >>> layers = ParallelLinears(5)
    >>> layers(tf.ones([3, 2, 4])).shape
    TensorShape([3, 2, 5])
    >>> layers.w.shape, layers.b.shape
    (TensorShape([3, 4, 5]), TensorShape([3, 1, 5]))
    """

    def __init__(
        self,
        output_size: int,
        with_bias: bool = True,
        w_init: initializers.Initializer | None = None,
        b_init: initializers.Initializer | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.output_size = checks.size("output_size", output_size, allow_zero=True)
        self.with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        checks.initializer("b_init", b_init)
        checks.unused_initializer("b_init", b_init, "with_bias", self.with_bias)
        self.w_init = w_init
        if self.with_bias:
            self.b_init = b_init if b_init is not None else initializers.Zeros()

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        utils.assert_rank(inputs, 3)
        num_linears, input_size = inputs.shape[0], inputs.shape[2]
        if input_size is None:
            raise errors.bad_value(
                "inputs", "must have a known size (last axis) when first called", inputs
            )
        if num_linears is None:
            raise errors.bad_value(
                "inputs",
                "must have a known number of layers (first axis) when first called",
                inputs,
            )
        self.input_size = input_size
        if self.w_init is None:
            self.w_init = initializers.TruncatedNormal(
                stddev=1 / math.sqrt(max(input_size, 1))
            )
        self.w = tf.Variable(
            self.w_init([num_linears, input_size, self.output_size], inputs.dtype),
            name="w",
        )
        if self.with_bias:
            self.b = tf.Variable(
                self.b_init([num_linears, 1, self.output_size], inputs.dtype),
                name="b",
            )

    def __call__(self, inputs: Any) -> tf.Tensor:
        """`[n, batch, in]` inputs to `[n, batch, output_size]` outputs."""
        inputs = utils.to_tensor("inputs", inputs)
        self._initialize(inputs)
        outputs = tf.matmul(inputs, self.w)
        if self.with_bias:
            outputs = outputs + self.b
        return outputs


__all__ = ["ParallelLinears"]
