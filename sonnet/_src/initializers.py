"""Initializers: callables `(shape, dtype) -> tf.Tensor` for variable values.

Every initializer accepts `shape` as a list/tuple of ints, a list mixing ints
and scalar integer tensors, a fully-defined `tf.TensorShape` or a 1-D integer
tensor (e.g. `tf.shape(x)`, also inside `tf.function` with unknown sizes).
"Numerical" initializers (`Zeros`, `Ones`, `Constant`, `RandomUniform`,
`Identity`) accept floating point and integer dtypes; the others need a
floating point dtype. A `seed` is TensorFlow's op-level seed: together with
the global seed (`tf.random.set_seed`) it makes the values reproducible.
"""

from __future__ import annotations

import abc
import collections.abc
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

import numpy as np
import tensorflow as tf

from sonnet._src import checks, errors

# Standard deviation of a unit normal truncated to [-2, 2]; dividing by it
# makes a truncated normal have the requested variance.
_TRUNCATED_NORMAL_STDDEV = 0.87962566103423978

_Dim = Any  # A Python int or a scalar integer tensor.


class Initializer(abc.ABC):
    """Base class: an initializer maps `(shape, dtype)` to a tensor.

    Subclasses implement `__call__`. Anything with that signature (e.g. a
    plain function) can be used wherever Sonnet takes an initializer.

    >>> class Halves(snt.initializers.Initializer):
    ...   def __call__(self, shape, dtype):
    ...     return tf.fill(shape, tf.constant(0.5, dtype))
    >>> Halves()([2], tf.float32).numpy()
    array([0.5, 0.5], dtype=float32)
    """

    @abc.abstractmethod
    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        """Returns a tensor of the given `shape` and `dtype`."""

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._repr_fields().items())
        return f"{type(self).__name__}({fields})"

    def _repr_fields(self) -> dict[str, Any]:
        return {}


# ---------------------------------------------------------------------------
# Argument checks shared by the initializers.


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not (
        isinstance(value, (bool, np.bool_))
    )


def _is_tensor(value: Any) -> TypeGuard[tf.Tensor | tf.Variable]:
    return isinstance(value, (tf.Tensor, tf.Variable))


def _check_real(argument: str, value: Any) -> Any:
    """A real number in any spelling (`checks.tf_real`, so also a one-element
    list, as TF broadcast it); integers stay integers."""
    checked = checks.tf_real(argument, value)
    if isinstance(value, (list, tuple)):
        value = value[0]
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    return checked


def _check_seed(value: Any) -> int | None:
    """An op-level seed (`checks.seed`). As TF's random ops, which the
    original passed it to, a fractional float or a float scalar tensor is
    truncated to an integer (3.5 seeds like 3)."""
    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        return int(value)
    if _is_tensor(value) and value.dtype.is_floating and value.shape.rank == 0:
        static = tf.get_static_value(value)
        if static is not None and np.isfinite(static):
            return int(static)
    return checks.seed("seed", value)


def _as_dtype(dtype: Any) -> tf.DType:
    try:
        return tf.as_dtype(dtype)
    except TypeError as e:
        raise errors.bad_type("dtype", "must be a TensorFlow dtype", dtype) from e


def _numerical_dtype(dtype: Any) -> tf.DType:
    """Returns `dtype` as a `tf.DType`, checking it is floating or integer."""
    result = _as_dtype(dtype)
    if not (result.is_floating or result.is_integer):
        raise errors.bad_value(
            "dtype", "must be an integer or floating point dtype", result
        )
    return result


def _floating_dtype(dtype: Any) -> tf.DType:
    """Returns `dtype` as a `tf.DType`, checking it is floating point."""
    result = _as_dtype(dtype)
    if not result.is_floating:
        raise errors.bad_value("dtype", "must be a floating point dtype", result)
    return result


