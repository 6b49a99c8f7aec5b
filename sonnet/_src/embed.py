"""`snt.Embed`: a learned lookup table from integer ids to vectors."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    errors,
    initializers,
    precision,
    tensors,
    utils,
    weights,
)


def embedding_dim(vocab_size: int) -> int:
    """A heuristic embedding size for a vocabulary: `round(6 * vocab_size ** 0.25)`.

    Args:
      vocab_size: Number of rows of the table (a positive int).

    Returns:
      The suggested number of columns.

    >>> from sonnet._src.embed import embedding_dim
    >>> embedding_dim(100), embedding_dim(10000)
    (19, 60)
    """
    vocab_size = checks.size("vocab_size", vocab_size)
    return int(round(6.0 * math.sqrt(math.sqrt(vocab_size))))


@tf.custom_gradient
def _dense_gradients(table: tf.Tensor) -> Any:
    """Identity whose gradient is always a dense tensor (not `IndexedSlices`)."""

    def grad(dy: Any) -> tf.Tensor:
        return tf.convert_to_tensor(dy)

    return tf.identity(table), grad


class Embed(base.Module):
    """Maps integer ids to rows of a learned table (`embeddings`).

    Unlike most modules, the table is created in the constructor: its shape
    does not depend on the inputs. Give either `vocab_size` (and optionally
    `embed_dim` and `initializer`) for a fresh table, or `existing_vocab` to
    start from given values.

    Args:
      vocab_size: Number of rows (ids `0 .. vocab_size - 1`), a positive int.
      embed_dim: Number of columns; default None means
        `round(6 * vocab_size ** 0.25)`, a common heuristic.
      existing_vocab: Initial table, anything convertible to a rank-2 tensor
        `[vocab_size, embed_dim]`; excludes the three arguments above.
      densify_gradients: If True, the gradient of the table is a dense tensor
        instead of `tf.IndexedSlices` (default False: sparse updates are
        cheaper for large tables, but some optimizers need dense gradients).
      initializer: Initializer for a fresh table; default None means
        `snt.initializers.TruncatedNormal()` (stddev 1).
      trainable: Whether the table is trainable (default True).
      dtype: Dtype of the table (default `tf.float32`).
      name: Module name (default `embed`).

    A lookup reads the rows it needs from the variable (a sparse read).
    TensorFlow then copies the whole table on every later dense read of it
    (its "copy on read" mode, which sparse optimizer updates also turn on),
    so a tied output head that multiplies by `embeddings` pays a copy of the
    table per call. `snt.nets.CausalLM(..., tie_embeddings=True)` reads the
    table once per call and gathers the rows from that read instead.

    Shapes:
      inputs: integer ids of any shape `S` -> outputs `S + [embed_dim]`.

    >>> embed = snt.Embed(vocab_size=100, embed_dim=8)
    >>> embed(tf.constant([[1, 2, 3]])).shape
    TensorShape([1, 3, 8])
    >>> embed.embeddings.shape
    TensorShape([100, 8])
    """

    # The table for each call (`weights.py`): `embeddings` as stored.
    _weight_step: weights.WeightStep = weights.VariableKernel("embeddings")

    def __init__(
        self,
        vocab_size: int | None = None,
        embed_dim: int | None = None,
        existing_vocab: Any = None,
        densify_gradients: bool = False,
        initializer: tensors.Initializer | None = None,
        trainable: bool = True,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(name=name)
        try:
            dtype = tf.as_dtype(dtype)
        except TypeError as e:
            raise errors.bad_type("dtype", "must be a TensorFlow dtype", dtype) from e
        if existing_vocab is None:
            if vocab_size is None:
                raise errors.bad_value(
                    "vocab_size",
                    "must be given when `existing_vocab` is not (one of the two "
                    "is required)",
                    vocab_size,
                )
            vocab_size = checks.size("vocab_size", vocab_size)
            if embed_dim is None:
                embed_dim = embedding_dim(vocab_size)
            embed_dim = checks.size("embed_dim", embed_dim, allow_zero=True)
            checks.initializer("initializer", initializer)
            if initializer is None:
                initializer = initializers.TruncatedNormal()
            value = tensors.initial_value(
                "initializer", initializer, [vocab_size, embed_dim], dtype
            )
        else:
            for argument, given in (
                ("vocab_size", vocab_size),
                ("embed_dim", embed_dim),
                ("initializer", initializer),
            ):
                if given is not None:
                    raise errors.bad_value(
                        argument,
                        "must be None when `existing_vocab` is given (the table "
                        "defines the sizes and values)",
                        given,
                    )
            value = utils.to_tensor("existing_vocab", existing_vocab, dtype=dtype)
            if value.shape.rank != 2:
                raise errors.bad_value(
                    "existing_vocab",
                    "must be a rank-2 table `[vocab_size, embed_dim]`",
                    existing_vocab,
                )
            vocab_size, embed_dim = value.shape.as_list()
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.densify_gradients = checks.flag("densify_gradients", densify_gradients)
        self.embeddings = tf.Variable(
            value,
            # None is `tf.Variable`'s default (trainable), as in the original.
            trainable=trainable is None or checks.flag("trainable", trainable),
            name="embeddings",
        )

    def __call__(self, inputs: Any) -> tf.Tensor:
        """Looks up the rows of `embeddings` for the ids in `inputs`.

        Args:
          inputs: Integer ids (int32 or int64) of any shape, each in
            `[0, vocab_size)`.

        Returns:
          A tensor of shape `inputs.shape + [embed_dim]`, in the dtype of
          `embeddings` (under a `snt.precision` policy: its compute or
          output dtype).

        Raises:
          TypeError: if `inputs` is not an integer tensor.
          ValueError: if an id is out of range (checked by TF on CPU; GPU
            kernels return zeros for such ids instead).
          Both are also `tf.errors.InvalidArgumentError`s, as the original's.
        """
        # The weight step (`weights.py`): the table for this call, as stored;
        # under a policy the looked-up rows are cast, not the table: the same
        # numbers for a fraction of the work (and the gradient stays sparse).
        step = self._weight_step
        if type(step) is weights.Int8Kernel:
            # int8 weights: only the looked-up rows are dequantized.
            return self._lookup(inputs, None)
        table = step(self, None)
        if self.densify_gradients:
            table = _dense_gradients(tf.convert_to_tensor(table))
        return self._lookup(inputs, table)

    @base.no_name_scope
    def _lookup(self, inputs: Any, table: Any) -> tf.Tensor:
        """The rows `inputs` of `table` (None: the int8 table's rows), under
        the module's precision policy.

        A table given as a tensor (a dense read, as `snt.nets.CausalLM`'s
        tied head takes) is gathered from as it is: only a lookup on the
        variable itself is a sparse read (TensorFlow's `ResourceGather`).
        """
        try:
            if table is None:
                step = cast(weights.Int8Kernel, self._weight_step)
                outputs = step.rows(self, inputs)
            else:
                outputs = tf.nn.embedding_lookup(table, inputs)
        except errors.OP_ERRORS as e:
            raise self._input_error(inputs, e) from e
        policy = self._precision
        if policy is None:
            return outputs
        outputs = precision.cast(outputs, policy.compute_dtype)
        return precision.cast_outputs(policy, outputs)

    @base.no_name_scope
    def _input_error(self, inputs: Any, error: Exception) -> Exception:
        try:
            dtype = getattr(inputs, "dtype", None)
            if dtype is None:
                dtype = np.asarray(inputs).dtype
            integer = tf.as_dtype(dtype) in (tf.int32, tf.int64)
        except (TypeError, ValueError):
            integer = False
        # The original let the lookup fail: `InvalidArgumentError` eagerly.
        if not integer:
            return errors.invalid_argument_type(
                "inputs", "must be int32 or int64 ids", inputs
            )
        return errors.invalid_argument(
            "inputs",
            f"must contain ids in [0, {self.vocab_size}) ({error})",
            inputs,
        )
