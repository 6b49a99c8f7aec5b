"""`sonnet.src.*`: 2.0.2's internal import paths, for code written against them.

Code built on the original imported its internals: custom optimizers copied
from `snt.optimizers.Adam` (`adam_update`, `optimizer_utils`, `once`,
`utils.variable_like`, `types`), modules by their file (`sonnet.src.linear`).
Every module path 2.0.2 had (bar the DNC's pieces and its test helpers)
imports, names the public API's objects, and the helpers
compute what 2.0.2's did.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet.src import base, once, types, utils
from sonnet.src.optimizers import adam, momentum, optimizer_utils, rmsprop

# 2.0.2's module paths and the public names each had (its `sonnet/src` tree).
PATHS: dict[str, tuple[str, ...]] = {
    "axis_norm": ("LayerNorm", "InstanceNorm"),
    "base": ("Module", "Optimizer", "no_name_scope", "allow_empty_variables"),
    "batch_apply": ("BatchApply", "merge_leading_dims", "split_leading_dim"),
    "batch_norm": ("BaseBatchNorm", "BatchNorm"),
    "bias": ("Bias",),
    "build": ("build",),
    "conv": ("Conv1D", "Conv2D", "Conv3D", "ConvND"),
    "conv_transpose": (
        "Conv1DTranspose",
        "Conv2DTranspose",
        "Conv3DTranspose",
        "ConvNDTranspose",
    ),
    "custom_getter": ("custom_variable_getter",),
    "deferred": ("Deferred",),
    "depthwise_conv": ("DepthwiseConv2D",),
    "distribute": (),
    "distribute.distributed_batch_norm": ("CrossReplicaBatchNorm",),
    "distribute.replicator": ("Replicator", "TpuReplicator"),
    "dropout": ("Dropout",),
    "embed": ("Embed",),
    "group_norm": ("GroupNorm",),
    "initializers": ("Initializer", "Zeros", "VarianceScaling", "Orthogonal"),
    "leaky_clip_by_value": ("leaky_clip_by_value",),
    "linear": ("Linear",),
    "metrics": ("Metric", "Mean", "Sum"),
    "mixed_precision": ("modes", "enable", "disable", "scope"),
    "moving_averages": ("ExponentialMovingAverage",),
    "nets": (),
    "nets.cifar10_convnet": ("Cifar10ConvNet",),
    "nets.mlp": ("MLP",),
    "nets.resnet": ("ResNet", "ResNet50"),
    "nets.vqvae": ("VectorQuantizer", "VectorQuantizerEMA"),
    "once": ("once",),
    "optimizers": (),
    "optimizers.adam": ("Adam",),
    "optimizers.momentum": ("Momentum",),
    "optimizers.optimizer_utils": (),
    "optimizers.rmsprop": ("RMSProp",),
    "optimizers.sgd": ("SGD",),
    "parallel_linear": ("ParallelLinears",),
    "pad": ("causal", "create", "full", "reverse_causal", "same", "valid"),
    "recurrent": (
        "RNNCore",
        "UnrolledRNN",
        "LSTM",
        "LSTMState",
        "GRU",
        "VanillaRNN",
        "DeepRNN",
        "TrainableState",
        "UnrolledLSTM",
        "Conv2DLSTM",
        "dynamic_unroll",
        "static_unroll",
        "lstm_with_recurrent_dropout",
    ),
    "regularizers": ("Regularizer", "L1", "L2", "OffDiagonalOrthogonal"),
    "reshape": ("Reshape", "Flatten", "reshape", "flatten"),
    "scale_gradient": ("scale_gradient",),
    "sequential": ("Sequential",),
    "types": ("ParameterUpdate", "TensorLike", "FloatLike", "ShapeLike"),
    "utils": ("variable_like", "replicate", "get_channel_index", "format_variables"),
}

_NAMESPACES = (
    snt,
    snt.nets,
    snt.optimizers,
    snt.initializers,
    snt.regularizers,
    snt.distribute,
    snt.mixed_precision,
    snt.pad,
)


def _public(name: str):
    for namespace in _NAMESPACES:
        if hasattr(namespace, name):
            return getattr(namespace, name)
    return None


@pytest.mark.parametrize("path", sorted(PATHS))
def test_paths_import_and_name_the_public_objects(path):
    module = importlib.import_module(f"sonnet.src.{path}")
    for name in PATHS[path]:
        value = getattr(module, name)
        public = _public(name)
        if public is not None and (inspect.isclass(value) or inspect.isfunction(value)):
            assert value is public, f"sonnet.src.{path}.{name}"


def test_module_from_its_old_path_is_the_public_one():
    from sonnet.src import linear

    layer = linear.Linear(3)
    assert isinstance(layer, snt.Linear)
    assert layer(tf.ones([2, 4])).shape == (2, 3)


def _numpy_adam(g, lr, b1, b2, eps, t, m, v):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    update = lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return update, m, v


def test_adam_update_against_numpy():
    rng = np.random.default_rng(0)
    g, m, v = rng.normal(size=(3, 5)).astype(np.float32)
    v = np.abs(v)
    got = adam.adam_update(
        g=tf.constant(g),
        alpha=0.01,
        beta_1=0.9,
        beta_2=0.99,
        epsilon=1e-7,
        t=3.0,
        m=tf.constant(m),
        v=tf.constant(v),
    )
    want = _numpy_adam(g, 0.01, 0.9, 0.99, 1e-7, 3.0, m, v)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_update_against_numpy(nesterov):
    g, mom = np.float32([1.0, -2.0]), np.float32([0.5, 0.25])
    update, new = momentum.momentum_update(
        tf.constant(g), 0.1, 0.9, tf.constant(mom), nesterov
    )
    want_mom = 0.9 * mom + g
    want = 0.1 * (0.9 * want_mom + g) if nesterov else 0.1 * want_mom
    np.testing.assert_allclose(new.numpy(), want_mom, rtol=1e-6)
    np.testing.assert_allclose(update.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_update_against_numpy(centered):
    g = np.float32([1.0, -2.0])
    mom, ms, mg = np.float32([0.1, 0.2]), np.float32([1.0, 2.0]), np.float32([0.1, 0])
    got = rmsprop.rmsprop_update(
        tf.constant(g),
        0.9,
        0.01,
        1e-6,
        0.5,
        tf.constant(mom),
        tf.constant(ms),
        tf.constant(mg) if centered else None,
    )
    want_ms = 0.1 * g * g + 0.9 * ms
    want_mg = 0.1 * g + 0.9 * mg if centered else None
    denominator = want_ms - want_mg**2 + 1e-6 if centered else want_ms + 1e-6
    want_mom = 0.5 * mom + 0.01 * g / np.sqrt(denominator)
    np.testing.assert_allclose(got[0].numpy(), want_mom, rtol=1e-5)
    np.testing.assert_allclose(got[1].numpy(), want_ms, rtol=1e-6)
    if centered:
        np.testing.assert_allclose(got[2].numpy(), want_mg, rtol=1e-6)
    else:
        assert got[2] is None


class _CopiedAdam(base.Optimizer):
    """A custom optimizer written the way code built on 2.0.2 wrote them:
    `snt.optimizers.Adam`'s structure on the internal helpers."""

    def __init__(self, learning_rate: types.FloatLike = 0.001):
        super().__init__(name="copied_adam")
        self.learning_rate = learning_rate
        self.beta1, self.beta2, self.epsilon = 0.9, 0.999, 1e-8
        self.step = tf.Variable(0, trainable=False, name="t", dtype=tf.int64)
        self.m: list[tf.Variable] = []
        self.v: list[tf.Variable] = []

    @once.once
    def _initialize(self, parameters):
        with tf.name_scope("m"):
            self.m.extend(utils.variable_like(p, trainable=False) for p in parameters)
        with tf.name_scope("v"):
            self.v.extend(utils.variable_like(p, trainable=False) for p in parameters)

    def apply(self, updates, parameters):
        optimizer_utils.check_distribution_strategy()
        optimizer_utils.check_updates_parameters(updates, parameters)
        self._initialize(parameters)
        self.step.assign_add(1)
        for update, param, m_var, v_var in zip(updates, parameters, self.m, self.v):
            if update is None:
                continue
            optimizer_utils.check_same_dtype(update, param)
            step = tf.cast(self.step, update.dtype)
            if isinstance(update, tf.IndexedSlices):
                update, indices = optimizer_utils.deduplicate_indexed_slices(update)
                delta, m, v = adam.adam_update(
                    update,
                    self.learning_rate,
                    self.beta1,
                    self.beta2,
                    self.epsilon,
                    step,
                    m_var.sparse_read(indices),
                    v_var.sparse_read(indices),
                )
                param.scatter_sub(tf.IndexedSlices(delta, indices))
                m_var.scatter_update(tf.IndexedSlices(m, indices))
                v_var.scatter_update(tf.IndexedSlices(v, indices))
            else:
                delta, m, v = adam.adam_update(
                    update,
                    self.learning_rate,
                    self.beta1,
                    self.beta2,
                    self.epsilon,
                    step,
                    m_var,
                    v_var,
                )
                param.assign_sub(delta)
                m_var.assign(m)
                v_var.assign(v)


