"""`snt.hf.generate`: autoregressive decoding with the KV cache, in one
compiled loop; `snt.hf.load_tokenizer`."""

from __future__ import annotations

import inspect
import os
import pathlib
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import checks, errors

# The compiled decoding loop of each model, by `jit_compile` (weakly keyed:
# the functions hold the model weakly, so models are freed as usual).
_FUNCTIONS: weakref.WeakKeyDictionary[Any, dict[bool, Any]] = (
    weakref.WeakKeyDictionary()
)


def _prompts(prompts: Any) -> tuple[np.ndarray, np.ndarray]:
    """The prompts right-padded into `[B, P]` int32, and their lengths."""
    if isinstance(prompts, (tf.Tensor, np.ndarray)):
        array = np.asarray(prompts)
        if array.ndim != 2 or array.shape[1] == 0 or array.shape[0] == 0:
            raise errors.bad_value(
                "prompts",
                "must be a non-empty `[batch, time]` array of token ids",
                prompts,
            )
        rows = list(array)
    elif isinstance(prompts, Sequence) and not isinstance(prompts, (str, bytes)):
        rows = [np.asarray(row) for row in prompts]
    else:
        raise errors.bad_type(
            "prompts",
            "must be a sequence of token id sequences or a `[batch, time]` array",
            prompts,
        )
    if not rows or any(r.ndim != 1 or r.size == 0 for r in rows):
        raise errors.bad_value(
            "prompts", "must hold at least one non-empty sequence of token ids", prompts
        )
    if any(not np.issubdtype(r.dtype, np.integer) for r in rows):
        raise errors.bad_type("prompts", "must hold integer token ids", prompts)
    lengths = np.array([r.size for r in rows], np.int32)
    padded = np.zeros([len(rows), int(lengths.max())], np.int32)
    for i, row in enumerate(rows):
        padded[i, : row.size] = row
    return padded, lengths


def _filter(logits: tf.Tensor, top_k: int | None, top_p: float | None) -> tf.Tensor:
    """`logits` with the tokens outside the top k / top p set to -inf."""
    low = tf.constant(-np.inf, logits.dtype)
    vocab = logits.shape[-1]
    if top_k is not None and (vocab is None or top_k < vocab):
        kth = tf.math.top_k(logits, top_k).values[:, -1:]
        logits = tf.where(logits < kth, low, logits)
    if top_p is not None and top_p < 1.0:
        ordered = tf.sort(logits, direction="DESCENDING")
        # Keep the smallest prefix whose probability reaches `top_p`: the
        # tokens whose preceding mass is below it (the first always).
        before = tf.cumsum(tf.nn.softmax(ordered), axis=-1, exclusive=True)
        kept = tf.where(before < top_p, ordered, tf.constant(np.inf, logits.dtype))
        threshold = tf.reduce_min(kept, axis=-1, keepdims=True)
        logits = tf.where(logits < threshold, low, logits)
    return logits


def _sample(
    logits: tf.Tensor, step: tf.Tensor, seed: tf.Tensor, options: tuple[Any, ...]
) -> tf.Tensor:
    temperature, top_k, top_p = options[:3]
    logits = tf.cast(logits, tf.float32)
    if temperature == 0:
        return tf.argmax(logits, axis=-1, output_type=tf.int32)
    logits = _filter(logits / temperature, top_k, top_p)
    step_seed = tf.stack([seed, tf.cast(step, tf.int64)])
    return tf.random.stateless_categorical(logits, 1, step_seed, dtype=tf.int32)[:, 0]


