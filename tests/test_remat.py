"""Tests for `snt.remat`: the plain call is the oracle.

Outputs and gradients (with respect to the inputs and to every variable)
must equal those of calling `f` itself, in every mode; that the backward
pass really recomputes instead of storing is measured by the bench
(`remat_memory`), and checked here only as "f runs again".
"""

from __future__ import annotations

import collections
import inspect
import pickle

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt

RTOL, ATOL = 1e-5, 1e-6


def _devices(n: int) -> list[str]:
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:n]]
    assert len(devices) == n, "conftest.py should configure 4 logical CPUs"
    return devices


def _close(actual, expected, rtol=RTOL, atol=ATOL):
    actual, expected = tf.nest.flatten(actual), tf.nest.flatten(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert (a is None) == (e is None)
        if a is not None:
            # A gradient may be `tf.IndexedSlices` in one and dense in the other.
            a, e = tf.convert_to_tensor(a), tf.convert_to_tensor(e)
            np.testing.assert_allclose(
                np.asarray(a, np.float64), np.asarray(e, np.float64), rtol, atol
            )


def _value_and_grads(f, module, x, **kwargs):
    """`f(x)`, and the gradients of a loss of it w.r.t. `x` and `module`'s
    trainable variables (created by the call if need be)."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x, **kwargs)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
    params = module.trainable_variables
    return y, tape.gradient(loss, [x, *params])


def _mlp():
    return snt.nets.MLP([16, 16, 5], activation=tf.tanh)


X = tf.random.stateless_normal([4, 8], seed=[0, 1])


# Eager ------------------------------------------------------------------------


def test_outputs_and_gradients_equal_the_plain_call():
    mlp = _mlp()
    expected = _value_and_grads(mlp, mlp, X)
    _close(_value_and_grads(snt.remat(mlp), mlp, X), expected)


@pytest.mark.parametrize("remat_first", [True, False])
def test_variables_created_by_the_first_call(remat_first):
    mlp = _mlp()
    calls = [snt.remat(mlp), mlp] if remat_first else [mlp, snt.remat(mlp)]
    first = _value_and_grads(calls[0], mlp, X)
    assert len(mlp.trainable_variables) == 6
    assert all(g is not None for g in first[1])
    _close(first, _value_and_grads(calls[1], mlp, X))


def test_the_backward_pass_calls_f_again():
    calls = []
    w = tf.Variable(2.0)

    def f(x):
        calls.append(None)
        return tf.sin(x * w)

    x = tf.constant([0.5, 1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = snt.remat(f)(x)
    assert len(calls) == 1
    grad_x, grad_w = tape.gradient(y, [x, w])
    assert len(calls) == 2
    _close([grad_x, grad_w], [2 * tf.cos(2 * x), tf.reduce_sum(x * tf.cos(2 * x))])


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf_function"])
def test_nested_remat_and_outputs_without_gradient(graph):
    w = tf.Variable(2.0)
    x = tf.constant([[1.0, 3.0, 2.0]])

    def run(remat):
        with tf.GradientTape() as tape:
            tape.watch(x)
            index = remat(lambda x: tf.argmax(x, axis=-1))(x)
            twice = remat(remat(lambda x: tf.sin(x * w)))(x)
            loss = tf.reduce_sum(twice)
        return index, twice, tape.gradient(loss, [x, w])

    def plain(f):
        return f

    if graph:
        run = tf.function(run)
    _close(run(snt.remat), run(plain))


def test_nested_inputs_outputs_keywords_and_python_values():
    w = tf.Variable([[1.0, -2.0], [0.5, 3.0]])
    Pair = collections.namedtuple("Pair", ["a", "b"])

    def f(pair, extra, *, scale, flag, ids):
        # Python values and integer tensors arrive as they were given.
        assert isinstance(flag, bool) and isinstance(scale, float)
        assert ids.dtype == tf.int32
        h = tf.matmul(pair.a, w) * scale + tf.gather(pair.b, ids)
        if flag:
            h = tf.tanh(h)
        return {"h": h, "sum": tf.reduce_sum(h * extra[0]), "count": tf.size(ids)}

    a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    b = tf.constant([[0.5, 0.5], [1.0, -1.0], [2.0, 0.0]])
    e = tf.constant(3.0)
    ids = tf.constant([2, 0])

    def run(fn):
        with tf.GradientTape() as tape:
            tape.watch([a, b, e])
            out = fn(Pair(a, b), [e], scale=0.5, flag=True, ids=ids)
            loss = tf.reduce_sum(out["h"] ** 2) + out["sum"]
        return out, tape.gradient(loss, [a, b, e, w])

    out, grads = run(snt.remat(f))
    expected_out, expected_grads = run(f)
    assert set(out) == {"h", "sum", "count"}
    assert out["count"].dtype == tf.int32 and int(out["count"]) == 2
    _close(out, expected_out)
    _close(grads, expected_grads)


def test_variables_as_arguments_and_integer_only_inputs():
    embed = snt.Embed(10, 4)
    ids = tf.constant([[1, 2], [3, 3]])
    v = tf.Variable(tf.ones([4]))

    def f(ids, v):
        assert isinstance(v, tf.Variable)
        return embed(ids) * v

    def run(fn):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(fn(ids, v) ** 2)
        return tape.gradient(loss, [embed.embeddings, v])

    first = run(snt.remat(f))
    _close(first, run(f))


def test_bound_method_and_signature():
    class Scaled(snt.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(3.0)

        def apply(self, x, *, power=2):
            """Docs."""
            return self.w * x**power

        def __call__(self, x):
            return self.apply(x)

    module = Scaled()
    rematerialised = snt.remat(module.apply)
    assert inspect.signature(rematerialised) == inspect.signature(module.apply)
    assert rematerialised.__name__ == "apply" and rematerialised.__doc__ == "Docs."
    x = tf.constant(2.0)
    _close(
        _value_and_grads(rematerialised, module, x, power=3),
        _value_and_grads(module.apply, module, x, power=3),
    )
    # A module's attributes are not copied onto the function.
    assert not hasattr(snt.remat(module), "w")
    assert inspect.signature(snt.remat(module)) == inspect.signature(module)


# Graphs -----------------------------------------------------------------------


@pytest.mark.parametrize("autograph", [True, False])
@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("remat_first", [True, False])
def test_tf_function_and_xla(autograph, jit_compile, remat_first):
    mlp = _mlp()
    rematerialised = snt.remat(mlp)

    @tf.function(autograph=autograph, jit_compile=jit_compile)
    def step(x, use_remat):
        return _value_and_grads(rematerialised if use_remat else mlp, mlp, x)

    # The first call creates the variables, inside the trace.
    first = step(X, remat_first)
    second = step(X, not remat_first)
    _close(first, second)
    _close(step(X, True), _value_and_grads(mlp, mlp, X))


@pytest.mark.parametrize("autograph", [True, False])
def test_a_graph_traces_f_twice(autograph):
    # Once for the forward pass, once for the recomputation in the backward
    # pass.
    traces = []

    def f(x):
        traces.append(None)
        return tf.sin(x)

    @tf.function(autograph=autograph)
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = snt.remat(f)(x)
        return tape.gradient(y, x)

    _close(grad(tf.constant([1.0, 2.0])), tf.cos([1.0, 2.0]))
    assert len(traces) == 2


def test_autograph_converts_f_as_in_a_plain_call():
    def f(x):
        if tf.reduce_sum(x) > 0:  # Needs AutoGraph inside a tf.function.
            return tf.sin(x)
        return tf.cos(x)

    rematerialised = snt.remat(f)

    @tf.function
    def grad(x, use_remat):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = rematerialised(x) if use_remat else f(x)
        return y, tape.gradient(y, x)

    for x in (tf.constant([1.0, 2.0]), tf.constant([-1.0, -2.0])):
        _close(grad(x, True), grad(x, False))


def test_remat_of_each_layer_in_a_graph_recomputes_each_layer():
    traces = []

    class Layer(snt.Module):
        def __call__(self, x):
            traces.append(self.name)
            if not hasattr(self, "w"):
                self.w = tf.Variable(tf.eye(3) * 0.5 + 0.1)
            return tf.tanh(tf.matmul(x, self.w))

    layers = [Layer(name=f"layer_{i}") for i in range(3)]
    rematerialised = [snt.remat(layer) for layer in layers]
    x = tf.random.stateless_normal([2, 3], seed=[1, 2])

    def loss(calls):
        h = x
        for call in calls:
            h = call(h)
        return tf.reduce_sum(h**2)

    with tf.GradientTape() as tape:
        plain = loss(layers)
    expected = tape.gradient(plain, [layer.w for layer in layers])

    @tf.function
    def grads():
        with tf.GradientTape() as tape:
            value = loss(rematerialised)
        return value, tape.gradient(value, [layer.w for layer in layers])

    traces.clear()
    _close(grads(), (plain, expected))
    # Each layer traced twice: forward, and recomputed for its gradient.
    assert sorted(traces) == sorted([layer.name for layer in layers] * 2)


def test_inside_a_while_loop_with_parameters_as_arguments():
    # In a loop body `f` must take variables' values as arguments (TensorFlow's
    # backward loop cannot capture a variable that `f` reads itself), as
    # `snt.LayerStack` does.
    w = tf.Variable([[0.9, 0.1], [-0.2, 0.8]])

    def step(h, w):
        return tf.tanh(tf.matmul(h, w))

    @tf.function
    def run(x, use_remat):
        call = snt.remat(step) if use_remat else step
        with tf.GradientTape() as tape:
            tape.watch(x)
            h = x
            for _ in tf.range(4):
                h = call(h, tf.convert_to_tensor(w))
            loss = tf.reduce_sum(h**2)
        return loss, tape.gradient(loss, [x, w])

    x = tf.constant([[1.0, 2.0]])
    _close(run(x, True), run(x, False))


def test_precision_policy():
    def grads(use_remat):
        mlp = snt.precision.apply(_mlp(), "mixed_bfloat16")
        call = snt.remat(mlp) if use_remat else mlp
        tf.random.set_seed(0)  # The same initial values in both models.
        first = _value_and_grads(call, mlp, X)
        assert first[0].dtype == tf.bfloat16
        assert all(v.dtype == tf.float32 for v in mlp.variables)

        @tf.function(jit_compile=True)
        def step(x):
            return _value_and_grads(call, mlp, x)

        return first, step(X)

    remat_eager, remat_xla = grads(True)
    plain_eager, plain_xla = grads(False)
    _close(remat_eager, plain_eager)
    # XLA may fuse bfloat16 roundings differently in the two graphs.
    _close(remat_xla, plain_xla, rtol=2e-2, atol=2e-2)


def test_two_replica_replicator():
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        mlp = _mlp()
    rematerialised = snt.remat(mlp)
    inputs = replicator.experimental_distribute_values_from_function(
        lambda ctx: X[
            2 * ctx.replica_id_in_sync_group : 2 * ctx.replica_id_in_sync_group + 2
        ]
    )

    @tf.function
    def step(x, use_remat):
        def replica_step(x):
            call = rematerialised if use_remat else mlp
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(call(x) ** 2)
            grads = tape.gradient(loss, mlp.trainable_variables)
            context = tf.distribute.get_replica_context()
            return context.all_reduce("sum", grads)

        return replicator.run(replica_step, args=(x,))

    with_remat = step(inputs, True)  # Creates the variables.
    plain = step(inputs, False)
    for a, b in zip(with_remat, plain):
        for local_a, local_b in zip(
            replicator.experimental_local_results(a),
            replicator.experimental_local_results(b),
        ):
            _close(local_a, local_b)


def test_saved_model_of_a_function_using_remat(tmp_path):
    module = _mlp()
    module.call = tf.function(
        snt.remat(module), input_signature=[tf.TensorSpec([None, 8])]
    )
    expected = module.call(X)
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    _close(loaded.call(X), expected)


# Where recomputing cannot reproduce the call ----------------------------------


@pytest.mark.parametrize(
    "random",
    [
        lambda x: tf.nn.dropout(x, rate=0.5),
        lambda x: x * tf.random.uniform(tf.shape(x)),
        lambda x: x * tf.random.Generator.from_seed(1).normal(tf.shape(x)),
        lambda x: snt.Dropout(0.5)(x, is_training=tf.constant(True)),
    ],
    ids=["dropout", "uniform", "generator", "dropout_in_cond"],
)
def test_stateful_random_ops_raise_in_the_gradient(random):
    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = snt.remat(random)(x)
        return tape.gradient(y, x)

    with pytest.raises(ValueError, match="draw new numbers"):
        grad(tf.ones([4, 4]))


def test_stateful_random_ops_without_gradient_and_stateless_ones_are_fine():
    @tf.function
    def forward(x):
        return snt.remat(lambda x: tf.nn.dropout(x, rate=0.5))(x)

    assert forward(tf.ones([4, 4])).shape == [4, 4]

    def stateless(x, seed):
        return tf.nn.experimental.stateless_dropout(x, rate=0.5, seed=seed)

    @tf.function
    def grads(x, use_remat):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = (snt.remat(stateless) if use_remat else stateless)(x, [1, 2])
        return tape.gradient(y, x)

    x = tf.ones([8, 8])
    _close(grads(x, True), grads(x, False))


# Bad input ----------------------------------------------------------------------


@pytest.mark.parametrize("f", [None, 3, "mlp", [len]])
def test_not_callable(f):
    with pytest.raises(TypeError, match=r"`f` must be callable .* Received: "):
        snt.remat(f)


def test_floating_point_composite_tensors_are_rejected():
    ragged = tf.ragged.constant([[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError, match="component tensors of a floating point"):
        snt.remat(lambda r: r * 2.0)(ragged)
    # Integer ones carry no gradient: passed as they are.
    ids = tf.ragged.constant([[1, 2], [3]])
    assert snt.remat(lambda r: tf.reduce_sum(r))(ids).numpy() == 6


def test_functions_are_not_picklable_but_modules_using_them_are():
    # `snt.remat` returns a closure (like `tf.recompute_grad`); keep the module
    # and rematerialise at the call site.
    mlp = _mlp()
    mlp(X)
    copy = pickle.loads(pickle.dumps(mlp))
    _close(snt.remat(copy)(X), mlp(X))


@pytest.mark.parametrize("stacked", [False, True], ids=["unrolled", "stacked"])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_transformer_with_remat_per_block(stacked, jit_compile):
    # `remat=True` wraps each block (unrolled) or the layer stack's loop body
    # (stacked) in `snt.remat`: one checkpoint per layer.
    x = tf.random.stateless_normal([2, 5, 8], seed=[3, 4])

    def run(remat):
        tf.random.set_seed(0)  # The same initial values in both models.
        model = snt.nets.Transformer(3, 2, 8, causal=True, stacked=stacked, remat=remat)

        @tf.function(jit_compile=jit_compile)
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = model(x)
                loss = tf.reduce_sum(y**2)
            return y, tape.gradient(loss, [x, *model.trainable_variables])

        return step(x)

    _close(run(True), run(False), rtol=1e-4, atol=1e-5)
