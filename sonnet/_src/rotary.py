"""Rotary position embeddings: `snt.apply_rotary_embedding`, `snt.RotaryEmbedding`.

Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding"
(2021). The features of each head are split into `D / 2` pairs, and the pair
of frequency `f_i = base ** (-2 i / D)` at position `p` is rotated by the
angle `p * f_i`. This file uses the "rotate half" pairing of GPT-NeoX and
LLaMA's Hugging Face port: pair `i` is `(x[i], x[i + D / 2])`, not the
interleaved `(x[2 i], x[2 i + 1])` of the paper and of GPT-J. Both give the
same attention scores up to a fixed permutation of the projection weights,
but checkpoints are not interchangeable without it.

Frequency scaling (`scaling=`, for context extension) follows Hugging Face's
`rope_parameters`: `{"rope_type": "linear", "factor": f}` divides every
frequency by `f` (Chen et al., 2023, arXiv:2306.15595), and `"llama3"` (with
`factor`, `low_freq_factor`, `high_freq_factor` and
`original_max_position_embeddings`) divides the low frequencies only, blending
smoothly between (Llama 3.1). Internally the base and the scaling travel
together as one hashable value (`check_frequencies`), so the tables stay
cached.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from sonnet._src import base as base_lib
from sonnet._src import checks, errors, tensors, utils

_DEFAULT_BASE = 10000.0


def check_base(value: Any, argument: str = "base") -> float:
    """A rotary base: a positive real number, as a Python float."""
    result = checks.real(argument, value, allow_tensor=False)
    if result <= 0:
        raise errors.bad_value(argument, "must be positive", value)
    return result


# The parameters each kind of frequency scaling takes (Hugging Face's names).
_SCALINGS = {
    "linear": ("factor",),
    "llama3": (
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    ),
}


class ScaledBase(NamedTuple):
    """A rotary base with a frequency scaling, hashable (see `check_frequencies`).

    `parameters` are `_SCALINGS[rope_type]`'s values, in that order.
    """

    base: float
    rope_type: str
    parameters: tuple[float, ...]


def check_scaling(value: Any, argument: str = "scaling") -> dict[str, Any] | None:
    """A frequency scaling: None, or a mapping as Hugging Face's `rope_parameters`.

    Returns a plain dict with `rope_type` and the parameters of that type, as
    Python floats (`"type"` is accepted for `"rope_type"`, as older configs
    write it). Unknown types and unknown or missing parameters are refused:
    each changes the positions' angles.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise errors.bad_type(
            argument,
            "must be None or a mapping such as "
            '`{"rope_type": "linear", "factor": 2.0}`',
            value,
        )
    items = dict(value)
    kind = items.pop("rope_type", items.pop("type", None))
    if kind not in _SCALINGS:
        raise errors.bad_value(
            argument,
            "must have a `rope_type` of "
            + ", ".join(f'"{k}"' for k in _SCALINGS)
            + " (other rotary scalings are not supported)",
            f"rope_type={kind!r}",
        )
    names = _SCALINGS[kind]
    unknown = sorted(set(items) - set(names), key=str)
    missing = [n for n in names if n not in items]
    if unknown or missing:
        raise errors.bad_value(
            argument,
            f'with rope_type "{kind}" must have exactly the parameters '
            + ", ".join(f"`{n}`" for n in names),
            f"missing {missing}, unknown {unknown}",
        )
    result: dict[str, Any] = {"rope_type": kind}
    for name in names:
        number = checks.real(f"{argument}[{name!r}]", items[name], allow_tensor=False)
        if not number > 0:
            raise errors.bad_value(f"{argument}[{name!r}]", "must be positive", number)
        if name == "original_max_position_embeddings":
            if not float(number).is_integer():
                raise errors.bad_value(
                    f"{argument}[{name!r}]", "must be a whole number", number
                )
            number = int(number)
        result[name] = number
    if kind == "llama3" and result["high_freq_factor"] <= result["low_freq_factor"]:
        raise errors.bad_value(
            argument,
            "must have `high_freq_factor` > `low_freq_factor`",
            f"{result['high_freq_factor']} <= {result['low_freq_factor']}",
        )
    return result


