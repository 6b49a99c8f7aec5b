"""`snt.nets.CausalLM`: a decoder-only language model (tokens in, logits out).

The token embedding, optional learned positions, a causal
`snt.nets.Transformer` and the output head, as plain submodules: the layout of
GPT-2, Llama, Mistral and Qwen, which `snt.hf.load` reads from Hugging Face
checkpoints into this module.
"""

from __future__ import annotations

import math
from typing import Any, cast

import tensorflow as tf

from sonnet._src import attention as attention_lib
from sonnet._src import base, checks, errors, initializers, precision, utils
from sonnet._src import embed as embed_lib
from sonnet._src import linear as linear_lib
from sonnet._src.nets import transformer as transformer_lib


def _check_tokens(tokens: Any) -> tf.Tensor:
    if tokens is None or isinstance(tokens, (str, bytes)):
        raise errors.bad_type(
            "tokens", "must be an integer tensor `[batch, time]`", tokens
        )
    tokens = utils.to_tensor("tokens", tokens)
    if tokens.dtype not in (tf.int32, tf.int64):
        raise errors.bad_type("tokens", "must be int32 or int64 token ids", tokens)
    if tokens.shape.rank != 2:
        raise errors.bad_value("tokens", "must have rank 2 `[batch, time]`", tokens)
    return tokens


def cache_index(cache: Any) -> tf.Tensor:
    """The filled length of a Transformer's cache (per block, or stacked)."""
    if isinstance(cache, attention_lib.AttentionCache):
        index = utils.to_tensor("cache", cache.index)
        return index[0] if index.shape.rank else index
    if not isinstance(cache, (tuple, list)) or not cache:
        raise errors.bad_type(
            "cache",
            "must be the cache of `initial_cache` (one `snt.AttentionCache` per block)",
            cache,
        )
    return cache_index(cache[0])


def _check_keep(logits_to_keep: Any, tokens: tf.Tensor) -> int | None:
    if logits_to_keep is None:
        return None
    keep = checks.size("logits_to_keep", logits_to_keep)
    time = tokens.shape[1]
    if time is not None and keep > time:
        raise errors.bad_value(
            "logits_to_keep",
            f"must be at most the number of positions given ({time})",
            logits_to_keep,
        )
    return keep


# Up to this many rows, the tied head multiplies the other way round.
_SWAPPED_HEAD_ROWS = 512


def tied_logits(rows: tf.Tensor, table: tf.Tensor) -> tf.Tensor:
    """`rows @ table^T` for rows `[N, size]` and a table `[vocab, size]`.

    TensorFlow's CPU matmul against a transposed operand is slow for a few
    rows (measured on a 2-core AVX2 CPU, GPT-2's table: 2 or 4 rows 120 ms
    against 19 ms the other way round, 8 rows 35 against 16, 512 rows 480
    against 350); `(table @ rows^T)^T` is faster up to a few hundred rows
    (decoding and generation's prompts), the plain product from about 1000
    rows on (training batches). The rule needs the row count statically.
    """
    count = rows.shape[0]
    if count is not None and 1 < count <= _SWAPPED_HEAD_ROWS:
        return tf.transpose(tf.matmul(table, rows, transpose_b=True))
    return tf.matmul(rows, table, transpose_b=True)


