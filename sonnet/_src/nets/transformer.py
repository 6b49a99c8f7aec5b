"""`snt.nets.Transformer` and `snt.nets.TransformerBlock`: pre-norm Transformers.

A block is `x + attention(norm(x))` followed by `x + mlp(norm(x))` (the
"pre-norm" arrangement of GPT-2 and most later models, which trains stably
even without a learning-rate warm-up: Xiong et al. 2020, arXiv:2002.04745). A
`Transformer` is `num_layers` blocks and a final norm. Token embeddings and
the output head are left to the user (`snt.Embed`, `snt.Linear`): see the
`Transformer` docstring.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Sequence
from typing import Any, NamedTuple

import tensorflow as tf

from sonnet._src import attention as attention_lib
from sonnet._src import (
    axis_norm,
    base,
    checks,
    errors,
    initializers,
    mlp_activation,
    precision,
    utils,
)
from sonnet._src import drop_path as drop_path_lib
from sonnet._src import dropout as dropout_lib
from sonnet._src import layer_stack as layer_stack_lib
from sonnet._src import linear as linear_lib
from sonnet._src import moe as moe_lib
from sonnet._src import remat as remat_lib
from sonnet._src import rms_norm as rms_norm_lib
from sonnet._src import rotary as rotary_lib

_ACTIVATIONS = mlp_activation.ACTIVATIONS
_NORMS = ("layer", "rms")


def _sizes(
    num_heads: Any, model_size: Any, key_size: Any, mlp_hidden_size: Any
) -> tuple[int, int, int, int]:
    """Resolves `(num_heads, model_size, key_size, mlp_hidden_size)`."""
    num_heads = checks.size("num_heads", num_heads)
    model_size = checks.optional_size("model_size", model_size)
    key_size = checks.optional_size("key_size", key_size)
    if model_size is None:
        if key_size is None:
            raise errors.bad_value(
                "model_size",
                "must be given, or `key_size` (then `model_size` is "
                "`num_heads * key_size`)",
                model_size,
            )
        model_size = num_heads * key_size
    elif key_size is None:
        if model_size % num_heads:
            raise errors.bad_value(
                "model_size",
                f"must be a multiple of `num_heads` ({num_heads}) when `key_size` "
                "is not given (the default `key_size` is `model_size // num_heads`)",
                model_size,
            )
        key_size = model_size // num_heads
    if mlp_hidden_size is None:
        mlp_hidden_size = 4 * model_size
    mlp_hidden_size = checks.size("mlp_hidden_size", mlp_hidden_size)
    return num_heads, model_size, key_size, mlp_hidden_size


def _dropout_rate(value: Any) -> tuple[Any, bool]:
    """The checked rate and whether dropout does anything."""
    rate = dropout_lib.check_rate("dropout_rate", value)
    used = not (isinstance(rate, numbers.Real) and rate == 0)
    return rate, used


class _BlockArgs(NamedTuple):
    """A block's constructor arguments, checked and resolved."""

    num_heads: int
    model_size: int
    key_size: int
    mlp_hidden_size: int
    activation: str
    norm: str
    dropout_rate: Any
    use_dropout: bool
    causal: bool
    with_bias: bool
    norm_eps: float | None
    attention_bias: bool
    mlp_bias: bool
    attention_output_bias: bool
    qk_norm: bool
    window: int | None
    rotary_scaling: dict[str, Any] | None


def _norm_eps(value: Any) -> float | None:
    if value is None:
        return None
    eps = checks.real("norm_eps", value, allow_tensor=False)
    if eps < 0:
        raise errors.bad_value("norm_eps", "must not be negative", value)
    return eps


def _optional_flag(argument: str, value: Any, default: bool) -> bool:
    return default if value is None else checks.flag(argument, value)


def _block_args(
    num_heads: Any,
    model_size: Any,
    key_size: Any,
    mlp_hidden_size: Any,
    activation: Any,
    norm: Any,
    dropout_rate: Any,
    causal: Any,
    w_init: Any,
    with_bias: Any,
    norm_eps: Any = None,
    attention_bias: Any = None,
    mlp_bias: Any = None,
    attention_output_bias: Any = None,
    qk_norm: Any = False,
    window: Any = None,
    rotary_scaling: Any = None,
) -> _BlockArgs:
    """The checks of `TransformerBlock` and `Transformer` (one place for both)."""
    sizes = _sizes(num_heads, model_size, key_size, mlp_hidden_size)
    activation = checks.choice("activation", activation, _ACTIVATIONS)
    norm = checks.choice("norm", norm, _NORMS)
    rate, use_dropout = _dropout_rate(dropout_rate)
    causal = checks.flag("causal", causal)
    with_bias = checks.flag("with_bias", with_bias)
    checks.initializer("w_init", w_init)
    attention_bias = _optional_flag("attention_bias", attention_bias, with_bias)
    return _BlockArgs(
        *sizes,
        activation,
        norm,
        rate,
        use_dropout,
        causal,
        with_bias,
        _norm_eps(norm_eps),
        attention_bias,
        _optional_flag("mlp_bias", mlp_bias, with_bias),
        _optional_flag("attention_output_bias", attention_output_bias, attention_bias),
        checks.flag("qk_norm", qk_norm),
        checks.optional_size("window", window),
        rotary_lib.check_scaling(rotary_scaling, "rotary_scaling"),
    )