def check_frequencies(
    base: Any, scaling: Any, base_argument: str = "base", argument: str = "scaling"
) -> float | ScaledBase:
    """What `rotation` takes as `base`: the checked base, with its scaling."""
    checked = check_base(base, base_argument)
    scaled = check_scaling(scaling, argument)
    if scaled is None:
        return checked
    kind = scaled["rope_type"]
    return ScaledBase(checked, kind, tuple(scaled[n] for n in _SCALINGS[kind]))


def _scale(freqs: np.ndarray, scaled: ScaledBase) -> np.ndarray:
    """`freqs` (float64) under `scaled`'s scaling, as `transformers` computes it."""
    if scaled.rope_type == "linear":
        return freqs / scaled.parameters[0]
    factor, low, high, context = scaled.parameters
    wavelengths = 2 * math.pi / freqs
    low_wavelength = context / low
    high_wavelength = context / high
    smooth = (context / wavelengths - low) / (high - low)
    smoothed = (1 - smooth) * freqs / factor + smooth * freqs
    return np.where(
        wavelengths > low_wavelength,
        freqs / factor,
        np.where(wavelengths < high_wavelength, freqs, smoothed),
    )


@functools.lru_cache(maxsize=64)
def _frequencies(size: int, base: float | ScaledBase, dtype: str) -> np.ndarray:
    """`[-f_0, ..., -f_{D/2-1}, f_0, ..., f_{D/2-1}]` for `D = size`.

    The signs make `sin(p * freqs)` the signed sines that multiply the rolled
    features, while `cos` (even) is unaffected.
    """
    half = size // 2
    wavelength = base.base if isinstance(base, ScaledBase) else base
    freqs = wavelength ** (-np.arange(half, dtype=np.float64) * 2.0 / size)
    if isinstance(base, ScaledBase):
        freqs = _scale(freqs, base)
    return np.concatenate([-freqs, freqs]).astype(dtype)


