"""`snt.Sequential`: calls a list of callables one after the other."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sonnet._src import base, checks, errors


class Sequential(base.Module):
    """Runs `layers` in order, each on the previous one's output.

    Layers can be modules or any other callables (e.g. `tf.nn.relu`). Extra
    arguments given to the call are passed to the first layer only. With no
    layers the call returns its input unchanged.

    Args:
      layers: An iterable of callables (default None: no layers).
      name: Module name (default `sequential`).

    >>> mlp = snt.Sequential([snt.Linear(4), tf.nn.relu, snt.Linear(2)])
    >>> mlp(tf.ones([8, 3])).shape
    TensorShape([8, 2])
    """

    def __init__(
        self,
        layers: Iterable[Callable[..., Any]] | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        if layers is None:
            layers = []
        elif isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable):
            raise errors.bad_type("layers", "must be an iterable of callables", layers)
        try:
            layers = list(layers)
        except TypeError as e:  # E.g. a scalar tensor.
            raise errors.bad_type(
                "layers", "must be an iterable of callables", layers
            ) from e
        for layer in layers:
            checks.function(
                "layers",
                layer,
                "must contain only callables (modules or functions, not classes)",
            )
        self._layers = layers

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """Calls each layer on the output of the previous one.

        Args:
          inputs: Input of the first layer.
          *args: Extra positional arguments for the first layer.
          **kwargs: Extra keyword arguments for the first layer.

        Returns:
          The output of the last layer (`inputs` if there are no layers).
        """
        outputs = inputs
        for i, layer in enumerate(self._layers):
            outputs = layer(outputs, *args, **kwargs) if i == 0 else layer(outputs)
        return outputs
