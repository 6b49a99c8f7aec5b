"""`snt.spectral_norm`: weights divided by their largest singular value.

`snt.spectral_norm.add(model)` gives the chosen layers of a built model
(`snt.Linear`s, convolutions, `snt.Embed`s) a weight step,
`snt.spectral_norm.SpectralNorm`, so that each call multiplies by

    w / sigma        sigma = v @ W @ u  (an estimate of W's largest singular value)

where `W` is the weight as a `[rows, outputs]` matrix (a convolution's kernel
reshaped, output channels last; see `snt.weight_norm` for the layouts) and
`u` (`[outputs]`), `v` (`[rows]`) estimate its leading right and left
singular vectors (Miyato et al., "Spectral Normalization for Generative
Adversarial Networks", arXiv:1802.05957). The gradient flows through `w`
in both places (`sigma` included), not through `u` and `v`, which are
non-trainable variables of the step.

Training: the estimate is refined by power iteration, `v = normalize(W u)`,
`u = normalize(W^T v)`, `n_power_iterations` times (default 1) per call of
`snt.spectral_norm.update(model)`, which the training step makes (once per
step, before the forward pass). Calls of the model never change `u` and `v`:
evaluation, a traced eval function, a SavedModel keep the estimate as
trained. Why an explicit update and not a training flag: the weight step is
called as `step(layer, dtype)`, without the model's `is_training`; a Python
mode (a context manager) would be read when a function is traced, so a
function traced once would keep its mode silently; a mode variable would put
a `tf.cond` in every call and one more state to set. `update` is one line in
the loop, runs under `tf.function`, XLA and `snt.distribute.Replicator`
(the estimate is the same on every replica: each replica sees the same
weights), like `AveragedWeights.update`. `add` runs 15 iterations at once
(as PyTorch's `spectral_norm` does), so the estimate is close from the start.

`snt.spectral_norm.remove(model)` folds `w / sigma` into `w` and takes the
steps off: a plain model computing the same outputs. See
`sonnet/_src/normalized_weights.py` for the composition with `snt.lora`
(the adapter's term is not normalised) and `snt.int8` (remove first).
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from sonnet._src import checks, errors, module_filter, normalized_weights

# Power iterations `add` runs on a fresh estimate (PyTorch's choice), so that
# sigma is close to the largest singular value before the first update.
_INITIAL_ITERATIONS = 15

_ONE_REPLICA = tf.VariableAggregation.ONLY_FIRST_REPLICA


def _normalize(x: tf.Tensor, eps: float) -> tf.Tensor:
    """`x / max(||x||, eps)`."""
    squared = tf.reduce_sum(tf.square(x))
    return x * tf.math.rsqrt(tf.maximum(squared, tf.constant(eps * eps, x.dtype)))


class SpectralNorm(normalized_weights.NormalizedKernel):
    """The weight step of spectral normalisation: `w / sigma`.

    Made by `snt.spectral_norm.add`, which sets it as a layer's weight step
    (see `snt.spectral_norm`); `update(layer)` refines the estimate.

    Args:
      shape: The shape of the layer's weight.
      output_axes: The weight's output-channel axes (moved last in the
        `[rows, outputs]` matrix view). Default `(-1,)`.
      attribute: The layer's weight variable. Default `"w"`.
      n_power_iterations: Power iterations per `update` (default 1, as in
        Miyato et al.: the weights change little per step).
      eps: Floor of the norms divided by in the iteration (default 1e-12).
      seed: Op seed of the random initial `u` (default None).
      dtype: Dtype of `u` and `v`: the weight's (default float32).
      name: Module name (default `spectral_norm`).

    Attributes:
      u: `[outputs]`, the estimate of the leading right singular vector.
      v: `[rows]`, of the leading left singular vector (zeros until the
        first iteration).

    >>> step = snt.spectral_norm.SpectralNorm([3, 2], seed=1)
    >>> step.u.shape, step.v.shape
    (TensorShape([2]), TensorShape([3]))
    """

    FEATURE = "spectral normalisation"
    NAMESPACE = "spectral_norm"

    def __init__(
        self,
        shape: Any,
        output_axes: tuple[int, ...] = (-1,),
        attribute: str = "w",
        n_power_iterations: int = 1,
        eps: float = 1e-12,
        seed: int | None = None,
        dtype: Any = tf.float32,
        name: str | None = None,
    ):
        super().__init__(
            normalized_weights.check_shape(shape), output_axes, attribute, name=name
        )
        self.n_power_iterations = checks.size("n_power_iterations", n_power_iterations)
        self.eps = normalized_weights.check_eps(eps)
        dtype = checks.dtype("dtype", dtype, floating=True)
        rows = math.prod(self.shape) // self._outputs
        u = tf.random.normal(
            [self._outputs], dtype=dtype, seed=checks.seed("seed", seed)
        )
        self.u = tf.Variable(
            _normalize(u, self.eps), trainable=False, aggregation=_ONE_REPLICA, name="u"
        )
        self.v = tf.Variable(
            tf.zeros([rows], dtype), trainable=False, aggregation=_ONE_REPLICA, name="v"
        )

    def sigma(self, weight: Any) -> tf.Tensor:
        """The estimate `v @ W @ u` of the largest singular value of `weight`."""
        u = tf.stop_gradient(tf.convert_to_tensor(self.u))
        v = tf.stop_gradient(tf.convert_to_tensor(self.v))
        return tf.tensordot(v, tf.linalg.matvec(self.matrix(weight), u), 1)

    def normalize(self, weight: Any) -> tf.Tensor:
        """`weight / sigma(weight)`."""
        return weight / self.sigma(weight)

    def update(self, layer: Any) -> None:
        """Refines `u` and `v` on `layer`'s weight (`n_power_iterations` steps).

        Args:
          layer: The layer this step normalises.

        Raises:
          ValueError: if `layer`'s weight has another shape than the step's.
        """
        weight = getattr(layer, self.attribute, None)
        if weight is None or tuple(weight.shape.as_list()) != self.shape:
            raise errors.bad_value(
                "layer",
                f"must have a weight `{self.attribute}` of shape {list(self.shape)}, "
                "the layer this step normalises",
                layer,
            )
        self._iterate(weight, self.n_power_iterations)

    def _iterate(self, weight: Any, iterations: int) -> None:
        matrix = tf.stop_gradient(self.matrix(weight))
        u = tf.convert_to_tensor(self.u)
        v = tf.convert_to_tensor(self.v)
        for _ in range(iterations):
            v = _normalize(tf.linalg.matvec(matrix, u), self.eps)
            u = _normalize(tf.linalg.matvec(matrix, v, transpose_a=True), self.eps)
        self.u.assign(u)
        self.v.assign(v)


def add(
    module: Any,
    *,
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    types: Any = None,
    pattern: Any = None,
    seed: int | None = None,
) -> dict[str, SpectralNorm]:
    """Spectrally normalises the weights of the layers of a built module tree.

    Each chosen `snt.Linear` (those of `snt.nets.MLP`, the attention
    projections, ...), convolution and `snt.Embed` gets a
    `snt.spectral_norm.SpectralNorm` weight step: its calls multiply by
    `w / sigma` (see `snt.spectral_norm`). Call
    `snt.spectral_norm.update(module)` once per training step.

    Args:
      module: A built `tf.Module` (called at least once), e.g. a GAN's
        discriminator, or one layer.
      n_power_iterations: Power iterations per update (default 1).
      eps: Floor of the norms in the iteration (default 1e-12).
      types: Only normalise the layers that are, or sit inside, an instance
        of this class (or tuple of classes). Default None: any.
      pattern: Only normalise the layers whose name path (their variables'
        name prefix) contains a match of this regular expression.
      seed: Op seed of the random initial estimates (default None).

    Returns:
      The new steps by name path of their layer.

    Raises:
      ValueError: if the tree holds no Linear, convolution or Embed (no
        weight to normalise), one is not built yet, has int8 weights or a
        normalisation already, or sits in an `snt.LayerStack`, or the filters
        choose nothing. Nothing is changed then.
      TypeError: for arguments of the wrong type.

    >>> linear = snt.Linear(2)
    >>> _ = linear(tf.ones([1, 3]))
    >>> steps = snt.spectral_norm.add(linear)
    >>> sorted(steps), [v.name for v in linear.variables]
    (['linear'], ['linear/b:0', 'linear/w:0', 'linear/spectral_norm/u:0',
    'linear/spectral_norm/v:0'])
    >>> kernel = steps["linear"](linear, None)  # What each call multiplies by.
    >>> round(float(tf.linalg.svd(kernel, compute_uv=False)[0]), 4)
    1.0
    """
    n_power_iterations = checks.size("n_power_iterations", n_power_iterations)
    eps = normalized_weights.check_eps(eps)
    seed = checks.seed("seed", seed)
    chosen = normalized_weights.choose(module, types, pattern, "spectral normalisation")
    made = []
    for layer, attribute in chosen:
        weight = getattr(layer, attribute)
        with layer.name_scope:
            step = SpectralNorm(
                weight.shape,
                normalized_weights.output_axes(layer),
                attribute,
                n_power_iterations,
                eps,
                seed,
                weight.dtype,
                name="spectral_norm",
            )
        step._iterate(weight, _INITIAL_ITERATIONS)
        made.append((layer, step))
    for layer, step in made:
        normalized_weights.set_step(layer, step)
    return {module_filter.name_path(layer): step for layer, step in made}


def update(module: Any) -> None:
    """One training step's refinement of every spectral norm estimate in `module`.

    Runs `n_power_iterations` of power iteration on each normalised layer's
    weight and stores `u` and `v`. Call it once per training step, before
    the forward pass (inside the step's `tf.function`, if it has one); calls
    of the model itself never change the estimates.

    Args:
      module: A tree given spectral normalisation by `snt.spectral_norm.add`.

    Raises:
      ValueError: if the tree has no spectral normalisation.

    >>> linear = snt.Linear(2)
    >>> _ = linear(tf.ones([1, 3]))
    >>> _ = snt.spectral_norm.add(linear)
    >>> snt.spectral_norm.update(linear)
    """
    found = normalized_weights.steps(module, SpectralNorm)
    if not found:
        raise errors.bad_value(
            "module",
            "must have spectral normalisation (added by `snt.spectral_norm.add`)",
            module,
        )
    for layer, step in found:
        step._iterate(getattr(layer, step.attribute), step.n_power_iterations)


def remove(module: Any) -> list[Any]:
    """Folds `w / sigma` into each normalised layer's `w` and removes the steps.

    The layers then compute the same outputs as plain layers (the step's
    `u` and `v` leave the checkpoint). Remove before `snt.int8.quantize` or
    `snt.lora.merge`.

    Args:
      module: A tree given spectral normalisation by `snt.spectral_norm.add`.

    Returns:
      The layers that were normalised.

    Raises:
      ValueError: if the tree has no spectral normalisation, or when called
        inside a `tf.function`.

    >>> linear = snt.Linear(2)
    >>> _ = linear(tf.ones([1, 3]))
    >>> _ = snt.spectral_norm.add(linear)
    >>> before = linear(tf.ones([1, 3]))
    >>> snt.spectral_norm.remove(linear)
    [Linear(output_size=2)]
    >>> bool(tf.reduce_all(linear(tf.ones([1, 3])) == before))
    True
    """
    return normalized_weights.remove(module, SpectralNorm)
