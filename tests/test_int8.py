"""`snt.int8.quantize`: int8 weights with per-output-channel scales.

Values and scales are checked against a NumPy implementation of symmetric
per-channel quantization; whole models (an MLP trained on scikit-learn's
digits, a Transformer, an Embed + Transformer language model) against their
float32 selves; then the filters, `snt.summary`, tf.function/XLA,
`snt.precision`, checkpoints, pickle, a SavedModel loaded without Sonnet,
LoRA on an int8 base, and bad input.

Measured (CPU, the seeds below): the digits MLP's test accuracy is the same
before and after quantizing (0 of 360 predictions change; the logits move by
about 0.6% of their largest magnitude); a 2-block Transformer's outputs move
by at most 0.7-0.8% of their largest magnitude (relative L2 error 0.5-0.6%);
the language model's logits by 0.8% (relative L2 0.9%), 1.4% with
mixed_bfloat16 on top. The tolerances below leave about 2x margin.
"""

from __future__ import annotations

import copy
import os
import pickle
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from tests.conformance import bad_input

# Transformer outputs after quantizing: max |int8 - float32| is at most this
# fraction of max |float32| (measured 0.7-0.8%), and the relative L2 error
# (||int8 - float32|| / ||float32||) at most `_REL_L2` (measured 0.5-0.9%).
_MAX_ABS_FRACTION = 0.02
_REL_L2 = 0.015


def _x(*shape: int, seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed=[seed, 1])