def _dynamic_frequencies(
    size: Any, base: float | ScaledBase, dtype: tf.DType
) -> tf.Tensor:
    """`_frequencies` for a size known only when the graph runs."""
    if isinstance(base, ScaledBase):
        raise errors.bad_value(
            "x",
            "must have a statically known last dimension with a frequency scaling",
            "an unknown last dimension",
        )
    check = tf.debugging.assert_equal(
        size % 2, 0, message="`x` must have an even last dimension"
    )
    with tf.control_dependencies([check]):
        exponents = tf.range(size // 2, dtype=dtype) * (-2.0 / tf.cast(size, dtype))
    freqs = tf.pow(tf.constant(base, dtype), exponents)
    return tf.concat([-freqs, freqs], 0)


def _check_inputs(x: Any) -> tf.Tensor:
    if isinstance(x, (str, bytes)) or x is None:
        raise errors.bad_type("x", "must be a float tensor `[B, T, H, D]`", x)
    x = utils.to_tensor("x", x)
    shape = x.shape
    if shape.rank != 4:
        raise errors.bad_value("x", "must have rank 4 `[B, T, H, D]`", shape)
    if not x.dtype.is_floating:
        raise errors.bad_type("x", "must have a floating point dtype", x)
    size = shape[-1]
    if size is not None and size % 2:
        raise errors.bad_value(
            "x",
            "must have an even last dimension `D` (features are rotated in pairs)",
            shape,
        )
    return x


def _check_positions(positions: Any, x: tf.Tensor) -> tf.Tensor:
    if isinstance(positions, (str, bytes)):
        raise errors.bad_type("positions", "must be an integer tensor", positions)
    positions = utils.to_tensor("positions", positions)
    dtype = positions.dtype
    if not (dtype.is_integer or dtype.is_floating) or dtype.is_bool:
        raise errors.bad_type(
            "positions", "must have an integer (or floating point) dtype", positions
        )
    shape = positions.shape
    rank = shape.rank
    if rank not in (1, 2):
        raise errors.bad_value("positions", "must have shape `[T]` or `[B, T]`", shape)
    expected = tf.TensorShape(x.shape[:2]) if rank == 2 else x.shape[1:2]
    if not all(
        p is None or e is None or p == e or (rank == 2 and i == 0 and p == 1)
        for i, (p, e) in enumerate(zip(shape.as_list(), expected.as_list()))
    ):
        raise errors.bad_value(
            "positions",
            f"must have shape `[T]` or `[B, T]` for `x` of shape {x.shape}",
            shape,
        )
    return positions


def apply_rotary_embedding(
    x: tf.Tensor,
    positions: tf.Tensor | None = None,
    *,
    base: float = _DEFAULT_BASE,
    scaling: Mapping[str, Any] | None = None,
) -> tf.Tensor:
    """Rotates pairs of features of `x` by position-dependent angles (RoPE).

    With `D` the size of the last axis, feature pair `i < D / 2` is
    `(x[..., i], x[..., i + D / 2])` (the "rotate half" convention of
    GPT-NeoX and LLaMA in Hugging Face), and at position `p` it is rotated by
    the angle `p * base ** (-2 i / D)`:

        y[i]         = x[i] cos(a_i) - x[i + D/2] sin(a_i)
        y[i + D/2]   = x[i + D/2] cos(a_i) + x[i] sin(a_i)

    Rotations preserve the norm of each pair, and the dot product of a query
    rotated at position `m` with a key rotated at position `n` depends only on
    `m - n`: applied to queries and keys, this gives attention relative
    position information. Computed in float32 (float64 for float64 inputs),
    returned in the dtype of `x`.

    Args:
      x: Float tensor `[B, T, H, D]` (batch, time, heads, features), `D`
        even.
      positions: Integer positions, `[T]` (shared by the batch) or `[B, T]`.
        Default None means `0, 1, ..., T - 1`. Floating point positions are
        accepted too (e.g. for interpolated positions).
      base: The wavelength scale, a positive number. Default 10000.0, as in
        the paper: wavelengths range from `2 pi` to about `2 pi * base`.
      scaling: Optional frequency scaling, in the form of Hugging Face's
        `rope_parameters`: `{"rope_type": "linear", "factor": f}` (every
        frequency divided by `f`) or `{"rope_type": "llama3", "factor": ...,
        "low_freq_factor": ..., "high_freq_factor": ...,
        "original_max_position_embeddings": ...}` (Llama 3.1's: wavelengths
        above `original_max_position_embeddings / low_freq_factor` divided
        by `factor`, below `... / high_freq_factor` kept, blended between).
        Default None: no scaling.

    Returns:
      A tensor of the shape and dtype of `x`.

    Raises:
      ValueError: if `x` is not of rank 4 with an even last dimension, if
        `positions` does not match `[T]` or `[B, T]`, if `base` is not
        positive, or `scaling` has another type or parameters.
      TypeError: if `x` is not floating point or `positions` not numeric.

    >>> x = tf.ones([1, 3, 2, 4])
    >>> y = snt.apply_rotary_embedding(x)
    >>> y.shape
    TensorShape([1, 3, 2, 4])
    >>> bool(tf.reduce_all(y[:, 0] == x[:, 0]))  # Position 0 is not rotated.
    True
    """
    frequencies = check_frequencies(base, scaling)
    x = _check_inputs(x)
    if positions is not None:
        positions = _check_positions(positions, x)
    return rotate(x, positions, frequencies)


def rotate(x: tf.Tensor, positions: Any, base: float | ScaledBase) -> tf.Tensor:
    """`apply_rotary_embedding` for checked arguments, without validation.

    `x` is `[B, T, ..., D]` (any rank >= 3: heads may be split over several
    axes) and `positions` `[T]` or `[B, T]` (default `arange(T)`).
    """
    time = x.shape[1]
    if time is None:
        time = tf.shape(x)[1]
    size = x.shape[-1]
    if size is None:
        size = tf.shape(x)[-1]
    dtype = compute_dtype(x.dtype)
    tables = rotation(positions, time, size, base, dtype, x.shape.rank - 2, x)
    return rotate_by(x, *tables)


def compute_dtype(dtype: tf.DType) -> tf.DType:
    """The dtype rotations are computed in: float64 for float64, else float32."""
    return tf.float64 if dtype == tf.float64 else tf.float32


def rotation(
    positions: Any,
    time: Any,
    size: Any,
    base: float | ScaledBase,
    dtype: tf.DType,
    trailing: int,
    like: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor]:
    """The cosines and signed sines `rotate_by` multiplies features with.

    Shaped `[T, 1, ..., D]` (or `[B, T, 1, ..., D]` for `[B, T]` positions)
    with `trailing - 1` axes of size 1, to broadcast against `[B, T, ..., D]`
    features with `trailing` axes after time. Without positions, eager calls
    reuse the tables of earlier calls on the same device.
    """
    if (
        positions is None
        and type(time) is int
        and type(size) is int
        and type(like) is tensors.eager_tensor_type()
    ):
        return _eager_rotation(time, size, base, dtype, trailing, like.device)
    return _rotation(positions, time, size, base, dtype, trailing)


def _rotation(
    positions: Any,
    time: Any,
    size: Any,
    base: float | ScaledBase,
    dtype: tf.DType,
    trailing: int,
) -> tuple[tf.Tensor, tf.Tensor]:
    if isinstance(size, int):
        freqs = _frequencies(size, base, dtype.name)
    else:
        freqs = _dynamic_frequencies(size, base, dtype)
    if positions is None:
        positions = tf.range(time, dtype=dtype)
    elif positions.dtype != dtype:
        positions = tf.cast(positions, dtype)
    if positions.shape.rank == 1:
        positions = tf.reshape(positions, [-1] + [1] * trailing)
    else:
        for _ in range(trailing):
            positions = tf.expand_dims(positions, -1)
    angles = positions * freqs
    return tf.cos(angles), tf.sin(angles)


@functools.lru_cache(maxsize=32)
def _eager_rotation(
    time: int,
    size: int,
    base: float | ScaledBase,
    dtype: tf.DType,
    trailing: int,
    device: str,
) -> tuple[tf.Tensor, tf.Tensor]:
    with tf.device(device):
        return _rotation(None, time, size, base, dtype, trailing)


def rotate_by(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) -> tf.Tensor:
    """Rotates the feature pairs of `x` by the tables of `rotation`."""
    dtype = cos.dtype
    inputs = x if x.dtype == dtype else tf.cast(x, dtype)
    size = x.shape[-1]
    if size is None:
        size = tf.shape(x)[-1]
    # `roll` swaps the halves to (x2, x1); times the signed sines (-sin, sin)
    # these are the rotation's sine terms.
    rolled = tf.roll(inputs, shift=size // 2, axis=-1)
    outputs = inputs * cos + rolled * sin
    return outputs if outputs.dtype == x.dtype else tf.cast(outputs, x.dtype)


@base_lib.allow_empty_variables
class RotaryEmbedding(base_lib.Module):
    """Rotary position embeddings as a module: `snt.apply_rotary_embedding`.

    Has no variables; holds `base` (and `scaling`) so that it can be
    configured once, e.g. in a model's constructor.

    Args:
      base: The wavelength scale, a positive number. Default 10000.0 (Su et
        al., 2021).
      scaling: Optional frequency scaling (see `snt.apply_rotary_embedding`);
        default None.
      name: Module name (default `rotary_embedding`).

    Shapes:
      x `[B, T, H, D]` (`D` even) and optional positions `[T]` or `[B, T]`
      -> outputs of the shape and dtype of `x`.

    >>> rope = snt.RotaryEmbedding()
    >>> rope(tf.ones([2, 5, 4, 8]), positions=tf.range(5)).shape
    TensorShape([2, 5, 4, 8])
    """

    scaling: dict[str, Any] | None
    _rotary: float | ScaledBase

    def __init__(
        self,
        base: float = _DEFAULT_BASE,
        scaling: Mapping[str, Any] | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.base = check_base(base)
        # Set past `tf.Module`'s tracking, which would wrap the dict and the
        # tuple in trackable proxies (nodes of the checkpoint graph).
        vars(self)["scaling"] = check_scaling(scaling)
        vars(self)["_rotary"] = check_frequencies(self.base, self.scaling)

    @utils.no_autograph
    def __call__(self, x: tf.Tensor, positions: tf.Tensor | None = None) -> tf.Tensor:
        """Applies `snt.apply_rotary_embedding` with this module's settings.

        Args:
          x: Float tensor `[B, T, H, D]`, `D` even.
          positions: Optional positions `[T]` or `[B, T]`; default `arange(T)`.

        Returns:
          A tensor of the shape and dtype of `x`.
        """
        x = _check_inputs(x)
        if positions is not None:
            positions = _check_positions(positions, x)
        return rotate(x, positions, self._rotary)
