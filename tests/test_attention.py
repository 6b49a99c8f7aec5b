"""Tests for `snt.MultiHeadAttention` and `snt.AttentionCache`.

Numerical tests compare with a NumPy implementation written here (and with
Keras 3's attention layers, given the same weights); behavioural tests cover
masks, grouped-query heads, rotary embeddings, the decoding cache, mixed
precision and every error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.test_rotary import _reference as _np_rotary

# NumPy reference.


def _data(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _params(mha: snt.MultiHeadAttention) -> dict[str, Any]:
    out = {}
    for name in ("query", "key", "value", "output"):
        linear = getattr(mha, name)
        out[name] = (
            linear.w.numpy().astype(np.float64),
            linear.b.numpy().astype(np.float64) if mha.with_bias else 0.0,
        )
    return out


def _np_attention(
    mha: snt.MultiHeadAttention,
    query,
    key=None,
    value=None,
    mask=None,
    causal=False,
    query_positions=None,
    key_positions=None,
):
    """Multi-head attention in NumPy (float64), with `mha`'s weights."""
    key = query if key is None else key
    value = key if value is None else value
    p = _params(mha)
    heads, kv_heads = mha.num_heads, mha.num_kv_heads
    size, value_size = mha.key_size, mha.value_size
    b, t, _ = query.shape
    s = key.shape[1]

    def project(x, name, h, d):
        w, bias = p[name]
        return (np.asarray(x, np.float64) @ w + bias).reshape(x.shape[0], -1, h, d)

    q = project(query, "query", heads, size)
    k = project(key, "key", kv_heads, size)
    v = project(value, "value", kv_heads, value_size)
    if mha.rotary:
        q = _np_rotary(q, query_positions, mha.rotary_base)
        k = _np_rotary(k, key_positions, mha.rotary_base)
    # Query head h uses key/value head h // groups.
    groups = heads // kv_heads
    k = np.repeat(k, groups, axis=2)
    v = np.repeat(v, groups, axis=2)
    logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(size)
    allowed = np.ones([b, heads, t, s], bool)
    if mask is not None:
        allowed &= np.broadcast_to(np.asarray(mask), allowed.shape)
    if causal:
        allowed &= np.tril(np.ones([t, s], bool))
    logits = np.where(allowed, logits, -1e30)
    logits -= logits.max(-1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhts,bshv->bthv", weights, v).reshape(b, t, heads * value_size)
    w, bias = p["output"]
    return out @ w + bias


def _built(x, **kwargs) -> snt.MultiHeadAttention:
    mha = snt.MultiHeadAttention(**kwargs)
    mha(x)
    # Non-zero biases, so that the reference checks where they are added.
    for v in mha.variables:
        if v.name.endswith("/b:0"):
            v.assign(_data(v.shape, seed=len(v.name)) * 0.5)
    return mha


def _close(actual, expected, tolerance=1e-5):
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)


CONFIGS = {
    "mha": {"num_heads": 3, "key_size": 4},
    "value-and-model-size": {
        "num_heads": 2,
        "key_size": 4,
        "value_size": 5,
        "model_size": 7,
    },
    "gqa": {"num_heads": 4, "key_size": 4, "num_kv_heads": 2},
    "mqa": {"num_heads": 4, "key_size": 2, "num_kv_heads": 1},
    "no-bias": {"num_heads": 2, "key_size": 3, "with_bias": False},
    "rotary": {"num_heads": 2, "key_size": 4, "rotary": True},
    "gqa-rotary": {
        "num_heads": 6,
        "key_size": 6,
        "num_kv_heads": 3,
        "rotary": True,
        "rotary_base": 100.0,
    },
}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_self_attention_matches_numpy(config, causal):
    x = _data([2, 5, 6])
    mha = _built(x, **config)
    _close(mha(x, causal=causal), _np_attention(mha, x, causal=causal))


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_cross_attention_matches_numpy(config):
    query, key, value = _data([2, 3, 6]), _data([2, 5, 4], 1), _data([2, 5, 7], 2)
    mha = snt.MultiHeadAttention(**config)
    mha(query, key, value)
    _close(mha(query, key, value), _np_attention(mha, query, key, value))
    # Causal with T != S is `tril(ones([T, S]))`.
    _close(
        mha(query, key, value, causal=True),
        _np_attention(mha, query, key, value, causal=True),
    )


