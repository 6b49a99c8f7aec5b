"""Tests for `products`: the traced weight-matrix product's layouts."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import products


def _random(*shape: int, seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[seed, 3])


@pytest.fixture
def transposed(monkeypatch):
    """How many traced products took the transposed weight gradient."""
    count = []
    plain = products._transposed_weight_gradient
    monkeypatch.setattr(
        products,
        "_transposed_weight_gradient",
        lambda x, w: count.append(1) or plain(x, w),
    )
    return count


def _product(x, w):
    """`linear.product`'s use of `products`: rows, their product, reshaped."""
    rows = products.rows(x, w)
    if rows is None:
        return products.matmul(x, w)
    return snt.split_leading_dim(products.matmul(rows, w), x, x.shape.rank - 1)


def _ops(fn, *specs) -> set[str]:
    graph = tf.function(fn).get_concrete_function(*specs).graph
    return {op.type for op in graph.get_operations()}


def _products_and_gradients(x, w, layout, monkeypatch):
    """`matmul(x, w)` traced, its gradients for `dy` = the outputs' cosines."""
    monkeypatch.setattr(products, "LAYOUT", layout)

    @tf.function
    def run(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = _product(x, w)
            loss = tf.reduce_sum(tf.sin(y))
        return (y, *tape.gradient(loss, [x, w]))

    return [t.numpy() for t in run(x, w)]


def _numpy(x, w):
    """Values and gradients of `sum(sin(x @ w))` in float64."""
    x64, w64 = np.float64(x), np.float64(w)
    y = x64 @ w64
    dy = np.cos(y)
    rows = dy.reshape(-1, dy.shape[-1])
    return y, dy @ w64.T, x64.reshape(-1, x64.shape[-1]).T @ rows


@pytest.mark.parametrize(
    ("shape", "size_out", "takes_transposed"),
    [
        ([64, 48], 16, True),  # in > out: the weight gradient transposed.
        ([64, 16], 48, False),  # in < out: the plain product.
        ([64, 32], 32, False),
        ([4, 16, 48], 16, True),  # rank 3: rows, and in > out.
        ([2, 3, 8, 16], 48, False),  # rank 4: rows.
    ],
)
def test_values_and_gradients_against_numpy(
    shape, size_out, takes_transposed, transposed, monkeypatch
):
    x, w = _random(*shape), _random(shape[-1], size_out, seed=1)
    y, dx, dw = _products_and_gradients(x, w, True, monkeypatch)
    want = _numpy(x.numpy(), w.numpy())
    for got, expected in zip((y, dx, dw), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert len(transposed) == int(takes_transposed)
    # The plain `tf.matmul` (the oracle) gives the same to float32 rounding.
    plain = _products_and_gradients(x, w, False, monkeypatch)
    for got, expected in zip((y, dx, dw), plain, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_rows_replace_batch_matmul():
    spec = tf.TensorSpec([4, 16, 48])
    w = tf.Variable(_random(48, 16))
    assert "BatchMatMulV2" not in _ops(lambda x: _product(x, w), spec)
    assert "BatchMatMulV2" in _ops(lambda x: tf.matmul(x, w), spec)


def test_unknown_leading_dimensions_keep_their_static_shape():
    w = tf.Variable(_random(8, 4))
    seen = []

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 8])])
    def run(x):
        y = _product(x, w)
        seen.append(y.shape)
        return y

    x = _random(3, 5, 8)
    np.testing.assert_allclose(run(x), tf.matmul(x, w), rtol=1e-6, atol=1e-6)
    assert seen == [tf.TensorShape([None, 5, 4])]


def test_unknown_last_dimension_is_not_reshaped():
    """A last dimension unknown when tracing could hide a wrong size in a
    reshape: the batch matmul runs and fails on it."""
    w = tf.Variable(_random(6, 4))
    spec = tf.TensorSpec([None, None, None])
    assert "BatchMatMulV2" in _ops(lambda x: _product(x, w), spec)
    run = tf.function(lambda x: _product(x, w), input_signature=[spec])
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(_random(2, 3, 4))  # 24 elements: `[-1, 6]` would have fit.