@pytest.mark.parametrize("sparse", [False, True])
def test_custom_optimizer_on_the_old_helpers_matches_snt_adam(sparse):
    def train(optimizer):
        embed = snt.Embed(6, 3, initializer=snt.initializers.Constant(0.5))
        ids = tf.constant([0, 2, 2, 5])
        for _ in range(3):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(embed(ids) - 1.0))
            (grad,) = tape.gradient(loss, embed.trainable_variables)
            if not sparse:
                grad = tf.convert_to_tensor(grad)
            optimizer.apply([grad], embed.trainable_variables)
        return embed.embeddings.numpy()

    copied = _CopiedAdam(0.1)
    np.testing.assert_allclose(
        train(copied), train(snt.optimizers.Adam(0.1)), rtol=1e-5, atol=1e-6
    )
    # As 2.0.2 names them: the optimizer's scope, `m`, the parameter's name.
    assert [v.name for v in copied.m] == ["copied_adam/m/embed/embeddings:0"]
    assert not copied.m[0].trainable


def test_variable_like_follows_the_original():
    trainable = tf.Variable(tf.ones([2, 3]), name="kernel")
    frozen = tf.Variable(tf.ones([2]), trainable=False)
    assert utils.variable_like(trainable).trainable
    assert not utils.variable_like(frozen).trainable
    assert utils.variable_like(tf.ones([1])).trainable  # A tensor: trainable.
    like = utils.variable_like(trainable, snt.initializers.Ones(), False, "copy")
    assert like.name == "copy:0" and not like.trainable
    np.testing.assert_array_equal(like.numpy(), np.ones([2, 3], np.float32))
    assert utils.variable_like(trainable).name == "kernel:0"


