"""`Case`: how the conformance suites build and call one module.

Kept apart from `registry` so that importing an entries file on its own (as
pytest's doctest collection does) never re-enters a half-loaded registry.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Case:
    """How to build and call one module for the conformance suites.

    Attributes:
      id: Unique test id, e.g. "Linear" or "Conv2D-NCHW".
      cls: The public class this case covers.
      factory: Builds a fresh, unbuilt module.
      inputs: Returns the example positional arguments: a tuple whose leaves
        are tensors (nests allowed). Python constants belong in `call`.
      call: `call(module, *inputs)` runs the module; default `module(*inputs)`.
      deterministic: False when outputs are random (e.g. dropout in training):
        suites then compare only structure, shapes and dtypes.
      xla: False when the call uses ops XLA cannot compile.
      saved_model: False when the module cannot be exported (say why in a
        comment at the case).
      distribute: False when the module cannot run under MirroredStrategy.
      tolerance: absolute/relative tolerance for output comparisons.
      batch_axis: The batch axis of the input tensors, made unknown by the
        unknown-dims suites.
      static_axes: Input axes that must stay statically known (e.g. time for
        `snt.static_unroll`); the unknown-dims suites keep them.
      trainable: False when the outputs have no differentiable path to the
        trainable variables (e.g. integer outputs); the training-step suite
        then skips the case.
      precisions: Low-precision dtypes (names) the module supports when built
        on inputs of that dtype, checked against float32 by a suite.
      ctor_kwargs: Valid keyword arguments such that `cls(**ctor_kwargs)`
        builds the same module as `factory` (checked by comparing reprs). The
        constructor fuzz replaces one of them at a time with junk. None when
        the factory does more than call `cls` (wrappers, factories).
    """

    id: str
    cls: type
    factory: Callable[[], Any]
    inputs: Callable[[], tuple[Any, ...]]
    call: Callable[..., Any] | None = None
    deterministic: bool = True
    xla: bool = True
    saved_model: bool = True
    distribute: bool = True
    tolerance: float = 1e-5
    batch_axis: int = 0
    static_axes: tuple[int, ...] = ()
    trainable: bool = True
    precisions: tuple[str, ...] = ("float16", "bfloat16")
    ctor_kwargs: dict[str, Any] | None = None

    def run(self, module: Any, *inputs: Any) -> Any:
        if self.call is None:
            return module(*inputs)
        return self.call(module, *inputs)


def from_kwargs(
    id: str,
    cls: type,
    kwargs: dict[str, Any],
    inputs: Callable[[], tuple[Any, ...]],
    call: Callable[..., Any] | None = None,
) -> Case:
    """A case whose module is `cls(**kwargs)` (a fresh copy of `kwargs` each
    time); `kwargs` also feed the constructor fuzz."""
    return Case(
        id=id,
        cls=cls,
        factory=lambda: cls(**copy.deepcopy(kwargs)),
        inputs=inputs,
        call=call,
        ctor_kwargs=kwargs,
    )


def sequence(*shape: int, seed: int = 0) -> tf.Tensor:
    """A deterministic float32 input of `shape` with values in [-2, 2]."""
    n = 1
    for d in shape:
        n *= d
    x = tf.reshape(tf.range(n, dtype=tf.float32), shape)
    return tf.sin(x * 0.37 + seed) * 2.0


def ramp(*shape: int) -> tuple[tf.Tensor]:
    """A one-input tuple: float32 values rising evenly in [-0.5, 0.5)."""
    size = 1
    for d in shape:
        size *= d
    return (tf.reshape(tf.range(size, dtype=tf.float32) / size - 0.5, shape),)
