"""`snt.hf`: Hugging Face checkpoints in and out, against the reference fixtures.

`tests/hf_fixtures/` holds tiny models written by `transformers` with the
logits and greedy tokens `transformers` computes for them
(`make_fixtures.py`). Nothing here needs torch.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src.hf import checkpoint, files, layout
from sonnet._src.hf import config as config_lib

FIXTURES = pathlib.Path(__file__).resolve().parent / "hf_fixtures"
FAMILIES = ["gpt2", "llama2", "llama3", "llama_bias", "mistral", "qwen2", "qwen3"]


def _reference(case: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / case / "reference.npz") as data:
        return dict(data)


def _assert_logits(actual: object, expected: np.ndarray) -> None:
    """Equal to 1e-4 relative (of the largest logit)."""
    actual = np.asarray(actual)
    scale = float(np.max(np.abs(expected)))
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * scale)


def _copy(case: str, tmp_path: pathlib.Path) -> pathlib.Path:
    target = tmp_path / case
    shutil.copytree(FIXTURES / case, target)
    return target


def _edit_config(folder: pathlib.Path, **changes: object) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config))


@pytest.mark.parametrize("case", [*FAMILIES, "llama3_bf16"])
def test_load_matches_reference_logits(case):
    model = snt.hf.load(FIXTURES / case)
    reference = _reference(case)
    _assert_logits(model(tf.constant(reference["tokens"])), reference["logits"])
    assert all(v.dtype == tf.float32 for v in model.variables)


def test_load_sharded():
    model = snt.hf.load(str(FIXTURES / "llama3_sharded"))
    reference = _reference("llama3_sharded")
    _assert_logits(model(tf.constant(reference["tokens"])), reference["logits"])


def test_loaded_model_is_plain_modules():
    model = snt.hf.load(FIXTURES / "llama3")
    assert isinstance(model, snt.nets.CausalLM)
    attention = model.transformer.blocks[0].attention
    assert isinstance(attention, snt.MultiHeadAttention)
    assert (attention.num_heads, attention.num_kv_heads, attention.key_size) == (
        4,
        2,
        8,
    )
    assert attention.rotary_scaling["rope_type"] == "llama3"
    assert model.tie_embeddings and not hasattr(model, "head")
    names = {v.name for v in model.variables}
    assert "causal_lm/transformer/block_0/attention/query/w:0" in names
    qwen3 = snt.hf.load(FIXTURES / "qwen3").transformer.blocks[0].attention
    assert qwen3.query_norm.scale.shape == [8]
    qwen2 = snt.hf.load(FIXTURES / "qwen2").transformer.blocks[0].attention
    assert qwen2.query.with_bias and not qwen2.output.with_bias
    gpt2 = snt.hf.load(FIXTURES / "gpt2")
    assert gpt2.positions.embeddings.shape == [64, 16]


def _as_4x(config: dict) -> dict:
    """A 5.x config rewritten as transformers 4.x writes it."""
    config = dict(config)
    rope = dict(config.pop("rope_parameters"))
    config["rope_theta"] = rope.pop("rope_theta")
    config["rope_scaling"] = None if rope["rope_type"] == "default" else rope
    return config


@pytest.mark.parametrize("case", ["llama2", "llama3", "mistral", "qwen3"])
def test_load_transformers_4x_config(case, tmp_path):
    folder = _copy(case, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(_as_4x(config)))
    reference = _reference(case)
    model = snt.hf.load(folder)
    _assert_logits(model(tf.constant(reference["tokens"])), reference["logits"])


def test_4x_rope_scaling_with_type_key(tmp_path):
    folder = _copy("llama3", tmp_path)
    config = _as_4x(json.loads((folder / "config.json").read_text()))
    config["rope_scaling"]["type"] = config["rope_scaling"].pop("rope_type")
    (folder / "config.json").write_text(json.dumps(config))
    reference = _reference("llama3")
    _assert_logits(
        snt.hf.load(folder)(tf.constant(reference["tokens"])), reference["logits"]
    )


def test_load_keeps_bfloat16_under_a_policy():
    policy = snt.precision.Policy(tf.bfloat16, tf.bfloat16)
    model = snt.hf.load(FIXTURES / "llama3_bf16", precision=policy)
    w = model.transformer.blocks[0].attention.query.w
    assert w.dtype == tf.bfloat16
    reference = _reference("llama3_bf16")
    logits = tf.cast(model(tf.constant(reference["tokens"])), tf.float32)
    # bfloat16 compute: close, not equal.
    assert np.mean(np.argmax(logits, -1) == np.argmax(reference["logits"], -1)) > 0.8


# Saving.


@pytest.mark.parametrize("case", FAMILIES)
def test_save_load_round_trip(case, tmp_path):
    model = snt.hf.load(FIXTURES / case)
    names = snt.hf.save(model, tmp_path / case)
    assert names == ["config.json", "model.safetensors"]
    again = snt.hf.load(tmp_path / case)
    reference = _reference(case)
    tokens = tf.constant(reference["tokens"])
    np.testing.assert_array_equal(again(tokens), model(tokens))
    config = json.loads((tmp_path / case / "config.json").read_text())
    original = json.loads((FIXTURES / case / "config.json").read_text())
    assert config["model_type"] == original["model_type"]
    assert config["eos_token_id"] == original["eos_token_id"]
    assert config_lib.from_config(config) == config_lib.from_config(original)


def test_save_sharded_with_index(tmp_path):
    model = snt.hf.load(FIXTURES / "llama2")
    names = snt.hf.save(model, tmp_path, max_shard_size="20KB")
    assert names == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ]
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(names[1:3])
    assert index["metadata"]["total_size"] == sum(
        int(np.prod(v.shape)) * 4 for v in model.variables
    )
    reference = _reference("llama2")
    _assert_logits(
        snt.hf.load(tmp_path)(tf.constant(reference["tokens"])), reference["logits"]
    )
    # Saving again unsharded replaces the shards.
    snt.hf.save(model, tmp_path, max_shard_size=10**9)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json",
        "model.safetensors",
    ]


def test_save_bfloat16(tmp_path):
    model = snt.hf.load(FIXTURES / "llama3_bf16")
    snt.hf.save(model, tmp_path, dtype="bfloat16")
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "bfloat16"
    original = (FIXTURES / "llama3_bf16" / "model.safetensors").stat().st_size
    assert abs((tmp_path / "model.safetensors").stat().st_size - original) < 1000
    reference = _reference("llama3_bf16")
    _assert_logits(
        snt.hf.load(tmp_path)(tf.constant(reference["tokens"])), reference["logits"]
    )


def _small_lm(**options: object) -> snt.nets.CausalLM:
    transformer = dict(
        num_layers=2,
        num_heads=4,
        model_size=16,
        mlp_hidden_size=24,
        activation="swiglu",
        norm="rms",
        causal=True,
        rotary=True,
        with_bias=False,
    )
    lm_options = {
        k: options.pop(k) for k in ("max_positions", "tie_embeddings") if k in options
    }
    transformer.update(options)
    lm = snt.nets.CausalLM(32, snt.nets.Transformer(**transformer), **lm_options)
    lm(tf.constant([[1, 2]]))
    return lm


@pytest.mark.parametrize(
    "options,model_type",
    [
        ({}, "llama"),
        ({"num_kv_heads": 2, "tie_embeddings": True}, "llama"),
        ({"with_bias": True}, "llama"),
        ({"attention_bias": True, "attention_output_bias": False}, "qwen2"),
        ({"qk_norm": True, "key_size": 8}, "qwen3"),
        ({"window": 3}, "mistral"),
        (
            {
                "rotary": False,
                "max_positions": 8,
                "with_bias": True,
                "norm": "layer",
                "activation": "gelu_tanh",
                "mlp_hidden_size": 64,
            },
            "gpt2",
        ),
    ],
)
def test_save_new_model_families(options, model_type, tmp_path):
    model = _small_lm(**options)
    snt.hf.save(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == model_type
    tokens = tf.constant([[3, 1, 4, 1, 5, 9]])
    np.testing.assert_allclose(
        snt.hf.load(tmp_path)(tokens), model(tokens), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize(
    "options",
    [
        {"activation": "relu"},
        {"norm": "layer"},
        {"rotary": False},
        {"rotary": True, "max_positions": 8},
        {"window": 3, "with_bias": True},
        {"mlp_bias": True, "attention_bias": True, "attention_output_bias": False},
    ],
)
def test_save_refuses_models_of_no_family(options, tmp_path):
    with pytest.raises(ValueError, match="`model` must"):
        snt.hf.save(_small_lm(**options), tmp_path)


def test_save_errors(tmp_path):
    with pytest.raises(TypeError, match="`model` must be an `snt.nets.CausalLM`"):
        snt.hf.save(snt.Linear(2), tmp_path)
    stacked = snt.nets.CausalLM(
        8, snt.nets.Transformer(1, 2, 8, causal=True, rotary=True, stacked=True)
    )
    with pytest.raises(ValueError, match="stacked=False"):
        snt.hf.save(stacked, tmp_path)
    unbuilt = snt.nets.CausalLM(
        8,
        snt.nets.Transformer(
            1, 2, 8, causal=True, rotary=True, activation="swiglu", norm="rms"
        ),
    )
    with pytest.raises(ValueError, match="must be built"):
        snt.hf.save(unbuilt, tmp_path)
    model = _small_lm()
    for size in (0, "lots", -3, True):
        with pytest.raises(ValueError, match="`max_shard_size` must be a positive"):
            snt.hf.save(model, tmp_path, max_shard_size=size)
    with pytest.raises(ValueError, match="`dtype` must be float32, float16"):
        snt.hf.save(model, tmp_path, dtype="int8")
    with pytest.raises(TypeError, match="`dtype` must be a floating point"):
        snt.hf.save(model, tmp_path, dtype="nonsense")


# Bad checkpoints: clear errors naming the file and key.


def test_load_errors_path(tmp_path):
    with pytest.raises(TypeError, match="`path` must be a directory path"):
        snt.hf.load(3)
    with pytest.raises(ValueError, match="`path` must be an existing directory"):
        snt.hf.load(tmp_path / "absent")
    with pytest.raises(ValueError, match="`path` must contain config.json"):
        snt.hf.load(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="must be a readable JSON file"):
        snt.hf.load(tmp_path)
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        snt.hf.load(tmp_path)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"model_type": "bert"}, "model_type` must be one of"),
        ({"model_type": None}, "model_type` must be one of"),
        ({"hidden_act": "gelu"}, "hidden_act` is not supported"),
        ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}, "rope_type"),
        ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "rope_type"),
        ({"rope_parameters": {"partial_rotary_factor": 0.5}}, "partial_rotary"),
        ({"rope_parameters": [1]}, "rope_parameters` must be a mapping"),
        ({"quantization_config": {"bits": 4}}, "quantization_config"),
        ({"hidden_size": "16"}, "hidden_size` must be a positive integer"),
        ({"hidden_size": None}, "hidden_size` is required"),
        ({"rms_norm_eps": "small"}, "rms_norm_eps` must be a number"),
        ({"tie_word_embeddings": 1}, "tie_word_embeddings` must be true or false"),
        ({"use_sliding_window": True}, "use_sliding_window` is not supported"),
        ({"layer_types": ["sliding_attention"] * 2}, "layer_types"),
    ],
)
def test_load_refuses_configs(changes, message, tmp_path):
    folder = _copy("llama2", tmp_path)
    _edit_config(folder, **changes)
    with pytest.raises(ValueError, match=message) as info:
        snt.hf.load(folder)
    assert "config.json" in str(info.value)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"activation_function": "swish"}, "activation_function` is not supported"),
        ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse"),
        ({"add_cross_attention": True}, "add_cross_attention"),
        ({"n_head": 3}, "n_embd` must be a multiple"),
    ],
)
def test_load_refuses_gpt2_configs(changes, message, tmp_path):
    folder = _copy("gpt2", tmp_path)
    _edit_config(folder, **changes)
    with pytest.raises(ValueError, match=message):
        snt.hf.load(folder)


def _rewrite(folder: pathlib.Path, edit) -> None:
    from safetensors.numpy import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path), metadata={"format": "pt"})


def test_load_refuses_missing_extra_and_misshaped_tensors(tmp_path):
    folder = _copy("llama2", tmp_path)
    _rewrite(folder, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(ValueError, match=r"missing: \['model.layers.1.mlp.up_proj"):
        snt.hf.load(folder)
    folder = _copy("llama2", tmp_path / "extra")
    _rewrite(folder, lambda t: t.update(extra=np.zeros([2], np.float32)))
    with pytest.raises(ValueError, match=r"unexpected: \['extra'\]"):
        snt.hf.load(folder)
    folder = _copy("llama2", tmp_path / "shape")
    key = "model.layers.0.self_attn.q_proj.weight"
    _rewrite(folder, lambda t: t.update({key: np.zeros([16, 8], np.float32)}))
    with pytest.raises(ValueError, match="q_proj.weight` must have shape"):
        snt.hf.load(folder)
    folder = _copy("llama2", tmp_path / "dtype")
    _rewrite(folder, lambda t: t.update({key: np.zeros([16, 16], np.int8)}))
    with pytest.raises(ValueError, match="q_proj.weight` must have a floating"):
        snt.hf.load(folder)


def test_load_refuses_truncated_and_missing_files(tmp_path):
    folder = _copy("llama2", tmp_path)
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="model.safetensors` must be a complete"):
        snt.hf.load(folder)
    path.unlink()
    with pytest.raises(ValueError, match="must contain model.safetensors or"):
        snt.hf.load(folder)
    folder = _copy("llama3_sharded", tmp_path / "sharded")
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ValueError, match="00002.safetensors` must exist"):
        snt.hf.load(folder)
    folder = _copy("llama3_sharded", tmp_path / "index")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="lists tensor 'model.norm.weight'"):
        snt.hf.load(folder)
    index["weight_map"] = {}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="must have a non-empty `weight_map`"):
        snt.hf.load(folder)


def test_load_accepts_unprefixed_names_and_old_buffers(tmp_path):
    folder = _copy("gpt2", tmp_path)

    def edit(tensors):
        for key in list(tensors):
            tensors[key.removeprefix("transformer.")] = tensors.pop(key)
        tensors["h.0.attn.bias"] = np.ones([1, 1, 4, 4], np.float32)

    _rewrite(folder, edit)
    reference = _reference("gpt2")
    _assert_logits(
        snt.hf.load(folder)(tf.constant(reference["tokens"])), reference["logits"]
    )


def test_load_refuses_duplicate_names(tmp_path):
    folder = _copy("gpt2", tmp_path)
    _rewrite(folder, lambda t: t.update({"wte.weight": t["transformer.wte.weight"]}))
    with pytest.raises(ValueError, match="must hold 'transformer.wte.weight' once"):
        snt.hf.load(folder)


def _file_tensors(folder: pathlib.Path) -> dict[str, np.ndarray]:
    """Every tensor of the safetensors files in `folder`, parsed here with
    NumPy (independently of `snt.hf`'s reader)."""
    import ml_dtypes

    dtypes = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}
    tensors = {}
    for path in sorted(folder.glob("*.safetensors")):
        data = path.read_bytes()
        size = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + size])
        header.pop("__metadata__", None)
        for key, info in header.items():
            begin, end = info["data_offsets"]
            raw = data[8 + size + begin : 8 + size + end]
            array = np.frombuffer(raw, dtypes[info["dtype"]])
            tensors[key] = array.reshape(info["shape"])
    return tensors


