"""`snt.Linear`: a fully connected layer, `outputs = inputs @ w + b`."""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from sonnet._src import (
    base,
    batch_apply,
    checks,
    errors,
    initializers,
    once,
    precision,
    products,
    tensors,
    utils,
    weights,
)

# An initializer: any callable `(shape, dtype) -> tensor` (`tensors.Initializer`).
Initializer = tensors.Initializer

# Raw kernels (`product(raw=True)`): the ops `tf.matmul` / `tf.nn.bias_add`
# run for rank-2 tensors.
_MAT_MUL = tf.raw_ops.MatMul
_BIAS_ADD = tf.raw_ops.BiasAdd


def product(module: Any, x: Any, dtype: tf.DType | None, raw: bool = False) -> Any:
    """The op sequence of a weight-matrix product, `x @ w (+ adapter) + b`.

    The one place it is written: `snt.Linear`'s two call branches and the
    projections of `snt.MultiHeadAttention` run it. Its steps: the kernel
    for this call (`module._weight_step`, `weights.py`: the variable, cast to
    `dtype`, or int8 values times scales), the matmul, the low-rank
    adapter's term (`module.lora`, `snt.lora`, if any), the bias (cast to
    `dtype`) if `module.with_bias`. `dtype` is the module's policy's compute
    dtype (None: as stored); the policy's casts of inputs and outputs are
    the caller's. `raw`: `x` is a rank-2 tensor, multiplied by the raw
    kernels (`tf.raw_ops`, without the dispatch layers that cost more than
    the kernels for small layers in eager mode); else by `tf.matmul` and
    `tf.nn.bias_add`, which take any rank >= 2 and tensor-likes (in graphs
    laid out for TensorFlow's kernels: `products.py`, inputs of rank > 2 as
    one matrix of rows).
    """
    w = module._weight_step(module, dtype)
    inputs = x
    if not raw and (rows := products.rows(x, w)) is not None:
        x = rows
    y = _MAT_MUL(a=x, b=w) if raw else products.matmul(x, w)
    if module.lora is not None:
        y = module.lora.add_to(x, y, dtype)
    if module.with_bias:
        b = module.b if dtype is None else precision.cast(module.b, dtype)
        y = _BIAS_ADD(value=y, bias=b) if raw else tf.nn.bias_add(y, b)
    if x is inputs:
        return y
    return batch_apply.split_leading_dim(y, inputs, inputs.shape.rank - 1)


# Dtypes `tf.matmul` has kernels for.
_MATMUL_DTYPES = frozenset(
    [
        tf.float16,
        tf.bfloat16,
        tf.float32,
        tf.float64,
        tf.int32,
        tf.int64,
        tf.complex64,
        tf.complex128,
    ]
)