def test_eager_calls_are_tf_matmul(transposed):
    x, w = _random(4, 16, 48), _random(48, 16, seed=1)
    np.testing.assert_array_equal(_product(x, w), tf.matmul(x, w))
    assert not transposed


def test_other_dtypes_take_the_plain_gradient(transposed):
    for dtype in (tf.float16, tf.bfloat16, tf.float64):
        x = tf.cast(_random(8, 48), dtype)
        w = tf.cast(_random(48, 16, seed=1), dtype)
        y = tf.function(products.matmul)(x, w)
        assert y.dtype == dtype
    assert not transposed


def test_second_order_gradients(monkeypatch):
    """A gradient penalty (the input gradient's norm) differentiated again."""
    x, w = _random(16, 48), tf.Variable(_random(48, 8, seed=1))

    def penalty_gradient(layout):
        monkeypatch.setattr(products, "LAYOUT", layout)

        @tf.function
        def run(x):
            with tf.GradientTape() as outer:
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    y = tf.reduce_sum(tf.tanh(products.matmul(x, w)))
                penalty = tf.reduce_sum(tf.square(inner.gradient(y, x)))
            return outer.gradient(penalty, w)

        return run(x).numpy()

    np.testing.assert_allclose(
        penalty_gradient(True), penalty_gradient(False), rtol=1e-5, atol=1e-6
    )


def _linear_gradients(module_fn, x, layout, monkeypatch):
    monkeypatch.setattr(products, "LAYOUT", layout)
    module = module_fn()

    @tf.function
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.square(module(x)))
        return tape.gradient(loss, [x, *module.trainable_variables])

    return [g.numpy() for g in run(x)], module


@pytest.mark.parametrize("feature", ["plain", "lora", "int8", "frozen"])
def test_linear_features_on_the_transposed_gradient(feature, transposed, monkeypatch):
    """`snt.Linear` with adapters, int8 weights or frozen weights, traced on
    `[B, T, in]` inputs with in > out: the gradients of the plain product."""
    x = _random(4, 8, 48)

    def make():
        snt_linear = snt.Linear(16, name="linear")
        snt_linear(x[:1])
        snt_linear.w.assign(_random(48, 16, seed=1))
        snt_linear.b.assign(_random(16, seed=2))
        if feature == "lora":
            snt.lora.add(snt_linear, rank=2)
            for v in snt_linear.lora.trainable_variables:
                v.assign(_random(*v.shape, seed=3) * 0.1)
        elif feature == "int8":
            snt.int8.quantize(snt_linear)
        elif feature == "frozen":
            snt.freeze(snt_linear)
        return snt_linear

    got, module = _linear_gradients(make, x, True, monkeypatch)
    assert len(transposed) == 1
    want, _ = _linear_gradients(make, x, False, monkeypatch)
    assert len(got) == len(want) == 1 + len(module.trainable_variables)
    for g, expected in zip(got, want, strict=True):
        # Float32 sums in another order: errors relative to the largest term.
        scale = np.abs(expected).max()
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-6 * scale)


def test_jacobians_and_vectorized_map(monkeypatch):
    """Per-example gradients (`tf.vectorized_map`) and Jacobians (with and
    without pfor) through the transposed gradient: those of the plain one."""
    x = _random(6, 10)

    def derivatives(layout):
        monkeypatch.setattr(products, "LAYOUT", layout)
        w = tf.Variable(_random(10, 3, seed=1))

        @tf.function
        def run(x):
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(x)
                y = tf.tanh(products.matmul(x, w))
            jacobians = (
                tape.jacobian(y, w),
                tape.jacobian(y, w, experimental_use_pfor=False),
                tape.batch_jacobian(y, x),
            )

            def per_example(row):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(tf.square(products.matmul(row[None], w)))
                return tape.gradient(loss, w)

            return (*jacobians, tf.vectorized_map(per_example, x))

        return [t.numpy() for t in run(x)]

    got, want = derivatives(True), derivatives(False)
    for g, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lora", [False, True])
