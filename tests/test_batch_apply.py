"""Tests for `snt.BatchApply`, `snt.merge_leading_dims` and `snt.split_leading_dim`."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _x(*shape: int) -> tf.Tensor:
    return tf.reshape(tf.range(int(np.prod(shape)), dtype=tf.float32), shape)


# merge_leading_dims / split_leading_dim ---------------------------------------


@pytest.mark.parametrize(
    "shape, num_dims, expected",
    [
        ([2, 3, 4], 1, [2, 3, 4]),
        ([2, 3, 4], 2, [6, 4]),
        ([2, 3, 4], 3, [24]),
        ([2, 3], 5, [2, 3]),  # fewer dims than num_dims: unchanged
    ],
)
def test_merge_leading_dims(shape, num_dims, expected):
    x = _x(*shape)
    y = snt.merge_leading_dims(x, num_dims)
    assert y.shape == expected
    np.testing.assert_array_equal(y.numpy(), x.numpy().reshape(expected))


def test_merge_leading_dims_passes_non_tensors():
    for value in (3, "x", None, [1, 2]):
        assert snt.merge_leading_dims(value, 2) is value


def test_merge_leading_dims_dynamic_shapes():
    f = tf.function(lambda x: snt.merge_leading_dims(x, 2))
    cf = f.get_concrete_function(tf.TensorSpec([None, 3, 4]))
    assert cf.output_shapes.as_list() == [None, 4]
    cf = f.get_concrete_function(tf.TensorSpec([2, 3, None]))
    assert cf.output_shapes.as_list() == [6, None]
    assert f(_x(5, 3, 4)).shape == [15, 4]


def test_merge_leading_dims_unknown_rank():
    f = tf.function(lambda x: snt.merge_leading_dims(x, 2))
    with pytest.raises(ValueError, match="`x` must have a known rank"):
        f.get_concrete_function(tf.TensorSpec(None))


def test_split_leading_dim():
    x = _x(6, 5)
    y = snt.split_leading_dim(x, _x(2, 3, 4), 2)
    assert y.shape == [2, 3, 5]
    np.testing.assert_array_equal(y.numpy(), x.numpy().reshape([2, 3, 5]))
    assert snt.split_leading_dim("x", _x(2, 3), 2) == "x"
    scalar = tf.constant(1.0)
    assert snt.split_leading_dim(scalar, _x(2, 3), 2) is scalar


def test_split_leading_dim_dynamic():
    f = tf.function(lambda x, e: snt.split_leading_dim(x, e, 2))
    cf = f.get_concrete_function(tf.TensorSpec([None, 5]), tf.TensorSpec([None, 3, 4]))
    assert cf.output_shapes.as_list() == [None, 3, 5]


def test_split_leading_dim_mismatch():
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`x` must have a first dimension equal to"
    ):
        snt.split_leading_dim(_x(5, 2), _x(2, 3), 2)


@pytest.mark.parametrize("num_dims", [0, 1.5])
def test_bad_num_dims(num_dims):
    # The original's `TypeError`s (zero left an empty product, a float).
    with pytest.raises(TypeError, match="`num_dims` must be"):
        snt.merge_leading_dims(_x(2, 3), num_dims)
    with pytest.raises((ValueError, TypeError), match="`num_dims` must be"):
        snt.split_leading_dim(_x(6), _x(2, 3), num_dims)
    with pytest.raises(TypeError, match="`num_dims` must be"):
        snt.BatchApply(snt.Linear(1), num_dims=num_dims)


def test_negative_num_dims_count_from_the_end():
    # As the original's `shape[:num_dims]`: -1 merges all but the last.
    x = _x(2, 3, 4)
    assert snt.merge_leading_dims(x, -1).shape == [6, 4]
    assert snt.merge_leading_dims(x, -2).shape == [2, 3, 4]
    linear = snt.Linear(5)
    assert snt.BatchApply(linear, num_dims=-1)(x).shape == [2, 3, 5]
    with pytest.raises(TypeError, match="must leave at least one leading"):
        snt.merge_leading_dims(x, -3)
    with pytest.raises(ValueError, match="`num_dims` must be a positive"):
        snt.split_leading_dim(_x(6), _x(2, 3), -1)


# BatchApply -------------------------------------------------------------------


def test_repr_and_attributes(tmp_path):
    linear = snt.Linear(2)
    apply = snt.BatchApply(linear, num_dims=3)
    assert repr(apply) == "BatchApply(module=Linear(output_size=2), num_dims=3)"
    assert apply.module is linear and apply.num_dims == 3
    apply(_x(1, 2, 3, 4))
    path = tf.train.Checkpoint(module=apply).write(str(tmp_path / "ckpt"))
    keys = {name for name, _ in tf.train.list_variables(path)}
    assert "module/module/w/.ATTRIBUTES/VARIABLE_VALUE" in keys


def test_matches_unbatched_module():
    linear = snt.Linear(3)
    x = tf.random.stateless_normal([4, 5, 6], seed=[0, 2])
    y = snt.BatchApply(linear)(x)
    assert y.shape == [4, 5, 3]
    expected = x.numpy().reshape([20, 6]) @ linear.w.numpy() + linear.b.numpy()
    np.testing.assert_allclose(
        y.numpy(), expected.reshape([4, 5, 3]), rtol=1e-5, atol=1e-6
    )


def test_nests_kwargs_and_non_tensor_leaves():
    Pair = collections.namedtuple("Pair", ["a", "b"])
    seen = {}

    def module(pair, scale, offset=None, flag="x"):
        seen.update(a=pair.a.shape, b=pair.b.shape, offset=offset.shape, flag=flag)
        return {"sum": pair.a * scale + offset, "none": None, "flag": flag}

    apply = snt.BatchApply(module)
    out = apply(
        Pair(_x(2, 3, 4), _x(2, 3)),
        2.0,
        offset=np.ones([2, 3, 1], np.float32),
        flag="y",
    )
    assert seen == {"a": [6, 4], "b": [6], "offset": [6, 1], "flag": "y"}
    assert out["sum"].shape == [2, 3, 4]
    assert out["none"] is None and out["flag"] == "y"
    np.testing.assert_array_equal(out["sum"].numpy(), _x(2, 3, 4).numpy() * 2 + 1)


def test_example_is_first_tensor_leaf():
    apply = snt.BatchApply(lambda s, x: x * 2)
    assert apply("scale", _x(2, 3, 4)).shape == [2, 3, 4]
    only_kwargs = snt.BatchApply(lambda x: x + 1)
    assert only_kwargs(x=_x(3, 2, 2)).shape == [3, 2, 2]


def test_unknown_leading_dims_in_tf_function():
    apply = snt.BatchApply(snt.Linear(3))
    f = tf.function(apply)
    cf = f.get_concrete_function(tf.TensorSpec([None, None, 4]))
    assert cf.output_shapes.as_list() == [None, None, 3]
    assert f(_x(2, 5, 4)).shape == [2, 5, 3]


def test_requires_a_tensor():
    with pytest.raises(ValueError, match="`args` must contain at least one tensor"):
        snt.BatchApply(lambda *a, **k: a)(1, 2, key="x")


def test_example_rank_too_low():
    with pytest.raises(ValueError, match="`args` must start with a tensor of rank >= "):
        snt.BatchApply(tf.identity, num_dims=3)(_x(2, 3))


def test_output_not_splittable():
    apply = snt.BatchApply(lambda x: x[:1])
    with pytest.raises(ValueError, match="`x` must have a first dimension equal"):
        apply(_x(2, 3, 4))


def test_bad_module():
    with pytest.raises(TypeError, match="`module` must be a module or function"):
        snt.BatchApply(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"`module` must be a module or function \(not"):
        snt.BatchApply(snt.Linear)  # type: ignore[arg-type]