def _np_quantize(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-channel int8: the reference for `snt.int8.quantize`."""
    w = np.asarray(w, np.float32)
    largest = np.max(np.abs(w), axis=axis, keepdims=True)
    scales = np.where(largest > 0, largest / np.float32(127), np.float32(1))
    scales = scales.astype(np.float32)
    values = np.clip(np.round(w / scales), -127, 127).astype(np.int8)
    return values, scales


def _state(module: tf.Module) -> list[tuple[str, tf.DType, np.ndarray]]:
    # `tf.Module._flatten`, not `.variables`: Sonnet raises for an unbuilt module.
    found = module._flatten(predicate=lambda v: isinstance(v, tf.Variable))
    return [(v.name, v.dtype, v.numpy().copy()) for v in found]


def _weight_steps(module: tf.Module) -> list:
    found = module._flatten(predicate=lambda v: isinstance(v, tf.Module))
    return [vars(m).get("_weight_step") for m in [module, *found]]


def _assert_same_state(module: tf.Module, before: list) -> None:
    after = _state(module)
    assert [(n, d) for n, d, _ in after] == [(n, d) for n, d, _ in before]
    for (_, _, a), (_, _, b) in zip(after, before):
        np.testing.assert_array_equal(a, b)


def _linears(module: tf.Module) -> list[snt.Linear]:
    return [m for m in module.submodules if isinstance(m, snt.Linear)]


def _mlp(sizes=(16, 3), input_size: int = 4) -> snt.nets.MLP:
    mlp = snt.nets.MLP(list(sizes))
    mlp(_x(2, input_size))
    return mlp


def _transformer(**kwargs) -> snt.nets.Transformer:
    kw = {"num_layers": 2, "num_heads": 2, "model_size": 16, "causal": True}
    model = snt.nets.Transformer(**{**kw, **kwargs})
    model(_x(2, 6, 16))
    return model


class _LM(snt.Module):
    """Embed -> Transformer -> Linear head: a small language model."""

    def __init__(self, vocab: int = 64, size: int = 16):
        super().__init__(name="lm")
        self.embed = snt.Embed(vocab_size=vocab, embed_dim=size)
        self.transformer = snt.nets.Transformer(
            num_layers=2, num_heads=2, model_size=size, causal=True
        )
        self.head = snt.Linear(vocab, name="head")

    def __call__(self, ids):
        return self.head(self.transformer(self.embed(ids)))


def _ids(seed: int = 0) -> tf.Tensor:
    return tf.random.stateless_uniform(
        [2, 7], seed=[seed, 3], minval=0, maxval=64, dtype=tf.int32
    )


def _lm() -> _LM:
    lm = _LM()
    lm(_ids())
    return lm


# -- values and scales against NumPy -----------------------------------------


@pytest.mark.parametrize("shape", [(5, 3), (17, 8), (1, 4)])
def test_linear_values_scales_and_outputs_match_numpy(shape):
    tf.random.set_seed(0)
    lin = snt.Linear(shape[1], b_init=snt.initializers.RandomNormal())
    x = _x(6, shape[0])
    y_float = lin(x).numpy()
    w = lin.w.numpy()
    if shape[1] > 1:  # A zero column keeps scale 1 (and values 0).
        w[:, 1] = 0.0
        lin.w.assign(w)
        y_float = lin(x).numpy()
    b = lin.b.numpy()
    converted = snt.int8.quantize(lin)
    assert converted == [lin]
    values, scales = _np_quantize(w, axis=0)
    assert lin.w.dtype == tf.int8 and lin.w.shape == shape
    assert lin.w_scale.dtype == tf.float32 and lin.w_scale.shape == (shape[1],)
    assert not lin.w.trainable and not lin.w_scale.trainable
    assert lin.b.trainable and lin.b.dtype == tf.float32
    assert lin.w.name == "linear/w:0" and lin.w_scale.name == "linear/w_scale:0"
    np.testing.assert_array_equal(lin.w.numpy(), values)
    np.testing.assert_array_equal(lin.w_scale.numpy(), scales[0])
    if shape[1] > 1:
        assert lin.w_scale.numpy()[1] == 1.0
        assert not lin.w.numpy()[:, 1].any()
    # The largest magnitude of each column maps to +-127.
    nonzero = np.abs(w).max(axis=0) > 0
    assert (np.abs(lin.w.numpy()).max(axis=0)[nonzero] == 127).all()
    kernel = values.astype(np.float32) * scales
    y = lin(x).numpy()
    np.testing.assert_allclose(y, x.numpy() @ kernel + b, rtol=1e-5, atol=1e-5)
    # Each weight moves by at most half a step: a bound on the output change.
    bound = np.abs(x.numpy()) @ np.broadcast_to(scales / 2, w.shape)
    assert (np.abs(y - y_float) <= bound + 1e-5).all()
    if shape[0] > 1:  # (One row: each column is its own maximum, exact.)
        assert np.abs(y - y_float).max() > 0  # It did change.


def test_embed_values_scales_and_lookups_match_numpy():
    embed = snt.Embed(vocab_size=11, embed_dim=6)
    table = embed.embeddings.numpy()
    table[3] = 0.0  # A zero row keeps scale 1.
    table[4, 2] = 5.0  # An outlier only affects its own row's scale.
    embed.embeddings.assign(table)
    ids = tf.constant([[0, 3, 4], [10, 4, 7]])
    before = embed(ids).numpy()
    assert snt.int8.quantize(embed) == [embed]
    values, scales = _np_quantize(table, axis=1)
    assert embed.embeddings.dtype == tf.int8
    assert embed.embeddings.name == "embed/embeddings:0"
    assert embed.embeddings_scale.name == "embed/embeddings_scale:0"
    assert embed.embeddings_scale.shape == (11, 1)
    assert not embed.embeddings.trainable and not embed.embeddings_scale.trainable
    np.testing.assert_array_equal(embed.embeddings.numpy(), values)
    np.testing.assert_array_equal(embed.embeddings_scale.numpy(), scales)
    assert scales[3, 0] == 1.0 and scales[4, 0] == pytest.approx(5.0 / 127)
    dequantized = values.astype(np.float32) * scales
    out = embed(ids).numpy()
    np.testing.assert_array_equal(out, dequantized[ids.numpy()])
    assert np.abs(out - before).max() <= scales.max() / 2 + 1e-7


def test_mlp_quantizes_every_layer_in_order():
    mlp = _mlp((16, 8, 3))
    linears = list(mlp._layers)
    x = _x(5, 4)
    kernels = [lin.w.numpy() for lin in linears]
    biases = [lin.b.numpy() for lin in linears]
    converted = snt.int8.quantize(mlp)
    assert converted == linears
    h = x.numpy()
    for i, (w, b) in enumerate(zip(kernels, biases)):
        values, scales = _np_quantize(w, axis=0)
        np.testing.assert_array_equal(linears[i].w.numpy(), values)
        h = h @ (values.astype(np.float32) * scales) + b
        if i < len(kernels) - 1:
            h = np.maximum(h, 0)
    np.testing.assert_allclose(mlp(x).numpy(), h, rtol=1e-5, atol=1e-5)
    # Only the biases train now.
    assert [v.name for v in mlp.trainable_variables] == [
        f"mlp/linear_{i}/b:0" for i in range(3)
    ]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(mlp(x) ** 2)
    grads = tape.gradient(loss, mlp.trainable_variables)
    assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)


# -- whole models against float32 ---------------------------------------------


def _digits() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    test, train = order[:360], order[360:]
    return x[train], y[train], x[test], y[test]


def test_digits_mlp_accuracy_within_half_a_point():
    pytest.importorskip("sklearn")
    x_train, y_train, x_test, y_test = _digits()
    tf.random.set_seed(0)
    mlp = snt.nets.MLP([64, 10])
    optimizer = snt.optimizers.Adam(0.01)
    images, labels = tf.constant(x_train), tf.constant(y_train)

    @tf.function
    def train(steps):
        loss = tf.constant(0.0)
        for _ in tf.range(steps):
            with tf.GradientTape() as tape:
                logits = mlp(images)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
                )
            params = mlp.trainable_variables
            optimizer.apply(tape.gradient(loss, params), params)
        return loss

    mlp(images[:1])
    assert train(tf.constant(200)).numpy() < 0.05
    logits_f32 = mlp(x_test).numpy()
    acc_f32 = np.mean(logits_f32.argmax(1) == y_test)
    assert acc_f32 > 0.95
    snt.int8.quantize(mlp)
    logits_int8 = mlp(x_test).numpy()
    acc_int8 = np.mean(logits_int8.argmax(1) == y_test)
    # Measured: 0.9778 both (no prediction changes); logits move ~0.6%.
    assert abs(acc_int8 - acc_f32) <= 0.005, (acc_f32, acc_int8)
    assert np.abs(logits_int8 - logits_f32).max() < 0.02 * np.abs(logits_f32).max()


def _assert_close_to_float(quantized: np.ndarray, reference: np.ndarray) -> None:
    diff = np.abs(quantized - reference)
    assert diff.max() > 0  # It did change.
    assert diff.max() < _MAX_ABS_FRACTION * np.abs(reference).max(), diff.max()
    rel = np.linalg.norm(quantized - reference) / np.linalg.norm(reference)
    assert rel < _REL_L2, rel


@pytest.mark.parametrize("seed", [0, 1])
def test_transformer_outputs_close_to_float(seed):
    tf.random.set_seed(seed)
    model = _transformer()
    x = _x(2, 6, 16, seed=seed)
    reference = model(x).numpy()
    converted = snt.int8.quantize(model)
    assert len(converted) == 12  # 2 blocks x (4 projections + 2 MLP layers).
    assert all(lin.w.dtype == tf.int8 for lin in _linears(model))
    _assert_close_to_float(model(x).numpy(), reference)


def test_language_model_logits_close_to_float():
    tf.random.set_seed(0)
    lm = _lm()
    ids = _ids(1)
    reference = lm(ids).numpy()
    converted = snt.int8.quantize(lm)
    assert converted[0] is lm.embed and lm.head in converted
    assert len(converted) == 14
    assert lm.embed.embeddings.dtype == tf.int8
    _assert_close_to_float(lm(ids).numpy(), reference)


# -- summary, names, checkpoints ------------------------------------------------


def test_summary_bytes_about_a_quarter_and_names_kept(tmp_path):
    spec = tf.TensorSpec([8, 256])
    mlp = snt.nets.MLP([256, 256, 10])
    float_bytes = snt.summary(mlp, spec).bytes
    names = [v.name for v in mlp.variables]
    float_keys = dict(
        tf.train.list_variables(
            tf.train.Checkpoint(model=mlp).write(str(tmp_path / "f32"))
        )
    )
    snt.int8.quantize(mlp)
    int8_summary = snt.summary(mlp, spec)
    weights = 256 * 256 + 256 * 256 + 256 * 10
    channels = 256 + 256 + 10
    assert float_bytes == 4 * (weights + channels)
    # int8 values, float32 scales and biases.
    assert int8_summary.bytes == weights + 4 * channels + 4 * channels
    ratio = int8_summary.bytes / float_bytes
    assert 0.25 <= ratio <= 0.27, ratio
    assert int8_summary.trainable == channels  # The biases.
    assert int8_summary.non_trainable == weights + channels
    variables = {v.name: v for v in mlp.variables}
    assert set(variables) == set(names) | {
        f"mlp/linear_{i}/w_scale:0" for i in range(3)
    }
    assert variables["mlp/linear_0/w:0"].dtype == tf.int8
    assert variables["mlp/linear_0/w_scale:0"].dtype == tf.float32
    assert variables["mlp/linear_0/b:0"].dtype == tf.float32
    # Checkpoint keys: the float ones, plus the scales.
    path = tf.train.Checkpoint(model=mlp).write(str(tmp_path / "int8"))
    int8_keys = dict(tf.train.list_variables(path))
    assert set(float_keys) < set(int8_keys)
    added = sorted(set(int8_keys) - set(float_keys))
    assert len(added) == 3 and all("w_scale" in k for k in added)
    dtypes = tf.train.load_checkpoint(path).get_variable_to_dtype_map()
    w_keys = [k for k in int8_keys if re.search(r"/w/\.ATTRIBUTES", k)]
    assert len(w_keys) == 3 and all(dtypes[k] == tf.int8 for k in w_keys)


def test_checkpoint_round_trip_between_quantized_copies(tmp_path):
    tf.random.set_seed(0)
    lm = _lm()
    snt.int8.quantize(lm)
    ids = _ids(2)
    expected = lm(ids).numpy()
    path = tf.train.Checkpoint(model=lm).write(str(tmp_path / "ckpt"))
    tf.random.set_seed(1)
    other = _lm()  # Different random weights.
    snt.int8.quantize(other)
    assert np.abs(other(ids).numpy() - expected).max() > 1e-3
    tf.train.Checkpoint(model=other).read(path).assert_consumed()
    np.testing.assert_array_equal(other(ids).numpy(), expected)
    for a, b in zip(lm.variables, other.variables):
        assert a.name == b.name and a.dtype == b.dtype
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_pickle_and_deepcopy():
    tf.random.set_seed(0)
    lm = _lm()
    snt.int8.quantize(lm)
    ids = _ids(3)
    expected = lm(ids).numpy()
    for clone in (copy.deepcopy(lm), pickle.loads(pickle.dumps(lm))):
        np.testing.assert_array_equal(clone(ids).numpy(), expected)
        assert clone.head.w.dtype == tf.int8 and clone.head.w is not lm.head.w
        assert repr(clone.head._weight_step) == "Int8Kernel('w')"
        assert clone.embed.embeddings.dtype == tf.int8
        clone.head.w_scale.assign(tf.zeros_like(clone.head.w_scale))
        assert lm.head.w_scale.numpy().all()  # Independent copies.


# -- tf.function, XLA, precision -------------------------------------------------


def test_quantized_language_model_under_tf_function():
    tf.random.set_seed(0)
    lm = _lm()
    snt.int8.quantize(lm)
    ids = _ids(4)
    expected = lm(ids).numpy()
    fn = tf.function(lm)
    np.testing.assert_allclose(fn(ids).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_quantized_linear_and_embed_under_xla():
    tf.random.set_seed(0)
    mlp = _mlp((16, 3))
    embed = snt.Embed(vocab_size=12, embed_dim=4)
    snt.int8.quantize(mlp)
    snt.int8.quantize(embed)

    @tf.function(jit_compile=True)
    def fn(ids):
        return mlp(embed(ids))

    ids = tf.constant([[1, 5, 11], [0, 2, 3]])
    expected = mlp(embed(ids)).numpy()
    np.testing.assert_allclose(fn(ids).numpy(), expected, rtol=1e-5, atol=1e-5)
    # The compiled graph reads the int8 variables (no float copy was made).
    graph = fn.get_concrete_function(ids).graph
    captured = {v.dtype for v in graph.variables}
    assert tf.int8 in captured, captured


@pytest.mark.parametrize("order", ["policy_first", "quantize_first"])
def test_mixed_bfloat16_computes_kernel_in_bf16(order):
    tf.random.set_seed(0)
    mlp = _mlp((16, 3))
    if order == "policy_first":
        snt.precision.apply(mlp, "mixed_bfloat16")
    snt.int8.quantize(mlp)
    if order == "quantize_first":
        snt.precision.apply(mlp, "mixed_bfloat16")
    first = mlp._layers[0]
    # Storage unchanged by the policy: int8 values, float32 scales.
    assert first.w.dtype == tf.int8 and first.w_scale.dtype == tf.float32
    kernel = first._weight_step(first, tf.bfloat16)
    assert kernel.dtype == tf.bfloat16
    expected_kernel = tf.cast(first.w, tf.bfloat16) * tf.cast(
        first.w_scale, tf.bfloat16
    )
    np.testing.assert_array_equal(kernel.numpy(), expected_kernel.numpy())
    x = _x(4, 4)
    y = mlp(x)
    assert y.dtype == tf.bfloat16
    for fn in (tf.function(mlp), tf.function(mlp, jit_compile=True)):
        assert fn(x).dtype == tf.bfloat16
    # NumPy in float32 from the int8 kernels: bf16 rounding only.
    h = x.numpy()
    for i, lin in enumerate(mlp._layers):
        h = h @ (lin.w.numpy().astype(np.float32) * lin.w_scale.numpy()) + lin.b.numpy()
        if i == 0:
            h = np.maximum(h, 0)
    np.testing.assert_allclose(tf.cast(y, tf.float32).numpy(), h, rtol=0.03, atol=0.03)


def test_mixed_bfloat16_language_model():
    tf.random.set_seed(0)
    lm = _lm()
    ids = _ids(5)
    reference = lm(ids).numpy()
    snt.int8.quantize(lm)
    snt.precision.apply(lm, "mixed_bfloat16")
    out = lm(ids)
    assert out.dtype == tf.bfloat16
    diff = np.abs(tf.cast(out, tf.float32).numpy() - reference)
    assert diff.max() < 0.05 * np.abs(reference).max()


# -- SavedModel, loaded without Sonnet -------------------------------------------


_LOAD_WITHOUT_SONNET = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf
    path, ids_path, out_path = sys.argv[1:4]
    loaded = tf.saved_model.load(path)
    ids = tf.constant(np.load(ids_path))
    np.save(out_path, loaded.predict(ids).numpy())
    assert not any(m == "sonnet" or m.startswith("sonnet.") for m in sys.modules)
    """
)


