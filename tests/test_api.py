"""The public API inventory matches the original Sonnet 2.0.2 (spec section 0)."""

from __future__ import annotations

import sonnet as snt

SNT_ALL = set(
    """BaseBatchNorm BatchApply BatchNorm Bias Conv1D Conv1DLSTM Conv1DTranspose Conv2D
    Conv2DLSTM Conv2DTranspose Conv3D Conv3DLSTM Conv3DTranspose DeepRNN Deferred
    DepthwiseConv2D Dropout Embed ExponentialMovingAverage flatten Flatten GroupNorm
    InstanceNorm GRU LSTM LSTMState LayerNorm Linear Mean Metric Module Optimizer
    reshape Reshape RNNCore Sequential Sum TrainableState UnrolledLSTM UnrolledRNN
    VanillaRNN
    allow_empty_variables build custom_variable_getter
    deep_rnn_with_residual_connections
    deep_rnn_with_skip_connections distribute dynamic_unroll format_variables functional
    initializers log_variables lstm_with_recurrent_dropout merge_leading_dims
    no_name_scope nets once leaky_clip_by_value optimizers pad regularizers
    scale_gradient split_leading_dim static_unroll""".split()
)

SUBMODULES = {
    # `Transformer` and `TransformerBlock` are additions of issue 13,
    # `copy_transformer_weights` of issue 24 (stacked <-> unrolled),
    # `CausalLM` of issue 33 (open-weight language models).
    "nets": "MLP Cifar10ConvNet resnet ResNet ResNet50 Transformer TransformerBlock "
    "VectorQuantizer VectorQuantizerEMA copy_transformer_weights CausalLM",
    "nets.resnet": "BlockGroup BottleNeckBlockV1 BottleNeckBlockV2",
    # `AdamW` and `schedules` are additions of issue 13 (beyond Sonnet 2).
    # `Accumulator`, `Muon` and `muon_route` are additions of issue 34.
    "optimizers": "Accumulator Adam AdamW Momentum Muon RMSProp SGD muon_route "
    "schedules",
    "optimizers.schedules": "CosineDecay ExponentialDecay Join LinearWarmup "
    "PiecewiseConstant WarmupCosine",
    "initializers": "Constant Identity Initializer Ones Orthogonal RandomNormal "
    "RandomUniform TruncatedNormal VarianceScaling Zeros",
    "regularizers": "L1 L2 OffDiagonalOrthogonal Regularizer",
    "distribute": "create_variables_eagerly Replicator TpuReplicator "
    "CrossReplicaBatchNorm",
    "mixed_precision": "disable enable modes scope",
    # Addition of issue 16: float32 variables, bfloat16/float16 compute.
    "precision": "DynamicLossScale Policy apply cast compute_dtype get_policy "
    "variable_dtype",
    # Additions of issue 27.
    "lora": "LoRA add adapters merge remove restore save unmerge",
    "int8": "quantize",
    # Additions of issue 34 (normalised weights, model surgery).
    "spectral_norm": "SpectralNorm add remove update",
    "weight_norm": "WeightNorm add remove",
    "surgery": "find get replace set",
    # Addition of issue 33: Hugging Face checkpoints, generation, PEFT.
    "hf": "generate load load_adapters load_tokenizer save save_adapters",
    "pad": "causal create full reverse_causal same valid",
    "functional": "variables transform transform_with_state without_state device_get "
    "device_put grad jit value_and_grad optimizer sgd adam rmsprop momentum",
}

# Added by this project (issue 8): restore with checks of file, shapes and dtypes.
ADDITIONS = {"restore_checkpoint"}
# Added by issue 15: a table of a module tree's calls, parameters and FLOPs,
# and a Sonnet module as a Keras 3 layer.
ADDITIONS |= {"summary", "KerasLayer"}
# Added by issue 13: attention (with its decoding cache), RMS norm, rotary
# position embeddings.
ADDITIONS |= {
    "AttentionCache",
    "MultiHeadAttention",
    "RMSNorm",
    "RotaryEmbedding",
    "apply_rotary_embedding",
}
# Added by issue 16: the fast mixed-precision path.
ADDITIONS |= {"precision"}
# Added by issue 24: deep models (layers stored stacked, run in a loop).
ADDITIONS |= {"LayerStack"}
# Added by issue 24: rematerialisation (recompute a call in the backward pass).
ADDITIONS |= {"remat"}
# Added by issue 27: fine-tuning (freezing, LoRA adapters) and int8 weights.
ADDITIONS |= {"freeze", "unfreeze", "is_frozen", "lora", "int8"}
# Added by issue 34: averaged weights (EMA, SWA) for evaluation.
ADDITIONS |= {"AveragedWeights"}
# Added by issue 34: normalised weights, stochastic depth, model surgery.
ADDITIONS |= {"spectral_norm", "weight_norm", "DropPath", "drop_path", "surgery"}
# Added by issue 33: open-weight models (Hugging Face checkpoints).
ADDITIONS |= {"hf"}
# Added by issue 35: a mixture-of-experts MLP (top-k router, stacked experts).
ADDITIONS |= {"MixtureOfExperts"}


def _get(path: str):
    obj = snt
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def test_top_level_all():
    assert set(snt.__all__) == SNT_ALL | ADDITIONS
    assert len(snt.__all__) == len(set(snt.__all__))


def test_mixed_precision_is_attribute_but_not_in_all():
    assert hasattr(snt, "mixed_precision")
    assert "mixed_precision" not in snt.__all__


def test_submodule_all():
    for path, names in SUBMODULES.items():
        module = _get(path)
        assert set(module.__all__) == set(names.split()), path
        for name in module.__all__:
            assert hasattr(module, name), f"{path}.{name}"


def test_regularizers_all_is_a_list():
    assert isinstance(snt.regularizers.__all__, list)


def test_every_top_level_name_resolves():
    for name in snt.__all__:
        assert hasattr(snt, name), name