class _Shape:
    """A validated shape: its static rank and each dim (int or int tensor)."""

    __slots__ = ("dims", "static")

    def __init__(self, dims: list[_Dim]):
        self.dims = dims
        self.static = all(isinstance(d, int) for d in dims)

    @property
    def rank(self) -> int:
        return len(self.dims)

    def tensor(self, dims: list[_Dim] | None = None) -> Any:
        """`dims` (default: all) in a form TF shape arguments accept."""
        dims = self.dims if dims is None else dims
        if all(isinstance(d, int) for d in dims):
            return list(dims)
        return tf.stack([tf.cast(d, tf.int32) for d in dims])


# Where the original passed a bad shape to a TF op, that failed with
# `InvalidArgumentError` (or, e.g. `len(shape)`, with a `TypeError` or
# `ValueError`): our errors are all of these.


def _check_dim(dim: Any, shape: Any) -> _Dim:
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, (bool, np.bool_)):
        if dim < 0:
            raise errors.invalid_argument(
                "shape", "must have non-negative sizes", shape
            )
        return int(dim)
    if _is_tensor(dim) and dim.dtype.is_integer and dim.shape.rank == 0:
        static = tf.get_static_value(dim)
        if static is not None:
            return _check_dim(int(static), shape)
        return dim
    raise errors.invalid_argument_type(
        "shape",
        "must be a list of non-negative integers (or scalar integer tensors), "
        "a fully-defined TensorShape or a 1-D integer tensor",
        shape,
    )


def as_shape(shape: Any) -> _Shape:
    """Validates `shape` (any form initializers accept) into a `_Shape`."""
    if isinstance(shape, tf.TensorShape):
        if shape.rank is None or not shape.is_fully_defined():
            raise errors.bad_value("shape", "must be fully defined", shape)
        return _Shape([int(d or 0) for d in shape.as_list()])
    if _is_tensor(shape) or isinstance(shape, np.ndarray):
        integer = (
            shape.dtype.is_integer if _is_tensor(shape) else shape.dtype.kind in "iu"
        )
        if not integer:
            raise errors.invalid_argument_type(
                "shape", "must have an integer dtype", shape
            )
        dims = tf.TensorShape(shape.shape)
        if dims.rank != 1 or dims[0] is None:
            raise errors.bad_value(
                "shape", "must be a 1-D tensor of statically known length", shape
            )
        static = tf.get_static_value(shape) if _is_tensor(shape) else shape
        if static is not None:
            return _Shape([_check_dim(int(d), shape) for d in static])
        return _Shape(list(tf.unstack(shape)))
    if isinstance(shape, (list, tuple)):
        return _Shape([_check_dim(d, shape) for d in shape])
    raise errors.invalid_argument_type(
        "shape",
        "must be a list/tuple of integers, a TensorShape or a 1-D integer tensor",
        shape,
    )


def _vector(shape: Any) -> Any:
    """A single size `n` as the shape `[n]` (as `tf.zeros`/`tf.ones` read it)."""
    index = None if _is_tensor(shape) else checks.as_index(shape)
    return shape if index is None else [index]


def _product(dims: Iterable[_Dim]) -> _Dim:
    result: _Dim = 1
    for d in dims:
        result = result * d
    return result


def _scalar(value: Any, dtype: tf.DType, argument: str) -> Any:
    """`value` as a tensor of `dtype` (a Python number is left to TF ops)."""
    if _is_tensor(value):
        return tf.cast(value, dtype)
    if dtype.is_integer:
        if not float(value).is_integer():
            raise errors.bad_value(
                argument,
                f"must be a whole number to initialize a {dtype.name} tensor",
                value,
            )
        value = int(value)
    return tf.constant(value, dtype)


# ---------------------------------------------------------------------------
# Constant initializers.


class Zeros(Initializer):
    """Fills the tensor with zeros (a single size `n` is the shape `[n]`).

    >>> snt.initializers.Zeros()([2, 3], tf.int32).shape
    TensorShape([2, 3])
    """

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        dtype = _numerical_dtype(dtype)
        return tf.zeros(as_shape(_vector(shape)).tensor(), dtype)


