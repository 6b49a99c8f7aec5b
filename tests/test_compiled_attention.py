"""The XLA-compiled attention core of traced calls (`compiled_attention.py`).

`snt.MultiHeadAttention` traced without a cache, with known shapes, runs
`softmax(q k^T + bias) v` and its gradient as compiled functions. Oracles:
the same module traced with `attention.COMPILED_CORE = False` (the plain
ops), eager calls and NumPy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import attention, compiled_attention, tf_compat, utils
from tests.attention_pairs import numpy_attention, outputs_and_grads


@pytest.fixture
def plain() -> Iterator[None]:
    """Traces made inside take the plain ops."""
    attention.COMPILED_CORE = False
    try:
        yield
    finally:
        attention.COMPILED_CORE = None


def _traced(fn: Callable[..., Any], compiled: bool, *args: Any, **kwargs: Any) -> Any:
    """`fn` as a `tf.function` traced with the core compiled or plain."""
    attention.COMPILED_CORE = compiled
    try:
        step = tf.function(fn, **kwargs)
        step.get_concrete_function(*args)
    finally:
        attention.COMPILED_CORE = None
    return step


def _compiled_calls(fn: Callable[..., Any], *args: Any) -> int:
    """How many calls of XLA-compiled functions a trace of `fn` makes."""
    graph = tf.function(fn).get_concrete_function(*args).graph
    calls = 0
    for op in graph.get_operations():
        if op.type in ("PartitionedCall", "StatefulPartitionedCall"):
            name = op.get_attr("f").name
            function = graph.as_graph_def().library.function
            for f in function:
                if f.signature.name == name and f.attr["_XlaMustCompile"].b:
                    calls += 1
    return calls


CONFIGS = {
    "mha": dict(num_heads=3, key_size=4),
    "sizes": dict(num_heads=2, key_size=4, value_size=6, model_size=10),
    "no-bias": dict(num_heads=2, key_size=4, with_bias=False),
    "window-rotary": dict(num_heads=2, key_size=4, rotary=True, window=2),
    "qk-norm": dict(num_heads=2, key_size=4, qk_norm=True),
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("causal", [False, True])
def test_outputs_and_gradients_match_the_plain_ops(config, causal):
    mha = snt.MultiHeadAttention(**CONFIGS[config])
    x = tf.random.normal([2, 6, 12], seed=3)
    mha(x)

    def step(x: tf.Tensor) -> Any:
        return outputs_and_grads(mha, x, causal=causal)

    compiled = _traced(step, True, x)
    plain = _traced(step, False, x)
    assert _compiled_calls(lambda x: mha(x, causal=causal), x) == 1
    (y1, g1), (y2, g2) = compiled(x), plain(x)
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_outputs_match_numpy(causal):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=3)
    x = tf.random.normal([2, 5, 7], seed=1)
    mha(x)
    y = tf.function(lambda x: mha(x, causal=causal))(x)
    allowed = np.tril(np.ones([5, 5], bool)) if causal else np.ones([5, 5], bool)
    np.testing.assert_allclose(
        y, numpy_attention(mha, x, allowed), rtol=1e-5, atol=1e-5
    )


def test_a_user_mask_of_time_by_keys_and_cross_attention():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, 5, 8], seed=2)
    memory = tf.random.normal([2, 3, 8], seed=4)
    mask = tf.constant(np.random.RandomState(0).rand(5, 3) > 0.4)
    mha(x, memory)

    def step(x: tf.Tensor) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = mha(x, memory, mask=mask)
            loss = tf.reduce_sum(y * tf.sin(y))
        return y, tape.gradient(loss, [x, *mha.trainable_variables])

    compiled = _traced(step, True, x)
    plain = _traced(step, False, x)
    (y1, g1), (y2, g2) = compiled(x), plain(x)
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y1, mha(x, memory, mask=mask), rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_second_order_gradients_match_the_plain_ops():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=3)
    x = tf.random.normal([1, 4, 6], seed=5)
    mha(x)

    def step(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = mha(x, causal=True)
                loss = tf.reduce_sum(tf.sin(y))
            g = inner.gradient(loss, x)
            norm = tf.reduce_sum(g * g)
        return outer.gradient(norm, x)

    compiled, plain = _traced(step, True, x), _traced(step, False, x)
    np.testing.assert_allclose(compiled(x), plain(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "policy, tolerance", [("mixed_bfloat16", 2e-2), ("mixed_float16", 2e-3)]
)
def test_mixed_precision_matches_the_plain_ops(policy, tolerance):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    snt.precision.apply(mha, policy)
    x = tf.random.normal([2, 5, 8], seed=6)
    mha(x)

    def step(x: tf.Tensor) -> Any:
        return outputs_and_grads(mha, x, causal=True)

    (y1, g1), (y2, g2) = _traced(step, True, x)(x), _traced(step, False, x)(x)
    np.testing.assert_allclose(y1, y2, rtol=tolerance, atol=tolerance)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(
            tf.cast(a, tf.float32), tf.cast(b, tf.float32), rtol=0.1, atol=0.05
        )


def test_softmax_runs_in_float32_for_half_operands():
    q = tf.random.normal([1, 2, 3, 4], dtype=tf.float32)
    half = tf.cast(q, tf.bfloat16)
    forward, _ = compiled_attention._compiled(tf.float32, False)
    graph = forward.get_concrete_function(half, half, half).graph
    softmax = [op for op in graph.get_operations() if op.type == "Softmax"]
    assert [op.get_attr("T") for op in softmax] == [tf.float32]
    heads = compiled_attention.core(half, half, half, None, tf.float32)
    assert heads.dtype == tf.bfloat16


def test_core_against_numpy_with_a_fully_masked_row():
    rng = np.random.RandomState(0)
    q, k, v = (rng.randn(2, 4, 3, 5).astype(np.float32) for _ in range(3))
    attend = np.ones([4, 4], bool)
    attend[1] = False  # Every key masked: uniform weights, as the plain ops.
    attend[2, 3] = False
    heads = compiled_attention.core(
        tf.constant(q), tf.constant(k), tf.constant(v), tf.constant(attend), tf.float32
    )
    logits = np.einsum("bthd,bshd->bhts", q, k)
    logits = np.where(attend, logits, np.float32(np.finfo(np.float32).min))
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expected = np.einsum("bhts,bshd->bthd", weights, v)
    np.testing.assert_allclose(heads, expected, rtol=1e-5, atol=1e-5)


def test_inside_a_step_compiled_by_xla():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, 5, 8], seed=7)
    mha(x)

    def step(x: tf.Tensor) -> Any:
        return outputs_and_grads(mha, x, causal=True)

    jit = _traced(step, True, x, jit_compile=True)
    (y1, g1), (y2, g2) = jit(x), _traced(step, False, x)(x)
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_transformer_train_step_matches_the_plain_ops():
    model = snt.nets.Transformer(num_layers=2, num_heads=2, model_size=16, causal=True)
    x = tf.random.normal([2, 7, 16], seed=4)
    model(x)

    def step(x: tf.Tensor) -> Any:
        return outputs_and_grads(model, x)

    assert _compiled_calls(lambda x: model(x), x) == 2
    (y1, g1), (y2, g2) = _traced(step, True, x)(x), _traced(step, False, x)(x)
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-5)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _unknown_time(mha: Any) -> Callable[..., Any]:
    spec = tf.TensorSpec([2, None, 8])
    return tf.function(lambda x: mha(x, causal=True), input_signature=[spec])


def test_the_plain_ops_where_the_core_does_not_apply():
    x = tf.random.normal([2, 5, 8], seed=8)
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    mha(x)
    assert _compiled_calls(lambda x: mha(x, causal=True), x) == 1
    # Unknown lengths (a program per length), a per-example mask, a decoding
    # step.
    graph = _unknown_time(mha).get_concrete_function().graph
    assert not [op for op in graph.get_operations() if "PartitionedCall" in op.type]
    assert _unknown_time(mha)(x).shape == [2, 5, 8]
    mask = tf.ones([2, 5, 5], tf.bool)
    assert _compiled_calls(lambda x: mha(x, mask=mask), x) == 0
    cache = mha.initial_cache(2, 5)
    assert _compiled_calls(lambda x: mha(x[:, :1], cache=cache)[0], x) == 0
    # Grouped heads, attention-weight dropout.
    gqa = snt.MultiHeadAttention(num_heads=4, key_size=2, num_kv_heads=2)
    gqa(x)
    assert _compiled_calls(lambda x: gqa(x, causal=True), x) == 0
    dropped = snt.MultiHeadAttention(num_heads=2, key_size=4, dropout_rate=0.5)
    dropped(x)
    assert _compiled_calls(lambda x: dropped(x, is_training=True), x) == 0
    assert _compiled_calls(lambda x: dropped(x, is_training=False), x) == 1


def test_the_switch_traces_the_plain_ops(plain):
    x = tf.random.normal([2, 5, 8], seed=9)
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    mha(x)
    assert _compiled_calls(lambda x: mha(x, causal=True), x) == 0


@pytest.mark.parametrize(
    "switch, onednn, gpu, compiled",
    [
        (None, False, False, 1),
        (None, True, False, 0),
        (None, True, True, 1),
        (True, True, False, 1),
        (False, False, False, 0),
        (False, False, True, 0),
    ],
)
def test_by_default_the_core_is_compiled_unless_tensorflow_runs_onednn(
    monkeypatch, switch, onednn, gpu, compiled
):
    # oneDNN's batch matmuls beat XLA's products on CPUs; TensorFlow's
    # default (Eigen) kernels do not. With a GPU, compiled. The switch, when
    # set, decides.
    x = tf.random.normal([2, 5, 8], seed=9)
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    mha(x)
    expected = _traced(lambda x: mha(x, causal=True), False, x)(x)
    monkeypatch.setattr(attention, "COMPILED_CORE", switch)
    monkeypatch.setattr(tf_compat, "onednn_enabled", lambda: onednn)
    monkeypatch.setattr(utils, "accelerator_present", lambda: gpu)
    assert _compiled_calls(lambda x: mha(x, causal=True), x) == compiled
    step = tf.function(lambda x: mha(x, causal=True))
    np.testing.assert_allclose(step(x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "shapes, mask, expected",
    [
        (([1, 2, 3, 4], [1, 2, 5, 4], [1, 2, 5, 6]), None, True),
        (([1, 2, 3, 4], [1, 2, 5, 4], [1, 2, 5, 6]), [3, 5], True),
        (([1, 2, 3, 4], [1, 2, 5, 4], [1, 2, 5, 6]), [1, 3, 5], False),
        (([1, 2, None, 4], [1, 2, 5, 4], [1, 2, 5, 6]), None, False),
        (([1, 2, 3, 4], [1, 2, None, 4], [1, 2, 5, 6]), None, False),
        (([1, 2, 3, 4], [1, 2, 5, 4], [1, 2, 5, None]), None, False),
        (([1, 2, 3, 4], [1, 2, 5, 4], [1, 2, 5, 6]), [None, 5], False),
    ],
)
def test_usable(shapes, mask, expected):
    graph = tf.Graph()
    with graph.as_default():
        q, k, v = (tf.compat.v1.placeholder(tf.float32, s) for s in shapes)
        attend = None if mask is None else tf.compat.v1.placeholder(tf.bool, mask)
        assert compiled_attention.usable(q, k, v, attend) is expected
        assert not compiled_attention.usable(
            tf.cast(q, tf.int32), tf.cast(k, tf.int32), tf.cast(v, tf.int32), attend
        )
        assert not compiled_attention.usable(q, tf.cast(k, tf.float16), v, attend)


def test_a_prompt_into_a_cache_is_compiled_and_decoding_steps_are_not():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, 6, 8], seed=10)
    mha(x)

    def prefill_then_decode(x: tf.Tensor) -> Any:
        cache = mha.initial_cache(2, 8)
        prompt, cache = mha(x[:, :5], cache=cache)
        step, cache = mha(x[:, 5:], cache=cache)
        return tf.concat([prompt, step], 1)

    assert _compiled_calls(prefill_then_decode, x) == 1  # The prompt only.
    compiled = _traced(prefill_then_decode, True, x)(x)
    plain = _traced(prefill_then_decode, False, x)(x)
    np.testing.assert_allclose(compiled, plain, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled, mha(x, causal=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "time, window, expected",
    [
        (5, None, ((0, 5, 0, 5),)),
        (127, None, ((0, 127, 0, 127),)),
        (128, None, ((0, 64, 0, 64), (64, 128, 0, 128))),
        (130, None, ((0, 65, 0, 65), (65, 130, 0, 130))),
        (200, 30, ((0, 67, 0, 67), (67, 133, 38, 133), (133, 200, 104, 200))),
        (
            1024,
            None,
            tuple((i * 128, i * 128 + 128, 0, i * 128 + 128) for i in range(8)),
        ),
    ],
)
def test_causal_spans(time, window, expected):
    spans = compiled_attention.causal_spans(time, window)
    assert spans == expected
    # Every key a query may see is inside its span; the queries are covered
    # once, in order.
    rows = np.arange(time)[:, None]
    allowed = np.arange(time)[None, :] <= rows
    if window is not None:
        allowed &= np.arange(time)[None, :] > rows - window
    assert spans[0][0] == 0 and spans[-1][1] == time
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    for start, end, first, last in spans:
        inside = np.zeros(time, bool)
        inside[first:last] = True
        assert not (allowed[start:end] & ~inside).any()


@pytest.mark.parametrize("window", [None, 40])
def test_causal_blocks_match_the_plain_ops_and_numpy(window):
    # 200 positions: three query blocks, the later ones skip keys above the
    # diagonal (and, with a window, left of the band).
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4, window=window)
    x = tf.random.normal([2, 200, 8], seed=11)
    mha(x)

    def step(x: tf.Tensor) -> Any:
        return outputs_and_grads(mha, x, causal=True)

    assert _compiled_calls(lambda x: mha(x, causal=True), x) == 1
    (y1, g1), (y2, g2) = _traced(step, True, x)(x), _traced(step, False, x)(x)
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-5)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    rows = np.arange(200)[:, None]
    allowed = np.arange(200)[None, :] <= rows
    if window is not None:
        allowed &= np.arange(200)[None, :] > rows - window
    np.testing.assert_allclose(
        y1, numpy_attention(mha, x, allowed), rtol=1e-4, atol=1e-5
    )


def test_causal_core_in_half_precision_and_against_the_masked_core():
    rng = np.random.RandomState(1)
    q, k, v = (
        tf.constant(rng.randn(1, 130, 2, 8).astype(np.float32)) for _ in range(3)
    )
    attend = tf.constant(np.tril(np.ones([130, 130], bool)))

    def both(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> Any:
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([q, k, v])
            blocked = compiled_attention.core(q, k, v, None, tf.float32, True)
            masked = compiled_attention.core(q, k, v, attend, tf.float32)
            losses = [tf.reduce_sum(tf.sin(h)) for h in (blocked, masked)]
        grads = [tape.gradient(loss, [q, k, v]) for loss in losses]
        return blocked, masked, grads

    blocked, masked, (g1, g2) = tf.function(both)(q, k, v)
    np.testing.assert_allclose(blocked, masked, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    half = [tf.cast(t, tf.bfloat16) for t in (q, k, v)]
    heads = tf.function(
        lambda q, k, v: compiled_attention.core(q, k, v, None, tf.float32, True)
    )(*half)
    assert heads.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(heads, tf.float32), masked, rtol=0.05, atol=0.05)


def _compiled_key_shapes(fn: Callable[..., Any], *args: Any) -> list[list[int]]:
    """The key operands' shapes of the compiled calls in a trace of `fn`."""
    graph = tf.function(fn).get_concrete_function(*args).graph
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}
    shapes = []
    for op in graph.get_operations():
        if op.type in ("PartitionedCall", "StatefulPartitionedCall"):
            if library[op.get_attr("f").name].attr["_XlaMustCompile"].b:
                shapes.append(op.inputs[1].shape.as_list())
    return shapes


