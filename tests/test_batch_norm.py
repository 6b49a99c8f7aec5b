"""Tests for `snt.BaseBatchNorm` and `snt.BatchNorm`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input

EPS = 1e-5


def _data(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 2.0 + 0.5).astype(dtype)


def _axes(rank, channels_first):
    channel = 1 if channels_first else rank - 1
    return tuple(i for i in range(rank) if i != channel)


def _reference(x, mean, var, scale, offset):
    return (x - mean) / np.sqrt(var + EPS) * scale + offset


# (shape, data_format, whether the original fed the unbiased variance)
LAYOUTS = [
    ((6, 3), "channels_last", False),
    ((4, 5, 3), "NWC", False),
    ((4, 3, 5), "NCW", False),
    ((2, 3, 4, 3), "NHWC", True),
    ((2, 3, 4, 3), "channels_last", True),
    ((2, 3, 4, 5), "NCHW", False),
    ((2, 2, 3, 2, 3), "NDHWC", False),
    ((2, 3, 2, 3, 2), "NCDHW", False),
]


def _layout_id(layout):
    shape, fmt, _ = layout
    return f"{fmt}-rank{len(shape)}"


# Variables ------------------------------------------------------------------


def test_variables_names_shapes_and_order():
    bn = snt.BatchNorm(create_scale=True, create_offset=True)
    bn(tf.ones([2, 4, 4, 3]), is_training=True)
    got = [(v.name, v.shape.as_list(), v.dtype.name, v.trainable) for v in bn.variables]
    assert got == [
        ("batch_norm/offset:0", [3], "float32", True),
        ("batch_norm/scale:0", [3], "float32", True),
        ("batch_norm/moving_mean/counter:0", [], "int64", False),
        ("batch_norm/moving_mean/hidden:0", [1, 1, 1, 3], "float32", False),
        ("batch_norm/moving_mean/average:0", [1, 1, 1, 3], "float32", False),
        ("batch_norm/moving_variance/counter:0", [], "int64", False),
        ("batch_norm/moving_variance/hidden:0", [1, 1, 1, 3], "float32", False),
        ("batch_norm/moving_variance/average:0", [1, 1, 1, 3], "float32", False),
    ]


def test_checkpoint_paths(tmp_path):
    bn = snt.BatchNorm(True, True)
    bn(tf.ones([2, 3]), is_training=True)
    path = tf.train.Checkpoint(module=bn).write(str(tmp_path / "ckpt"))
    keys = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    assert {k.split("/.ATTRIBUTES")[0] for k in keys if k.startswith("module/")} == {
        "module/offset",
        "module/scale",
        "module/moving_mean/_counter",
        "module/moving_mean/_hidden",
        "module/moving_mean/average",
        "module/moving_variance/_counter",
        "module/moving_variance/_hidden",
        "module/moving_variance/average",
    }


@pytest.mark.parametrize(
    "shape, fmt, stats_shape, params_shape",
    [
        ((2, 3), "channels_last", [1, 3], [3]),
        ((2, 5, 3), "NWC", [1, 1, 3], [3]),
        ((2, 3, 5), "NCW", [1, 3, 1], [3, 1]),
        ((2, 4, 4, 3), "NCHW", [1, 4, 1, 1], [4, 1, 1]),
        ((2, 2, 2, 2, 3), "NDHWC", [1, 1, 1, 1, 3], [3]),
    ],
)
def test_shapes_per_data_format(shape, fmt, stats_shape, params_shape):
    bn = snt.BatchNorm(True, True, data_format=fmt)
    assert bn(tf.ones(shape), is_training=True).shape == shape
    assert bn.moving_mean.average.shape == stats_shape
    assert bn.moving_variance.average.shape == stats_shape
    assert bn.scale.shape == params_shape and bn.offset.shape == params_shape


def test_scale_and_offset_always_created():
    bn = snt.BatchNorm(create_scale=False, create_offset=True)
    bn(tf.ones([2, 3]), is_training=True)
    assert not bn.scale.trainable
    np.testing.assert_array_equal(bn.scale.numpy(), np.ones([3]))
    assert [v.name for v in bn.trainable_variables] == ["batch_norm/offset:0"]
    bn = snt.BatchNorm(create_scale=False, create_offset=False)
    bn(tf.ones([2, 3]), is_training=True)
    assert len(bn.variables) == 8
    with pytest.raises(ValueError, match="trainable_variables"):
        bn.trainable_variables  # noqa: B018 - the property raises when empty


def test_initializers_used():
    bn = snt.BatchNorm(
        True,
        True,
        scale_init=snt.initializers.Constant(2.0),
        offset_init=snt.initializers.Constant(-1.0),
    )
    bn(tf.ones([2, 3]), is_training=True)
    np.testing.assert_array_equal(bn.scale.numpy(), [2.0] * 3)
    np.testing.assert_array_equal(bn.offset.numpy(), [-1.0] * 3)


def test_name_scopes():
    bn = snt.BatchNorm(True, True, name="bn")
    bn(tf.ones([2, 3]), is_training=True)
    assert bn.moving_mean.name == "moving_mean"
    assert [v.name for v in bn.variables][2] == "bn/moving_mean/counter:0"

    class Outer(snt.Module):
        def __init__(self):
            super().__init__()
            self.bn = snt.BatchNorm(True, True)

    outer = Outer()
    outer.bn(tf.ones([2, 3]), is_training=True)
    names = [v.name for v in outer.bn.variables]
    assert names[0] == "outer/batch_norm/offset:0"
    assert names[-1] == "outer/batch_norm/moving_variance/average:0"


def test_repr():
    bn = snt.BatchNorm(create_scale=True, create_offset=False, decay_rate=0.9)
    assert (
        repr(bn) == "BatchNorm(create_scale=True, create_offset=False, decay_rate=0.9)"
    )


def test_base_batch_norm_with_variable_free_metrics():
    class Nothing(snt.Metric):
        def initialize(self, value):
            pass

        def update(self, value):
            pass

        def reset(self):
            pass

        @property
        def value(self):
            raise AssertionError("not used with batch statistics")

    bn = snt.BaseBatchNorm(True, False, Nothing(), Nothing())
    x = _data([2, 2, 2, 3])
    y = bn(x, is_training=False, test_local_stats=True)
    np.testing.assert_allclose(
        y,
        _reference(x, x.mean((0, 1, 2)), x.var((0, 1, 2)), 1, 0),
        rtol=1e-5,
        atol=1e-5,
    )
    assert [v.name for v in bn.variables] == [
        "base_batch_norm/offset:0",
        "base_batch_norm/scale:0",
    ]


# Numerics -------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS, ids=_layout_id)
def test_training_output_and_moving_statistics(layout):
    shape, fmt, unbiased = layout
    channels_first = snt.BatchNorm(True, True, data_format=fmt)._channel_index == 1
    axes = _axes(len(shape), channels_first)
    bn = snt.BatchNorm(True, True, decay_rate=0.5, data_format=fmt)
    x1, x2 = _data(shape, seed=1), _data(shape, seed=2)

    y = bn(x1, is_training=True)
    mean = x1.mean(axes, keepdims=True)
    var = x1.var(axes, keepdims=True)
    np.testing.assert_allclose(y, _reference(x1, mean, var, 1, 0), rtol=1e-4, atol=1e-5)
    n = x1.size // mean.size
    fed = var * n / (n - 1) if unbiased else var
    # The first (debiased) EMA update gives exactly the value.
    np.testing.assert_allclose(bn.moving_mean.value, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.moving_variance.value, fed, rtol=1e-5, atol=1e-6)

    bn(x2, is_training=True)
    var2 = x2.var(axes, keepdims=True)
    fed2 = var2 * n / (n - 1) if unbiased else var2
    # hidden = 0.5 * 0.5 * fed + 0.5 * fed2, debiased by 1 - 0.25.
    expected = (0.25 * fed + 0.5 * fed2) / 0.75
    np.testing.assert_allclose(bn.moving_variance.value, expected, rtol=1e-5)

    # Evaluation uses the moving statistics.
    y_eval = bn(x1, is_training=False)
    np.testing.assert_allclose(
        y_eval,
        _reference(x1, bn.moving_mean.value.numpy(), expected, 1, 0),
        rtol=1e-4,
        atol=1e-5,
    )


def test_unbiased_variance_quirk_exact_numbers():
    # The spec's example: 1..12 as [1, 2, 2, 3]; fused path feeds 15.0, a
    # rank-2 (unfused in the original) input of the same values feeds 11.25.
    x = tf.reshape(tf.range(1.0, 13.0), [1, 2, 2, 3])
    bn = snt.BatchNorm(True, True)
    bn(x, is_training=True)
    np.testing.assert_allclose(
        bn.moving_variance.value.numpy().ravel(), [15.0] * 3, rtol=1e-4
    )
    bn = snt.BatchNorm(True, True)
    bn(tf.reshape(x, [4, 3]), is_training=True)
    np.testing.assert_allclose(
        bn.moving_variance.value.numpy().ravel(), [11.25] * 3, rtol=1e-4
    )


@pytest.mark.parametrize("dtype", [tf.float64, tf.float16])
def test_unfused_dtypes_keep_the_quirk(dtype):
    x = tf.cast(tf.reshape(tf.range(1.0, 13.0), [1, 2, 2, 3]), dtype)
    bn = snt.BatchNorm(True, True, decay_rate=0.5)
    y = bn(x, is_training=True)
    assert y.dtype == dtype and not bn._fused
    np.testing.assert_allclose(
        bn.moving_variance.value.numpy().ravel(), [15.0] * 3, rtol=1e-3
    )


def test_single_element_per_channel():
    bn = snt.BatchNorm(True, True)
    y = bn(tf.constant([[[[1.0, 2.0]]]]), is_training=True)
    np.testing.assert_array_equal(y.numpy(), np.zeros([1, 1, 1, 2]))
    np.testing.assert_array_equal(
        bn.moving_variance.value.numpy(), np.zeros([1, 1, 1, 2])
    )
    bn = snt.BatchNorm(True, True)
    bn(tf.constant([[[[1.0, 2.0]]]], tf.float64), is_training=True)
    assert np.all(np.isfinite(bn.moving_variance.value.numpy()))


def test_eval_before_training_uses_zero_statistics():
    bn = snt.BatchNorm(True, True)
    x = _data([2, 3])
    y = bn(x, is_training=False)
    np.testing.assert_allclose(y, x / np.sqrt(EPS), rtol=1e-5)
    assert int(bn.moving_mean._counter.numpy()) == 0


def test_test_local_stats_does_not_update():
    bn = snt.BatchNorm(True, True)
    x = _data([5, 2, 2, 3])
    y = bn(x, is_training=False, test_local_stats=True)
    axes = (0, 1, 2)
    np.testing.assert_allclose(
        y, _reference(x, x.mean(axes), x.var(axes), 1, 0), rtol=1e-4, atol=1e-5
    )
    assert int(bn.moving_mean._counter.numpy()) == 0
    np.testing.assert_array_equal(
        bn.moving_variance.value.numpy(), np.zeros([1, 1, 1, 3])
    )


def test_call_time_scale_and_offset():
    bn = snt.BatchNorm(create_scale=False, create_offset=False)
    x = _data([4, 2, 2, 3])
    scale = np.array([1.0, 2.0, 3.0], np.float32)
    offset = np.array([0.5, 0.0, -0.5], np.float32)
    y = bn(x, is_training=True, scale=scale, offset=offset)
    axes = (0, 1, 2)
    np.testing.assert_allclose(
        y,
        _reference(x, x.mean(axes), x.var(axes), scale, offset),
        rtol=1e-4,
        atol=1e-5,
    )
    # A scalar scale broadcasts.
    y = bn(x, is_training=False, test_local_stats=True, scale=tf.constant(2.0))
    np.testing.assert_allclose(
        y, _reference(x, x.mean(axes), x.var(axes), 2.0, 0), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("layout", LAYOUTS[:6], ids=_layout_id)
def test_gradients_match_unfused_formula(layout):
    shape, fmt, _ = layout
    bn = snt.BatchNorm(True, True, data_format=fmt)
    x = tf.constant(_data(shape))
    bn(x, is_training=True)
    bn.scale.assign(bn.scale * 1.5)
    axes = list(_axes(len(shape), bn._channel_index == 1))
    weights = tf.constant(_data(shape, seed=3))

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = tf.reduce_sum(bn(x, is_training=True) * weights)
        mean, var = tf.nn.moments(x, axes, keepdims=True)
        reference = tf.reduce_sum(
            tf.nn.batch_normalization(x, mean, var, bn.offset, bn.scale, EPS) * weights
        )
    for a, b in zip(
        tape.gradient(ours, [x, bn.scale, bn.offset]),
        tape.gradient(reference, [x, bn.scale, bn.offset]),
    ):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_fused_kernel_choice():
    def fused(shape, fmt="channels_last", dtype=tf.float32):
        bn = snt.BatchNorm(True, True, data_format=fmt)
        bn(tf.ones(shape, dtype), is_training=True)
        return bn._fused

    assert fused([2, 3])
    assert fused([2, 2, 2, 3])
    assert fused([2, 2, 2, 2, 3])
    assert fused([2, 3, 2, 2], "NCHW")
    assert not fused([2, 3, 2], "NCW")
    assert not fused([2, 2, 2, 3], dtype=tf.float64)


# Tensor-valued flags ----------------------------------------------------------


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("local_stats", [True, False])
@pytest.mark.parametrize("shape, fmt", [((4, 2, 2, 3), "NHWC"), ((4, 3, 2), "NCW")])
def test_tensor_flags_match_python_flags(training, local_stats, shape, fmt):
    x = _data(shape)
    python_bn = snt.BatchNorm(True, True, decay_rate=0.5, data_format=fmt)
    tensor_bn = snt.BatchNorm(True, True, decay_rate=0.5, data_format=fmt)
    for bn in (python_bn, tensor_bn):  # Some moving statistics first.
        bn(_data(shape, seed=5), is_training=True)

    expected = python_bn(x, is_training=training, test_local_stats=local_stats)

    @tf.function(autograph=False)
    def call(x, t, s):
        return tensor_bn(x, is_training=t, test_local_stats=s)

    got = call(x, tf.constant(training), tf.constant(local_stats))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    for a, b in zip(python_bn.variables, tensor_bn.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_eager_tensor_flag():
    bn = snt.BatchNorm(True, True)
    bn(tf.ones([2, 3]), is_training=tf.constant(True))
    assert int(bn.moving_mean._counter.numpy()) == 1
    bn(tf.ones([2, 3]), is_training=np.bool_(False))
    assert int(bn.moving_mean._counter.numpy()) == 1


def test_unknown_batch_size_in_tf_function():
    bn = snt.BatchNorm(True, True, decay_rate=0.5)

    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def train(x):
        return bn(x, is_training=True)

    x = _data([5, 3])
    np.testing.assert_allclose(
        train(x), _reference(x, x.mean(0), x.var(0), 1, 0), rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(bn.moving_variance.value.numpy()[0], x.var(0), rtol=1e-5)

    bn4 = snt.BatchNorm(True, True, decay_rate=0.5)

    @tf.function(input_signature=[tf.TensorSpec([None, 2, 2, 3])])
    def train4(x):
        return bn4(x, is_training=True)

    x = _data([3, 2, 2, 3])
    train4(x)
    np.testing.assert_allclose(
        bn4.moving_variance.value.numpy().ravel(),
        x.var((0, 1, 2)) * 12 / 11,
        rtol=1e-5,
    )


def test_subclass_can_replace_moments_and_disable_fusion():
    calls = []

    class Custom(snt.BaseBatchNorm):
        _use_fused_kernel = False

        def _batch_moments(self, inputs):
            calls.append(inputs.shape)
            return super()._batch_moments(inputs)

    bn = Custom(
        True,
        True,
        snt.ExponentialMovingAverage(0.5, name="moving_mean"),
        snt.ExponentialMovingAverage(0.5, name="moving_variance"),
    )
    x = tf.reshape(tf.range(1.0, 13.0), [1, 2, 2, 3])
    bn(x, is_training=True)
    assert calls and not bn._fused
    # Without the fused kernel there is no unbiased-variance quirk.
    np.testing.assert_allclose(bn.moving_variance.value.numpy().ravel(), [11.25] * 3)


# Errors -----------------------------------------------------------------------


IAE = tf.errors.InvalidArgumentError


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"scale_init": snt.initializers.Ones(), "create_scale": False},
            ValueError,
            "`scale_init` must be None when `create_scale=False`",
        ),
        (
            {"offset_init": snt.initializers.Zeros(), "create_offset": False},
            ValueError,
            "`offset_init` must be None when `create_offset=False`",
        ),
        # The unused-initializer check comes first, as in the original.
        ({"scale_init": 1.0, "create_scale": False}, ValueError, "`scale_init`"),
        ({"scale_init": "ones"}, TypeError, "`scale_init` must be a callable"),
        ({"offset_init": 3}, TypeError, "`offset_init` must be a callable"),
        ({"eps": float("nan")}, ValueError, "`eps`"),
        ({"eps": None}, ValueError, "`eps`"),
        # The original's ops failed on a string (`TypeError` fused, else
        # `InvalidArgumentError`): ours is both.
        ({"eps": "small"}, (TypeError, IAE), "`eps`"),
        ({"decay_rate": float("nan")}, ValueError, "`decay_rate`"),
        ({"decay_rate": "x"}, TypeError, "`decay_rate`"),
        ({"decay_rate": np.full([3], 0.9)}, TypeError, "`decay_rate`"),
        ({"data_format": "HWNX"}, ValueError, "`data_format`"),
        ({"create_scale": "yes"}, TypeError, "`create_scale` must be a bool"),
        ({"create_offset": np.ones([2])}, ValueError, "`create_offset`"),
        ({"name": "1bad"}, ValueError, "`name`"),
    ],
)
def test_constructor_errors(kwargs, error, match):
    args = {"create_scale": True, "create_offset": True, **kwargs}
    errors = error if isinstance(error, tuple) else (error,)
    with pytest.raises(errors[0], match=match) as info:
        snt.BatchNorm(**args)
    assert all(isinstance(info.value, e) for e in errors)


@pytest.mark.parametrize(
    "value, expected",
    [(1, True), (0, False), (2, True), (np.int64(1), True), (1.0, True)]
    + [(np.bool_(False), False), (tf.constant(True), True)],
)
def test_create_flags_by_truth_value(value, expected):
    # The original tested the flags with `if`.
    bn = snt.BatchNorm(create_scale=value, create_offset=value)
    bn(tf.ones([2, 3]), is_training=True)
    assert bn.scale.trainable is expected and bn.offset.trainable is expected


def test_create_flags_none():
    # As in the original: the variables are trainable (`tf.Variable`'s
    # default for `trainable=None`), yet `scale`/`offset` may be passed.
    bn = snt.BatchNorm(create_scale=None, create_offset=None)
    x = _data([4, 3])
    y = bn(x, is_training=True, scale=2.0, offset=1.0)
    assert bn.scale.trainable and bn.offset.trainable
    np.testing.assert_allclose(
        y, _reference(x, x.mean(0), x.var(0), 2.0, 1.0), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize(
    "eps",
    [
        1e-3,
        np.float32(1e-3),
        np.array(1e-3),
        tf.constant(1e-3),
        tf.constant(1e-3, tf.float64),
    ],
)
def test_eps_spellings(eps):
    x = _data([2, 2, 2, 3])
    bn = snt.BatchNorm(True, True, eps=eps)
    assert isinstance(bn._eps, float) and bn._eps == pytest.approx(1e-3)
    y = bn(x, is_training=True)
    mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
    np.testing.assert_allclose(
        y, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-4
    )
    assert bn._fused


def test_eps_variable_uses_the_unfused_kernel():
    eps = tf.Variable(1e-3)
    x = _data([2, 2, 2, 3])
    bn = snt.BatchNorm(True, True, eps=eps)
    y = bn(x, is_training=True)
    assert not bn._fused
    mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
    np.testing.assert_allclose(
        y, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("eps", [-1e-6, 0, True, 2])
def test_eps_any_real_number(eps):
    # The original did not check `eps`: its formula's results.
    x = _data([4, 3])
    y = snt.BatchNorm(True, True, eps=eps)(x, is_training=True)
    var = x.var(0)
    np.testing.assert_allclose(
        y, (x - x.mean(0)) / np.sqrt(var + float(eps)), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize(
    "decay", [0.5, 1, np.float32(0.5), np.array(0.5), tf.constant(0.5), -0.5, 1.5]
)
def test_decay_rate_spellings(decay):
    bn = snt.BatchNorm(True, True, decay_rate=decay)
    x = _data([4, 3])
    bn(x, is_training=True)
    # The first update gives the batch mean (debiased), whatever the decay.
    if float(decay) != 1:
        np.testing.assert_allclose(bn.moving_mean.value[0], x.mean(0), rtol=1e-5)


def test_bad_metrics_fail_on_the_first_call():
    # As in the original, construction accepts anything; the first call uses
    # `initialize` and fails (`AttributeError` there; ours is a `TypeError`
    # too).
    bn = snt.BaseBatchNorm(True, True, object(), snt.Sum())
    with pytest.raises(TypeError, match="`moving_mean` must be a metric") as info:
        bn(tf.ones([2, 3]), is_training=True)
    assert isinstance(info.value, AttributeError)
    bn = snt.BaseBatchNorm(True, True, snt.Sum(), None)
    with pytest.raises(AttributeError, match="`moving_variance` must be a metric"):
        bn(tf.ones([2, 3]), is_training=True)
    assert not hasattr(bn, "scale")


def test_one_element_list_eps():
    # TF broadcast `[1e-3]` like `1e-3` in the original's unfused ops.
    x = _data([4, 2, 2, 3])
    np.testing.assert_allclose(
        snt.BatchNorm(True, True, eps=[1e-3])(x, is_training=True),
        snt.BatchNorm(True, True, eps=1e-3)(x, is_training=True),
    )


@pytest.mark.parametrize(
    "flag, training",
    [(1, True), (0, False), (None, False), (np.bool_(True), True), (1.0, True)]
    + [(tf.constant(True), True), (tf.constant(0), False), (np.int64(1), True)],
)
def test_mode_flags_by_truth_value(flag, training):
    x = _data([4, 2, 2, 3])
    expected = snt.BatchNorm(True, True)(x, is_training=training)
    np.testing.assert_allclose(
        snt.BatchNorm(True, True)(x, is_training=flag), expected, rtol=1e-6
    )
    # None for `test_local_stats` is batch statistics, as the original's
    # fused kernel took None (its default).
    local = True if flag is None else training
    np.testing.assert_allclose(
        snt.BatchNorm(True, True)(x, is_training=False, test_local_stats=flag),
        snt.BatchNorm(True, True)(x, is_training=False, test_local_stats=local),
        rtol=1e-6,
    )


def test_call_errors():
    bn = snt.BatchNorm(True, True)
    x = tf.ones([2, 2, 2, 3])
    with pytest.raises(ValueError, match="`scale` must be None when the module"):
        bn(x, is_training=True, scale=tf.ones([3]))
    with pytest.raises(ValueError, match="`offset` must be None when the module"):
        bn(x, is_training=True, offset=tf.ones([3]))
    with pytest.raises(TypeError, match="`is_training` must be a bool"):
        bn(x, is_training="yes")
    with pytest.raises(TypeError, match="`test_local_stats` must be a bool"):
        bn(x, is_training=False, test_local_stats=b"1")
    # No single truth value: the original's `if` raised `ValueError`.
    with pytest.raises(ValueError, match="`is_training` must have a single truth"):
        bn(x, is_training=tf.constant([True, False]))
    with pytest.raises(ValueError, match="`test_local_stats` must have a single"):
        bn(x, is_training=False, test_local_stats=np.array([1, 0]))
    assert not hasattr(bn, "scale")  # Nothing was built by the failed calls.

    bn(x, is_training=True)
    before = bad_input.snapshot(bn)
    # The original's ops failed (`InvalidArgumentError`); ours are also
    # `ValueError`s, or `TypeError`s for a dtype.
    with pytest.raises(IAE, match=r"`inputs` must keep the rank .*\(4\)") as info:
        bn(tf.ones([2, 2, 3]), is_training=True)
    assert isinstance(info.value, ValueError)
    with pytest.raises(IAE, match=r"number of channels of the first call \(3\)"):
        bn(tf.ones([2, 2, 2, 4]), is_training=True)
    with pytest.raises(IAE, match=r"dtype of the first call \(float32\)") as info:
        bn(tf.ones([2, 2, 2, 3], tf.float64), is_training=True)
    assert isinstance(info.value, TypeError)
    bad_input.assert_unchanged(bn, before)


def test_call_time_scale_spellings():
    x = _data([4, 2, 2, 3])
    expected = snt.BatchNorm(True, True)(x, is_training=True) * 2
    for scale in (2.0, [2.0] * 3, np.full([3], 2.0), tf.fill([3], 2.0)):
        bn = snt.BatchNorm(create_scale=False, create_offset=True)
        np.testing.assert_allclose(
            bn(x, is_training=True, scale=scale), expected, rtol=1e-5, atol=1e-5
        )
    bn = snt.BatchNorm(create_scale=False, create_offset=True)
    # A tensor of another dtype: the original's conversion raised
    # `ValueError`; ours is an `InvalidArgumentError` too.
    with pytest.raises(ValueError, match="`scale` must be convertible") as info:
        bn(x, is_training=True, scale=tf.ones([3], tf.float64))
    assert isinstance(info.value, IAE)


def test_build_errors():
    # The original indexed the shape past its end (`IndexError`).
    with pytest.raises(IndexError, match="`inputs` must have a known rank >= 1"):
        snt.BatchNorm(True, True)(tf.ones([]), is_training=True)
    with pytest.raises(ValueError, match="`inputs` must have a known rank >= 2"):
        snt.BatchNorm(True, True, data_format="NCW")(tf.ones([3]), is_training=True)
    # It read `inputs.shape` (`AttributeError`).
    for bad in (None, "x"):
        with pytest.raises(TypeError, match="`inputs` must be a tensor") as info:
            snt.BatchNorm(True, True)(bad, is_training=True)
        assert isinstance(info.value, AttributeError)
    with pytest.raises(IAE, match="`inputs` must have a floating point") as info:
        snt.BatchNorm(True, True)(tf.ones([2, 3], tf.int32), is_training=True)
    assert isinstance(info.value, TypeError)
    with pytest.raises(TypeError, match="`inputs` must be convertible"):
        snt.BatchNorm(True, True)(object(), is_training=True)

    bn = snt.BatchNorm(True, True)

    @tf.function(input_signature=[tf.TensorSpec([None, None])])
    def call(x):
        return bn(x, is_training=True)

    with pytest.raises(ValueError, match="statically known number of channels"):
        call.get_concrete_function()

    @tf.function(input_signature=[tf.TensorSpec(None)])
    def unknown_rank(x):
        return bn(x, is_training=True)

    with pytest.raises(ValueError, match="known rank"):
        unknown_rank.get_concrete_function()


def test_rank_one_inputs():
    # Each element is its own channel (the original's axes: none).
    bn = snt.BatchNorm(True, True)
    x = tf.constant([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(bn(x, is_training=True), [0.0, 0.0, 0.0])
    assert bn.scale.shape == [3] and bn.moving_mean.value.shape == [3]
    np.testing.assert_allclose(bn.moving_mean.value, [1.0, 2.0, 3.0], rtol=1e-4)
    mean, var = bn.moving_mean.value, bn.moving_variance.value
    np.testing.assert_allclose(
        bn(x, is_training=False), (x - mean) / np.sqrt(var + EPS), rtol=1e-4
    )


# Bad input fuzzing ----------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["add", "drop", "dtype", "channels", "spatial"]),
    st.sampled_from([tf.float64, tf.int32, tf.bool, tf.string, tf.float16]),
    bad_input.junk(),
)
def test_bad_inputs(kind, dtype, flag):
    bn = snt.BatchNorm(True, True, decay_rate=0.5)
    x = tf.constant(_data([2, 3, 3, 4]))
    bn(x, is_training=True)
    before = bad_input.snapshot(bn)
    if kind == "add":
        bad = x[None]
    elif kind == "drop":
        bad = x[0]
    elif kind == "dtype":
        bad = tf.cast(x, dtype) if dtype != tf.string else tf.fill(x.shape, "a")
    elif kind == "channels":
        bad = tf.pad(x, [[0, 0], [0, 0], [0, 0], [0, 1]])
    else:
        bad = tf.pad(x, [[0, 0], [0, 1], [0, 0], [0, 0]])
    ok, _ = bad_input.outcome(lambda: bn(bad, is_training=True), ["inputs"])
    assert ok == (kind == "spatial")
    if not ok:
        bad_input.assert_unchanged(bn, before)
    before = bad_input.snapshot(bn)
    ok, _ = bad_input.outcome(lambda: bn(x, is_training=flag), ["is_training"])
    if not ok:
        bad_input.assert_unchanged(bn, before)


def test_empty_batch_leaves_statistics_alone():
    bn = snt.BatchNorm(True, True, decay_rate=0.5)
    bn(_data([4, 2, 2, 3]), is_training=True)
    before = bad_input.snapshot(bn)
    for shape in ([0, 2, 2, 3], [4, 0, 2, 3]):
        assert bn(tf.zeros(shape), is_training=True).shape == shape
    bad_input.assert_unchanged(bn, before)

    @tf.function(input_signature=[tf.TensorSpec([None, 2, 2, 3])])
    def train(x):
        return bn(x, is_training=True)

    assert train(tf.zeros([0, 2, 2, 3])).shape == (0, 2, 2, 3)
    bad_input.assert_unchanged(bn, before)
    train(_data([3, 2, 2, 3]))  # A non-empty batch still updates.
    assert int(bn.moving_mean._counter.numpy()) == 2


def test_zero_channels():
    # The original accepted them (empty outputs and parameters).
    for training in (True, False):
        bn = snt.BatchNorm(True, True)
        assert bn(tf.zeros([2, 0]), is_training=training).shape == [2, 0]
        assert bn.scale.shape == [0] and not bn._fused


def test_tensor_decay_rate():
    bn = snt.BatchNorm(True, True, decay_rate=tf.constant(0.5))
    bn(tf.ones([2, 3]), is_training=True)
    snt.BatchNorm(True, True, decay_rate=tf.constant(1))(tf.ones([2, 3]), True)
    with pytest.raises(TypeError, match="`decay_rate` must be a real number"):
        snt.BatchNorm(True, True, decay_rate=tf.constant(True))


# Users' metrics -------------------------------------------------------------


class RecordingMetric:
    """A metric that is not an `snt.Metric` (as in the original's tests):
    its value is the last value it was given."""

    def __init__(self):
        self.variable = None
        self.calls = []

    def initialize(self, x):
        self.calls.append(("initialize", tuple(x.shape)))
        self.variable = tf.Variable(x)

    def update(self, x):
        self.calls.append(("update", tuple(x.shape)))
        self.variable.assign(x)

    @property
    def value(self):
        return self.variable


@pytest.mark.parametrize("layout", LAYOUTS, ids=_layout_id)
def test_user_metrics_start_from_the_first_batch(layout):
    shape, fmt, unbiased = layout
    channels_first = snt.BatchNorm(True, True, data_format=fmt)._channel_index == 1
    axes = _axes(len(shape), channels_first)
    x = _data(shape)
    mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    stats = mean.shape
    moving_mean, moving_variance = RecordingMetric(), RecordingMetric()
    bn = snt.BaseBatchNorm(False, False, moving_mean, moving_variance, data_format=fmt)
    # Inference on the first call uses the first batch's moments (the
    # original initialized the metrics with them), so the output is the
    # normalized batch.
    y = bn(x, is_training=False)
    np.testing.assert_allclose(y, _reference(x, mean, var, 1, 0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(moving_mean.value, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(moving_variance.value, var, rtol=1e-5, atol=1e-6)
    assert moving_mean.calls == [("initialize", stats)]
    # Training updates them with the batch moments, in the statistics' shape.
    x2 = _data(shape, seed=1)
    bn(x2, is_training=True)
    assert moving_mean.calls == [("initialize", stats), ("update", stats)]
    assert moving_variance.calls[-1] == ("update", stats)
    n = x2.size // x2.shape[1 if channels_first else -1]
    var2 = x2.var(axes, keepdims=True) * (n / (n - 1) if unbiased else 1)
    np.testing.assert_allclose(
        moving_mean.value, x2.mean(axes, keepdims=True), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(moving_variance.value, var2, rtol=1e-4, atol=1e-5)


def test_user_metrics_single_batch_inference():
    # The original's tests: a single batch at inference normalizes to zero.
    bn = snt.BaseBatchNorm(True, True, RecordingMetric(), RecordingMetric())
    x = tf.ones([1, 1, 1, 1])
    np.testing.assert_array_equal(bn(x, False), tf.zeros_like(x))
    bn = snt.BaseBatchNorm(False, False, RecordingMetric(), RecordingMetric())
    x = tf.ones([2, 3, 3, 5])
    np.testing.assert_array_equal(bn(x, False), tf.zeros_like(x))


@pytest.mark.parametrize("autograph", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_user_metrics_in_tf_function(autograph, training):
    moving_mean, moving_variance = RecordingMetric(), RecordingMetric()
    bn = snt.BaseBatchNorm(True, True, moving_mean, moving_variance)
    x = _data([4, 3])
    f = tf.function(lambda x: bn(x, is_training=training), autograph=autograph)
    y = f(x)
    np.testing.assert_allclose(
        y, _reference(x, x.mean(0), x.var(0), 1, 0), rtol=1e-4, atol=1e-4
    )
    np.testing.assert_allclose(moving_mean.value, x.mean(0, keepdims=True), rtol=1e-5)


def test_user_metrics_empty_first_batch_start_from_zeros():
    moving_mean, moving_variance = RecordingMetric(), RecordingMetric()
    bn = snt.BaseBatchNorm(True, True, moving_mean, moving_variance)
    bn(tf.zeros([0, 3]), is_training=True)
    np.testing.assert_array_equal(moving_mean.value, [[0.0, 0.0, 0.0]])
    moving_mean, moving_variance = RecordingMetric(), RecordingMetric()
    bn = snt.BaseBatchNorm(True, True, moving_mean, moving_variance)
    f = tf.function(lambda x: bn(x, is_training=False))
    f(tf.zeros([0, 3]))
    np.testing.assert_array_equal(moving_variance.value, [[0.0, 0.0, 0.0]])


def test_builtin_metrics_still_start_from_zeros():
    # `snt.BatchNorm` (and other built-in metrics, which only take the shape)
    # are initialized with zeros made outside the traced graph, so that the
    # variables are created eagerly and the fused kernel stays in use.
    bn = snt.BatchNorm(True, True)

    @tf.function
    def infer(x):
        return bn(x, is_training=False)

    graph = infer.get_concrete_function(tf.TensorSpec([2, 2, 2, 3])).graph
    ops = {op.type for op in graph.get_operations()}
    assert "FusedBatchNormV3" in ops and "Mean" not in ops
    np.testing.assert_array_equal(bn.moving_mean.value, np.zeros([1, 1, 1, 3]))
    mean_metrics = snt.BaseBatchNorm(True, True, snt.Mean(), snt.Sum())
    mean_metrics(tf.ones([2, 3]), is_training=True)
    np.testing.assert_array_equal(mean_metrics.moving_variance.value, [[0.0, 0.0, 0.0]])