class Ones(Initializer):
    """Fills the tensor with ones (a single size `n` is the shape `[n]`).

    >>> snt.initializers.Ones()([2], tf.float32).numpy()
    array([1., 1.], dtype=float32)
    """

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        dtype = _numerical_dtype(dtype)
        return tf.ones(as_shape(_vector(shape)).tensor(), dtype)


class Constant(Initializer):
    """Fills the tensor with one scalar value.

    Args:
      value: A Python or NumPy scalar (number or bool). Tensors, lists and
        arrays are rejected: the value must be known when the initializer is
        built.

    >>> snt.initializers.Constant(3)([2], tf.float32).numpy()
    array([3., 3.], dtype=float32)
    """

    def __init__(self, value: Any):
        if isinstance(value, (str, bytes)) or not np.isscalar(value):
            raise errors.bad_type("value", "must be a scalar number", value)
        self.value: Any = value

    def _repr_fields(self) -> dict[str, Any]:
        return {"value": self.value}

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        dtype = _numerical_dtype(dtype)
        try:
            value = tf.convert_to_tensor(self.value, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise errors.bad_value(
                "value", f"must be representable as {dtype.name}", self.value
            ) from e
        return tf.fill(as_shape(shape).tensor(), value)


# ---------------------------------------------------------------------------
# Random initializers.


class RandomUniform(Initializer):
    """Draws values uniformly from `[minval, maxval)`.

    Integer dtypes are supported (then `minval`/`maxval` must be whole
    numbers and `minval < maxval`). As in `tf.random.uniform`, a float
    `maxval` below `minval` gives values in `(maxval, minval]`.

    Args:
      minval: Lower bound (inclusive), default 0.
      maxval: Upper bound (exclusive), default 1; None means 1 (as in
        `tf.random.uniform`), except for integer dtypes.
      seed: Op-level random seed, default None.

    >>> snt.initializers.RandomUniform(-1.0, 1.0)([2, 2], tf.float32).shape
    TensorShape([2, 2])
    """

    def __init__(self, minval: Any = 0, maxval: Any = 1, seed: int | None = None):
        self.minval = _check_real("minval", minval)
        self.maxval = None if maxval is None else _check_real("maxval", maxval)
        self.seed = _check_seed(seed)

    def _repr_fields(self) -> dict[str, Any]:
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed}

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        dtype = _numerical_dtype(dtype)
        shape = as_shape(shape).tensor()
        # TF samples integers only as int32/int64; other widths are cast.
        sample_dtype = dtype
        if dtype.is_integer and dtype not in (tf.int32, tf.int64):
            sample_dtype = tf.int64
        if self.maxval is None and dtype.is_integer:
            raise errors.bad_value(
                "maxval", "must be given for integer dtypes", self.maxval
            )
        minval = _scalar(self.minval, sample_dtype, "minval")
        maxval = _scalar(
            1 if self.maxval is None else self.maxval, sample_dtype, "maxval"
        )
        if (
            dtype.is_integer
            and _is_real(self.minval)
            and _is_real(self.maxval)
            and self.minval >= self.maxval
        ):
            # TF's integer kernel failed with `InvalidArgumentError`.
            raise errors.invalid_argument(
                "maxval",
                f"must be > minval ({self.minval!r}) for integer dtypes",
                self.maxval,
            )
        values = tf.random.uniform(
            shape, minval, maxval, dtype=sample_dtype, seed=self.seed
        )
        return tf.cast(values, dtype) if sample_dtype != dtype else values