def _layer_pattern(
    argument: str, value: Any, num_layers: int, stacked: bool, what: str
) -> list[int | None]:
    """Each layer's `window` or `num_experts` (`what` in words): one for all,
    or a sequence cycled over them."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return [checks.optional_size(argument, value)] * num_layers
    if not value:
        raise errors.bad_value(
            argument, "must be an int, None or a non-empty sequence of them", value
        )
    pattern = [checks.optional_size(argument, v) for v in value]
    values = [pattern[i % len(pattern)] for i in range(num_layers)]
    if stacked and len(set(values)) > 1:
        raise errors.bad_value(
            argument,
            f"must give every layer the same {what} with `stacked=True` (the "
            "stacked blocks share one configuration; use `stacked=False` for a "
            "per-layer pattern)",
            value,
        )
    return values


def _expert_options(has_experts: bool, **options: Any) -> dict[str, Any]:
    """The mixture-of-experts options that were given (not None; a true
    `shared_expert`), as `snt.MixtureOfExperts` arguments, which checks them.

    Refused when no layer has experts (`num_experts` all None): they would
    be ignored.
    """
    given = {k: v for k, v in options.items() if v is not None}
    if checks.flag("shared_expert", given.pop("shared_expert", False)):
        given["shared_expert"] = True
    if not has_experts and given:
        argument, value = next(iter(given.items()))
        raise errors.bad_value(
            argument,
            "is an option of mixture-of-experts MLPs: give `num_experts` too "
            "(default None: dense MLPs)",
            value,
        )
    return given


def _aux_flag(value: Any, cache: Any, has_experts: bool) -> bool:
    """The checked `return_aux_losses` of a call."""
    aux = checks.flag("return_aux_losses", value)
    if aux and not has_experts:
        raise errors.bad_value(
            "return_aux_losses",
            "must be False without experts (`num_experts=None`): dense MLPs have "
            "no auxiliary losses",
            value,
        )
    if aux and cache is not None:
        raise errors.bad_value(
            "return_aux_losses",
            "must be False with a `cache`: the auxiliary losses are training "
            "losses, and decoding does not need them",
            value,
        )
    return aux


def _block_options(**options: Any) -> dict[str, Any]:
    """The blocks' optional arguments that were given (not None), so that
    the blocks' reprs show only those."""
    return {k: v for k, v in options.items() if v is not None}


def _training(is_training: Any) -> bool | tf.Tensor:
    return checks.mode_flag("is_training", is_training)


def _check_inputs(inputs: Any, model_size: int) -> tf.Tensor:
    """`inputs` as a float tensor `[batch, time, model_size]`, else a clean error."""
    if inputs is None or isinstance(inputs, (str, bytes)):
        raise errors.bad_type("inputs", "must be a float tensor", inputs)
    inputs = utils.to_tensor("inputs", inputs)
    if not inputs.dtype.is_floating:
        raise errors.bad_type("inputs", "must be a floating point tensor", inputs)
    shape = inputs.shape
    if shape.rank is not None and shape.rank != 3:
        raise errors.bad_value(
            "inputs", "must have rank 3: [batch, time, model_size]", inputs
        )
    if shape.rank is not None and shape[-1] not in (None, model_size):
        raise errors.bad_value(
            "inputs",
            f"must have a last dimension of `model_size` ({model_size})",
            inputs,
        )
    return inputs


def _check_causal(causal: bool, cache: Any) -> None:
    # With a cache, attention is causal whatever `causal` says: an encoder
    # would silently compute something else than without the cache.
    if cache is not None and not causal:
        raise errors.bad_value(
            "cache",
            "is only for decoding with a causal model (`causal=True`)",
            "a cache for a model with causal=False",
        )


