"""The traced weight-matrix product `x @ w`, laid out for TensorFlow's kernels.

For inputs `x` `[..., in]` and a kernel `w` `[in, out]`, `snt.Linear`'s
product (`linear.product`) is `tf.matmul(x, w)`. Eager calls run exactly
that. In a graph (where the gradient is taken by the tape over a whole
step), two layouts are changed:

- Inputs of rank > 2 are multiplied as one `[rows, in]` matrix (`rows`),
  the adapter's term and the bias are added to the rows (where TensorFlow
  fuses the bias into the product) and the result is split back into the
  inputs' leading dimensions. `tf.matmul` of a `[B, T, in]` tensor by a 2-D kernel is a
  batch matmul, whose gradient for the kernel is one `[in, T] x [T, out]`
  product per example and a sum over them; as rows it is one product
  (`snt.Linear(1024)` on `[16, 128, 256]`, forward and backward, 2 CPU
  threads: 33.4 -> 15.9 ms). Only where the last dimension is known to be
  `in` (else a wrong size could reshape without an error).
- For float32 kernels with `in > out` the weight gradient is computed as
  the transpose of `dy^T x` (`[out, in]`) instead of `x^T dy`: the same sums,
  but TensorFlow's CPU matmul (Eigen) runs a transposed-operand product up
  to a quarter slower when its output has more rows than columns (bench
  Transformer's MLP output layer, `[2048, 1024]` by `[2048, 256]`: 11.7 ->
  9.4 ms, and its train step 2-10% faster in 7 of 9 interleaved A/Bs, level
  in 2; `in < out` is the other way round and keeps the plain form). The
  transpose is of a weight-sized matrix, small next to the product; on
  accelerators both forms are one library call.

`matmul` is the product of rows. `LAYOUT = False` traces the plain
`tf.matmul` of the inputs as they are (the tests' oracle).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import batch_apply

# The switch for tests: False traces the plain `tf.matmul` and its gradient.
LAYOUT = True


@tf.custom_gradient
def _transposed_weight_gradient(x: tf.Tensor, w: tf.Tensor) -> Any:
    """`x @ w` whose weight gradient is computed as `(dy^T x)^T`."""

    def grad(dy: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        dx = tf.matmul(dy, w, transpose_b=True)
        dw = tf.transpose(tf.matmul(dy, x, transpose_a=True))
        return dx, dw

    return tf.matmul(x, w), grad


def _traced(x: Any) -> bool:
    """Whether `x` is a tensor of a graph being traced, with the layout on."""
    return LAYOUT and isinstance(x, tf.Tensor) and not tf.executing_eagerly()


def rows(x: Any, w: Any) -> tf.Tensor | None:
    """In a graph, inputs `[..., in]` of rank > 2 as a `[rows, in]` matrix
    for a kernel `w` `[in, out]`; None where they stay as they are (eager
    calls, rank 2, a last dimension not known to be `in`, other dtypes).

    The caller multiplies (`matmul`), adds its bias to the rows (where
    TensorFlow fuses it into the product) and splits the rows back into the
    inputs' leading dimensions (`snt.split_leading_dim`).
    """
    if not _traced(x):
        return None
    shape, kernel = x.shape, w.shape
    if (
        shape.rank is None
        or shape.rank < 3
        or kernel.rank != 2
        or kernel[0] is None
        or shape[-1] != kernel[0]
        or x.dtype != w.dtype
    ):
        return None
    return batch_apply.merge_leading_dims(x, -1)


def matmul(x: Any, w: Any) -> tf.Tensor:
    """`tf.matmul(x, w)`; in graphs, for rank-2 float32 `x` and a kernel
    `[in, out]` with `in > out`, with the weight gradient laid out as above.

    >>> from sonnet._src import products
    >>> products.matmul(tf.ones([2, 3]), tf.ones([3, 1])).numpy().tolist()
    [[3.0], [3.0]]
    """
    if not _traced(x):
        return tf.matmul(x, w)
    kernel = w.shape
    if (
        x.shape.rank == 2
        and kernel.rank == 2
        and x.dtype == tf.float32
        and w.dtype == tf.float32
        and kernel[0] is not None
        and kernel[1] is not None
        and kernel[0] > kernel[1]
    ):
        return _transposed_weight_gradient(x, tf.convert_to_tensor(w))
    return tf.matmul(x, w)
