"""Deliberate differences from 2.0.2 in normalization (see `expectations`)."""

from __future__ import annotations

_STR = "a string flag is true in the original, so 'False' created the parameter"
_NAN = "a NaN or infinite eps gives NaN outputs in the original"

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
}