def test_saved_model_loads_without_sonnet(tmp_path):
    tf.random.set_seed(0)
    lm = _lm()
    snt.int8.quantize(lm)
    root = tf.Module()
    root.model = lm
    root.predict = tf.function(
        lambda ids: lm(ids), input_signature=[tf.TensorSpec([None, None], tf.int32)]
    )
    path = str(tmp_path / "saved")
    tf.saved_model.save(root, path)
    ids = _ids(6).numpy()
    np.save(tmp_path / "ids.npy", ids)
    out_path = tmp_path / "out.npy"
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_WITHOUT_SONNET, path, str(tmp_path / "ids.npy")]
        + [str(out_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(
        np.load(out_path), lm(tf.constant(ids)).numpy(), rtol=1e-5, atol=1e-5
    )
    # The SavedModel stores the int8 values.
    dtypes = tf.train.load_checkpoint(
        str(tmp_path / "saved" / "variables" / "variables")
    ).get_variable_to_dtype_map()
    assert sum(d == tf.int8 for d in dtypes.values()) == 14
    assert sum("w_scale" in k or "embeddings_scale" in k for k in dtypes) == 14


# -- filters ----------------------------------------------------------------------


def test_types_multi_head_attention_quantizes_only_projections():
    tf.random.set_seed(0)
    model = _transformer()
    converted = snt.int8.quantize(model, types=snt.MultiHeadAttention)
    assert len(converted) == 8
    for lin in _linears(model):
        is_projection = "/attention/" in lin.name_scope.name
        assert (lin.w.dtype == tf.int8) == is_projection, lin.name_scope.name
        assert hasattr(lin, "w_scale") == is_projection
    assert all(lin in converted for lin in _linears(model) if lin.w.dtype == tf.int8)
    # The rest can be converted later; then nothing is left.
    rest = snt.int8.quantize(model)
    assert len(rest) == 4 and all("mlp_" in m.name for m in rest)
    before = _state(model)
    with pytest.raises(ValueError, match="`module` .*int8 already.*Received: "):
        snt.int8.quantize(model)
    _assert_same_state(model, before)


_BLOCKS = ("lm/transformer/block_0", "lm/transformer/block_1")
_PROJECTIONS = ("query", "key", "value", "output")
_IN_TRANSFORMER = {f"{b}/mlp_{s}" for b in _BLOCKS for s in ("in", "out")} | {
    f"{b}/attention/{p}" for b in _BLOCKS for p in _PROJECTIONS
}


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"pattern": "mlp"}, {f"{b}/mlp_{s}" for b in _BLOCKS for s in ("in", "out")}),
        (
            {"pattern": re.compile(r"block_1/attention/(query|key)$")},
            {f"{_BLOCKS[1]}/attention/query", f"{_BLOCKS[1]}/attention/key"},
        ),
        ({"types": snt.Embed}, {"lm/embed"}),
        ({"types": snt.nets.Transformer}, _IN_TRANSFORMER),
        ({"types": (snt.Embed, snt.nets.Transformer)}, {"lm/embed"} | _IN_TRANSFORMER),
        (
            {"types": snt.MultiHeadAttention, "pattern": "output"},
            {f"{b}/attention/output" for b in _BLOCKS},
        ),
        ({"pattern": "^lm/head$"}, {"lm/head"}),
    ],
)
def test_filters_choose_modules(kwargs, expected):
    tf.random.set_seed(0)
    lm = _lm()
    candidates = [lm.embed, *_linears(lm)]
    assert len(candidates) == 14
    converted = snt.int8.quantize(lm, **kwargs)
    assert len(converted) == len(expected)
    assert {_path(m) for m in converted} == expected
    for m in candidates:
        kernel = getattr(m, "w", None) if isinstance(m, snt.Linear) else m.embeddings
        chosen = any(m is c for c in converted)
        assert (kernel.dtype == tf.int8) == chosen, _path(m)
        scale = "w_scale" if isinstance(m, snt.Linear) else "embeddings_scale"
        assert hasattr(m, scale) == chosen
        # Unchosen modules keep their float weights and default weight step.
        assert ("_weight_step" in vars(m)) == chosen


