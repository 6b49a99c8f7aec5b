"""Tests for `snt.optimizers.schedules` and optimizers with a scheduled rate."""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt

schedules = snt.optimizers.schedules

# NumPy references of the documented formulas, per integer step -------------


def _ref_warmup(peak: float, n: int, init: float = 0.0) -> Callable[[int], float]:
    return lambda s: peak if n == 0 else init + (peak - init) * min(max(s, 0), n) / n


def _ref_cosine(init: float, n: int, alpha: float = 0.0) -> Callable[[int], float]:
    def rate(s: int) -> float:
        c = 0.5 * (1 + math.cos(math.pi * min(max(s, 0), n) / n))
        return init * ((1 - alpha) * c + alpha)

    return rate


def _ref_exponential(
    init: float, n: int, r: float, staircase: bool = False
) -> Callable[[int], float]:
    def rate(s: int) -> float:
        e = max(s, 0) / n
        try:
            return init * r ** (math.floor(e) if staircase else e)
        except OverflowError:  # float32 gives inf too.
            return math.inf

    return rate


def _ref_piecewise(
    boundaries: list[int], values: list[float]
) -> Callable[[int], float]:
    return lambda s: values[sum(s >= b for b in boundaries)]


def _ref_join(
    parts: list[Callable[[int], float]], boundaries: list[int]
) -> Callable[[int], float]:
    def rate(s: int) -> float:
        i = sum(s >= b for b in boundaries)
        return parts[i](s - ([0, *boundaries])[i])

    return rate


CASES: list[tuple[str, Any, Callable[[int], float]]] = [
    ("warmup", schedules.LinearWarmup(0.5, 30), _ref_warmup(0.5, 30)),
    (
        "warmup_from",
        schedules.LinearWarmup(1.0, 7, init_value=0.25),
        _ref_warmup(1.0, 7, 0.25),
    ),
    ("warmup_none", schedules.LinearWarmup(0.3, 0), _ref_warmup(0.3, 0)),
    ("cosine", schedules.CosineDecay(0.1, 50), _ref_cosine(0.1, 50)),
    (
        "cosine_alpha",
        schedules.CosineDecay(2.0, 33, alpha=0.1),
        _ref_cosine(2.0, 33, 0.1),
    ),
    (
        "exponential",
        schedules.ExponentialDecay(0.1, 10, 0.9),
        _ref_exponential(0.1, 10, 0.9),
    ),
    (
        "exponential_staircase",
        schedules.ExponentialDecay(1.0, 7, 0.5, staircase=True),
        _ref_exponential(1.0, 7, 0.5, True),
    ),
    (
        "exponential_growth",
        schedules.ExponentialDecay(0.01, 25, 1.5),
        _ref_exponential(0.01, 25, 1.5),
    ),
    (
        "piecewise",
        schedules.PiecewiseConstant([10, 40, 41], [1.0, 0.5, -0.25, 0.125]),
        _ref_piecewise([10, 40, 41], [1.0, 0.5, -0.25, 0.125]),
    ),
    ("piecewise_constant", schedules.PiecewiseConstant([], [0.7]), lambda s: 0.7),
    (
        "join",
        schedules.Join(
            [
                schedules.LinearWarmup(1.0, 10),
                schedules.PiecewiseConstant([5], [1.0, 0.5]),
                schedules.ExponentialDecay(0.5, 10, 0.5),
            ],
            [10, 30],
        ),
        _ref_join(
            [
                _ref_warmup(1.0, 10),
                _ref_piecewise([5], [1.0, 0.5]),
                _ref_exponential(0.5, 10, 0.5),
            ],
            [10, 30],
        ),
    ),
    (
        "warmup_cosine",
        schedules.WarmupCosine(0.3, 20, 60, init_value=0.03, alpha=0.1),
        _ref_join([_ref_warmup(0.3, 20, 0.03), _ref_cosine(0.3, 60, 0.1)], [20]),
    ),
    (
        "warmup_cosine_no_warmup",
        schedules.WarmupCosine(0.3, 0, 60),
        _ref_cosine(0.3, 60),
    ),
]
CASE_IDS = [c[0] for c in CASES]
STEPS = np.concatenate([np.arange(-3, 130), [1000, 2**31 + 5, 2**40]])