def test_rank_checks_take_numpy_arrays():
    utils.assert_rank(np.zeros([2, 3]), 2)
    utils.assert_minimum_rank(np.zeros([2, 3, 4]), 2)
    with pytest.raises(ValueError, match="rank 3"):
        utils.assert_rank(np.zeros([2, 3]), 3)
    with pytest.raises(ValueError, match="rank >= 3"):
        utils.assert_minimum_rank(np.zeros([2]), 3)


def test_check_same_dtype_and_updates_parameters_reject():
    parameter = tf.Variable([1.0])
    optimizer_utils.check_same_dtype(tf.constant([1.0]), parameter)
    with pytest.raises(ValueError, match="float32"):
        optimizer_utils.check_same_dtype(tf.constant([1.0], tf.float16), parameter)
    with pytest.raises(ValueError, match="updates"):
        optimizer_utils.check_updates_parameters([None], [parameter])
    with pytest.raises(ValueError, match="parameters"):
        optimizer_utils.check_updates_parameters([], [])
    with pytest.raises(ValueError, match="one entry per parameter"):
        optimizer_utils.check_updates_parameters([None], [parameter, parameter])


def test_deduplicate_sums_repeated_rows():
    update = tf.IndexedSlices(
        tf.constant([[1.0], [2.0], [4.0]]), tf.constant([3, 1, 3])
    )
    values, indices = optimizer_utils.deduplicate_indexed_slices(update)
    assert dict(zip(indices.numpy().tolist(), values.numpy()[:, 0].tolist())) == {
        3: 5.0,
        1: 2.0,
    }


def test_parallel_linears_against_numpy_and_stacked_linears():
    from sonnet.src.parallel_linear import ParallelLinears

    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 2, 5)).astype(np.float32)
    w = rng.normal(size=(3, 5, 7)).astype(np.float32)
    b = rng.normal(size=(3, 1, 7)).astype(np.float32)
    layers = ParallelLinears(7, w_init=lambda s, d: w, b_init=lambda s, d: b)
    got = layers(x).numpy()
    np.testing.assert_allclose(got, np.einsum("nbi,nio->nbo", x, w) + b, rtol=1e-5)
    for i in range(3):
        linear = snt.Linear(
            7, w_init=lambda s, d, i=i: w[i], b_init=lambda s, d, i=i: b[i, 0]
        )
        np.testing.assert_allclose(got[i], linear(x[i]).numpy(), rtol=1e-5)
    # 2.0.2's names and shapes; the default kernel scale is 1 / sqrt(in).
    layers = ParallelLinears(4)
    layers(tf.ones([2, 3, 100]))
    assert [(v.name, v.shape.as_list()) for v in layers.variables] == [
        ("parallel_linears/b:0", [2, 1, 4]),
        ("parallel_linears/w:0", [2, 100, 4]),
    ]
    assert 0.05 < float(tf.math.reduce_std(layers.w)) < 0.15
    assert not hasattr(ParallelLinears(4, with_bias=False), "b_init")