class CausalLM(base.Module):
    """A decoder-only language model: `[batch, time]` tokens -> logits.

    `logits = head(transformer(embed(tokens) + positions(p)))`, where
    `embed` is an `snt.Embed` of `vocab_size` rows, `positions` (only with
    `max_positions`) an `snt.Embed` of learned position embeddings (GPT-2),
    `transformer` the given causal `snt.nets.Transformer` (its final norm
    included), and `head` an `snt.Linear` without bias, or with
    `tie_embeddings=True` the embedding table itself
    (`logits = h @ embed.embeddings^T`). Models with rotary position
    embeddings (Llama, Mistral, Qwen) set `rotary=True` on the Transformer
    and leave `max_positions` None.

    Decoding: as `snt.nets.Transformer`, with a cache from `initial_cache`;
    a call with `cache=` returns `(logits, new_cache)` and takes the next
    positions (learned positions are read at the cache's index).
    `snt.hf.generate` runs the whole decoding loop.

    Args:
      vocab_size: Number of token ids, a positive int.
      transformer: A causal `snt.nets.Transformer` (`causal=True`), whose
        `model_size` is the embedding size.
      max_positions: Number of learned position embeddings (the longest
        sequence). Default None: no learned positions.
      tie_embeddings: Whether the head is the transposed token embedding
        table (no `head` submodule). Default False.
      embed_init: Initializer of the embedding tables. Default None means
        truncated normal with stddev `1 / sqrt(model_size)`: rows of about
        unit norm, and tied logits of unit scale.
      name: Module name (default `causal_lm`).

    Attributes: `embed`, `positions` (with `max_positions`), `transformer`,
    `head` (untied only); these names are the checkpoint paths.

    Shapes:
      tokens int32/int64 `[batch, time]` -> float logits
      `[batch, time, vocab_size]`.

    >>> lm = snt.nets.CausalLM(
    ...     vocab_size=10,
    ...     transformer=snt.nets.Transformer(
    ...         num_layers=1, num_heads=2, model_size=8, causal=True, rotary=True))
    >>> tokens = tf.constant([[1, 2, 3]])
    >>> lm(tokens).shape
    TensorShape([1, 3, 10])
    >>> cache = lm.initial_cache(batch_size=1, max_length=4)
    >>> logits, cache = lm(tokens, cache=cache)
    >>> int(cache[0].index)
    3
    """

    def __init__(
        self,
        vocab_size: int,
        transformer: transformer_lib.Transformer,
        max_positions: int | None = None,
        tie_embeddings: bool = False,
        embed_init: initializers.Initializer | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.vocab_size = checks.size("vocab_size", vocab_size)
        if not isinstance(transformer, transformer_lib.Transformer):
            raise errors.bad_type(
                "transformer", "must be an `snt.nets.Transformer`", transformer
            )
        if not transformer.causal:
            raise errors.bad_value(
                "transformer",
                "must be causal (`causal=True`): a language model predicts each "
                "token from the earlier ones",
                transformer,
            )
        self.max_positions = checks.optional_size("max_positions", max_positions)
        self.tie_embeddings = checks.flag("tie_embeddings", tie_embeddings)
        checks.initializer("embed_init", embed_init)
        self.model_size = transformer.model_size
        if embed_init is None:
            embed_init = initializers.TruncatedNormal(
                stddev=1 / math.sqrt(self.model_size)
            )
        self.embed = embed_lib.Embed(
            self.vocab_size, self.model_size, initializer=embed_init, name="embed"
        )
        if self.max_positions is not None:
            self.positions = embed_lib.Embed(
                self.max_positions,
                self.model_size,
                initializer=embed_init,
                name="positions",
            )
        self.transformer = transformer
        if not self.tie_embeddings:
            self.head = linear_lib.Linear(self.vocab_size, with_bias=False, name="head")

    @utils.no_autograph
    def __call__(
        self,
        tokens: tf.Tensor,
        *,
        is_training: Any = False,
        mask: tf.Tensor | None = None,
        cache: Any = None,
        logits_to_keep: int | None = None,
        return_aux_losses: bool = False,
    ) -> tf.Tensor | tuple[tf.Tensor, Any]:
        """The logits of the next token at every position (or the last few).

        Args:
          tokens: int32 or int64 token ids `[batch, time]`.
          is_training: Whether to apply the Transformer's dropout (default
            False).
          mask: Optional attention mask for every layer, as for
            `snt.nets.Transformer` (combined with the causal mask).
          cache: Optional decoding cache from `initial_cache` or the previous
            call; `tokens` are then the next positions.
          logits_to_keep: Default None: the logits of every position. A
            positive int `n` (at most `time`): only those of the last `n`
            positions, `[batch, n, vocab_size]`, as `transformers`' argument
            of that name. Reading a prompt to generate from needs only the
            last position's, and the head is the largest matmul of a small
            model (`snt.hf.generate` passes 1).
          return_aux_losses: Whether to return the auxiliary losses of a
            Transformer with mixture-of-experts MLPs too (default False), as
            `snt.nets.Transformer`'s; not with `cache`.

        Returns:
          Logits `[batch, time, vocab_size]` (`[batch, logits_to_keep,
          vocab_size]`); with `cache`, the pair `(logits, new_cache)`; with
          `return_aux_losses=True`, the pair `(logits, aux_losses)`.

        Raises:
          TypeError: if `tokens` is not an integer tensor.
          ValueError: if `tokens` is not `[batch, time]`, or
            `logits_to_keep` is not a positive int at most `time` (and as
            `snt.nets.Transformer` for the other arguments).
        """
        tokens = _check_tokens(tokens)
        keep = _check_keep(logits_to_keep, tokens)
        table = None
        if self.tie_embeddings:
            # One dense read of the table serves the lookup and the head: a
            # lookup on the variable itself would make TensorFlow copy the
            # whole table on every later dense read (see `snt.Embed`).
            table = tf.convert_to_tensor(self.embed._weight_step(self.embed, None))
            x = self.embed._lookup(tokens, table)
        else:
            x = self.embed(tokens)
        if self.max_positions is not None:
            time = tf.shape(tokens)[1] if tokens.shape[1] is None else tokens.shape[1]
            positions = tf.range(time)
            if cache is not None:
                positions += tf.cast(cache_index(cache), tf.int32)
            x += tf.cast(self.positions(positions), x.dtype)
        if cache is None:
            if return_aux_losses is not False and checks.flag(
                "return_aux_losses", return_aux_losses
            ):
                h, losses = self.transformer(
                    x, is_training=is_training, mask=mask, return_aux_losses=True
                )
                return self._logits(h, table, keep), losses
            h = self.transformer(x, is_training=is_training, mask=mask)
            return self._logits(cast(tf.Tensor, h), table, keep)
        h, cache = self.transformer(
            x,
            is_training=is_training,
            mask=mask,
            cache=cache,
            return_aux_losses=return_aux_losses,
        )
        return self._logits(h, table, keep), cache

    @base.no_name_scope  # Called inside `__call__`'s scope.
    def _logits(self, h: tf.Tensor, table: Any, keep: int | None) -> tf.Tensor:
        if keep is not None:
            h = h[:, -keep:]
        # The head sees every position as one row: one 2-D matmul.
        shape = tf.shape(h)
        rows = tf.reshape(h, [-1, self.model_size])
        if table is not None:
            logits = tied_logits(rows, precision.cast(table, rows.dtype))
        else:
            logits = self.head(rows)
        return tf.reshape(logits, tf.concat([shape[:2], [self.vocab_size]], 0))

    def initial_cache(self, batch_size: Any, max_length: Any, dtype: Any = None) -> Any:
        """An empty decoding cache: the Transformer's (`initial_cache`).

        Args:
          batch_size: Number of sequences decoded together.
          max_length: Most positions the cache holds (prompt and generated
            tokens); at most `max_positions` with learned positions.
          dtype: Dtype of the cached keys and values; default None means
            float32, or under a `snt.precision` policy its compute dtype.

        Returns:
          The Transformer's cache (one `snt.AttentionCache` per block).

        Raises:
          ValueError: if `max_length` exceeds `max_positions`.
        """
        length = checks.size("max_length", max_length)
        if self.max_positions is not None and length > self.max_positions:
            raise errors.bad_value(
                "max_length",
                f"must be at most `max_positions` ({self.max_positions}), the "
                "number of learned positions",
                max_length,
            )
        return self.transformer.initial_cache(batch_size, length, dtype)