def _expected(reference: Callable[[int], float], steps: Any) -> np.ndarray:
    return np.array([reference(int(s)) for s in np.ravel(steps)], np.float64)


def _check(schedule: Any, reference: Callable[[int], float], steps: Any) -> None:
    result = schedule(steps)
    assert result.dtype == tf.float32
    np.testing.assert_allclose(
        np.ravel(result.numpy()), _expected(reference, steps), rtol=2e-6, atol=1e-7
    )


# Values ---------------------------------------------------------------------


@pytest.mark.parametrize("name,schedule,reference", CASES, ids=CASE_IDS)
def test_matches_formula_at_many_steps(name, schedule, reference):
    _check(schedule, reference, tf.constant(STEPS, tf.int64))


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.uint8, tf.int16])
@pytest.mark.parametrize("name,schedule,reference", CASES, ids=CASE_IDS)
def test_any_integer_dtype_and_python_ints(name, schedule, reference, dtype):
    steps = np.arange(0, 120, 7)
    _check(schedule, reference, tf.constant(steps, dtype))
    for s in (0, 13, 119):
        result = schedule(s)
        assert result.shape == [] and result.dtype == tf.float32
        np.testing.assert_allclose(result.numpy(), reference(s), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name,schedule,reference", CASES, ids=CASE_IDS)
def test_shape_follows_the_step(name, schedule, reference):
    steps = np.arange(24).reshape(2, 3, 4)
    result = schedule(tf.constant(steps))
    assert result.shape == [2, 3, 4]
    _check(schedule, reference, steps)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["function", "xla"])
@pytest.mark.parametrize("name,schedule,reference", CASES, ids=CASE_IDS)
def test_tf_function_and_xla_with_int64_step(name, schedule, reference, jit_compile):
    fn = tf.function(
        schedule, jit_compile=jit_compile, input_signature=[tf.TensorSpec([], tf.int64)]
    )
    for s in (0, 1, 17, 64, 2**33):
        value = fn(tf.constant(s, tf.int64))
        assert value.dtype == tf.float32
        np.testing.assert_allclose(value.numpy(), reference(s), rtol=2e-6, atol=1e-7)


def test_float_steps_interpolate():
    np.testing.assert_allclose(schedules.LinearWarmup(1.0, 4)(2.5).numpy(), 0.625)
    decay = schedules.ExponentialDecay(1.0, 2, 0.5)
    np.testing.assert_allclose(decay(tf.constant(1.0)).numpy(), 0.5**0.5, rtol=1e-6)
    stairs = schedules.ExponentialDecay(1.0, 2, 0.5, staircase=True)
    np.testing.assert_allclose(stairs(tf.constant(3.5)).numpy(), 0.5)
    piecewise = schedules.PiecewiseConstant([2], [1.0, 0.0])
    np.testing.assert_array_equal(piecewise(tf.constant([1.5, 2.0])).numpy(), [1, 0])


