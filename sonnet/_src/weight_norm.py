"""`snt.weight_norm`: weights as a direction times a learned norm per channel.

`snt.weight_norm.add(model)` gives the chosen layers of a built model
(`snt.Linear`s, convolutions, `snt.Embed`s) a weight step,
`snt.weight_norm.WeightNorm`, so that each call multiplies by

    w_j = g_j * v_j / ||v_j||

for each output channel `j` (Salimans & Kingma, "Weight Normalization",
arXiv:1602.07868): `v` is the layer's own variable (`w`, `embeddings`:
names and checkpoint paths unchanged; only its direction matters now) and
`g` a new trainable variable of the step (`.../weight_norm/g`), one norm per
output channel, set to the norms of the weights when added, so the model's
outputs do not change. Both train; the gradients are those of the formula.

Output channels, as in `snt.int8`: the columns of a `snt.Linear`'s `w`
(`g: [output_size]`), the last axis of a forward convolution's kernel
(`[*kernel, in, out]`, `g: [out]`), the second to last of a transposed one
(`[*kernel, out, in]`), the last two of `snt.DepthwiseConv2D`'s
(`g: [in, multiplier]`) and the rows of an `snt.Embed`'s table (one vector
per id, `g: [vocab_size]`).

`snt.weight_norm.remove(model)` folds `g * v / ||v||` into `w` and takes the
steps off. See `sonnet/_src/normalized_weights.py` for the composition with
`snt.lora` and `snt.int8`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import checks, module_filter, normalized_weights


class WeightNorm(normalized_weights.NormalizedKernel):
    """The weight step of weight normalisation: `g * v / ||v||` per channel.

    Made by `snt.weight_norm.add`, which sets it as a layer's weight step
    (see `snt.weight_norm`).

    Args:
      shape: The shape of the layer's weight.
      output_axes: The weight's output-channel axes (one norm for each of
        their entries). Default `(-1,)`.
      attribute: The layer's weight variable. Default `"w"`.
      eps: Floor of the norms divided by (default 1e-12).
      dtype: Dtype of `g`: the weight's (default float32).
      name: Module name (default `weight_norm`).

    Attributes:
      g: The norm of each output channel, trainable (ones until
        `snt.weight_norm.add` sets the weights' norms).

    >>> step = snt.weight_norm.WeightNorm([3, 2])
    >>> step.g.numpy()
    array([1., 1.], dtype=float32)
    >>> step.normalize(tf.constant([[3.0, 0.0], [4.0, 2.0], [0.0, 0.0]])).numpy()
    array([[0.6, 0. ],
           [0.8, 1. ],
           [0. , 0. ]], dtype=float32)
    """

    FEATURE = "weight normalisation"
    NAMESPACE = "weight_norm"

    def __init__(
        self,
        shape: Any,
        output_axes: tuple[int, ...] = (-1,),
        attribute: str = "w",
        eps: float = 1e-12,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        shape = normalized_weights.check_shape(shape)
        super().__init__(shape, output_axes, attribute, name=name)
        self.eps = normalized_weights.check_eps(eps)
        dtype = checks.dtype("dtype", dtype, floating=True)
        trailing = self.output_axes == tuple(
            range(len(shape) - len(self.output_axes), len(shape))
        )
        # `g` broadcasts against the weight as it is when its axes are last.
        self._g_shape = None if trailing else self._broadcast_shape
        self.g = tf.Variable(tf.ones(self._channel_shape, dtype), name="g")

    def norms(self, weight: Any) -> tf.Tensor:
        """`||v_j||` for each output channel `j`, in `g`'s shape."""
        squared = tf.reduce_sum(tf.square(weight), axis=self._reduced_axes)
        return tf.sqrt(squared)

    def normalize(self, weight: Any) -> tf.Tensor:
        """`g * weight / ||weight||`, per output channel."""
        squared = tf.reduce_sum(
            tf.square(weight), axis=self._reduced_axes, keepdims=True
        )
        floor = tf.constant(self.eps * self.eps, squared.dtype)
        g = self.g if self._g_shape is None else tf.reshape(self.g, self._g_shape)
        return weight * (g * tf.math.rsqrt(tf.maximum(squared, floor)))


def add(
    module: Any, *, eps: float = 1e-12, types: Any = None, pattern: Any = None
) -> dict[str, WeightNorm]:
    """Weight-normalises the layers of a built module tree.

    Each chosen `snt.Linear`, convolution and `snt.Embed` gets a
    `snt.weight_norm.WeightNorm` weight step (see `snt.weight_norm`) whose
    `g` starts at the norms of the weights: the outputs do not change, and
    `module.trainable_variables` gain the `g`s.

    Args:
      module: A built `tf.Module` (called at least once), or one layer.
      eps: Floor of the norms divided by (default 1e-12).
      types: Only normalise the layers that are, or sit inside, an instance
        of this class (or tuple of classes). Default None: any.
      pattern: Only normalise the layers whose name path contains a match of
        this regular expression.

    Returns:
      The new steps by name path of their layer.

    Raises:
      ValueError: if the tree holds no Linear, convolution or Embed (no
        weight to normalise), one is not built yet, has int8 weights or a
        normalisation already, or sits in an `snt.LayerStack`, or the filters
        choose nothing. Nothing is changed then.
      TypeError: for arguments of the wrong type.

    >>> linear = snt.Linear(2, w_init=snt.initializers.Constant(2.0))
    >>> _ = linear(tf.ones([1, 3]))
    >>> steps = snt.weight_norm.add(linear)
    >>> [v.name for v in linear.trainable_variables]
    ['linear/b:0', 'linear/w:0', 'linear/weight_norm/g:0']
    >>> steps["linear"].g.numpy()  # The norms of the columns of `w`.
    array([3.4641016, 3.4641016], dtype=float32)
    """
    eps = normalized_weights.check_eps(eps)
    chosen = normalized_weights.choose(module, types, pattern, "weight normalisation")
    made = []
    for layer, attribute in chosen:
        weight = getattr(layer, attribute)
        with layer.name_scope:
            step = WeightNorm(
                weight.shape,
                normalized_weights.output_axes(layer),
                attribute,
                eps,
                weight.dtype,
                name="weight_norm",
            )
        step.g.assign(step.norms(weight))
        made.append((layer, step))
    for layer, step in made:
        normalized_weights.set_step(layer, step)
    return {module_filter.name_path(layer): step for layer, step in made}


def remove(module: Any) -> list[Any]:
    """Folds `g * v / ||v||` into each normalised layer's weight and removes
    the steps: plain layers computing the same outputs.

    Args:
      module: A tree given weight normalisation by `snt.weight_norm.add`.

    Returns:
      The layers that were normalised.

    Raises:
      ValueError: if the tree has no weight normalisation, or when called
        inside a `tf.function`.

    >>> linear = snt.Linear(2, w_init=snt.initializers.Constant(2.0))
    >>> _ = linear(tf.ones([1, 3]))
    >>> _ = snt.weight_norm.add(linear)
    >>> _ = linear._weight_step.g.assign([1.0, 2.0])
    >>> snt.weight_norm.remove(linear)
    [Linear(output_size=2, w_init=Constant(value=2.0))]
    >>> linear.w.numpy()  # Each column now has its norm `g`.
    array([[0.57735026, 1.1547005 ],
           [0.57735026, 1.1547005 ],
           [0.57735026, 1.1547005 ]], dtype=float32)
    """
    return normalized_weights.remove(module, WeightNorm)
