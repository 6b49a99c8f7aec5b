"""`snt.nets.Transformer` with mixture-of-experts MLPs (`num_experts=`) and
chunked attention (`chunked=`, `chunk_size=`): references, auxiliary losses,
stacking, decoding, tracing and bad input."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def _data(*shape: int, seed: int = 0) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).normal(size=shape), tf.float32)


def _np_norm(norm: snt.LayerNorm, x: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    y = (x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    return y * norm.scale.numpy() + norm.offset.numpy()


def _np_linear(linear: snt.Linear, x: np.ndarray) -> np.ndarray:
    return x @ linear.w.numpy() + linear.b.numpy()


def _np_attention(mha: snt.MultiHeadAttention, x: np.ndarray) -> np.ndarray:
    """Causal self-attention (no rotary embedding)."""
    batch, time, _ = x.shape
    heads, size = mha.num_heads, mha.key_size
    q, k, v = (
        _np_linear(getattr(mha, n), x).reshape(batch, time, heads, size)
        for n in ("query", "key", "value")
    )
    logits = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(size)
    logits = np.where(np.triu(np.ones([time, time], bool), 1), -np.inf, logits)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhts,bshk->bthk", weights, v).reshape(batch, time, -1)
    return _np_linear(mha.output, out)


def _np_dense_mlp(block: snt.nets.TransformerBlock, h: np.ndarray) -> np.ndarray:
    hidden = np.maximum(_np_linear(block.mlp_in, h), 0.0)  # `activation="relu"`.
    return _np_linear(block.mlp_out, hidden)


def _copy(source: snt.Module, target: snt.Module) -> None:
    for s, t in zip(source.variables, target.variables, strict=True):
        assert s.name.split("/")[-1] == t.name.split("/")[-1]
        t.assign(s)


# ---------------------------------------------------------------------------
# References.


@pytest.mark.parametrize(
    "options",
    [
        {"capacity_factor": 1.0},
        {"gating": "sigmoid", "top_k": 1, "shared_expert": True},
    ],
    ids=["capacity-softmax", "dropless-sigmoid-shared"],
)
def test_experts_equal_hand_built_blocks_and_modules(options):
    """Blocks 0 and 2 are mixtures (`num_experts=[4, None]`), block 1 dense:
    the Transformer equals NumPy attention and dense MLPs with separately
    built `snt.MixtureOfExperts` modules, and its auxiliary losses are the
    sum of theirs."""
    model = snt.nets.Transformer(
        num_layers=3,
        num_heads=2,
        model_size=8,
        mlp_hidden_size=6,
        activation="relu",
        causal=True,
        num_experts=[4, None],
        **options,
    )
    x = _data(2, 5, 8, seed=1)
    outputs, losses = model(x, return_aux_losses=True)
    assert [b.num_experts for b in model.blocks] == [4, None, 4]
    assert not hasattr(model.blocks[0], "mlp_in")
    assert not hasattr(model.blocks[1], "mlp_experts")

    h = x.numpy()
    expected: dict[str, float] = {"load_balancing": 0.0, "router_z": 0.0}
    for block in model.blocks:
        h = h + _np_attention(block.attention, _np_norm(block.attention_norm, h))
        normed = _np_norm(block.mlp_norm, h)
        if block.num_experts is None:
            h = h + _np_dense_mlp(block, normed)
            continue
        moe = snt.MixtureOfExperts(4, 6, activation="relu", **options)
        moe(tf.constant(normed))
        _copy(block.mlp_experts, moe)
        y, aux = moe(tf.constant(normed, tf.float32), return_aux_losses=True)
        h = h + y.numpy()
        for name in expected:
            expected[name] += float(aux[name])
    h = _np_norm(model.final_norm, h)
    np.testing.assert_allclose(outputs, h, rtol=1e-4, atol=1e-5)
    assert sorted(losses) == ["load_balancing", "router_z"]
    for name, value in expected.items():
        assert losses[name].dtype == tf.float32
        np.testing.assert_allclose(losses[name], value, rtol=1e-5)
    # Without `return_aux_losses`, the same outputs.
    np.testing.assert_allclose(model(x), outputs, rtol=1e-6, atol=1e-6)


def test_expert_mlps_use_the_blocks_options():
    model = snt.nets.Transformer(
        num_layers=1,
        num_heads=2,
        model_size=8,
        activation="swiglu",
        mlp_hidden_size=12,
        mlp_bias=False,
        num_experts=3,
        top_k=1,
        normalize_gates=True,
        w_init=snt.initializers.Constant(0.01),
    )
    moe = model.blocks[0].mlp_experts
    assert isinstance(moe, snt.MixtureOfExperts)
    assert (moe.num_experts, moe.hidden_size, moe.top_k) == (3, 12, 1)
    assert (moe.activation, moe.with_bias, moe.normalize_gates) == (
        "swiglu",
        False,
        True,
    )
    model(_data(1, 2, 8))
    names = sorted(v.name for v in model.blocks[0].mlp_experts.variables)
    assert names == [
        "transformer/block_0/mlp_experts/router/w:0",
        "transformer/block_0/mlp_experts/w_gate:0",
        "transformer/block_0/mlp_experts/w_in:0",
        "transformer/block_0/mlp_experts/w_out:0",
    ]
    np.testing.assert_array_equal(moe.w_in.numpy(), np.float32(0.01))
    assert moe.w_in.shape == [3, 8, 12]


def test_gradients_reach_experts_and_router():
    model = snt.nets.Transformer(
        num_layers=2, num_heads=2, model_size=8, num_experts=4, capacity_factor=2.0
    )
    x = _data(2, 6, 8, seed=2)
    with tf.GradientTape(persistent=True) as tape:
        outputs, losses = model(x, return_aux_losses=True)
        task = tf.reduce_sum(tf.square(outputs))
        aux = losses["load_balancing"] + losses["router_z"]
    experts = [v for v in model.trainable_variables if "mlp_experts" in v.name]
    assert len(experts) == 2 * 5  # router w, w_in, b_in, w_out, b_out.
    for v, g in zip(experts, tape.gradient(task, experts), strict=True):
        assert g is not None and float(tf.reduce_max(tf.abs(g))) > 0, v.name
    # The auxiliary losses train the routers (and what comes before them),
    # not the last block's experts, whose outputs no router sees.
    routers = [v for v in experts if "router" in v.name]
    for g in tape.gradient(aux, routers):
        assert g is not None and float(tf.reduce_max(tf.abs(g))) > 0
    last = model.blocks[1].mlp_experts
    after = [last.w_in, last.b_in, last.w_out, last.b_out, *model.final_norm.variables]
    assert all(g is None for g in tape.gradient(aux, after))


# ---------------------------------------------------------------------------
# Stacking, decoding, tracing.


@pytest.mark.parametrize("remat", [False, True])
def test_stacked_experts_equal_unrolled(remat):
    kwargs: dict[str, Any] = {
        "num_layers": 3,
        "num_heads": 2,
        "model_size": 8,
        "num_experts": 4,
        "top_k": 2,
        "causal": True,
    }
    unrolled = snt.nets.Transformer(**kwargs)
    stacked = snt.nets.Transformer(stacked=True, remat=remat, **kwargs)
    x = _data(2, 5, 8, seed=3)
    unrolled(x)
    stacked(x)
    names = [v.name for v in stacked.variables if "mlp_experts" in v.name]
    assert "transformer/stack/block/mlp_experts/w_in:0" in names
    snt.nets.copy_transformer_weights(unrolled, stacked)
    expected, expected_losses = unrolled(x, return_aux_losses=True)
    outputs, losses = stacked(x, return_aux_losses=True)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    for name in ("load_balancing", "router_z"):
        assert losses[name].shape == []
        np.testing.assert_allclose(losses[name], expected_losses[name], rtol=1e-5)
    # Gradients through the loop, remat or not, are the unrolled model's.
    with tf.GradientTape() as tape:
        y, aux = stacked(x, return_aux_losses=True)
        loss = tf.reduce_sum(y**2) + aux["load_balancing"]
    grads = tape.gradient(loss, stacked.trainable_variables)
    assert all(g is not None for g in grads)


@pytest.mark.parametrize("stacked", [False, True])
def test_decoding_with_experts_equals_the_whole_sequence(stacked):
    model = snt.nets.Transformer(
        num_layers=2,
        num_heads=2,
        model_size=8,
        causal=True,
        rotary=True,
        stacked=stacked,
        num_experts=3,
        activation="swiglu",
    )
    x = _data(2, 6, 8, seed=4)
    full = model(x)
    cache = model.initial_cache(2, 6)
    steps = []
    for t in range(6):
        y, cache = model(x[:, t : t + 1], cache=cache)
        steps.append(y)
    np.testing.assert_allclose(tf.concat(steps, 1), full, rtol=1e-4, atol=1e-5)


def test_causal_lm_runs_and_decodes_with_experts():
    transformer = snt.nets.Transformer(
        num_layers=1, num_heads=2, model_size=8, causal=True, rotary=True,
        num_experts=2, top_k=1,
    )  # fmt: skip
    lm = snt.nets.CausalLM(vocab_size=11, transformer=transformer)
    tokens = tf.constant([[1, 5, 2, 7]])
    logits = lm(tokens)
    cache = lm.initial_cache(batch_size=1, max_length=4)
    first, cache = lm(tokens[:, :3], cache=cache)
    last, cache = lm(tokens[:, 3:], cache=cache)
    np.testing.assert_allclose(
        tf.concat([first, last], 1), logits, rtol=1e-4, atol=1e-5
    )
    # The training losses pass through; decoding refuses them.
    same, losses = lm(tokens, return_aux_losses=True)
    np.testing.assert_allclose(same, logits, rtol=1e-6)
    _, expected = transformer(lm.embed(tokens), return_aux_losses=True)
    np.testing.assert_allclose(losses["router_z"], expected["router_z"], rtol=1e-6)
    with pytest.raises(ValueError, match="`return_aux_losses` must be False with"):
        lm(tokens[:, :1], cache=lm.initial_cache(1, 2), return_aux_losses=True)
    # No Hugging Face family has these blocks: `snt.hf.save` says so.
    with pytest.raises(ValueError, match="`model` must have dense MLPs"):
        snt.hf.save(lm, "unused")


@pytest.mark.parametrize("stacked", [False, True])
def test_traced_and_compiled_with_a_capacity_factor(stacked):
    model = snt.nets.Transformer(
        num_layers=2,
        num_heads=2,
        model_size=8,
        stacked=stacked,
        num_experts=4,
        capacity_factor=1.25,
    )
    x = _data(2, 4, 8, seed=5)
    eager, eager_losses = model(x, return_aux_losses=True)
    for jit_compile in (False, True):
        step = tf.function(
            lambda x: model(x, return_aux_losses=True), jit_compile=jit_compile
        )
        outputs, losses = step(x)
        np.testing.assert_allclose(outputs, eager, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(
            losses["router_z"], eager_losses["router_z"], rtol=1e-5
        )


def test_dropless_experts_refuse_xla_naming_capacity_factor():
    model = snt.nets.Transformer(num_layers=1, num_heads=2, model_size=8, num_experts=2)
    x = _data(1, 3, 8)
    model(x)
    step = tf.function(lambda x: model(x), jit_compile=True)
    with pytest.raises(ValueError, match="`capacity_factor` must not be None"):
        step(x)


def test_checkpoint_round_trip_with_experts(tmp_path):
    def make() -> snt.nets.Transformer:
        return snt.nets.Transformer(
            num_layers=2, num_heads=2, model_size=8, num_experts=[None, 3]
        )

    model, x = make(), _data(2, 3, 8, seed=6)
    expected = model(x)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    names = [name for name, _ in tf.train.list_variables(path)]
    assert "model/blocks/1/mlp_experts/w_in/.ATTRIBUTES/VARIABLE_VALUE" in names
    assert "model/blocks/1/mlp_experts/router/w/.ATTRIBUTES/VARIABLE_VALUE" in names
    fresh = make()
    status = tf.train.Checkpoint(model=fresh).read(path)
    np.testing.assert_allclose(fresh(x), expected, rtol=1e-6)
    status.assert_consumed()


# ---------------------------------------------------------------------------
# Defaults unchanged.


def test_a_transformer_without_the_options_is_unchanged():
    def build(**kwargs: Any) -> tuple[snt.nets.Transformer, tf.Tensor]:
        tf.random.set_seed(11)
        model = snt.nets.Transformer(num_layers=2, num_heads=2, model_size=8, **kwargs)
        return model, model(_data(2, 3, 8, seed=7))

    plain, outputs = build()
    explicit, same = build(
        chunked=None, chunk_size=512, num_experts=None, shared_expert=False
    )
    assert repr(plain) == repr(explicit)
    assert repr(plain) == "Transformer(num_layers=2, num_heads=2, model_size=8)"
    assert repr(plain.blocks[0]).split() == [
        "TransformerBlock(",
        "num_heads=2,",
        "model_size=8,",
        "key_size=4,",
        "mlp_hidden_size=32,",
        "name='block_0',",
        ")",
    ]
    np.testing.assert_array_equal(same, outputs)
    block = [
        v.name for v in plain.variables if v.name.startswith("transformer/block_0")
    ]
    assert block == [
        f"transformer/block_0/{n}:0"
        for n in [
            "attention/key/b",
            "attention/key/w",
            "attention/output/b",
            "attention/output/w",
            "attention/query/b",
            "attention/query/w",
            "attention/value/b",
            "attention/value/w",
            "attention_norm/offset",
            "attention_norm/scale",
            "mlp_in/b",
            "mlp_in/w",
            "mlp_norm/offset",
            "mlp_norm/scale",
            "mlp_out/b",
            "mlp_out/w",
        ]
    ]
    assert plain.blocks[0].num_experts is None
    assert plain.blocks[0].attention.chunked is None
    assert plain.blocks[0].attention.chunk_size == 512


# ---------------------------------------------------------------------------
# Chunked attention through the Transformer.


@pytest.mark.parametrize(
    "kwargs",
    [
        {"causal": True, "rotary": True},
        {"causal": True, "window": [3, None]},
        {"causal": False, "num_kv_heads": 1},
        {"causal": True, "stacked": True},
    ],
    ids=["causal-rotary", "window-pattern", "encoder-gqa", "stacked"],
)
def test_chunked_attention_equals_the_dense_path(kwargs):
    common = {"num_layers": 2, "num_heads": 2, "model_size": 8, **kwargs}
    dense = snt.nets.Transformer(chunked=False, **common)
    chunked = snt.nets.Transformer(chunked=True, chunk_size=3, **common)
    layers = [chunked.stack.layer] if chunked.stacked else chunked.blocks
    assert all(b.attention.chunked and b.attention.chunk_size == 3 for b in layers)
    x = _data(2, 10, 8, seed=8)
    dense(x)
    chunked(x)
    for s, t in zip(dense.variables, chunked.variables, strict=True):
        t.assign(s)
    with tf.GradientTape(persistent=True) as tape:
        expected = dense(x)
        outputs = chunked(x)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    g_dense = tape.gradient(expected, dense.trainable_variables)
    g_chunked = tape.gradient(outputs, chunked.trainable_variables)
    for a, b in zip(g_dense, g_chunked, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
    if kwargs["causal"]:  # A chunked prefill, then one position.
        cache = chunked.initial_cache(2, 10)
        first, cache = chunked(x[:, :9], cache=cache)
        last, _ = chunked(x[:, 9:], cache=cache)
        np.testing.assert_allclose(
            tf.concat([first, last], 1), expected, rtol=1e-4, atol=1e-5
        )


# ---------------------------------------------------------------------------
# Bad input: errors name the Transformer's arguments.

_SMALL = {"num_layers": 2, "num_heads": 2, "model_size": 8}


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"num_experts": 2, "top_k": 3}, ValueError, "`top_k` must be at most"),
        ({"num_experts": 0}, ValueError, "`num_experts`"),
        ({"num_experts": [4, 0]}, ValueError, "`num_experts`"),
        ({"num_experts": []}, ValueError, "`num_experts` must be an int, None or"),
        ({"num_experts": 2.5}, TypeError, "`num_experts`"),
        ({"num_experts": 4, "capacity_factor": 0}, ValueError, "`capacity_factor`"),
        ({"num_experts": 4, "capacity_factor": -1.0}, ValueError, "capacity_factor"),
        ({"num_experts": 4, "gating": "relu"}, ValueError, "`gating` must be one"),
        ({"num_experts": 4, "shared_expert": "yes"}, TypeError, "`shared_expert`"),
        ({"top_k": 2}, ValueError, "`top_k` is an option of mixture-of-experts"),
        ({"capacity_factor": 1.0}, ValueError, "`capacity_factor` is an option"),
        ({"gating": "sigmoid"}, ValueError, "`gating` is an option"),
        ({"normalize_gates": False}, ValueError, "`normalize_gates` is an option"),
        ({"shared_expert": True}, ValueError, "`shared_expert` is an option"),
        (
            {"num_experts": [4, None], "stacked": True},
            ValueError,
            "`num_experts` must give every layer the same number of experts",
        ),
        ({"chunk_size": 0}, ValueError, "`chunk_size`"),
        ({"chunked": "yes"}, TypeError, "`chunked`"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        snt.nets.Transformer(**{**_SMALL, **kwargs})


def test_block_refuses_expert_options_without_experts():
    with pytest.raises(ValueError, match="`top_k` is an option"):
        snt.nets.TransformerBlock(num_heads=2, model_size=8, top_k=1)


def test_bad_return_aux_losses():
    dense = snt.nets.Transformer(**_SMALL, causal=True)
    x = _data(1, 2, 8)
    with pytest.raises(ValueError, match="`return_aux_losses` must be False without"):
        dense(x, return_aux_losses=True)
    with pytest.raises(ValueError, match="`return_aux_losses` must be False without"):
        dense.blocks[0](x, return_aux_losses=True)
    for stacked in (False, True):
        moe = snt.nets.Transformer(
            **_SMALL, causal=True, num_experts=2, stacked=stacked
        )
        with pytest.raises(TypeError, match="`return_aux_losses` must be a bool"):
            moe(x, return_aux_losses="yes")
        cache = moe.initial_cache(1, 4)
        with pytest.raises(ValueError, match="`return_aux_losses` must be False with"):
            moe(x, cache=cache, return_aux_losses=True)
        # A false value is the plain call.
        np.testing.assert_array_equal(moe(x, return_aux_losses=0), moe(x))


def test_mixed_precision_keeps_the_losses_in_float32():
    model = snt.nets.Transformer(**_SMALL, num_experts=3, capacity_factor=2.0)
    x = _data(2, 4, 8, seed=9)
    expected, expected_losses = model(x, return_aux_losses=True)
    snt.precision.apply(model, "mixed_bfloat16")
    with tf.GradientTape() as tape:
        outputs, losses = model(x, return_aux_losses=True)
        loss = tf.reduce_sum(tf.cast(outputs, tf.float32)) + losses["router_z"]
    assert outputs.dtype == tf.bfloat16
    assert {v.dtype for v in losses.values()} == {tf.float32}
    np.testing.assert_allclose(tf.cast(outputs, tf.float32), expected, atol=0.1)
    np.testing.assert_allclose(
        losses["load_balancing"], expected_losses["load_balancing"], rtol=0.1
    )
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None and g.dtype == tf.float32 for g in grads)


def test_chunked_attention_of_an_empty_sequence_is_the_dense_result():
    # A static length of 0 is no blocks: the dense path answers.
    model = snt.nets.Transformer(**_SMALL, causal=True, chunked=True, chunk_size=2)
    mha = model.blocks[0].attention
    assert model(tf.zeros([2, 0, 8])).shape == [2, 0, 8]
    assert mha(tf.ones([2, 3, 8]), tf.zeros([2, 0, 8])).shape == [2, 3, 8]