def _path(module: tf.Module) -> str:
    return module.name_scope.name.rstrip("/")


# -- LoRA on an int8 base ------------------------------------------------------------


def test_lora_on_int8_base():
    tf.random.set_seed(0)
    mlp = _mlp((16, 3))
    snt.int8.quantize(mlp)
    x = _x(4, 4)
    before = mlp(x).numpy()
    adapters = snt.lora.add(mlp, rank=2)
    assert sorted(adapters) == ["mlp/linear_0", "mlp/linear_1"]
    for adapter in adapters.values():
        assert adapter.a.dtype == tf.float32 and adapter.b.dtype == tf.float32
    assert [v.name for v in mlp.trainable_variables] == [
        "mlp/linear_0/lora/a:0",
        "mlp/linear_0/lora/b:0",
        "mlp/linear_1/lora/a:0",
        "mlp/linear_1/lora/b:0",
    ]
    np.testing.assert_array_equal(mlp(x).numpy(), before)
    # Train a step: only the adapters move; the int8 weights stay.
    int8_before = [lin.w.numpy().copy() for lin in mlp._layers]
    optimizer = snt.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(mlp(x) ** 2)
    params = mlp.trainable_variables
    optimizer.apply(tape.gradient(loss, params), params)
    assert any(np.abs(a.b.numpy()).max() > 0 for a in adapters.values())
    for lin, w in zip(mlp._layers, int8_before):
        assert lin.w.dtype == tf.int8
        np.testing.assert_array_equal(lin.w.numpy(), w)
    # Outputs: x @ (values * scales) + b + (alpha / rank) * (x @ a) @ b_lora.
    h = x.numpy()
    for i, lin in enumerate(mlp._layers):
        kernel = lin.w.numpy().astype(np.float32) * lin.w_scale.numpy()
        lora = lin.lora
        h_next = h @ kernel + lin.b.numpy() + (h @ lora.a.numpy()) @ lora.b.numpy()
        h = np.maximum(h_next, 0) if i == 0 else h_next
    np.testing.assert_allclose(mlp(x).numpy(), h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tf.function(mlp)(x).numpy(), h, rtol=1e-5, atol=1e-5)
    # Merging into int8 weights is refused; nothing changes.
    state = _state(mlp)
    with pytest.raises(ValueError, match=r"^`module` .*int8.*Received: ") as info:
        snt.lora.merge(mlp)
    bad_input.check_error(info.value, ["module"])
    _assert_same_state(mlp, state)
    assert not any(a.merged for a in adapters.values())


