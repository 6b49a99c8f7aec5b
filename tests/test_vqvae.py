"""Tests for `snt.nets.VectorQuantizer` and `snt.nets.VectorQuantizerEMA`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input

KEYS = {"quantize", "loss", "perplexity", "encodings", "encoding_indices", "distances"}


def _data(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _numpy_vq(x, embeddings):
    """Distances, indices, one-hot encodings and quantized vectors in NumPy."""
    d = embeddings.shape[0]
    flat = x.reshape(-1, d)
    distances = ((flat[:, :, None] - embeddings[None]) ** 2).sum(1)
    indices = distances.argmin(1)
    encodings = np.eye(embeddings.shape[1], dtype=np.float32)[indices]
    quantized = embeddings.T[indices].reshape(x.shape)
    return distances, indices.reshape(x.shape[:-1]), encodings, quantized


def _perplexity(encodings):
    p = encodings.mean(0)
    return np.exp(-(p * np.log(p + 1e-10)).sum())


# VectorQuantizer ----------------------------------------------------------------


def test_vq_variables():
    vq = snt.nets.VectorQuantizer(
        embedding_dim=3, num_embeddings=500, commitment_cost=0.25
    )
    [e] = vq.variables
    assert (e.name, e.shape.as_list(), e.trainable) == (
        "vector_quantizer/embeddings:0",
        [3, 500],
        True,
    )
    limit = np.sqrt(3.0 / 3)  # VarianceScaling uniform, fan_in = D.
    assert np.all(np.abs(e.numpy()) <= limit) and e.numpy().std() > 0.3
    assert vq.embedding_dim == 3 and vq.num_embeddings == 500
    assert vq.commitment_cost == 0.25


def test_vq_outputs_match_numpy():
    vq = snt.nets.VectorQuantizer(4, 6, commitment_cost=0.25)
    x = _data([2, 3, 4])
    out = vq(x, is_training=True)
    assert set(out) == KEYS
    e = vq.embeddings.numpy()
    distances, indices, encodings, quantized = _numpy_vq(x, e)
    np.testing.assert_allclose(out["distances"], distances, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(out["encoding_indices"], indices)
    assert out["encoding_indices"].dtype == tf.int64
    np.testing.assert_array_equal(out["encodings"], encodings)
    np.testing.assert_allclose(out["quantize"], quantized, rtol=1e-5, atol=1e-6)
    mse = ((quantized - x) ** 2).mean()
    np.testing.assert_allclose(out["loss"], 1.25 * mse, rtol=1e-5)
    np.testing.assert_allclose(out["perplexity"], _perplexity(encodings), rtol=1e-5)
    np.testing.assert_allclose(vq.quantize(indices), quantized, rtol=1e-6)


def test_vq_gradients():
    vq = snt.nets.VectorQuantizer(2, 3, commitment_cost=0.5)
    x = tf.constant(_data([5, 2]))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        out = vq(x, is_training=True)
        q_sum = tf.reduce_sum(out["quantize"] * 3.0)
    # Straight-through: d quantize / d inputs is the identity.
    np.testing.assert_allclose(tape.gradient(q_sum, x), np.full([5, 2], 3.0))
    assert tape.gradient(q_sum, vq.embeddings) is None
    e = vq.embeddings.numpy()
    _, indices, _, quantized = _numpy_vq(x.numpy(), e)
    # d loss / d x = commitment * 2 (x - q) / size; d loss / d E from q_latent.
    np.testing.assert_allclose(
        tape.gradient(out["loss"], x),
        0.5 * 2 * (x.numpy() - quantized) / x.numpy().size,
        rtol=1e-4,
        atol=1e-6,
    )
    expected = np.zeros_like(e)
    for i, k in enumerate(indices):
        expected[:, k] += 2 * (quantized[i] - x.numpy()[i]) / x.numpy().size
    np.testing.assert_allclose(
        tape.gradient(out["loss"], vq.embeddings), expected, rtol=1e-4, atol=1e-6
    )


def test_vq_any_leading_shape_and_tensor_flag():
    vq = snt.nets.VectorQuantizer(3, 4, 0.25)

    @tf.function(
        input_signature=[tf.TensorSpec([None, None, 3]), tf.TensorSpec([], tf.bool)]
    )
    def f(x, training):
        return vq(x, is_training=training)

    x = _data([2, 5, 3])
    out = f(x, tf.constant(True))
    assert out["encoding_indices"].shape == (2, 5)
    assert out["encodings"].shape == (10, 4)


def test_vq_repr_and_dtype():
    vq = snt.nets.VectorQuantizer(2, 3, 0.25, dtype=tf.float64, name="vq")
    assert repr(vq) == (
        "VectorQuantizer(\n    embedding_dim=2,\n    num_embeddings=3,\n"
        "    commitment_cost=0.25,\n    dtype=tf.float64,\n    name='vq',\n)"
    )
    assert vq.embeddings.dtype == tf.float64
    out = vq(tf.ones([4, 2], tf.float64), is_training=False)
    assert out["quantize"].dtype == tf.float64


# VectorQuantizerEMA ---------------------------------------------------------------


def test_ema_variables():
    vq = snt.nets.VectorQuantizerEMA(5, 7, commitment_cost=0.5, decay=0.9)
    got = [(v.name, v.shape.as_list(), v.dtype.name, v.trainable) for v in vq.variables]
    assert got == [
        ("vector_quantizer_ema/embeddings:0", [5, 7], "float32", False),
        ("vector_quantizer_ema/ema_cluster_size/counter:0", [], "int64", False),
        ("vector_quantizer_ema/ema_cluster_size/hidden:0", [7], "float32", False),
        ("vector_quantizer_ema/ema_cluster_size/average:0", [7], "float32", False),
        ("vector_quantizer_ema/ema_dw/counter:0", [], "int64", False),
        ("vector_quantizer_ema/ema_dw/hidden:0", [5, 7], "float32", False),
        ("vector_quantizer_ema/ema_dw/average:0", [5, 7], "float32", False),
    ]
    assert vq.decay == 0.9 and vq.epsilon == 1e-5


def test_ema_training_updates_match_numpy():
    decay, eps, k = 0.9, 1e-5, 4
    vq = snt.nets.VectorQuantizerEMA(3, k, commitment_cost=0.5, decay=decay)
    e0 = vq.embeddings.numpy()
    hidden_cs = np.zeros([k], np.float32)
    hidden_dw = np.zeros([3, k], np.float32)
    e = e0
    for step in range(1, 4):
        x = _data([6, 3], seed=step)
        _, indices, encodings, quantized = _numpy_vq(x, e)
        out = vq(x, is_training=True)
        # Outputs use the embeddings from before the update.
        np.testing.assert_allclose(out["quantize"], quantized, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            out["loss"], 0.5 * ((quantized - x) ** 2).mean(), rtol=1e-5
        )
        hidden_cs = decay * hidden_cs + (1 - decay) * encodings.sum(0)
        hidden_dw = decay * hidden_dw + (1 - decay) * (x.T @ encodings)
        cs = hidden_cs / (1 - decay**step)
        dw = hidden_dw / (1 - decay**step)
        n = cs.sum()
        cs = (cs + eps) / (n + k * eps) * n
        e = dw / cs[None]
        np.testing.assert_allclose(vq.embeddings.numpy(), e, rtol=1e-4, atol=1e-5)


def test_ema_eval_changes_nothing():
    vq = snt.nets.VectorQuantizerEMA(3, 4, commitment_cost=0.5, decay=0.9)
    before = bad_input.snapshot(vq)
    vq(_data([6, 3]), is_training=False)
    bad_input.assert_unchanged(vq, before)


@pytest.mark.parametrize("training", [True, False])
def test_ema_tensor_flag_matches_python_flag(training):
    x = _data([6, 3])
    a = snt.nets.VectorQuantizerEMA(3, 4, commitment_cost=0.5, decay=0.9)
    b = snt.nets.VectorQuantizerEMA(3, 4, commitment_cost=0.5, decay=0.9)
    b.embeddings.assign(a.embeddings)
    expected = a(x, is_training=training)

    @tf.function(autograph=False)
    def f(x, t):
        return b(x, is_training=t)

    got = f(x, tf.constant(training))
    for key in KEYS:
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-6)
    for va, vb in zip(a.variables, b.variables):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-6)


def test_ema_repr():
    vq = snt.nets.VectorQuantizerEMA(3, 4, commitment_cost=0.5, decay=0.9)
    assert repr(vq) == (
        "VectorQuantizerEMA(\n    embedding_dim=3,\n    num_embeddings=4,\n"
        "    commitment_cost=0.5,\n    decay=0.9,\n)"
    )
    assert repr(snt.nets.VectorQuantizer(2, 3, 0.5)) == (
        "VectorQuantizer(embedding_dim=2, num_embeddings=3, commitment_cost=0.5)"
    )


# Errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"embedding_dim": 0}, ValueError, "`embedding_dim` must be a positive"),
        ({"num_embeddings": 2.0}, TypeError, "`num_embeddings` must be an integer"),
        ({"commitment_cost": "x"}, TypeError, "`commitment_cost` must be a real"),
        ({"dtype": tf.int32}, ValueError, "`dtype` must be a floating point"),
        ({"dtype": "nope"}, TypeError, "`dtype` must be a TensorFlow dtype"),
        ({"name": "not valid"}, ValueError, "`name`"),
    ],
)
def test_vq_constructor_errors(kwargs, error, match):
    args = {"embedding_dim": 2, "num_embeddings": 3, "commitment_cost": 0.25, **kwargs}
    with pytest.raises(error, match=match):
        snt.nets.VectorQuantizer(**args)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"decay": None}, TypeError, "`decay`"),
        ({"decay": tf.constant([0.5, 0.5])}, ValueError, "`decay` must be a scalar"),
    ],
)
def test_ema_constructor_errors(kwargs, error, match):
    args = {
        "embedding_dim": 2,
        "num_embeddings": 3,
        "commitment_cost": 0.25,
        "decay": 0.9,
        **kwargs,
    }
    with pytest.raises(error, match=match):
        snt.nets.VectorQuantizerEMA(**args)


@pytest.mark.parametrize("cls", ["VectorQuantizer", "VectorQuantizerEMA"])
def test_call_errors(cls):
    if cls == "VectorQuantizer":
        vq = snt.nets.VectorQuantizer(3, 4, 0.25)
    else:
        vq = snt.nets.VectorQuantizerEMA(3, 4, 0.25, decay=0.9)
    before = bad_input.snapshot(vq)
    with pytest.raises(
        ValueError, match=r"last dimension of size `embedding_dim` \(3\)"
    ):
        vq(tf.ones([2, 4]), is_training=True)
    with pytest.raises(ValueError, match="`inputs` must have a last dimension"):
        vq(tf.constant(1.0), is_training=True)
    with pytest.raises(TypeError, match=r"embeddings' dtype \(float32\)"):
        vq(tf.ones([2, 3], tf.float64), is_training=True)
    with pytest.raises(TypeError, match="`is_training` must be a bool"):
        vq(tf.ones([2, 3]), is_training="yes")
    bad_input.assert_unchanged(vq, before)


def test_epsilon_checked_when_training():
    vq = snt.nets.VectorQuantizerEMA(2, 3, 0.25, 0.5, epsilon=None)
    x = tf.ones([4, 2])
    assert set(vq(x, is_training=False)) == KEYS  # as the original: unused
    with pytest.raises(ValueError, match="`epsilon` must be a real number"):
        vq(x, is_training=True)


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["add", "drop", "dtype", "last", "other"]),
    st.sampled_from([tf.float64, tf.int32, tf.bool, tf.string, tf.float16]),
)
def test_bad_inputs(kind, dtype):
    vq = snt.nets.VectorQuantizerEMA(3, 4, commitment_cost=0.5, decay=0.9)
    x = tf.constant(_data([2, 5, 3]))
    if kind == "add":
        bad = x[None]
    elif kind == "drop":
        bad = x[0, 0, 0]
    elif kind == "dtype":
        bad = tf.fill(x.shape, "a") if dtype == tf.string else tf.cast(x, dtype)
    elif kind == "last":
        bad = tf.pad(x, [[0, 0], [0, 0], [0, 1]])
    else:
        bad = tf.pad(x, [[0, 1], [0, 2], [0, 0]])
    before = bad_input.snapshot(vq)
    ok, _ = bad_input.outcome(lambda: vq(bad, is_training=True), ["inputs"])
    assert ok == (kind in ("add", "other"))
    if not ok:
        bad_input.assert_unchanged(vq, before)


def test_ema_empty_batch_changes_nothing():
    vq = snt.nets.VectorQuantizerEMA(3, 4, commitment_cost=0.5, decay=0.9)
    before = bad_input.snapshot(vq)
    out = vq(tf.zeros([0, 3]), is_training=True)
    assert out["quantize"].shape == (0, 3) and out["encodings"].shape == (0, 4)
    bad_input.assert_unchanged(vq, before)

    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def train(x):
        return vq(x, is_training=True)

    train(tf.zeros([0, 3]))
    bad_input.assert_unchanged(vq, before)
    train(tf.ones([2, 3]))
    assert int(vq.ema_dw._counter.numpy()) == 1


@pytest.mark.parametrize(
    "decay", [np.array(0.1, np.float32), np.float64(0.1), tf.constant(0.1), 0.1]
)
def test_ema_numbers_in_any_spelling(decay):
    vq = snt.nets.VectorQuantizerEMA(
        4, 3, commitment_cost=np.float32(0.5), decay=decay, epsilon=np.array(1e-5)
    )
    assert vq(tf.ones([2, 4]), is_training=True)["quantize"].shape == [2, 4]


@pytest.mark.parametrize("cls", [snt.nets.VectorQuantizer, snt.nets.VectorQuantizerEMA])
def test_wrong_inputs_are_invalid_argument_errors(cls):
    # The original's reshape / matmul failed with InvalidArgumentError.
    kwargs = {"decay": 0.9} if cls is snt.nets.VectorQuantizerEMA else {}
    vq = cls(4, 3, 0.25, **kwargs)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        vq(tf.ones([2, 5]), is_training=False)
    assert isinstance(info.value, ValueError)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        vq(tf.ones([2, 4], tf.float64), is_training=False)
    assert isinstance(info.value, TypeError)


def test_integer_tensor_hyper_parameters_are_refused():
    with pytest.raises(tf.errors.InvalidArgumentError, match="`commitment_cost`"):
        snt.nets.VectorQuantizer(2, 3, tf.constant(1))
    with pytest.raises(TypeError, match="`decay` must be a number or a float"):
        snt.nets.VectorQuantizerEMA(2, 3, 0.25, decay=tf.constant(0))
