"""`snt.precision`: float32 variables, bfloat16/float16 compute, one cast per call.

A `Policy` says which dtype a module computes in and which dtype its
variables are created in. `apply(module, policy)` stores the policy on the
module and every submodule, in the instance attribute `_precision` (the
class default is None: no policy, the 2.0.2 behaviour). A module that
supports policies reads that attribute once per call; with a policy it casts
its floating inputs to the compute dtype, casts each of its own variables to
the compute dtype once, computes, and casts the outputs to `output_dtype` if
the policy has one. There is no variable getter and no per-access hook, so
the only per-call cost over plain low-precision TensorFlow is that one
attribute read. Variables stay float32: gradients, optimizer updates and
checkpoints are float32, and a checkpoint of a model trained in bfloat16
restores into the same model in float32 and back.

Numerically sensitive parts stay in float32 inside the modules (batch and
group normalization compute their statistics in float32). Losses are the
user's: cast the logits with `tf.cast(logits, tf.float32)` before a softmax
cross-entropy. For float16, whose range is small, scale the loss with
`DynamicLossScale` so that small gradients do not flush to zero.

`snt.mixed_precision` (the original 2.0.2 API, a per-access variable getter)
is unchanged; this module is the fast path.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Sequence
from typing import Any, NamedTuple

import tensorflow as tf

from sonnet._src import base, checks, errors, tf_compat, utils

_CAST = tf.raw_ops.Cast


class Policy(NamedTuple):
    """A precision policy: the dtypes a module computes and stores variables in.

    Attributes:
      compute_dtype: The dtype the module computes in (its floating inputs and
        its variables are cast to it on each call).
      variable_dtype: The dtype floating variables are created in (float32
        for the mixed policies, so updates and checkpoints are float32).
      output_dtype: The dtype outputs are cast to; None (default) leaves them
        in `compute_dtype`.

    >>> snt.precision.Policy(tf.bfloat16, tf.float32)
    Policy(compute_dtype=tf.bfloat16, variable_dtype=tf.float32, output_dtype=None)
    """

    compute_dtype: tf.DType
    variable_dtype: tf.DType
    output_dtype: tf.DType | None = None


# Keras' policy names.
_NAMED = {
    "float32": Policy(tf.float32, tf.float32),
    "mixed_bfloat16": Policy(tf.bfloat16, tf.float32),
    "mixed_float16": Policy(tf.float16, tf.float32),
}


def _floating(argument: str, value: Any) -> tf.DType:
    try:
        dtype = tf.as_dtype(value)
    except TypeError as e:
        raise errors.bad_type(argument, "must be a floating point dtype", value) from e
    if not dtype.is_floating:
        raise errors.bad_value(argument, "must be a floating point dtype", value)
    return dtype


def get_policy(policy: str | Policy) -> Policy:
    """The `Policy` named by `policy` (or `policy` itself, checked).

    Args:
      policy: "mixed_bfloat16" (bfloat16 compute, float32 variables),
        "mixed_float16" (float16 compute, float32 variables), "float32" (the
        names Keras uses), or a `Policy`, whose dtypes may be given in any
        spelling `tf.as_dtype` takes.

    Returns:
      A `Policy` whose fields are `tf.DType`s (or None for `output_dtype`).

    Raises:
      ValueError: for an unknown name or a non-floating dtype.
      TypeError: for anything else than a string or a `Policy`.

    >>> snt.precision.get_policy("mixed_bfloat16").compute_dtype
    tf.bfloat16
    """
    if isinstance(policy, str):
        named = _NAMED.get(policy)
        if named is None:
            raise errors.bad_value(
                "policy", f"must be one of {', '.join(map(repr, _NAMED))}", policy
            )
        return named
    if not isinstance(policy, Policy):
        raise errors.bad_type(
            "policy", "must be a policy name or a `snt.precision.Policy`", policy
        )
    compute = _floating("compute_dtype", policy.compute_dtype)
    variable = _floating("variable_dtype", policy.variable_dtype)
    output = policy.output_dtype
    if output is not None:
        output = _floating("output_dtype", output)
    return Policy(compute, variable, output)


def apply(module: base.Module, policy: str | Policy | None) -> base.Module:
    """Sets `policy` on `module` and all its submodules; returns `module`.

    Modules that support policies (`snt.Linear`, `snt.Bias`, the
    convolutions, `snt.BatchNorm`, `snt.GroupNorm`, `snt.LayerNorm`,
    `snt.InstanceNorm`, `snt.RMSNorm`, `snt.Embed`, `snt.MultiHeadAttention`,
    the recurrent cores `snt.LSTM`, `snt.GRU`, `snt.VanillaRNN` and
    `snt.DeepRNN` (and the deep-RNN factories), and the networks made of
    them, e.g. `snt.nets.MLP`, `snt.nets.ResNet`, `snt.nets.Transformer`)
    then compute in the policy's compute dtype with variables in its
    variable dtype. A recurrent core's state is in the compute dtype too
    (`initial_state` returns it; an LSTM's cell included), floating states
    given in another dtype are cast (the unrolls cast an initial state once),
    and `snt.dynamic_unroll`'s fused path casts the weights once per
    sequence. The other recurrent cores
    (`snt.UnrolledLSTM`, the convolutional LSTMs) do not read policies yet:
    they compute in their own `dtype` (feed them inputs of that dtype).
    The policy is not part of the module's state: `variables` and
    checkpoints are the same with and without one. Apply it after
    constructing the module (a submodule created later, on the first call,
    does not get it), before or after the first call: variables created
    before keep their dtype.

    Args:
      module: An `snt.Module`.
      policy: A policy name ("mixed_bfloat16", "mixed_float16", "float32"),
        a `Policy`, or None to remove the policy (back to the plain
        behaviour: compute in the variables' dtype).

    Returns:
      `module` itself.

    Raises:
      TypeError: if `module` is not an `snt.Module`.

    >>> mlp = snt.precision.apply(snt.nets.MLP([16, 10]), "mixed_bfloat16")
    >>> logits = mlp(tf.ones([8, 4]))
    >>> logits.dtype, mlp.variables[0].dtype
    (tf.bfloat16, tf.float32)
    """
    if not isinstance(module, base.Module):
        raise errors.bad_type("module", "must be an `snt.Module`", module)
    resolved = None if policy is None else get_policy(policy)
    for m in (module, *module.submodules):
        if not isinstance(m, base.Module):
            continue
        # Written to the instance dict: no `tf.Module` attribute tracking, so
        # nothing reaches the checkpoint object graph.
        if resolved is None:
            vars(m).pop("_precision", None)
        else:
            vars(m)["_precision"] = resolved
    return module


def compute_dtype(module: base.Module) -> tf.DType | None:
    """The dtype `module` computes in under its policy; None without one.

    For module authors: None means the 2.0.2 behaviour (compute in the
    variables' dtype, and inputs must have it).

    Args:
      module: An `snt.Module`.

    Returns:
      The policy's `compute_dtype`, or None.

    >>> linear = snt.Linear(2)
    >>> snt.precision.compute_dtype(linear) is None
    True
    >>> snt.precision.compute_dtype(snt.precision.apply(linear, "mixed_bfloat16"))
    tf.bfloat16
    """
    policy = module._precision
    return None if policy is None else policy.compute_dtype


def variable_dtype(module: base.Module, dtype: Any) -> tf.DType:
    """The dtype `module` creates a variable in, for inputs of `dtype`.

    For module authors, in `_initialize`: the policy's `variable_dtype` for
    a floating `dtype`, else `dtype` (no policy, or integer inputs).

    Args:
      module: An `snt.Module`.
      dtype: The inputs' dtype.

    Returns:
      A `tf.DType`.

    >>> linear = snt.precision.apply(snt.Linear(2), "mixed_bfloat16")
    >>> snt.precision.variable_dtype(linear, tf.bfloat16)
    tf.float32
    """
    dtype = tf.as_dtype(dtype)
    policy = module._precision
    if policy is None or not dtype.is_floating:
        return dtype
    return policy.variable_dtype


def cast(value: Any, dtype: Any) -> Any:
    """`value` in `dtype`: itself when it already has it or is not floating.

    Variables are read and cast (one op), so gradients reach them in their
    own dtype. Non-tensor values are converted first.

    Args:
      value: A tensor, variable, or anything `tf.convert_to_tensor` takes.
      dtype: The dtype to cast floating values to.

    Returns:
      `value` or a tensor of `dtype`.

    >>> snt.precision.cast(tf.ones([2]), tf.bfloat16).dtype
    tf.bfloat16
    >>> snt.precision.cast(tf.constant([1, 2]), tf.bfloat16).dtype
    tf.int32
    """
    current = getattr(value, "dtype", None)
    if not isinstance(current, tf.DType):
        value = tf.convert_to_tensor(value)
        current = value.dtype
    # DTypes are interned: identity is equality (an equal copy would only
    # cost a no-op cast).
    if current is dtype or not current.is_floating:
        return value
    return _CAST(x=value, DstT=dtype)


# CPU flags of native bfloat16 arithmetic (Linux names in /proc/cpuinfo).
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def _cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags, or None where they cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return None


@functools.cache
def bfloat16_convolutions_in_float32() -> bool:
    """Whether bfloat16 convolutions run faster as float32 ones (cached).

    True on an x86-64 CPU, in a process that sees no GPU or TPU, unless the
    CPU's flags show bfloat16 arithmetic (AVX-512 BF16, AMX) *and*
    TensorFlow runs its oneDNN kernels, which use it. Otherwise
    TensorFlow's bfloat16 convolution kernels convert every element to
    float32 and back; converting the inputs once, convolving in float32
    and rounding the result to bfloat16 gives the same forward values
    about 7x faster (a ResNet-50 step ~10x). Gradients are computed in
    float32 too (slightly more accurate than the bfloat16 kernels).

    The choice is made when a call is traced, on the machine that traces
    it: a graph exported here keeps float32 convolutions between bfloat16
    casts (correct anywhere, not the fastest on bfloat16 hardware).
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    flags = _cpu_flags()
    if flags is None or (flags & _BF16_FLAGS and tf_compat.onednn_enabled()):
        return False
    return not utils.accelerator_present()


def cast_outputs(policy: Policy, value: Any) -> Any:
    """`value` cast to the policy's `output_dtype` (if it has one)."""
    output = policy.output_dtype
    return value if output is None else cast(value, output)


def _values(gradient: Any) -> Any:
    return gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient


def _multiply(gradient: Any, factor: tf.Tensor) -> Any:
    if gradient is None:
        return None
    factor = tf.cast(factor, _values(gradient).dtype)
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(
            gradient.values * factor, gradient.indices, gradient.dense_shape
        )
    return gradient * factor


class DynamicLossScale(base.Module):
    """Dynamic loss scaling for float16 training (Micikevicius et al., 2017).

    float16 has a small range: gradients below about 6e-8 flush to zero. The
    loss is multiplied by `loss_scale` before differentiation
    (`scale(loss)`), and the gradients divided by it before the update
    (`apply_gradients`, or `unscale` and `update`). A step whose gradients
    are not all finite is skipped (no parameter or optimizer variable
    changes) and the scale halved; after `growth_interval` finite steps in a
    row it is doubled. Everything runs as graph ops, so it works inside
    `tf.function`, and the scale and counter are variables, so a checkpoint
    of the module resumes them. bfloat16 has float32's range and needs no
    loss scaling.

    Args:
      initial_scale: The first scale; default `2 ** 15` (as Keras), large
        enough for most models and quickly halved if too large.
      growth_interval: Number of finite steps after which the scale
        doubles; default 2000 (as Keras).
      multiplier: Factor the scale grows and shrinks by; default 2.
      name: Module name; default `dynamic_loss_scale`.

    Attributes:
      loss_scale: float32 scalar variable, the current scale.
      good_steps: int64 scalar variable, finite steps since the last change.

    >>> w = tf.Variable([1.0])
    >>> loss_scale = snt.precision.DynamicLossScale(initial_scale=8.0)
    >>> with tf.GradientTape() as tape:
    ...   loss = loss_scale.scale(tf.reduce_sum(w * 3.0))
    >>> grads = tape.gradient(loss, [w])
    >>> bool(loss_scale.apply_gradients(snt.optimizers.SGD(0.1), grads, [w]))
    True
    >>> w.numpy()
    array([0.7], dtype=float32)
    """

    def __init__(
        self,
        initial_scale: float = 2.0**15,
        growth_interval: int = 2000,
        multiplier: float = 2.0,
        name: str | None = None,
    ):
        super().__init__(name=name)
        initial = checks.real("initial_scale", initial_scale, 1, allow_tensor=False)
        self.growth_interval = checks.size("growth_interval", growth_interval)
        factor = checks.real("multiplier", multiplier, allow_tensor=False)
        if factor <= 1:
            raise errors.bad_value("multiplier", "must be a number > 1", multiplier)
        self.multiplier = factor
        self.loss_scale = tf.Variable(
            tf.constant(initial, tf.float32), trainable=False, name="loss_scale"
        )
        self.good_steps = tf.Variable(
            tf.constant(0, tf.int64), trainable=False, name="good_steps"
        )

    def scale(self, loss: Any) -> tf.Tensor:
        """`loss * loss_scale`, in the dtype of `loss`; differentiate this."""
        loss = utils.to_tensor("loss", loss)
        if not loss.dtype.is_floating:
            raise errors.bad_type("loss", "must be a floating point tensor", loss)
        return loss * tf.cast(self.loss_scale, loss.dtype)

    def unscale(self, gradients: Sequence[Any]) -> list[Any]:
        """`gradients` divided by `loss_scale` (None and `IndexedSlices` kept)."""
        inverse = 1.0 / self.loss_scale
        return [_multiply(g, inverse) for g in gradients]

    @base.no_name_scope
    def all_finite(self, gradients: Sequence[Any]) -> tf.Tensor:
        """A scalar bool tensor: whether every gradient is finite."""
        checks_ = [
            tf.reduce_all(tf.math.is_finite(_values(g)))
            for g in gradients
            if g is not None
        ]
        if not checks_:
            return tf.constant(True)
        return tf.reduce_all(tf.stack(checks_))

    def update(self, finite: Any) -> None:
        """Updates the scale after a step whose gradients were `finite` or not.

        Not finite: the scale is divided by `multiplier` (not below 1) and
        the count of good steps reset. Finite: the count grows, and at
        `growth_interval` the scale is multiplied by `multiplier` (if that
        stays finite) and the count reset.
        """
        finite = tf.convert_to_tensor(finite, tf.bool)
        scale = self.loss_scale.read_value()
        steps = tf.where(finite, self.good_steps + 1, tf.constant(0, tf.int64))
        grown = scale * self.multiplier
        grow = tf.logical_and(steps >= self.growth_interval, tf.math.is_finite(grown))
        shrunk = tf.maximum(scale / self.multiplier, 1.0)
        new_scale = tf.where(finite, tf.where(grow, grown, scale), shrunk)
        self.loss_scale.assign(new_scale)
        self.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), steps))

    def apply_gradients(
        self,
        optimizer: Any,
        gradients: Sequence[Any],
        parameters: Sequence[tf.Variable],
    ) -> tf.Tensor:
        """Unscales `gradients`, applies them unless one is not finite, updates.

        Args:
          optimizer: Anything with `apply(updates, parameters)`, e.g. an
            `snt.optimizers.Adam`.
          gradients: Gradients of `scale(loss)` with respect to `parameters`.
          parameters: The variables to update.

        Returns:
          A scalar bool tensor: whether the update was applied.
        """
        if not callable(getattr(optimizer, "apply", None)):
            raise errors.bad_type(
                "optimizer",
                "must have an `apply(updates, parameters)` method",
                optimizer,
            )
        gradients = list(gradients)
        unscaled = self.unscale(gradients)
        finite = self.all_finite(unscaled)

        def step() -> tf.Tensor:
            optimizer.apply(unscaled, parameters)
            return tf.constant(True)

        applied = tf.cond(finite, step, lambda: tf.constant(False))
        with tf.control_dependencies([applied]):
            self.update(finite)
        return applied


def copy_policies(source: base.Module, target: base.Module) -> None:
    """Gives `target` and its submodules the policies of `source`'s.

    For a module built like `source` (the same submodule structure), e.g. the
    layers `snt.LayerStack` builds after its template.
    """
    pairs = zip((source, *source.submodules), (target, *target.submodules))
    for a, b in pairs:
        if isinstance(b, base.Module):
            policy = vars(a).get("_precision")
            if policy is None:
                vars(b).pop("_precision", None)
            else:
                vars(b)["_precision"] = policy