def test_parallel_linears_rejects():
    from sonnet.src.parallel_linear import ParallelLinears

    with pytest.raises(ValueError, match="rank 3"):
        ParallelLinears(2)(tf.ones([2, 3]))
    with pytest.raises(ValueError, match="b_init"):
        ParallelLinears(2, with_bias=False, b_init=snt.initializers.Zeros())
    for spec, what in (([None, 2, 3], "layers"), ([2, 2, None], "size")):
        layers = ParallelLinears(2)
        traced = tf.function(layers).get_concrete_function
        with pytest.raises(ValueError, match=what):
            traced(tf.TensorSpec(spec))
        # Nothing was built: an eager call with known sizes builds it.
        assert layers(tf.ones([2, 2, 3])).shape == (2, 2, 2)


@pytest.mark.parametrize(
    "shape,fans",
    [
        ((), (1, 1)),
        ((7,), (7, 7)),
        ((3, 5), (3, 5)),
        (tf.TensorShape([3, 5]), (3, 5)),
        ((2, 3, 4, 6), (24, 36)),
    ],
)
def test_compute_fans_follows_the_original(shape, fans):
    from sonnet.src import initializers

    assert initializers._compute_fans(shape) == fans


def test_the_originals_private_names():
    from sonnet.src import mixed_precision

    assert isinstance(tf.function(lambda: 1.0), base.TFFunctionType)
    assert mixed_precision._get_mixed_precision_mode() is None
    with snt.mixed_precision.scope(tf.float16):
        assert mixed_precision._get_mixed_precision_mode() == tf.float16


def test_decorator_wraps_functions_methods_and_callable_objects():
    seen = []

    @utils.decorator
    def double(wrapped, instance, args, kwargs):
        seen.append(instance)
        return 2 * wrapped(*args, **kwargs)

    assert double(lambda x, y: x**y)(3, y=2) == 18
    assert seen[-1] is None

    class Power:
        @double
        def f(self, x, y):
            return x**y

        def g(self, x, y):
            return x**y

        def __call__(self, x, y):
            return x**y

    p = Power()
    assert p.f(3, 2) == 18 and seen[-1] is p  # In the class body.
    assert double(p.g)(3, y=2) == 18 and seen[-1] is p  # A bound method.
    assert double(p)(2, 3) == 16 and seen[-1] is p  # A callable object.
    assert Power.f.__name__ == "f"


# -- the DNC's building blocks (`sonnet.src.nets.dnc`)


def _rand(rng, *shape):
    return rng.uniform(0.0, 1.0, shape).astype(np.float32)


def test_dnc_segment_dim_against_numpy():
    from sonnet.src.nets.dnc import util

    x = np.arange(2 * 14 * 3, dtype=np.float32).reshape(2, 14, 3)
    one, two = util.segment_dim(
        tf.constant(x), 1, [tf.TensorShape([3, 3]), tf.TensorShape([5])]
    )
    np.testing.assert_array_equal(one, x[:, :9].reshape(2, 3, 3, 3))
    np.testing.assert_array_equal(two, x[:, 9:])
    (last,) = util.segment_dim(tf.constant(x), -1, [tf.TensorShape([1, 3])])
    np.testing.assert_array_equal(last, x.reshape(2, 14, 1, 3))

    @tf.function(input_signature=[tf.TensorSpec([None, 6])])
    def unknown_batch(t):
        return util.segment_dim(t, 1, [tf.TensorShape([2, 2]), tf.TensorShape([2])])

    a, b = unknown_batch(tf.ones([4, 6]))
    assert a.shape == (4, 2, 2) and b.shape == (4, 2)
    for dim in (2, -3):
        with pytest.raises(ValueError, match="`dim` must be an axis"):
            util.segment_dim(tf.ones([2, 6]), dim, [tf.TensorShape([6])])