class TransformerBlock(base.Module):
    """One pre-norm Transformer layer: attention, then an MLP, each residual.

    `x = x + dropout(attention(norm(x)))`, then
    `x = x + dropout(mlp(norm(x)))`. The attention is an
    `snt.MultiHeadAttention` (self-attention); the MLP is
    `mlp_out(activation(mlp_in(x)))`, or with `activation="swiglu"`
    `mlp_out(silu(mlp_gate(x)) * mlp_in(x))` (Shazeer 2020,
    arXiv:2002.05202); with `num_experts` it is an `snt.MixtureOfExperts`
    of such MLPs. Stack blocks with `snt.nets.Transformer`, which documents
    every argument; a block takes the same ones but `num_layers`, `stacked`
    and `remat` (and `window` and `num_experts` are one value, not a
    per-layer pattern).

    Attributes (submodules; these names are their checkpoint paths):
    `attention_norm`, `attention`, `mlp_norm`, `mlp_in`, `mlp_gate` (SwiGLU
    only), `mlp_out`; with `num_experts`, `mlp_experts` (an
    `snt.MixtureOfExperts`) instead of `mlp_in`, `mlp_gate` and `mlp_out`.

    Shapes:
      inputs `[batch, time, model_size]` -> outputs of the same shape.

    >>> block = snt.nets.TransformerBlock(num_heads=2, model_size=8)
    >>> block(tf.ones([3, 5, 8])).shape
    TensorShape([3, 5, 8])
    >>> len(block.variables)  # 2 norms x 2, attention 4 x 2, MLP 2 x 2.
    16
    """

    def __init__(
        self,
        num_heads: int,
        model_size: int | None = None,
        key_size: int | None = None,
        mlp_hidden_size: int | None = None,
        num_kv_heads: int | None = None,
        activation: str = "gelu",
        norm: str = "layer",
        dropout_rate: Any = 0.0,
        causal: bool = False,
        rotary: bool = False,
        rotary_base: float = 10000.0,
        w_init: initializers.Initializer | None = None,
        with_bias: bool = True,
        norm_eps: float | None = None,
        attention_bias: bool | None = None,
        mlp_bias: bool | None = None,
        attention_output_bias: bool | None = None,
        qk_norm: bool = False,
        window: int | None = None,
        rotary_scaling: dict[str, Any] | None = None,
        drop_path_rate: Any = 0.0,
        chunked: bool | None = None,
        chunk_size: int = 512,
        num_experts: int | None = None,
        top_k: int | None = None,
        gating: str | None = None,
        normalize_gates: bool | None = None,
        capacity_factor: float | None = None,
        shared_expert: bool = False,
        attention_dropout_rate: Any = None,
        name: str | None = None,
    ):
        drop_path_rate = drop_path_lib.check_rate("drop_path_rate", drop_path_rate)
        if attention_dropout_rate is not None:
            attention_dropout_rate = dropout_lib.check_rate(
                "attention_dropout_rate", attention_dropout_rate
            )
        num_experts = checks.optional_size("num_experts", num_experts)
        experts = _expert_options(
            num_experts is not None,
            top_k=top_k,
            gating=gating,
            normalize_gates=normalize_gates,
            capacity_factor=capacity_factor,
            shared_expert=shared_expert,
        )
        args = _block_args(
            num_heads,
            model_size,
            key_size,
            mlp_hidden_size,
            activation,
            norm,
            dropout_rate,
            causal,
            w_init,
            with_bias,
            norm_eps,
            attention_bias,
            mlp_bias,
            attention_output_bias,
            qk_norm,
            window,
            rotary_scaling,
        )
        super().__init__(name=name)
        self.num_heads = args.num_heads
        self.model_size = args.model_size
        self.key_size = args.key_size
        self.mlp_hidden_size = args.mlp_hidden_size
        self.activation = args.activation
        self.norm = args.norm
        self.dropout_rate = args.dropout_rate
        self.causal = args.causal
        self.drop_path_rate = drop_path_rate
        self.num_experts = num_experts
        self.attention_dropout_rate = attention_dropout_rate
        self._use_dropout = args.use_dropout
        self.attention_norm = _norm(args.norm, "attention_norm", args.norm_eps)
        self.attention = attention_lib.MultiHeadAttention(
            num_heads=args.num_heads,
            key_size=args.key_size,
            model_size=args.model_size,
            num_kv_heads=num_kv_heads,
            w_init=w_init,
            with_bias=args.attention_bias,
            rotary=rotary,
            rotary_base=rotary_base,
            rotary_scaling=args.rotary_scaling,
            output_bias=args.attention_output_bias,
            qk_norm=args.qk_norm,
            window=args.window,
            chunked=chunked,
            chunk_size=chunk_size,
            dropout_rate=attention_dropout_rate,
            name="attention",
            **({} if args.norm_eps is None else {"qk_norm_eps": args.norm_eps}),
        )
        self.mlp_norm = _norm(args.norm, "mlp_norm", args.norm_eps)
        if num_experts is None:

            def linear(size: int, name: str) -> linear_lib.Linear:
                return linear_lib.Linear(
                    size, with_bias=args.mlp_bias, w_init=w_init, name=name
                )

            self.mlp_in = linear(args.mlp_hidden_size, "mlp_in")
            if args.activation == "swiglu":
                self.mlp_gate = linear(args.mlp_hidden_size, "mlp_gate")
            self.mlp_out = linear(args.model_size, "mlp_out")
        else:
            self.mlp_experts = moe_lib.MixtureOfExperts(
                num_experts,
                args.mlp_hidden_size,
                activation=args.activation,
                with_bias=args.mlp_bias,
                w_init=w_init,
                name="mlp_experts",
                **experts,
            )

    @utils.no_autograph
    def __call__(
        self,
        inputs: tf.Tensor,
        *,
        is_training: Any = False,
        mask: tf.Tensor | None = None,
        cache: attention_lib.AttentionCache | None = None,
        return_aux_losses: bool = False,
    ) -> Any:
        """Applies the block.

        Args:
          inputs: A float tensor `[batch, time, model_size]`.
          is_training: Whether to apply dropout (a Python bool or a scalar
            boolean tensor); default False. Ignored without `dropout_rate`.
          mask: Optional attention mask, as for `snt.MultiHeadAttention`.
          cache: Optional `snt.AttentionCache` (from `initial_cache`) holding
            the keys and values of earlier positions; `inputs` are then the
            next positions. Only with `causal=True`.
          return_aux_losses: Whether to return the mixture of experts'
            auxiliary losses too (default False); only with `num_experts`,
            and not with `cache`.

        Returns:
          The outputs `[batch, time, model_size]`; with `cache` the pair
          `(outputs, new_cache)`, with `return_aux_losses=True` the pair
          `(outputs, aux_losses)` (as `snt.MixtureOfExperts` returns them).
        """
        training = _training(is_training)
        inputs = _check_inputs(inputs, self.model_size)
        _check_causal(self.causal, cache)
        aux = return_aux_losses is not False and _aux_flag(
            return_aux_losses, cache, self.num_experts is not None
        )
        policy = self._precision
        if policy is None:
            x, new_cache, losses = self._forward(
                inputs, training, mask, cache, None, aux
            )
        else:
            # Under a `snt.precision` policy the residual stream is in its
            # compute dtype (the submodules, which have the policy too, keep
            # their sensitive parts in float32), and the outputs in its output
            # dtype.
            compute = policy.compute_dtype
            x, new_cache, losses = self._forward(
                precision.cast(inputs, compute), training, mask, cache, compute, aux
            )
            x = precision.cast_outputs(policy, x)
        if cache is not None:
            return x, new_cache
        return (x, losses) if aux else x

    def _forward(
        self,
        x: tf.Tensor,
        training: bool | tf.Tensor,
        mask: tf.Tensor | None,
        cache: attention_lib.AttentionCache | None,
        compute: tf.DType | None,
        aux: bool,
    ) -> tuple[tf.Tensor, Any, dict[str, tf.Tensor] | None]:
        """`(outputs, new_cache or None, aux_losses if aux else None)`."""
        h = self.attention_norm(x)
        new_cache = None
        if self.attention_dropout_rate is not None:  # Attention-weight dropout.
            h = self.attention(
                h, mask=mask, causal=self.causal, cache=cache, is_training=training
            )
            if cache is not None:
                h, new_cache = h
        elif cache is None:
            h = self.attention(h, mask=mask, causal=self.causal)
        else:
            h, new_cache = self.attention(h, mask=mask, causal=self.causal, cache=cache)
        if compute is not None:  # A policy's output dtype back to its compute one.
            h = precision.cast(h, compute)
        x = x + self._residual(h, training)
        losses = None
        if self.num_experts is None:
            h = self._mlp(x)
        elif aux:
            h, losses = self.mlp_experts(self.mlp_norm(x), return_aux_losses=True)
        else:
            h = self.mlp_experts(self.mlp_norm(x))
        if compute is not None:
            h = precision.cast(h, compute)
        x = x + self._residual(h, training)
        return x, new_cache, losses

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _mlp(self, x: tf.Tensor) -> tf.Tensor:
        """The dense MLP of `mlp_norm(x)`."""
        # The MLP sees every position as one row of a matrix: TensorFlow's
        # gradient of a `[B, T, D] x [D, E]` batch matmul with respect to the
        # weights is one matmul per example and a sum, about twice the work
        # of one `[B * T, D] x [D, E]` matmul.
        shape = x.shape if x.shape.is_fully_defined() else tf.shape(x)
        h = tf.reshape(self.mlp_norm(x), [-1, self.model_size])
        gate = self.mlp_gate(h) if self.activation == "swiglu" else None
        h = mlp_activation.hidden(self.activation, self.mlp_in(h), gate)
        return tf.reshape(self.mlp_out(h), shape)

    @base.no_name_scope
    def _residual(self, h: tf.Tensor, training: bool | tf.Tensor) -> tf.Tensor:
        """A branch's output on its way to the residual stream: dropout, then
        the whole branch dropped for some examples (`drop_path_rate`)."""
        h = self._dropout(h, training)
        if self.drop_path_rate:
            h = drop_path_lib.drop_path(h, self.drop_path_rate, training)
        return h

    @base.no_name_scope
    def _dropout(self, x: tf.Tensor, training: bool | tf.Tensor) -> tf.Tensor:
        if not self._use_dropout:
            return x
        return dropout_lib.when_training(x, self.dropout_rate, training)

    def initial_cache(
        self, batch_size: Any, max_length: Any, dtype: Any = None
    ) -> attention_lib.AttentionCache:
        """An empty decoding cache for this block's attention.

        Args:
          batch_size: Number of sequences decoded together.
          max_length: Most positions the cache holds.
          dtype: Dtype of the cached keys and values (that of the inputs);
            default None means float32, or under a `snt.precision` policy its
            compute dtype.

        Returns:
          An `snt.AttentionCache` with nothing filled in yet.
        """
        return self.attention.initial_cache(batch_size, max_length, dtype)


