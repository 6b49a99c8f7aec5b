"""`snt.nets.copy_transformer_weights`: between unrolled and stacked Transformers.

An unrolled `snt.nets.Transformer` keeps block `i`'s variables under
`block_i/...`; a stacked one (`stacked=True`) keeps every block's values of
one variable in one `[num_layers, ...]` variable under `stack/layer/...`.
Both are described here as one list of per-block variables, in the unrolled
naming (`block_3/mlp_in/w`, ..., then `final_norm/...`), and copied in that
order. Fine-tuning variables are variables like the others: LoRA adapters
(`block_3/attention/query/lora/a`, `snt.lora`; a stacked model's hold a
slice per layer, one `merged` flag per layer) and int8 weights with their
scales (`snt.int8`) are copied when both models have them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from sonnet._src import errors
from sonnet._src.nets import transformer as transformer_lib


class _Entry(NamedTuple):
    name: str  # In the unrolled naming.
    shape: tf.TensorShape
    dtype: tf.DType
    read: Callable[[], tf.Tensor]


def _path_name(path: tuple[Any, ...]) -> str:
    return "/".join(map(str, path))


def _variables(module: Any) -> list[tuple[str, tf.Variable]]:
    return [
        (_path_name(path), v)
        for path, v in module._flatten(
            predicate=lambda v: isinstance(v, tf.Variable), with_path=True
        )
    ]


def _built(transformer: transformer_lib.Transformer) -> bool:
    return bool(_variables(transformer.final_norm))


def _entries(transformer: transformer_lib.Transformer) -> list[_Entry]:
    entries = []
    if transformer.stacked:
        stacked = transformer.stack.layer_variables()
        for i in range(transformer.num_layers):
            for path, v in stacked:
                entries.append(
                    _Entry(
                        f"block_{i}/{path}",
                        v.shape[1:],
                        v.dtype,
                        lambda v=v, i=i: v[i],
                    )
                )
    else:
        for i, block in enumerate(transformer.blocks):
            for path, v in _variables(block):
                entries.append(
                    _Entry(f"block_{i}/{path}", v.shape, v.dtype, v.read_value)
                )
    for path, v in _variables(transformer.final_norm):
        entries.append(_Entry(f"final_norm/{path}", v.shape, v.dtype, v.read_value))
    return entries


def _assign(transformer: transformer_lib.Transformer, values: list[tf.Tensor]) -> None:
    """Assigns `values`, in `_entries` order, to `transformer`'s variables."""
    rest = iter(values)
    if transformer.stacked:
        stacked = transformer.stack.layer_variables()
        per_layer = [
            [next(rest) for _ in stacked] for _ in range(transformer.num_layers)
        ]
        for k, (_, v) in enumerate(stacked):
            v.assign(tf.stack([layer[k] for layer in per_layer]))
    else:
        for block in transformer.blocks:
            for _, v in _variables(block):
                v.assign(next(rest))
    for _, v in _variables(transformer.final_norm):
        v.assign(next(rest))


def _describe(entry: _Entry) -> str:
    return f"{entry.name} {entry.dtype.name}{entry.shape}"


def _hint(mine: _Entry, other: _Entry) -> str:
    """What to do when `target`'s entry `mine` and `source`'s `other`
    differ by fine-tuning state (adapters, int8 weights)."""
    ours, theirs = "/lora/" in mine.name, "/lora/" in other.name
    if theirs and not ours:
        return (
            " (`source` has LoRA adapters and `target` none there: fold them "
            "into `source`'s weights with `snt.lora.merge(source)` and "
            "`snt.lora.remove(source, keep_merged=True)` first, or add "
            "adapters of the same rank to `target` with `snt.lora.add` to "
            "copy them too)"
        )
    if ours and not theirs:
        return (
            " (`target` has LoRA adapters and `source` none there: add "
            "adapters of the same rank to `source` too, or copy before "
            "`snt.lora.add(target, ...)`)"
        )
    int8 = (mine.dtype == tf.int8, other.dtype == tf.int8)
    if int8 == (False, True) or other.name.endswith("_scale"):
        return (
            " (`source` has int8 weights: `snt.int8.quantize(target)` first, or "
            "copy from `source` before it was quantized)"
        )
    if int8 == (True, False) or mine.name.endswith("_scale"):
        return (
            " (`target` has int8 weights: copy into it before "
            "`snt.int8.quantize`, or quantize `source` too)"
        )
    return ""


def copy_transformer_weights(
    source: transformer_lib.Transformer, target: transformer_lib.Transformer
) -> transformer_lib.Transformer:
    """Copies a Transformer's weights into another, stacked or unrolled.

    Converts checkpoints between `snt.nets.Transformer(..., stacked=True)`
    and the unrolled default: restore the checkpoint into a model of the
    kind it was written by, copy, and save the other model. The two must
    have the same depth and sizes (the other options, e.g. `dropout_rate`
    or `remat`, may differ) and the same fine-tuning variables: LoRA
    adapters of the same rank on the same layers (`snt.lora.add`, their
    `merged` flags included) or int8 weights (`snt.int8.quantize`) are
    copied when both have them. Nothing is assigned unless every variable
    matches.

    Args:
      source: A built `snt.nets.Transformer` (called once, or restored).
      target: An `snt.nets.Transformer` of the same depth and sizes; if it
        has not been called yet it is built by calling it once on zeros.

    Returns:
      `target`, whose outputs are now those of `source`.

    Raises:
      TypeError: if either is not an `snt.nets.Transformer`.
      ValueError: if `source` has no variables yet, or the two differ in
        depth, sizes or fine-tuning variables (naming the first variable
        that differs, and what to do when it is an adapter or an int8
        weight).

    >>> unrolled = snt.nets.Transformer(num_layers=3, num_heads=2, model_size=8)
    >>> x = tf.random.normal([2, 4, 8])
    >>> y = unrolled(x)
    >>> stacked = snt.nets.Transformer(
    ...     num_layers=3, num_heads=2, model_size=8, stacked=True)
    >>> stacked = snt.nets.copy_transformer_weights(unrolled, stacked)
    >>> bool(tf.reduce_max(tf.abs(stacked(x) - y)) < 1e-5)
    True
    """
    for argument, value in (("source", source), ("target", target)):
        if not isinstance(value, transformer_lib.Transformer):
            raise errors.bad_type(argument, "must be an `snt.nets.Transformer`", value)
    if not _built(source):
        raise errors.bad_value(
            "source",
            "must have variables: call it once or restore a checkpoint into it first",
            "a Transformer that has not been called",
        )
    if not _built(target):
        target(tf.zeros([1, 1, target.model_size]))
    theirs, ours = _entries(source), _entries(target)
    missing = _Entry("nothing", tf.TensorShape([]), tf.float32, lambda: tf.zeros([]))
    for mine, other in itertools.zip_longest(ours, theirs, fillvalue=missing):
        if (mine.name, mine.shape, mine.dtype) != (
            other.name,
            other.shape,
            other.dtype,
        ):
            raise errors.bad_value(
                "target",
                "must have the depth, sizes and fine-tuning variables of "
                f"`source`; the first variable that differs is {_describe(other)} "
                f"of `source`{_hint(mine, other)}",
                _describe(mine),
            )
    _assign(target, [entry.read() for entry in theirs])
    return target
