"""Tests for `snt.Embed`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src.embed import embedding_dim


def test_repr():
    assert repr(snt.Embed(10)) == "Embed(vocab_size=10)"
    assert (
        repr(snt.Embed(vocab_size=10, embed_dim=3))
        == "Embed(vocab_size=10, embed_dim=3)"
    )


def test_variable_created_in_constructor():
    embed = snt.Embed(vocab_size=11, embed_dim=3)
    assert [(v.name, v.shape.as_list(), v.trainable) for v in embed.variables] == [
        ("embed/embeddings:0", [11, 3], True)
    ]
    assert embed.vocab_size == 11 and embed.embed_dim == 3
    assert embed.embeddings.dtype == tf.float32


@pytest.mark.parametrize("vocab_size, expected", [(1, 6), (100, 19), (10000, 60)])
def test_default_embed_dim(vocab_size, expected):
    assert embedding_dim(vocab_size) == expected
    assert snt.Embed(vocab_size).embed_dim == expected


def test_default_initializer_is_unit_truncated_normal():
    tf.random.set_seed(0)
    values = snt.Embed(vocab_size=1000, embed_dim=100).embeddings.numpy()
    assert np.abs(values).max() <= 2.0
    assert values.std() == pytest.approx(0.88, rel=0.05)


def test_initializer_trainable_dtype():
    embed = snt.Embed(
        vocab_size=4,
        embed_dim=2,
        initializer=snt.initializers.Ones(),
        trainable=False,
        dtype=tf.float64,
    )
    assert embed.embeddings.dtype == tf.float64
    assert not embed.embeddings.trainable
    np.testing.assert_array_equal(embed.embeddings.numpy(), np.ones([4, 2]))
    with pytest.raises(ValueError, match="does not currently contain any trainable"):
        embed.trainable_variables  # noqa: B018


def test_lookup_matches_numpy():
    table = np.arange(12, dtype=np.float32).reshape([4, 3])
    embed = snt.Embed(existing_vocab=table)
    assert embed.vocab_size == 4 and embed.embed_dim == 3
    ids = np.array([[3, 0], [1, 1]])
    np.testing.assert_array_equal(embed(tf.constant(ids)).numpy(), table[ids])
    np.testing.assert_array_equal(embed(ids.astype(np.int64)).numpy(), table[ids])
    np.testing.assert_array_equal(embed([2]).numpy(), table[[2]])


def test_existing_vocab_dtype():
    embed = snt.Embed(existing_vocab=[[1, 2], [3, 4]], dtype=tf.float16)
    assert embed.embeddings.dtype == tf.float16


@pytest.mark.parametrize("densify", [False, True])
def test_gradients(densify):
    embed = snt.Embed(
        existing_vocab=np.zeros([5, 2], np.float32), densify_gradients=densify
    )
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(embed(tf.constant([1, 1, 3])))
    grad = tape.gradient(loss, embed.embeddings)
    if densify:
        assert isinstance(grad, tf.Tensor)
    else:
        assert isinstance(grad, tf.IndexedSlices)
    expected = np.zeros([5, 2])
    expected[1] = 2
    expected[3] = 1
    np.testing.assert_array_equal(tf.convert_to_tensor(grad).numpy(), expected)


def test_densified_gradients_in_tf_function():
    embed = snt.Embed(vocab_size=5, embed_dim=2, densify_gradients=True)

    @tf.function
    def grad():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(embed(tf.constant([0, 4])))
        return tape.gradient(loss, embed.embeddings)

    assert isinstance(grad(), tf.Tensor)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({}, ValueError, "`vocab_size` must be given when `existing_vocab` is not"),
        ({"vocab_size": 0}, ValueError, "`vocab_size` must be a positive integer"),
        ({"vocab_size": 2.0}, TypeError, "`vocab_size` must be an integer"),
        (
            {"vocab_size": 3, "embed_dim": -1},
            ValueError,
            "`embed_dim` must be a non-negative",
        ),
        (
            {"vocab_size": 3, "initializer": 1},
            TypeError,
            "`initializer` must be a callable",
        ),
        (
            {"vocab_size": 3, "trainable": "yes"},
            TypeError,
            "`trainable` must be a bool",
        ),
        ({"vocab_size": 3, "densify_gradients": "1"}, TypeError, "`densify_gradients`"),
        (
            {"vocab_size": 3, "dtype": "foo"},
            TypeError,
            "`dtype` must be a TensorFlow dtype",
        ),
        (
            {"existing_vocab": [[1.0]], "vocab_size": 1},
            ValueError,
            "`vocab_size` must be None when `existing_vocab` is given",
        ),
        (
            {"existing_vocab": [[1.0]], "embed_dim": 1},
            ValueError,
            "`embed_dim` must be None when `existing_vocab` is given",
        ),
        (
            {"existing_vocab": [[1.0]], "initializer": snt.initializers.Ones()},
            ValueError,
            "`initializer` must be None when `existing_vocab` is given",
        ),
        (
            {"existing_vocab": [1.0, 2.0]},
            ValueError,
            "`existing_vocab` must be a rank-2",
        ),
        (
            {"vocab_size": 3, "initializer": lambda shape, dtype: tf.zeros([2])},
            ValueError,
            "`initializer` must create a tensor of the requested shape",
        ),
        (
            {"vocab_size": 3, "embed_dim": 2, "initializer": snt.initializers.Ones},
            TypeError,
            "`initializer` must be a callable",
        ),
        (
            {"existing_vocab": object()},
            TypeError,
            "`existing_vocab` must be convertible",
        ),
    ],
)
def test_bad_constructor_arguments(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.Embed(**kwargs)


@pytest.mark.parametrize(
    "ids, error, fragment",
    [
        (tf.constant([0.0, 1.0]), TypeError, "`inputs` must be int32 or int64 ids"),
        ("foo", TypeError, "`inputs` must be int32 or int64 ids"),
        (tf.constant([0, 4]), ValueError, r"`inputs` must contain ids in \[0, 4\)"),
        (tf.constant([-1]), ValueError, r"`inputs` must contain ids in \[0, 4\)"),
    ],
)
def test_bad_ids(ids, error, fragment):
    embed = snt.Embed(vocab_size=4, embed_dim=2)
    with pytest.raises(error, match=fragment) as info:
        embed(ids)
    # As the original's failed lookup.
    assert isinstance(info.value, tf.errors.InvalidArgumentError)


def test_sizes_as_scalar_tensors():
    embed = snt.Embed(tf.constant(10), tf.constant(4), densify_gradients=0)
    assert embed(tf.constant([1, 2])).shape == [2, 4]
    assert (embed.vocab_size, embed.embed_dim) == (10, 4)


def test_trainable_none_is_trainable():
    # `tf.Variable(trainable=None)` is trainable; the original passed it on.
    assert snt.Embed(4, 2, trainable=None).embeddings.trainable


def test_zero_embed_dim():
    # As the original: an empty table, empty embeddings.
    embed = snt.Embed(5, 0)
    assert embed(tf.constant([1, 2])).shape == [2, 0]
