"""Vector quantization layers for VQ-VAE (van den Oord et al., 2017)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import base, checks, errors, initializers, moving_averages, utils

VQOutput = dict[str, tf.Tensor]


def _size(argument: str, value: Any) -> int:
    """A size; a string one failed in the original's `tf.cast` (no kernel)."""
    if isinstance(value, (str, bytes)):
        raise errors.unimplemented_type(argument, "must be an integer", value)
    return checks.size(argument, value)


class _Quantizer(base.Module):
    """Shared maths of `VectorQuantizer` and `VectorQuantizerEMA`."""

    embedding_dim: int
    num_embeddings: int
    embeddings: tf.Variable

    def _check_inputs(self, inputs: Any) -> tf.Tensor:
        inputs = utils.to_tensor("inputs", inputs)
        if inputs.dtype != self.embeddings.dtype:
            raise errors.invalid_argument_type(
                "inputs",
                f"must have the embeddings' dtype ({self.embeddings.dtype.name})",
                inputs,
            )
        shape = inputs.shape
        if shape.rank is not None:
            if shape.rank == 0 or shape[-1] not in (None, self.embedding_dim):
                # The original's reshape failed: `InvalidArgumentError`.
                raise errors.invalid_argument(
                    "inputs",
                    f"must have a last dimension of size `embedding_dim` "
                    f"({self.embedding_dim})",
                    inputs,
                )
        return inputs

    def _quantize_flat(
        self, inputs: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """Nearest embeddings.

        Returns (flat inputs, distances, encodings, indices, quantized).
        """
        flat_inputs = tf.reshape(inputs, [-1, self.embedding_dim])
        embeddings = self.embeddings
        distances = (
            tf.reduce_sum(tf.square(flat_inputs), 1, keepdims=True)
            - 2 * tf.matmul(flat_inputs, embeddings)
            + tf.reduce_sum(tf.square(embeddings), 0, keepdims=True)
        )
        encoding_indices = tf.argmax(-distances, 1)
        encodings = tf.one_hot(
            encoding_indices, self.num_embeddings, dtype=distances.dtype
        )
        encoding_indices = tf.reshape(encoding_indices, tf.shape(inputs)[:-1])
        quantized = self.quantize(encoding_indices)
        return flat_inputs, distances, encodings, encoding_indices, quantized

    def quantize(self, encoding_indices: tf.Tensor) -> tf.Tensor:
        """The embeddings for `encoding_indices` (int tensor, any shape `S`).

        Returns a tensor of shape `S + [embedding_dim]`.
        """
        return tf.nn.embedding_lookup(tf.transpose(self.embeddings), encoding_indices)

    @staticmethod
    def _outputs(
        inputs: tf.Tensor,
        quantized: tf.Tensor,
        loss: tf.Tensor,
        encodings: tf.Tensor,
        encoding_indices: tf.Tensor,
        distances: tf.Tensor,
    ) -> VQOutput:
        # Straight-through estimator: the forward value is `quantized`, the
        # gradient flows to `inputs` unchanged.
        quantized = inputs + tf.stop_gradient(quantized - inputs)
        avg_probs = tf.reduce_mean(encodings, 0)
        perplexity = tf.exp(-tf.reduce_sum(avg_probs * tf.math.log(avg_probs + 1e-10)))
        return {
            "quantize": quantized,
            "loss": loss,
            "perplexity": perplexity,
            "encodings": encodings,
            "encoding_indices": encoding_indices,
            "distances": distances,
        }


class VectorQuantizer(_Quantizer):
    """Maps each input vector to its nearest embedding (VQ-VAE quantizer).

    The inputs' last dimension holds vectors of size `embedding_dim`; each is
    replaced by the nearest (Euclidean) of `num_embeddings` learned
    embeddings. Gradients pass straight through to the inputs; the returned
    `loss` trains the embeddings (codebook loss) and the encoder (commitment
    loss weighted by `commitment_cost`).

    Args:
      embedding_dim: Size of each embedding vector (the inputs' last dim).
      num_embeddings: Number of embeddings (codebook size `K`).
      commitment_cost: Weight of the commitment loss (0.25 in the paper).
      dtype: Dtype of the embeddings and inputs. Default float32.
      name: Module name. Default "vector_quantizer".

    The `embeddings` variable, `[embedding_dim, num_embeddings]`, is created
    in the constructor with `VarianceScaling(distribution="uniform")`.

    >>> vq = snt.nets.VectorQuantizer(
    ...     embedding_dim=4, num_embeddings=8, commitment_cost=0.25)
    >>> out = vq(tf.random.normal([2, 5, 4]), is_training=True)
    >>> sorted(out)
    ['distances', 'encoding_indices', 'encodings', 'loss', 'perplexity', 'quantize']
    >>> out["quantize"].shape, out["encoding_indices"].shape
    (TensorShape([2, 5, 4]), TensorShape([2, 5]))
    """

    def __init__(
        self,
        embedding_dim: int,
        num_embeddings: int,
        commitment_cost: float,
        dtype: tf.DType = tf.float32,
        name: str = "vector_quantizer",
    ):
        super().__init__(name=name)
        self.embedding_dim = _size("embedding_dim", embedding_dim)
        self.num_embeddings = _size("num_embeddings", num_embeddings)
        self.commitment_cost = checks.tf_real(
            "commitment_cost", commitment_cost, float_tensor=True
        )
        dtype = checks.dtype("dtype", dtype, floating=True)
        initializer = initializers.VarianceScaling(distribution="uniform")
        self.embeddings = tf.Variable(
            initializer([self.embedding_dim, self.num_embeddings], dtype),
            name="embeddings",
        )

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor, is_training: bool | tf.Tensor) -> VQOutput:
        """Quantizes `inputs`.

        Args:
          inputs: A tensor `[..., embedding_dim]` of the embeddings' dtype.
          is_training: Unused (kept for a uniform interface with
            `VectorQuantizerEMA`); a bool or scalar bool tensor.

        Returns:
          A dict with `quantize` (inputs' shape, straight-through), `loss`
          (scalar), `perplexity` (scalar), `encodings` (`[N, K]` one-hot, N the
          number of input vectors), `encoding_indices` (inputs' shape without
          the last dim, int64) and `distances` (`[N, K]`).
        """
        checks.mode_flag("is_training", is_training)
        inputs = self._check_inputs(inputs)
        _, distances, encodings, indices, quantized = self._quantize_flat(inputs)
        e_latent_loss = tf.reduce_mean(tf.square(tf.stop_gradient(quantized) - inputs))
        q_latent_loss = tf.reduce_mean(tf.square(quantized - tf.stop_gradient(inputs)))
        loss = q_latent_loss + self.commitment_cost * e_latent_loss
        return self._outputs(inputs, quantized, loss, encodings, indices, distances)


