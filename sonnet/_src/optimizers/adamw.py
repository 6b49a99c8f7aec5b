"""AdamW: Adam with decoupled weight decay (arXiv:1711.05101)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import base
from sonnet._src.optimizers import adam
from sonnet._src.optimizers import optimizer_utils as opt_utils


class AdamW(adam.Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, arXiv:1711.05101).

    Each `apply` makes Adam's update (see `snt.optimizers.Adam`) and, in
    the same step, shrinks each updated parameter towards zero::

      parameter -= learning_rate * weight_decay * parameter

    where `parameter` is its value before this `apply` (the convention of
    PyTorch's, Keras' and Optax's AdamW). The decay is "decoupled": it does
    not pass through the moments `m` and `v`, unlike an L2 penalty added to
    the loss, which Adam would rescale per parameter. It is scaled by the
    learning rate, so a schedule (`snt.optimizers.schedules`) schedules the
    decay too.

    Variables and checkpoint paths are Adam's: `step` (`adam_w/t`), `m` and
    `v` (`adam_w/m/<parameter name>`, ...). A parameter whose update is None
    is left alone (no decay either); a `tf.IndexedSlices` update decays,
    like it updates, only the indexed rows.

    Args:
      learning_rate: As for `snt.optimizers.Adam`; default 0.001.
      beta1: Decay of the first moment; default 0.9.
      beta2: Decay of the second moment; default 0.999.
      epsilon: Added to the denominator for stability; default 1e-8.
      weight_decay: Decay rate per unit of learning rate; default 0.01
        (PyTorch's). A real number, scalar tensor or `tf.Variable`; 0 gives
        Adam.
      name: Module name; default `"adam_w"`.

    >>> w = tf.Variable([1.0, -2.0])
    >>> opt = snt.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
    >>> opt.apply([tf.constant([0.0, 0.0])], [w])
    >>> w.numpy()
    array([ 0.95, -1.9 ], dtype=float32)
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        weight_decay: Any = 0.01,
        name: str | None = None,
    ):
        super().__init__(learning_rate, beta1, beta2, epsilon, name=name)
        self.weight_decay = opt_utils.hyper_parameter("weight_decay", weight_decay)

    @base.no_name_scope
    def _hyper(
        self, step: tf.Tensor, learning_rate: Any, dtype: tf.DType
    ) -> adam.Hyper:
        hyper = super()._hyper(step, learning_rate, dtype)
        decay = hyper.learning_rate * opt_utils.cast(self.weight_decay, dtype)
        return hyper._replace(decay=decay)
