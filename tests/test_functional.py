"""Tests for `snt.functional` (TensorVariable, transforms, JAX-style helpers)."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import sonnet as snt
from sonnet._src.functional.tensor_variable import TensorVariable
from tests.conformance import bad_input

F = snt.functional


def tensor_variable(value, **kwargs) -> TensorVariable:
    with F.variables():
        v = tf.Variable(value, **kwargs)
    assert isinstance(v, TensorVariable)
    return v


def by_name(d) -> dict[str, list]:
    return {k.deref().name: np.asarray(v).tolist() for k, v in d.items()}


# ---------------------------------------------------------------------------
# TensorVariable.


def test_variables_scope_creates_tensor_variables():
    with F.variables():
        with tf.name_scope("foo"):
            v = tf.Variable(1.0, name="bar")
        w = tf.Variable(lambda: tf.zeros([2, 3]), trainable=False)
        x = tf.Variable([1, 2], dtype=tf.float64)
        y = tf.Variable(tf.zeros([2]), shape=tf.TensorShape([None]))
    real = tf.Variable(1.0)
    assert isinstance(v, TensorVariable) and isinstance(v, tf.Variable)
    assert not isinstance(real, TensorVariable)
    assert v.name == "foo/bar:0" and v.trainable
    assert w.name == "Variable:0" and not w.trainable
    assert w.shape == [2, 3] and w.dtype == tf.float32
    assert x.dtype == tf.float64
    assert y.shape.as_list() == [None]
    assert repr(w) == "TensorVariable(shape=[2, 3], dtype=float32, name='Variable:0')"
    assert v.device == tf.convert_to_tensor(1.0).device
    assert v.synchronization == tf.VariableSynchronization.AUTO
    assert v.aggregation == tf.VariableAggregation.NONE
    assert v.constraint is None
    assert float(v.initial_value) == 1.0


def test_module_variables_are_tensor_variables():
    with F.variables():
        mod = snt.Linear(2)
        mod(tf.ones([1, 3]))
    assert [type(v) for v in mod.variables] == [TensorVariable, TensorVariable]
    assert sorted(v.name for v in mod.variables) == ["linear/b:0", "linear/w:0"]


def test_reads_and_conversion():
    v = tensor_variable([[1.0, 2.0], [3.0, 4.0]])
    assert tf.convert_to_tensor(v).numpy().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert (v + 1).numpy().tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert (2 * v - v / 2).numpy().tolist() == [[1.5, 3.0], [4.5, 6.0]]
    assert tf.matmul(v, v).numpy().tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert v[1, 0].numpy() == 3.0
    assert v.numpy().tolist() == np.asarray(v).tolist()
    assert v.read_value().numpy().tolist() == v.value().numpy().tolist()
    assert v.sparse_read([1]).numpy().tolist() == [[3.0, 4.0]]
    assert v.gather_nd([[0, 1]]).numpy().tolist() == [2.0]
    assert v.initialized_value().shape == [2, 2]
    assert v.eval().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert v.get_shape() == [2, 2]


def test_conversion_dtype_mismatch():
    v = tensor_variable(1.0)
    with pytest.raises(TypeError, match="`dtype`.*Received"):
        tf.convert_to_tensor(v, dtype=tf.int32)


def test_read_without_value_raises_clear_error():
    v = tensor_variable(1.0, name="v")
    v.tensor_value = None
    for read in (
        v.numpy,
        v.read_value,
        lambda: v + 1,
        lambda: tf.convert_to_tensor(v),
        lambda: v.assign_add(1.0),
    ):
        with pytest.raises(ValueError, match="'v:0' has no value"):
            read()
    # Metadata needs no value.
    assert v.shape == [] and v.dtype == tf.float32 and v.name == "v:0"
    # Assigning gives it one again.
    v.assign(2.0)
    assert float(v) == 2.0


def test_assign_methods():
    v = tensor_variable([1.0, 2.0])
    out = v.assign([3.0, 4.0])
    assert out.numpy().tolist() == [3.0, 4.0]
    assert v.assign_add([1.0, 1.0]).numpy().tolist() == [4.0, 5.0]
    assert v.assign_sub([2.0, 2.0]).numpy().tolist() == [2.0, 3.0]
    assert v.assign([0.0, 0.0], read_value=False) is None
    assert v.numpy().tolist() == [0.0, 0.0]
    assert v.initial_tensor_value.numpy().tolist() == [1.0, 2.0]


def test_assign_checks_shape_and_dtype():
    v = tensor_variable([1.0, 2.0])
    # The original's TensorVariable took any shape; the ops that then met it
    # failed (`InvalidArgumentError`).
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        v.assign([1.0, 2.0, 3.0])
    assert isinstance(info.value, ValueError)
    assert re.search("`value`.*shape \\[2\\].*Received", str(info.value))
    # Conversion errors keep TF's class, as in the original.
    with pytest.raises(ValueError, match="`value`.*float32.*Received"):
        v.assign(tf.constant([1, 2]))
    with pytest.raises(TypeError, match="`delta`.*Received"):
        v.assign_add("x")
    assert v.numpy().tolist() == [1.0, 2.0]


def test_assign_none_clears_the_value():
    v = tensor_variable([1.0, 2.0], name="v")
    assert v.assign(None) is None
    assert v.tensor_value is None
    with pytest.raises(ValueError, match="'v:0' has no value"):
        v.numpy()
    assert v.assign([3.0, 4.0]).numpy().tolist() == [3.0, 4.0]


def test_trainable_by_truth_value():
    assert TensorVariable(1.0, trainable=1).trainable is True
    assert TensorVariable(1.0, trainable=np.bool_(False)).trainable is False
    assert tensor_variable(1.0, trainable=0).trainable is False
    with pytest.raises(TypeError, match="`trainable`.*Received"):
        TensorVariable(1.0, trainable="yes")


def test_scatter_methods():
    v = tensor_variable([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    rows = tf.IndexedSlices(tf.constant([[1.0, 1.0], [5.0, 5.0]]), tf.constant([0, 2]))
    assert v.scatter_sub(rows).numpy().tolist() == [[0, 0], [2, 2], [-2, -2]]
    assert v.scatter_add(rows).numpy().tolist() == [[1, 1], [2, 2], [3, 3]]
    assert v.scatter_max(rows).numpy().tolist() == [[1, 1], [2, 2], [5, 5]]
    assert v.scatter_min(rows).numpy().tolist() == [[1, 1], [2, 2], [5, 5]]
    assert v.scatter_update(rows).numpy().tolist() == [[1, 1], [2, 2], [5, 5]]
    new = v.scatter_nd_add([[1, 0]], [10.0])
    assert new.numpy().tolist() == [[1, 1], [12, 2], [5, 5]]
    assert v.scatter_nd_sub([[1, 0]], [10.0]).numpy()[1].tolist() == [2, 2]
    assert v.scatter_nd_update([[0, 0]], [7.0]).numpy()[0].tolist() == [7, 1]
    assert v.numpy()[0].tolist() == [7, 1]
    with pytest.raises(TypeError, match="`sparse_delta`.*Received"):
        v.scatter_sub(tf.ones([3, 2]))


@pytest.mark.parametrize(
    "method",
    ["scatter_mul", "scatter_div", "batch_scatter_update", "count_up_to", "load"],
)
def test_unsupported_methods(method):
    v = tensor_variable([1.0])
    with pytest.raises(NotImplementedError, match=f"{method}.*Received"):
        getattr(v, method)(None)


def test_to_proto_unsupported():
    with pytest.raises(NotImplementedError, match="to_proto"):
        tensor_variable(1.0).to_proto()


def test_set_shape():
    v = tensor_variable(tf.zeros([2]), shape=tf.TensorShape([None]))
    v.set_shape([2])
    assert v.shape == [2]
    with pytest.raises(ValueError, match="`shape`.*Received"):
        v.set_shape([3])


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"initial_value": object()}, TypeError, "initial_value"),
        ({"initial_value": 1.0, "trainable": "yes"}, TypeError, "trainable"),
        ({"initial_value": 1.0, "name": 3}, TypeError, "name"),
        ({"initial_value": [1.0], "shape": [2]}, ValueError, "shape"),
    ],
)
def test_constructor_errors(kwargs, error, argument):
    with pytest.raises(error, match=f"`{argument}`.*Received"):
        TensorVariable(**kwargs)


def test_direct_construction_defaults():
    v = TensorVariable(tf.ones([2]))
    assert v.name == "Variable:0" and v.trainable
    assert TensorVariable(1.0, name="w").name == "w:0"


# ---------------------------------------------------------------------------
# transform_with_state / transform / without_state.


def test_ema_example():
    with F.variables():
        ema = snt.ExponentialMovingAverage(0.5)
    f = F.transform_with_state(ema)
    assert isinstance(f, tuple) and f._fields == ("init", "apply")
    params, state = f.init(3.0)
    assert params == {}
    assert by_name(state) == {
        "exponential_moving_average/counter:0": 0,
        "exponential_moving_average/hidden:0": 0.0,
        "exponential_moving_average/average:0": 0.0,
    }
    y, state = f.apply(params, state, 3.0)
    assert float(y) == 3.0
    assert by_name(state)["exponential_moving_average/counter:0"] == 1
    y, state = f.apply(params, state, 6.0)
    assert float(y) == 5.0
    # Pre-existing variables are back to their values, new ones have none.
    assert int(ema._counter) == 0
    assert ema.average.tensor_value is None


def linear_setup():
    with F.variables():
        mod = snt.Linear(2, b_init=snt.initializers.RandomNormal())
    x = tf.random.normal([4, 3], seed=0)
    return mod, x


def test_linear_init_and_apply():
    mod, x = linear_setup()
    f = F.transform(mod)
    params = f.init(x)
    assert set(params) == {mod.w.ref(), mod.b.ref()}
    # After init the variables created by `f` have no value (initial value
    # included, as in the original)...
    assert mod.w.initial_tensor_value is None and mod.b.initial_tensor_value is None
    with pytest.raises(ValueError, match="has no value"):
        mod.w.numpy()
    # ... so a second `init`, which reads them, raises.
    with pytest.raises(ValueError, match="'linear/w:0' has no value"):
        f.init(x)
    w, b = params[mod.w.ref()].numpy(), params[mod.b.ref()].numpy()
    out = f.apply(params, x)
    np.testing.assert_allclose(out.numpy(), x.numpy() @ w + b, rtol=1e-6, atol=1e-6)
    doubled = {k: 2 * v for k, v in params.items()}
    np.testing.assert_allclose(
        f.apply(doubled, x).numpy(), 2 * (x.numpy() @ w + b), rtol=1e-6, atol=1e-6
    )
    assert mod.w.tensor_value is None and mod.b.tensor_value is None


def test_init_returns_initial_values_of_existing_variables():
    v = tensor_variable(1.0)
    v.assign(5.0)
    f = F.transform(lambda: v * 2)
    # The original returned `initial_tensor_value`, not the current value.
    assert by_name(f.init()) == {"Variable:0": 1.0}
    assert float(v) == 5.0 and float(v.initial_tensor_value) == 1.0
    assert float(f.apply({v.ref(): tf.constant(3.0)})) == 6.0
    assert float(v) == 5.0


def test_init_discards_output_and_assignments():
    v = tensor_variable(1.0)

    def f():
        v.assign(10.0)
        return "ignored"

    params, state = F.transform_with_state(f).init()
    assert by_name(params) == {"Variable:0": 1.0}
    assert state == {}
    assert float(v) == 1.0


def test_apply_new_state_and_restore():
    counter = tensor_variable(0, trainable=False, name="counter")
    scale = tensor_variable(2.0, name="scale")

    def f(x):
        counter.assign_add(1)
        return x * scale

    t = F.transform_with_state(f)
    params, state = t.init(1.0)
    assert by_name(params) == {"scale:0": 2.0}
    assert by_name(state) == {"counter:0": 0}
    out, state = t.apply({scale.ref(): tf.constant(3.0)}, state, 2.0)
    assert float(out) == 6.0
    assert by_name(state) == {"counter:0": 1}
    out, state = t.apply(params, state, 2.0)
    assert by_name(state) == {"counter:0": 2}
    assert int(counter) == 0 and float(scale) == 2.0


def test_apply_restores_variables_when_f_raises():
    v = tensor_variable(1.0)

    def f():
        v.assign(100.0)
        raise RuntimeError("boom")

    t = F.transform_with_state(lambda: v + 0)
    params, state = t.init()
    failing = F.transform_with_state(f)
    with pytest.raises(RuntimeError):
        failing.apply({v.ref(): tf.constant(7.0)}, state)
    assert float(v) == 1.0
    assert params


def test_variables_created_in_init_have_no_value_afterwards():
    mod = snt.Bias()
    f = F.transform(mod)
    params = f.init(tf.ones([1, 1]))
    assert mod.b.tensor_value is None and mod.b.initial_tensor_value is None
    assert f.apply(params, tf.ones([1, 1])).numpy().tolist() == [[1.0]]
    assert mod.b.tensor_value is None and mod.b.initial_tensor_value is None


def test_second_init_reading_variables_of_the_first_raises():
    def f(model):
        if not model:
            model.append(tf.Variable(1.0))
            model.append(tf.Variable(1.0, trainable=False))
        return sum(model)

    f = F.transform_with_state(f)
    model = []
    params, state = f.init(model)
    assert len(params) == 1 and len(state) == 1
    with pytest.raises(ValueError, match="TensorVariable .* has no value"):
        f.init(model)


def test_apply_cannot_create_variables():
    with F.variables():
        mod = snt.Linear(2)
    f = F.transform(mod)
    with pytest.raises(ValueError, match="`apply` cannot create variables.*linear"):
        f.apply({}, tf.ones([1, 2]))
    with pytest.raises(ValueError, match="cannot create"):
        F.transform(lambda: tf.Variable(1.0)).apply({})


def test_apply_missing_params_is_a_clear_error():
    mod, x = linear_setup()
    f = F.transform(mod)
    params = f.init(x)
    partial = {mod.w.ref(): params[mod.w.ref()]}
    with pytest.raises(ValueError, match="'linear/b:0' has no value"):
        f.apply(partial, x)
    assert mod.w.tensor_value is None


def test_apply_bad_params():
    mod, x = linear_setup()
    f = F.transform(mod)
    params = f.init(x)
    # The original failed on `.items()` / `.deref()` (`AttributeError`).
    for bad in ([1.0], None, {"w": 1.0}):
        with pytest.raises(AttributeError):
            f.apply(bad, x)
    with pytest.raises(TypeError, match="`params`.*Received"):
        f.apply([1.0], x)
    with pytest.raises(TypeError, match="`params`.*Received"):
        f.apply({"w": 1.0}, x)
    with pytest.raises(TypeError, match="`params`.*Received"):
        f.apply({tf.Variable(1.0).ref(): 1.0}, x)
    with pytest.raises(TypeError, match="`state`.*Received"):
        F.transform_with_state(mod).apply(params, None, x)
    wrong = dict(params)
    wrong[mod.w.ref()] = tf.zeros([5, 5])
    with pytest.raises(ValueError, match="`value`.*Received"):
        f.apply(wrong, x)
    assert mod.w.tensor_value is None and mod.b.tensor_value is None


def test_transform_rejects_state():
    with F.variables():
        ema = snt.ExponentialMovingAverage(0.5)
    f = F.transform(ema)
    with pytest.raises(ValueError, match="transform_with_state.*Received"):
        f.init(1.0)
    # `apply` passes no state, and (as in the original) does not look at the
    # variables the function uses besides the parameters it is given: those
    # are restored, the others keep what the function did to them.
    counter = tensor_variable(0, trainable=False, name="counter")
    scale = tensor_variable(2.0, name="scale")

    def g(x):
        counter.assign_add(1)
        return x * scale

    stateless = F.without_state(F.transform_with_state(g))
    assert float(stateless.apply({scale.ref(): tf.constant(3.0)}, 1.0)) == 3.0
    assert int(counter) == 1 and float(scale) == 2.0
    # A pair whose `apply` returns state is refused.
    counter_ref = counter.ref()
    with_state = F.transform_with_state(lambda: None)._replace(
        apply=lambda p, s: (1.0, {counter_ref: 0})
    )
    with pytest.raises(ValueError, match="transform_with_state.*Received.*counter"):
        F.without_state(with_state).apply({})


def test_without_state_on_a_custom_pair():
    pair = F.transform_with_state(lambda x: x + 1)
    f = F.without_state(with_state=pair)  # The original's argument name.
    assert f._fields == ("init", "apply")
    assert f.init(1.0) == {}
    assert f.apply({}, 1.0) == 2.0


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: F.transform(3), "f"),
        (lambda: F.transform_with_state(None), "f"),
        (lambda: F.without_state(lambda: 1), "with_state"),
        (lambda: F.without_state((1, 2)), "with_state"),
    ],
)
def test_transform_bad_arguments(call, argument):
    with pytest.raises(TypeError, match=f"`{argument}`.*Received"):
        call()


def test_gradients_through_apply_match_stateful():
    mod, x = linear_setup()
    f = F.transform(mod)
    params = f.init(x)

    def loss(p, x):
        return tf.reduce_sum(tf.square(f.apply(p, x)))

    value, grads = F.value_and_grad(loss)(params, x)
    real = snt.Linear(2)
    real(x)
    real.w.assign(params[mod.w.ref()])
    real.b.assign(params[mod.b.ref()])
    with tf.GradientTape() as tape:
        expected = tf.reduce_sum(tf.square(real(x)))
    dw, db = tape.gradient(expected, [real.w, real.b])
    np.testing.assert_allclose(value.numpy(), expected.numpy(), rtol=1e-6)
    np.testing.assert_allclose(grads[mod.w.ref()].numpy(), dw.numpy(), rtol=1e-5)
    np.testing.assert_allclose(grads[mod.b.ref()].numpy(), db.numpy(), rtol=1e-5)


def test_jit_apply_matches_eager():
    mod, x = linear_setup()
    f = F.transform(mod)
    params = f.init(x)
    jitted = F.jit(f.apply)
    np.testing.assert_allclose(
        jitted(params, x).numpy(), f.apply(params, x).numpy(), rtol=1e-6
    )
    doubled = {k: 2 * v for k, v in params.items()}
    np.testing.assert_allclose(
        jitted(doubled, x).numpy(), f.apply(doubled, x).numpy(), rtol=1e-6
    )
    assert mod.w.tensor_value is None


def test_mlp_training_loop_reduces_loss():
    with F.variables():
        mlp = snt.nets.MLP([8, 1])
    x = tf.random.normal([16, 4], seed=2)
    y = tf.reduce_sum(x, axis=1, keepdims=True)
    f = F.transform(mlp)
    params = f.init(x)
    opt = F.adam(0.05)
    opt_state = opt.init(params)

    def loss(p):
        return tf.reduce_mean(tf.square(f.apply(p, x) - y))

    @F.jit
    def step(p, s):
        value, grads = F.value_and_grad(loss)(p)
        p, s = opt.apply(s, grads, p)
        return value, p, s

    first, params, opt_state = step(params, opt_state)
    for _ in range(30):
        last, params, opt_state = step(params, opt_state)
    assert float(last) < 0.5 * float(first)


# ---------------------------------------------------------------------------
# JAX-style helpers.


def test_device_put_and_get():
    tree = {"a": tf.ones([2]), "b": [np.zeros([1]), 3.0]}
    put = F.device_put(tree, "/device:CPU:0")
    assert all(isinstance(t, tf.Tensor) for t in tf.nest.flatten(put))
    assert put["a"].device.endswith("CPU:0")
    got = F.device_get({"x": put["a"], "y": "text", "z": tf.Variable(2.0)})
    assert isinstance(got["x"], np.ndarray) and got["x"].tolist() == [1.0, 1.0]
    assert got["y"] == "text" and got["z"] == 2.0
    assert F.device_put(1.0).numpy() == 1.0


def test_device_errors():
    # `tf.device` raised `ValueError` in the original.
    with pytest.raises(ValueError, match="`device`.*Received"):
        F.device_put(1.0, 3)
    with pytest.raises(TypeError, match="`t`.*Received"):
        F.device_put(object())

    @tf.function
    def symbolic(x):
        return F.device_get(x)

    with pytest.raises(TypeError, match="`t`.*symbolic.*Received"):
        symbolic(tf.ones([1]))


def test_jit_traces_once_and_matches():
    traces = []

    def f(x, scale):
        traces.append(1)
        return x * scale

    jitted = F.jit(f, device="/device:CPU:0")
    x = tf.ones([2])
    assert jitted(x, 2.0).numpy().tolist() == [2.0, 2.0]
    assert jitted(x + 1, 2.0).numpy().tolist() == [4.0, 4.0]
    assert jitted(np.ones([2], np.float32), 2.0).numpy().tolist() == [2.0, 2.0]
    assert len(traces) == 1
    assert jitted.__name__ == "f"
    assert F.jit(f)(x, 3.0).numpy().tolist() == [3.0, 3.0]


def test_jit_bad_arguments():
    # `tf.function` raised `ValueError`; a bad device an `AttributeError`.
    with pytest.raises(ValueError, match="`f`.*Received"):
        F.jit(3)
    with pytest.raises(TypeError, match="`device`.*Received") as info:
        F.jit(lambda: 1, device=0)
    assert isinstance(info.value, AttributeError)


def test_jit_and_grad_of_a_module_under_strict_autograph(monkeypatch):
    # The wrappers do not point AutoGraph (via `__wrapped__`) at the module.
    monkeypatch.setenv("AUTOGRAPH_STRICT_CONVERSION", "1")
    mod = snt.Linear(2, w_init=snt.initializers.Ones())
    x = tf.ones([1, 3])
    assert F.jit(mod)(x).numpy().tolist() == [[3.0, 3.0]]

    def loss(x):
        return tf.reduce_sum(mod(x))

    grads = tf.function(F.grad(loss))(x)
    assert grads.numpy().tolist() == [[2.0, 2.0, 2.0]]
    assert tf.function(F.grad(mod))(x).shape == [1, 3]
    assert tf.function(F.value_and_grad(mod))(x)[0].shape == [1, 2]


def test_value_and_grad_argnums():
    def f(x, y, z):
        return x * x * y + z

    value, g = F.value_and_grad(f)(3.0, 2.0, 1.0)
    assert float(value) == 19.0 and float(g) == 12.0
    _, (gx, gz) = F.value_and_grad(f, argnums=(0, 2))(3.0, 2.0, 1.0)
    assert (float(gx), float(gz)) == (12.0, 1.0)
    _, g = F.value_and_grad(f, argnums={"y": 1, "x": [0]})(3.0, 2.0, 1.0)
    assert float(g["y"]) == 9.0 and float(g["x"][0]) == 12.0
    _, g = F.value_and_grad(f, argnums=-1)(3.0, 2.0, tf.constant(1.0))
    assert float(g) == 1.0


def test_value_and_grad_nests_and_unused():
    def f(p):
        return tf.reduce_sum(p["a"] * 2.0)

    params = {"a": tf.ones([2]), "b": tf.ones([3])}
    value, grads = F.value_and_grad(f)(params)
    assert float(value) == 4.0
    assert grads["a"].numpy().tolist() == [2.0, 2.0]
    assert grads["b"] is None


def test_value_and_grad_has_aux_and_grad():
    def f(x):
        return x * x, {"aux": x + 1}

    (value, aux), g = F.value_and_grad(f, has_aux=True)(3.0)
    assert float(value) == 9.0 and float(aux["aux"]) == 4.0 and float(g) == 6.0
    g, aux = F.grad(f, has_aux=True)(3.0)
    assert float(g) == 6.0 and float(aux["aux"]) == 4.0
    assert float(F.grad(lambda x: x**3)(2.0)) == 12.0


def test_value_and_grad_does_not_watch_variables():
    v = tf.Variable(2.0)
    _, g = F.value_and_grad(lambda x: x * v)(3.0)
    assert float(g) == 2.0
    _, g = F.value_and_grad(lambda w: w * 3.0)(v)
    assert float(g) == 3.0


def test_value_and_grad_argument_spellings():
    def f(x, y):
        return x * y

    for argnums in (False, np.int64(0), tf.constant(0), np.array(0)):
        assert float(F.grad(f, argnums=argnums)(3.0, 2.0)) == 2.0
    x, y = tf.constant(3.0), tf.constant(2.0)
    assert F.grad(f, argnums=())(x, y) == ()
    assert F.grad(f, argnums=[])(x, y) == []
    for has_aux in (1, np.bool_(True), tf.constant(True)):
        g, aux = F.grad(lambda x: (x * x, "aux"), has_aux=has_aux)(3.0)
        assert float(g) == 6.0 and aux == "aux"
    for has_aux in (0, None):
        assert float(F.grad(lambda x: x * x, has_aux=has_aux)(3.0)) == 6.0
    # As with `tf.GradientTape`: no gradient for integer tensors.
    assert F.grad(lambda x: x * 2)(tf.constant(1)) is None


def test_value_and_grad_errors():
    with pytest.raises(TypeError, match="`f`.*Received"):
        F.value_and_grad(None)
    with pytest.raises(TypeError, match="`argnums`.*Received"):
        F.value_and_grad(lambda x: x, argnums="0")
    with pytest.raises(TypeError, match="`argnums`.*Received"):
        F.value_and_grad(lambda x: x, argnums=1.5)
    with pytest.raises(TypeError, match="`has_aux`.*Received"):
        F.value_and_grad(lambda x: x, has_aux="yes")
    # The original indexed the arguments (`IndexError`).
    with pytest.raises(ValueError, match="`argnums`.*Received") as info:
        F.value_and_grad(lambda x: x, argnums=1)(1.0)
    assert isinstance(info.value, IndexError)
    # What `tape.watch` raised in the original.
    with pytest.raises(ValueError, match="`argnums`.*Received"):
        F.value_and_grad(lambda x: x)("text")
    with pytest.raises(ValueError, match="`argnums`.*Received"):
        F.value_and_grad(lambda x: x)(True)
    with pytest.raises(TypeError, match="`has_aux`.*Received"):
        F.value_and_grad(lambda x: x, has_aux=True)(1.0)
    with pytest.raises(ValueError, match="`has_aux`.*Received"):
        F.grad(lambda x: (x, x, x), has_aux=True)(1.0)


# ---------------------------------------------------------------------------
# Functional optimizers.

OPTIMIZERS = [
    ("sgd", snt.optimizers.SGD, {"learning_rate": 0.1}),
    ("momentum", snt.optimizers.Momentum, {"learning_rate": 0.1, "momentum": 0.9}),
    (
        "momentum",
        snt.optimizers.Momentum,
        {"learning_rate": 0.1, "momentum": 0.5, "use_nesterov": True},
    ),
    ("adam", snt.optimizers.Adam, {"learning_rate": 0.01}),
    ("rmsprop", snt.optimizers.RMSProp, {"learning_rate": 0.01}),
    (
        "rmsprop",
        snt.optimizers.RMSProp,
        {"learning_rate": 0.01, "momentum": 0.9, "centered": True},
    ),
]


@pytest.mark.parametrize(("name", "cls", "kwargs"), OPTIMIZERS)
def test_optimizers_match_stateful(name, cls, kwargs):
    rng = np.random.default_rng(0)
    values = [rng.normal(size=[3, 2]).astype(np.float32), np.float32([1.0, -2.0])]
    steps = [
        [rng.normal(size=v.shape).astype(np.float32) for v in values] for _ in range(4)
    ]
    real = [tf.Variable(v, name=f"p{i}") for i, v in enumerate(values)]
    # Functional params keyed like `transform`'s, by (named) variables.
    keys = [tensor_variable(v, name=f"p{i}").ref() for i, v in enumerate(values)]
    params = {k: tf.constant(v) for k, v in zip(keys, values)}
    stateful = cls(**kwargs)
    functional = getattr(F, name)(**kwargs)
    opt_state = functional.init(params)
    for step in steps:
        stateful.apply([tf.constant(g) for g in step], real)
        updates = {k: tf.constant(g) for k, g in zip(keys, step)}
        params, opt_state = functional.apply(opt_state, updates, params)
        assert set(params) == set(keys)
        for k, r in zip(keys, real):
            np.testing.assert_allclose(
                params[k].numpy(), r.numpy(), rtol=1e-6, atol=1e-7
            )
    expected = {v.name: v.numpy() for v in stateful.variables} if name != "sgd" else {}
    got = {k.deref().name: np.asarray(v) for k, v in opt_state.items()}
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-6, atol=1e-7)


def test_optimizer_with_transformed_params():
    mod, x = linear_setup()
    params = F.transform(mod).init(x)
    adam = F.adam(0.1)
    state = adam.init(params)
    assert sorted(by_name(state)) == [
        "adam/m/linear/b:0",
        "adam/m/linear/w:0",
        "adam/t:0",
        "adam/v/linear/b:0",
        "adam/v/linear/w:0",
    ]
    assert all(not np.any(np.asarray(v)) for v in state.values())
    grads = {k: tf.ones_like(v) for k, v in params.items()}
    new_params, new_state = adam.apply(state, grads, params)
    assert set(new_params) == set(params)
    for k in params:
        np.testing.assert_allclose(
            new_params[k].numpy(), params[k].numpy() - 0.1, rtol=1e-5, atol=1e-6
        )
    assert by_name(new_state)["adam/t:0"] == 1
    # The optimizer's own variables carry no state between calls.
    assert by_name(adam.init(params))["adam/t:0"] == 0


def test_optimizer_sparse_and_none_updates():
    values = np.arange(6, dtype=np.float32).reshape([3, 2])
    real = [tf.Variable(values), tf.Variable([1.0])]
    stateful = snt.optimizers.Adam(0.1)
    functional = F.adam(0.1)
    params = [tf.constant(values), tf.constant([1.0])]
    state = functional.init(params)
    sparse = tf.IndexedSlices(
        tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([2, 0])
    )
    stateful.apply([sparse, None], real)
    params, state = functional.apply(state, [sparse, None], params)
    np.testing.assert_allclose(params[0].numpy(), real[0].numpy(), rtol=1e-6)
    assert params[1].numpy().tolist() == [1.0]
    assert params[0].numpy()[1].tolist() == [2.0, 3.0]


def test_optimizer_jit_and_structure():
    sgd = F.sgd(learning_rate=0.5)
    params = {"a": tf.ones([2]), "b": [tf.constant(2.0)]}
    state = sgd.init(params)
    assert state == {}
    updates = {"a": tf.ones([2]), "b": [tf.constant(1.0)]}
    new, state = F.jit(sgd.apply)(state, updates, params)
    assert new["a"].numpy().tolist() == [0.5, 0.5]
    assert float(new["b"][0]) == 1.5


def test_optimizer_factory_signature():
    sig = inspect.signature(F.adam)
    assert list(sig.parameters) == [
        "learning_rate",
        "beta1",
        "beta2",
        "epsilon",
        "name",
    ]
    assert sig.parameters["learning_rate"].default == 0.001
    assert list(inspect.signature(F.momentum).parameters)[:2] == [
        "learning_rate",
        "momentum",
    ]
    assert F.optimizer(snt.optimizers.SGD)(0.1).init([tf.ones([1])]) == {}


@pytest.mark.parametrize("trainable", [True, False])
def test_optimizer_state_includes_variable_hyper_parameters(trainable):
    mod, x = linear_setup()
    params = F.transform(mod).init(x)
    with F.variables():
        lr = tf.Variable(0.01, trainable=trainable, name="lr")
    adam = F.adam(learning_rate=lr)
    state = adam.init(params)
    # The learning rate, the step and (m, v) per parameter, as in the original.
    assert len(state) == 6 and lr.ref() in state
    assert float(state[lr.ref()]) == pytest.approx(0.01)
    grads = {k: tf.ones_like(v) for k, v in params.items()}
    new_params, new_state = adam.apply(state, grads, params)
    assert set(new_state) == set(state) and set(new_params) == set(params)
    # A different learning rate in the state is the one used.
    state[lr.ref()] = tf.constant(0.0)
    same, _ = adam.apply(state, grads, params)
    for k in params:
        np.testing.assert_array_equal(same[k].numpy(), params[k].numpy())
    assert float(lr) == pytest.approx(0.01)


@pytest.mark.parametrize(("name", "cls", "kwargs"), OPTIMIZERS)
def test_optimizer_init_twice(name, cls, kwargs):
    del cls
    mod, x = linear_setup()
    params = F.transform(mod).init(x)
    opt = getattr(F, name)(**kwargs)
    first = opt.init(params)
    grads = {k: tf.ones_like(v) for k, v in params.items()}
    _, stepped = opt.apply(first, grads, params)
    again = opt.init(params)
    assert by_name(again) == by_name(first)
    if first:
        assert by_name(stepped) != by_name(first)


def test_optimizer_errors():
    with pytest.raises(TypeError, match="`cls`.*Received"):
        F.optimizer(snt.Linear)
    with pytest.raises(TypeError, match="`cls`.*Received"):
        F.optimizer("adam")
    # The optimizer's own argument checks apply.
    with pytest.raises(TypeError, match="`learning_rate`.*Received"):
        F.adam("x")
    sgd = F.sgd(0.1)
    params = [tf.ones([2]), tf.ones([1])]
    state = sgd.init(params)
    with pytest.raises(ValueError, match="`updates`.*Received"):
        sgd.apply(state, [tf.ones([2])], params)
    with pytest.raises(TypeError, match="`params`.*Received"):
        sgd.init([object()])
    with pytest.raises(TypeError, match="`params`.*nest.*Received"):
        sgd.init({1: tf.ones([1]), "a": tf.ones([1])})
    with pytest.raises(ValueError, match="updates\\[0\\].*Received"):
        sgd.apply(state, [tf.ones([3]), tf.ones([1])], params)


# ---------------------------------------------------------------------------
# Bad input fuzzing.


@settings(max_examples=25, deadline=None)
@given(value=bad_input.junk())
def test_junk_to_transforms_and_helpers(value):
    bad_input.outcome(lambda: F.transform_with_state(value), ["f"])
    bad_input.outcome(lambda: F.without_state(value), ["with_state"])
    bad_input.outcome(lambda: F.jit(lambda x: x, device=value), ["device"])
    bad_input.outcome(lambda: F.optimizer(value), ["cls"])
    bad_input.outcome(lambda: F.device_put(value), ["t"])
    bad_input.outcome(lambda: F.value_and_grad(lambda x: x, argnums=value), ["argnums"])
    bad_input.outcome(
        lambda: F.value_and_grad(lambda x: tf.nest.map_structure(tf.identity, x))(
            value
        ),
        ["argnums"],
    )


@settings(max_examples=25, deadline=None)
@given(
    initial_value=st.one_of(st.just(1.0), bad_input.junk()),
    trainable=st.one_of(st.just(True), bad_input.junk()),
    name=st.one_of(st.just("v"), bad_input.junk()),
    assigned=bad_input.junk(),
)
def test_junk_tensor_variable(initial_value, trainable, name, assigned):
    ok, v = bad_input.outcome(
        lambda: TensorVariable(initial_value, trainable=trainable, name=name),
        ["initial_value", "trainable", "name"],
    )
    if ok:
        before = v.numpy()
        done, _ = bad_input.outcome(lambda: v.assign(assigned), ["value"])
        if not done:
            np.testing.assert_array_equal(v.numpy(), before)


def test_jit_init_then_apply():
    mod, x = linear_setup()
    f = F.transform(mod)
    params = F.jit(f.init)(x)
    assert all(not tf.is_symbolic_tensor(v) for v in params.values())
    assert mod.w.initial_tensor_value is None and mod.w.tensor_value is None
    with pytest.raises(ValueError, match="(?s)has no value.*second `init`"):
        f.init(x)
    # `apply` (traced or not) restores what it was given, values and initial
    # values: nothing is left behind.
    w, b = params[mod.w.ref()].numpy(), params[mod.b.ref()].numpy()
    doubled = {k: 2 * v for k, v in params.items()}
    np.testing.assert_allclose(
        F.jit(f.apply)(doubled, x).numpy(), 2 * (x.numpy() @ w + b), rtol=1e-5
    )
    np.testing.assert_allclose(
        f.apply(params, x).numpy(), x.numpy() @ w + b, rtol=1e-6, atol=1e-6
    )
    assert mod.w.initial_tensor_value is None and mod.w.tensor_value is None


def test_user_code_keeps_autograph_inside_jit():
    # Tensor-dependent Python control flow in the transformed function and in
    # a differentiated function still works when traced.
    scale = tensor_variable(2.0, name="scale")

    def f(x):
        if tf.reduce_sum(x) > 0:
            return x * scale
        return -x * scale

    t = F.transform(f)
    params = t.init(tf.ones([2]))
    apply = F.jit(t.apply)
    assert apply(params, tf.ones([2])).numpy().tolist() == [2.0, 2.0]
    assert apply(params, -tf.ones([2])).numpy().tolist() == [2.0, 2.0]

    def loss(p, x):
        return tf.reduce_sum(t.apply(p, x))

    grad = F.jit(F.grad(loss))
    assert float(grad(params, tf.ones([2]))[scale.ref()]) == 2.0
    assert float(grad(params, -tf.ones([2]))[scale.ref()]) == 2.0
