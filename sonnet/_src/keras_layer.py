"""`snt.KerasLayer`: a Sonnet module as a Keras 3 layer (TensorFlow backend).

Under Keras 3 a Keras layer does not see a `tf.Module`'s variables, so a
Sonnet module stored on a Keras model is neither trained by `fit` nor saved by
`save_weights`. This adapter hands Keras the module's own `tf.Variable`s (as
Keras variables backed by them): Keras optimizers update the module's
variables in place, and Sonnet checkpoints of the module see the training.
Its Keras config is the module's constructor call (`module_config`), so
`model.save("....keras")` and `keras.models.load_model` work too.

The features that change a module after it is made meet Keras here:
freezing (`snt.freeze`, `snt.lora.add`) decides which weights are trainable
(the layer's weights are read from the module on each Keras read, never
cached), adapters and int8 weights made later are weights too, the config
records them for `load_model`, and a Keras dtype policy becomes the
module's `snt.precision` policy.

Keras 3 is imported by TensorFlow itself, so this costs no import time.
"""

from __future__ import annotations

import inspect
from typing import Any, cast

import keras
import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    errors,
    freezing,
    module_config,
    precision,
    tf_compat,
    variable_walk,
)
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


def _not_following_policies() -> tuple[type, ...]:
    """Module classes with variables that do not read `snt.precision` policies."""
    from sonnet._src.recurrent import conv_lstm, unrolled_lstm

    return (unrolled_lstm.UnrolledLSTM, conv_lstm._ConvNDLSTM)


def _precision_policy(layer: keras.layers.Layer, module: Any) -> Any:
    """The `snt.precision.Policy` the layer's Keras dtype policy asks of
    `module` (None for "float32"), or a ValueError if it cannot follow it."""
    keras_policy = layer.dtype_policy
    name = keras_policy.name
    if getattr(keras_policy, "quantization_mode", None) is not None:
        raise errors.bad_value(
            "dtype",
            "must not be a quantized Keras dtype policy for an `snt.KerasLayer`: "
            "quantize the module itself with `snt.int8.quantize`",
            name,
        )
    compute, variable = keras_policy.compute_dtype, keras_policy.variable_dtype
    if compute == variable == "float32":
        return None
    policy = precision.Policy(tf.as_dtype(compute), tf.as_dtype(variable))
    if not isinstance(module, base.Module):
        raise errors.bad_value(
            "dtype",
            'must be "float32" for a module that is not an `snt.Module` (another '
            "dtype policy becomes the module's `snt.precision` policy)",
            name,
        )
    unsupported = _not_following_policies()
    for m in freezing.tree(module):
        if isinstance(m, unsupported):
            raise errors.bad_value(
                "dtype",
                f'must be "float32" for this module: `{m.name}`, a '
                f"`{type(m).__name__}`, does not compute under `snt.precision` "
                "policies",
                name,
            )
        own = vars(m).get("_precision")
        if own is not None and own != policy:
            raise errors.bad_value(
                "dtype",
                f"must agree with the `snt.precision` policy `{m.name}` has "
                f'({own}): pass dtype="float32" to keep the module\'s own policy, '
                "or remove it (`snt.precision.apply(module, None)`)",
                name,
            )
    return policy