class Linear(base.Module):
    """A fully connected layer: `outputs = matmul(inputs, w) + b`.

    The weights are created on the first call, from the size of the last
    dimension of the input and with the input's dtype. Inputs of rank > 2 are
    multiplied as batches of matrices (every leading dimension is a batch
    dimension).

    Args:
      output_size: Size of the last dimension of the outputs: a non-negative
        int in any spelling (NumPy int, scalar integer tensor, ...).
      with_bias: Whether to add a bias `b` (default True).
      w_init: Initializer for `w`, a callable `(shape, dtype) -> tensor`.
        Default None means `snt.initializers.TruncatedNormal` with
        `stddev = 1 / sqrt(input_size)`, which keeps the variance of the
        outputs close to that of the inputs (LeCun et al., "Efficient
        BackProp", 1998); it is stored in `self.w_init` on the first call.
      b_init: Initializer for `b`. Default None means zeros. Must be None
        when `with_bias=False`.
      name: Module name (default `linear`).

    Shapes:
      inputs `[..., input_size]` (rank >= 2) -> outputs `[..., output_size]`,
      with the dtype of the inputs. Under a `snt.precision` policy the
      weights are created in its variable dtype (float32) and cast to its
      compute dtype once per call, as are floating inputs.

    Attributes:
      input_size: Size of the last input dimension (after the first call).
      w: `[input_size, output_size]` weights (after the first call).
      b: `[output_size]` bias (after the first call, if `with_bias`).

    >>> linear = snt.Linear(3)
    >>> linear(tf.ones([8, 5])).shape
    TensorShape([8, 3])
    >>> linear.w.shape, linear.b.shape
    (TensorShape([5, 3]), TensorShape([3]))
    >>> linear
    Linear(output_size=3)
    """

    # Whether the first input had rank 2; None until the module is built.
    _matrix_inputs: bool | None = None

    # The kernel for each call (`weights.py`): `w`, in the policy's dtype.
    _weight_step: weights.WeightStep = weights.VariableKernel("w")

    # A low-rank adapter (`snt.lora.LoRA`) whose term the call adds to
    # `inputs @ w`, set by `snt.lora.add`; None (the class default) without.
    lora: Any = None

    def __init__(
        self,
        output_size: int,
        with_bias: bool = True,
        w_init: Initializer | None = None,
        b_init: Initializer | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        # Zero is allowed, as in the original: the outputs are then empty.
        if isinstance(output_size, tf.Tensor) and output_size.dtype.is_floating:
            # A whole float tensor (e.g. from shape arithmetic) made the
            # original's variable shapes; a Python float did not.
            output_size = checks.whole_size("output_size", output_size, True)
        self.output_size = checks.size("output_size", output_size, allow_zero=True)
        self.with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        checks.initializer("b_init", b_init)
        if not self.with_bias and b_init is not None:
            raise errors.bad_value(
                "b_init",
                "must be None when `with_bias=False` (there is no bias)",
                b_init,
            )
        self.w_init = w_init
        if self.with_bias:
            self.b_init = initializers.Zeros() if b_init is None else b_init

    @once.once
    def _initialize(self, inputs: Any) -> None:
        shape, dtype = tensors.shape_and_dtype(inputs)
        if shape.rank is None or shape.rank < 2:
            raise errors.bad_value("inputs", "must have rank >= 2", shape)
        input_size = shape[-1]
        if input_size is None:
            raise errors.bad_value(
                "inputs",
                "must have a known last dimension (the input size) on the first "
                "call, which creates the weights",
                shape,
            )
        if dtype not in _MATMUL_DTYPES:
            raise errors.bad_type(
                "inputs", "must have a floating point or int32/int64 dtype", inputs
            )
        # Under a `snt.precision` policy, float32 variables for bf16 inputs.
        dtype = precision.variable_dtype(self, dtype)
        w_init = self.w_init
        if w_init is None:
            if not dtype.is_floating:
                # The original's default initializer raised `ValueError`.
                raise errors.invalid_argument_type(
                    "inputs",
                    "must have a floating point dtype when `w_init` is not given "
                    "(the default is a truncated normal); pass an initializer that "
                    "supports this dtype, e.g. `w_init=snt.initializers.Ones()`",
                    inputs,
                )
            w_init = initializers.TruncatedNormal(
                stddev=1 / math.sqrt(max(input_size, 1))
            )
        # Same order as the original (w, then b), so seeded runs match it.
        w = tf.Variable(
            tensors.initial_value(
                "w_init", w_init, [input_size, self.output_size], dtype
            ),
            name="w",
        )
        if self.with_bias:
            b = tensors.initial_value("b_init", self.b_init, [self.output_size], dtype)
            self.b = tf.Variable(b, name="b")
        self.w = w
        self.w_init = w_init
        self.input_size = input_size
        self._matrix_inputs = shape.rank == 2
        tensors.eager_tensor_type()

    @utils.no_autograph  # Python control flow only: traced as is.
    @base.no_name_scope
    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        """Applies the layer.

        Args:
          inputs: A tensor of shape `[..., input_size]` (rank >= 2).

        Returns:
          `matmul(inputs, w) + b`, of shape `[..., output_size]`.

        Raises:
          ValueError: if `inputs` has rank < 2 or a last dimension that differs
            from the one the module was built with (then also a
            `tf.errors.InvalidArgumentError`, which the original raised).
          TypeError: if `inputs` has a different dtype than the first input
            (also a `tf.errors.InvalidArgumentError`).
        """
        # Fast branch: eager rank-2 inputs of a built layer go straight to
        # the raw kernels (no name scope either, which has no effect on eager
        # ops). The steps are `product`'s, as in `_call`; bad inputs make a
        # kernel raise, and only then does `_call` work out what was wrong.
        if self._matrix_inputs and type(inputs) is tensors.EAGER_TENSOR:
            policy = self._precision
            dtype = None if policy is None else policy.compute_dtype
            x = inputs if dtype is None else precision.cast(inputs, dtype)
            try:
                outputs = product(self, x, dtype, raw=True)
            except errors.OP_ERRORS as e:
                return self._call(inputs, e)
            if policy is None:
                return outputs
            return precision.cast_outputs(policy, outputs)
        return self._call(inputs)

    def _call(self, inputs: Any, error: Exception | None = None) -> tf.Tensor:
        """The call path: any rank >= 2, symbolic tensors, tensor-likes, the
        first call (which builds the layer), and failed fast calls (`error`).

        Runs in the module's name scope, so traced ops are named `linear/...`.
        Its steps: the policy's (floating inputs to its compute dtype; nothing
        without a policy), build, `product` (the kernel, matmul, the
        adapter's term, bias), outputs (cast to the policy's output dtype, if
        any).
        """
        policy = self._precision
        dtype = None
        x = inputs
        if policy is not None:
            dtype = policy.compute_dtype
            if not isinstance(inputs, (tf.Tensor, tf.Variable)):
                # Our errors for None, strings, ragged lists.
                tensors.shape_and_dtype(inputs)
                inputs = tf.convert_to_tensor(inputs)
            x = precision.cast(inputs, dtype)
        if self._matrix_inputs is None:
            self._initialize(x)
        if error is not None:
            self._check_inputs(x, error, dtype)
        try:
            outputs = product(self, x, dtype)
        except errors.OP_ERRORS as e:
            self._check_inputs(x, e, dtype)
            raise errors.bad_value(
                "inputs", f"could not be multiplied by `w` ({e})", inputs
            ) from e
        return outputs if policy is None else precision.cast_outputs(policy, outputs)

    @base.no_name_scope
    def _check_inputs(
        self, inputs: Any, error: Exception, compute_dtype: tf.DType | None = None
    ) -> None:
        """Raises our error for bad `inputs` (chained to TF's `error`).

        `compute_dtype`: the dtype of a policy the call runs under (None: the
        inputs must have the variables' dtype).
        """
        try:
            shape, dtype = tensors.shape_and_dtype(inputs)
        except (TypeError, ValueError) as e:
            raise e from error
        if shape.rank is not None and shape.rank < 2:
            raise errors.bad_value("inputs", "must have rank >= 2", shape) from error
        if compute_dtype is not None:
            if dtype != compute_dtype:
                raise errors.invalid_argument_type(
                    "inputs",
                    "must have a floating point dtype (the module computes in "
                    f"{compute_dtype.name} under its `snt.precision` policy)",
                    inputs,
                ) from error
        elif dtype != (kernel_dtype := weights.kernel_dtype(self, "w")) and not (
            isinstance(inputs, (list, tuple))
        ):
            raise errors.invalid_argument_type(
                "inputs",
                f"must have dtype {kernel_dtype.name}, the dtype of the first input",
                inputs,
            ) from error
        if shape.rank is not None and shape[-1] not in (None, self.input_size):
            raise errors.invalid_argument(
                "inputs",
                f"must have last dimension {self.input_size}, the input size the "
                "weights were created for",
                shape,
            ) from error