class _Normal(Initializer):
    """`mean`, `stddev` and `seed` of the (truncated) normal initializers."""

    _sample: Callable[..., tf.Tensor]

    def __init__(self, mean: Any = 0.0, stddev: Any = 1.0, seed: int | None = None):
        self.mean = _check_real("mean", mean)
        self.stddev = _check_real("stddev", stddev)
        self.seed = _check_seed(seed)

    def _repr_fields(self) -> dict[str, Any]:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        dtype = _floating_dtype(dtype)
        return self._sample(
            as_shape(shape).tensor(),
            _scalar(self.mean, dtype, "mean"),
            _scalar(self.stddev, dtype, "stddev"),
            dtype=dtype,
            seed=self.seed,
        )


class RandomNormal(_Normal):
    """Draws values from a normal distribution.

    Args:
      mean: Mean of the distribution, default 0.
      stddev: Standard deviation, default 1 (a negative one draws like its
        absolute value, as in TF).
      seed: Op-level random seed, default None.

    >>> snt.initializers.RandomNormal(stddev=0.1)([3], tf.float32).shape
    TensorShape([3])
    """

    _sample = staticmethod(tf.random.normal)


class TruncatedNormal(_Normal):
    """Draws from a normal distribution, re-drawing values beyond 2 stddevs.

    This is the default weight initializer of `snt.Linear` and the
    convolutions (with `stddev = 1 / sqrt(fan_in)`).

    Args:
      mean: Mean of the (untruncated) distribution, default 0.
      stddev: Standard deviation of the untruncated distribution, default 1
        (a negative one draws like its absolute value, as in TF).
      seed: Op-level random seed, default None.

    >>> init = snt.initializers.TruncatedNormal(stddev=0.5)
    >>> bool(tf.reduce_all(tf.abs(init([100], tf.float32)) <= 1.0))
    True
    """

    _sample = staticmethod(tf.random.truncated_normal)


# ---------------------------------------------------------------------------
# Structured initializers.


def _check_rank_at_least_2(shape: _Shape, original: Any) -> None:
    if shape.rank < 2:
        raise errors.bad_value("shape", "must have at least two dimensions", original)