def test_dnc_batched_helpers_against_numpy():
    from sonnet.src.nets.dnc import util

    perms = np.array([[2, 0, 1], [0, 2, 1]], np.int32)
    inverse = util.batch_invert_permutation(tf.constant(perms)).numpy()
    np.testing.assert_array_equal(inverse, np.argsort(perms, axis=1))
    values = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    gathered = util.batch_gather(tf.constant(values), tf.constant(perms))
    np.testing.assert_array_equal(
        gathered, np.stack([values[b][perms[b]] for b in range(2)])
    )
    hot = util.one_hot(4, 2)
    assert hot.dtype == np.float64 and hot.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_dnc_apply_linear_one_or_two():
    from sonnet.src.nets.dnc import util

    x, y = tf.ones([2, 3]), tf.fill([2, 4], 2.0)
    a = snt.Linear(5, w_init=snt.initializers.Constant(0.5))
    b = snt.Linear(5, w_init=snt.initializers.Constant(0.25))
    np.testing.assert_allclose(util.apply_linear(x, a), np.full([2, 5], 1.5))
    np.testing.assert_allclose(
        util.apply_linear([x, y], [a, b], activation=tf.negative), np.full([2, 5], -3.5)
    )
    assert util.apply_split_linear(a, b, x, y).shape == (2, 5)
    with pytest.raises(AssertionError, match="one each or two each"):
        util.apply_linear([x, x, x], [a, a, a])
    with pytest.raises(ValueError):  # As 2.0.2 (dm-tree's structure check).
        util.apply_linear([x, y], a)
    with pytest.raises(TypeError):
        util.apply_linear((x, y), [a, b])


def test_dnc_read_and_write_against_numpy():
    from sonnet.src.nets.dnc import read, write

    rng = np.random.RandomState(0)
    memory = _rand(rng, 2, 5, 3)
    address = _rand(rng, 2, 4, 5)  # 4 heads.
    resets = _rand(rng, 2, 4, 3)
    values = _rand(rng, 2, 4, 3)
    rows = _rand(rng, 2, 4)
    t = tf.constant
    words = np.einsum("bhm,bmw->bhw", address, memory)
    np.testing.assert_allclose(read.read(t(memory), t(address)), words, rtol=1e-6)
    np.testing.assert_allclose(
        read.read(t(memory), t(address), squash_after_access=True),
        np.tanh(words),
        rtol=1e-6,
    )
    # As in 2.0.2, squashing "before access" changes nothing.
    np.testing.assert_allclose(
        read.read(t(memory), t(address), squash_before_access=False), words, rtol=1e-6
    )
    added = memory + np.einsum("bhm,bhw->bmw", address, values)
    np.testing.assert_allclose(
        write.additive_write(t(memory), t(address), t(values)), added, rtol=1e-6
    )
    keep = np.prod(1 - address[..., None] * resets[:, :, None, :], axis=1)
    np.testing.assert_allclose(
        write.erase(t(memory), t(address), t(resets)), memory * keep, rtol=1e-6
    )
    keep_rows = np.prod(1 - address * rows[..., None], axis=1)[..., None]
    np.testing.assert_allclose(
        write.erase_rows(t(memory), t(address), t(rows)), memory * keep_rows, rtol=1e-6
    )
    both = memory * keep + np.einsum("bhm,bhw->bmw", address, values)
    np.testing.assert_allclose(
        write.erase_and_write(t(memory), t(address), t(resets), t(values)),
        both,
        rtol=1e-6,
    )


def test_dnc_controllers():
    from sonnet.src.nets.dnc import control

    assert control.get_controller_ctor("LSTM") is snt.LSTM
    assert control.get_controller_ctor("GRU") is snt.GRU
    assert control.get_controller_ctor("FeedForward") is control.FeedForward
    core = control.FeedForward(3)
    state = core.initial_state(2)
    assert state.shape == (2, 1) and state.dtype == tf.float32
    x = tf.constant(np.random.RandomState(1).randn(2, 4).astype(np.float32))
    outputs, next_state = core(x, state)
    expected = np.tanh(x.numpy() @ core.linear.w.numpy() + core.linear.b.numpy())
    np.testing.assert_allclose(outputs, expected, rtol=1e-5)
    assert next_state is state and core.name == "feed_forward"
    plain = control.FeedForward(3, activation=None)
    outputs, _ = plain(x, plain.initial_state(2))
    np.testing.assert_allclose(
        outputs, x.numpy() @ plain.linear.w.numpy() + plain.linear.b.numpy(), rtol=1e-5
    )
    deep = control.deep_core("LSTM", {"hidden_size": 3}, num_layers=2)
    assert [layer.name for layer in deep._layers] == ["LSTM_0", "LSTM_1"]
    out, _ = deep(x, deep.initial_state(2))
    assert out.shape == (2, 6)  # Skip connections concatenate the layers' outputs.
    flat = control.deep_core("GRU", {"hidden_size": 3}, 2, skip_connections=False)
    assert isinstance(flat, snt.DeepRNN) and flat.name == "deep_rnn"
    out, _ = flat(x, flat.initial_state(2))
    assert out.shape == (2, 3)
