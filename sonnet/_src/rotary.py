"""Rotary position embeddings: `snt.apply_rotary_embedding`, `snt.RotaryEmbedding`.

Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding"
(2021). The features of each head are split into `D / 2` pairs, and the pair
of frequency `f_i = base ** (-2 i / D)` at position `p` is rotated by the
angle `p * f_i`. This file uses the "rotate half" pairing of GPT-NeoX and
LLaMA's Hugging Face port: pair `i` is `(x[i], x[i + D / 2])`, not the
interleaved `(x[2 i], x[2 i + 1])` of the paper and of GPT-J. Both give the
same attention scores up to a fixed permutation of the projection weights,
but checkpoints are not interchangeable without it.
"""

from __future__ import annotations

import functools
from typing import Any

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


@functools.lru_cache(maxsize=64)
def _frequencies(size: int, base: float, dtype: str) -> np.ndarray:
    """`[-f_0, ..., -f_{D/2-1}, f_0, ..., f_{D/2-1}]` for `D = size`.

    The signs make `sin(p * freqs)` the signed sines that multiply the rolled
    features, while `cos` (even) is unaffected.
    """
    half = size // 2
    freqs = base ** (-np.arange(half, dtype=np.float64) * 2.0 / size)
    return np.concatenate([-freqs, freqs]).astype(dtype)


def _dynamic_frequencies(size: Any, base: float, dtype: tf.DType) -> tf.Tensor:
    """`_frequencies` for a size known only when the graph runs."""
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
    x: tf.Tensor, positions: tf.Tensor | None = None, *, base: float = _DEFAULT_BASE
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

    Returns:
      A tensor of the shape and dtype of `x`.

    Raises:
      ValueError: if `x` is not of rank 4 with an even last dimension, if
        `positions` does not match `[T]` or `[B, T]`, or if `base` is not
        positive.
      TypeError: if `x` is not floating point or `positions` not numeric.

    >>> x = tf.ones([1, 3, 2, 4])
    >>> y = snt.apply_rotary_embedding(x)
    >>> y.shape
    TensorShape([1, 3, 2, 4])
    >>> bool(tf.reduce_all(y[:, 0] == x[:, 0]))  # Position 0 is not rotated.
    True
    """
    base = check_base(base)
    x = _check_inputs(x)
    if positions is not None:
        positions = _check_positions(positions, x)
    return rotate(x, positions, base)


def rotate(x: tf.Tensor, positions: Any, base: float) -> tf.Tensor:
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
    base: float,
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
    positions: Any, time: Any, size: Any, base: float, dtype: tf.DType, trailing: int
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
    time: int, size: int, base: float, dtype: tf.DType, trailing: int, device: str
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

    Has no variables; holds `base` so that it can be configured once, e.g.
    in a model's constructor.

    Args:
      base: The wavelength scale, a positive number. Default 10000.0 (Su et
        al., 2021).
      name: Module name (default `rotary_embedding`).

    Shapes:
      x `[B, T, H, D]` (`D` even) and optional positions `[T]` or `[B, T]`
      -> outputs of the shape and dtype of `x`.

    >>> rope = snt.RotaryEmbedding()
    >>> rope(tf.ones([2, 5, 4, 8]), positions=tf.range(5)).shape
    TensorShape([2, 5, 4, 8])
    """

    def __init__(self, base: float = _DEFAULT_BASE, name: str | None = None):
        super().__init__(name=name)
        self.base = check_base(base)

    @utils.no_autograph
    def __call__(self, x: tf.Tensor, positions: tf.Tensor | None = None) -> tf.Tensor:
        """Applies `snt.apply_rotary_embedding(x, positions, base=self.base)`.

        Args:
          x: Float tensor `[B, T, H, D]`, `D` even.
          positions: Optional positions `[T]` or `[B, T]`; default `arange(T)`.

        Returns:
          A tensor of the shape and dtype of `x`.
        """
        return apply_rotary_embedding(x, positions, base=self.base)