# -- bad input ---------------------------------------------------------------------


def _unbuilt_linear():
    return snt.Linear(3)


def _unbuilt_mlp():
    return snt.nets.MLP([4, 2])


def _layer_norm():
    norm = snt.LayerNorm(-1, create_scale=True, create_offset=True)
    norm(_x(2, 3))
    return norm


def _quantized_mlp():
    mlp = _mlp()
    snt.int8.quantize(mlp)
    return mlp


def _stack_layer():
    # A stack's layer given without its stack (tests/test_stack_finetune.py
    # quantizes stacks).
    model = snt.nets.Transformer(num_layers=2, num_heads=2, model_size=8, stacked=True)
    model(_x(1, 3, 8))
    return model.stack.layer


@pytest.mark.parametrize(
    "make, kwargs, error, argument, fragment",
    [
        (_unbuilt_linear, {}, ValueError, "module", "built"),
        (_unbuilt_mlp, {}, ValueError, "module", "built"),
        (_layer_norm, {}, ValueError, "module", "must contain a"),
        (_quantized_mlp, {}, ValueError, "module", "int8 already"),
        (_stack_layer, {}, ValueError, "module", "LayerStack"),
        (_mlp, {"pattern": "attention"}, ValueError, "pattern", "matches none"),
        (_mlp, {"types": snt.Conv2D}, ValueError, "types", "matches none"),
        (
            _mlp,
            {"types": snt.nets.MLP, "pattern": "attn"},
            ValueError,
            "pattern",
            "none",
        ),
        (_mlp, {"pattern": 3}, TypeError, "pattern", "regular expression"),
        (_mlp, {"pattern": "("}, ValueError, "pattern", "valid regular expression"),
        (_mlp, {"types": 3}, TypeError, "types", "class"),
        (_mlp, {"types": ()}, TypeError, "types", "class"),
        (_mlp, {"types": (snt.Linear, "x")}, TypeError, "types", "class"),
    ],
)
def test_bad_input_changes_nothing(make, kwargs, error, argument, fragment):
    module = make()
    before = _state(module)
    steps = _weight_steps(module)
    with pytest.raises(error) as info:
        snt.int8.quantize(module, **kwargs)
    message = str(info.value)
    assert message.startswith(f"`{argument}` "), message
    assert fragment in message and "Received: " in message, message
    bad_input.check_error(info.value, [argument])
    _assert_same_state(module, before)
    assert _weight_steps(module) == steps