def _assert_loaded_from_files(model, folder: pathlib.Path) -> None:
    """Every variable of `model` holds its tensor of the files in `folder`
    (cast by TensorFlow to the variable's dtype), none is left out."""
    tensors = _file_tensors(folder)
    spec = checkpoint.spec(folder)
    found = layout.entries(model, spec.layout)
    filled = [v.ref() for entry in found for v in entry.parts]
    assert set(filled) == {v.ref() for v in model.variables}
    assert len(filled) == len(model.variables)
    for entry in found:
        parts = [v.numpy() for v in entry.parts]
        ours = np.concatenate(parts, entry.axis) if len(parts) > 1 else parts[0]
        if entry.transpose:
            ours = ours.T
        dtype = entry.parts[0].dtype
        expected = tf.cast(tf.constant(tensors[entry.key]), dtype).numpy()
        np.testing.assert_array_equal(ours, expected, err_msg=entry.key)


@pytest.mark.parametrize("case", [*FAMILIES, "llama3_bf16", "llama3_sharded"])
def test_every_loaded_weight_is_the_files(case):
    folder = FIXTURES / case
    _assert_loaded_from_files(snt.hf.load(folder), folder)


@pytest.mark.parametrize(
    "case, policy",
    [
        ("gpt2", None),  # c_attn: one tensor split into three variables.
        ("llama3", None),  # Transposed projections, a tied table.
        ("llama3_bf16", None),  # Cast from bfloat16.
        ("llama3", "bfloat16"),  # Cast to bfloat16 variables.
        ("llama3_sharded", None),
    ],
)
@pytest.mark.parametrize("block_bytes, workers", [(1, 1), (100, 3)])
def test_load_in_tiny_blocks(case, policy, block_bytes, workers, monkeypatch):
    # Blocks of one row, or a few, of each tensor; reads of 7 bytes, which
    # end inside elements; transposed copies 3 or 6 columns at a time; every
    # array, however small, in memory of its own (mapped, taken over by
    # TensorFlow through DLPack): the paths the fixtures are too small for.
    # In this thread, and in three threads at once.
    monkeypatch.setattr(checkpoint, "WORKERS", workers)
    monkeypatch.setattr(files, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(files, "READ_BYTES", 7)
    monkeypatch.setattr(files, "OWN_MEMORY_BYTES", 1)
    monkeypatch.setattr(checkpoint, "_COLUMN_BYTES", 12)
    precision = None if policy is None else snt.precision.Policy(policy, policy)
    model = snt.hf.load(FIXTURES / case, precision=precision)
    _assert_loaded_from_files(model, FIXTURES / case)
    if policy is None:
        reference = _reference(case)
        _assert_logits(model(tf.constant(reference["tokens"])), reference["logits"])
    # The variables' memory is writable in place (as an optimizer updates it).
    w = model.transformer.blocks[0].mlp_out.w
    before = w.numpy()
    w.assign_sub(w)
    assert not np.any(w.numpy()) and np.any(before)


def test_load_reports_a_file_cut_while_reading(tmp_path, monkeypatch):
    folder = _copy("llama2", tmp_path)
    path = folder / "model.safetensors"
    check = checkpoint.check_tensors

    def check_then_cut(*args):
        names = check(*args)  # The headers were read whole: now cut the file.
        path.write_bytes(path.read_bytes()[:-100])
        return names

    monkeypatch.setattr(checkpoint, "check_tensors", check_then_cut)
    for workers in (1, 3):
        monkeypatch.setattr(checkpoint, "WORKERS", workers)
        with pytest.raises(ValueError, match="safetensors file .the file ends"):
            snt.hf.load(folder)
        path.write_bytes((FIXTURES / "llama2" / "model.safetensors").read_bytes())


# Generation.


@pytest.mark.parametrize("case", FAMILIES)
def test_greedy_matches_reference(case):
    model = snt.hf.load(FIXTURES / case)
    reference = _reference(case)
    tokens = snt.hf.generate(model, reference["prompt"], 8)
    np.testing.assert_array_equal(tokens, reference["greedy"])


def test_generate_prompts_of_different_lengths():
    model = snt.hf.load(FIXTURES / "llama2")
    prompt = _reference("llama2")["prompt"][0].tolist()
    prompts = [prompt, prompt[:2], prompt[1:4]]
    together = snt.hf.generate(model, prompts, 6).numpy()
    for row, alone in zip(together, prompts):
        np.testing.assert_array_equal(row, snt.hf.generate(model, [alone], 6)[0])


def test_generate_sampling_is_seeded():
    model = snt.hf.load(FIXTURES / "qwen2")
    prompts = [[5, 6, 7], [8]]
    options = dict(temperature=0.8, top_k=20, top_p=0.9, seed=4)
    first = snt.hf.generate(model, prompts, 6, **options).numpy()
    np.testing.assert_array_equal(first, snt.hf.generate(model, prompts, 6, **options))
    other = snt.hf.generate(model, prompts, 6, **{**options, "seed": 5}).numpy()
    assert (first != other).any()
    # top_k=1 and a tiny top_p are greedy.
    greedy = snt.hf.generate(model, prompts, 6).numpy()
    for narrow in ({"top_k": 1}, {"top_p": 1e-6}):
        sampled = snt.hf.generate(model, prompts, 6, temperature=1.0, **narrow)
        np.testing.assert_array_equal(sampled, greedy)


def test_generate_filters_match_numpy():
    from sonnet._src.hf.generate import _filter

    logits = np.log(np.array([[0.5, 0.05, 0.3, 0.15]], np.float32))
    kept = lambda **kw: np.isfinite(_filter(tf.constant(logits), **kw)).tolist()  # noqa: E731
    assert kept(top_k=2, top_p=None) == [[True, False, True, False]]
    # Cumulative mass before each token, in order 0.5, 0.3, 0.15, 0.05:
    # 0, 0.5, 0.8, 0.95.
    assert kept(top_k=None, top_p=0.8) == [[True, False, True, False]]
    assert kept(top_k=None, top_p=0.81) == [[True, False, True, True]]
    assert kept(top_k=None, top_p=1.0) == [[True] * 4]


def test_generate_stop_tokens_and_padding():
    model = snt.hf.load(FIXTURES / "llama2")
    reference = _reference("llama2")
    greedy = reference["greedy"][0]
    tokens = snt.hf.generate(
        model, reference["prompt"], 8, stop_tokens=[int(greedy[2])], pad_token=1
    ).numpy()[0]
    np.testing.assert_array_equal(tokens[:3], greedy[:3])
    assert (tokens[3:] == 1).all()


def test_generate_with_xla():
    model = snt.hf.load(FIXTURES / "mistral")
    reference = _reference("mistral")
    tokens = snt.hf.generate(model, reference["prompt"], 8, jit_compile=True)
    np.testing.assert_array_equal(tokens, reference["greedy"])


def test_generate_traces_once_per_shape():
    model = snt.hf.load(FIXTURES / "gpt2")
    snt.hf.generate(model, [[3, 4, 5]], 4)
    snt.hf.generate(model, [[6, 7, 8]], 4)
    from sonnet._src.hf.generate import _FUNCTIONS

    assert _FUNCTIONS[model][False].experimental_get_tracing_count() == 1


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"prompts": []}, ValueError, "`prompts` must hold at least one"),
        ({"prompts": [[]]}, ValueError, "`prompts` must hold at least one"),
        ({"prompts": "abc"}, TypeError, "`prompts` must be a sequence"),
        ({"prompts": [[1.5]]}, TypeError, "`prompts` must hold integer"),
        ({"prompts": np.zeros([2], np.int32)}, ValueError, "`prompts` must be a"),
        ({"max_new_tokens": 0}, ValueError, "max_new_tokens"),
        ({"temperature": -1.0}, ValueError, "`temperature` must not be negative"),
        ({"top_p": 0.0}, ValueError, r"`top_p` must be in \(0, 1\]"),
        ({"top_k": 0}, ValueError, "top_k"),
        ({"stop_tokens": 2}, TypeError, "`stop_tokens` must be a sequence"),
        ({"stop_tokens": [-1]}, ValueError, "stop_tokens"),
        ({"seed": "x"}, TypeError, "`seed` must be an integer"),
    ],
)
def test_generate_errors(kwargs, error, message):
    model = _small_lm()
    arguments = {"prompts": [[1, 2]], "max_new_tokens": 2, **kwargs}
    with pytest.raises(error, match=message):
        snt.hf.generate(model, **arguments)


