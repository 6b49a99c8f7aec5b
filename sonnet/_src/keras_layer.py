"""`snt.KerasLayer`: a Sonnet module as a Keras 3 layer (TensorFlow backend).

Under Keras 3 a Keras layer does not see a `tf.Module`'s variables, so a
Sonnet module stored on a Keras model is neither trained by `fit` nor saved by
`save_weights`. This adapter hands Keras the module's own `tf.Variable`s (as
Keras variables backed by them): Keras optimizers update the module's
variables in place, and Sonnet checkpoints of the module see the training.
Its Keras config is the module's constructor call (`module_config`), so
`model.save("....keras")` and `keras.models.load_model` work too.

Keras 3 is imported by TensorFlow itself, so this costs no import time.
"""

from __future__ import annotations

import inspect
from typing import Any

import keras
import tensorflow as tf

from sonnet._src import checks, errors, keras_variables, module_config, tf_compat
from sonnet._src import once as once_lib


def _requires_is_training(module: Any) -> bool:
    """Whether `module`'s call has an `is_training` parameter without default."""
    try:
        parameter = inspect.signature(module).parameters.get("is_training")
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _initialized(module: tf.Module) -> bool:
    """Whether every `@snt.once` method of `module` and its submodules ran
    (`once` keeps, per instance, the keys of the methods that ran)."""
    for m in (module, *module.submodules):
        done = once_lib._record_of(m) or ()
        for cls in type(m).__mro__:
            for attribute in vars(cls).values():
                if isinstance(attribute, once_lib._Once) and (
                    attribute._key not in done
                ):
                    return False
    return True


def _zeros(shape: Any, dtype: Any) -> Any:
    """Example inputs for `shape` (nests allowed); unknown sizes become 1."""
    if (
        isinstance(shape, (list, tuple))
        and shape
        and isinstance(shape[0], (list, tuple, dict))
    ):
        return type(shape)(_zeros(s, dtype) for s in shape)
    if isinstance(shape, dict):
        return {k: _zeros(s, dtype) for k, s in shape.items()}
    return tf.zeros([1 if d is None else d for d in shape], dtype)


@keras.saving.register_keras_serializable(package="sonnet")
class KerasLayer(keras.layers.Layer):
    """A Sonnet module usable as a `keras.layers.Layer` (TensorFlow backend).

    The layer calls `module(inputs)`, or `module(inputs, is_training=...)`
    with Keras' `training` flag (see `training_argument`). When Keras builds
    the layer, the
    module is built by one call on zeros of the input shape (unknown sizes
    as 1) unless it is built already (it has variables, and the lazy
    initialisation of it and its submodules, their `@snt.once` methods, has
    run: a `snt.BatchNorm` has variables before its first call); its
    variables, Keras layers' inside it included, then become the
    layer's weights: `model.fit`, Keras optimizers and
    `model.save_weights`/`load_weights` read and write the module's own
    `tf.Variable`s, so a `tf.train.Checkpoint` of the module reflects Keras
    training, and the other way round. Variables the module creates after
    that first call are not seen by Keras.

    `model.save("model.keras")` and `keras.models.load_model` work when the
    module is built from public Sonnet classes (or classes known to Keras by
    name) with arguments a config can hold: numbers, strings, lists, dicts,
    dtypes, other such modules, Sonnet initializers and functions such as
    `tf.nn.relu`. The layer's config is the module's constructor call; on
    loading, the module is made again and Keras loads the weights. Other
    modules raise a `ValueError` that says what to do; `save_weights` and
    `export` work for every module.

    Args:
      module: The Sonnet module (or any `tf.Module` with a `__call__`) to
        wrap.
      training_argument: Whether to pass Keras' `training` as `is_training`:
        "auto" (default) passes it when the module's call requires it (e.g.
        `snt.BatchNorm`, `snt.Dropout`); True always does (e.g. an
        `snt.nets.MLP` with dropout, whose `is_training` is optional);
        False never does.
      **kwargs: Passed to `keras.layers.Layer` (e.g. `name`, `dtype`).

    Shapes:
      inputs -> outputs, as `module`'s.

    >>> import keras
    >>> mlp = snt.nets.MLP([8, 1])
    >>> model = keras.Sequential([keras.Input((4,)), snt.KerasLayer(mlp)])
    >>> [v.name for v in model.trainable_variables][:2]
    ['mlp.linear_0.b', 'mlp.linear_0.w']
    >>> model.trainable_variables[1].value is mlp.variables[1]
    True
    """

    def __init__(self, module: Any, training_argument: Any = "auto", **kwargs: Any):
        if not isinstance(module, tf.Module) or not callable(module):
            raise errors.bad_type(
                "module", "must be a callable tf.Module (e.g. a snt.Module)", module
            )
        if isinstance(training_argument, str):
            if training_argument != "auto":
                raise errors.bad_value(
                    "training_argument",
                    'must be "auto", True or False',
                    training_argument,
                )
            training_argument = _requires_is_training(module)
        super().__init__(**kwargs)
        self.module = module
        self._is_training = checks.flag("training_argument", training_argument)
        self.module_variables: list[Any] = []

    def build(self, input_shape: Any) -> None:
        """Builds the module (if needed) and hands its variables to Keras."""
        # Keras layers inside the module included (`keras_variables`).
        variables = keras_variables.variables(self.module)
        if not variables or not _initialized(self.module):
            self.call(_zeros(input_shape, self.compute_dtype), training=False)
            variables = keras_variables.variables(self.module)
        self.module_variables = [tf_compat.keras_variable_of(v) for v in variables]

    def call(self, inputs: Any, training: Any = None) -> Any:
        """`module(inputs)`, with `is_training` from Keras' `training`."""
        if self._is_training:
            flag = False if training is None else checks.mode_flag("training", training)
            return self.module(inputs, is_training=flag)
        return self.module(inputs)

    def get_config(self) -> dict[str, Any]:
        """The Keras config: the module's constructor call, described.

        Raises:
          ValueError: The module cannot be described in a config (e.g. a
            lambda argument or a class Keras does not know by name); the
            message says what to do.

        >>> layer = snt.KerasLayer(snt.nets.MLP([4, 2], activate_final=True))
        >>> description = layer.get_config()["module"]
        >>> description["class"], description["args"]
        ('snt.nets.MLP', [[4, 2]])
        >>> description["kwargs"]
        {'activate_final': True}
        """
        config = super().get_config()
        config["module"] = module_config.describe(self.module)
        config["training_argument"] = self._is_training
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> KerasLayer:
        """A layer around a new module made from `get_config`'s description."""
        config = dict(config)
        config["module"] = module_config.rebuild(config["module"])
        return super().from_config(config)
