"""`snt.LayerStack` and stacked `snt.nets.Transformer`s (issue 24)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _linear() -> snt.Module:
    return snt.Linear(8)


def _mlp() -> snt.Module:
    return snt.nets.MLP([6, 4], activate_final=True)


def _x(*shape: int, seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[seed, 1])


def _devices(n: int) -> list[str]:
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:n]]
    assert len(devices) == n, "conftest.py should configure 4 logical CPUs"
    return devices


# -- numerics against NumPy ------------------------------------------------


def _numpy_linear_stack(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    for i in range(w.shape[0]):
        x = np.tanh(x @ w[i] + b[i])
    return x


class _TanhLinear(snt.Module):
    def __init__(self, size: int = 8):
        super().__init__()
        self.linear = snt.Linear(size, b_init=snt.initializers.RandomNormal())

    def __call__(self, x):
        return tf.tanh(self.linear(x))


@pytest.mark.parametrize("mode", ["eager", "function", "no_autograph", "xla"])
def test_outputs_and_gradients_match_numpy(mode):
    stack = snt.LayerStack(_TanhLinear, num_layers=5)
    x = _x(3, 8)

    def forward_backward(x):
        with tf.GradientTape() as tape:
            y = stack(x)
            loss = tf.reduce_sum(y**2)
        return y, tape.gradient(loss, [stack.layer.linear.w, stack.layer.linear.b])

    call = {
        "eager": forward_backward,
        "function": tf.function(forward_backward),
        "no_autograph": tf.function(forward_backward, autograph=False),
        "xla": tf.function(forward_backward, jit_compile=True),
    }[mode]
    y, (dw, db) = call(x)
    w, b = stack.layer.linear.w.numpy(), stack.layer.linear.b.numpy()
    assert w.shape == (5, 8, 8) and b.shape == (5, 8)
    assert not np.allclose(w[0], w[1])  # Each layer its own initial values.
    np.testing.assert_allclose(y, _numpy_linear_stack(x.numpy(), w, b), atol=1e-5)
    # Gradients by finite differences of the NumPy reference, one entry each.
    eps = 1e-3
    for i, (j, k) in ((0, (1, 2)), (4, (7, 0))):
        wp, wm = w.copy(), w.copy()
        wp[i, j, k] += eps
        wm[i, j, k] -= eps
        lp = (_numpy_linear_stack(x.numpy().astype(np.float64), wp, b) ** 2).sum()
        lm = (_numpy_linear_stack(x.numpy().astype(np.float64), wm, b) ** 2).sum()
        assert dw[i, j, k].numpy() == pytest.approx((lp - lm) / (2 * eps), rel=2e-2)
    assert db.shape == (5, 8)


def test_variable_names_shapes_and_checkpoint_paths():
    stack = snt.LayerStack(_mlp, num_layers=3)
    stack(_x(2, 4))
    assert [(v.name, v.shape.as_list()) for v in stack.variables] == [
        ("layer_stack/mlp/linear_0/b:0", [3, 6]),
        ("layer_stack/mlp/linear_0/w:0", [3, 4, 6]),
        ("layer_stack/mlp/linear_1/b:0", [3, 4]),
        ("layer_stack/mlp/linear_1/w:0", [3, 6, 4]),
    ]
    assert [path for path, _ in stack.layer_variables()] == [
        "_layers/0/b",
        "_layers/0/w",
        "_layers/1/b",
        "_layers/1/w",
    ]
    names = {n for n, _ in tf.train.list_variables(_save(stack))}
    assert "module/layer/_layers/0/w/.ATTRIBUTES/VARIABLE_VALUE" in names


def _save(module: snt.Module) -> str:
    import tempfile

    path = tempfile.mkdtemp()
    return tf.train.Checkpoint(module=module).write(f"{path}/ckpt")


# -- the loop --------------------------------------------------------------


def test_traced_once_as_a_loop():
    stack = snt.LayerStack(_linear, num_layers=6)
    f = tf.function(stack)
    graph = f.get_concrete_function(tf.TensorSpec([2, 8])).graph
    ops = [op.type for op in graph.get_operations()]
    assert "While" in ops or "StatelessWhile" in ops
    assert "MatMul" not in ops  # The one matmul is in the loop's body.


def test_first_call_in_a_function_creates_eager_variables_once():
    stack = snt.LayerStack(_mlp, num_layers=3)
    calls = []

    @tf.function
    def f(x):
        calls.append(1)
        return stack(x)

    f(_x(2, 4))
    f(_x(2, 4))
    assert len(calls) == 1  # Traced once, as for any Sonnet module.
    assert all(v.shape[0] == 3 for v in stack.variables)


def test_one_layer():
    stack = snt.LayerStack(_linear, num_layers=1)
    x = _x(2, 8)
    np.testing.assert_allclose(
        stack(x), x @ stack.layer.w[0] + stack.layer.b[0], atol=1e-6
    )
    np.testing.assert_allclose(tf.function(stack)(x), stack(x), atol=1e-6)


class _Scaled(snt.Module):
    """A layer with a per-layer input (a scale) and a per-layer output."""

    def __init__(self):
        super().__init__()
        self.linear = snt.Linear(4)

    def __call__(self, x, offset, *, scale, flag=False):
        y = self.linear(x) * scale + offset
        return (y if flag else -y), {"mean": tf.reduce_mean(y, axis=-1)}


@pytest.mark.parametrize("traced", [False, True])
def test_per_layer_inputs_and_outputs(traced):
    stack = snt.LayerStack(_Scaled, num_layers=3)
    x, offset = _x(2, 4), tf.constant(0.5)
    scales = tf.constant([1.0, 2.0, 3.0])

    def run(x, scales):
        return stack(x, offset, per_layer={"scale": scales}, flag=True)

    y, outs = (tf.function(run) if traced else run)(x, scales)
    w, b = stack.layer.linear.w, stack.layer.linear.b
    expected, means = x, []
    for i in range(3):
        expected = (expected @ w[i] + b[i]) * scales[i] + offset
        means.append(tf.reduce_mean(expected, axis=-1))
    np.testing.assert_allclose(y, expected, atol=1e-5)
    assert set(outs) == {"mean"} and outs["mean"].shape == (3, 2)
    np.testing.assert_allclose(outs["mean"], tf.stack(means), atol=1e-5)


def test_per_layer_outputs_without_per_layer_inputs():
    class Probe(snt.Module):
        def __init__(self):
            super().__init__()
            self.linear = snt.Linear(4)

        def __call__(self, x):
            y = self.linear(x)
            return y, tf.reduce_sum(y)

    stack = snt.LayerStack(Probe, num_layers=2)
    y, sums = tf.function(lambda x: stack(x, per_layer={}))(_x(2, 4))
    assert y.shape == (2, 4) and sums.shape == (2,)


def test_remat_same_outputs_and_gradients():
    plain = snt.LayerStack(_TanhLinear, num_layers=4)
    remat = snt.LayerStack(_TanhLinear, num_layers=4, remat=True)
    x = _x(3, 8)
    plain(x)
    remat(x)
    for a, b in zip(remat.variables, plain.variables):
        a.assign(b)

    def grads_of(module):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(module(x) ** 2)
        return tape.gradient(loss, module.trainable_variables)

    for call in (lambda f: f, tf.function, lambda f: tf.function(f, jit_compile=True)):
        grads = [call(grads_of)(module) for module in (plain, remat)]
        for a, b in zip(*grads):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# -- Transformer -----------------------------------------------------------

_KW = {"num_layers": 3, "num_heads": 2, "model_size": 8, "causal": True}


def _pair(**kwargs) -> tuple[snt.nets.Transformer, snt.nets.Transformer]:
    unrolled = snt.nets.Transformer(**{**_KW, **kwargs})
    unrolled(_x(2, 5, 8))
    stacked = snt.nets.Transformer(**{**_KW, **kwargs}, stacked=True)
    return unrolled, snt.nets.copy_transformer_weights(unrolled, stacked)


def _grads(module, call, x, **kwargs):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(call(x, **kwargs) ** 2)
    return tape.gradient(loss, module.trainable_variables)


def _by_block(unrolled, grads):
    """Unrolled gradients in the stacked layout (stacked per variable)."""
    names = [v.name for v in unrolled.trainable_variables]
    per_block: dict[str, list[tf.Tensor]] = {}
    final = []
    for name, g in zip(names, grads):
        if "/block_" in name:
            key = name.split("/", 2)[2]
            per_block.setdefault(key, []).append(g)
        else:
            final.append((name.split("/", 1)[1], g))
    return per_block, dict(final)


@pytest.mark.parametrize("mode", ["eager", "function", "no_autograph", "xla"])
def test_transformer_stacked_matches_unrolled(mode):
    unrolled, stacked = _pair(rotary=True)
    x = _x(2, 5, 8, seed=3)
    mask = tf.constant([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]

    def wrap(m):
        return {
            "eager": m,
            "function": tf.function(m),
            "no_autograph": tf.function(m, autograph=False),
            "xla": tf.function(m, jit_compile=True),
        }[mode]

    np.testing.assert_allclose(
        wrap(stacked)(x, mask=mask), wrap(unrolled)(x, mask=mask), atol=1e-5
    )
    # Under XLA, gradients are taken inside the compiled function (the
    # loop's saved activations cannot leave it).
    g_unrolled = wrap(lambda: _grads(unrolled, unrolled, x, mask=mask))()
    g_stacked = wrap(lambda: _grads(stacked, stacked, x, mask=mask))()
    per_block, final = _by_block(unrolled, g_unrolled)
    for v, g in zip(stacked.trainable_variables, g_stacked):
        name = v.name.split("/", 1)[1]
        if name.startswith("stack/block/"):
            expected = tf.stack(per_block[name[len("stack/block/") :]])
        else:
            expected = final[name]
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("traced", [False, True])
def test_transformer_stacked_decoding_cache(traced):
    unrolled, stacked = _pair(rotary=True)
    x = _x(2, 4, 8, seed=4)
    full = unrolled(x)

    def step(x, cache):
        return stacked(x, cache=cache)

    step = tf.function(step) if traced else step
    cache = stacked.initial_cache(batch_size=2, max_length=4)
    assert isinstance(cache, snt.AttentionCache) and cache.key.shape[0] == 3
    outs = []
    for t in range(4):
        y, cache = step(x[:, t : t + 1], cache)
        outs.append(y)
    np.testing.assert_allclose(tf.concat(outs, axis=1), full, atol=1e-5)
    # A per-block cache (as for unrolled blocks) gives per-block caches back.
    y, per_block = stacked(x[:, :1], cache=unrolled.initial_cache(2, 4))
    assert isinstance(per_block, tuple) and len(per_block) == 3
    np.testing.assert_allclose(y, full[:, :1], atol=1e-5)


def test_transformer_default_is_unchanged():
    t = snt.nets.Transformer(**_KW)
    t(_x(2, 5, 8))
    assert not t.stacked and len(t.blocks) == 3
    assert "transformer/block_0/attention/key/b:0" in [v.name for v in t.variables]
    assert "stacked" not in repr(t)


def test_transformer_precision_policy():
    unrolled, stacked = _pair()
    for m in (unrolled, stacked):
        snt.precision.apply(m, "mixed_bfloat16")
    x = _x(2, 5, 8)
    for call in (lambda m: m, tf.function):
        y_u, y_s = call(unrolled)(x), call(stacked)(x)
        assert y_s.dtype == y_u.dtype == tf.bfloat16
        np.testing.assert_allclose(
            tf.cast(y_s, tf.float32), tf.cast(y_u, tf.float32), atol=2e-2
        )
    assert all(v.dtype == tf.float32 for v in stacked.variables)


def test_precision_policy_applied_before_the_first_call():
    stacked = snt.nets.Transformer(**_KW, stacked=True)
    snt.precision.apply(stacked, "mixed_bfloat16")
    y = tf.function(stacked)(_x(2, 5, 8))
    assert y.dtype == tf.bfloat16
    assert all(v.dtype == tf.float32 for v in stacked.variables)


def test_transformer_stacked_under_replicator():
    strategy = snt.distribute.Replicator(_devices(2))
    with strategy.scope():
        stacked = snt.nets.Transformer(**_KW, stacked=True)
        opt = snt.optimizers.SGD(0.1)
    x = _x(2, 5, 8)

    @tf.function
    def step(x):
        def replica(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(stacked(x) ** 2)
            grads = tape.gradient(loss, stacked.trainable_variables)
            ctx = tf.distribute.get_replica_context()
            grads = ctx.all_reduce("sum", grads)
            opt.apply(grads, stacked.trainable_variables)
            return loss

        return strategy.run(replica, (x,))

    step(x)
    before = stacked.trainable_variables[3].values[0].numpy()
    step(x)
    locals_ = stacked.trainable_variables[3].values
    assert not np.allclose(locals_[0].numpy(), before)
    np.testing.assert_allclose(locals_[0].numpy(), locals_[1].numpy())


# -- checkpoints, SavedModel, pickle ---------------------------------------


def test_checkpoint_restore_on_create(tmp_path):
    stack = snt.LayerStack(_mlp, num_layers=3)
    x = _x(2, 4)
    y = stack(x)
    path = tf.train.Checkpoint(module=stack).write(str(tmp_path / "ckpt"))
    fresh = snt.LayerStack(_mlp, num_layers=3)
    status = tf.train.Checkpoint(module=fresh).read(path)
    np.testing.assert_allclose(tf.function(fresh)(x), y, atol=1e-6)
    status.assert_consumed()


def test_saved_model(tmp_path):
    stacked = snt.nets.Transformer(**_KW, stacked=True)
    x = _x(2, 5, 8)
    y = stacked(x)
    stacked.forward = tf.function(
        lambda x: stacked(x), input_signature=[tf.TensorSpec([None, 5, 8])]
    )
    tf.saved_model.save(stacked, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    np.testing.assert_allclose(loaded.forward(x), y, atol=1e-5)


def test_pickle_and_deepcopy():
    stack = snt.LayerStack(_mlp, num_layers=2)
    x = _x(2, 4)
    y = stack(x)
    for other in (copy.deepcopy(stack), pickle.loads(pickle.dumps(stack))):
        np.testing.assert_allclose(other(x), y, atol=1e-6)
        np.testing.assert_allclose(tf.function(other)(x), y, atol=1e-6)
        assert other.variables[0] is not stack.variables[0]


def test_convert_checkpoints_both_ways(tmp_path):
    unrolled = snt.nets.Transformer(**_KW)
    x = _x(2, 5, 8)
    y = unrolled(x)
    # A trained unrolled checkpoint -> a stacked model -> its checkpoint.
    path = tf.train.Checkpoint(model=unrolled).write(str(tmp_path / "unrolled"))
    restored = snt.nets.Transformer(**_KW)
    tf.train.Checkpoint(model=restored).read(path)
    restored(x)
    stacked = snt.nets.copy_transformer_weights(
        restored, snt.nets.Transformer(**_KW, stacked=True)
    )
    np.testing.assert_allclose(stacked(x), y, atol=1e-5)
    path = tf.train.Checkpoint(model=stacked).write(str(tmp_path / "stacked"))
    # And back: the stacked checkpoint -> an unrolled model.
    again = snt.nets.Transformer(**_KW, stacked=True)
    tf.train.Checkpoint(model=again).read(path).expect_partial()
    again(x)
    back = snt.nets.copy_transformer_weights(again, snt.nets.Transformer(**_KW))
    np.testing.assert_allclose(back(x), y, atol=1e-5)
    for a, b in zip(back.variables, unrolled.variables):
        assert a.name == b.name
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# -- bad input -------------------------------------------------------------


@pytest.mark.parametrize(
    "num_layers, error",
    [(0, ValueError), (-2, ValueError), (1.5, TypeError), ("3", TypeError)],
)
def test_bad_num_layers(num_layers, error):
    with pytest.raises(error, match="num_layers"):
        snt.LayerStack(_linear, num_layers)


def test_accepts_integer_spellings():
    assert snt.LayerStack(_linear, np.int64(2)).num_layers == 2
    assert snt.LayerStack(_linear, tf.constant(3)).num_layers == 3


def test_bad_make_layer():
    with pytest.raises(TypeError, match="make_layer"):
        snt.LayerStack(snt.Linear(2), 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="make_layer"):
        snt.LayerStack(lambda: tf.keras.layers.Dense(2), 2)  # type: ignore[arg-type]
    # A module class is a factory too.
    assert snt.LayerStack(_TanhLinear, 2)(_x(2, 8)).shape == (2, 8)


@pytest.mark.parametrize("traced", [False, True])
def test_layer_changing_its_shape_is_refused_and_changes_nothing(traced):
    stack = snt.LayerStack(lambda: snt.Linear(3), num_layers=2)
    call = tf.function(stack) if traced else stack
    with pytest.raises(ValueError, match="make_layer.*structure, dtypes and shapes"):
        call(_x(2, 8))
    assert not stack._slots
    with pytest.raises(ValueError, match="make_layer"):
        stack.layer_variables()
    # Nothing was built: a valid input still works.
    assert stack(_x(2, 3)).shape == (2, 3)


def test_layer_changing_its_structure_is_refused():
    stack = snt.LayerStack(lambda: snt.Linear(8), num_layers=2)
    with pytest.raises(ValueError, match="make_layer"):
        stack(_x(2, 8), per_layer={})  # Linear returns no pair.


def test_bad_per_layer():
    stack = snt.LayerStack(_Scaled, num_layers=3)
    x, offset = _x(2, 4), tf.constant(0.0)
    with pytest.raises(ValueError, match="per_layer.*num_layers=3"):
        stack(x, offset, per_layer={"scale": tf.ones([2])})
    with pytest.raises(ValueError, match="per_layer"):
        stack(x, offset, per_layer={"scale": tf.constant(1.0)})
    with pytest.raises(TypeError, match="per_layer"):
        stack(x, offset, per_layer=[tf.ones([3])])
    with pytest.raises(TypeError, match="per_layer"):
        stack(x, offset, per_layer={"scale": object()})
    assert not stack._slots


def test_variables_in_containers_are_refused():
    class Listed(snt.Module):
        def __call__(self, x):
            if not hasattr(self, "ws"):
                self.ws = [tf.Variable(tf.eye(2))]
            return x @ self.ws[0]

    with pytest.raises(ValueError, match="make_layer.*attribute of a module"):
        snt.LayerStack(Listed, 2)(tf.ones([1, 2]))


@pytest.mark.parametrize("traced", [False, True])
def test_input_dependent_initial_values(traced):
    # Built in the trace instead (as a Sonnet module's `_initialize` that
    # reads input values is): each layer starts from the first example.
    class FromInputs(snt.Module):
        @snt.once
        def _initialize(self, x):
            self.w = tf.Variable(x[0])

        def __call__(self, x):
            self._initialize(x)
            return x * self.w

    stack = snt.LayerStack(FromInputs, 2)
    x = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = (tf.function(stack) if traced else stack)(x)
    np.testing.assert_allclose(y, x * x[0] ** 2)
    assert stack.layer.w.shape == (2, 3)


def test_copy_transformer_weights_bad_input():
    unrolled = snt.nets.Transformer(**_KW)
    with pytest.raises(ValueError, match="source.*call it once"):
        snt.nets.copy_transformer_weights(unrolled, snt.nets.Transformer(**_KW))
    unrolled(_x(2, 5, 8))
    with pytest.raises(TypeError, match="target"):
        snt.nets.copy_transformer_weights(unrolled, snt.Linear(2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="source"):
        snt.nets.copy_transformer_weights(snt.Linear(2), unrolled)  # type: ignore[arg-type]
    deeper = snt.nets.Transformer(**{**_KW, "num_layers": 4}, stacked=True)
    with pytest.raises(ValueError, match="block_3/attention/key/b"):
        snt.nets.copy_transformer_weights(deeper_built(deeper), unrolled)
    wider = snt.nets.Transformer(**{**_KW, "mlp_hidden_size": 16}, stacked=True)
    before = [v.numpy() for v in unrolled.variables]
    with pytest.raises(ValueError, match="block_0/mlp_in/b"):
        snt.nets.copy_transformer_weights(deeper_built(wider), unrolled)
    for v, b in zip(unrolled.variables, before):
        np.testing.assert_array_equal(v.numpy(), b)  # Nothing assigned.


def deeper_built(model):
    model(_x(2, 5, 8))
    return model


def test_bad_stacked_cache():
    stacked = snt.nets.Transformer(**_KW, stacked=True)
    cache = stacked.initial_cache(2, 4)
    bad = snt.AttentionCache(cache.key[:2], cache.value[:2], cache.index[:2])
    with pytest.raises(ValueError, match="cache.*num_layers=3"):
        stacked(_x(2, 1, 8), cache=bad)
    with pytest.raises(TypeError, match="cache"):
        stacked(_x(2, 1, 8), cache=[cache])


def test_other_layers_are_initialised_without_tracing_their_calls():
    calls = []

    class Counted(snt.Module):
        def __init__(self):
            super().__init__()
            self.linear = snt.Linear(4)

        def __call__(self, x):
            calls.append(1)
            return tf.tanh(self.linear(x))

    stack = snt.LayerStack(Counted, num_layers=8)
    tf.function(stack)(_x(2, 4))
    assert len(calls) == 2  # The probe layer's call and the loop's body.
    w = stack.layer.linear.w.numpy()
    assert len({float(w[i, 0, 0]) for i in range(8)}) == 8  # Own values each.


def test_layers_that_create_variables_in_their_call_are_built_by_calling_them():
    class InCall(snt.Module):
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = tf.Variable(tf.random.normal([x.shape[-1]]))
            return x * self.w

    stack = snt.LayerStack(InCall, num_layers=3)
    x = _x(2, 4)
    y = tf.function(stack)(x)
    w = stack.layer.w
    assert w.shape == (3, 4)
    np.testing.assert_allclose(y, x * w[0] * w[1] * w[2], rtol=1e-5)


# -- misuse that would be silent (issue 31) ----------------------------------


def _assert_unbuilt(stack: snt.LayerStack) -> None:
    assert not stack._slots
    with pytest.raises(ValueError, match="must be called once"):
        stack.layer_variables()


class _KerasBlock(snt.Module):
    def __init__(self):
        super().__init__()
        self.dense = tf.keras.layers.Dense(4)

    def __call__(self, x):
        return self.dense(x)


@pytest.mark.parametrize("traced", [False, True])
def test_keras_layers_are_refused(traced):
    # Their variables would not be stacked: every layer would share them.
    stack = snt.LayerStack(_KerasBlock, num_layers=3)
    call = tf.function(stack) if traced else stack
    with pytest.raises(
        ValueError, match=r"make_layer.*Sonnet modules.*Keras Dense at `dense`"
    ):
        call(_x(2, 4))
    _assert_unbuilt(stack)


class _Counter(snt.Module):
    """Counts its calls in a variable: a state update."""

    def __init__(self):
        super().__init__()
        self.linear = snt.Linear(4)
        self.count = tf.Variable(tf.constant(0), trainable=False)

    def __call__(self, x):
        self.count.assign_add(1)
        return self.linear(x)


@pytest.mark.parametrize("traced", [False, True])
def test_layers_updating_their_variables_are_refused(traced):
    stack = snt.LayerStack(_Counter, num_layers=3)
    call = tf.function(stack) if traced else stack
    with pytest.raises(ValueError, match=r"make_layer.*not update.*`count`"):
        call(_x(2, 4))
    _assert_unbuilt(stack)


class _Normalized(snt.Module):
    def __init__(self):
        super().__init__()
        self.linear = snt.Linear(4)
        self.norm = snt.BatchNorm(create_scale=True, create_offset=True)

    def __call__(self, x, is_training):
        return self.norm(self.linear(x), is_training=is_training)


@pytest.mark.parametrize("traced", [False, True])
def test_batch_norm_training_is_refused(traced):
    stack = snt.LayerStack(_Normalized, num_layers=3)
    call = tf.function(stack) if traced else stack
    with pytest.raises(
        ValueError,
        match=r"make_layer.*BatchNorm.*LayerNorm.*Received: .*`norm/moving_mean/",
    ):
        call(_x(2, 4), True)
    _assert_unbuilt(stack)


@pytest.mark.parametrize("traced", [False, True])
def test_batch_norm_in_inference_only(traced):
    # Without updates it stacks; a later training call is refused and
    # changes nothing.
    stack = snt.LayerStack(_Normalized, num_layers=3)
    x = _x(2, 4)
    call = tf.function(stack) if traced else stack
    y = call(x, False)
    layer = stack.layer
    expected = x
    for i in range(3):
        h = expected @ layer.linear.w[i] + layer.linear.b[i]
        mean = layer.norm.moving_mean.value[i]
        variance = layer.norm.moving_variance.value[i]
        expected = (h - mean) / tf.sqrt(variance + 1e-5) * layer.norm.scale[
            i
        ] + layer.norm.offset[i]
    np.testing.assert_allclose(y, expected, rtol=1e-5)
    before = [v.numpy() for v in stack.variables]
    with pytest.raises(ValueError, match=r"not update.*`norm/moving_mean/"):
        call(x, True)
    for v, b in zip(stack.variables, before):
        np.testing.assert_array_equal(v.numpy(), b)


@pytest.mark.parametrize("traced", [False, True])
def test_variables_created_by_the_constructor(traced):
    class Scaled(snt.Module):
        def __init__(self):
            super().__init__()
            self.scale = tf.Variable(tf.random.normal([4]))
            self.linear = snt.Linear(4)

        def __call__(self, x):
            return self.linear(x) * self.scale

    stack = snt.LayerStack(Scaled, num_layers=3)
    x = _x(2, 4)
    y = (tf.function(stack) if traced else stack)(x)
    scale, w, b = stack.layer.scale, stack.layer.linear.w, stack.layer.linear.b
    assert scale.shape == (3, 4)
    assert not np.allclose(scale[0], scale[1])  # Each layer its own.
    expected = x
    for i in range(3):
        expected = (expected @ w[i] + b[i]) * scale[i]
    np.testing.assert_allclose(y, expected, atol=1e-5)


def test_tensor_variable_write_hook():
    written = []
    with snt.functional.variables():
        v = tf.Variable(tf.zeros([2]), name="v")
    v.on_write = written.append  # type: ignore[attr-defined]
    float(v[0])  # A read is not a write.
    v.assign_add(tf.ones([2]))
    v.assign(tf.ones([2]))
    v.scatter_nd_add([[0]], [1.0])
    with pytest.raises(AttributeError, match="handle"):
        v.handle  # noqa: B018
    assert written == [v] * 4
    assert not hasattr(v, "handle")
