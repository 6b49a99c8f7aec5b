"""What the normalization modules share: `scale`/`offset` and their checks."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from sonnet._src import checks, errors, initializers, utils


def as_inputs(inputs: Any) -> tf.Tensor:
    """`inputs` as a tensor; None or a string is also an `AttributeError`.

    The original read `inputs.shape` (AttributeError) before anything else.
    """
    if isinstance(inputs, (tf.Tensor, tf.Variable)):
        return inputs  # type: ignore[return-value]
    if inputs is None or isinstance(inputs, (str, bytes)):
        raise errors.lacks_attribute("inputs", "must be a tensor", inputs)
    return utils.to_tensor("inputs", inputs)


def check_eps(eps: Any) -> Any:
    """`eps` of the axis and group norms: a real number or a float tensor."""
    # The original passed `eps` to TF: None failed as a ValueError, a
    # string in the op (InvalidArgumentError); a negative one is accepted.
    if eps is None:
        raise errors.bad_value("eps", "must be a number", eps)
    if isinstance(eps, (str, bytes)):
        raise errors.invalid_argument_type("eps", "must be a number", eps)
    return checks.tf_real("eps", eps, float_tensor=True)


def params_shape(rank: int, channel_axis: int, channels: Any) -> list[Any]:
    """The shape of `scale`/`offset`: `[C]`, or `[C, 1, ..., 1]` channels-first."""
    if channel_axis == rank - 1:
        return [channels]
    return [channels] + [1] * (rank - 2)


def _variable(
    name: str,
    init: initializers.Initializer,
    trainable: bool,
    shape: list[Any],
    dtype: tf.DType,
) -> tf.Variable:
    return tf.Variable(init(shape, dtype), trainable=trainable, name=name)


class NormParams:
    """Constructor checks, `scale`/`offset` creation and per-call checks.

    Mixed into the normalization modules. Each creates `scale` and `offset`
    where its `create_scale`/`create_offset` flag is set (None otherwise),
    except batch norm, which always creates both (`_always_create_params`)
    and makes the flags their trainability.
    """

    _always_create_params: bool = False
    # The `eps` check of `check_common` (batch norm's also takes variables).
    _check_eps = staticmethod(check_eps)
    # The errors of `initialize_and_check` (batch norm's are also TF's, like the
    # original's ops raised).
    _bad_input = staticmethod(errors.bad_value)
    _bad_input_type = staticmethod(errors.bad_type)

    def check_common(
        self: Any,
        create_scale: Any,
        create_offset: Any,
        eps: Any,
        scale_init: Any,
        offset_init: Any,
        data_format: Any,
    ) -> None:
        """Checks and stores the arguments every normalization module takes.

        In the original's order: the data format, then an initializer given
        for a parameter the module does not create, then its type.
        """
        self._create_scale = checks.flag("create_scale", create_scale)
        self._create_offset = checks.flag("create_offset", create_offset)
        # The original passed batch norm's flags on as
        # `tf.Variable(trainable=...)`, where None means trainable.
        self._scale_trainable = create_scale is None or self._create_scale
        self._offset_trainable = create_offset is None or self._create_offset
        self._eps = self._check_eps(eps)
        self._channel_index = utils.get_channel_index(data_format)
        self._data_format = data_format
        checks.unused_initializer(
            "scale_init", scale_init, "create_scale", self._create_scale
        )
        checks.unused_initializer(
            "offset_init", offset_init, "create_offset", self._create_offset
        )
        checks.initializer("scale_init", scale_init)
        checks.initializer("offset_init", offset_init)
        self._scale_init = scale_init or initializers.Ones()
        self._offset_init = offset_init or initializers.Zeros()

    def build_params(self: Any, inputs: tf.Tensor) -> None:
        """Checks the first input and stores its rank, channels and dtype."""
        shape = inputs.shape
        if shape.rank is None or shape.rank < 2:
            # The original indexed the shape of a scalar (`IndexError`).
            make = (
                errors.invalid_argument_index if shape.rank == 0 else errors.bad_value
            )
            raise make(
                "inputs", "must have a known rank >= 2 (batch and channels)", inputs
            )
        if not inputs.dtype.is_floating:
            # The original's moments failed on integers: InvalidArgumentError.
            raise errors.invalid_argument_type(
                "inputs", "must have a floating point dtype", inputs
            )
        rank = shape.rank
        channel_axis = rank - 1 if self._channel_index == -1 else 1
        channels = shape[channel_axis]
        # Only the parameters need a known number of channels.
        needs_channels = self._create_scale or self._create_offset
        if channels == 0 or (channels is None and needs_channels):
            raise errors.bad_value(
                "inputs",
                "must have a statically known, non-zero number of channels",
                inputs,
            )
        self._rank = rank
        self._channel_axis = channel_axis
        self._channels = channels
        self._dtype = inputs.dtype
        self._params_shape = params_shape(rank, channel_axis, channels)

    def create_params(self: Any, shape: list[Any], dtype: tf.DType) -> None:
        """Creates `scale` then `offset` (or sets None where not created)."""
        always = self._always_create_params
        self.scale = (
            _variable("scale", self._scale_init, self._scale_trainable, shape, dtype)
            if always or self._create_scale
            else None
        )
        self.offset = (
            _variable("offset", self._offset_init, self._offset_trainable, shape, dtype)
            if always or self._create_offset
            else None
        )

    def check_params(self: Any, scale: Any, offset: Any) -> None:
        """Rejects call-time parameters the module creates itself.

        Callers skip it when both are None (the usual call).
        """
        if scale is not None and self._create_scale:
            raise errors.bad_value(
                "scale",
                "must be None when the module creates it (create_scale=True)",
                scale,
            )
        if offset is not None and self._create_offset:
            raise errors.bad_value(
                "offset",
                "must be None when the module creates it (create_offset=True)",
                offset,
            )

    def initialize_and_check(self: Any, inputs: tf.Tensor) -> None:
        """Runs `_initialize` (once), then checks `inputs` against the first call.

        They must keep its rank, number of channels and dtype.
        """
        self._initialize(inputs)
        shape = inputs.shape
        rank = shape.rank
        if rank is None:
            return
        if rank != self._rank:
            raise self._bad_input(
                "inputs", f"must keep the rank of the first call ({self._rank})", inputs
            )
        channels = shape[self._channel_axis]
        if channels not in (None, self._channels) and self._channels is not None:
            raise self._bad_input(
                "inputs",
                f"must keep the number of channels of the first call "
                f"({self._channels})",
                inputs,
            )
        if inputs.dtype != self._dtype:
            raise self._bad_input_type(
                "inputs",
                f"must keep the dtype of the first call ({self._dtype.name})",
                inputs,
            )