def test_generate_past_learned_positions():
    model = _small_lm(
        rotary=False, max_positions=4, norm="layer", activation="gelu_tanh"
    )
    with pytest.raises(ValueError, match="`max_length` must be at most"):
        snt.hf.generate(model, [[1, 2, 3]], 2)


# Tokenizers.


def test_tokenizer_round_trip():
    tokenizer = snt.hf.load_tokenizer(FIXTURES / "gpt2")
    ids = tokenizer.encode("Beautiful is better than ugly.").ids
    assert ids and max(ids) < 128
    assert tokenizer.decode(ids) == "Beautiful is better than ugly."
    same = snt.hf.load_tokenizer(str(FIXTURES / "llama2" / "tokenizer.json"))
    assert same.get_vocab_size() >= 128


def test_tokenizer_errors(tmp_path):
    with pytest.raises(TypeError, match="`path` must be a file or directory"):
        snt.hf.load_tokenizer(None)
    with pytest.raises(ValueError, match="must be tokenizer.json or its directory"):
        snt.hf.load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match="must be a readable tokenizer.json"):
        snt.hf.load_tokenizer(tmp_path)


# PEFT adapters.


def test_peft_adapter_matches_reference():
    model = snt.hf.load(FIXTURES / "llama2")
    adapters = snt.hf.load_adapters(model, FIXTURES / "peft_lora")
    assert len(adapters) == 14
    adapter = adapters["causal_lm/transformer/block_0/attention/query"]
    assert (adapter.rank, adapter.alpha) == (2, 4.0)
    reference = _reference("peft_lora")
    _assert_logits(model(tf.constant(reference["tokens"])), reference["adapted_logits"])
    # Only the adapters train.
    assert len(model.trainable_variables) == 28


