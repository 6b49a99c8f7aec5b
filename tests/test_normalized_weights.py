"""`snt.spectral_norm` and `snt.weight_norm`: NumPy references, gradients,
tracing, checkpoints, composition with `snt.lora`/`snt.int8`, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    return x / max(np.linalg.norm(x), eps)


def _power_iteration(
    matrix: np.ndarray, u: np.ndarray, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """The reference: `v = normalize(W u)`, `u = normalize(W^T v)`."""
    v = np.zeros(matrix.shape[0])
    for _ in range(steps):
        v = _normalize(matrix @ u)
        u = _normalize(matrix.T @ v)
    return u, v


def _matrix(layer, weight: np.ndarray) -> np.ndarray:
    """The `[rows, outputs]` view of each layer kind's weight."""
    if isinstance(layer, snt.Conv1DTranspose | snt.Conv2DTranspose):
        weight = np.swapaxes(weight, -1, -2)
    if isinstance(layer, snt.DepthwiseConv2D):
        return weight.reshape(-1, weight.shape[-2] * weight.shape[-1])
    return weight.reshape(-1, weight.shape[-1])


def _built(layer, inputs):
    layer(inputs)
    return layer


LAYERS = {
    "Linear": lambda: _built(snt.Linear(5), tf.random.normal([2, 7], seed=1)),
    "Conv2D": lambda: _built(snt.Conv2D(4, 3), tf.random.normal([1, 5, 5, 3])),
    "Conv2DTranspose": lambda: _built(
        snt.Conv2DTranspose(4, 3), tf.random.normal([1, 3, 3, 2])
    ),
    "DepthwiseConv2D": lambda: _built(
        snt.DepthwiseConv2D(3, channel_multiplier=2), tf.random.normal([1, 4, 4, 3])
    ),
    "Embed": lambda: snt.Embed(9, 4),
}


def _weight(layer) -> tf.Variable:
    return layer.embeddings if isinstance(layer, snt.Embed) else layer.w


# ---------------------------------------------------------------------------
# Spectral normalisation.


