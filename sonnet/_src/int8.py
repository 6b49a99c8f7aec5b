"""`snt.int8`: int8 weights with per-output-channel scales, for inference.

`snt.int8.quantize(model)` replaces the float weights of the chosen
`snt.Linear`s (`w`, including `snt.MultiHeadAttention`'s projections) and
`snt.Embed`s (`embeddings`) of a trained model by int8 values and float
scales, symmetric and per output channel:

    scale[j] = max_i |w[i, j]| / 127        values = round(w / scale)

(a Linear's output channel `j` is a column of `w`; an Embed's is a row of
the table, one scale per id). The variables keep their names (`.../w` now
holds int8 values, `.../w_scale` the scales, both not trainable), so the
model's checkpoint and `snt.summary` show about a quarter of the weight
bytes. Each call multiplies by `values * scales`, in the policy's compute
dtype under `snt.precision` (the module's weight step, `weights.Int8Kernel`;
an Embed dequantizes only the rows it looks up): the arithmetic is float, so
this saves memory and bandwidth for storing and loading weights, not compute.
Rounding moves each weight by at most half a step (`scale / 2`); outputs
typically differ from float32's by well under 1% of their scale. Biases,
norms and every other variable stay float.

A layer inside an `snt.LayerStack` (the blocks of
`snt.nets.Transformer(stacked=True)`) holds its weights stacked, `[num_layers,
...]`, and gets scales per layer and output channel: `w: int8 [num_layers,
input_size, output_size]` and `w_scale: [num_layers, output_size]` (an
Embed's `embeddings_scale`: `[num_layers, vocab_size, 1]`), the values and
scales of each layer's own weights, as the unrolled model's would be.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import embed, errors, linear, module_filter, weights

# The modules that can hold int8 weights, and the attribute of each that does.
_ATTRIBUTE = {linear.Linear: "w", embed.Embed: "embeddings"}
# The axis a scale covers (reduced over): a Linear's rows (one scale per
# column, its output channel), an Embed's columns (one scale per id).
_REDUCED_AXIS = {linear.Linear: 0, embed.Embed: 1}


def quantize(module: Any, *, types: Any = None, pattern: Any = None) -> list[Any]:
    """Converts the Linear and Embed weights of a built module tree to int8.

    Args:
      module: A built `tf.Module`, e.g. a trained `snt.nets.MLP` or
        `snt.nets.Transformer` (an `snt.Linear` or `snt.Embed` itself works).
      types: Only convert the layers that are, or sit inside, an instance of
        this class (or tuple of classes). Default None: any.
      pattern: Only convert the layers whose name path (their variables'
        name prefix) contains a match of this regular expression. Default
        None: any.

    Returns:
      The converted modules, in `tf.Module`'s walk order.

    Raises:
      ValueError: if the tree has no Linear or Embed with float weights that
        the filters choose (none at all, or all int8 already), a chosen one is
        not built yet, or one sits inside nested `snt.LayerStack`s, or a
        stack's layer is given without its stack. Nothing is changed then.

    >>> mlp = snt.nets.MLP([16, 3])
    >>> x = tf.random.normal([8, 4], seed=1)
    >>> before = mlp(x)
    >>> layers = snt.int8.quantize(mlp)
    >>> [(layer.w.dtype, layer.w_scale.shape) for layer in layers]
    [(tf.int8, TensorShape([16])), (tf.int8, TensorShape([3]))]
    >>> float(tf.reduce_max(tf.abs(mlp(x) - before))) < 0.02
    True
    """
    module_filter.check_eager(module, "converted")
    kinds = tuple(_ATTRIBUTE)
    chosen = module_filter.select(module, kinds, types, pattern)
    todo = []
    for layer, stack in chosen:
        kind = _kind(layer)
        attribute = _ATTRIBUTE[kind]
        weight = getattr(layer, attribute, None)
        if weight is None:
            name = module_filter.name_path(layer)
            raise errors.bad_value(
                "module",
                f"must be built first (call it once): `{name}` has no weights yet",
                module,
            )
        module_filter.check_weight_rank(module, layer, attribute, stack)
        step = vars(layer).get("_weight_step")
        if step is not None and not isinstance(step, weights.Int8Kernel):
            raise errors.bad_value(
                "module",
                f"must have plain weights to convert: "
                f"`{module_filter.name_path(layer)}` has {weights.describe_step(step)}",
                module,
            )
        if weight.dtype.is_floating:
            # A stack's weights have a leading layer axis: reduce one later.
            axis = _REDUCED_AXIS[kind] + (stack is not None)
            todo.append((layer, attribute, weight, axis, kind is embed.Embed))
    if not todo:
        raise errors.bad_value(
            "module",
            "must have float Linear or Embed weights to convert; they are all int8 "
            "already",
            module,
        )
    for layer, attribute, weight, axis, keepdims in todo:
        values, scales = _quantize(weight, axis, keepdims)
        with layer.name_scope:
            setattr(
                layer,
                attribute,
                tf.Variable(values, trainable=False, name=attribute),
            )
            setattr(
                layer,
                attribute + "_scale",
                tf.Variable(scales, trainable=False, name=attribute + "_scale"),
            )
        vars(layer)["_weight_step"] = weights.Int8Kernel(attribute)
    module_filter.restack(chosen)
    return [layer for layer, *_ in todo]


def _kind(layer: Any) -> type:
    return linear.Linear if isinstance(layer, linear.Linear) else embed.Embed


def _quantize(
    weight: tf.Variable, axis: int, keepdims: bool
) -> tuple[tf.Tensor, tf.Tensor]:
    """Symmetric int8 values and float scales of `weight`, per slice along
    `axis` (kept as a size-1 axis with `keepdims`: an Embed's per-row scales)."""
    w = tf.convert_to_tensor(weight)
    largest = tf.reduce_max(tf.abs(w), axis=axis, keepdims=True)
    # A zero column (or row) keeps scale 1: its values are all 0 anyway.
    scales = tf.where(largest > 0, largest / 127.0, tf.ones_like(largest))
    values = tf.cast(tf.clip_by_value(tf.round(w / scales), -127.0, 127.0), tf.int8)
    return values, scales if keepdims else tf.squeeze(scales, axis)
