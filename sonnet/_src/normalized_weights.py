"""Normalised weights: what `snt.spectral_norm` and `snt.weight_norm` share.

Both reparametrise the weight of chosen layers (`snt.Linear`, including
`snt.MultiHeadAttention`'s projections, the convolutions and `snt.Embed`)
through the module's weight step (`weights.py`): the layer's variable (`w`,
`embeddings`) keeps its name and holds the raw weight, a step module set as
`layer._weight_step` (tracked: its variables join the layer's checkpoint, at
`.../_weight_step/...`, named `.../spectral_norm/u`, `.../weight_norm/g`)
turns it into the kernel each call multiplies by. No call is copied and a
layer without a step runs exactly as before.

The layers' output channels (what a per-channel norm or a `[rows, outputs]`
matrix view is about) follow the weight's layout: the last axis for
`snt.Linear` (`[input_size, output_size]`) and the forward convolutions
(`[*kernel, in, out]`), the second to last for the transposed ones
(`[*kernel, out, in]`), the last two for `snt.DepthwiseConv2D` (`[*kernel, in,
multiplier]`: `in * multiplier` outputs) and, as for `snt.int8`, the rows of
an `snt.Embed`'s table (one vector per id).

Composition. `snt.lora` adds its adapter's term to the product, not to the
kernel: a normalised layer with an adapter computes `x @ normalised(w) + b +
term`, the term itself is not normalised. Merging an adapter folds it into
`w`, the raw weight the step then normalises (not what was added): remove the
normalisation first (`snt.spectral_norm.remove`, which folds the normalised
kernel into `w`), then merge. int8 weights have a step of their own: a layer
with int8 weights is refused; to quantize a normalised layer, remove the
normalisation first. Layers of an `snt.LayerStack` are refused (their weights
have a layer axis, the steps' variables would need one too).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    conv_base,
    conv_transpose,
    depthwise_conv,
    embed,
    errors,
    freezing,
    linear,
    module_filter,
    precision,
    weights,
)

# The modules whose weight can be normalised.
KINDS = (linear.Linear, conv_base.ConvBase, embed.Embed)
_KIND_NAMES = "an `snt.Linear`, a convolution (`snt.Conv2D`, ...) or an `snt.Embed`"


def attribute(layer: Any) -> str:
    """The name of the variable `layer`'s weight step reads."""
    return "embeddings" if isinstance(layer, embed.Embed) else "w"


def output_axes(layer: Any) -> tuple[int, ...]:
    """The axes of `layer`'s weight that index its output channels."""
    if isinstance(layer, embed.Embed):
        return (0,)
    if isinstance(layer, conv_transpose.ConvNDTranspose):
        return (-2,)
    if isinstance(layer, depthwise_conv.DepthwiseConv2D):
        return (-2, -1)
    return (-1,)


def check_eps(eps: Any) -> float:
    eps = checks.real("eps", eps, allow_tensor=False)
    if eps <= 0:
        raise errors.bad_value("eps", "must be positive", eps)
    return eps


def check_shape(shape: Any) -> tuple[int, ...]:
    try:
        dims = tf.TensorShape(shape).as_list()
    except (TypeError, ValueError) as e:
        raise errors.bad_type("shape", "must be a weight shape", shape) from e
    sizes = [d for d in dims if d is not None and d >= 1]
    if len(dims) < 2 or len(sizes) != len(dims):
        raise errors.bad_value(
            "shape", "must be a known shape of rank >= 2 with positive sizes", shape
        )
    return tuple(sizes)