class VectorQuantizerEMA(_Quantizer):
    """Vector quantizer whose embeddings follow moving averages of the inputs.

    As `snt.nets.VectorQuantizer`, but the embeddings are not trained by
    gradients: in training, each embedding is set to the (exponential moving)
    average of the inputs assigned to it, with Laplace smoothing of the
    cluster sizes. The loss is only the commitment loss.

    Args:
      embedding_dim: Size of each embedding vector (the inputs' last dim).
      num_embeddings: Number of embeddings (codebook size `K`).
      commitment_cost: Weight of the commitment loss.
      decay: Decay of the moving averages, in [0, 1] (e.g. 0.99).
      epsilon: Laplace smoothing of the cluster sizes. Default 1e-5.
      dtype: Dtype of the embeddings and inputs. Default float32.
      name: Module name. Default "vector_quantizer_ema".

    Created in the constructor (all non-trainable): `embeddings`
    `[embedding_dim, num_embeddings]`, and two `snt.ExponentialMovingAverage`
    submodules `ema_cluster_size` (`[K]`) and `ema_dw`
    (`[embedding_dim, K]`).

    >>> vq = snt.nets.VectorQuantizerEMA(
    ...     embedding_dim=3, num_embeddings=5, commitment_cost=0.5, decay=0.9)
    >>> out = vq(tf.random.normal([6, 3]), is_training=True)
    >>> out["encodings"].shape, len(vq.variables)
    (TensorShape([6, 5]), 7)
    """

    def __init__(
        self,
        embedding_dim: int,
        num_embeddings: int,
        commitment_cost: float,
        decay: float,
        epsilon: float = 1e-5,
        dtype: tf.DType = tf.float32,
        name: str = "vector_quantizer_ema",
    ):
        super().__init__(name=name)
        self.embedding_dim = _size("embedding_dim", embedding_dim)
        self.num_embeddings = _size("num_embeddings", num_embeddings)
        # The original's moving averages refused a decay outside [0, 1].
        self.decay = checks.real(
            "decay", decay, minimum=0, maximum=1, float_tensor=True
        )
        self.commitment_cost = checks.tf_real(
            "commitment_cost", commitment_cost, float_tensor=True
        )
        # Only training uses it, and the original checked it no earlier.
        self.epsilon = epsilon
        self._checked_epsilon: Any = None
        dtype = checks.dtype("dtype", dtype, floating=True)
        initializer = initializers.VarianceScaling(distribution="uniform")
        self.embeddings = tf.Variable(
            initializer([self.embedding_dim, self.num_embeddings], dtype),
            trainable=False,
            name="embeddings",
        )
        self.ema_cluster_size = moving_averages.ExponentialMovingAverage(
            decay=self.decay, name="ema_cluster_size"
        )
        self.ema_cluster_size.initialize(tf.zeros([self.num_embeddings], dtype))
        self.ema_dw = moving_averages.ExponentialMovingAverage(
            decay=self.decay, name="ema_dw"
        )
        self.ema_dw.initialize(self.embeddings)

    @utils.no_autograph
    def __call__(self, inputs: tf.Tensor, is_training: bool | tf.Tensor) -> VQOutput:
        """Quantizes `inputs`; in training also moves the embeddings.

        Args:
          inputs: A tensor `[..., embedding_dim]` of the embeddings' dtype.
          is_training: Python bool or scalar bool tensor: whether to update the
            moving averages and the embeddings (after quantizing).

        Returns:
          The dict described in `snt.nets.VectorQuantizer.__call__`; `loss` is
          `commitment_cost * mean((sg(quantized) - inputs)**2)`.
        """
        training = checks.mode_flag("is_training", is_training)
        inputs = self._check_inputs(inputs)
        eps: Any = self._checked_epsilon
        if eps is None and training is not False:
            # Checked before any update, so that a bad one changes nothing.
            eps = checks.tf_real("epsilon", self.epsilon, float_tensor=True)
            self._checked_epsilon = eps
        flat_inputs, distances, encodings, indices, quantized = self._quantize_flat(
            inputs
        )
        e_latent_loss = tf.reduce_mean(tf.square(tf.stop_gradient(quantized) - inputs))

        def update() -> tf.Tensor:
            cluster_size = self.ema_cluster_size(tf.reduce_sum(encodings, 0))
            dw = tf.matmul(flat_inputs, encodings, transpose_a=True)
            dw_average = self.ema_dw(dw)
            n = tf.reduce_sum(cluster_size)
            assert eps is not None  # Checked above when training may be true.
            cluster_size = (cluster_size + eps) / (n + self.num_embeddings * eps) * n
            self.embeddings.assign(dw_average / tf.reshape(cluster_size, [1, -1]))
            return tf.constant(True)

        # An empty batch carries no information (and would make the cluster
        # sizes 0 / 0 on a first update): the averages are left alone.
        num_elements = inputs.shape.num_elements()
        if training is False or num_elements == 0:
            pass
        elif training is True and num_elements is not None:
            update()
        else:
            condition = training
            if num_elements is None:
                not_empty = tf.size(inputs) > 0
                condition = (
                    not_empty
                    if training is True
                    else tf.logical_and(training, not_empty)
                )
            with tf.control_dependencies(
                [tf.cond(condition, update, lambda: tf.constant(False))]
            ):
                e_latent_loss = tf.identity(e_latent_loss)
        loss = self.commitment_cost * e_latent_loss
        return self._outputs(inputs, quantized, loss, encodings, indices, distances)