def test_linear_on_sequences_is_one_product(lora):
    """`snt.Linear` traced on `[B, T, in]` inputs (batch unknown): one 2-D
    product (adapter and bias on its rows), the eager call's values and
    shape."""
    linear = snt.Linear(16)
    x = _random(3, 8, 48)
    linear(x)
    linear.b.assign(_random(16, seed=2))
    if lora:
        snt.lora.add(linear, rank=2)
        for seed, variable in enumerate(linear.lora.trainable_variables):
            variable.assign(_random(*variable.shape, seed=3 + seed))
    spec = tf.TensorSpec([None, 8, 48])
    ops = _ops(linear, spec)
    assert "BatchMatMulV2" not in ops and "MatMul" in ops
    traced = tf.function(linear, input_signature=[spec])
    assert traced.get_concrete_function().structured_outputs.shape.as_list() == [
        None,
        8,
        16,
    ]
    np.testing.assert_allclose(traced(x), linear(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("shape", "size_out"), [([2, 3, 0], 5), ([0, 3, 4], 5), ([2, 3, 4], 0)]
)
def test_empty_sequences_keep_their_shapes(shape, size_out):
    """Rows of empty inputs, kernels or outputs (a `-1` in a reshape of an
    empty tensor), with the batch known and unknown when tracing."""
    linear = snt.Linear(size_out)
    x = tf.ones(shape)
    eager = linear(x)
    for spec in (tf.TensorSpec(shape), tf.TensorSpec([None, *shape[1:]])):
        traced = tf.function(linear, input_signature=[spec])(x)
        assert traced.shape == eager.shape == [*shape[:-1], size_out]


def test_saved_model_gradients(tmp_path, transposed):
    """A SavedModel of a traced `snt.Linear` on sequences (rows, transposed
    weight gradient) gives the same values and gradients after loading."""
    x = _random(2, 8, 48)
    linear = snt.Linear(16)
    linear(x)
    holder = tf.Module()
    holder.linear = linear
    holder.call = tf.function(linear, input_signature=[tf.TensorSpec([None, 8, 48])])
    holder.call.get_concrete_function()
    assert transposed
    tf.saved_model.save(holder, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))

    def value_and_gradients(call, variables):
        inputs = tf.Variable(x)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.sin(call(inputs)))
        return [loss, *tape.gradient(loss, [inputs, *variables])]

    got = value_and_gradients(loaded.call, [loaded.linear.w, loaded.linear.b])
    want = value_and_gradients(linear, [linear.w, linear.b])
    for g, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-5)


def test_mlp_on_sequences_under_a_bfloat16_policy():
    """`snt.nets.MLP` in mixed bfloat16 on `[B, T, in]` inputs: traced as
    products of rows (the plain gradient: not float32), float32 gradients
    equal to the eager call's to bfloat16 rounding."""
    mlp = snt.precision.apply(snt.nets.MLP([32, 8]), "mixed_bfloat16")
    x = _random(4, 6, 16)
    mlp(x)

    def gradients(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(tf.cast(mlp(x), tf.float32)))
        return tape.gradient(loss, mlp.trainable_variables)

    assert "BatchMatMulV2" not in _ops(gradients, tf.TensorSpec([4, 6, 16]))
    traced, eager = tf.function(gradients)(x), gradients(x)
    assert [g.dtype for g in traced] == [tf.float32] * len(eager)
    for g, expected in zip(traced, eager, strict=True):
        scale = np.abs(expected.numpy()).max()
        np.testing.assert_allclose(g, expected, rtol=2e-2, atol=2e-2 * scale)