class Identity(Initializer):
    """Identity matrices (a batch of them for rank > 2), times `gain`.

    For shape `[..., rows, cols]` each trailing matrix has ones on its main
    diagonal; non-square matrices are padded with zeros.

    Args:
      gain: Multiplier applied to the identity, default 1.

    >>> snt.initializers.Identity(gain=2.0)([2, 3], tf.float32).numpy()
    array([[2., 0., 0.],
           [0., 2., 0.]], dtype=float32)
    """

    def __init__(self, gain: Any = 1.0):
        self.gain = _check_real("gain", gain)

    def _repr_fields(self) -> dict[str, Any]:
        return {"gain": self.gain}

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        dtype = _numerical_dtype(dtype)
        parsed = as_shape(shape)
        _check_rank_at_least_2(parsed, shape)
        batch_shape = parsed.tensor(parsed.dims[:-2]) if parsed.rank > 2 else None
        eye = tf.eye(
            parsed.dims[-2], parsed.dims[-1], batch_shape=batch_shape, dtype=dtype
        )
        if _is_real(self.gain) and self.gain == 1:
            return eye
        return eye * _scalar(self.gain, dtype, "gain")


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix, reshaped to `shape`, times `gain`.

    The shape is viewed as a matrix `[prod(shape[:-1]), shape[-1]]`; its rows
    (if there are fewer rows than columns) or its columns are orthonormal.
    Built from the QR decomposition of a normal sample, with the signs fixed
    so the result is uniformly distributed (arXiv:1312.6120).

    Args:
      gain: Multiplier applied to the orthogonal matrix, default 1.
      seed: Op-level random seed, default None.

    >>> import numpy as np
    >>> w = snt.initializers.Orthogonal()([4, 3], tf.float32)
    >>> np.allclose(tf.transpose(w) @ w, np.eye(3), atol=1e-5)
    True
    """

    def __init__(self, gain: Any = 1.0, seed: int | None = None):
        self.gain = _check_real("gain", gain)
        self.seed = _check_seed(seed)

    def _repr_fields(self) -> dict[str, Any]:
        return {"gain": self.gain, "seed": self.seed}

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        dtype = _floating_dtype(dtype)
        parsed = as_shape(shape)
        _check_rank_at_least_2(parsed, shape)
        num_rows = _product(parsed.dims[:-1])
        num_cols = parsed.dims[-1]
        # QR has kernels for float32/float64 only; half precisions use float32.
        compute_dtype = tf.float64 if dtype == tf.float64 else tf.float32
        if parsed.static:
            flat_shape = [max(num_rows, num_cols), min(num_rows, num_cols)]
        else:
            rows = tf.cast(num_rows, tf.int32)
            cols = tf.cast(num_cols, tf.int32)
            flat_shape = tf.stack([tf.maximum(rows, cols), tf.minimum(rows, cols)])
        sample = tf.random.normal(flat_shape, dtype=compute_dtype, seed=self.seed)
        q, r = tf.linalg.qr(sample, full_matrices=False)
        # Multiplying column j by sign(r_jj) makes the distribution uniform.
        signs = tf.where(tf.linalg.diag_part(r) < 0, -1.0, 1.0)
        q = q * tf.cast(signs, compute_dtype)
        if parsed.static:
            if num_rows < num_cols:
                q = tf.transpose(q)
        else:
            q = tf.cond(
                tf.cast(num_rows, tf.int32) < tf.cast(num_cols, tf.int32),
                lambda: tf.transpose(q),
                lambda: q,
            )
        result = tf.cast(tf.reshape(q, parsed.tensor()), dtype)
        if _is_real(self.gain) and self.gain == 1:
            return result
        return result * _scalar(self.gain, dtype, "gain")


_MODES = ("fan_in", "fan_out", "fan_avg")
_DISTRIBUTIONS = ("uniform", "truncated_normal", "normal")


def _compute_fans(dims: list[_Dim]) -> tuple[_Dim, _Dim]:
    """(fan_in, fan_out) of a weight of the given shape.

    Conv kernels `[..., in, out]` count the receptive field in both fans.
    """
    if not dims:
        return 1, 1
    if len(dims) == 1:
        return dims[0], dims[0]
    receptive_field = _product(dims[:-2])
    return dims[-2] * receptive_field, dims[-1] * receptive_field


class VarianceScaling(Initializer):
    """Samples with a variance scaled to the weight's fan-in and/or fan-out.

    With `n` the fan chosen by `mode` (`fan_in`, `fan_out`, or their average
    for `fan_avg`), values have variance `scale / max(1, n)`:

    * `truncated_normal`: normal truncated at 2 stddevs (stddev corrected so
      the variance is as stated);
    * `normal`: plain normal;
    * `uniform`: uniform in `[-limit, limit]`, `limit = sqrt(3 * scale / n)`.

    Presets: Glorot/Xavier = `(1.0, "fan_avg", "uniform" or
    "truncated_normal")`, LeCun = `(1.0, "fan_in", ...)`, He = `(2.0,
    "fan_in", ...)`. Fans of a shape `[..., in, out]` include the receptive
    field `prod(shape[:-2])`; a rank-1 shape `[n]` has both fans `n`.

    Args:
      scale: Positive scaling factor, default 1.
      mode: One of `"fan_in"` (default), `"fan_out"`, `"fan_avg"`.
      distribution: One of `"truncated_normal"` (default), `"normal"`,
        `"uniform"` (case-insensitive).
      seed: Op-level random seed, default None.

    >>> glorot = snt.initializers.VarianceScaling(1.0, "fan_avg", "uniform")
    >>> w = glorot([3, 5], tf.float32)
    >>> bool(tf.reduce_all(tf.abs(w) <= (6 / 8) ** 0.5))
    True
    """

    def __init__(
        self,
        scale: Any = 1.0,
        mode: str = "fan_in",
        distribution: str = "truncated_normal",
        seed: int | None = None,
    ):
        # Not `_check_real`: the original compared `scale <= 0`, which failed
        # for None and lists (`TypeError`).
        checked = checks.real("scale", scale)
        if not isinstance(scale, (int, np.integer)) or isinstance(scale, bool):
            scale = checked
        static = tf.get_static_value(scale) if _is_tensor(scale) else scale
        if static is not None and not static > 0:
            raise errors.bad_value("scale", "must be a positive number", scale)
        if not isinstance(mode, str) or mode not in _MODES:
            raise errors.bad_value("mode", f"must be one of {_MODES}", mode)
        if isinstance(distribution, bytes):
            # The original's `distribution.lower()` worked, the lookup failed.
            raise errors.bad_value(
                "distribution", f"must be one of {_DISTRIBUTIONS}", distribution
            )
        if not isinstance(distribution, str):
            # The original failed calling `distribution.lower()`.
            raise errors.lacks_attribute(
                "distribution", f"must be one of {_DISTRIBUTIONS}", distribution
            )
        if distribution.lower() not in _DISTRIBUTIONS:
            raise errors.bad_value(
                "distribution", f"must be one of {_DISTRIBUTIONS}", distribution
            )
        self.scale = scale
        self.mode = mode
        self.distribution = distribution.lower()
        self.seed = _check_seed(seed)

    def _repr_fields(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "mode": self.mode,
            "distribution": self.distribution,
            "seed": self.seed,
        }

    def __call__(self, shape: Any, dtype: Any) -> tf.Tensor:
        dtype = _floating_dtype(dtype)
        if isinstance(shape, str):
            # The original's fan computation failed in `tf.cast`.
            raise errors.unimplemented_type(
                "shape", "must be a list/tuple of integers or a TensorShape", shape
            )
        parsed = as_shape(shape)
        fan_in, fan_out = _compute_fans(parsed.dims)
        if self.mode == "fan_in":
            fan = fan_in
        elif self.mode == "fan_out":
            fan = fan_out
        else:
            fan = (fan_in + fan_out) / 2
        if parsed.static and not _is_tensor(self.scale):
            variance = self.scale / max(1.0, float(fan))
            sqrt = math.sqrt
        else:
            fan = tf.cast(fan, tf.float32)
            scale = tf.cast(self.scale, tf.float32)
            variance = tf.cast(scale / tf.maximum(1.0, fan), dtype)
            sqrt = tf.sqrt
        shape_arg = parsed.tensor()
        if self.distribution == "truncated_normal":
            stddev = sqrt(variance) / _TRUNCATED_NORMAL_STDDEV
            return tf.random.truncated_normal(
                shape_arg, 0.0, stddev, dtype=dtype, seed=self.seed
            )
        if self.distribution == "normal":
            return tf.random.normal(
                shape_arg, 0.0, sqrt(variance), dtype=dtype, seed=self.seed
            )
        limit = sqrt(3.0 * variance)
        return tf.random.uniform(shape_arg, -limit, limit, dtype=dtype, seed=self.seed)


def check_initializers(
    initializers: Mapping[str, Any] | None, expected_keys: Iterable[str]
) -> dict[str, Any]:
    """Checks that `initializers` only has keys from `expected_keys`.

    Args:
      initializers: A mapping from names to initializers, or None.
      expected_keys: The names that may be given an initializer.

    Returns:
      `initializers` as a dict (`{}` for None).

    >>> from sonnet._src.initializers import check_initializers
    >>> check_initializers({"w": snt.initializers.Zeros()}, ["w", "b"])
    {'w': Zeros()}
    """
    if initializers is None:
        return {}
    if not isinstance(initializers, collections.abc.Mapping):
        raise errors.bad_type(
            "initializers", "must be a dict-like object", initializers
        )
    expected = set(expected_keys)
    unknown = sorted(set(initializers) - expected)
    if unknown:
        raise KeyError(
            f"`initializers` may only have the keys {sorted(expected)}. "
            f"Received: unknown keys {unknown}."
        )
    return dict(initializers)