def test_peft_save_load_round_trip(tmp_path):
    model = snt.hf.load(FIXTURES / "llama2")
    snt.hf.load_adapters(model, FIXTURES / "peft_lora")
    names = snt.hf.save_adapters(model, tmp_path)
    assert names == ["adapter_config.json", "adapter_model.safetensors"]
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (2, 4.0)
    assert "model.layers.1.mlp.down_proj" in config["target_modules"]
    again = snt.hf.load(FIXTURES / "llama2")
    snt.hf.load_adapters(again, tmp_path)
    reference = _reference("peft_lora")
    _assert_logits(again(tf.constant(reference["tokens"])), reference["adapted_logits"])


def test_peft_trained_here(tmp_path):
    model = snt.hf.load(FIXTURES / "qwen3")
    snt.lora.add(model, rank=2, alpha=8.0, pattern="attention/(query|value)$")
    for adapter in snt.lora.adapters(model).values():
        adapter.b.assign(tf.random.normal(adapter.b.shape, seed=1))
    tokens = tf.constant(_reference("qwen3")["tokens"])
    expected = model(tokens)
    snt.hf.save_adapters(model, tmp_path)
    again = snt.hf.load(FIXTURES / "qwen3")
    assert len(snt.hf.load_adapters(again, tmp_path)) == 4
    np.testing.assert_allclose(again(tokens), expected, rtol=1e-6, atol=1e-6)