def test_both_filters_error_names_the_one_that_matches_nothing():
    mlp = _mlp()
    before = _state(mlp)
    with pytest.raises(ValueError) as info:
        snt.int8.quantize(mlp, types=snt.Conv2D, pattern="mlp")
    _assert_same_state(mlp, before)
    message = str(info.value)
    # "mlp" matches both layers' names: the message must not say it matches none.
    assert message.startswith("`types` "), message


@pytest.mark.parametrize("value", [3, None, "mlp", np.zeros([2, 2]), snt.Linear])
def test_non_module_is_a_type_error(value):
    with pytest.raises(TypeError, match=r"^`module` must be a `tf.Module`.*Received: "):
        snt.int8.quantize(value)


def test_keyword_only_filters():
    mlp = _mlp()
    with pytest.raises(TypeError):
        snt.int8.quantize(mlp, snt.Linear)  # pyright: ignore[reportCallIssue]
    assert mlp._layers[0].w.dtype == tf.float32


def test_embed_dequantizes_only_the_rows_it_looks_up():
    embed = snt.Embed(1000, 16)
    ids = tf.constant([[3, 999], [0, 3]])
    expected = embed(ids).numpy()
    snt.int8.quantize(embed)
    graph = tf.function(embed).get_concrete_function(ids).graph
    float_shapes = [
        output.shape.as_list()
        for op in graph.get_operations()
        for output in op.outputs
        if output.dtype == tf.float32
    ]
    assert [1000, 16] not in float_shapes, float_shapes
    values = embed.embeddings.numpy().astype(np.float32)
    reference = (values * embed.embeddings_scale.numpy())[ids.numpy()]
    for call in (embed, tf.function(embed), tf.function(embed, jit_compile=True)):
        np.testing.assert_allclose(call(ids).numpy(), reference, rtol=1e-6)
    np.testing.assert_allclose(embed(ids).numpy(), expected, atol=0.02)
    with pytest.raises(ValueError, match=r"`inputs` must contain ids in \[0, 1000\)"):
        embed(tf.constant([1000]))


def test_a_chosen_layer_not_built_yet_is_refused_and_nothing_changes():
    class Model(snt.Module):
        def __init__(self):
            super().__init__()
            self.built_part = snt.Linear(3)
            self.later = snt.Linear(2, name="later")

        def __call__(self, x):
            return self.built_part(x)

    model = Model()
    model(tf.ones([1, 4]))
    with pytest.raises(
        ValueError, match=r"`module` must be built first.*`model/later` has"
    ):
        snt.int8.quantize(model)
    assert model.built_part.w.dtype == tf.float32
    assert len(snt.int8.quantize(model, pattern="linear")) == 1