def _stacked_cache(
    cache: attention_lib.AttentionCache, num_layers: int
) -> attention_lib.AttentionCache:
    """`cache`'s fields as tensors, checked to have a `num_layers` axis."""
    fields = []
    for field, value in zip(cache._fields, cache):
        value = utils.to_tensor("cache", value)
        if value.shape.rank == 0 or value.shape[:1] not in ([None], [num_layers]):
            raise errors.bad_value(
                "cache",
                f"must have a leading num_layers={num_layers} axis in every field "
                "(from `initial_cache` of a stacked Transformer)",
                f"{field}: {value.dtype.name}{value.shape}",
            )
        fields.append(value)
    return attention_lib.AttentionCache(*fields)


def _norm(
    kind: str, name: str, eps: float | None = None
) -> axis_norm.LayerNorm | rms_norm_lib.RMSNorm:
    # Without `norm_eps`, each norm's own default (and repr).
    extra = {} if eps is None else {"eps": eps}
    if kind == "rms":
        return rms_norm_lib.RMSNorm(axis=-1, name=name, **extra)
    return axis_norm.LayerNorm(
        axis=-1, create_scale=True, create_offset=True, name=name, **extra
    )


class Transformer(base.Module):
    """A stack of pre-norm Transformer blocks and a final norm.

    Maps a sequence of vectors `[batch, time, model_size]` to another of the
    same shape through `num_layers` `snt.nets.TransformerBlock`s (named
    `block_0`, ...) and a final norm (`final_norm`). With `causal=False` it
    is an encoder (every position attends to every other); with
    `causal=True` a decoder (position `t` attends to positions `<= t` only),
    which can generate one position at a time with a cache of the keys and
    values computed so far (`initial_cache`).

    The token embedding and the output head are not part of it. A language
    model is, for example::

        embed = snt.Embed(vocab_size, model_size)
        transformer = snt.nets.Transformer(4, 4, model_size, causal=True,
                                           rotary=True)
        head = snt.Linear(vocab_size)
        logits = head(transformer(embed(tokens)))

    (with `rotary=True` no position embedding is needed; otherwise add one to
    `embed(tokens)`). `snt.nets.CausalLM` is this model as a module, with
    learned positions and tied weights as options (a tied head should not
    be `tf.matmul(outputs, embed.embeddings, transpose_b=True)` after
    `embed(tokens)`: see `snt.Embed` on TensorFlow's copy on read).

    Args:
      num_layers: Number of blocks, a positive int.
      num_heads: Number of attention heads (query heads), a positive int.
      model_size: Size of the inputs, outputs and residual stream. Default
        None means `num_heads * key_size` (then `key_size` must be given).
      key_size: Size of each head's queries and keys (and values). Default
        None means `model_size // num_heads` (then `model_size` must be a
        multiple of `num_heads`).
      mlp_hidden_size: Hidden size of each block's MLP; default None means
        `4 * model_size` (Vaswani et al. 2017, arXiv:1706.03762).
      num_kv_heads: Number of key/value heads, a divisor of `num_heads`
        (grouped-query attention, Ainslie et al. 2023, arXiv:2305.13245);
        default None means `num_heads` (plain multi-head attention).
      activation: The MLP's nonlinearity: `"gelu"` (default: the exact,
        erf-based `tf.nn.gelu`, as in BERT), `"gelu_tanh"` (its tanh
        approximation, `tf.nn.gelu(x, approximate=True)`, as in GPT-2),
        `"relu"`, or `"swiglu"` (a
        gated MLP with two input projections, `silu(mlp_gate(x)) *
        mlp_in(x)`, as in LLaMA; it has 1.5 x the MLP parameters for the
        same `mlp_hidden_size`).
      norm: `"layer"` (default: `snt.LayerNorm` with scale and offset) or
        `"rms"` (`snt.RMSNorm`).
      dropout_rate: Dropout rate on the output of every attention and MLP
        before it is added to the residual stream, applied only when
        `is_training` is true; default 0 means no dropout.
      causal: Whether position `t` only attends to positions `<= t`
        (a decoder); default False (an encoder).
      rotary: Whether attention uses rotary position embeddings on queries
        and keys (Su et al. 2021, arXiv:2104.09864); default False.
      rotary_base: The rotary embeddings' base wavelength (default 10000).
      w_init: Initializer of every weight matrix; default None means each
        `snt.Linear`'s default (truncated normal, stddev `1 / sqrt(fan_in)`).
      with_bias: Whether the projections have biases (default True).
      stacked: Whether the blocks' parameters are stored stacked, in one
        `snt.LayerStack` (attribute `stack`, variables of shape
        `[num_layers, ...]` under `stack/layer/...`), and run in a loop whose
        body is traced once: tracing and the first result cost about one
        block's worth whatever the depth. Default False: one
        `snt.nets.TransformerBlock` per layer in `blocks` (`block_0`, ...).
        Outputs are the same for the same weights; the checkpoints differ,
        and `snt.nets.copy_transformer_weights` converts between the two.
        With it, `initial_cache` returns one `snt.AttentionCache` whose
        fields have a leading `num_layers` axis.
      remat: Whether each block's activations are recomputed in the
        backward pass instead of being kept (`snt.remat`): less memory for
        about one more forward pass of compute. Default False. Not with
        dropout while training: the recomputation would draw other random
        numbers (`snt.remat` refuses that inside `tf.function`).
      norm_eps: The epsilon of every norm (pretrained models fix it, e.g.
        1e-5 for GPT-2 and Llama). Default None means each norm's default
        (`snt.LayerNorm`'s 1e-5, `snt.RMSNorm`'s 1e-6).
      attention_bias: Whether the attention projections have biases.
        Default None means `with_bias`.
      mlp_bias: Whether the MLP's projections have biases. Default None
        means `with_bias`.
      attention_output_bias: Whether the attention's `output` projection
        has a bias; default None means `attention_bias` (Qwen2: biases on
        the query, key and value projections only).
      qk_norm: Whether queries and keys are RMS-normalized per head (as
        `snt.MultiHeadAttention`'s `qk_norm`, with `norm_eps`); default
        False.
      window: Sliding-window attention: position `t` attends to positions
        `t - window < s <= t` (Mistral's `sliding_window`). Default None: all
        earlier positions. A sequence of windows (ints or None) is a
        per-layer pattern cycled over the blocks: `[256, None]` makes blocks
        0, 2, ... local and 1, 3, ... global (as Gemma 2). With
        `stacked=True` the layers share one configuration, so a pattern
        must give every layer the same window. Windowed blocks decode with
        a ring cache of `min(max_length, window)` slots (`initial_cache`).
      rotary_scaling: Frequency scaling of the rotary embeddings (as
        `snt.apply_rotary_embedding`'s `scaling`, e.g. Llama 3.1's
        `{"rope_type": "llama3", ...}`); default None.
      drop_path_rate: Stochastic depth (Huang et al. 2016, arXiv:1603.09382):
        while training, each block's attention and MLP outputs are dropped
        for some examples (`snt.drop_path`), at rates rising linearly from
        0 for the first block to this for the last; a number in `[0, 1)`,
        default 0 (none). A block takes its own rate. Unstacked only.
      chunked: Whether attention runs chunk by chunk (memory-efficient
        attention), as `snt.MultiHeadAttention`'s `chunked`: default None
        means when a call's `time * S` exceeds 2**22 and both are static;
        True always, False never. The outputs are the same either way.
      chunk_size: Queries per block and keys per chunk of chunked attention
        (default 512, as `snt.MultiHeadAttention`).
      num_experts: Number of experts of each block's MLP: a positive int
        makes every MLP an `snt.MixtureOfExperts` (attribute `mlp_experts`,
        variables `block_0/mlp_experts/w_in`, `.../router/w`, ...) of experts
        with the blocks' `activation`, `mlp_hidden_size`, `mlp_bias` and
        `w_init`. Default None: dense MLPs. A sequence (ints or None) is a
        per-layer pattern cycled over the blocks, as `window`'s: `[None, 8]`
        makes blocks 1, 3, ... mixtures of 8 experts (every other layer, as
        GShard and the Switch Transformer). With `stacked=True` every layer
        must get the same.
      top_k: Experts per token (`snt.MixtureOfExperts`' `top_k`, at most
        `num_experts`); default None means its default, 2.
      gating: `"softmax"` or `"sigmoid"` (`snt.MixtureOfExperts`' `gating`);
        default None means `"softmax"`.
      normalize_gates: As `snt.MixtureOfExperts`' (default None: True for
        `top_k > 1`).
      capacity_factor: A positive number: each expert takes at most that
        multiple of its even share of a call's tokens and the others are
        dropped (static shapes: XLA compiles it); default None: dropless
        (not under XLA). A call's capacity counts that call's tokens, so
        decoding one position at a time may drop other assignments than a
        call over the whole sequence; dropless decoding equals it.
      shared_expert: Whether each mixture has a shared expert (a dense MLP
        of `mlp_hidden_size` every token runs through); default False.
        The options `top_k` to `shared_expert` need `num_experts`.
      attention_dropout_rate: Dropout of every block's attention weights
        while training (`snt.MultiHeadAttention`'s `dropout_rate`: the
        same weights dropped in its dense and chunked paths), a number in
        `[0, 1)` or a scalar float tensor. Default None: none (as GPT-2 and
        Llama train; `dropout_rate` drops the residual branches).
      name: Module name (default `transformer`).

    Shapes:
      inputs `[batch, time, model_size]` -> outputs of the same shape.

    >>> transformer = snt.nets.Transformer(
    ...     num_layers=2, num_heads=2, model_size=8, causal=True)
    >>> x = tf.random.normal([3, 5, 8])
    >>> transformer(x).shape
    TensorShape([3, 5, 8])

    Decoding one position at a time with a cache gives the same outputs:

    >>> cache = transformer.initial_cache(batch_size=3, max_length=5)
    >>> steps = []
    >>> for t in range(5):
    ...     y, cache = transformer(x[:, t:t + 1], cache=cache)
    ...     steps.append(y)
    >>> bool(tf.reduce_all(
    ...     tf.abs(tf.concat(steps, axis=1) - transformer(x)) < 1e-4))
    True

    With mixture-of-experts MLPs, a training step adds their auxiliary
    losses, summed over the blocks:

    >>> moe = snt.nets.Transformer(
    ...     num_layers=2, num_heads=2, model_size=8, num_experts=4, top_k=2)
    >>> y, aux_losses = moe(x, return_aux_losses=True)
    >>> y.shape, sorted(aux_losses)
    (TensorShape([3, 5, 8]), ['load_balancing', 'router_z'])
    """

    _TF_MODULE_IGNORED_PROPERTIES = base.Module._TF_MODULE_IGNORED_PROPERTIES | {
        "_block_tuple",
        "_block_calls",
    }
    _block_tuple: tuple[TransformerBlock, ...]
    _block_calls: tuple[Any, ...]

    def __init__(
        self,
        num_layers: int,
        num_heads: int,
        model_size: int | None = None,
        key_size: int | None = None,
        mlp_hidden_size: int | None = None,
        num_kv_heads: int | None = None,
        activation: str = "gelu",
        norm: str = "layer",
        dropout_rate: Any = 0.0,
        causal: bool = False,
        rotary: bool = False,
        rotary_base: float = 10000.0,
        w_init: initializers.Initializer | None = None,
        with_bias: bool = True,
        stacked: bool = False,
        remat: bool = False,
        norm_eps: float | None = None,
        attention_bias: bool | None = None,
        mlp_bias: bool | None = None,
        attention_output_bias: bool | None = None,
        qk_norm: bool = False,
        window: int | None | Sequence[int | None] = None,
        rotary_scaling: dict[str, Any] | None = None,
        drop_path_rate: Any = 0.0,
        chunked: bool | None = None,
        chunk_size: int = 512,
        num_experts: int | None | Sequence[int | None] = None,
        top_k: int | None = None,
        gating: str | None = None,
        normalize_gates: bool | None = None,
        capacity_factor: float | None = None,
        shared_expert: bool = False,
        attention_dropout_rate: Any = None,
        name: str | None = None,
    ):
        num_layers = checks.size("num_layers", num_layers)
        stacked = checks.flag("stacked", stacked)
        remat = checks.flag("remat", remat)
        drop_path_rate = drop_path_lib.check_rate("drop_path_rate", drop_path_rate)
        if stacked and drop_path_rate:
            raise errors.bad_value(
                "drop_path_rate",
                "must be 0 with `stacked=True`: the schedule gives each block its "
                "own rate, and stacked blocks share one configuration (use "
                "`stacked=False`)",
                drop_path_rate,
            )
        windows = _layer_pattern("window", window, num_layers, stacked, "window")
        experts = _layer_pattern(
            "num_experts", num_experts, num_layers, stacked, "number of experts"
        )
        expert_options = _expert_options(
            any(e is not None for e in experts),
            top_k=top_k,
            gating=gating,
            normalize_gates=normalize_gates,
            capacity_factor=capacity_factor,
            shared_expert=shared_expert,
        )
        args = _block_args(
            num_heads,
            model_size,
            key_size,
            mlp_hidden_size,
            activation,
            norm,
            dropout_rate,
            causal,
            w_init,
            with_bias,
            norm_eps,
            attention_bias,
            mlp_bias,
            attention_output_bias,
            qk_norm,
            windows[0] if len(set(windows)) == 1 else None,
            rotary_scaling,
        )
        super().__init__(name=name)
        self.num_layers = num_layers
        self.model_size = args.model_size
        self.causal = args.causal
        self.stacked = stacked
        self.remat = remat
        make_block = functools.partial(
            TransformerBlock,
            num_heads=args.num_heads,
            model_size=args.model_size,
            key_size=args.key_size,
            mlp_hidden_size=args.mlp_hidden_size,
            num_kv_heads=num_kv_heads,
            activation=args.activation,
            norm=args.norm,
            dropout_rate=args.dropout_rate,
            causal=args.causal,
            rotary=rotary,
            rotary_base=rotary_base,
            w_init=w_init,
            with_bias=args.with_bias,
            **_block_options(
                norm_eps=args.norm_eps,
                attention_bias=None if attention_bias is None else args.attention_bias,
                mlp_bias=None if mlp_bias is None else args.mlp_bias,
                attention_output_bias=None
                if attention_output_bias is None
                else args.attention_output_bias,
                qk_norm=args.qk_norm or None,
                window=args.window,
                rotary_scaling=args.rotary_scaling,
                attention_dropout_rate=attention_dropout_rate,
            ),
            chunked=chunked,
            chunk_size=chunk_size,
        )

        def block_experts(count: int | None) -> dict[str, Any]:
            if count is None:
                return {}
            return {"num_experts": count, **expert_options}

        if stacked:
            self.stack = layer_stack_lib.LayerStack(
                functools.partial(
                    make_block, name="block", **block_experts(experts[0])
                ),
                num_layers,
                remat=remat,
                name="stack",
            )
            blocks: tuple[TransformerBlock, ...] = ()
        else:
            # Stochastic depth rises linearly over the blocks (timm's).
            rates = drop_path_lib.linear_schedule(drop_path_rate, num_layers)
            self.blocks = [
                make_block(
                    name=f"block_{i}",
                    **_block_options(drop_path_rate=r or None, window=w),
                    **block_experts(e),
                )
                for i, (r, w, e) in enumerate(zip(rates, windows, experts, strict=True))
            ]
            blocks = tuple(self.blocks)
        self.final_norm = _norm(args.norm, "final_norm", args.norm_eps)
        self._set_block_calls(blocks)

    def _set_block_calls(self, blocks: tuple[TransformerBlock, ...]) -> None:
        """A plain tuple for the loop in `__call__` (not tracked: checkpoints
        and `variables` see `blocks` only), each call with remat if asked."""
        vars(self)["_block_tuple"] = blocks
        calls: tuple[Any, ...] = blocks
        if self.remat:
            calls = tuple(remat_lib.remat(b) for b in blocks)
        vars(self)["_block_calls"] = calls

    def _refresh_submodules(self) -> None:
        """Rebuilds the loop's tuple after `snt.surgery` replaced a block."""
        if not self.stacked:
            self._set_block_calls(tuple(self.blocks))

    @utils.no_autograph
    def __call__(
        self,
        inputs: tf.Tensor,
        *,
        is_training: Any = False,
        mask: tf.Tensor | None = None,
        cache: Sequence[attention_lib.AttentionCache] | None = None,
        return_aux_losses: bool = False,
    ) -> Any:
        """Applies the blocks and the final norm.

        Args:
          inputs: A float tensor `[batch, time, model_size]`.
          is_training: Whether to apply dropout (a Python bool or a scalar
            boolean tensor); default False. Ignored without `dropout_rate`.
          mask: Optional boolean attention mask for every layer (True where
            position `t` may attend to position `s`), as for
            `snt.MultiHeadAttention`: broadcastable to
            `[batch, num_heads, time, S]`, where `S` is `time`, or the cache's
            `max_length` with a cache; combined with the causal mask.
          cache: Optional decoding cache from `initial_cache` (or from the
            previous call): one `snt.AttentionCache` per block. `inputs` are
            then the next `time` positions of the sequences in the cache.
            Only with `causal=True`.
          return_aux_losses: Whether to return the auxiliary losses of the
            mixture-of-experts MLPs too (default False): a Python bool. Only
            with `num_experts`, and not with `cache` (decoding needs no
            training losses).

        Returns:
          The outputs `[batch, time, model_size]`; with `cache`, the pair
          `(outputs, new_cache)`, `new_cache` holding the inputs' positions
          too; with `return_aux_losses=True`, the pair `(outputs,
          aux_losses)`: `{"load_balancing": ..., "router_z": ...}` (see
          `snt.MixtureOfExperts`), each the sum over the blocks with experts
          of that block's loss, a float32 scalar. Add them to the training
          loss with small weights (typically 1e-2 and 1e-3).

        Raises:
          ValueError: if `inputs` is not `[batch, time, model_size]`, or
            `cache` does not have one entry per block or is given to a
            non-causal Transformer, or `return_aux_losses` is True without
            experts or with `cache`.
          TypeError: if `inputs` is not floating point, or `cache` is not a
            sequence.
        """
        training = _training(is_training)
        x = _check_inputs(inputs, self.model_size)
        if return_aux_losses is not False and _aux_flag(
            return_aux_losses, cache, self._has_experts()
        ):
            return self._call_with_losses(x, training, mask)
        if self.stacked:
            return self._stacked_call(x, training, mask, cache)
        blocks = self._block_calls
        if cache is None:
            for block in blocks:
                x = block(x, is_training=training, mask=mask)
            return self.final_norm(x)
        _check_causal(self.causal, cache)
        if isinstance(cache, attention_lib.AttentionCache) or not isinstance(
            cache, Sequence
        ):
            raise errors.bad_type(
                "cache",
                "must be a sequence of `snt.AttentionCache`s, one per block (from "
                "`initial_cache`)",
                cache,
            )
        if len(cache) != len(blocks):
            raise errors.bad_value(
                "cache",
                f"must have one `snt.AttentionCache` per block ({len(blocks)})",
                f"{len(cache)} entries",
            )
        new_cache = []
        for block, layer_cache in zip(blocks, cache):
            x, layer_cache = block(
                x, is_training=training, mask=mask, cache=layer_cache
            )
            new_cache.append(layer_cache)
        return self.final_norm(x), tuple(new_cache)

    def _has_experts(self) -> bool:
        blocks = (self.stack.layer,) if self.stacked else self._block_tuple
        return any(getattr(b, "num_experts", None) is not None for b in blocks)

    def _call_with_losses(
        self, x: tf.Tensor, training: bool | tf.Tensor, mask: tf.Tensor | None
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """The outputs and the experts' auxiliary losses, summed over blocks."""
        if self.stacked:
            # Each layer's losses come out of the loop as per-layer outputs.
            x, per_layer = self.stack(
                x,
                is_training=training,
                mask=mask,
                return_aux_losses=True,
                per_layer={},
            )
            losses = {k: tf.reduce_sum(v, axis=0) for k, v in per_layer.items()}
            return self.final_norm(x), losses
        totals: dict[str, list[tf.Tensor]] = {}
        for block, call in zip(self._block_tuple, self._block_calls):
            if getattr(block, "num_experts", None) is None:
                x = call(x, is_training=training, mask=mask)
                continue
            x, losses = call(x, is_training=training, mask=mask, return_aux_losses=True)
            for name, loss in losses.items():
                totals.setdefault(name, []).append(loss)
        return self.final_norm(x), {k: tf.add_n(v) for k, v in totals.items()}

    def _stacked_call(
        self,
        x: tf.Tensor,
        training: bool | tf.Tensor,
        mask: tf.Tensor | None,
        cache: Any,
    ) -> Any:
        if cache is None:
            return self.final_norm(self.stack(x, is_training=training, mask=mask))
        _check_causal(self.causal, cache)
        # One cache whose fields have a leading `num_layers` axis (from
        # `initial_cache`), or one per block, as for unrolled blocks.
        per_block = not isinstance(cache, attention_lib.AttentionCache)
        if per_block:
            if not isinstance(cache, Sequence) or len(cache) != self.num_layers:
                raise errors.bad_type(
                    "cache",
                    "must be an `snt.AttentionCache` with a leading num_layers="
                    f"{self.num_layers} axis (from `initial_cache`) or a sequence "
                    "of one per block",
                    cache,
                )
            cache = tf.nest.map_structure(lambda *t: tf.stack(t), *cache)
        cache = _stacked_cache(cache, self.num_layers)
        x, new_cache = self.stack(
            x, is_training=training, mask=mask, per_layer={"cache": cache}
        )
        if per_block:
            fields = [tf.unstack(t, num=self.num_layers) for t in new_cache]
            new_cache = tuple(
                attention_lib.AttentionCache(*[f[i] for f in fields])
                for i in range(self.num_layers)
            )
        return self.final_norm(x), new_cache

    def initial_cache(self, batch_size: Any, max_length: Any, dtype: Any = None) -> Any:
        """An empty decoding cache: one `snt.AttentionCache` per block.

        Args:
          batch_size: Number of sequences decoded together (an int or a
            scalar integer tensor).
          max_length: Most positions the cache holds: prompt plus generated
            positions.
          dtype: Dtype of the cached keys and values, that of the inputs;
            default None means float32, or under a `snt.precision` policy its
            compute dtype.

        Returns:
          A tuple of `num_layers` empty `snt.AttentionCache`s, for `cache=`;
          with `stacked=True` one `snt.AttentionCache` whose fields have a
          leading `num_layers` axis.
        """
        if self.stacked:
            one = self.stack.layer.initial_cache(batch_size, max_length, dtype)
            return tf.nest.map_structure(  # type: ignore[return-value]
                lambda t: tf.stack([t] * self.num_layers), one
            )
        return tuple(
            block.initial_cache(batch_size, max_length, dtype)
            for block in self._block_tuple
        )