def _decode(
    model: Any,
    tokens: tf.Tensor,
    lengths: tf.Tensor,
    seed: tf.Tensor,
    start: int,
    new: int,
    options: tuple[Any, ...],
) -> tf.Tensor:
    """The decoding loop: `tokens` `[B, L]` (prompts, then room) filled in."""
    _, _, _, stop, pad = options
    batch, length = tokens.shape
    cache = model.initial_cache(batch, length)
    # Only the last position's logits are used (`snt.nets.CausalLM` can skip
    # the head for the others).
    last = {"logits_to_keep": 1} if _keeps_logits(model) else {}
    logits, cache = model(tokens[:, :start], cache=cache, **last)
    stops = tf.constant(list(stop) or [-1], tf.int32)
    columns = tf.range(length)

    def body(t: Any, out: Any, cache: Any, logits: Any, done: Any) -> Any:
        sampled = _sample(logits, t, seed, options)
        prompt = t < lengths
        token = tf.where(prompt, out[:, t], sampled)
        token = tf.where(done, pad, token)
        out = tf.where(tf.equal(columns, t)[None, :], token[:, None], out)
        stopped = tf.reduce_any(tf.equal(token[:, None], stops[None, :]), axis=1)
        done |= ~prompt & (stopped | (t + 1 >= lengths + new))
        logits, cache = model(token[:, None], cache=cache)
        return t + 1, out, cache, logits[:, -1], done

    def cond(t: Any, out: Any, cache: Any, logits: Any, done: Any) -> Any:
        return (t < length) & ~tf.reduce_all(done)

    done = tf.zeros([batch], tf.bool)
    _, out, _, _, _ = tf.while_loop(
        cond, body, (tf.constant(start), tokens, cache, logits[:, -1], done)
    )
    positions = lengths[:, None] + tf.range(new)[None, :]
    return tf.gather(out, positions, batch_dims=1)


def _keeps_logits(model: Any) -> bool:
    """Whether `model` takes `logits_to_keep` (as `snt.nets.CausalLM`)."""
    try:
        parameters = inspect.signature(model.__call__).parameters
    except (TypeError, ValueError):
        return False
    return "logits_to_keep" in parameters


def _function(model: Any, jit_compile: bool) -> Any:
    functions = _FUNCTIONS.setdefault(model, {})
    if jit_compile not in functions:
        ref = weakref.ref(model)

        def run(tokens: Any, lengths: Any, seed: Any, *static: Any) -> Any:
            return _decode(ref(), tokens, lengths, seed, *static)

        functions[jit_compile] = tf.function(
            run, jit_compile=jit_compile, autograph=False, reduce_retracing=False
        )
    return functions[jit_compile]