def test_spectral_norm_update_matches_numpy_power_iteration():
    layer = LAYERS["Linear"]()
    step = snt.spectral_norm.add(layer, n_power_iterations=2)["linear"]
    u0 = np.random.RandomState(0).normal(size=5)
    step.u.assign(u0)
    for _ in range(3):
        snt.spectral_norm.update(layer)
    w = layer.w.numpy().astype(np.float64)
    u, v = _power_iteration(w, u0, 6)
    np.testing.assert_allclose(step.u.numpy(), u, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(step.v.numpy(), v, rtol=1e-5, atol=1e-6)
    sigma = v @ w @ u
    x = np.random.RandomState(1).normal(size=(3, 7)).astype(np.float32)
    expected = x @ (w / sigma) + layer.b.numpy()
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_spectral_norm_converges_to_largest_singular_value(kind):
    # Fixed weights: with random ones the two largest singular values can be
    # close enough for 75 power iterations to fall short of 1e-4.
    tf.random.set_seed(7)
    layer = LAYERS[kind]()
    step = next(iter(snt.spectral_norm.add(layer, seed=2).values()))
    for _ in range(60):
        snt.spectral_norm.update(layer)
    weight = _weight(layer).numpy()
    largest = np.linalg.svd(_matrix(layer, weight), compute_uv=False)[0]
    np.testing.assert_allclose(float(step.sigma(_weight(layer))), largest, rtol=1e-4)
    kernel = step(layer, None).numpy()
    np.testing.assert_allclose(kernel, weight / largest, rtol=1e-4, atol=1e-6)
    assert np.linalg.svd(_matrix(layer, kernel), compute_uv=False)[0] == pytest.approx(
        1.0, rel=1e-4
    )


def test_spectral_norm_add_starts_close_and_calls_never_update():
    layer = LAYERS["Conv2D"]()
    step = snt.spectral_norm.add(layer)["conv2_d"]
    # 15 iterations when added: the estimate is already close.
    largest = np.linalg.svd(_matrix(layer, layer.w.numpy()), compute_uv=False)[0]
    assert float(step.sigma(layer.w)) == pytest.approx(largest, rel=0.05)
    u, v = step.u.numpy(), step.v.numpy()
    x = tf.random.normal([2, 5, 5, 3])
    layer(x)
    tf.function(lambda x: layer(x))(x)
    np.testing.assert_array_equal(step.u.numpy(), u)
    np.testing.assert_array_equal(step.v.numpy(), v)
    assert not step.u.trainable and not step.v.trainable
    assert [v.name for v in layer.trainable_variables] == ["conv2_d/b:0", "conv2_d/w:0"]


def test_spectral_norm_gradients_flow_through_sigma():
    layer = _built(snt.Linear(3), tf.zeros([1, 4], tf.float64))
    step = snt.spectral_norm.add(layer)["linear"]
    x = tf.constant(np.random.RandomState(3).normal(size=(5, 4)))
    c = tf.constant(np.random.RandomState(4).normal(size=(5, 3)))

    def loss(w):
        u, v = step.u.numpy(), step.v.numpy()
        sigma = v @ w @ u
        return np.sum((x.numpy() @ (w / sigma)) * c.numpy())

    with tf.GradientTape() as tape:
        value = tf.reduce_sum(layer(x) * c)
    grad_w, grad_b, grad_u = tape.gradient(value, [layer.w, layer.b, step.u])
    assert grad_b is not None and grad_u is None
    w = layer.w.numpy()
    numeric = np.zeros_like(w)
    for index in np.ndindex(*w.shape):
        e = np.zeros_like(w)
        e[index] = 1e-6
        numeric[index] = (loss(w + e) - loss(w - e)) / 2e-6
    np.testing.assert_allclose(grad_w.numpy(), numeric, rtol=1e-5, atol=1e-7)


def test_spectral_norm_train_step_in_tf_function_and_xla():
    def make():
        tf.random.set_seed(5)
        mlp = snt.nets.MLP([6, 2])
        mlp(tf.ones([1, 3]))
        snt.spectral_norm.add(mlp, seed=7)
        return mlp

    x = tf.random.normal([4, 3], seed=8)

    def step(mlp, x):
        snt.spectral_norm.update(mlp)
        return mlp(x)

    eager = make()
    expected = [step(eager, x).numpy() for _ in range(3)]
    for options in [{}, {"jit_compile": True}]:
        mlp = make()
        traced = tf.function(lambda x, mlp=mlp: step(mlp, x), **options)
        actual = [traced(x).numpy() for _ in range(3)]
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
        assert traced.experimental_get_tracing_count() == 1


def test_spectral_norm_checkpoint_round_trip(tmp_path):
    layer = LAYERS["Linear"]()
    snt.spectral_norm.add(layer, seed=1)
    snt.spectral_norm.update(layer)
    path = tf.train.Checkpoint(model=layer).write(str(tmp_path / "ckpt"))
    names = [name for name, _ in tf.train.list_variables(path)]
    assert "model/_weight_step/u/.ATTRIBUTES/VARIABLE_VALUE" in names
    other = LAYERS["Linear"]()
    snt.spectral_norm.add(other, seed=3)
    tf.train.Checkpoint(model=other).read(path).assert_consumed()
    x = tf.random.normal([2, 7])
    np.testing.assert_array_equal(other(x).numpy(), layer(x).numpy())
    # A plain model's checkpoint restores the weights of a normalised one
    # (the estimates, not in it, stay as they are).
    plain = LAYERS["Linear"]()
    plain_path = tf.train.Checkpoint(model=plain).write(str(tmp_path / "plain"))
    tf.train.Checkpoint(model=layer).read(plain_path).assert_nontrivial_match()
    np.testing.assert_array_equal(layer.w.numpy(), plain.w.numpy())


def test_spectral_norm_remove_folds_the_kernel():
    layer = LAYERS["Embed"]()
    snt.spectral_norm.add(layer)
    ids = tf.constant([[0, 3], [8, 1]])
    before = layer(ids).numpy()
    assert snt.spectral_norm.remove(layer) == [layer]
    assert "_weight_step" not in vars(layer)
    assert [v.name for v in layer.variables] == ["embed/embeddings:0"]
    np.testing.assert_allclose(layer(ids).numpy(), before, rtol=1e-6)


def test_spectral_norm_under_a_precision_policy():
    layer = LAYERS["Linear"]()
    snt.spectral_norm.add(layer)
    x = tf.random.normal([2, 7])
    expected = layer(x)
    snt.precision.apply(layer, snt.precision.Policy(tf.bfloat16, tf.float32))
    actual = layer(x)
    assert actual.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(actual, tf.float32).numpy(), expected.numpy(), atol=0.05
    )