@pytest.mark.parametrize("name,schedule,reference", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("clone", [pickle.loads, copy.deepcopy], ids=["pickle", "copy"])
def test_pickle_and_deepcopy(name, schedule, reference, clone):
    data = pickle.dumps(schedule) if clone is pickle.loads else schedule
    cloned = clone(data)
    assert type(cloned) is type(schedule) and repr(cloned) == repr(schedule)
    _check(cloned, reference, np.arange(100))


def test_repr_shows_arguments_that_differ_from_defaults():
    assert repr(schedules.LinearWarmup(0.1, 5)) == (
        "LinearWarmup(peak_value=0.1, warmup_steps=5)"
    )
    assert repr(schedules.CosineDecay(1, 10, alpha=0.5)) == (
        "CosineDecay(init_value=1.0, decay_steps=10, alpha=0.5)"
    )
    assert repr(schedules.WarmupCosine(0.1, 2, 8, init_value=0.01)) == (
        "WarmupCosine(peak_value=0.1, warmup_steps=2, decay_steps=8, init_value=0.01)"
    )
    assert repr(schedules.PiecewiseConstant([1], [1, 2])) == (
        "PiecewiseConstant(boundaries=(1,), values=(1.0, 2.0))"
    )


def test_arguments_in_other_spellings():
    # Sizes and numbers as `snt` takes them elsewhere: NumPy scalars, 0-d
    # arrays, scalar integer tensors for sizes.
    a = schedules.CosineDecay(np.float32(0.5), tf.constant(10), alpha=np.array(0.0))
    assert (a.init_value, a.decay_steps, a.alpha) == (0.5, 10, 0.0)
    assert type(a.decay_steps) is int
    b = schedules.PiecewiseConstant(np.array([3, 5]), (1, np.float64(0.5), 0))
    assert b.boundaries == (3, 5) and b.values == (1.0, 0.5, 0.0)
    c = schedules.Join((schedules.LinearWarmup(1.0, 2), lambda s: 0.5), (np.int64(2),))
    np.testing.assert_allclose(c(tf.range(4)).numpy(), [0, 0.5, 0.5, 0.5])


# Bad arguments --------------------------------------------------------------

_WARMUP = schedules.LinearWarmup(1.0, 2)


@pytest.mark.parametrize(
    "make,error,fragment",
    [
        (lambda: schedules.LinearWarmup("1", 2), TypeError, "`peak_value` must be a"),
        (lambda: schedules.LinearWarmup(1.0, -1), ValueError, "`warmup_steps` must"),
        (lambda: schedules.LinearWarmup(1.0, 2.5), TypeError, "`warmup_steps` must"),
        (
            lambda: schedules.LinearWarmup(1.0, 2, init_value=float("nan")),
            ValueError,
            "`init_value` must be finite",
        ),
        (
            lambda: schedules.LinearWarmup(tf.constant(1.0), 2),
            TypeError,
            "`peak_value` must be a real number",
        ),
        (lambda: schedules.CosineDecay(1.0, 0), ValueError, "`decay_steps` must"),
        (
            lambda: schedules.CosineDecay(1.0, 5, alpha=1.5),
            ValueError,
            "`alpha` must be <= 1",
        ),
        (
            lambda: schedules.CosineDecay(1.0, 5, alpha=-0.1),
            ValueError,
            "`alpha` must be >= 0",
        ),
        (
            lambda: schedules.ExponentialDecay(1.0, 5, 0.0),
            ValueError,
            "`decay_rate` must be > 0",
        ),
        (
            lambda: schedules.ExponentialDecay(1.0, 5, -0.5),
            ValueError,
            "`decay_rate` must be > 0",
        ),
        (
            lambda: schedules.ExponentialDecay(1.0, 5, 0.5, staircase="no"),
            TypeError,
            "`staircase` must be a bool",
        ),
        (
            lambda: schedules.PiecewiseConstant([2, 2], [1, 2, 3]),
            ValueError,
            "`boundaries` must be strictly increasing",
        ),
        (
            lambda: schedules.PiecewiseConstant([3, 1], [1, 2, 3]),
            ValueError,
            "`boundaries` must be strictly increasing",
        ),
        (
            lambda: schedules.PiecewiseConstant([-1], [1, 2]),
            ValueError,
            "`boundaries` must contain only integers >= 0",
        ),
        (
            lambda: schedules.PiecewiseConstant(5, [1, 2]),
            TypeError,
            "`boundaries` must be a sequence of integers",
        ),
        (
            lambda: schedules.PiecewiseConstant([1], 1.0),
            TypeError,
            "`values` must be a list or tuple",
        ),
        (
            lambda: schedules.PiecewiseConstant([1], [1.0]),
            ValueError,
            r"`values` must have one entry more than `boundaries` \(1 boundaries\)",
        ),
        (
            lambda: schedules.PiecewiseConstant([1], [1.0, "x"]),
            TypeError,
            r"`values\[1\]` must be a real number",
        ),
        (
            lambda: schedules.Join(_WARMUP, []),
            TypeError,
            "`schedules` must be a list or tuple",
        ),
        (
            lambda: schedules.Join([], []),
            ValueError,
            r"`schedules` must have one entry more than `boundaries` \(0 boundaries\)",
        ),
        (
            lambda: schedules.Join([_WARMUP, 0.1], [2]),
            TypeError,
            r"`schedules\[1\]` must be callable",
        ),
        (
            lambda: schedules.Join([_WARMUP, schedules.LinearWarmup], [2]),
            TypeError,
            r"`schedules\[1\]` must be callable",
        ),
        (
            lambda: schedules.Join([_WARMUP, _WARMUP], []),
            ValueError,
            r"`schedules` must have one entry more than `boundaries` \(0 boundaries\)",
        ),
        (
            lambda: schedules.Join([_WARMUP], [4, 3]),
            ValueError,
            "`boundaries` must be strictly increasing",
        ),
        (
            lambda: schedules.WarmupCosine(1.0, 2, 0),
            ValueError,
            "`decay_steps` must be a positive integer",
        ),
        (
            lambda: schedules.WarmupCosine(None, 2, 5),
            TypeError,
            "`peak_value` must be a real number",
        ),
    ],
)
def test_bad_constructor_arguments(make, error, fragment):
    with pytest.raises(error, match=fragment) as info:
        make()
    assert "Received:" in str(info.value)


@pytest.mark.parametrize(
    "step,fragment",
    [
        ("three", "`step` must have an integer or floating dtype"),
        (tf.constant([True]), "`step` must have an integer or floating dtype"),
        (None, "`step` must be a number or a tensor"),
        ({"a": 1}, "`step` must be a number or a tensor"),
    ],
)
@pytest.mark.parametrize("name,schedule,reference", CASES, ids=CASE_IDS)
def test_bad_steps(name, schedule, reference, step, fragment):
    with pytest.raises(TypeError, match=fragment):
        schedule(step)


# Optimizers with a schedule -------------------------------------------------

OPTIMIZERS: list[tuple[str, Callable[[Any], snt.Optimizer]]] = [
    ("sgd", lambda lr: snt.optimizers.SGD(lr)),
    ("momentum", lambda lr: snt.optimizers.Momentum(lr, 0.9)),
    ("nesterov", lambda lr: snt.optimizers.Momentum(lr, 0.5, use_nesterov=True)),
    ("adam", lambda lr: snt.optimizers.Adam(lr)),
    ("adamw", lambda lr: snt.optimizers.AdamW(lr, weight_decay=0.2)),
    ("rmsprop", lambda lr: snt.optimizers.RMSProp(lr)),
    ("rmsprop_centered", lambda lr: snt.optimizers.RMSProp(lr, 0.8, 0.5, 1e-6, True)),
]
OPTIMIZER_IDS = [o[0] for o in OPTIMIZERS]
SCHEDULE = schedules.WarmupCosine(0.2, 2, 5, init_value=0.05, alpha=0.1)


def _grads(step: int, sparse: bool) -> list[Any]:
    rng = np.random.default_rng(step)
    gb = tf.constant(rng.normal(size=[3]), tf.float32)
    if sparse:
        values = tf.constant(rng.normal(size=[2, 3]), tf.float32)
        return [tf.IndexedSlices(values, tf.constant([3, 1])), gb]
    return [tf.constant(rng.normal(size=[4, 3]), tf.float32), gb]


def _params() -> list[tf.Variable]:
    return [
        tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), [4, 3]) / 6 - 1),
        tf.Variable([0.5, -0.5, 1.0]),
    ]