def generate(
    model: Any,
    prompts: Any,
    max_new_tokens: int,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    stop_tokens: Sequence[int] = (),
    pad_token: int = 0,
    jit_compile: bool = False,
) -> tf.Tensor:
    """Continues token sequences with a causal language model and its cache.

    Decodes `max_new_tokens` tokens after each prompt, one position per step
    with the model's KV cache (`model.initial_cache`, `model(tokens,
    cache=...)`: `snt.nets.CausalLM` or anything with that interface). The
    whole loop, prompt included, is one `tf.function` (a `tf.while_loop`
    over the steps), traced once per batch size, prompt lengths, number of
    new tokens and sampling options, and compiled with XLA if `jit_compile`.

    Prompts of different lengths decode together: the shortest prompt is
    read in one call, and each longer prompt's remaining tokens are fed one
    per step (while shorter ones already generate), so every sequence sees
    exactly its own tokens at its own positions, with no padding in the
    cache (as Meta's Llama reference code does).

    Args:
      model: The language model (e.g. from `snt.hf.load`).
      prompts: Token ids: a sequence of sequences (lengths may differ), or a
        `[batch, time]` int array or tensor.
      max_new_tokens: Number of tokens to generate per prompt, positive.
      temperature: 0 (default) means greedy decoding (argmax); above 0,
        tokens are sampled from `softmax(logits / temperature)`.
      top_k: With sampling, only from the `top_k` most likely tokens.
        Default None: all.
      top_p: With sampling, only from the smallest set of most likely tokens
        whose probability reaches `top_p` (nucleus sampling, Holtzman et al.
        2019), in (0, 1]. Default None: all.
      seed: Seed of the sampling (stateless: the same seed gives the same
        tokens). Default None: a random seed.
      stop_tokens: Token ids that end a sequence (e.g. the tokenizer's end of
        sequence); the stop token is kept and the positions after it hold
        `pad_token`. Decoding ends when every sequence has stopped.
      pad_token: The id written after a stop token. Default 0.
      jit_compile: Whether the loop is compiled with XLA. Default False.

    Returns:
      An int32 tensor `[batch, max_new_tokens]`: the tokens after each prompt.

    Raises:
      ValueError: for empty prompts, a non-positive `max_new_tokens`, or
        sampling options out of range; also as the model for prompts plus new
        tokens longer than it allows.
      TypeError: for prompts that are not integer token ids.

    >>> lm = snt.nets.CausalLM(10, snt.nets.Transformer(
    ...     num_layers=1, num_heads=2, model_size=8, causal=True, rotary=True))
    >>> snt.hf.generate(lm, [[1, 2, 3], [4]], max_new_tokens=5).shape
    TensorShape([2, 5])
    """
    tokens, lengths = _prompts(prompts)
    new = checks.size("max_new_tokens", max_new_tokens)
    temperature = checks.real("temperature", temperature, allow_tensor=False)
    if temperature < 0:
        raise errors.bad_value("temperature", "must not be negative", temperature)
    if top_k is not None:
        top_k = checks.size("top_k", top_k)
    if top_p is not None:
        mass = checks.real("top_p", top_p, allow_tensor=False)
        if not 0 < mass <= 1:
            raise errors.bad_value("top_p", "must be in (0, 1]", top_p)
        top_p = mass
    seed = checks.seed("seed", seed)
    if seed is None:
        seed = int(np.random.default_rng().integers(2**31))
    if isinstance(stop_tokens, (str, bytes)) or not isinstance(stop_tokens, Sequence):
        raise errors.bad_type(
            "stop_tokens", "must be a sequence of token ids", stop_tokens
        )
    stop = tuple(checks.integer("stop_tokens", t, minimum=0) for t in stop_tokens)
    pad = checks.integer("pad_token", pad_token, minimum=0)
    jit = checks.flag("jit_compile", jit_compile)
    batch, width = tokens.shape
    buffer = np.full([batch, width + new], pad, np.int32)
    buffer[:, :width] = tokens
    options = (temperature, top_k, top_p, stop, pad)
    return _function(model, jit)(
        tf.constant(buffer),
        tf.constant(lengths),
        tf.constant(seed, tf.int64),
        int(lengths.min()),
        new,
        options,
    )


def load_tokenizer(path: Any) -> Any:
    """A `tokenizers.Tokenizer` from `tokenizer.json` (a file or its directory).

    Needs the `tokenizers` package (`pip install 'sonnet[hf]'`). Encode with
    `tokenizer.encode(text).ids`, decode with `tokenizer.decode(ids)`.

    Args:
      path: A model directory holding `tokenizer.json`, or the file.

    Returns:
      The `tokenizers.Tokenizer`.

    Raises:
      ValueError: if there is no such file or it cannot be read.
      ImportError: if `tokenizers` is not installed.

    >>> import os, tempfile
    >>> from tokenizers import Tokenizer, models
    >>> folder = tempfile.mkdtemp()
    >>> vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    >>> model = models.WordLevel(vocab, unk_token="[UNK]")
    >>> Tokenizer(model).save(os.path.join(folder, "tokenizer.json"))
    >>> snt.hf.load_tokenizer(folder).get_vocab_size()
    3
    """
    try:
        import tokenizers
    except ImportError as e:  # pragma: no cover - installed in CI.
        raise ImportError(
            "Reading tokenizer.json needs the `tokenizers` package: "
            "`pip install 'sonnet[hf]'` (or `pip install tokenizers`)."
        ) from e
    if not isinstance(path, (str, os.PathLike)):
        raise errors.bad_type("path", "must be a file or directory path", path)
    file = pathlib.Path(path)
    if file.is_dir():
        file = file / "tokenizer.json"
    if not file.is_file():
        raise errors.bad_value(
            "path", "must be tokenizer.json or its directory", str(path)
        )
    try:
        return tokenizers.Tokenizer.from_file(str(file))
    except Exception as e:  # The Rust library's error types are not exported.
        raise errors.bad_value(
            str(file), f"must be a readable tokenizer.json ({e})", file.name
        ) from e