def test_value_defaults_to_key():
    query, key = _data([2, 3, 6]), _data([2, 5, 4], 1)
    mha = snt.MultiHeadAttention(2, 4)
    _close(mha(query, key), mha(query, key, key))
    assert mha.value.w.shape == [4, 8]


def _masks(b: int, h: int, t: int, s: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    random = lambda *shape: rng.random(shape) < 0.7
    return {
        "rank2-[T,S]": random(t, s),
        "rank3-[H,T,S]": random(h, t, s),
        "rank3-[1,T,S]": random(1, t, s),
        "rank4-[B,1,T,S]": random(b, 1, t, s),
        "rank4-[B,H,T,S]": random(b, h, t, s),
        "rank4-[B,1,1,S]": random(b, 1, 1, s),
        "rank4-[1,H,T,1]": random(1, h, t, 1) | True,
    }


@pytest.mark.parametrize("config", ["mha", "gqa", "mqa"])
@pytest.mark.parametrize("name", list(_masks(2, 4, 5, 5)))
def test_masks_of_each_rank(config, name):
    x = _data([2, 5, 6])
    mha = _built(x, **CONFIGS[config])
    mask = _masks(2, mha.num_heads, 5, 5)[name]
    _close(mha(x, mask=mask), _np_attention(mha, x, mask=mask))
    _close(
        mha(x, mask=tf.constant(mask), causal=True),
        _np_attention(mha, x, mask=mask, causal=True),
    )


@pytest.mark.parametrize("config", ["mha", "gqa"])
def test_masks_with_unknown_shapes_in_a_trace(config):
    x = _data([2, 5, 6])
    mha = _built(x, **CONFIGS[config])
    for mask in _masks(2, mha.num_heads, 5, 5).values():
        f = tf.function(
            lambda x, m: mha(x, mask=m, causal=True),
            input_signature=[
                tf.TensorSpec([None, None, 6]),
                tf.TensorSpec([None] * mask.ndim, tf.bool),
            ],
        )
        _close(f(x, mask), _np_attention(mha, x, mask=mask, causal=True))


def test_fully_masked_rows_give_the_mean_of_the_values():
    x = _data([1, 3, 4])
    mha = _built(x, num_heads=2, key_size=2)
    mask = np.ones([1, 1, 3, 3], bool)
    mask[..., 1, :] = False  # Query 1 sees no key.
    y = mha(x, mask=mask).numpy()
    assert np.isfinite(y).all()
    # Uniform weights: the output of query 1 is that of the mean of the values.
    p = _params(mha)
    v = x.astype(np.float64) @ p["value"][0] + p["value"][1]
    expected = v.mean(1) @ p["output"][0] + p["output"][1]
    _close(y[0, 1], expected[0])
    _close(y[:, [0, 2]], _np_attention(mha, x, mask=mask)[:, [0, 2]])


def test_grouped_query_equals_multi_head_with_repeated_weights():
    x = _data([2, 5, 6])
    groups, kv_heads, size = 3, 2, 4
    gqa = _built(x, num_heads=6, key_size=size, num_kv_heads=kv_heads)
    mha = _built(x, num_heads=6, key_size=size)
    for name in ("query", "output"):
        for attr in ("w", "b"):
            getattr(getattr(mha, name), attr).assign(getattr(getattr(gqa, name), attr))
    for name in ("key", "value"):
        w = getattr(gqa, name).w.numpy().reshape(6, kv_heads, size)
        b = getattr(gqa, name).b.numpy().reshape(kv_heads, size)
        getattr(mha, name).w.assign(np.repeat(w, groups, axis=1).reshape(6, -1))
        getattr(mha, name).b.assign(np.repeat(b, groups, axis=0).reshape(-1))
    _close(gqa(x, causal=True), mha(x, causal=True))
    assert gqa.key.w.shape == [6, kv_heads * size]


def test_grouped_query_with_as_many_kv_heads_is_multi_head():
    x = _data([2, 5, 6])
    explicit = _built(x, num_heads=4, key_size=3, num_kv_heads=4)
    default = snt.MultiHeadAttention(num_heads=4, key_size=3)
    default(x)
    for a, b in zip(default.variables, explicit.variables):
        a.assign(b)
    _close(explicit(x), default(x), 1e-6)


def test_multi_query_variables():
    x = _data([2, 5, 6])
    mha = _built(x, num_heads=4, key_size=3, value_size=2, num_kv_heads=1)
    shapes = {v.name: v.shape.as_list() for v in mha.variables}
    assert shapes == {
        "multi_head_attention/key/b:0": [3],
        "multi_head_attention/key/w:0": [6, 3],
        "multi_head_attention/output/b:0": [12],
        "multi_head_attention/output/w:0": [8, 12],
        "multi_head_attention/query/b:0": [12],
        "multi_head_attention/query/w:0": [6, 12],
        "multi_head_attention/value/b:0": [2],
        "multi_head_attention/value/w:0": [6, 2],
    }


def test_defaults_and_repr():
    mha = snt.MultiHeadAttention(num_heads=2, key_size=3, name="attn")
    assert (mha.value_size, mha.model_size, mha.num_kv_heads) == (3, 6, 2)
    assert mha.with_bias and not mha.rotary and mha.rotary_base == 10000.0
    assert repr(mha) == "MultiHeadAttention(num_heads=2, key_size=3, name='attn')"
    assert [m.name for m in (mha.query, mha.key, mha.value, mha.output)] == [
        "query",
        "key",
        "value",
        "output",
    ]


def test_initializers_are_used():
    mha = snt.MultiHeadAttention(
        2, 2, w_init=snt.initializers.Ones(), b_init=snt.initializers.Constant(3.0)
    )
    mha(tf.ones([1, 1, 2]))
    for linear in (mha.query, mha.key, mha.value, mha.output):
        np.testing.assert_array_equal(linear.w.numpy(), 1.0)
        np.testing.assert_array_equal(linear.b.numpy(), 3.0)


def test_rotary_uses_absolute_positions_of_queries_and_keys():
    query, key = _data([2, 3, 6]), _data([2, 5, 6], 1)
    mha = snt.MultiHeadAttention(2, 4, rotary=True)
    mha(query, key)
    _close(mha(query, key), _np_attention(mha, query, key))
    # A rotated query at position 0 is unrotated: differs from no rotary.
    plain = snt.MultiHeadAttention(2, 4)
    plain(query, key)
    for a, b in zip(plain.variables, mha.variables):
        a.assign(b)
    assert not np.allclose(plain(query, key), mha(query, key))


# Decoding with a cache.

DECODING = ["mha", "gqa-rotary", "mqa", "value-and-model-size"]


def _decode(mha, x, chunks, max_length, step=None):
    """Feeds `x` through the cache in chunks; returns outputs and cache."""
    cache = mha.initial_cache(x.shape[0], max_length)
    step = step or (lambda x, cache: mha(x, cache=cache))
    outputs, start = [], 0
    for size in chunks:
        y, cache = step(tf.constant(x[:, start : start + size]), cache)
        outputs.append(y)
        start += size
    return np.concatenate(outputs, axis=1), cache


@pytest.mark.parametrize("config", DECODING)
@pytest.mark.parametrize(
    "chunks", [[1] * 6, [2, 1, 3], [6]], ids=["ones", "mix", "all"]
)
def test_cache_decoding_matches_causal_attention(config, chunks):
    x = _data([2, 6, 5])
    mha = _built(x, **CONFIGS[config])
    outputs, cache = _decode(mha, x, chunks, max_length=9)
    _close(outputs, mha(x, causal=True))
    _close(
        outputs,
        _np_attention(
            mha, x, causal=True, query_positions=np.arange(6), key_positions=None
        ),
    )
    assert cache.index.dtype == tf.int32 and int(cache.index) == 6
    # Filled positions hold the projected keys and values; the rest is zero.
    p = _params(mha)
    keys = (x @ p["key"][0] + p["key"][1]).reshape(2, 6, mha.num_kv_heads, -1)
    if mha.rotary:
        keys = _np_rotary(keys, None, mha.rotary_base)
    _close(cache.key[:, :6], keys, 1e-5)
    values = (x @ p["value"][0] + p["value"][1]).reshape(2, 6, mha.num_kv_heads, -1)
    _close(cache.value[:, :6], values)
    np.testing.assert_array_equal(cache.key[:, 6:], 0.0)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("autograph", [True, False], ids=["autograph", "no_autograph"])
@pytest.mark.parametrize("config", ["mha", "gqa-rotary"])
def test_cache_decoding_in_tf_function(config, jit_compile, autograph):
    x = _data([2, 6, 5])
    mha = _built(x, **CONFIGS[config])
    step = tf.function(
        lambda x, cache: mha(x, cache=cache),
        jit_compile=jit_compile,
        autograph=autograph,
    )
    outputs, cache = _decode(mha, x, [1] * 6, max_length=8, step=step)
    _close(outputs, mha(x, causal=True), 1e-4)
    assert int(cache.index) == 6
    # Fixed shapes: one trace serves every step.
    assert step.experimental_get_tracing_count() == 1


def test_cache_with_a_mask_and_user_index():
    x = _data([2, 4, 5])
    mha = _built(x, num_heads=2, key_size=3)
    # A mask over the cache positions: example 1 never sees position 1.
    mask = np.ones([2, 1, 1, 6], bool)
    mask[1, ..., 1] = False
    cache = mha.initial_cache(2, 6)
    y1, cache = mha(x[:, :2], mask=mask, cache=cache)
    y2, cache = mha(
        x[:, 2:], mask=mask, cache=cache._replace(index=np.int64(cache.index))
    )
    full_mask = mask[..., :4]
    _close(
        np.concatenate([y1, y2], 1),
        _np_attention(mha, x, mask=full_mask, causal=True),
    )


def test_initial_cache_before_build_and_with_tensor_batch():
    mha = snt.MultiHeadAttention(3, 4, value_size=2, num_kv_heads=1)
    cache = mha.initial_cache(2, 5, dtype=tf.float16)
    assert isinstance(cache, snt.AttentionCache)
    assert cache.key.shape == [2, 5, 1, 4] and cache.key.dtype == tf.float16
    assert cache.value.shape == [2, 5, 1, 2]
    assert cache.index.shape == [] and cache.index.dtype == tf.int32
    assert mha._dtype is None  # Not built.

    @tf.function
    def make(x):
        return mha.initial_cache(tf.shape(x)[0], 5)

    assert make(tf.ones([7, 1])).key.shape == [7, 5, 1, 4]


def test_cache_returned_structure():
    x = _data([1, 2, 4])
    mha = _built(x, num_heads=2, key_size=2)
    result = mha(x, cache=mha.initial_cache(1, 3))
    assert isinstance(result, tuple) and len(result) == 2
    assert isinstance(result[1], snt.AttentionCache)
    assert not isinstance(mha(x), tuple)


# Keras cross-check.


def _copy_to_keras(mha: snt.MultiHeadAttention, layer) -> None:
    d = {n: getattr(mha, n) for n in ("query", "key", "value", "output")}
    weights = []
    for name, heads, size in (
        ("query", mha.num_heads, mha.key_size),
        ("key", mha.num_kv_heads, mha.key_size),
        ("value", mha.num_kv_heads, mha.value_size),
    ):
        w = d[name].w.numpy()
        weights += [
            w.reshape(w.shape[0], heads, size),
            d[name].b.numpy().reshape(heads, size),
        ]
    w = d["output"].w.numpy()
    weights += [w.reshape(mha.num_heads, mha.value_size, -1), d["output"].b.numpy()]
    layer.set_weights(weights)


@pytest.mark.parametrize("causal", [False, True])
def test_matches_keras_multi_head_attention(causal):
    keras = pytest.importorskip("keras")
    query, value = _data([2, 4, 6]), _data([2, 5, 3], 1)
    mha = snt.MultiHeadAttention(num_heads=3, key_size=4, value_size=2, model_size=6)
    mha(query, value)
    for v in mha.variables:
        v.assign(_data(v.shape, seed=len(v.name)))
    layer = keras.layers.MultiHeadAttention(num_heads=3, key_dim=4, value_dim=2)
    layer(query, value)
    _copy_to_keras(mha, layer)
    mask = np.random.default_rng(0).random([2, 4, 5]) < 0.8
    mask[..., 0] = True
    expected = layer(query, value, attention_mask=mask, use_causal_mask=causal)
    actual = mha(query, value, mask=mask[:, None], causal=causal)
    _close(actual, expected, 1e-4)


def test_matches_keras_grouped_query_attention():
    keras = pytest.importorskip("keras")
    if not hasattr(keras.layers, "GroupQueryAttention"):
        pytest.skip("Keras without GroupQueryAttention")
    x = _data([2, 5, 6])
    mha = _built(x, num_heads=4, key_size=3, num_kv_heads=2, model_size=6)
    layer = keras.layers.GroupQueryAttention(
        head_dim=3, num_query_heads=4, num_key_value_heads=2
    )
    layer(x, x)
    _copy_to_keras(mha, layer)
    _close(mha(x, causal=True), layer(x, x, use_causal_mask=True), 1e-4)


# Mixed precision.


def _softmax_dtypes(f, *args) -> list[tf.DType]:
    """The dtypes of a trace's softmaxes, those of the functions it calls too
    (the compiled attention core's)."""
    graph_def = tf.function(f).get_concrete_function(*args).graph.as_graph_def()
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes += function.node_def
    return [tf.as_dtype(n.attr["T"].type) for n in nodes if n.op == "Softmax"]


@pytest.mark.parametrize("dtype, tolerance", [(tf.float16, 1e-2), (tf.bfloat16, 6e-2)])
@pytest.mark.parametrize("config", ["mha", "gqa-rotary"])
def test_half_precision_is_close_to_float32(dtype, tolerance, config):
    x = _data([2, 5, 6])
    reference = _built(x, **CONFIGS[config])
    half = snt.MultiHeadAttention(**CONFIGS[config])
    half(tf.cast(x, dtype))
    for a, b in zip(half.variables, reference.variables):
        assert a.dtype == dtype
        a.assign(tf.cast(b, dtype))
    xh = tf.cast(x, dtype)
    mask = np.tril(np.ones([5, 5], bool))
    y = half(xh, mask=mask)
    assert y.dtype == dtype
    _close(tf.cast(y, tf.float32), reference(x, mask=mask), tolerance)
    # The softmax runs in float32, the rest in `dtype`.
    assert _softmax_dtypes(lambda x: half(x, causal=True), xh) == [tf.float32]
    assert _softmax_dtypes(lambda x: reference(x), x) == [tf.float32]
    cache = half.initial_cache(2, 5, dtype=dtype)
    outputs = []
    for t in range(5):
        out, cache = half(xh[:, t : t + 1], cache=cache)
        outputs.append(tf.cast(out, tf.float32))
    # Position by position sums in another order: bfloat16's rounding (2^-8
    # relative) shows, by up to 0.012 here with TensorFlow's default kernels.
    full = tf.cast(half(xh, causal=True), tf.float32)
    _close(tf.concat(outputs, 1), full, 1e-2 if dtype == tf.float16 else 3e-2)


def test_float64():
    x = _data([2, 3, 4]).astype(np.float64)
    mha = snt.MultiHeadAttention(2, 2)
    y = mha(tf.constant(x), causal=True)
    assert y.dtype == tf.float64
    np.testing.assert_allclose(y, _np_attention(mha, x, causal=True), rtol=1e-10)


# Errors.


@pytest.mark.parametrize("key_size", [0, -1])
def test_non_positive_key_size_raises(key_size):
    with pytest.raises(ValueError, match="`key_size` must be a positive integer"):
        snt.MultiHeadAttention(2, key_size)


@pytest.mark.parametrize(
    "argument", ["num_heads", "value_size", "model_size", "num_kv_heads"]
)
def test_non_positive_sizes_raise(argument):
    kwargs = {"num_heads": 2, "key_size": 2, argument: 0}
    with pytest.raises(ValueError, match=f"`{argument}` must be a positive integer"):
        snt.MultiHeadAttention(**kwargs)


def test_num_heads_not_divisible_by_num_kv_heads_raises():
    with pytest.raises(
        ValueError, match=r"`num_kv_heads` must divide `num_heads` \(6\)"
    ):
        snt.MultiHeadAttention(num_heads=6, key_size=2, num_kv_heads=4)


def test_odd_key_size_with_rotary_raises():
    with pytest.raises(ValueError, match="`key_size` must be even with `rotary=True`"):
        snt.MultiHeadAttention(2, 3, rotary=True)
    snt.MultiHeadAttention(2, 3)  # Fine without rotary.


def test_bad_rotary_base_raises():
    with pytest.raises(ValueError, match="`rotary_base` must be positive"):
        snt.MultiHeadAttention(2, 2, rotary=True, rotary_base=0.0)


def test_bad_initializers_raise():
    with pytest.raises(TypeError, match="`w_init` must be a callable"):
        snt.MultiHeadAttention(2, 2, w_init=3)  # pyright: ignore[reportArgumentType]
    with pytest.raises(
        ValueError, match="`b_init` must be None when `with_bias=False`"
    ):
        snt.MultiHeadAttention(2, 2, with_bias=False, b_init=snt.initializers.Ones())


@pytest.mark.parametrize("rank", [1, 5])
def test_mask_of_wrong_rank_raises(rank):
    x = tf.ones([2, 3, 4])
    with pytest.raises(ValueError, match="`mask` must have rank 2 `\\[T, S\\]`, 3"):
        snt.MultiHeadAttention(2, 2)(x, mask=tf.ones([1] * (rank - 1) + [3], bool))


def test_bad_masks_raise():
    x = tf.ones([2, 3, 4])
    mha = snt.MultiHeadAttention(2, 2)
    with pytest.raises(TypeError, match="`mask` must be a boolean tensor"):
        mha(x, mask=tf.ones([3, 3]))
    with pytest.raises(ValueError, match="`mask` must broadcast against"):
        mha(x, mask=tf.ones([3, 4], bool))
    with pytest.raises(ValueError, match="`mask` must broadcast against"):
        mha(x, mask=tf.ones([3, 1, 3, 3], bool))
    with pytest.raises(ValueError, match="`mask` must broadcast against"):
        mha(x, mask=tf.ones([4, 3, 3], bool))  # 4 heads for a 2-head module.


def test_failed_first_call_leaves_the_module_unbuilt():
    mha = snt.MultiHeadAttention(2, 2)
    with pytest.raises(ValueError, match="`mask`"):
        mha(tf.ones([2, 3, 4], tf.float64), mask=tf.ones([5], bool))
    assert mha._dtype is None
    mha(tf.ones([2, 3, 4]))
    assert mha.query.w.dtype == tf.float32


def test_cache_overflow_raises_eagerly():
    x = tf.ones([1, 3, 4])
    mha = snt.MultiHeadAttention(2, 2)
    cache = mha.initial_cache(1, 4)
    _, cache = mha(x, cache=cache)
    with pytest.raises(ValueError, match="`cache` has room for 4 positions"):
        mha(x[:, :2], cache=cache)
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot take 2 more"):
        mha(x[:, :2], cache=cache)
    with pytest.raises(ValueError, match="`cache` has room"):
        mha(x[:, :1], cache=cache._replace(index=tf.constant(-1)))


def test_cache_overflow_raises_in_a_graph():
    x = tf.ones([1, 3, 4])
    mha = snt.MultiHeadAttention(2, 2)
    step = tf.function(lambda x, cache: mha(x, cache=cache))
    _, cache = step(x, mha.initial_cache(1, 4))
    with pytest.raises(tf.errors.InvalidArgumentError, match="`cache` overflow"):
        step(x, cache)


@pytest.mark.parametrize("time, write", [(3, "TensorScatterUpdate"), (1, "SelectV2")])
def test_cache_writes_wait_for_the_overflow_check(time, write):
    # Without a control edge the write may run first and fail with TensorFlow's
    # own indexing error instead of ours (the order varies from run to run). A
    # single new position (a decoding step) is written with a select.
    mha = snt.MultiHeadAttention(2, 2)
    step = tf.function(lambda x, cache: mha(x, cache=cache))
    graph = step.get_concrete_function(
        tf.TensorSpec([1, time, 4]), mha.initial_cache(1, 4)
    ).graph

    def ancestors(op: tf.Operation) -> set[str]:
        seen, todo = set(), [op]
        while todo:
            o = todo.pop()
            for parent in [t.op for t in o.inputs] + list(o.control_inputs):
                if parent.name not in seen:
                    seen.add(parent.name)
                    todo.append(parent)
        return {graph.get_operation_by_name(n).type for n in seen}

    writes = [o for o in graph.get_operations() if o.type == write]
    assert writes
    for op in writes:
        assert "Assert" in ancestors(op)


def test_cross_attention_with_cache_raises():
    x = tf.ones([1, 2, 4])
    mha = snt.MultiHeadAttention(2, 2)
    cache = mha.initial_cache(1, 4)
    with pytest.raises(ValueError, match="`cache` is only for self-attention"):
        mha(x, tf.ones([1, 3, 4]), cache=cache)
    with pytest.raises(ValueError, match="`cache` is only for self-attention"):
        mha(x, value=tf.ones([1, 2, 4]), cache=cache)
    mha(x, x, x, cache=cache)  # The query itself is fine.


def test_bad_caches_raise():
    x = tf.ones([2, 2, 4])
    mha = snt.MultiHeadAttention(2, 2, num_kv_heads=1)
    good = mha.initial_cache(2, 4)
    mha(x, cache=good)
    with pytest.raises(TypeError, match="`cache` must be an `snt.AttentionCache`"):
        mha(x, cache=good.key)
    with pytest.raises(TypeError, match="`cache` must hold float32 keys"):
        mha(x, cache=mha.initial_cache(2, 4, tf.float16))
    with pytest.raises(ValueError, match="`cache` must hold keys and values of shape"):
        mha(x, cache=snt.MultiHeadAttention(2, 2).initial_cache(2, 4))
    with pytest.raises(ValueError, match="`cache` must match the leading dim"):
        mha(x, cache=mha.initial_cache(3, 4))
    with pytest.raises(ValueError, match="`cache` must hold keys and values of rank 4"):
        mha(x, cache=good._replace(key=good.key[0]))
    with pytest.raises(TypeError, match="`cache` must have an integer `index`"):
        mha(x, cache=good._replace(index=tf.constant(0.0)))
    with pytest.raises(ValueError, match="`cache` must have a scalar `index`"):
        mha(x, cache=good._replace(index=tf.constant([0])))


def test_bad_inputs_raise():
    mha = snt.MultiHeadAttention(2, 2)
    with pytest.raises(ValueError, match=r"`query` must have rank 3 `\[B, T, D\]`"):
        mha(tf.ones([2, 4]))
    with pytest.raises(TypeError, match="`query` must have a floating point dtype"):
        mha(tf.ones([2, 3, 4], tf.int32))
    with pytest.raises(TypeError, match="`query` must be a float tensor"):
        mha(None)  # pyright: ignore[reportArgumentType]
    mha(tf.ones([2, 3, 4]))
    with pytest.raises(ValueError, match="`query` must have last dimension 4"):
        mha(tf.ones([2, 3, 5]))
    with pytest.raises(TypeError, match="`query` must have dtype float32"):
        mha(tf.ones([2, 3, 4], tf.float16))
    with pytest.raises(ValueError, match="`key` must have last dimension 4"):
        mha(tf.ones([2, 3, 4]), tf.ones([2, 3, 2]))
    with pytest.raises(ValueError, match="`key` must match the leading dim"):
        mha(tf.ones([2, 3, 4]), tf.ones([3, 3, 4]))
    with pytest.raises(ValueError, match="`value` must match the leading dim"):
        mha(tf.ones([2, 3, 4]), tf.ones([2, 3, 4]), tf.ones([2, 5, 4]))


def test_bad_initial_cache_arguments_raise():
    mha = snt.MultiHeadAttention(2, 2)
    with pytest.raises(ValueError, match="`max_length` must be a positive integer"):
        mha.initial_cache(1, 0)
    with pytest.raises(ValueError, match="`batch_size` must be a non-negative"):
        mha.initial_cache(-1, 3)
    with pytest.raises(ValueError, match="`dtype` must be a floating point dtype"):
        mha.initial_cache(1, 3, tf.int32)


# Traced calls without a cache run batch matmuls instead of the einsums.


@pytest.mark.parametrize(
    "kwargs, call",
    [
        (dict(num_heads=2, key_size=4), dict(causal=True)),
        (dict(num_heads=3, key_size=4, value_size=5, model_size=7), dict()),
        (dict(num_heads=2, key_size=4, rotary=True), dict(causal=True)),
        (dict(num_heads=4, key_size=4, num_kv_heads=2), dict(causal=True)),
    ],
)
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_traced_calls_match_eager_calls(kwargs, call, cross, jit_compile):
    mha = snt.MultiHeadAttention(**kwargs)
    query = tf.constant(_data([2, 5, 6]))
    key = tf.constant(_data([2, 7, 6], seed=1)) if cross else None
    mask = tf.constant(
        np.random.default_rng(2).random([2, 1, 5, 7 if cross else 5]) > 0.3
    )

    def run(query, key):
        with tf.GradientTape() as tape:
            tape.watch(query)
            y = mha(query, key, mask=mask, **call)
            loss = tf.reduce_sum(y * tf.sin(y))
        return [y, *tape.gradient(loss, [query, *mha.trainable_variables])]

    eager = run(query, key)
    graph = tf.function(run, jit_compile=jit_compile)(query, key)
    for e, g in zip(eager, graph, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)