def _wrap(apply: Callable[..., None], mode: str) -> Callable[..., None]:
    if mode == "eager":
        return apply
    if mode == "xla":
        return tf.function(apply, jit_compile=True)
    return tf.function(apply, autograph=mode == "autograph")


@pytest.mark.parametrize("mode", ["eager", "autograph", "no_autograph", "xla"])
@pytest.mark.parametrize("make", [o[1] for o in OPTIMIZERS], ids=OPTIMIZER_IDS)
def test_schedule_matches_a_rate_variable_assigned_each_step(make, mode):
    # Reference: the same optimizer with a `tf.Variable` rate set by hand to
    # `schedule(k)` before its k-th update (k counted from 0).
    params, ref_params = _params(), _params()
    opt = make(SCHEDULE)
    rate = tf.Variable(0.0)
    ref_opt = make(rate)
    apply = _wrap(opt.apply, mode)
    for k in range(9):
        rate.assign(SCHEDULE(k))
        grads = _grads(k, sparse=False)
        ref_opt.apply(grads, ref_params)
        apply(grads, params)
        for p, ref in zip(params, ref_params):
            np.testing.assert_allclose(p.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
        assert int(opt.step) == k + 1


@pytest.mark.parametrize("make", [o[1] for o in OPTIMIZERS], ids=OPTIMIZER_IDS)
def test_schedule_with_sparse_updates(make):
    params, ref_params = _params(), _params()
    opt, rate = make(SCHEDULE), tf.Variable(0.0)
    ref_opt = make(rate)
    for k in range(4):
        rate.assign(SCHEDULE(k))
        ref_opt.apply(_grads(k, sparse=True), ref_params)
        opt.apply(_grads(k, sparse=True), params)
    for p, ref in zip(params, ref_params):
        np.testing.assert_allclose(p.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_schedule_is_evaluated_in_every_call_of_one_trace():
    w = tf.Variable([0.0])
    opt = snt.optimizers.SGD(schedules.PiecewiseConstant([1, 3], [1.0, 0.1, 0.01]))
    traces = []

    @tf.function
    def train(g: tf.Tensor) -> None:
        traces.append(1)
        opt.apply([g], [w])

    values = []
    for _ in range(5):
        before = w.numpy()[0]
        train(tf.constant([-1.0]))
        values.append(w.numpy()[0] - before)
    assert len(traces) == 1
    np.testing.assert_allclose(values, [1.0, 0.1, 0.1, 0.01, 0.01], rtol=1e-6)
    assert int(opt.step) == 5


def test_step_counts_applies_and_the_schedule_sees_it_before_the_increment():
    seen = []

    def schedule(step: tf.Tensor) -> float:
        seen.append(int(step))
        return 0.1

    for opt in (snt.optimizers.SGD(schedule), snt.optimizers.Adam(schedule)):
        seen.clear()
        assert opt.step.dtype == tf.int64 and int(opt.step) == 0
        w = tf.Variable([1.0])
        for _ in range(3):
            opt.apply([tf.constant([1.0])], [w])
        assert seen == [0, 1, 2] and int(opt.step) == 3


def test_plain_rates_keep_the_original_variables():
    # Without a schedule nothing changes: no `step` where 2.0.2 had none.
    for opt in (
        snt.optimizers.SGD(0.1),
        snt.optimizers.Momentum(0.1, 0.9),
        snt.optimizers.RMSProp(0.1),
    ):
        assert not hasattr(opt, "step")
    assert snt.optimizers.SGD(0.1).learning_rate == 0.1


def test_optimizer_stores_the_schedule_and_shows_it_in_repr():
    schedule = schedules.CosineDecay(0.1, 10)
    opt = snt.optimizers.Momentum(schedule, 0.9)
    assert opt.learning_rate is schedule
    assert repr(opt) == (
        "Momentum(\n"
        "    learning_rate=CosineDecay(init_value=0.1, decay_steps=10),\n"
        "    momentum=0.9,\n"
        ")"
    )
    assert [v.name for v in tf.Module.variables.fget(opt)] == ["momentum/t:0"]


def test_any_callable_is_a_schedule():
    w = tf.Variable([1.0, 1.0], dtype=tf.float64)
    opt = snt.optimizers.SGD(lambda step: 0.5 / tf.cast(step + 1, tf.float32))
    for _ in range(2):
        opt.apply([tf.constant([1.0, 2.0], tf.float64)], [w])
    np.testing.assert_allclose(w.numpy(), [1 - 0.75, 1 - 1.5])
    constant = snt.optimizers.Adam(lambda step: np.float32(0.001))
    v = tf.Variable([1.0])
    constant.apply([tf.constant([5.0])], [v])
    np.testing.assert_allclose(v.numpy(), [0.999], rtol=1e-6)


def _checkpoint_keys(opt: snt.Optimizer, tmp_path: Any, name: str) -> list[str]:
    w = tf.Variable([1.0])
    opt.apply([tf.constant([1.0])], [w])
    path = tf.train.Checkpoint(opt=opt).write(str(tmp_path / name))
    return sorted(k for k, _ in tf.train.list_variables(path) if k.startswith("opt/"))


def test_checkpoint_object_graph_holds_no_rate(tmp_path):
    for make in (
        lambda lr: snt.optimizers.Adam(lr),
        lambda lr: snt.optimizers.AdamW(lr),
    ):
        scheduled = _checkpoint_keys(make(SCHEDULE), tmp_path, "scheduled")
        assert scheduled == _checkpoint_keys(make(0.1), tmp_path, "float")
        with_variable = _checkpoint_keys(make(tf.Variable(0.1)), tmp_path, "var")
        assert set(with_variable) - set(scheduled) == {
            "opt/learning_rate/.ATTRIBUTES/VARIABLE_VALUE"
        }
    # Optimizers without a step of their own gain one, and only it.
    keys = _checkpoint_keys(snt.optimizers.SGD(SCHEDULE), tmp_path, "sgd")
    assert keys == ["opt/step/.ATTRIBUTES/VARIABLE_VALUE"]
    keys = _checkpoint_keys(snt.optimizers.RMSProp(SCHEDULE), tmp_path, "rms")
    assert keys == sorted(
        ["opt/step/.ATTRIBUTES/VARIABLE_VALUE"]
        + [f"opt/{s}/0/.ATTRIBUTES/VARIABLE_VALUE" for s in ("mom", "ms")]
    )


@pytest.mark.parametrize("make", [o[1] for o in OPTIMIZERS], ids=OPTIMIZER_IDS)
def test_restored_optimizer_continues_the_schedule(make, tmp_path):
    params, opt = _params(), make(SCHEDULE)
    for k in range(3):
        opt.apply(_grads(k, sparse=False), params)
    path = tf.train.Checkpoint(params=params, opt=opt).write(str(tmp_path / "c"))
    for k in range(3, 7):
        opt.apply(_grads(k, sparse=False), params)
    restored_params, restored = _params(), make(SCHEDULE)
    status = tf.train.Checkpoint(params=restored_params, opt=restored).read(path)
    apply = tf.function(restored.apply)
    for k in range(3, 7):
        apply(_grads(k, sparse=False), restored_params)
    status.assert_consumed()
    assert int(restored.step) == 7
    for p, ref in zip(restored_params, params):
        np.testing.assert_allclose(p.numpy(), ref.numpy(), rtol=1e-6, atol=1e-7)


def test_schedule_under_replicator_counts_per_replica():
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    replicator = snt.distribute.Replicator(devices)
    schedule = schedules.PiecewiseConstant([1], [1.0, 0.5])
    with replicator.scope():
        w = tf.Variable([0.0])
        opt = snt.optimizers.SGD(schedule)

    @tf.function
    def train() -> None:
        replicator.run(lambda: opt.apply([tf.constant([-1.0])], [w]))

    train()
    train()
    for value in replicator.experimental_local_results(w):
        np.testing.assert_allclose(value.numpy(), [1.5])
    for step in replicator.experimental_local_results(opt.step):
        assert int(step) == 2


@pytest.mark.parametrize(
    "value,fragment",
    [
        (
            schedules.CosineDecay,
            "`learning_rate` must be a real number, a scalar tensor, a `tf.Variable` "
            "or a schedule",
        ),
        (snt.Linear, "`learning_rate` must be a real number"),
    ],
)
def test_a_class_is_not_a_schedule(value, fragment):
    for cls in (snt.optimizers.SGD, snt.optimizers.Adam):
        with pytest.raises(TypeError, match=fragment):
            cls(value)


@pytest.mark.parametrize(
    "rate,error,fragment",
    [
        (tf.constant([0.1, 0.2]), ValueError, r"`learning_rate\(step\)` must be a "),
        (tf.constant("fast"), TypeError, r"`learning_rate\(step\)` must be a real"),
        ("fast", TypeError, r"`learning_rate\(step\)` must be a real number"),
        (None, TypeError, r"`learning_rate\(step\)` must be a real number"),
        (float("nan"), ValueError, r"`learning_rate\(step\)` must be finite"),
    ],
)
@pytest.mark.parametrize("make", [o[1] for o in OPTIMIZERS], ids=OPTIMIZER_IDS)
def test_bad_schedule_results_raise_and_change_nothing(make, rate, error, fragment):
    opt = make(lambda step: rate)
    params = _params()
    before = [p.numpy() for p in params]
    with pytest.raises(error, match=fragment):
        opt.apply(_grads(0, sparse=False), params)
    assert int(opt.step) == 0
    for p, value in zip(params, before):
        np.testing.assert_array_equal(p.numpy(), value)
