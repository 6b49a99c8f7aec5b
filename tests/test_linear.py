"""Tests for `snt.Linear`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.conformance import bad_input


def _random(*shape: int, dtype: tf.DType = tf.float32) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[1, 2], dtype=dtype)


# Construction ---------------------------------------------------------------


def test_repr():
    assert repr(snt.Linear(3)) == "Linear(output_size=3)"
    assert repr(snt.Linear(3, name="foo")) == "Linear(output_size=3, name='foo')"
    assert (
        repr(snt.Linear(3, with_bias=False)) == "Linear(output_size=3, with_bias=False)"
    )


def test_attributes_before_and_after_first_call():
    lin = snt.Linear(4)
    assert lin.output_size == 4 and lin.with_bias
    assert lin.w_init is None
    assert isinstance(lin.b_init, snt.initializers.Zeros)
    assert not hasattr(lin, "w") and not hasattr(lin, "input_size")
    lin(tf.ones([2, 9]))
    assert lin.input_size == 9
    # The default initializer is stored back: truncated normal, 1/sqrt(fan_in).
    assert isinstance(lin.w_init, snt.initializers.TruncatedNormal)
    assert lin.w_init.mean == 0.0
    assert lin.w_init.stddev == pytest.approx(1 / math.sqrt(9))


def test_given_initializers_are_kept_and_used():
    w_init = snt.initializers.Constant(2.0)
    lin = snt.Linear(2, w_init=w_init, b_init=snt.initializers.Ones())
    lin(tf.ones([1, 3]))
    assert lin.w_init is w_init
    np.testing.assert_array_equal(lin.w.numpy(), np.full([3, 2], 2.0))
    np.testing.assert_array_equal(lin.b.numpy(), np.ones([2]))


def test_keras_style_initializer_callable():
    lin = snt.Linear(2, w_init=tf.zeros_initializer())
    lin(tf.ones([1, 3]))
    np.testing.assert_array_equal(lin.w.numpy(), np.zeros([3, 2]))


@pytest.mark.parametrize("argument", ["w_init", "b_init"])
def test_initializer_classes_are_rejected(argument):
    with pytest.raises(TypeError, match=f"`{argument}` must be a callable"):
        snt.Linear(2, **{argument: snt.initializers.Ones})


@pytest.mark.parametrize("argument", ["w_init", "b_init"])
@pytest.mark.parametrize(
    "initializer, error, fragment",
    [
        (lambda shape, dtype: tf.zeros([7]), ValueError, "must create a tensor of the"),
        (lambda shape, dtype: tf.zeros(shape, tf.float64), TypeError, "must create a"),
        (lambda shape, dtype: "zeros", TypeError, "must create a float32 tensor"),
        (lambda shape: tf.zeros(shape), TypeError, "must create a float32 tensor"),
    ],
)
def test_failing_initializers(argument, initializer, error, fragment):
    lin = snt.Linear(2, **{argument: initializer})
    with pytest.raises(error, match=f"`{argument}` {fragment}"):
        lin(tf.ones([1, 3]))
    assert not hasattr(lin, "w")


def test_without_bias():
    lin = snt.Linear(2, with_bias=False)
    assert not hasattr(lin, "b_init")
    lin(tf.ones([1, 3]))
    assert not hasattr(lin, "b")
    assert [v.name for v in lin.variables] == ["linear/w:0"]


def test_b_init_without_bias_raises():
    with pytest.raises(
        ValueError, match="`b_init` must be None when `with_bias=False`"
    ):
        snt.Linear(2, with_bias=False, b_init=snt.initializers.Zeros())


@pytest.mark.parametrize(
    "output_size",
    [
        3,
        np.int64(3),
        np.array(3),
        tf.constant(3),
        tf.constant(3, tf.int64),
        tf.size(tf.zeros([3])),
    ],
)
def test_integer_spellings_of_output_size(output_size):
    lin = snt.Linear(output_size, with_bias=np.bool_(True))
    assert lin.output_size == 3 and type(lin.output_size) is int
    assert lin(tf.ones([2, 4])).shape == [2, 3]


def test_output_size_from_a_traced_static_size():
    @tf.function
    def f(x):
        return snt.Linear(tf.size(x[0]))(x)

    assert f(tf.ones([2, 4])).shape == [2, 4]


@pytest.mark.parametrize("with_bias, has_bias", [(1, True), (0, False), (None, False)])
def test_with_bias_is_read_by_truth_value(with_bias, has_bias):
    lin = snt.Linear(2, with_bias=with_bias)
    lin(tf.ones([1, 3]))
    assert hasattr(lin, "b") == has_bias


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"output_size": -1}, ValueError, "`output_size` must be a non-negative"),
        ({"output_size": 2.5}, TypeError, "`output_size` must be an integer"),
        (
            {"output_size": 2, "with_bias": "no"},
            TypeError,
            "`with_bias` must be a bool",
        ),
        (
            {"output_size": 2, "w_init": "zeros"},
            TypeError,
            "`w_init` must be a callable",
        ),
        ({"output_size": 2, "b_init": 0.0}, TypeError, "`b_init` must be a callable"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.Linear(**kwargs)


# Variables ------------------------------------------------------------------


def test_variables_names_shapes_order():
    lin = snt.Linear(3)
    lin(tf.ones([2, 5]))
    assert [(v.name, v.shape.as_list()) for v in lin.variables] == [
        ("linear/b:0", [3]),
        ("linear/w:0", [5, 3]),
    ]
    assert all(v.trainable for v in lin.trainable_variables)
    assert lin.w.dtype == lin.b.dtype == tf.float32
    np.testing.assert_array_equal(lin.b.numpy(), np.zeros([3]))


def test_default_w_init_statistics():
    tf.random.set_seed(0)
    lin = snt.Linear(400)
    lin(tf.ones([1, 100]))
    w = lin.w.numpy()
    assert np.abs(w).max() <= 2 / math.sqrt(100) + 1e-6  # truncated at 2 stddev
    assert abs(w.mean()) < 0.01
    # Variance of a normal truncated at 2 stddev is about 0.774 sigma^2.
    assert w.std() == pytest.approx(0.88 / math.sqrt(100), rel=0.05)


def test_variables_before_call_raises():
    with pytest.raises(ValueError, match="does not currently contain any variables"):
        snt.Linear(2).variables  # noqa: B018


# Numerics -------------------------------------------------------------------


@pytest.mark.parametrize("shape", [[4, 5], [2, 3, 5], [1, 2, 3, 5]])
def test_matches_numpy(shape):
    x = _random(*shape)
    lin = snt.Linear(3, b_init=snt.initializers.RandomNormal())
    y = lin(x)
    expected = x.numpy() @ lin.w.numpy() + lin.b.numpy()
    assert y.shape == shape[:-1] + [3]
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_without_bias_matches_numpy():
    x = _random(4, 5)
    lin = snt.Linear(3, with_bias=False)
    np.testing.assert_allclose(
        lin(x).numpy(), x.numpy() @ lin.w.numpy(), rtol=1e-5, atol=1e-5
    )


def test_gradients_match_numpy():
    x = _random(4, 5)
    lin = snt.Linear(3, b_init=snt.initializers.RandomNormal())
    lin(x)
    dy = _random(4, 3, dtype=tf.float32) * 2
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(lin(x) * dy)
    dx, dw, db = tape.gradient(loss, [x, lin.w, lin.b])
    np.testing.assert_allclose(
        dw.numpy(), x.numpy().T @ dy.numpy(), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(db.numpy(), dy.numpy().sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        dx.numpy(), dy.numpy() @ lin.w.numpy().T, rtol=1e-5, atol=1e-5
    )


def test_rank_can_change_after_build():
    lin = snt.Linear(2)
    x2 = _random(3, 4)
    y2 = lin(x2)
    x3 = tf.stack([x2, 2 * x2])
    y3 = lin(x3)
    np.testing.assert_allclose(y3[0].numpy(), y2.numpy(), rtol=1e-6)
    built_on_rank3 = snt.Linear(2)
    built_on_rank3(x3)
    assert built_on_rank3(x2).shape == [3, 2]


def test_tensor_like_inputs():
    lin = snt.Linear(2, w_init=snt.initializers.Ones())
    np.testing.assert_array_equal(lin([[1.0, 2.0, 3.0]]).numpy(), [[6.0, 6.0]])
    np.testing.assert_array_equal(
        lin(np.ones([1, 3], np.float32)).numpy(), [[3.0, 3.0]]
    )
    assert lin(tf.Variable(tf.ones([1, 3]))).shape == [1, 2]


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float32, tf.float64])
def test_floating_dtypes(dtype):
    lin = snt.Linear(3)
    y = lin(tf.ones([2, 4], dtype))
    assert y.dtype == lin.w.dtype == lin.b.dtype == dtype
    expected = np.ones([2, 4]) @ lin.w.numpy().astype(np.float64)
    np.testing.assert_allclose(
        np.asarray(y, np.float64), expected, rtol=2e-2, atol=2e-2
    )


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
def test_integer_dtypes(dtype):
    lin = snt.Linear(2, w_init=snt.initializers.Ones())
    y = lin(tf.constant([[1, 2, 3]], dtype))
    assert y.dtype == lin.w.dtype == dtype
    np.testing.assert_array_equal(y.numpy(), [[6, 6]])


def test_integer_inputs_need_an_initializer():
    lin = snt.Linear(2)
    with pytest.raises(
        TypeError, match="`inputs` must have a floating point dtype when"
    ):
        lin(tf.ones([1, 3], tf.int32))
    # The failed first call left nothing behind: a float call builds normally.
    assert lin.w_init is None
    lin(tf.ones([1, 3]))
    assert lin.w.dtype == tf.float32


def test_unsupported_dtype_raises():
    with pytest.raises(TypeError, match="`inputs` must have a floating point or int"):
        snt.Linear(2)(tf.ones([1, 3], tf.int8))
    with pytest.raises(TypeError, match="`inputs`"):
        snt.Linear(2)(tf.fill([1, 3], "a"))


def test_zero_sized_input_features():
    lin = snt.Linear(2)
    np.testing.assert_array_equal(lin(tf.ones([3, 0])).numpy(), np.zeros([3, 2]))


# Bad inputs -----------------------------------------------------------------


@pytest.mark.parametrize("shape", [[3], []])
def test_first_call_rank_too_low(shape):
    with pytest.raises(ValueError, match="`inputs` must have rank >= 2"):
        snt.Linear(2)(tf.ones(shape))


def test_first_call_unknown_input_size():
    lin = snt.Linear(2)
    f = tf.function(lin)
    with pytest.raises(ValueError, match="must have a known last dimension"):
        f.get_concrete_function(tf.TensorSpec([None, None]))


@pytest.mark.parametrize("shape", [[2, 4], [2, 3, 6], [3]])
def test_changed_input_after_build_eager(shape):
    lin = snt.Linear(2)
    lin(tf.ones([2, 5]))
    before = bad_input.snapshot(lin)
    with pytest.raises(ValueError, match="`inputs` must have") as info:
        lin(tf.ones(shape))
    assert isinstance(info.value.__cause__, tf.errors.InvalidArgumentError)
    bad_input.assert_unchanged(lin, before)


def test_changed_input_size_after_build_traced():
    lin = snt.Linear(2)
    lin(tf.ones([2, 5]))
    f = tf.function(lin)
    with pytest.raises(ValueError, match="`inputs` must have last dimension 5"):
        f(tf.ones([2, 4]))


def test_zero_output_size_gives_empty_outputs():
    assert snt.Linear(0)(tf.ones([2, 3])).shape == [2, 0]


@pytest.mark.parametrize("output_size, error", [(-1, ValueError), (2.0, TypeError)])
def test_bad_output_size_is_also_an_invalid_argument_error(output_size, error):
    # The original failed in a TF op (InvalidArgumentError) on the first call.
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        snt.Linear(output_size)
    assert isinstance(info.value, error)


@pytest.mark.parametrize("traced", [False, True])
def test_bad_inputs_after_build_are_invalid_argument_errors(traced):
    lin = snt.Linear(2)
    lin(tf.ones([2, 5]))
    call = tf.function(lin) if traced else lin
    with pytest.raises(tf.errors.InvalidArgumentError, match="last dimension 5"):
        call(tf.ones([2, 4]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="dtype float32"):
        call(tf.ones([2, 5], tf.float64))


def test_wrong_dtype_after_build():
    lin = snt.Linear(2)
    lin(tf.ones([2, 5]))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        lin(tf.ones([2, 5], tf.float64))
    with pytest.raises(TypeError, match="`inputs` must have dtype float32"):
        tf.function(lin)(tf.ones([2, 5], tf.float64))


def test_not_a_tensor_after_build():
    lin = snt.Linear(2)
    lin(tf.ones([2, 5]))
    with pytest.raises(TypeError, match="`inputs` must be convertible to a tensor"):
        lin(object())


# Tracing --------------------------------------------------------------------


def test_tf_function_batch_agnostic_and_op_names():
    lin = snt.Linear(3)
    f = tf.function(lin)
    cf = f.get_concrete_function(tf.TensorSpec([None, 4]))
    assert cf.output_shapes.as_list() == [None, 3]
    assert f(tf.ones([7, 4])).shape == [7, 3]
    op_names = [op.name for op in cf.graph.get_operations()]
    assert "linear/MatMul" in op_names and "linear/BiasAdd" in op_names
    assert [v.name for v in lin.variables] == ["linear/b:0", "linear/w:0"]


def test_unknown_rank_traced_inputs_after_build():
    lin = snt.Linear(2)
    lin(tf.ones([2, 5]))
    f = tf.function(lin, input_signature=[tf.TensorSpec(None)])
    assert f(tf.ones([2, 3, 5])).shape == [2, 3, 2]


def test_eager_replica_context():
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        lin = snt.Linear(2, w_init=snt.initializers.Ones())
    out = strategy.run(lin, args=(tf.ones([1, 3]),))
    for value in strategy.experimental_local_results(out):
        np.testing.assert_array_equal(value.numpy(), [[3.0, 3.0]])


@pytest.mark.parametrize("w_init", [None, snt.initializers.Zeros()])
def test_create_variables_eagerly_when_tracing_with_a_spec(w_init):
    # An eager initial value must not be captured into the graph (the
    # variable could then not be created eagerly, and tracing failed).
    linear = snt.Linear(200, w_init=w_init)
    fn = tf.function(snt.distribute.create_variables_eagerly(linear))
    fn.get_concrete_function(tf.TensorSpec([2, 300]))
    assert not tf.is_symbolic_tensor(linear.w.read_value())
    np.testing.assert_allclose(
        fn(tf.ones([2, 300])).numpy(),
        np.ones([2, 300]) @ linear.w.numpy(),
        rtol=1e-4,
        atol=1e-5,
    )