class NormalizedKernel(base.Module):
    """A weight step that normalises the layer's weight (a base class).

    A subclass defines `normalize(weight)`: the kernel for a weight of the
    shape it was made for, in the weight's dtype. Called as the step,
    `step(layer, dtype)`, it returns that kernel, cast to `dtype` when given
    (the layer's `snt.precision` policy's compute dtype): the normalisation
    runs in the variable's dtype (float32 under a policy).
    """

    # What the subclass does, and the public namespace that adds it.
    FEATURE = ""
    NAMESPACE = ""

    def __init__(
        self,
        shape: tuple[int, ...],
        output_axes: tuple[int, ...],
        attribute: str,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.shape: tuple[int, ...] = tuple(shape)
        rank = len(self.shape)
        self.output_axes = tuple(sorted(a % rank for a in output_axes))
        self.attribute = attribute
        others = [a for a in range(rank) if a not in self.output_axes]
        # `[rows, outputs]` view of the weight: the output axes moved last.
        perm = [*others, *self.output_axes]
        self._perm = None if perm == list(range(rank)) else perm
        self._outputs = 1
        for a in self.output_axes:
            self._outputs *= self.shape[a]
        self._reduced_axes = others
        # Per-output-channel values broadcast against the weight in this shape.
        self._channel_shape = [self.shape[a] for a in self.output_axes]
        self._broadcast_shape = [
            self.shape[a] if a in self.output_axes else 1 for a in range(rank)
        ]

    def matrix(self, weight: Any) -> tf.Tensor:
        """`weight` as a `[rows, outputs]` matrix (output channels last)."""
        if self._perm is not None:
            weight = tf.transpose(weight, self._perm)
        return tf.reshape(weight, [-1, self._outputs])

    def normalize(self, weight: Any) -> tf.Tensor:
        """The normalised kernel for `weight` (each subclass defines it)."""
        raise NotImplementedError

    def __call__(self, module: Any, dtype: tf.DType | None) -> tf.Tensor:
        """The kernel of `module` for one call, in `dtype` (None: as stored)."""
        kernel = self.normalize(getattr(module, self.attribute))
        return kernel if dtype is None else precision.cast(kernel, dtype)


def choose(
    module: Any, types: Any, pattern: Any, feature: str
) -> list[tuple[Any, str]]:
    """The layers of `module`'s tree to normalise, each with its weight's
    attribute name; raises (naming the argument) for a tree without one, a
    layer not built, with int8 or normalised weights, or inside a stack."""
    module_filter.check_eager(module, f"given {feature}")
    freezing.check_module(module)
    if not any(isinstance(m, KINDS) for m in freezing.tree(module)):
        raise errors.bad_value(
            "module",
            f"must hold a weight to normalise: {_KIND_NAMES} (in its tree); "
            f"`{module_filter.name_path(module)}` has none",
            module,
        )
    chosen = []
    for layer, stack in module_filter.select(module, KINDS, types, pattern):
        name = module_filter.name_path(layer)
        attr = attribute(layer)
        weight = getattr(layer, attr, None)
        if weight is None:
            raise errors.bad_value(
                "module",
                f"must be built first (call it once): `{name}` has no weights yet",
                module,
            )
        if stack is not None:
            raise errors.bad_value(
                "module",
                f"must not hold `{name}` inside an `snt.LayerStack` (its weights "
                f"are stacked); leave it out with `types` or `pattern`",
                module,
            )
        step = vars(layer).get("_weight_step")
        if step is not None:
            raise errors.bad_value(
                "module",
                f"must have plain weights to give {feature}: `{name}` has "
                f"{weights.describe_step(step)}",
                module,
            )
        if not weight.dtype.is_floating:
            raise errors.bad_value(
                "module",
                f"must have floating point weights to give {feature}: `{name}` "
                f"has {weight.dtype.name} weights",
                module,
            )
        chosen.append((layer, attr))
    return chosen


def set_step(layer: Any, step: NormalizedKernel) -> None:
    """Makes `step` the weight step of `layer` (tracked: checkpointed)."""
    layer._weight_step = step


def steps(module: Any, kind: type[NormalizedKernel]) -> list[tuple[Any, Any]]:
    """The `(layer, step)` pairs of `module`'s tree whose step is a `kind`."""
    freezing.check_module(module)
    return [
        (m, vars(m)["_weight_step"])
        for m in freezing.tree(module)
        if isinstance(vars(m).get("_weight_step"), kind)
    ]


def remove(module: Any, kind: type[NormalizedKernel]) -> list[Any]:
    """Folds each `kind` step's kernel into its layer's variable and removes
    the step (the layer computes the same outputs, as a plain layer)."""
    module_filter.check_eager(module, f"freed of {kind.FEATURE}")
    found = steps(module, kind)
    if not found:
        raise errors.bad_value(
            "module",
            f"must have {kind.FEATURE} (added by `snt.{kind.NAMESPACE}.add`)",
            module,
        )
    kernels = [step(layer, None) for layer, step in found]
    for (layer, step), kernel in zip(found, kernels):
        getattr(layer, step.attribute).assign(kernel)
        del layer._weight_step
    return [layer for layer, _ in found]