def test_spectral_norm_with_lora_adds_the_unnormalised_term():
    layer = LAYERS["Linear"]()
    step = snt.spectral_norm.add(layer)["linear"]
    adapter = snt.lora.add(layer, rank=2)["linear"]
    adapter.b.assign(tf.random.normal([2, 5], seed=4))
    x = tf.random.normal([3, 7])
    kernel = layer.w.numpy() / float(step.sigma(layer.w))
    term = x.numpy() @ adapter.a.numpy() @ adapter.b.numpy()
    expected = x.numpy() @ kernel + layer.b.numpy() + term
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    # Frozen by LoRA: the step's variables do not train.
    assert [v.name for v in layer.trainable_variables] == [
        "linear/lora/a:0",
        "linear/lora/b:0",
    ]


def test_int8_weights_are_refused_and_remove_comes_before_quantize():
    mlp = snt.nets.MLP([4, 3])
    mlp(tf.ones([1, 2]))
    snt.int8.quantize(mlp, pattern="linear_1")
    with pytest.raises(ValueError, match=r"`mlp/linear_1` has int8 weights"):
        snt.spectral_norm.add(mlp)
    # Nothing changed: the first layer has no step either.
    assert "_weight_step" not in vars(mlp._layers[0])
    other = snt.nets.MLP([4, 3])
    x = tf.ones([2, 2])
    other(x)
    snt.spectral_norm.add(other)
    before = other(x)
    snt.spectral_norm.remove(other)
    snt.int8.quantize(other)
    np.testing.assert_allclose(other(x).numpy(), before.numpy(), atol=0.05)


def test_spectral_norm_step_update_checks_its_layer():
    layer = LAYERS["Linear"]()
    step = snt.spectral_norm.add(layer)["linear"]
    step.update(layer)
    with pytest.raises(ValueError, match=r"`layer` must have a weight `w` of shape"):
        step.update(snt.Linear(5))