def _check_variable_dtypes(layer: Any) -> None:
    """Refuses a module that made its variables in the compute dtype of a
    mixed policy: it does not follow `snt.precision` policies."""
    policy = layer._snt_policy
    if policy is None or policy.compute_dtype == policy.variable_dtype:
        return
    for v in variable_walk.variables(layer.module):
        if v.dtype == policy.compute_dtype:
            raise ValueError(
                f"`snt.KerasLayer` {layer.name!r}: its module does not follow the "
                f"`snt.precision` policy of the Keras dtype policy "
                f"{layer.dtype_policy.name!r} (variables in "
                f"{policy.variable_dtype.name}): `{v.name}` is "
                f'{v.dtype.name}. Give the layer dtype="float32". '
                f"Received: {errors.describe(v)}."
            )


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
    the layer, the module is built by one call on zeros of the input shape
    (unknown sizes as 1) unless it is built already (it has variables, and
    the lazy initialisation of it and its submodules, their `@snt.once`
    methods, has run: a `snt.BatchNorm` has variables before its first
    call).

    Weights: the layer's weights are the module's variables, Keras layers'
    inside it included, read again each time Keras asks (`layer.weights`,
    `model.trainable_variables`, a train function being traced, `summary`,
    saving): `model.fit`, Keras optimizers and `model.save_weights` /
    `load_weights` read and write the module's own `tf.Variable`s, so a
    `tf.train.Checkpoint` of the module reflects Keras training, and the
    other way round. A variable is a trainable weight when the module
    trains it (`trainable_variables` of an `snt.Module`): the variables of
    modules frozen with `snt.freeze` or by `snt.lora.add`, and of frozen
    Keras layers, are non-trainable weights, also when frozen after the
    layer was built; adapters added later and the int8 weights of
    `snt.int8.quantize` become weights. Keras reads the trainable weights
    when it traces its train function (`model.compile` makes it trace again):
    after `snt.freeze`, `snt.unfreeze`, `snt.lora.add` or `snt.int8.quantize`
    on a model that was trained already, call `model.compile(...)` again
    with a new optimizer (Keras optimizers refuse new variables);
    `snt.freeze` and `snt.lora.add` warn when they meet such a traced read.

    Precision: a Keras dtype policy other than "float32" (the layer's
    `dtype`, or Keras' global policy) becomes the module's `snt.precision`
    policy with the same compute and variable dtypes ("mixed_float16":
    float16 compute, float32 variables; "bfloat16": bfloat16 both), set on
    the module and its submodules when the layer is made. Under the
    "float32" policy a module keeps a policy of its own; under another, a
    module with a different policy of its own is refused, as are modules
    that cannot follow one (a plain `tf.Module`, `snt.UnrolledLSTM`, the
    convolutional LSTMs) and Keras' quantized policies (use
    `snt.int8.quantize`).

    Saving: `model.save("model.keras")` and `keras.models.load_model` work
    when the module is built from public Sonnet classes (or classes known to
    Keras by name) with arguments a config can hold: numbers, strings,
    lists, dicts, dtypes, other such modules, Sonnet initializers and
    functions such as `tf.nn.relu`. The layer's config is the module's
    constructor call, plus what was changed since: LoRA adapters (one rank
    and alpha for all), int8 layers and frozen modules, replayed on loading
    (`snt.lora.add`, `snt.int8.quantize`, `snt.freeze`) before Keras loads
    the weights. Other modules raise a `ValueError` that says what to do;
    `save_weights` and `export` work for every module.

    Args:
      module: The Sonnet module (or any `tf.Module` with a `__call__`) to
        wrap.
      training_argument: Whether to pass Keras' `training` as `is_training`:
        "auto" (default) passes it when the module's call requires it (e.g.
        `snt.BatchNorm`, `snt.Dropout`); True always does (e.g. an
        `snt.nets.MLP` with dropout, whose `is_training` is optional);
        False never does.
      **kwargs: Passed to `keras.layers.Layer` (e.g. `name`, `dtype`).

    Raises:
      TypeError: if `module` is not a callable `tf.Module`.
      ValueError: for a bad `training_argument`, or a dtype policy the
        module cannot follow (see above). Nothing is changed then.

    Shapes:
      inputs -> outputs, as `module`'s.

    >>> import keras
    >>> mlp = snt.nets.MLP([8, 1])
    >>> model = keras.Sequential([keras.Input((4,)), snt.KerasLayer(mlp)])
    >>> [v.name for v in model.trainable_variables][:2]
    ['mlp.linear_0.b', 'mlp.linear_0.w']
    >>> model.trainable_variables[1].value is mlp.variables[1]
    True
    >>> _ = snt.freeze(mlp.submodules[0])
    >>> [v.name for v in model.trainable_variables]
    ['mlp.linear_1.b', 'mlp.linear_1.w']
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
        is_training = checks.flag("training_argument", training_argument)
        super().__init__(**kwargs)
        policy = _precision_policy(self, module)
        self.module = module
        self._is_training = is_training
        # Bookkeeping Keras and TensorFlow must not track (`object.__setattr__`).
        object.__setattr__(self, "_snt_weights", _Weights())
        object.__setattr__(self, "_snt_policy", policy)
        object.__setattr__(self, "_snt_changes", None)
        if policy is not None:
            # `_precision_policy` checked that the module is an `snt.Module`.
            precision.apply(cast(base.Module, module), policy)

    def build(self, input_shape: Any) -> None:
        """Builds the module (if needed); its variables become the weights."""
        # Keras layers inside the module included (`keras_variables`).
        if not variable_walk.variables(self.module) or not _initialized(self.module):
            self.call(_zeros(input_shape, self.compute_dtype), training=False)
        _check_variable_dtypes(self)
        changes = self._snt_changes
        if changes is not None:
            module_config.replay_changes(self.module, changes)
            object.__setattr__(self, "_snt_changes", None)

    def call(self, inputs: Any, training: Any = None) -> Any:
        """`module(inputs)`, with `is_training` from Keras' `training`."""
        if self._is_training:
            flag = False if training is None else checks.mode_flag("training", training)
            return self.module(inputs, is_training=flag)
        return self.module(inputs)

    # Keras reads every list of weights through these two (and saving
    # through the stores they fill): each read makes them the module's
    # current variables.

    @property
    def weights(self) -> list[Any]:
        """The module's variables as Keras variables (see the class doc)."""
        self._sync()
        return super().weights

    @property
    def variables(self) -> list[Any]:
        """As `weights` (the layer has no other state)."""
        self._sync()
        return super().variables

    def save_own_variables(self, store: Any) -> None:
        """Saves the module's current variables (Keras' order)."""
        self._sync()
        super().save_own_variables(store)

    def load_own_variables(self, store: Any) -> None:
        """Loads the module's current variables (Keras' order)."""
        self._sync()
        super().load_own_variables(store)

    def _sync(self) -> None:
        """Fills Keras' weight stores with the module's variables now: the
        trainable store with those whose `tf.Variable` is trainable, the other
        with the rest (Keras' saving order), each Keras variable trainable
        when the module trains it (not frozen)."""
        if tf.inside_function():
            # A train function being traced keeps this list: `snt.freeze` and
            # `snt.lora.add` warn when they change it later.
            freezing.record_traced_read(self.module)
        variables = variable_walk.variables(self.module)
        trained = {id(v) for v in _trained(self.module)}
        wrappers = self._snt_weights.wrap(self, variables)
        trainable, non_trainable = [], []
        for variable, wrapper in zip(variables, wrappers):
            wrapper.trainable = id(variable) in trained
            (trainable if variable.trainable else non_trainable).append(wrapper)
        self._trainable_variables[:] = trainable
        self._non_trainable_variables[:] = non_trainable

    def get_config(self) -> dict[str, Any]:
        """The Keras config: the module's constructor call, described, and
        the LoRA adapters, int8 layers and frozen modules it has since.

        Raises:
          ValueError: The module cannot be described in a config (e.g. a
            lambda argument or a class Keras does not know by name, or LoRA
            adapters of different ranks); the message says what to do.

        >>> layer = snt.KerasLayer(snt.nets.MLP([4, 2], activate_final=True))
        >>> description = layer.get_config()["module"]
        >>> description["class"], description["args"]
        ('snt.nets.MLP', [[4, 2]])
        >>> description["kwargs"]
        {'activate_final': True}
        """
        config = super().get_config()
        config["module"] = module_config.describe(self.module, self._snt_policy)
        config["training_argument"] = self._is_training
        config.update(module_config.describe_changes(self.module))
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> KerasLayer:
        """A layer around a new module made from `get_config`'s description;
        the recorded changes are replayed when it is built."""
        config = dict(config)
        changes = module_config.pop_changes(config)
        config["module"] = module_config.rebuild(config["module"])
        layer = super().from_config(config)
        object.__setattr__(layer, "_snt_changes", changes)
        return layer


class _Weights:
    """The Keras variables standing for a module's `tf.Variable`s, by `id`
    (kept with the variable, so that an `id` is not reused while listed)."""

    __slots__ = ("by_id",)

    def __init__(self) -> None:
        self.by_id: dict[int, tuple[tf.Variable, Any]] = {}

    def wrap(self, layer: keras.layers.Layer, variables: Any) -> list[Any]:
        """One Keras variable per variable; new ones made in the layer's scope."""
        by_id = self.by_id
        if any(id(v) not in by_id for v in variables):
            # Eagerly, also when a train function being traced reads first.
            with tf.init_scope(), keras.name_scope(layer.name, caller=layer):
                for v in variables:
                    if id(v) not in by_id:
                        by_id[id(v)] = (v, tf_compat.keras_variable_of(v))
        if len(by_id) > len(variables):  # Variables the module dropped.
            kept = {id(v) for v in variables}
            self.by_id = by_id = {k: by_id[k] for k in kept}
        return [by_id[id(v)][1] for v in variables]


def _trained(module: tf.Module) -> tuple[tf.Variable, ...]:
    """The variables `module` trains: as `snt.Module.trainable_variables`
    (frozen modules left out), without its error when there are none."""
    return variable_walk.trainable_variables(module)[0]
