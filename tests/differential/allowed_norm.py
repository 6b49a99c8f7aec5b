"""Deliberate differences from 2.0.2 in normalization (see `expectations`)."""

from __future__ import annotations

_STR = "a string flag is true in the original, so 'False' created the parameter"
_NAN = "a NaN or infinite eps gives NaN outputs in the original"

# Reasons of the entries decided in issue 12's second round (README
# migration notes: "Refused where 2.0.2 returned garbage", "Accepted").
_STRING_FLAG = "a string flag was read by its truth value ('False' is true)"
_EPS_NONE = "eps=None silently became the fused kernel's default 1e-4"
_NON_FINITE = "a NaN or infinite value only ever gave NaN (or all-zero) outputs"
_EPS_SPELLING = "eps as a NumPy/tensor number or a one-element list"
_FLOAT64 = "a float64 tensor hyper-parameter, cast to the compute dtype"
_ARRAY_INPUTS = "inputs given as a list or NumPy array are converted"
_INPUT_DTYPES = "float16/bfloat16/float64 inputs"
_MODE_FLAG = "a mode flag read by its truth value (fused kernel wanted a bool)"
_SCALAR_SCALE = "a scalar scale broadcasts over the channels"
_AXIS = "a NumPy integer or scalar tensor axis"
_WHOLE_FLOAT = "a whole float size, as the conv modules take"

ALLOWED: dict[str, tuple[str, str]] = {
    "norm/LayerNorm(create_scale=str)": ("garbage", _STR),
    "norm/LayerNorm(create_offset=str)": ("garbage", _STR),
    "norm/LayerNorm(eps=nan)": ("garbage", _NAN),
    "norm/LayerNorm(eps=inf)": ("garbage", _NAN),
    "norm/InstanceNorm(create_scale=str)": ("garbage", _STR),
    "norm/InstanceNorm(create_offset=str)": ("garbage", _STR),
    "norm/InstanceNorm(eps=nan)": ("garbage", _NAN),
    "norm/InstanceNorm(eps=inf)": ("garbage", _NAN),
    "norm/GroupNorm(create_scale=str)": ("garbage", _STR),
    "norm/GroupNorm(create_offset=str)": ("garbage", _STR),
    "norm/GroupNorm(eps=nan)": ("garbage", _NAN),
    "norm/GroupNorm(eps=inf)": ("garbage", _NAN),
    # Decided in issue 12's second round (see the README migration notes).
    "norm/BatchNorm(train)(create_scale=str)": ("garbage", _STRING_FLAG),
    "norm/BatchNorm(train)(create_offset=str)": ("garbage", _STRING_FLAG),
    "norm/BatchNorm(train)(@test_local_stats=str)": ("garbage", _STRING_FLAG),
    "norm/CrossReplicaBatchNorm(@is_training=str)": ("garbage", _STRING_FLAG),
    "norm/BatchNorm(train)(eps=None)": ("garbage", _EPS_NONE),
    "norm/BatchNorm(train)(eps=nan)": ("garbage", _NON_FINITE),
    "norm/BatchNorm(train)(eps=inf)": ("garbage", _NON_FINITE),
    "norm/BatchNorm(train)(decay_rate=nan)": ("garbage", _NON_FINITE),
    "norm/BatchNorm(train)(decay_rate=inf)": ("garbage", _NON_FINITE),
    "norm/BatchNorm(train)(eps=np0d)": ("lenient", _EPS_SPELLING),
    "norm/BatchNorm(train)(eps=np0d_float32)": ("lenient", _EPS_SPELLING),
    "norm/BatchNorm(train)(eps=tensor)": ("lenient", _EPS_SPELLING),
    "norm/BatchNorm(train)(eps=variable)": ("lenient", _EPS_SPELLING),
    "norm/BatchNorm(train)(eps=list)": ("lenient", _EPS_SPELLING),
    "norm/BatchNorm(train)(eps=tensor_float64)": ("lenient", _FLOAT64),
    "norm/BatchNorm(train)(decay_rate=tensor_float64)": ("lenient", _FLOAT64),
    "norm/CrossReplicaBatchNorm(eps=tensor_float64)": ("lenient", _FLOAT64),
    "norm/BatchNorm(train)(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "norm/LayerNorm(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "norm/InstanceNorm(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "norm/GroupNorm(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "norm/BatchNorm(train)(@inputs=float64)": ("lenient", _INPUT_DTYPES),
    "norm/BatchNorm(train)(@inputs=float16)": ("lenient", _INPUT_DTYPES),
    "norm/BatchNorm(train)(@inputs=bfloat16)": ("lenient", _INPUT_DTYPES),
    "norm/BatchNorm(train)(@is_training=int)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(train)(@is_training=np.bool)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(train)(@is_training=np0d)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(train)(@is_training=tensor)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(train)(@is_training=int2)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(train)(@is_training=list)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(eval)(@test_local_stats=int)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(eval)(@test_local_stats=np.bool)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(eval)(@test_local_stats=np0d)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(eval)(@test_local_stats=tensor)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(eval)(@test_local_stats=int2)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(eval)(@test_local_stats=list)": ("lenient", _MODE_FLAG),
    "norm/BaseBatchNorm(@is_training=int)": ("lenient", _MODE_FLAG),
    "norm/BaseBatchNorm(@is_training=np.bool)": ("lenient", _MODE_FLAG),
    "norm/BaseBatchNorm(@is_training=np0d)": ("lenient", _MODE_FLAG),
    "norm/BaseBatchNorm(@is_training=tensor)": ("lenient", _MODE_FLAG),
    "norm/BaseBatchNorm(@is_training=int2)": ("lenient", _MODE_FLAG),
    "norm/BaseBatchNorm(@is_training=list)": ("lenient", _MODE_FLAG),
    "norm/BatchNorm(eval)(@scale=scalar)": ("lenient", _SCALAR_SCALE),
    "norm/LayerNorm(axis=np.int64)": ("lenient", _AXIS),
    "norm/LayerNorm(axis=tensor)": ("lenient", _AXIS),
    "norm/GroupNorm(groups=whole_float)": ("lenient", _WHOLE_FLOAT),
    "norm/GroupNorm(groups=np.float32)": ("lenient", _WHOLE_FLOAT),
}