def test_spectral_norm_refused_in_a_layer_stack():
    stack = snt.LayerStack(lambda: snt.Linear(3), 2)
    stack(tf.ones([1, 3]))
    with pytest.raises(ValueError, match=r"inside an `snt.LayerStack`"):
        snt.spectral_norm.add(stack)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: snt.spectral_norm.add("linear"), TypeError, r"`module` must be"),
        (
            lambda: snt.spectral_norm.add(
                _built(snt.LayerNorm(-1, True, True), tf.ones([1, 2]))
            ),
            ValueError,
            r"`module` must hold a weight to normalise.*`layer_norm` has none",
        ),
        (lambda: snt.spectral_norm.add(snt.Linear(2)), ValueError, r"built first"),
        (
            lambda: snt.spectral_norm.add(LAYERS["Linear"](), n_power_iterations=0),
            ValueError,
            r"`n_power_iterations`",
        ),
        (
            lambda: snt.spectral_norm.add(LAYERS["Linear"](), eps=0.0),
            ValueError,
            r"`eps` must be positive",
        ),
        (
            lambda: snt.spectral_norm.add(LAYERS["Linear"](), pattern="nothing"),
            ValueError,
            r"`pattern` must match",
        ),
        (
            lambda: snt.spectral_norm.update(LAYERS["Linear"]()),
            ValueError,
            r"must have spectral normalisation",
        ),
        (
            lambda: snt.spectral_norm.remove(LAYERS["Linear"]()),
            ValueError,
            r"must have spectral normalisation",
        ),
        (
            lambda: snt.weight_norm.remove(LAYERS["Linear"]()),
            ValueError,
            r"must have weight normalisation",
        ),
        (
            lambda: snt.spectral_norm.SpectralNorm([3]),
            ValueError,
            r"`shape` must be a known shape of rank >= 2",
        ),
        (
            lambda: snt.spectral_norm.SpectralNorm("3x2"),
            TypeError,
            r"`shape` must be a weight shape",
        ),
    ],
)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_normalising_twice_is_refused_and_changes_nothing():
    layer = LAYERS["Linear"]()
    step = snt.spectral_norm.add(layer)["linear"]
    with pytest.raises(ValueError, match=r"has spectral normalisation already"):
        snt.spectral_norm.add(layer)
    with pytest.raises(ValueError, match=r"has spectral normalisation already"):
        snt.weight_norm.add(layer)
    assert vars(layer)["_weight_step"] is step


def test_changes_inside_tf_function_are_refused():
    layer = LAYERS["Linear"]()

    @tf.function
    def add():
        snt.spectral_norm.add(layer)

    with pytest.raises(ValueError, match=r"not inside a `tf.function`"):
        add()
    assert "_weight_step" not in vars(layer)


def test_float_weights_only():
    layer = snt.Linear(2, w_init=snt.initializers.Ones())
    layer(tf.ones([1, 2], tf.int32))
    with pytest.raises(ValueError, match=r"int32 weights"):
        snt.weight_norm.add(layer)


def test_plain_layers_keep_the_class_step():
    layer = LAYERS["Linear"]()
    snt.spectral_norm.add(layer)
    assert "_weight_step" not in vars(LAYERS["Linear"]())


# ---------------------------------------------------------------------------
# Weight normalisation.


def _reduced_axes(layer, rank: int) -> tuple[int, ...]:
    if isinstance(layer, snt.Embed):
        return (1,)
    if isinstance(layer, snt.Conv2DTranspose):
        return tuple(a for a in range(rank) if a != rank - 2)
    if isinstance(layer, snt.DepthwiseConv2D):
        return tuple(range(rank - 2))
    return tuple(range(rank - 1))


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_weight_norm_matches_numpy(kind):
    layer = LAYERS[kind]()
    weight = _weight(layer).numpy()
    step = next(iter(snt.weight_norm.add(layer).values()))
    axes = _reduced_axes(layer, weight.ndim)
    norms = np.sqrt(np.sum(weight**2, axis=axes, keepdims=True))
    # Added: `g` holds the norms, the kernel is the weight.
    np.testing.assert_allclose(step.g.numpy(), np.squeeze(norms, axes), rtol=1e-6)
    np.testing.assert_allclose(step(layer, None).numpy(), weight, rtol=1e-5, atol=1e-6)
    g = np.random.RandomState(0).uniform(0.5, 2.0, size=step.g.shape)
    step.g.assign(g.astype(np.float32))
    g_broadcast = (
        np.expand_dims(g, axes)
        if kind == "Embed"
        else g.reshape(
            [1 if a in axes else weight.shape[a] for a in range(weight.ndim)]
        )
    )
    expected = g_broadcast * weight / norms
    np.testing.assert_allclose(
        step(layer, None).numpy(), expected, rtol=1e-5, atol=1e-6
    )