@pytest.mark.parametrize("time", [5, 130])
def test_a_first_prompt_attends_over_itself_not_the_empty_cache(time):
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, time + 3, 8], seed=12)
    mha(x)

    def prefill_then_decode(x: tf.Tensor) -> Any:
        cache = mha.initial_cache(2, time + 20)
        prompt, cache = mha(x[:, :time], cache=cache)
        more, cache = mha(x[:, time:], cache=cache)  # At index `time`.
        return tf.concat([prompt, more], 1), cache.key, cache.value

    # The first prompt's core reads `time` keys, the second the whole cache.
    assert _compiled_key_shapes(prefill_then_decode, x) == [
        [2, time, 2, 4],
        [2, time + 20, 2, 4],
    ]
    (y1, k1, v1), (y2, k2, v2) = (
        _traced(prefill_then_decode, compiled, x)(x) for compiled in (True, False)
    )
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y1, mha(x, causal=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(k1, k2)
    np.testing.assert_array_equal(v1, v2)
    # Eager calls keep the cache's path, with the same values.
    cache = mha.initial_cache(2, time + 20)
    eager, _ = mha(x[:, :time], cache=cache)
    np.testing.assert_allclose(y1[:, :time], eager, rtol=1e-5, atol=1e-5)


def test_a_prompt_at_an_unknown_index_keeps_the_cache():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=4)
    x = tf.random.normal([2, 6, 8], seed=13)
    mha(x)

    def from_index(x: tf.Tensor, index: tf.Tensor) -> Any:
        cache = mha.initial_cache(2, 12)._replace(index=index)
        return mha(x, cache=cache)[0]

    index = tf.constant(0)
    assert _compiled_key_shapes(from_index, x, index) == [[2, 12, 2, 4]]
    y = tf.function(from_index)(x, index)
    np.testing.assert_allclose(y, mha(x, causal=True), rtol=1e-5, atol=1e-5)


def test_accelerator_present_reads_tensorflows_devices(monkeypatch):
    devices = {"GPU": [], "TPU": [], "CPU": ["a CPU"]}
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind: devices[kind])
    assert utils.accelerator_present() is False
    devices["TPU"] = ["a TPU"]
    assert utils.accelerator_present() is True
    devices["TPU"], devices["GPU"] = [], ["a GPU"]
    assert utils.accelerator_present() is True
