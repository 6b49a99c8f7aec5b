"""`snt.lora`: low-rank adapters (LoRA) on the `snt.Linear`s of a trained model.

`snt.lora.add(model, rank)` gives each chosen `snt.Linear` an adapter
(`linear.lora`, an `snt.lora.LoRA` holding `a: [input_size, rank]` and
`b: [rank, output_size]`) and freezes the model (`snt.freeze`) except the
adapters, so that

    outputs = inputs @ w + b + (alpha / rank) * (inputs @ a) @ b_lora

(Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", 2021) and
`model.trainable_variables` are the adapters' variables only. `a` starts
random and `b_lora` at zero: the adapted model starts equal to the model.

How it runs: the adapter's term is added to the product `inputs @ w` by the
module's call (`snt.Linear` and the projections of `snt.MultiHeadAttention`,
one attribute read when there is no adapter), not folded into the kernel the
weight step returns (`weights.py`): the gradient of a folded kernel
`w + a @ b` is the full `[input_size, output_size]` weight gradient, the
largest product of a training step, which the low-rank form never computes.

Checkpoints: the adapters are new variables (`.../query/lora/a`), so a
checkpoint of the plain model restores into the adapted one
(`tf.train.Checkpoint(model=...).read(path)`, the adapters keep their
initial values), and `snt.lora.save` / `snt.lora.restore` write and read the
adapters alone. `snt.lora.merge` folds them into the weights for inference
(`w += (alpha / rank) * a @ b`), `snt.lora.unmerge` takes them out again and
`snt.lora.remove` gives back the plain model. `merge` first checks that
every adapter's term, and every merged weight, is finite: an adapter holding
NaN or inf (a diverged run) is refused, not folded into weights it would
ruin for good (`safe_merge=False` skips the check).

Layer stacks: a Linear inside an `snt.LayerStack` (e.g. the blocks of
`snt.nets.Transformer(stacked=True)`) holds `w: [num_layers, input_size,
output_size]`, and its adapter is stacked likewise: `a: [num_layers,
input_size, rank]`, `b: [num_layers, rank, output_size]` and one `merged`
flag per layer, `[num_layers]` (every variable of a stack's layer has the
layer axis; `merge` and `unmerge` set them all), each layer's `a` drawn on
its own. In the stack's loop each layer uses its slice: the outputs are
those of the unrolled model with the same adapters.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    errors,
    freezing,
    initializers,
    linear,
    module_filter,
    precision,
    tensors,
    weights,
)

# The freeze mark `add` sets (`freezing.py`), so that `remove` unfreezes only
# what `add` froze.
_FROZEN_BY_LORA = "lora"

_MAT_MUL = tf.raw_ops.MatMul
_MUL = tf.raw_ops.Mul
_ADD = tf.raw_ops.AddV2
_CAST = tf.raw_ops.Cast
_LOGICAL_NOT = tf.raw_ops.LogicalNot


class LoRA(base.Module):
    """A low-rank adapter of one `snt.Linear`: `(alpha / rank) * x @ a @ b`.

    Made by `snt.lora.add`, which sets it as the layer's `lora` attribute;
    the layer adds the adapter's term to its product `x @ w` on every call
    (until `snt.lora.merge` folds it into `w`).

    Args:
      input_size: The layer's input size (rows of `a`).
      output_size: The layer's output size (columns of `b`).
      rank: Inner size of the product, at least 1 and at most
        `min(input_size, output_size)`.
      alpha: Scale numerator; the term is scaled by `alpha / rank`. Default
        None means `rank` (a scale of 1), so a change of rank does not change
        the scale of the initial updates' effect by itself.
      a_init: Initializer for `a`. Default None means uniform with the
        variance of LeCun's fan-in scaling (`1 / input_size`), so `x @ a` has
        about the scale of `x`.
      dtype: Dtype of `a` and `b`: the layer's weights' dtype (float32 under
        a `snt.precision` policy: adapters train in float32 and compute in
        the policy's dtype). Default float32.
      name: Module name (default `lora`).

    Attributes:
      a: `[input_size, rank]`, random at first (`[num_layers, input_size,
        rank]` for a layer inside an `snt.LayerStack`, see `snt.lora.add`).
      b: `[rank, output_size]`, zeros at first (`[num_layers, rank,
        output_size]` in a stack).
      merged: A boolean variable (not trainable): whether `snt.lora.merge`
        has folded the adapter into its layer's weights, when the term is
        multiplied by zero. A variable, not a Python flag, so that functions
        traced before a merge stay right after it, and a checkpoint of a
        merged model restores as merged. In a stack, one per layer
        (`[num_layers]`).

    >>> adapter = snt.lora.LoRA(input_size=4, output_size=3, rank=2)
    >>> adapter(tf.ones([5, 4])).shape
    TensorShape([5, 3])
    >>> float(tf.reduce_sum(tf.abs(adapter(tf.ones([5, 4])))))  # `b` is zero.
    0.0
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        rank: int,
        alpha: float | None = None,
        a_init: Callable[[Any, Any], Any] | None = None,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(name=name)
        input_size = checks.size("input_size", input_size)
        output_size = checks.size("output_size", output_size)
        self.rank = check_rank(rank, input_size, output_size)
        self.alpha = float(self.rank) if alpha is None else check_alpha(alpha)
        checks.initializer("a_init", a_init)
        dtype = checks.dtype("dtype", dtype, floating=True)
        if a_init is None:
            a_init = initializers.VarianceScaling(1.0, "fan_in", "uniform")
        self.input_size = input_size
        self.output_size = output_size
        self.merged = tf.Variable(tf.constant(False), trainable=False, name="merged")
        self.a = tf.Variable(
            tensors.initial_value("a_init", a_init, [input_size, self.rank], dtype),
            name="a",
        )
        self.b = tf.Variable(tf.zeros([self.rank, output_size], dtype), name="b")

    @property
    def scale(self) -> float:
        """`alpha / rank`, the factor of the adapter's term."""
        return self.alpha / self.rank

    def __call__(self, inputs: Any) -> tf.Tensor:
        """The adapter's term on its own, `(alpha / rank) * inputs @ a @ b`.

        Args:
          inputs: `[..., input_size]` floating point inputs (rank >= 2); in
            another dtype than the adapter's, `a` and `b` are cast to it.

        Returns:
          `[..., output_size]`, in the dtype of `inputs`.

        Raises:
          ValueError: for inputs of rank < 2 or another input size, or if
            the adapter is a stacked one (its layers' stack applies it).
          TypeError: for inputs that are not floating point.
        """
        if self.a.shape.rank != 2:
            raise errors.bad_value(
                "self",
                "must be an adapter of one layer to be called on its own; this "
                "one holds the adapters of every layer of an `snt.LayerStack` "
                "(the stack's layer applies them)",
                f"a of shape {self.a.shape.as_list()}",
            )
        shape, dtype = tensors.shape_and_dtype(inputs)
        if shape.rank is not None and shape.rank < 2:
            raise errors.bad_value("inputs", "must have rank >= 2", shape)
        if not dtype.is_floating:
            raise errors.bad_type("inputs", "must have a floating point dtype", inputs)
        if shape.rank is not None and shape[-1] not in (None, self.input_size):
            raise errors.bad_value(
                "inputs", f"must have last dimension {self.input_size}", shape
            )
        x = tf.convert_to_tensor(inputs)
        return self._term(x, None if x.dtype == self.a.dtype else x.dtype)

    @base.no_name_scope
    def _term(
        self, x: tf.Tensor, dtype: tf.DType | None, gate: bool = False
    ) -> tf.Tensor:
        """The term for `x`; `gate`: times zero when merged (read at run time)."""
        a = self.a if dtype is None else precision.cast(self.a, dtype)
        b = self.b if dtype is None else precision.cast(self.b, dtype)
        if x.shape.rank == 2:
            low = _MAT_MUL(a=x, b=a)
        else:
            low = tf.matmul(x, a)
        factor = tf.constant(self.scale, low.dtype)
        if gate:
            # `[N, rank]` is the smallest tensor on the way: scale it there.
            active = _CAST(x=_LOGICAL_NOT(x=self.merged), DstT=low.dtype)
            factor = _MUL(x=factor, y=active)
        if gate or self.scale != 1.0:
            low = _MUL(x=low, y=factor)
        return _MAT_MUL(a=low, b=b) if x.shape.rank == 2 else tf.matmul(low, b)

    @base.no_name_scope
    def add_to(
        self, x: tf.Tensor, outputs: tf.Tensor, dtype: tf.DType | None
    ) -> tf.Tensor:
        """`outputs` (the layer's `x @ w`) plus the term, unless merged.

        `dtype`: the compute dtype of the layer's policy (None: as stored).
        Eagerly a merged adapter adds nothing; a traced call adds the term
        times zero when merged, so that it stays right across merges.
        """
        if not isinstance(x, tf.Tensor):  # NumPy arrays, lists: as the matmul did.
            x = tf.convert_to_tensor(x, outputs.dtype)
        if tf.inside_function():
            return _ADD(x=outputs, y=self._term(x, dtype, gate=True))
        if self.merged.numpy():
            return outputs
        return _ADD(x=outputs, y=self._term(x, dtype))

    @base.no_name_scope
    def delta(self) -> tf.Tensor:
        """`(alpha / rank) * a @ b`: what merging adds to the layer's `w`
        (`[num_layers, input_size, output_size]` for a stacked adapter)."""
        return tf.matmul(self.a, self.b) * tf.constant(self.scale, self.a.dtype)


def check_rank(rank: Any, input_size: int, output_size: int) -> int:
    rank = checks.size("rank", rank)
    smaller = min(input_size, output_size)
    if rank > smaller:
        raise errors.bad_value(
            "rank",
            f"must be at most {smaller}, the smaller dimension of a "
            f"[{input_size}, {output_size}] weight",
            rank,
        )
    return rank


def check_alpha(alpha: Any) -> float:
    value = checks.real("alpha", alpha)
    if not math.isfinite(value) or value <= 0:
        raise errors.bad_value("alpha", "must be a positive finite number", alpha)
    return value


def add(
    module: Any,
    rank: int,
    alpha: float | None = None,
    *,
    types: Any = None,
    pattern: Any = None,
    a_init: Callable[[Any, Any], Any] | None = None,
) -> dict[str, LoRA]:
    """Adds low-rank adapters to the `snt.Linear`s of a built module tree.

    Each chosen `snt.Linear` (the module itself, or any in its tree: those of
    `snt.nets.MLP`, `snt.MultiHeadAttention`'s projections, a Transformer's
    blocks) gets an adapter `linear.lora` (see `snt.lora.LoRA`), and the
    whole tree is frozen (`snt.freeze`) except the adapters: the usual
    training loop over `module.trainable_variables` trains the adapters only
    and leaves every other variable unchanged. The model's outputs do not
    change until the adapters are trained (`b` starts at zero). Functions
    traced before must be traced again to see the adapters. A Linear inside
    an `snt.LayerStack` gets a stacked adapter, one per layer (see
    `snt.lora`), and its stack runs it.

    Args:
      module: A built `tf.Module` (called at least once): its weights must
        exist to size the adapters.
      rank: Inner size of each adapter, from 1 to the smaller dimension of
        every chosen weight.
      alpha: The term is scaled by `alpha / rank`. Default None means `rank`
        (a scale of 1).
      types: Only adapt the Linears that are, or sit inside, an instance of
        this class (or tuple of classes), e.g. `snt.MultiHeadAttention`.
        Default None: any.
      pattern: Only adapt the Linears whose name path (the prefix of their
        variables' names, e.g. `"transformer/block_0/attention/query"`, or
        `"transformer/stack/block/attention/query"` in a stacked one)
        contains a match of this regular expression (`re.search`). Default
        None: any.
      a_init: Initializer of each adapter's `a` (see `snt.lora.LoRA`).

    Returns:
      The new adapters by name path of their layer (as `snt.lora.adapters`).

    Raises:
      ValueError: for a rank below 1 or above a chosen weight's smaller
        dimension, filters that choose nothing, a module not built yet or
        without Linears, a Linear that already has an adapter, one inside
        nested `snt.LayerStack`s, or a stack's layer given without its stack.
        Nothing is changed then.
      TypeError: for arguments of the wrong type.

    >>> mlp = snt.nets.MLP([8, 2])
    >>> x = tf.ones([4, 3])
    >>> before = mlp(x)
    >>> adapters = snt.lora.add(mlp, rank=2)
    >>> sorted(adapters)
    ['mlp/linear_0', 'mlp/linear_1']
    >>> [v.name for v in mlp.trainable_variables]  # doctest: +NORMALIZE_WHITESPACE
    ['mlp/linear_0/lora/a:0', 'mlp/linear_0/lora/b:0',
     'mlp/linear_1/lora/a:0', 'mlp/linear_1/lora/b:0']
    >>> bool(tf.reduce_all(mlp(x) == before))
    True
    """
    module_filter.check_eager(module, "adapted")
    chosen = module_filter.select(module, (linear.Linear,), types, pattern)
    if alpha is not None:
        alpha = check_alpha(alpha)
    checks.initializer("a_init", a_init)
    rank = checks.size("rank", rank)
    for layer, stack in chosen:
        name = module_filter.name_path(layer)
        if getattr(layer, "w", None) is None:
            raise errors.bad_value(
                "module",
                f"must be built first (call it once): `{name}` has no weights yet",
                module,
            )
        module_filter.check_weight_rank(module, layer, "w", stack)
        if layer.lora is not None:
            raise errors.bad_value(
                "module",
                f"must not have adapters already: `{name}` has one (remove them "
                "first with `snt.lora.remove`)",
                module,
            )
        input_size, output_size = layer.w.shape.as_list()[-2:]
        try:
            check_rank(rank, input_size, output_size)
        except ValueError as e:
            raise errors.bad_value(
                "rank",
                f"must be at most {min(input_size, output_size)}, the smaller "
                f"dimension of the weight of `{name}`, [{input_size}, {output_size}]",
                rank,
            ) from e
    # Everything is checked: from here on nothing fails halfway.
    freezing.mark(
        [m for m in freezing.tree(module) if not vars(m).get(freezing.KEY)],
        _FROZEN_BY_LORA,
    )
    added: dict[str, LoRA] = {}
    for layer, stack in chosen:
        input_size, output_size = layer.w.shape.as_list()[-2:]
        dtype = _adapter_dtype(layer)
        make = functools.partial(
            _new_adapter, layer, input_size, output_size, rank, alpha, a_init, dtype
        )
        layer.lora = make() if stack is None else stack._new_stacked(make)
        added[module_filter.name_path(layer)] = layer.lora
    module_filter.restack(chosen)
    return added


def _new_adapter(layer: Any, *args: Any) -> LoRA:
    """`LoRA(*args)` named `lora` in `layer`'s name scope."""
    with layer.name_scope:
        return LoRA(*args, name="lora")


def _adapter_dtype(layer: Any) -> tf.DType:
    """The dtype the layer's kernel is computed in (its scales' if int8)."""
    dtype = getattr(layer, "w_scale", layer.w).dtype
    return dtype if dtype.is_floating else tf.float32


def _adapted(module: Any) -> list[module_filter.Chosen]:
    """The Linears of `module`'s tree that have an adapter, each with the
    `snt.LayerStack` holding it (ValueError if there are none)."""
    freezing.check_module(module)
    if not any(
        isinstance(m, linear.Linear) and m.lora is not None
        for m in freezing.tree(module)
    ):
        raise errors.bad_value(
            "module", "must have LoRA adapters (added by `snt.lora.add`)", module
        )
    return [
        found
        for found in module_filter.select(module, (linear.Linear,))
        if found.module.lora is not None
    ]


def adapters(module: Any) -> dict[str, LoRA]:
    """The adapters in `module`'s tree, by name path of their layer.

    A dict of `tf.Module`s, so `tf.train.Checkpoint(adapters=...)` saves
    the adapters alone (or use `snt.lora.save`).

    >>> linear = snt.Linear(4)
    >>> _ = linear(tf.ones([1, 4]))
    >>> _ = snt.lora.add(linear, rank=1)
    >>> snt.lora.adapters(linear)
    {'linear': LoRA(input_size=4, output_size=4, rank=1, name='lora')}
    """
    return {module_filter.name_path(m): m.lora for m, _ in _adapted(module)}


def _any_merged(adapter: LoRA) -> bool:
    """Whether the adapter (any layer of a stacked one) is merged."""
    return bool(tf.reduce_any(adapter.merged))


def _set_merged(adapter: LoRA, value: bool) -> None:
    adapter.merged.assign(tf.fill(tf.shape(adapter.merged), value))


def _in_weights(adapter: LoRA) -> tf.Tensor:
    """The adapter's term where merged (each layer of a stacked adapter by
    its own flag), zero elsewhere: what is in its layer's `w` now."""
    delta = adapter.delta()
    flags = tf.reshape(adapter.merged, adapter.merged.shape.as_list() + [1, 1])
    return tf.where(flags, delta, tf.zeros_like(delta))


def _unsafe(layer: Any, delta: tf.Tensor, sign: float) -> str | None:
    """Where `w + sign * delta` would hold NaN or inf that `w` does not: a
    description (`layer 3 of ...` in a stack), or None if nowhere."""
    w = tf.convert_to_tensor(layer.w)
    delta = tf.cast(delta, w.dtype)
    finite = tf.math.is_finite(w)
    ok = tf.math.is_finite(delta) & (tf.math.is_finite(w + sign * delta) | ~finite)
    name = f"`{module_filter.name_path(layer)}`"
    if w.shape.rank == 2:
        return None if bool(tf.reduce_all(ok)) else name
    bad = tf.where(~tf.reduce_all(ok, axis=[1, 2]))
    if bad.shape[0] == 0:
        return None
    return f"layer {int(bad[0, 0])} of {name}"


def _check_finite(
    module: Any,
    layers: list[Any],
    term: Callable[[LoRA], tf.Tensor],
    sign: float,
    action: str,
) -> None:
    """Refuses `action` if a layer's `w + sign * term(layer.lora)` is not
    finite (one layer's term at a time: no copy of every weight)."""
    for layer in layers:
        where = _unsafe(layer, term(layer.lora), sign)
        if where is None:
            continue
        if sign > 0:
            advice = (
                "drop the adapters with `snt.lora.remove`, or restore finite ones "
                "(`snt.lora.restore`, a checkpoint) first"
            )
        else:
            advice = (
                "keep the merged weights with `snt.lora.remove(module, "
                "keep_merged=True)`, or restore the adapters as they were when "
                "merged first"
            )
        raise errors.bad_value(
            "module",
            f"must have finite adapters to {action}: {where} has an adapter term "
            f"`(alpha / rank) * a @ b` that is NaN or inf, or makes its weights "
            f"overflow (a diverged run?); nothing was changed: {advice} (or pass "
            "`safe_merge=False` to write it anyway)",
            module,
        )


def merge(module: Any, *, safe_merge: bool = True) -> None:
    """Folds each adapter into its layer's weights: `w += (alpha / rank) * a @ b`.

    The outputs stay the same (up to float rounding) and cost a plain
    Linear's eagerly. The adapters stay, marked merged (their `merged`
    variable: functions traced before see it, checkpoints keep it), until
    `snt.lora.unmerge` takes them out of the weights again, or
    `snt.lora.remove(module, keep_merged=True)` drops them, leaving a plain
    model with the adapted weights (a traced call of a merged adapter still
    computes its small term, times zero: remove the adapters for the plain
    cost). Merge for inference or export, not for training.

    Args:
      module: The tree `snt.lora.add` adapted.
      safe_merge: Whether to check, before changing anything, that every
        adapter's term is finite and leaves its weights finite (where they
        were). Default True: an adapter holding NaN or inf (a diverged
        run, an overflow in bfloat16) would otherwise ruin the weights for
        good (`unmerge` and `remove` cannot take NaN out again). False
        skips the check (one reduction per weight).

    Raises:
      ValueError: if the tree has no adapters, or they are merged already, or
        a layer's weights are int8 (`snt.int8.quantize`: merge before
        quantizing), or (with `safe_merge`) an adapter's term is not finite,
        naming the first such layer. Nothing is changed then.

    >>> linear = snt.Linear(2)
    >>> _ = linear(tf.ones([1, 2]))
    >>> adapter = snt.lora.add(linear, rank=1)["linear"]
    >>> _ = adapter.b.assign([[float("nan"), 0.0]])
    >>> snt.lora.merge(linear)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `module` must have finite adapters to merge: `linear` has ...
    """
    module_filter.check_eager(module, "merged")
    safe_merge = checks.flag("safe_merge", safe_merge)
    layers = [layer for layer, _ in _adapted(module)]
    for layer in layers:
        name = module_filter.name_path(layer)
        if _any_merged(layer.lora):
            raise errors.bad_value(
                "module",
                f"must have unmerged adapters: `{name}`'s is merged already",
                module,
            )
        if not layer.w.dtype.is_floating:
            raise errors.bad_value(
                "module",
                f"must have floating point weights to merge into: `{name}` has "
                f"{layer.w.dtype.name} weights (merge before `snt.int8.quantize`)",
                module,
            )
        step = vars(layer).get("_weight_step")
        if step is not None:
            # `w` is not the kernel then (a normalisation divides it).
            raise errors.bad_value(
                "module",
                f"must have plain weights to merge into: `{name}` has "
                f"{weights.describe_step(step)}",
                module,
            )
    if safe_merge:
        _check_finite(module, layers, LoRA.delta, 1.0, "merge")
    for layer in layers:
        layer.w.assign_add(tf.cast(layer.lora.delta(), layer.w.dtype))
        _set_merged(layer.lora, True)


def unmerge(module: Any, *, safe_merge: bool = True) -> None:
    """Takes merged adapters out of the weights again: `w -= (alpha / rank) * a @ b`.

    What is subtracted is the adapters' term now: `a` and `b` are still
    variables, and if they changed since the merge (a training step, weight
    decay, an assignment) the weights do not come back exactly as they were.

    Args:
      module: The tree `snt.lora.add` adapted, merged by `snt.lora.merge`.
      safe_merge: As `merge`'s: whether to check first that every term is
        finite and leaves the weights finite. Default True (a term that is
        NaN now would ruin the weights, which hold the fine-tuned values).

    Raises:
      ValueError: if the tree has no adapters or they are not merged, or
        (with `safe_merge`) a term is not finite. Nothing is changed then.

    >>> linear = snt.Linear(2)
    >>> _ = linear(tf.ones([1, 3]))
    >>> before = linear.w.numpy()
    >>> _ = snt.lora.add(linear, rank=1)
    >>> _ = linear.lora.b.assign([[1.0, 2.0]])
    >>> snt.lora.merge(linear)
    >>> snt.lora.unmerge(linear)
    >>> bool(abs(linear.w.numpy() - before).max() < 1e-6)
    True
    """
    module_filter.check_eager(module, "unmerged")
    safe_merge = checks.flag("safe_merge", safe_merge)
    layers = [layer for layer, _ in _adapted(module)]
    for layer in layers:
        if not _any_merged(layer.lora):
            raise errors.bad_value(
                "module",
                f"must have merged adapters: `{module_filter.name_path(layer)}`'s "
                "is not merged",
                module,
            )
    _take_out(module, layers, safe_merge, "unmerge")


def _take_out(module: Any, layers: list[Any], safe_merge: bool, action: str) -> None:
    """Subtracts merged adapters' terms from their weights, checked first."""
    if safe_merge:
        _check_finite(module, layers, _in_weights, -1.0, action)
    for layer in layers:
        if _any_merged(layer.lora):
            layer.w.assign_sub(tf.cast(_in_weights(layer.lora), layer.w.dtype))
            _set_merged(layer.lora, False)


def remove(module: Any, *, keep_merged: bool = False, safe_merge: bool = True) -> None:
    """Removes the adapters and unfreezes what `snt.lora.add` froze.

    Args:
      module: The tree `snt.lora.add` adapted.
      keep_merged: What to do with merged adapters. Default False: take them
        out of the weights first (as `snt.lora.unmerge`), giving back the
        plain model as it was before `add`. True: keep the merged weights (a
        plain model with the fine-tuned weights, whose checkpoint has the
        original's layout).
      safe_merge: As `unmerge`'s, for the merged adapters taken out of the
        weights (with `keep_merged=False`). Default True.

    Raises:
      ValueError: if the tree has no adapters, or (with `safe_merge` and
        without `keep_merged`) a merged adapter's term is not finite.
        Nothing is changed then.

    >>> linear = snt.Linear(2)
    >>> _ = linear(tf.ones([1, 2]))
    >>> _ = snt.lora.add(linear, rank=1)
    >>> snt.lora.remove(linear)
    >>> linear.lora is None, len(linear.trainable_variables)
    (True, 2)
    """
    module_filter.check_eager(module, "changed")
    keep_merged = checks.flag("keep_merged", keep_merged)
    safe_merge = checks.flag("safe_merge", safe_merge)
    chosen = _adapted(module)
    layers = [layer for layer, _ in chosen]
    if not keep_merged:
        merged = [layer for layer in layers if _any_merged(layer.lora)]
        _take_out(module, merged, safe_merge, "take out of the weights")
    for layer in layers:
        del layer.lora
    module_filter.restack(chosen)
    freezing.mark(
        [
            m
            for m in freezing.tree(module)
            if vars(m).get(freezing.KEY) == _FROZEN_BY_LORA
        ],
        None,
        # The plain model is for inference or export: a step traced with the
        # adapters trains nothing of it, so there is nothing to warn about.
        warn=False,
    )


def save(module: Any, path: str) -> str:
    """Writes the adapters of `module`'s tree alone to a checkpoint at `path`.

    Returns:
      The checkpoint's path (as `tf.train.Checkpoint.write`).

    >>> import os, tempfile
    >>> mlp = snt.nets.MLP([4, 2])
    >>> _ = mlp(tf.ones([1, 3]))
    >>> _ = snt.lora.add(mlp, rank=1)
    >>> path = snt.lora.save(mlp, os.path.join(tempfile.mkdtemp(), "adapters"))
    >>> [name for name, _ in tf.train.list_variables(path)][1]
    'adapters/mlp.Slinear_0/a/.ATTRIBUTES/VARIABLE_VALUE'
    """
    return tf.train.Checkpoint(adapters=adapters(module)).write(path)


def restore(module: Any, path: str) -> None:
    """Reads adapters written by `snt.lora.save` into `module`'s adapters.

    Every adapter of the tree must be in the checkpoint with the same shapes
    (same rank, same layer sizes), and the checkpoint must hold no others;
    everything is checked before any value is read into a variable. Only
    `a` and `b` are read: the adapters must not be merged (their terms are
    in the weights then).

    Raises:
      ValueError: naming the first variable missing or of another shape, or
        if the adapters are merged.

    >>> import os, tempfile
    >>> mlp = snt.nets.MLP([4, 2])
    >>> _ = mlp(tf.ones([1, 3]))
    >>> _ = snt.lora.add(mlp, rank=1)
    >>> _ = mlp.submodules[0].lora.b.assign(tf.ones([1, 4]))
    >>> path = snt.lora.save(mlp, os.path.join(tempfile.mkdtemp(), "adapters"))
    >>> _ = mlp.submodules[0].lora.b.assign(tf.zeros([1, 4]))
    >>> snt.lora.restore(mlp, path)
    >>> mlp.submodules[0].lora.b.numpy().tolist()
    [[1.0, 1.0, 1.0, 1.0]]
    """
    module_filter.check_eager(module, "restored")
    found = adapters(module)
    for name, adapter in found.items():
        if _any_merged(adapter):
            raise errors.bad_value(
                "module",
                f"must have unmerged adapters to restore into: `{name}`'s is "
                "merged (`snt.lora.unmerge` first)",
                module,
            )
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    planned: list[tuple[tf.Variable, str]] = []
    expected: set[str] = set()
    for name, adapter in found.items():
        expected.add(checkpoint_key(name, "merged"))
        for attribute in ("a", "b"):
            variable = getattr(adapter, attribute)
            key = checkpoint_key(name, attribute)
            expected.add(key)
            where = f"{name}/lora/{attribute}"
            if key not in shapes:
                raise errors.bad_value(
                    "path",
                    f"must hold the adapter variable `{where}` of `module`, which "
                    "it does not (adapters saved from another model or filter?)",
                    path,
                )
            if list(shapes[key]) != variable.shape.as_list():
                raise errors.bad_value(
                    "path",
                    f"must hold `{where}` with shape {variable.shape.as_list()} "
                    f"(rank {adapter.rank}), not {list(shapes[key])} (adapters of "
                    "another rank or layer size)",
                    path,
                )
            planned.append((variable, key))
    extra = sorted(k for k in shapes if k.startswith("adapters/") and k not in expected)
    if extra:
        raise errors.bad_value(
            "path",
            f"must hold only adapters `module` has; it also holds `{extra[0]}`",
            path,
        )
    values = [reader.get_tensor(key) for _, key in planned]
    for (variable, _), value in zip(planned, values):
        variable.assign(tf.cast(value, variable.dtype))


def _escape(name: str) -> str:
    # TensorFlow's escaping of object names in checkpoint keys.
    return name.replace(".", "..").replace("/", ".S")


def checkpoint_key(name: str, attribute: str) -> str:
    """The key of adapter variable `attribute` of layer `name` in `save`'s file."""
    return f"adapters/{_escape(name)}/{attribute}/.ATTRIBUTES/VARIABLE_VALUE"
