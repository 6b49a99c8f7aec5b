"""The weight step of a module call: "the kernel for this call".

`snt.Linear` (and so `snt.MultiHeadAttention`'s projections, which are
`snt.Linear`s), the convolutions (`ConvBase`) and `snt.Embed` never read
their kernel variable in their call code. Each call asks the module's weight
step for the kernel it multiplies by (the table it looks up), once:

    kernel = module._weight_step(module, dtype)

`dtype` is the compute dtype of the module's `snt.precision` policy, or None
without a policy (`snt.Embed` always passes None: it casts the looked-up
rows, not the table). The step returns a tensor (or variable) of the
kernel's shape, in `dtype` when one is given. The default, a class attribute
of each module (`VariableKernel("w")`, `VariableKernel("embeddings")`), is
the variable itself, cast once when the policy's dtype differs.

This is where features that change the weight plug in, without another copy
of the call: int8 weights (`snt.int8`, `Int8Kernel` below) return
`int8_values * scales` in `dtype`. (Low-rank adapters, `snt.lora`, do not:
a step returning `w + a @ b` would make training compute the gradient of that
whole kernel, the full `[input_size, output_size]` weight gradient, which is
what LoRA avoids; `snt.Linear` and the attention projections add the
adapter's term `(x @ a) @ b` to the product instead.) Set such a step on one module
(`module._weight_step = step`, an attribute assignment, so a step that is a
`tf.Module` is tracked and its variables belong to the module's checkpoint)
or on a subclass. The step runs on every call, eagerly or while tracing: keep
first-call work (creating variables) in its own `@snt.once` method. Biases
are not part of the step (they are cast by the policy step of the call).
"""

from __future__ import annotations

from typing import Any, Protocol

import tensorflow as tf

from sonnet._src import precision

_CAST = tf.raw_ops.Cast
_MUL = tf.raw_ops.Mul


class WeightStep(Protocol):
    """Gives the kernel a module multiplies by in one call."""

    def __call__(self, module: Any, dtype: tf.DType | None) -> Any:
        """The kernel of `module` for this call, in `dtype` (None: as stored)."""
        ...


class VariableKernel:
    """The default weight step: the module's variable `attribute`, cast to `dtype`.

    >>> from sonnet._src.weights import VariableKernel
    >>> linear = snt.Linear(2)
    >>> _ = linear(tf.ones([1, 3]))
    >>> VariableKernel("w")(linear, None) is linear.w
    True
    >>> VariableKernel("w")(linear, tf.bfloat16).dtype
    tf.bfloat16
    """

    __slots__ = ("attribute",)

    def __init__(self, attribute: str):
        self.attribute = attribute

    def __call__(self, module: Any, dtype: tf.DType | None) -> Any:
        kernel = getattr(module, self.attribute)
        return kernel if dtype is None else precision.cast(kernel, dtype)

    def __repr__(self) -> str:
        return f"VariableKernel({self.attribute!r})"


class Int8Kernel:
    """The weight step of int8 weights: `values * scales` in `dtype`.

    `values` (the module's variable `attribute`, int8) and `scales` (its
    `attribute + "_scale"`, float, broadcasting against the values: one per
    output channel) are set by `snt.int8.quantize`. Without a dtype the
    kernel is in the scales' dtype.
    """

    __slots__ = ("attribute",)

    def __init__(self, attribute: str):
        self.attribute = attribute

    def __call__(self, module: Any, dtype: tf.DType | None) -> Any:
        values = getattr(module, self.attribute)
        scales = getattr(module, self.attribute + "_scale")
        if dtype is None:
            dtype = scales.dtype
        else:
            scales = precision.cast(scales, dtype)
        return _MUL(x=_CAST(x=values, DstT=dtype), y=scales)

    def rows(self, module: Any, ids: Any) -> tf.Tensor:
        """The dequantized rows `ids` of a table with one scale per row
        (`snt.Embed`'s): gathers int8 rows and their scales, so a lookup
        costs the rows it reads, not the whole table."""
        values = tf.nn.embedding_lookup(getattr(module, self.attribute), ids)
        scales = tf.nn.embedding_lookup(getattr(module, self.attribute + "_scale"), ids)
        return _MUL(x=_CAST(x=values, DstT=scales.dtype), y=scales)

    def __repr__(self) -> str:
        return f"Int8Kernel({self.attribute!r})"


def describe_step(step: Any) -> str:
    """What a layer's own weight step is (set on the instance), for errors.

    >>> from sonnet._src.weights import Int8Kernel, describe_step
    >>> describe_step(Int8Kernel("w"))
    'int8 weights (`snt.int8.quantize`)'
    """
    if isinstance(step, Int8Kernel):
        return "int8 weights (`snt.int8.quantize`)"
    feature = getattr(type(step), "FEATURE", None)  # `snt.spectral_norm`'s, ...
    if feature is not None:
        namespace = type(step).NAMESPACE
        return f"{feature} already (`snt.{namespace}.remove` takes it off)"
    return f"its own weight step, {step!r}"


def kernel_dtype(module: Any, attribute: str) -> tf.DType:
    """The dtype the kernel `attribute` of `module` computes in without a policy:
    the variable's, or its scales' when it holds int8 values (`Int8Kernel`)."""
    scales = getattr(module, attribute + "_scale", None)
    return (getattr(module, attribute) if scales is None else scales).dtype
