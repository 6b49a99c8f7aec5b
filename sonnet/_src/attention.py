"""`snt.MultiHeadAttention` (with grouped-query heads, rotary embeddings and a
decoding cache) and its cache, `snt.AttentionCache`.

API as planned (Haiku's argument names), with one behaviour to note: with a
`cache`, attention is always causal (each new query sees the filled positions
up to and including its own), whatever `causal` says; `causal` matters only
without a cache.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    chunked_attention,
    compiled_attention,
    errors,
    linear,
    once,
    one_query,
    precision,
    tensors,
    tf_compat,
    utils,
)
from sonnet._src import dropout as dropout_lib
from sonnet._src import rms_norm as rms_norm_lib
from sonnet._src import rotary as rotary_lib

_HALF_DTYPES = frozenset([tf.float16, tf.bfloat16])
_EINSUM = tf.raw_ops.Einsum
_RESHAPE = tf.raw_ops.Reshape
_SELECT = tf.raw_ops.SelectV2
_SOFTMAX = tf.raw_ops.Softmax
_CAST = tf.raw_ops.Cast
_MUL = tf.raw_ops.Mul
_BATCH_MAT_MUL = tf.raw_ops.BatchMatMulV2
_TRANSPOSE = tf.raw_ops.Transpose
_ADD = tf.raw_ops.AddV2
_MAT_MUL = tf.raw_ops.MatMul
_BIAS_ADD = tf.raw_ops.BiasAdd
_SPLIT = tf.raw_ops.SplitV
_CONCAT = tf.raw_ops.ConcatV2
# `[B, T, heads, size]` <-> `[B, heads, T, size]`.
_HEADS_FIRST = (0, 2, 1, 3)

# Einsum equations: (logits, weighted values). Letters: b batch, t query time,
# s key time, h heads, n key/value heads, g query heads per key/value head,
# k key features, v value features.
_MHA_EQUATIONS = ("bthk,bshk->bhts", "bhts,bshv->bthv")
_GQA_EQUATIONS = ("btngk,bsnk->bngts", "bngts,bsnv->btngv")

# Causal masks of eager calls are cached per (T, S, device) up to this size.
_MAX_CACHED_MASK = 1 << 20
# With `chunked=None`, calls with more than this many query-key pairs
# (T * S, e.g. above 2048 x 2048) attend chunk by chunk: a float32 `[B, 8,
# 2048, 2048]` logits tensor is 128 MiB, and the backward pass keeps several.
_AUTO_CHUNK_PAIRS = 1 << 22


class AttentionCache(NamedTuple):
    """Keys and values of the positions decoded so far, for `snt.MultiHeadAttention`.

    An explicit state: pass it to a call with `cache=` and use the cache that
    call returns for the next one (as `snt.RNNCore` threads its state). Make
    the first with `MultiHeadAttention.initial_cache`.

    Attributes:
      key: `[B, max_length, num_kv_heads, key_size]`: projected (and, with
        `rotary=True`, rotated) keys; positions `>= index` are unused.
      value: `[B, max_length, num_kv_heads, value_size]`: projected values.
      index: int32 scalar: how many positions are filled (the position of the
        next query).

    >>> mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    >>> cache = mha.initial_cache(batch_size=1, max_length=8)
    >>> cache.key.shape, int(cache.index)
    (TensorShape([1, 8, 2, 4]), 0)
    """

    key: tf.Tensor
    value: tf.Tensor
    index: tf.Tensor


def _dims(x: tf.Tensor, count: int) -> list[Any]:
    """The first `count` dimensions of `x`: ints where static, else tensors."""
    static = x.shape.as_list()[:count]
    if None not in static:
        return static
    dynamic = tf.shape(x)
    return [dynamic[i] if d is None else d for i, d in enumerate(static)]


@functools.lru_cache(maxsize=256)
def _eager_shape(shape: tuple[int, ...]) -> tf.Tensor:
    return tf.constant(shape, tf.int32)


def _reshape(x: tf.Tensor, shape: tuple[Any, ...]) -> tf.Tensor:
    """`tf.reshape`; eagerly with a cached shape tensor (a Python list would
    take the slow, converting path of the op's dispatch on every call)."""
    if type(x) is tensors.EAGER_TENSOR:
        return _RESHAPE(tensor=x, shape=_eager_shape(shape))
    return _RESHAPE(tensor=x, shape=list(shape))


@functools.lru_cache(maxsize=16)
def _eager_causal_mask(
    time: int, key_time: int, device: str, window: int | None = None
) -> tf.Tensor:
    with tf.device(device):
        return _causal_mask(time, key_time, None, window)


def _causal_mask(
    time: Any, key_time: Any, positions: Any = None, window: int | None = None
) -> tf.Tensor:
    """`[T, S]` bools: query `i`, at position `positions[i]` (default `i`),
    sees the keys at positions up to its own (and, with a `window`, after
    `positions[i] - window`)."""
    rows = tf.expand_dims(tf.range(time) if positions is None else positions, 1)
    columns = tf.expand_dims(tf.range(key_time), 0)
    if window is None:
        return rows >= columns
    return (rows >= columns) & (columns > rows - window)


def _window_mask(time: Any, key_time: Any, window: int) -> tf.Tensor:
    """`[T, S]` bools of non-causal local attention: `|i - j| < window`."""
    rows = tf.expand_dims(tf.range(time), 1)
    columns = tf.expand_dims(tf.range(key_time), 0)
    return tf.abs(rows - columns) < window


class MultiHeadAttention(base.Module):
    """Multi-head dot-product attention (Vaswani et al., 2017), also grouped-query.

    Queries, keys and values are projected (by `snt.Linear`s named `query`,
    `key`, `value`) into `num_heads` query heads and `num_kv_heads` key/value
    heads; each query head attends with weights
    `softmax(q . k / sqrt(key_size))` over the key positions, and the heads'
    results are concatenated and projected by the `output` `snt.Linear`.
    `num_kv_heads=1` is multi-query attention (Shazeer, 2019), and
    `1 < num_kv_heads < num_heads` grouped-query attention (Ainslie et al.,
    2023): query head `h` uses key/value head `h // (num_heads //
    num_kv_heads)`, as in Keras' `GroupQueryAttention`.

    Masking: a `mask` (True = attend) and `causal=True` (query `i` sees keys
    `j <= i`) are combined. A query whose keys are all masked out gets equal
    weights on all `S` keys (the mean of the values), as in Haiku and Keras,
    never NaN. For float16/bfloat16 inputs, the softmax is computed in
    float32 and its result cast back.

    Rotary position embeddings (`rotary=True`, `snt.apply_rotary_embedding`)
    rotate the projected queries and keys by their positions: `0 .. T - 1` for
    queries and `0 .. S - 1` for keys, offset by the cache's `index` when
    decoding.

    Incremental decoding: make a cache with `initial_cache` and pass it as
    `cache=` to self-attention calls; each call writes its keys and values at
    positions `[index, index + T)`, attends causally over the filled
    positions, and returns `(outputs, new_cache)`. Shapes stay fixed (the
    cache has `max_length` positions), so a decoding step compiles once under
    `tf.function` and XLA.

    Args:
      num_heads: Number of query heads, a positive int.
      key_size: Features per head of the queries and keys, a positive int
        (even with `rotary=True`). Logits are scaled by `1 / sqrt(key_size)`.
      value_size: Features per head of the values. Default None means
        `key_size`.
      model_size: Size of the outputs (of the `output` projection). Default
        None means `key_size * num_heads`.
      num_kv_heads: Number of key/value heads; must divide `num_heads`.
        Default None means `num_heads` (standard multi-head attention).
      w_init: Initializer for the projections' weights. Default None means
        `snt.Linear`'s default (truncated normal, `stddev = 1 / sqrt(fan_in)`).
      with_bias: Whether the projections have biases. Default True, as
        `snt.Linear` (many recent models use False).
      b_init: Initializer for the biases (default zeros); only with
        `with_bias=True`.
      rotary: Whether to apply rotary position embeddings to the queries and
        keys. Default False (positions come from elsewhere, or none).
      rotary_base: The rotary wavelength scale; default 10000.0 (Su et al.,
        2021).
      rotary_scaling: Optional frequency scaling of the rotary embeddings,
        as Hugging Face's `rope_parameters` (`"linear"` or `"llama3"`, see
        `snt.apply_rotary_embedding`); only with `rotary=True`. Default
        None.
      output_bias: Whether the `output` projection has a bias. Default None
        means `with_bias` (Qwen2 has biases on the query, key and value
        projections only: `with_bias=True, output_bias=False`).
      qk_norm: Whether queries and keys are normalized per head by an
        `snt.RMSNorm` over their `key_size` features (submodules
        `query_norm` and `key_norm`, scales `[key_size]`), after the
        projections and before the rotary embeddings, as in Qwen3 and
        Gemma 3 (Dehghani et al., 2023, arXiv:2302.05442). Default False.
      qk_norm_eps: The epsilon of those norms; default 1e-6 (that of
        `snt.RMSNorm`).
      window: Local (sliding-window) attention: query `i` sees only keys
        `j > i - window` (with `causal` or a cache, as in Mistral: itself and
        the `window - 1` positions before), or without them keys with
        `|i - j| < window`. Positions count from the cache's start when
        decoding. With a window, `initial_cache` makes a ring buffer of
        `min(max_length, window)` slots (position `p` in slot
        `p % window`), so decoding memory is bounded by the window. Default
        None: no window.
      chunked: Whether to attend chunk by chunk (memory-efficient attention:
        an online softmax over key chunks per query block, never holding
        the `[B, heads, T, S]` logits; memory linear in `T`, gradients
        recomputed per block). Default None: chunked when `T * S` exceeds
        2**22 (e.g. above 2048 x 2048 self-attention) and the lengths are
        static, dense otherwise; True: always; False: never. The choice is
        made once per call from static shapes. Outputs and gradients equal
        the dense path's to float32 rounding (with `dropout_rate` too: both
        drop the same weights for the same `dropout_seed`).
      chunk_size: Queries per block and keys per chunk of the chunked path,
        a positive int; default 512 (a `[512, 512]` float32 block per head
        is 1 MiB: large enough for efficient matmuls, small enough for the
        cache).
      dropout_rate: Attention-weight dropout: the probability of dropping
        each weight (of query `t` on key `s` in one head of one example) in
        calls with `is_training=True`, a number in `[0, 1)` or a scalar
        float tensor; the weights kept are scaled by `1 / (1 - rate)`.
        Default None: none (as in Haiku; `snt.nets.Transformer` drops the
        residual branches instead). Which weights are dropped is a hash of
        the call's `dropout_seed` and the four indices, the same in the
        dense and chunked paths (the chunked backward pass recomputes it per
        block; nothing `[T, S]` is stored).
      name: Module name (default `multi_head_attention`).

    Shapes:
      query `[B, T, Dq]`, key `[B, S, Dk]`, value `[B, S, Dv]`; mask
      broadcastable to `[B, num_heads, T, S]` -> outputs
      `[B, T, model_size]`, in the dtype of the inputs.

    Attributes:
      query, key, value, output: the `snt.Linear` projections (`query/w` is
      `[Dq, num_heads * key_size]`, `key/w` `[Dk, num_kv_heads * key_size]`,
      `value/w` `[Dv, num_kv_heads * value_size]`, `output/w`
      `[num_heads * value_size, model_size]`), created on the first call.

    >>> mha = snt.MultiHeadAttention(num_heads=4, key_size=8)
    >>> x = tf.random.normal([2, 5, 16])
    >>> mha(x, causal=True).shape
    TensorShape([2, 5, 32])
    >>> [v.name for v in mha.variables][:2]
    ['multi_head_attention/key/b:0', 'multi_head_attention/key/w:0']

    Decoding one position at a time:

    >>> cache = mha.initial_cache(batch_size=2, max_length=5)
    >>> y, cache = mha(x[:, :1], cache=cache)
    >>> y.shape, int(cache.index)
    (TensorShape([2, 1, 32]), 1)

    Packed documents, with their own boundaries in each example (a
    `mask_fn` result `[B, 1, Tq, Sk]`), and attention dropout in training:

    >>> ids = tf.constant([[0, 0, 1, 1, 1], [0, 0, 0, 0, 1]])
    >>> def same_document(q, k):
    ...     same = tf.gather(ids, q, axis=1) == tf.gather(ids, k, axis=1)
    ...     return ((k <= q) & same)[:, None]
    >>> drop = snt.MultiHeadAttention(num_heads=4, key_size=8, dropout_rate=0.1)
    >>> drop(x, mask_fn=same_document, is_training=True).shape
    TensorShape([2, 5, 32])
    """

    # The dtype of the first inputs; None until the module is built.
    _dtype: tf.DType | None = None
    rotary_scaling: dict[str, Any] | None
    _rotary: float | rotary_lib.ScaledBase
    # The last dimensions of the first query, key and value.
    _sizes: tuple[Any, Any, Any]

    def __init__(
        self,
        num_heads: int,
        key_size: int,
        value_size: int | None = None,
        model_size: int | None = None,
        num_kv_heads: int | None = None,
        w_init: tensors.Initializer | None = None,
        with_bias: bool = True,
        b_init: tensors.Initializer | None = None,
        rotary: bool = False,
        rotary_base: float = 10000.0,
        rotary_scaling: dict[str, Any] | None = None,
        output_bias: bool | None = None,
        qk_norm: bool = False,
        qk_norm_eps: float = 1e-6,
        window: int | None = None,
        chunked: bool | None = None,
        chunk_size: int = 512,
        dropout_rate: Any = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.num_heads = checks.size("num_heads", num_heads)
        self.key_size = checks.size("key_size", key_size)
        value = checks.optional_size("value_size", value_size)
        self.value_size = self.key_size if value is None else value
        size = checks.optional_size("model_size", model_size)
        self.model_size = self.key_size * self.num_heads if size is None else size
        kv_heads = checks.optional_size("num_kv_heads", num_kv_heads)
        self.num_kv_heads = self.num_heads if kv_heads is None else kv_heads
        if self.num_heads % self.num_kv_heads:
            raise errors.bad_value(
                "num_kv_heads",
                f"must divide `num_heads` ({self.num_heads})",
                num_kv_heads,
            )
        self.with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        checks.initializer("b_init", b_init)
        if not self.with_bias and b_init is not None:
            raise errors.bad_value(
                "b_init", "must be None when `with_bias=False` (no biases)", b_init
            )
        self.w_init = w_init
        self.b_init = b_init
        self.rotary = checks.flag("rotary", rotary)
        self.rotary_base = rotary_lib.check_base(rotary_base, "rotary_base")
        if rotary_scaling is not None and not self.rotary:
            raise errors.bad_value(
                "rotary_scaling", "must be None without `rotary=True`", rotary_scaling
            )
        # Set past `tf.Module`'s tracking, which would wrap the dict and the
        # tuple in trackable proxies. `_rotary` is the base (and scaling) the
        # rotation tables are made of.
        vars(self)["rotary_scaling"] = rotary_lib.check_scaling(
            rotary_scaling, "rotary_scaling"
        )
        vars(self)["_rotary"] = rotary_lib.check_frequencies(
            self.rotary_base, self.rotary_scaling, "rotary_base", "rotary_scaling"
        )
        self.output_bias = (
            self.with_bias
            if output_bias is None
            else checks.flag("output_bias", output_bias)
        )
        self.qk_norm = checks.flag("qk_norm", qk_norm)
        self.qk_norm_eps = checks.real("qk_norm_eps", qk_norm_eps, allow_tensor=False)
        if self.qk_norm_eps < 0:
            raise errors.bad_value("qk_norm_eps", "must not be negative", qk_norm_eps)
        self.window = checks.optional_size("window", window)
        self.chunked = None if chunked is None else checks.flag("chunked", chunked)
        self.chunk_size = checks.size("chunk_size", chunk_size)
        if dropout_rate is not None:
            dropout_rate = dropout_lib.check_rate("dropout_rate", dropout_rate)
        self.dropout_rate = dropout_rate
        # A rate known to be zero drops nothing: calls take the plain path.
        known = (
            tf.get_static_value(dropout_rate)
            if isinstance(dropout_rate, tf.Tensor)
            else dropout_rate
        )
        self._dropout = dropout_rate is not None and not (
            isinstance(known, (int, float, np.number, np.ndarray)) and known == 0
        )
        if self.rotary and self.key_size % 2:
            raise errors.bad_value(
                "key_size",
                "must be even with `rotary=True` (features are rotated in pairs)",
                key_size,
            )
        self._groups = self.num_heads // self.num_kv_heads
        self._scale = 1.0 / math.sqrt(self.key_size)
        self._equations = _MHA_EQUATIONS if self._groups == 1 else _GQA_EQUATIONS
        # Projections split into heads: `[B, T, *shape]`. Grouped queries are
        # `[B, T, num_kv_heads, groups, key_size]`.
        self._query_shape = (
            (self.num_heads, self.key_size)
            if self._groups == 1
            else (self.num_kv_heads, self._groups, self.key_size)
        )
        self._key_shape = (self.num_kv_heads, self.key_size)
        self._heads_size = self.num_heads * self.value_size
        self._value_shape = (self.num_kv_heads, self.value_size)

        def projection(output_size: int, name: str, bias: bool) -> linear.Linear:
            return linear.Linear(
                output_size,
                with_bias=bias,
                w_init=w_init,
                b_init=b_init if bias else None,
                name=name,
            )

        bias = self.with_bias
        self.query = projection(self.num_heads * self.key_size, "query", bias)
        self.key = projection(self.num_kv_heads * self.key_size, "key", bias)
        self.value = projection(self.num_kv_heads * self.value_size, "value", bias)
        self.output = projection(self.model_size, "output", self.output_bias)
        if self.qk_norm:
            self.query_norm = rms_norm_lib.RMSNorm(
                axis=-1, eps=self.qk_norm_eps, name="query_norm"
            )
            self.key_norm = rms_norm_lib.RMSNorm(
                axis=-1, eps=self.qk_norm_eps, name="key_norm"
            )

    def initial_cache(
        self, batch_size: int | tf.Tensor, max_length: int, dtype: Any = None
    ) -> AttentionCache:
        """An empty decoding cache (zeros, `index` 0) for self-attention calls.

        Needs no built module: the sizes come from the constructor.

        Args:
          batch_size: Batch size `B`, an int or a scalar integer tensor (e.g.
            `tf.shape(x)[0]`).
          max_length: Number of positions to decode, a positive int; calls
            that would write past it raise. With a `window`, the cache is a
            ring of `min(max_length, window)` slots: position `p` goes to
            slot `p % window`, and it never overflows.
          dtype: Dtype of the cached keys and values: that of the inputs the
            module is (or will be) called with. Default None means float32,
            or under a `snt.precision` policy its compute dtype.

        Returns:
          An `snt.AttentionCache` with `key` `[B, L, num_kv_heads,
          key_size]`, `value` `[B, L, num_kv_heads, value_size]` and
          `index` 0 (int32), where `L` is `max_length`, or with a `window`
          `min(max_length, window)`.

        >>> local = snt.MultiHeadAttention(num_heads=2, key_size=4, window=3)
        >>> local.initial_cache(batch_size=1, max_length=100).key.shape
        TensorShape([1, 3, 2, 4])
        """
        batch = checks.tensor_size("batch_size", batch_size)
        length = checks.size("max_length", max_length)
        if self.window is not None:
            length = min(length, self.window)
        if dtype is None:
            dtype = precision.compute_dtype(self) or tf.float32
        dtype = checks.dtype("dtype", dtype, floating=True)
        heads = self.num_kv_heads
        return AttentionCache(
            key=tf.zeros([batch, length, heads, self.key_size], dtype),
            value=tf.zeros([batch, length, heads, self.value_size], dtype),
            index=tf.zeros([], tf.int32),
        )

    @once.once
    def _initialize(self, query: tf.Tensor, key: tf.Tensor, value: tf.Tensor) -> None:
        # The inputs were checked by `_first_inputs`.
        dtype = query.dtype
        self.query._initialize(query)
        self.key._initialize(key)
        self.value._initialize(value)
        heads_output = np.zeros([0, self._heads_size], dtype.as_numpy_dtype)
        self.output._initialize(heads_output)
        self._sizes = (query.shape[-1], key.shape[-1], value.shape[-1])
        self._softmax_dtype = tf.float32 if dtype in _HALF_DTYPES else dtype
        self._dtype = dtype
        tensors.eager_tensor_type()

    @base.no_name_scope
    @utils.no_autograph
    def __call__(
        self,
        query: tf.Tensor,
        key: tf.Tensor | None = None,
        value: tf.Tensor | None = None,
        mask: tf.Tensor | None = None,
        *,
        causal: bool = False,
        cache: AttentionCache | None = None,
        mask_fn: chunked_attention.MaskFn | None = None,
        is_training: Any = False,
        dropout_seed: Any = None,
    ) -> tf.Tensor | tuple[tf.Tensor, AttentionCache]:
        """Attends from `query` to `key`/`value` (default: self-attention).

        Args:
          query: `[B, T, Dq]` float tensor.
          key: `[B, S, Dk]`. Default None means `query` (self-attention).
          value: `[B, S, Dv]`. Default None means `key`.
          mask: Optional boolean tensor, True where query `t` may attend to key
            `s`, broadcast (NumPy style, aligned on the right) against
            `[B, num_heads, T, S]`: rank 2 is `[T, S]`, rank 3
            `[num_heads, T, S]`, rank 4 `[B, num_heads, T, S]`, with any axis
            of size 1 shared. A Keras-style `[B, T, S]` mask is
            `mask[:, None]`. With a cache, `S` is the cache's `max_length`.
          causal: Whether query `i` sees only keys `j <= i` (as
            `np.tril(ones([T, S]))`). Default False. With a cache, attention
            is causal in any case (see the class docstring).
          cache: Optional `snt.AttentionCache` (self-attention only): the
            call's keys and values are written at `[index, index + T)` and
            queries attend over positions `< index + T`, causally.
          mask_fn: Optional mask on positions, combined with the others:
            `mask_fn(query_positions, key_positions)` gets int32 tensors
            `[Tq, 1]` and `[1, Sk]` (positions: `0 .. T - 1` and
            `0 .. S - 1`, offset by the cache's `index` for queries and
            keys when decoding) and returns booleans broadcastable to
            `[Tq, Sk]`, or per example (and head) to `[B, num_heads, Tq,
            Sk]` (rank 4; axes of size 1 are shared), True where attention
            is allowed. It is built from TF ops on its arguments (and
            tensors it closes over, e.g. document ids): prefix-LM is
            `lambda q, k: (k <= q) | (k < prefix)`, block-causal documents
            `lambda q, k: (k <= q) & (tf.gather(ids, q) == tf.gather(ids,
            k))`; with segment ids `[B, T]` per example, `lambda q, k:
            ((k <= q) & (tf.gather(ids, q, axis=1) == tf.gather(ids, k,
            axis=1)))[:, None]` (`[B, 1, Tq, Sk]`). The chunked path calls
            it per block, never for the whole `[T, S]`.
          is_training: Whether to drop attention weights (with
            `dropout_rate`): a Python bool, or a scalar boolean tensor
            deciding at run time. Default False. Ignored without
            `dropout_rate`.
          dropout_seed: The seed of the dropout mask, an integer tensor
            `[2]` (as `tf.random.stateless_uniform`'s): the same seed drops
            the same weights. Default None: one drawn per call from TF's
            global random state (`tf.random.set_seed` makes runs
            repeatable). Ignored without dropout.

        Returns:
          `[B, T, model_size]` outputs in the dtype of `query`; with a cache,
          `(outputs, new_cache)` where `new_cache.index` is `index + T`.
          Under a `snt.precision` policy the inputs, projections, keys and
          values (and the cache) are in its compute dtype, the softmax in
          float32, and the outputs in its output (else compute) dtype.

        Raises:
          ValueError: for inputs of the wrong rank or size, a mask of rank
            other than 2, 3 or 4 or not broadcastable, a cache that does not
            match the module or the query, a cache given with `key` or
            `value`, or a call that would overflow the cache (eagerly; in a
            graph a `tf.debugging` assertion fails, and under XLA positions
            past the end are dropped).
          TypeError: for inputs of another dtype than the first call's, a
            non-boolean mask, a `mask_fn` that is not a callable of two
            arguments returning a boolean tensor, or (with dropout) an
            `is_training` that is not a boolean or a `dropout_seed` that is
            not an integer pair.
        """
        args = (query, key, value, mask, causal, cache, mask_fn)
        # The name scope only names traced ops: eager calls skip it.
        if tf.executing_eagerly():
            return self._attend(*args, is_training, dropout_seed)
        with self.name_scope:
            return self._attend(*args, is_training, dropout_seed)

    @base.no_name_scope
    def _attend(
        self,
        query: Any,
        key: Any,
        value: Any,
        mask: Any,
        causal: Any,
        cache: Any,
        mask_fn: Any = None,
        is_training: Any = False,
        dropout_seed: Any = None,
    ) -> tf.Tensor | tuple[tf.Tensor, AttentionCache]:
        """The one call path: inputs, checks, build, projections, attention."""
        policy = self._precision
        query, key, value = _input_tensors(query, key, value, cache, policy)
        dtype, causal, cached, user_mask = self._check_call(
            query, key, value, mask, causal, cache, policy
        )
        if mask_fn is not None:
            mask_fn = chunked_attention.check_mask_fn(
                mask_fn, query.shape[0], self.num_heads
            )
        dropout = None
        if self._dropout:
            dropout = self._dropout_spec(is_training, dropout_seed, dtype)
        if self._dtype is None:
            self._initialize(query, key, value)

        # Under a policy, the projections' variables are cast to its dtype.
        cast = None if policy is None else dtype
        batch, time = _dims(query, 2)
        k_time = time if key is query else _dims(key, 2)[1]
        shapes = (
            (batch, time, *self._query_shape),
            (batch, k_time, *self._key_shape),
            (batch, k_time, *self._value_shape),
        )
        projections = (self.query, self.key, self.value)
        if (
            FUSE_PROJECTIONS
            and cached is None
            and key is query
            and value is query
            and not tf.executing_eagerly()
            and _fusable(projections)
        ):
            q, k, v = _project_together(projections, query, shapes, cast)
        else:
            q = _project(self.query, query, shapes[0], cast)
            k = _project(self.key, key, shapes[1], cast)
            v = _project(self.value, value, shapes[2], cast)
        if self.qk_norm:
            q, k = self._normalize(q, k, cast)

        positions: Any = None
        if cached is not None:
            positions = tf.range(time) + cached[2]
        if self.rotary:
            q, k = self._rotate(q, k, positions, time, k_time)
        q = _MUL(x=q, y=self._scale)
        key_positions: Any = None
        first_prompt: tuple[tf.Tensor, tf.Tensor] | None = None
        if cached is not None:
            if cached[4]:  # A ring: attend over the old slots and the new keys.
                key_positions = tf.concat(
                    [_ring_positions(cached[2], cached[3]), positions], 0
                )
                new_k, new_v = _ring_write(cached, k, v, positions, batch, time)
                k = tf.concat([cached[0], k], 1)
                v = tf.concat([cached[1], v], 1)
            else:
                if _first_prompt(cached, time, user_mask, dropout):
                    first_prompt = (k, v)
                k, v = _write(cached[0], cached[1], k, v, positions, batch, time)
                new_k, new_v = k, v
        chunk = self._chunk(time, k.shape[1])
        if chunk is None and mask_fn is None and (cached is None or not cached[4]):
            key_time, context = k_time, cached
            if first_prompt is not None:
                # A prompt written from index 0 sees only itself, causally:
                # causal self-attention over its own keys and values (not
                # the cache's empty positions after it).
                k, v = first_prompt
                key_time, context, causal = time, None, True
            attend = _allowed(
                time, key_time, context, positions, causal, user_mask, q, self.window
            )
            # Causal self-attention and nothing else: the compiled core can
            # build the mask itself and skip the blocks it masks whole.
            square = (
                causal
                and context is None
                and user_mask is None
                and isinstance(time, int)
                and time == k.shape[1]
            )
            heads = self._weighted_values(
                q, k, v, attend, dtype, policy, context is None, dropout, square
            )
        else:
            spec = self._mask(
                time, k, cached, positions, key_positions, causal, user_mask, mask_fn
            )
            # Blocks outside the causal band may be skipped where every query
            # sees its own position: with a cache, or causal self-attention.
            skip = cached is not None or (
                causal and isinstance(time, int) and time == k.shape[1]
            )
            heads = self._positional(q, k, v, spec, chunk, dtype, policy, skip, dropout)

        model_size = self.output.output_size
        outputs = _project(self.output, heads, (batch, time, model_size), cast)
        if policy is not None:
            outputs = precision.cast_outputs(policy, outputs)
        if cached is None:
            return outputs
        return outputs, AttentionCache(new_k, new_v, cached[2] + time)

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _check_call(
        self,
        query: tf.Tensor,
        key: tf.Tensor,
        value: tf.Tensor,
        mask: Any,
        causal: Any,
        cache: Any,
        policy: Any,
    ) -> tuple[tf.DType, bool, tuple[Any, ...] | None, Any]:
        """The call's dtype, `causal` flag, checked cache parts and mask.

        Everything is checked before the first call builds the module, so
        that a failed first call leaves it unbuilt.
        """
        dtype = self._dtype
        if dtype is None:
            dtype, sizes = _first_inputs(query, key, value)
        else:
            sizes = self._sizes
            if policy is not None:
                dtype = policy.compute_dtype
        query_size, key_size, value_size = sizes
        _check_input("query", query, query_size, dtype)
        if key is not query:
            _check_input("key", key, key_size, dtype)
            _check_same_dims("key", key, query, 1)
        if value is not key:
            _check_input("value", value, value_size, dtype)
            _check_same_dims("value", value, key, 2)
        causal = checks.flag("causal", causal)
        cached = None if cache is None else self._check_cache(cache, query, dtype)
        user_mask = None
        if mask is not None:
            length = None if cached is None else cached[3]
            if cached is not None and cached[4]:
                # Ring slots are not positions: only masks along queries.
                length = 1
            user_mask = self._check_mask(mask, query, key, length)
        return dtype, causal, cached, user_mask

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _dropout_spec(
        self, is_training: Any, seed: Any, dtype: tf.DType
    ) -> chunked_attention.Dropout | None:
        """The call's attention dropout (None: none), checked."""
        training = checks.mode_flag("is_training", is_training)
        if training is False:
            return None
        seed = _dropout_seed(seed)
        softmax_dtype = tf.float32 if dtype in _HALF_DTYPES else dtype
        rate: Any = self.dropout_rate
        rate = tf.cast(rate, tf.float32)
        threshold = rate * 2.0**32
        scale = tf.cast(1.0 / (1.0 - rate), softmax_dtype)
        if training is not True:  # A tensor: drop nothing unless it is true.
            threshold = tf.where(training, threshold, 0.0)
            scale = tf.where(training, scale, tf.ones([], softmax_dtype))
        return chunked_attention.Dropout(
            chunked_attention.seed_state(seed), threshold, scale
        )

    def _chunk(self, time: Any, key_time: Any) -> int | None:
        """The chunk size if this call attends chunk by chunk, else None."""
        if self.chunked is None:
            if (
                type(time) is int
                and type(key_time) is int
                and time > 1
                and time * key_time > _AUTO_CHUNK_PAIRS
            ):
                return self.chunk_size
            return None
        if not self.chunked or _empty(time) or _empty(key_time):
            return None  # Nothing to split in blocks: the dense path's result.
        return self.chunk_size

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _mask(
        self,
        time: Any,
        k: tf.Tensor,
        cached: tuple[Any, ...] | None,
        positions: Any,
        key_positions: Any,
        causal: bool,
        user_mask: tf.Tensor | None,
        mask_fn: Any,
    ) -> chunked_attention.Mask:
        """What the call may attend to, as rules on positions."""
        key_time = _dims(k, 2)[1]
        if positions is None:
            positions = tf.range(time)
        if key_positions is None:
            key_positions = tf.range(key_time)
        if user_mask is not None and self._groups == 1 and user_mask.shape.rank > 2:
            # Logits here are `[B, num_kv_heads, groups, T, S]`.
            user_mask = tf.expand_dims(user_mask, -3)
        return chunked_attention.Mask(
            query_positions=positions,
            key_positions=key_positions,
            causal=causal or cached is not None,
            window=self.window,
            mask_fn=mask_fn,
            tensor=user_mask,
            empty_slots=cached is not None and cached[4],
            heads=self.num_heads,
            groups=self._groups,
            batch=k.shape[0],
        )

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _positional(
        self,
        q: tf.Tensor,
        k: tf.Tensor,
        v: tf.Tensor,
        spec: chunked_attention.Mask,
        chunk: int | None,
        dtype: tf.DType,
        policy: Any,
        skip: bool,
        dropout: chunked_attention.Dropout | None,
    ) -> tf.Tensor:
        """The heads for a `Mask`: chunk by chunk, or dense with its mask."""
        softmax_dtype = self._softmax_dtype
        if policy is not None:
            softmax_dtype = tf.float32 if dtype in _HALF_DTYPES else dtype
        if chunk is None:
            attend = chunked_attention.positional(
                spec, spec.query_positions, spec.key_positions
            )
            if attend is not None and self._groups == 1 and attend.shape.rank == 5:
                # A per-example `mask_fn`'s `[B, heads, 1, T, S]` -> the
                # logits' `[B, heads, T, S]`.
                attend = tf.squeeze(attend, 2)
            if spec.tensor is not None:
                tensor = spec.tensor
                if self._groups == 1 and tensor.shape.rank > 2:
                    tensor = tf.squeeze(tensor, -3)
                attend = tensor if attend is None else attend & tensor
            return self._weighted_values(q, k, v, attend, dtype, policy, False, dropout)
        shape = _dims(q, 2)
        if self._groups == 1:
            q = tf.expand_dims(q, 3)
        heads = chunked_attention.attend(
            q, k, v, spec, chunk, softmax_dtype, skip, dropout
        )
        if self._groups == 1:
            return _reshape(heads, (*shape, self.num_heads, self.value_size))
        return heads

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _weighted_values(
        self,
        q: tf.Tensor,
        k: tf.Tensor,
        v: tf.Tensor,
        attend: tf.Tensor | None,
        dtype: tf.DType,
        policy: Any,
        uncached: bool,
        dropout: chunked_attention.Dropout | None = None,
        causal: bool = False,
    ) -> tf.Tensor:
        """The heads: values weighted by the softmax of the masked logits
        (some dropped with `dropout`). `causal`: `attend` is exactly causal
        self-attention within the module's window."""
        # Traced multi-head attention without a cache runs as batch matmuls
        # of `[B, heads, T, size]` operands: the einsums transpose their
        # operands (and outputs) on every product, forward and backward, 12
        # transposes per call against these 4 (about 1.3 x faster in a
        # training step). With known shapes (and for a prompt into a cache)
        # the products, mask and softmax run XLA-compiled on the operands as
        # they are (`compiled_attention`). Eager calls and decoding steps,
        # where the op count decides, keep the two einsums.
        eager = tf.executing_eagerly()
        # The softmax runs in float32 for half-precision inputs.
        softmax_dtype = self._softmax_dtype
        if policy is not None:
            softmax_dtype = tf.float32 if dtype in _HALF_DTYPES else dtype
        if (
            not eager
            and self._groups == 1
            and dropout is None
            # With a cache, a prompt (not one decoding step, where the
            # compiled call would cost more than the product).
            and (uncached or q.shape[1] != 1)
            and _compiled_core()
            and compiled_attention.usable(q, k, v, None if causal else attend)
        ):
            if causal:
                return compiled_attention.core(
                    q, k, v, None, softmax_dtype, True, self.window
                )
            return compiled_attention.core(q, k, v, attend, softmax_dtype)
        matmuls = self._groups == 1 and uncached and not eager
        # A traced decoding step: one query against the cache, whose keys
        # and values the einsums would transpose (copy) on every step.
        single = (
            not matmuls
            and not eager
            and one_query.usable(q, k, v)
            and one_query.worthwhile(k)
        )
        if matmuls:
            q = _TRANSPOSE(x=q, perm=_HEADS_FIRST)
            k = _TRANSPOSE(x=k, perm=_HEADS_FIRST)
            v = _TRANSPOSE(x=v, perm=_HEADS_FIRST)
            logits = _BATCH_MAT_MUL(x=q, y=k, adj_y=True)
        elif single:
            logits = one_query.logits(q, k)
        else:
            logits = _EINSUM(inputs=[q, k], equation=self._equations[0])
        if softmax_dtype is not logits.dtype:  # DTypes are interned.
            logits = _CAST(x=logits, DstT=softmax_dtype)
        if attend is not None and matmuls and attend.shape.rank == 2:
            # A `[T, S]` mask as an additive bias (0 or the dtype's minimum,
            # which absorbs any finite logit): the same logits, and the
            # gradient passes through the add instead of a second select
            # on `[B, heads, T, S]`.
            zero = tf.zeros([], softmax_dtype)
            bias = _SELECT(condition=attend, t=zero, e=softmax_dtype.min)
            logits = _ADD(x=logits, y=bias)
        elif attend is not None:
            logits = _SELECT(condition=attend, t=logits, e=softmax_dtype.min)
        weights = _SOFTMAX(logits=logits)
        if dropout is not None:
            weights = _MUL(x=weights, y=self._keep_scale(dropout, logits))
        if weights.dtype is not v.dtype:
            weights = _CAST(x=weights, DstT=v.dtype)
        if matmuls:
            return _TRANSPOSE(x=_BATCH_MAT_MUL(x=weights, y=v), perm=_HEADS_FIRST)
        if single:
            return one_query.values(weights, v)
        return _EINSUM(inputs=[weights, v], equation=self._equations[1])

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _keep_scale(
        self, dropout: chunked_attention.Dropout, logits: tf.Tensor
    ) -> tf.Tensor:
        """The dropout factors of the weights, in the layout of `logits`."""
        dims = _dims(logits, logits.shape.rank)
        factors = chunked_attention.dense_keep_scale(
            dropout, dims[0], self.num_kv_heads, self._groups, dims[-2], dims[-1]
        )
        if logits.shape.rank == 4:  # `[B, heads, 1, T, S]`.
            return tf.squeeze(factors, 2)
        return factors

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _rotate(
        self, q: tf.Tensor, k: tf.Tensor, positions: Any, time: Any, k_time: Any
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Queries and keys rotated by their positions (`snt.apply_rotary_embedding`).

        Queries and keys share the tables when they have the same positions:
        with a cache, or in self-attention.
        """
        dtype = rotary_lib.compute_dtype(k.dtype)
        base, size = self._rotary, self.key_size
        # Keys are `[B, S, heads, size]`: one axis between time and features.
        tables = rotary_lib.rotation(positions, k_time, size, base, dtype, 2, k)
        k = rotary_lib.rotate_by(k, *tables)
        shared = (
            positions is not None
            or k_time is time
            or (isinstance(time, int) and k_time == time)
        )
        if not shared:
            tables = rotary_lib.rotation(
                None, time, size, base, dtype, q.shape.rank - 2, q
            )
        elif self._groups > 1:  # Queries `[B, T, kv_heads, groups, size]`.
            tables = tuple(tf.expand_dims(t, -2) for t in tables)
        return rotary_lib.rotate_by(q, *tables), k

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _normalize(
        self, q: tf.Tensor, k: tf.Tensor, dtype: tf.DType | None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Queries and keys normalized per head (`qk_norm`); under a policy
        (`dtype` its compute dtype) back in that dtype."""
        q, k = self.query_norm(q), self.key_norm(k)
        if dtype is None:
            return q, k
        return precision.cast(q, dtype), precision.cast(k, dtype)

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _check_cache(
        self, cache: Any, query: tf.Tensor, dtype: tf.DType
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, Any, bool]:
        """The cache's key, value, int32 index and length, checked, and
        whether it is a ring (a windowed module's cache of `window` slots)."""
        if not isinstance(cache, (tuple, list)) or len(cache) != 3:
            raise errors.bad_type(
                "cache",
                "must be an `snt.AttentionCache` from `initial_cache`",
                cache,
            )
        key_cache, value_cache, index = cache
        # Under a policy the cache is an input like the others: cast to its
        # compute dtype (a cache from `initial_cache` already has it).
        cast = self._precision is not None
        key_cache = _cache_tensor(
            key_cache, dtype, self.num_kv_heads, self.key_size, cast
        )
        value_cache = _cache_tensor(
            value_cache, dtype, self.num_kv_heads, self.value_size, cast
        )
        _check_same_dims("cache", key_cache, query, 1)
        _check_same_dims("cache", value_cache, key_cache, 2)
        index = _cache_index(index)
        length = _dims(key_cache, 2)[1]
        if isinstance(length, int) and length == self.window:
            return key_cache, value_cache, index, length, True
        time = query.shape[1]
        known = tf.get_static_value(index)
        if known is not None and time is not None and not isinstance(length, tf.Tensor):
            if not 0 <= known <= length - time:
                raise errors.invalid_argument(
                    "cache",
                    f"has room for {length} positions: with {known} filled, it "
                    f"cannot take {time} more (make it with a larger "
                    "`max_length`)",
                    f"index={known}",
                )
        else:
            # Guard the index, so that the scatter into the cache waits for them.
            index = checks.after(
                [
                    tf.debugging.assert_non_negative(
                        index, message="`cache.index` < 0"
                    ),
                    tf.debugging.assert_less_equal(
                        index + _dims(query, 2)[1],
                        tf.cast(length, tf.int32),
                        message="`cache` overflow: index + T > max_length",
                    ),
                ],
                index,
            )
        return key_cache, value_cache, index, length, False

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _check_mask(
        self, mask: Any, query: tf.Tensor, key: tf.Tensor, length: Any
    ) -> tf.Tensor:
        """`mask` as a boolean tensor that broadcasts against the logits."""
        if mask is None or isinstance(mask, (str, bytes)):
            raise errors.bad_type("mask", "must be a boolean tensor", mask)
        mask = utils.to_tensor("mask", mask)
        if mask.dtype != tf.bool:
            raise errors.bad_type(
                "mask",
                "must be a boolean tensor (True where attention is allowed)",
                mask,
            )
        shape = mask.shape
        rank = shape.rank
        if rank not in (2, 3, 4):
            raise errors.bad_value(
                "mask",
                "must have rank 2 `[T, S]`, 3 `[H, T, S]` or 4 `[B, H, T, S]`",
                shape,
            )
        key_time = key.shape[1] if length is None else length
        if isinstance(key_time, tf.Tensor):
            key_time = None
        target = [query.shape[0], self.num_heads, query.shape[1], key_time]
        for m, t in zip(shape.as_list(), target[-rank:]):
            if m is not None and t is not None and m not in (1, t):
                raise errors.bad_value(
                    "mask",
                    f"must broadcast against `[B, num_heads, T, S]` = {target}",
                    shape,
                )
        if self._groups == 1 or rank == 2:
            return mask
        # Grouped-query logits are `[B, num_kv_heads, groups, T, S]`.
        if rank == 3:
            mask = tf.expand_dims(mask, 0)
        if mask.shape[1] == 1:
            return tf.expand_dims(mask, 2)
        dims = _dims(mask, 4)
        if mask.shape[1] is None:
            mask = tf.broadcast_to(mask, [dims[0], self.num_heads, dims[2], dims[3]])
        return tf.reshape(
            mask, [dims[0], self.num_kv_heads, self._groups, dims[2], dims[3]]
        )


def _input_tensors(
    query: Any, key: Any, value: Any, cache: Any, policy: Any
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Query, key and value as tensors (in the policy's compute dtype), with
    key and value defaulting to the query; a cache only for self-attention."""
    inputs = query
    query = _as_tensor("query", query)
    if cache is not None and not (
        (key is None or key is inputs)
        and (value is None or value is inputs or value is key)
    ):
        raise errors.bad_value(
            "cache",
            "is only for self-attention: `key` and `value` must be None",
            cache,
        )
    key = query if key is None or key is inputs else _as_tensor("key", key)
    value = key if value is None else _as_tensor("value", value)
    if policy is not None:
        return _cast_inputs(query, key, value, policy.compute_dtype)
    return query, key, value


def _first_inputs(
    query: tf.Tensor, key: tf.Tensor, value: tf.Tensor
) -> tuple[tf.DType, tuple[int, int, int]]:
    """The dtype and feature sizes of the first inputs, which build the module."""
    sizes = []
    for argument, x in (("query", query), ("key", key), ("value", value)):
        shape = x.shape
        if shape.rank != 3:
            raise errors.bad_value(argument, "must have rank 3 `[B, T, D]`", shape)
        if not x.dtype.is_floating:
            raise errors.invalid_argument_type(
                argument, "must have a floating point dtype", x
            )
        if shape[-1] is None:
            raise errors.bad_value(
                argument,
                "must have a known last dimension on the first call, which "
                "creates the weights",
                shape,
            )
        sizes.append(shape[-1])
    return query.dtype, (sizes[0], sizes[1], sizes[2])


def _check_input(argument: str, x: tf.Tensor, size: int, dtype: tf.DType) -> None:
    """Checks a query, key or value against the module's (or first) inputs."""
    shape = x.shape
    if shape.rank != 3:
        raise errors.bad_value(argument, "must have rank 3 `[B, T, D]`", shape)
    if x.dtype is not dtype and x.dtype != dtype:
        raise errors.invalid_argument_type(
            argument, f"must have dtype {dtype.name}, as `query` on the first call", x
        )
    if shape[-1] not in (None, size):
        raise errors.invalid_argument(
            argument,
            f"must have last dimension {size}, as on the first call (which "
            "created the weights)",
            shape,
        )


def _as_tensor(argument: str, x: Any) -> tf.Tensor:
    if type(x) is tensors.EAGER_TENSOR or isinstance(x, tf.Tensor):
        return x
    if x is None or isinstance(x, (str, bytes)):
        raise errors.bad_type(argument, "must be a float tensor `[B, T, D]`", x)
    return utils.to_tensor(argument, x)


def _check_same_dims(argument: str, x: tf.Tensor, other: tf.Tensor, count: int) -> None:
    """Raises unless `x` and `other` agree on their first `count` dimensions."""
    for a, b in zip(x.shape.as_list()[:count], other.shape.as_list()[:count]):
        if a is not None and b is not None and a != b:
            raise errors.bad_value(
                argument,
                f"must match the leading dimensions of the other inputs "
                f"({other.shape.as_list()[:count]})",
                x.shape,
            )


def _cast_inputs(
    query: tf.Tensor, key: tf.Tensor, value: tf.Tensor, dtype: tf.DType
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The inputs cast to a policy's compute dtype, keeping which are the same."""
    q = precision.cast(query, dtype)
    k = q if key is query else precision.cast(key, dtype)
    if value is key:
        return q, k, k
    return q, k, q if value is query else precision.cast(value, dtype)


def _empty(length: Any) -> bool:
    """Whether a sequence length is a static 0."""
    return type(length) is int and length == 0


def _project(
    module: linear.Linear,
    x: tf.Tensor,
    shape: tuple[Any, ...],
    dtype: tf.DType | None = None,
) -> tf.Tensor:
    """`module(x)` for `[..., D]` inputs, reshaped to `shape`, with the kernels
    only; with a `dtype` (a policy's compute dtype) the kernel and bias are in it.

    The projection's own op sequence (`linear.product`: weight step, matmul,
    adapter, bias), on raw kernels in eager mode (in graphs with the weight
    gradient's layout of `products.matmul`). One 2-D matmul over all rows:
    TensorFlow's gradient of a batched matmul by a 2-D weight is a matmul per
    example plus a sum (about twice the CPU time of the weight gradient here).
    """
    rows = _reshape(x, (-1, module.w.shape[0]))
    raw = tf.executing_eagerly()
    return _reshape(linear.product(module, rows, dtype, raw=raw), shape)


# Whether traced self-attention without a cache projects the query, key and
# value with one matmul (`_project_together`). The switch exists for tests,
# which compare against the three separate products (the plain version).
FUSE_PROJECTIONS = True

# Whether traced calls without a cache (and prompts written into one) with
# known shapes run their core (products, mask, softmax) as XLA-compiled
# functions (`compiled_attention`). None (the default): where TensorFlow runs
# its default CPU kernels (Eigen), not where it runs oneDNN's, whose batch
# matmuls beat XLA's products on these shapes (`_compiled_core`). True or
# False decide; False is the tests' switch to the plain ops, their oracle.
COMPILED_CORE: bool | None = None


def _compiled_core() -> bool:
    """Whether traced calls use the compiled core (`COMPILED_CORE`).

    Measured on one 2-core AVX-512 host (bench Transformer's train step,
    interleaved): with oneDNN's kernels the plain ops were 3-5% faster per
    step (219.7 against 227.6 ms; causal `[1, 2048, 8, 64]` forward and
    backward 244 against 265 ms); with TensorFlow's default kernels on the
    same host the compiled core was 11% faster (241 against 272 ms), as on
    AVX2 hosts, where TensorFlow leaves oneDNN off. Where there is a GPU or
    TPU (where the products run by default), the compiled core, as before.
    """
    if COMPILED_CORE is None:
        return not tf_compat.onednn_enabled() or utils.accelerator_present()
    return COMPILED_CORE


def _fusable(modules: tuple[linear.Linear, ...]) -> bool:
    """Whether projections of one input can run as one product: no adapters,
    and all with or all without biases."""
    return all(m.lora is None for m in modules) and (
        len({m.with_bias for m in modules}) == 1
    )


def _project_together(
    modules: tuple[linear.Linear, ...],
    x: tf.Tensor,
    shapes: tuple[tuple[Any, ...], ...],
    dtype: tf.DType | None = None,
) -> list[tf.Tensor]:
    """`[_project(m, x, shape, dtype) for m, shape in zip(modules, shapes)]`
    as one matmul by the kernels side by side (and one bias add), split after.

    One `[B * T, D] x [D, 3 * inner]` product instead of three
    `[B * T, D] x [D, inner]` ones, forward and backward (one input
    gradient instead of three and their sum): about 1.25 x faster for the
    projections of a training step on a CPU (PyTorch keeps its weights
    together for the same reason). Each output is the same dot product as
    before, up to the matmul kernel's float32 summation order.
    """
    rows = _reshape(x, (-1, modules[0].w.shape[0]))
    kernels = [m._weight_step(m, dtype) for m in modules]
    y = _MAT_MUL(a=rows, b=_CONCAT(values=kernels, axis=1))
    if modules[0].with_bias:
        biases = [m.b if dtype is None else precision.cast(m.b, dtype) for m in modules]
        y = _BIAS_ADD(value=y, bias=_CONCAT(values=biases, axis=0))
    sizes = [kernel.shape[-1] for kernel in kernels]
    parts = _SPLIT(value=y, size_splits=sizes, axis=1, num_split=len(sizes))
    return [_reshape(part, shape) for part, shape in zip(parts, shapes, strict=True)]


def _causal(
    time: Any, key_time: Any, like: tf.Tensor, window: int | None = None
) -> tf.Tensor:
    if (
        type(time) is int
        and type(key_time) is int
        and time * key_time <= _MAX_CACHED_MASK
        and tf.executing_eagerly()
    ):
        return _eager_causal_mask(time, key_time, like.device, window)
    return _causal_mask(time, key_time, None, window)


def _first_prompt(
    cached: tuple[Any, ...] | None, time: Any, user_mask: Any, dropout: Any
) -> bool:
    """Whether a traced call writes a prompt of known length at index 0 of a
    (non-ring) cache, with no other mask or dropout: its attention is then
    causal self-attention over the prompt."""
    return (
        cached is not None
        and not cached[4]
        and user_mask is None
        and dropout is None
        and type(time) is int
        and time > 1
        and not tf.executing_eagerly()
        and tf.get_static_value(cached[2]) == 0
    )


def _allowed(
    time: Any,
    key_time: Any,
    cached: tuple[Any, ...] | None,
    positions: Any,
    causal: bool,
    user_mask: tf.Tensor | None,
    like: tf.Tensor,
    window: int | None = None,
) -> tf.Tensor | None:
    """Where queries may attend (None: everywhere): causally with a cache or
    `causal`, within the `window`, and where the user's mask allows."""
    if cached is not None:
        attend = _causal_mask(time, cached[3], positions, window)
    elif causal:
        attend = _causal(time, key_time, like, window)
    elif window is not None:
        attend = _window_mask(time, key_time, window)
    else:
        attend = None
    if user_mask is not None:
        attend = user_mask if attend is None else tf.logical_and(user_mask, attend)
    return attend


def _cache_tensor(
    x: Any, dtype: tf.DType, heads: int, size: int, cast: bool = False
) -> tf.Tensor:
    if x is None or isinstance(x, (str, bytes)):
        raise errors.bad_type("cache", "must hold tensors", x)
    x = utils.to_tensor("cache", x)
    if cast:
        x = precision.cast(x, dtype)
    shape = x.shape
    if shape.rank != 4:
        raise errors.bad_value(
            "cache", "must hold keys and values of rank 4 `[B, L, heads, size]`", shape
        )
    if x.dtype != dtype:
        raise errors.bad_type(
            "cache", f"must hold {dtype.name} keys and values (the inputs' dtype)", x
        )
    if shape[2] not in (None, heads) or shape[3] not in (None, size):
        raise errors.bad_value(
            "cache",
            f"must hold keys and values of shape `[B, L, {heads}, size]` (for "
            "this module's `num_kv_heads`, `key_size` and `value_size`)",
            shape,
        )
    return x


def _cache_index(index: Any) -> tf.Tensor:
    if index is None or isinstance(index, (str, bytes)):
        raise errors.bad_type("cache", "must have an integer `index`", index)
    index = utils.to_tensor("cache", index)
    if not index.dtype.is_integer:
        raise errors.bad_type("cache", "must have an integer `index`", index)
    if index.shape.rank != 0:
        raise errors.bad_value("cache", "must have a scalar `index`", index)
    return index if index.dtype == tf.int32 else tf.cast(index, tf.int32)


def _write(
    key_cache: tf.Tensor,
    value_cache: tf.Tensor,
    keys: tf.Tensor,
    values: tf.Tensor,
    positions: tf.Tensor,
    batch: Any,
    time: Any,
) -> tuple[tf.Tensor, tf.Tensor]:
    """The caches with `keys`/`values` `[B, T, ...]` written at `positions`."""
    length = key_cache.shape[1]
    if isinstance(time, int) and time == 1 and length is not None:
        # One new position (a decoding step): a select against a one-hot row
        # takes fewer ops than building scatter indices, and decoding is
        # bound by the op count.
        hit = tf.reshape(tf.equal(tf.range(length), positions), [1, length, 1, 1])
        return tf.where(hit, keys, key_cache), tf.where(hit, values, value_cache)
    rows = tf.broadcast_to(tf.expand_dims(tf.range(batch), 1), [batch, time])
    columns = tf.broadcast_to(tf.expand_dims(positions, 0), [batch, time])
    indices = tf.stack([rows, columns], axis=-1)
    return (
        tf.tensor_scatter_nd_update(key_cache, indices, keys),
        tf.tensor_scatter_nd_update(value_cache, indices, values),
    )


def _ring_positions(index: tf.Tensor, slots: int) -> tf.Tensor:
    """The positions held by a ring cache's slots with `index` positions
    written: slot `s` holds the last `p < index` with `p % slots == s`
    (negative: empty)."""
    slot = tf.range(slots)
    return slot + slots * tf.math.floordiv(index - 1 - slot, slots)


def _ring_write(
    cached: tuple[Any, ...],
    keys: tf.Tensor,
    values: tf.Tensor,
    positions: tf.Tensor,
    batch: Any,
    time: Any,
) -> tuple[tf.Tensor, tf.Tensor]:
    """A ring cache with the last `min(T, slots)` of `keys`/`values` written
    at their positions modulo the slot count."""
    key_cache, value_cache, _, slots, _ = cached
    if isinstance(time, int) and time > slots:
        keys, values = keys[:, -slots:], values[:, -slots:]
        positions, time = positions[-slots:], slots
    elif not isinstance(time, int):
        kept = tf.minimum(time, slots)
        keys, values = keys[:, time - kept :], values[:, time - kept :]
        positions, time = positions[time - kept :], kept
    return _write(key_cache, value_cache, keys, values, positions % slots, batch, time)


def _dropout_seed(seed: Any) -> tf.Tensor:
    """`dropout_seed` as an integer tensor `[2]`; None: a fresh one."""
    if seed is None:
        return tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
    if isinstance(seed, (str, bytes)):
        raise errors.bad_type("dropout_seed", "must be an integer tensor `[2]`", seed)
    seed = utils.to_tensor("dropout_seed", seed)
    if not seed.dtype.is_integer:
        raise errors.bad_type("dropout_seed", "must be an integer tensor `[2]`", seed)
    if seed.shape != [2]:
        raise errors.bad_value(
            "dropout_seed", "must have shape `[2]` (a pair of integers)", seed
        )
    return seed