def test_weight_norm_outputs_and_gradients():
    layer = _built(snt.Linear(3), tf.zeros([1, 4], tf.float64))
    step = snt.weight_norm.add(layer)["linear"]
    step.g.assign([0.5, 1.0, 2.0])
    x = tf.constant(np.random.RandomState(3).normal(size=(5, 4)))
    v = layer.w.numpy()
    expected = x.numpy() @ (step.g.numpy() * v / np.linalg.norm(v, axis=0))
    np.testing.assert_allclose(layer(x).numpy(), expected + layer.b.numpy())
    assert [w.name for w in layer.trainable_variables] == [
        "linear/b:0",
        "linear/w:0",
        "linear/weight_norm/g:0",
    ]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(layer(x)))
    grad_w, grad_g = tape.gradient(loss, [layer.w, step.g])

    def numpy_loss(v, g):
        return np.sum(
            (x.numpy() @ (g * v / np.linalg.norm(v, axis=0)) + layer.b.numpy()) ** 2
        )

    eps = 1e-6
    numeric_g = [
        (
            numpy_loss(v, step.g.numpy() + eps * e)
            - numpy_loss(v, step.g.numpy() - eps * e)
        )
        / (2 * eps)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(grad_g.numpy(), numeric_g, rtol=1e-5)
    # The direction's gradient is orthogonal to it, per output channel.
    np.testing.assert_allclose(np.sum(grad_w.numpy() * v, axis=0), 0.0, atol=1e-8)


def test_weight_norm_checkpoint_traced_and_remove(tmp_path):
    conv = LAYERS["Conv2DTranspose"]()
    step = snt.weight_norm.add(conv)["conv2_d_transpose"]
    step.g.assign(step.g * 2.0)
    x = tf.random.normal([1, 3, 3, 2])
    expected = conv(x).numpy()
    np.testing.assert_allclose(tf.function(conv)(x).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(
        tf.function(conv, jit_compile=True)(x).numpy(), expected, rtol=1e-4, atol=1e-5
    )
    path = tf.train.Checkpoint(model=conv).write(str(tmp_path / "ckpt"))
    other = LAYERS["Conv2DTranspose"]()
    snt.weight_norm.add(other)
    tf.train.Checkpoint(model=other).read(path).assert_consumed()
    np.testing.assert_allclose(other(x).numpy(), expected, rtol=1e-6)
    snt.weight_norm.remove(conv)
    assert [v.name for v in conv.variables] == [
        "conv2_d_transpose/b:0",
        "conv2_d_transpose/w:0",
    ]
    np.testing.assert_allclose(conv(x).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_choose_layers_by_type():
    attention = snt.MultiHeadAttention(2, 4)
    attention(tf.ones([1, 3, 8]))
    mlp = snt.nets.MLP([8])
    mlp(tf.ones([1, 8]))
    steps = snt.weight_norm.add(attention, pattern="query|value")
    assert sorted(steps) == ["multi_head_attention/query", "multi_head_attention/value"]


@pytest.mark.parametrize("namespace", ["spectral_norm", "weight_norm"])
def test_int8_and_lora_merge_refuse_normalised_layers(namespace):
    mlp = snt.nets.MLP([4, 2])
    x = tf.ones([1, 3])
    mlp(x)
    getattr(snt, namespace).add(mlp)
    before = {v.name: v.numpy().copy() for v in mlp.variables}
    with pytest.raises(ValueError, match=r"must have plain weights to convert.*remove"):
        snt.int8.quantize(mlp)
    snt.lora.add(mlp, rank=1)
    with pytest.raises(ValueError, match=r"must have plain weights to merge into"):
        snt.lora.merge(mlp)
    for variable in mlp.variables:
        if variable.name in before:
            np.testing.assert_array_equal(variable.numpy(), before[variable.name])
