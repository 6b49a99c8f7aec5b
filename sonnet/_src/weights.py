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
of the call: a low-rank adapter returns `w + a @ b`, int8 weights return
`int8_values * scales` in `dtype`. Set such a step on one module
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