def _peft_copy(tmp_path: pathlib.Path) -> pathlib.Path:
    return _copy("peft_lora", tmp_path)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"use_dora": True}, "use_dora` is not supported"),
        ({"use_rslora": True}, "use_rslora` is not supported"),
        ({"peft_type": "IA3"}, "peft_type` is not supported"),
        ({"rank_pattern": {"q_proj": 4}}, "rank_pattern` is not supported"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save` is not supported"),
        ({"r": 4}, r"must have shape \[4, \d+\] \(rank r=4"),
        ({"r": 0}, "r` must be a positive integer"),
        ({"lora_alpha": "4"}, "lora_alpha` must be a number"),
    ],
)
def test_peft_refuses_configs(changes, message, tmp_path):
    folder = _peft_copy(tmp_path)
    path = folder / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    model = snt.hf.load(FIXTURES / "llama2")
    with pytest.raises(ValueError, match=message):
        snt.hf.load_adapters(model, folder)
    assert not model.transformer.blocks[0].attention.query.lora  # Unchanged.


def test_peft_refuses_other_modules_and_models(tmp_path):
    from safetensors.numpy import load_file, save_file

    folder = _peft_copy(tmp_path)
    path = folder / "adapter_model.safetensors"
    tensors = load_file(str(path))
    key = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    save_file({**tensors, key.replace("layers.0", "layers.7"): tensors[key]}, str(path))
    model = snt.hf.load(FIXTURES / "llama2")
    with pytest.raises(ValueError, match="must adapt a projection of the model"):
        snt.hf.load_adapters(model, folder)
    save_file({**tensors, "other": tensors[key]}, str(path))
    with pytest.raises(ValueError, match="must be a LoRA weight"):
        snt.hf.load_adapters(model, folder)
    save_file({key: tensors[key]}, str(path))
    with pytest.raises(ValueError, match="must hold lora_A and lora_B weights"):
        snt.hf.load_adapters(model, folder)
    # Another model (head_dim 8: other projection shapes).
    with pytest.raises(ValueError, match="must have shape"):
        snt.hf.load_adapters(snt.hf.load(FIXTURES / "qwen3"), FIXTURES / "peft_lora")
    snt.hf.load_adapters(model, FIXTURES / "peft_lora")
    with pytest.raises(ValueError, match="`model` must have no adapters yet"):
        snt.hf.load_adapters(model, FIXTURES / "peft_lora")


def test_peft_save_errors(tmp_path):
    model = snt.hf.load(FIXTURES / "llama2")
    with pytest.raises(ValueError, match="`model` must have `snt.lora` adapters"):
        snt.hf.save_adapters(model, tmp_path)
    snt.lora.add(model, rank=2, pattern="query$")
    snt.lora.add(model, rank=1, pattern="value$")
    with pytest.raises(ValueError, match="must have adapters of one rank"):
        snt.hf.save_adapters(model, tmp_path)
    gpt2 = snt.hf.load(FIXTURES / "gpt2")
    snt.lora.add(gpt2, rank=2, pattern="attention/query$")
    with pytest.raises(ValueError, match="only on layers with a Hugging Face name"):
        snt.hf.save_adapters(gpt2, tmp_path)
    merged = snt.hf.load(FIXTURES / "llama2")
    snt.lora.add(merged, rank=2)
    snt.lora.merge(merged)
    with pytest.raises(ValueError, match="must have unmerged adapters"):
        snt.hf.save_adapters(merged, tmp_path)
