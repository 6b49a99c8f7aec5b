"""Long-sequence attention workloads: chunked attention and windowed decoding.

- `attention_long`: one `tf.function` forward + backward pass (gradients of
  `sum(outputs ** 2)` for the inputs and every variable) of a causal
  `snt.MultiHeadAttention(num_heads=8, key_size=64)` self-attention on
  `[1, T, 512]`, chunked (`chunked=True`, chunk 512: an online softmax per
  query block, gradients recomputed per block) against dense
  (`chunked=False`: the `[1, 8, T, T]` logits and probabilities). Memory
  rows: peak RSS increase of a fresh process that builds the layer and runs
  2 passes (the first traces), at T = 2048 and 8192 (the dense one may fail
  at 8192: the row then records the error). Step rows: the compiled pass at
  T = 2048, both interleaved in this process. `--quick`: T = 256 and 512,
  chunk 64.
- `decode_window`: greedy-style decoding of 2048 positions (batch 1) through
  a 2-block causal `snt.nets.Transformer` (width 512, 8 heads of 64,
  rotary), the whole loop one `tf.function` (`tf.while_loop` feeding fixed
  inputs, the cache in the loop state): window 256 (a ring cache of 256
  slots per block) against full attention (a 2048-slot cache). Rows: time
  per sequence, and the cache's size (MiB) once decoding has passed 256
  positions (the ring's is constant from there). `--quick`: 256 positions,
  window 32.

These rows use options the original Sonnet 2.0.2 does not have: no `--vs`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from bench.harness import Sampler, Samples, fetch, interleave, timed
from bench.workloads import OURS, Row, Target, Workload

HEADS, KEY_SIZE = 8, 64
LENGTHS, QUICK_LENGTHS = (2048, 8192), (256, 512)
CHUNK, QUICK_CHUNK = 512, 64
DECODE, QUICK_DECODE = (2048, 256), (256, 32)  # (positions, window)


def _attention_step(time: int, chunked: bool, chunk: int) -> Callable[[], Any]:
    import sonnet as snt

    mha = snt.MultiHeadAttention(
        HEADS, KEY_SIZE, chunked=chunked, chunk_size=chunk, rotary=True
    )
    x = tf.random.normal([1, time, HEADS * KEY_SIZE], seed=0)
    mha(x[:, :1])

    @tf.function
    def step(x: tf.Tensor) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = mha(x, causal=True)
            loss = tf.reduce_sum(tf.square(y))
        return tape.gradient(loss, [x, *mha.trainable_variables])

    return lambda: step(x)


def _lazy(make: Callable[[], Callable[[], Any]]) -> Sampler:
    """Times `make()`'s step; the first sample builds it and runs the first
    (tracing) call before the timed ones."""
    step: list[Callable[[], Any]] = []

    def sample(number: int) -> tuple[float, float]:
        if not step:
            step.append(make())
            fetch(step[0]())
        return timed(step[0])(number)

    return sample


def _row(time: int, chunked: bool) -> str:
    return f"attention_long_{time}" + ("" if chunked else "_dense")


def build_attention(impl: str, quick: bool) -> dict[str, Sampler]:
    """Samplers named by the full lengths (`--quick` runs the short ones)."""
    del impl
    lengths = QUICK_LENGTHS if quick else LENGTHS
    chunk = QUICK_CHUNK if quick else CHUNK
    return {
        _row(name, c): _lazy(lambda n=n, c=c: _attention_step(n, c, chunk))
        for name, n in zip(LENGTHS, lengths, strict=True)
        for c in (True, False)
    }


def run_attention(
    impls: tuple[str, ...],
    other_python: str | None,
    quick: bool,
    device: str,
    repeats: int,
) -> dict[tuple[str, str], Samples]:
    """Memory rows in fresh processes (one each; the dense one at the longer
    length may fail), then the step rows at the shorter length, interleaved."""
    del impls, other_python
    from bench.workloads.process import memory_sample, our_root

    lengths = LENGTHS  # Row names; `--quick` builds shorter ones.
    results: dict[tuple[str, str], Samples] = {}
    for n in lengths:
        for chunked in (True, False):
            row = _row(n, chunked)
            samples = results[f"mem_{row}", OURS] = Samples()
            args = ("attention_long", row, "sonnet", 2, quick, device, our_root())
            memory_sample(samples, sys.executable, *args, timeout=1800)
    samplers = build_attention("sonnet", quick)
    timed_rows = {
        (_row(lengths[0], c), OURS): samplers[_row(lengths[0], c)]
        for c in (True, False)
    }
    results.update(interleave(timed_rows, repeats, 1, warmup=1))
    return results


def _decoder(positions: int, window: int | None) -> tuple[Any, Callable[[], Any]]:
    import sonnet as snt

    model = snt.nets.Transformer(
        num_layers=2,
        num_heads=HEADS,
        model_size=HEADS * KEY_SIZE,
        causal=True,
        rotary=True,
        window=window,
    )
    x = tf.random.normal([1, positions, HEADS * KEY_SIZE], seed=0)
    model(x[:, :1])

    @tf.function
    def decode(x: tf.Tensor) -> Any:
        def body(t: Any, cache: Any, total: Any) -> Any:
            y, cache = model(x[:, t : t + 1], cache=cache)
            return t + 1, cache, total + tf.reduce_sum(y)

        _, cache, total = tf.while_loop(
            lambda t, *_: t < positions,
            body,
            (tf.constant(0), model.initial_cache(1, positions), tf.constant(0.0)),
        )
        return total

    return model, lambda: decode(x)


def _cache_mib(model: Any, positions: int) -> float:
    cache = model.initial_cache(1, positions)
    return (
        sum(c.key.shape.num_elements() + c.value.shape.num_elements() for c in cache)
        * 4
        / 2**20
    )


def build_decode(impl: str, quick: bool) -> dict[str, Sampler]:
    del impl
    positions, window = QUICK_DECODE if quick else DECODE

    def sizes(window: int | None) -> Sampler:
        def sample(number: int) -> tuple[float, float]:
            del number
            model, _ = _decoder(positions, window)
            mib = _cache_mib(model, positions)
            return mib, mib

        return sample

    return {
        "decode_window": _lazy(lambda: _decoder(positions, window)[1]),
        "decode_window_full": _lazy(lambda: _decoder(positions, None)[1]),
        "decode_window_cache": sizes(window),
        "decode_window_cache_full": sizes(None),
    }


def run_decode(
    impls: tuple[str, ...],
    other_python: str | None,
    quick: bool,
    device: str,
    repeats: int,
) -> dict[tuple[str, str], Samples]:
    del impls, other_python, device
    samplers = build_decode("sonnet", quick)
    results: dict[tuple[str, str], Samples] = {}
    for row in ("decode_window_cache", "decode_window_cache_full"):
        mib, _ = samplers[row](1)
        results[row, OURS] = Samples(wall=[mib], cpu=[mib])
    steps = {(r, OURS): samplers[r] for r in ("decode_window", "decode_window_full")}
    results.update(interleave(steps, repeats, 1, warmup=1))
    return results


_MHA = "causal snt.MultiHeadAttention(8 heads of 64, rotary) on [1, T, 512]"

WORKLOADS = {
    "attention_long": Workload(
        name="attention_long",
        rows=(
            Row(
                "mem_attention_long_2048",
                "MiB",
                f"peak RSS increase of a fresh process: {_MHA}, T = 2048, "
                "chunked (chunk 512), 2 tf.function forward + backward passes",
            ),
            Row("mem_attention_long_2048_dense", "MiB", "the same, dense"),
            Row("mem_attention_long_8192", "MiB", "the same at T = 8192, chunked"),
            Row("mem_attention_long_8192_dense", "MiB", "the same, dense"),
            Row(
                "attention_long_2048",
                "ms",
                "that compiled forward + backward pass at T = 2048, chunked",
            ),
            Row("attention_long_2048_dense", "ms", "the same, dense"),
        ),
        impls=(OURS,),
        repeats=5,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_attention,
        run=run_attention,
        targets=(
            Target(
                "mem_attention_long_8192",
                OURS,
                0.25,
                other_row="mem_attention_long_8192_dense",
            ),
            Target(
                "attention_long_2048", OURS, 1.3, other_row="attention_long_2048_dense"
            ),
        ),
        original=False,
    ),
    "decode_window": Workload(
        name="decode_window",
        rows=(
            Row(
                "decode_window",
                "s",
                "tf.function decoding of 2048 positions, batch 1, 2-block causal "
                "snt.nets.Transformer (width 512, 8 heads, rotary), window 256 "
                "(ring cache of 256 slots)",
            ),
            Row("decode_window_full", "s", "the same with full attention"),
            Row(
                "decode_window_cache",
                "MiB",
                "size of that decoding cache (constant after 256 positions)",
            ),
            Row("decode_window_cache_full", "MiB", "the full-attention cache"),
        ),
        impls=(OURS,),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_decode,
        run=run_decode,
        targets=(Target("decode_window", OURS, 1.0, other_row="decode_window_full"),),
        original=False,
    ),
}
