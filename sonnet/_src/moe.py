"""`snt.MixtureOfExperts`: an MLP made of experts, each token run by its top k.

How a call runs (the one place this is written):

* **Route.** The router (`snt.Linear(num_experts, with_bias=False)`) gives
  float32 logits `[N, E]` for the `N` tokens (every leading axis flattened;
  float64 for float64 inputs).
  Scores are their softmax (`gating="softmax"`) or sigmoid
  (`gating="sigmoid"`, DeepSeek-V3); each token picks its `top_k` experts by
  score (`tf.math.top_k`: ties go to the lower index), and their scores are
  the gates, optionally divided by their sum (`normalize_gates`).
* **Dispatch.** Only routed tokens are computed, one of two ways:
  - with a `capacity_factor`, each expert has `C = ceil(capacity_factor * N
    * top_k / E)` slots. Assignments fill them in order of choice rank, then
    token (all first choices before any second choice), and an assignment
    finding its expert full is dropped (the token gets nothing from that
    expert). Tokens are gathered into an `[E, C, D]` buffer (empty slots read
    a zero row), the experts run as batched matmuls over the expert axis,
    and each kept assignment's result is gathered back. Static shapes: XLA
    compiles it.
  - dropless (`capacity_factor=None`): assignments are sorted by expert
    (stable), the gathered tokens are split into one group per expert
    (`tf.split` by the counts), each group runs through its expert, and the
    results are summed back into their tokens (`tf.math.unsorted_segment_sum`).
    Exactly `N * top_k` rows; the group sizes are known only when it runs,
    so XLA cannot compile it (refused with an error saying so).
* **Combine.** A token's output is the gate-weighted sum of its experts'
  outputs, plus the shared expert's (a dense MLP on every token) if any.

Auxiliary losses are returned, never stored: a stored value would be a
stale tensor outside the `tf.function` or replica that made it.
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple, overload

import numpy as np
import tensorflow as tf

from sonnet._src import (
    base,
    checks,
    errors,
    initializers,
    linear,
    mlp_activation,
    once,
    precision,
    tensors,
    tf_compat,
    utils,
)

_GATINGS = ("softmax", "sigmoid")
_NO_XLA = (
    "must not be None (dropless routing) in a function compiled with XLA "
    "(`jit_compile=True`): the number of tokens each expert gets is only known "
    "when the function runs, and XLA needs it when it compiles. Give a "
    "capacity factor (e.g. `capacity_factor=1.25`: each expert then takes at "
    "most that multiple of its even share of the tokens), or trace without XLA"
)
# The smallest sum of gates a sigmoid router divides by (DeepSeek-V3's guard
# against `0 / 0` when every chosen sigmoid underflows).
_TINY = 1e-20


class Routing(NamedTuple):
    """The router's choices for `N` tokens (see `route`)."""

    experts: tf.Tensor  # [N, top_k] int32: the chosen experts, best first.
    gates: tf.Tensor  # [N, top_k], the logits' dtype: their weights.
    probabilities: tf.Tensor  # [N, E]: P(expert), for the balancing loss.


def route(logits: tf.Tensor, top_k: int, gating: str, normalize: bool) -> Routing:
    """Top-k routing of `logits [N, E]` (module docstring)."""
    if gating == "softmax":
        scores = tf.nn.softmax(logits)
        probabilities = scores
    else:
        scores = tf.sigmoid(logits)
        # DeepSeek-V3's balancing loss uses the scores normalised per token.
        total = tf.reduce_sum(scores, axis=-1, keepdims=True)
        probabilities = scores / tf.maximum(total, _TINY)
    gates, experts = tf.math.top_k(scores, top_k)
    if normalize:
        gates = gates / tf.maximum(tf.reduce_sum(gates, axis=-1, keepdims=True), _TINY)
    return Routing(experts, gates, probabilities)


def slot_positions(experts: tf.Tensor, num_experts: int) -> tf.Tensor:
    """Each assignment's place in its expert's queue, `[N, top_k]` int32.

    The queue order is choice rank, then token: the first choices of tokens
    `0..N-1`, then their second choices, and so on.
    """
    choice_major = tf.reshape(tf.transpose(experts), [-1])
    one_hot = tf.one_hot(choice_major, num_experts, dtype=tf.int32)
    before = tf.cumsum(one_hot, axis=0, exclusive=True)
    position = tf.reduce_sum(before * one_hot, axis=1)
    return tf.transpose(tf.reshape(position, [experts.shape[1], -1]))


def capacity(capacity_factor: float, tokens: Any, top_k: int, num_experts: int) -> Any:
    """`ceil(capacity_factor * tokens * top_k / num_experts)`: an int for an
    int `tokens`, else an int32 tensor (the same float64 arithmetic)."""
    if isinstance(tokens, int):
        return math.ceil(capacity_factor * tokens * top_k / num_experts)
    share = capacity_factor * tf.cast(tokens, tf.float64) * top_k / num_experts
    return tf.cast(tf.math.ceil(share), tf.int32)


def aux_losses(logits: tf.Tensor, routing: Routing) -> dict[str, tf.Tensor]:
    """The load-balancing and router z-losses of one call's tokens.

    `load_balancing = E * sum_e f_e * P_e` (Switch Transformer, Fedus et al.
    2021, arXiv:2101.03961), `f_e` the fraction of the `N * top_k`
    assignments that chose expert `e` (before any is dropped for capacity),
    `P_e` the mean router probability of `e`: 1 when routing is even.
    `router_z = mean(logsumexp(logits) ** 2)` (ST-MoE, Zoph et al. 2022,
    arXiv:2202.08906). Zero for zero tokens.
    """
    num_experts, top_k = logits.shape.as_list()[-1], routing.experts.shape.as_list()[-1]
    assert num_experts is not None and top_k is not None
    tokens = tf.cast(tf.shape(logits)[0], logits.dtype)
    chosen = tf.reduce_sum(
        tf.one_hot(routing.experts, num_experts, dtype=logits.dtype), axis=[0, 1]
    )
    fraction = tf.math.divide_no_nan(chosen, tokens * top_k)
    mean_probability = tf.math.divide_no_nan(
        tf.reduce_sum(routing.probabilities, axis=0), tokens
    )
    balance = num_experts * tf.reduce_sum(fraction * mean_probability)
    z = tf.math.divide_no_nan(
        tf.reduce_sum(tf.square(tf.reduce_logsumexp(logits, axis=-1))), tokens
    )
    return {"load_balancing": balance, "router_z": z}


class _Weights(NamedTuple):
    """One MLP's kernels and biases (biases broadcastable; None without)."""

    w_in: Any
    b_in: Any
    w_gate: Any
    b_gate: Any
    w_out: Any
    b_out: Any


def _mlp(x: tf.Tensor, w: _Weights, activation: str) -> tf.Tensor:
    """`out(activation(in(x)))`, or SwiGLU `out(silu(gate(x)) * in(x))`."""

    def affine(x: tf.Tensor, kernel: Any, bias: Any) -> tf.Tensor:
        y = tf.matmul(x, kernel)
        return y if bias is None else y + bias

    gate = affine(x, w.w_gate, w.b_gate) if activation == "swiglu" else None
    h = mlp_activation.hidden(activation, affine(x, w.w_in, w.b_in), gate)
    return affine(h, w.w_out, w.b_out)


class MixtureOfExperts(base.Module):
    """A mixture-of-experts MLP: each token runs through its `top_k` experts.

    A router scores the `num_experts` experts for every token; each token is
    sent to its `top_k` best, and its output is their outputs weighted by
    the gates (their scores, optionally renormalised), plus a shared expert's
    if `shared_expert=True` (a dense MLP every token runs through, as in
    DeepSeek-MoE and Qwen-MoE). Each expert is an MLP like
    `snt.nets.TransformerBlock`'s: `out(activation(in(x)))`, or with
    `activation="swiglu"` `out(silu(gate(x)) * in(x))` (Mixtral). Only
    routed tokens are computed: the cost is that of `top_k` experts per
    token, not `num_experts`.

    With a `capacity_factor`, each expert takes at most
    `ceil(capacity_factor * tokens * top_k / num_experts)` tokens of a call;
    assignments fill the experts in order of choice rank, then token (every
    token's first choice before any second choice; tokens in the order of
    the flattened leading axes), and the ones that find their expert full are
    dropped (for a token whose every choice is dropped, the routed part is
    zero, so the residual connection carries it). The shapes are then
    static, so this runs under XLA (`jit_compile=True`). Without one
    (`capacity_factor=None`, the default), no token is dropped; the group
    sizes then change from call to call, which XLA cannot compile.

    Training losses: `moe(x, return_aux_losses=True)` returns
    `(outputs, {"load_balancing": ..., "router_z": ...})`, two float32
    scalars (float64 for float64 inputs) of this call's tokens: the Switch
    Transformer load-balancing loss `num_experts * sum_e f_e * P_e` (`f_e`:
    the fraction of the assignments made to expert `e`, before dropping;
    `P_e`: its mean router probability; 1 when routing is even) and the
    router z-loss `mean(logsumexp(logits) ** 2)`. Add them to the loss with
    small weights (typically 1e-2 and 1e-3). They are returned, not stored,
    so they work the same eagerly, in a `tf.function`, under XLA and in
    each replica of an `snt.distribute.Replicator` (where they are of the
    replica's tokens); in an `snt.LayerStack`, return them as per-layer
    outputs (`stack(x, per_layer={})`).

    Args:
      num_experts: Number of routed experts (>= 1).
      hidden_size: Hidden size of each expert's MLP.
      top_k: Experts per token, at most `num_experts`; default 2 (Mixtral).
      activation: The experts' nonlinearity: `"gelu"` (default, exact),
        `"gelu_tanh"`, `"relu"` or `"swiglu"` (with a `gate` projection).
      gating: `"softmax"` (default: softmax probabilities of the router
        logits) or `"sigmoid"` (per-expert sigmoid scores, DeepSeek-V3).
      normalize_gates: Whether to divide each token's `top_k` gates by their
        sum. Default None means True for `top_k > 1` (Mixtral: the same as a
        softmax over the chosen logits; DeepSeek-V3) and False for
        `top_k = 1` (Switch Transformer: a renormalised single gate is 1, and
        the router would learn only from the auxiliary losses).
      capacity_factor: A positive number: each expert takes at most
        `ceil(capacity_factor * tokens * top_k / num_experts)` tokens per
        call and the rest are dropped (see above); 1.0 is an even share.
        Default None: dropless.
      shared_expert: Whether to add a shared expert: a dense MLP of the same
        kind that every token runs through, its output added (default False).
      shared_hidden_size: The shared expert's hidden size. Default None
        means `hidden_size`. Only with `shared_expert=True`.
      with_bias: Whether the experts' projections have biases (default
        True, as `snt.Linear`). The router never has one.
      w_init: Initializer of every kernel (called once per expert with its
        `[fan_in, fan_out]` shape). Default None means a truncated normal
        with `stddev = 1 / sqrt(fan_in)`, as `snt.Linear`.
      name: Module name (default `mixture_of_experts`).

    Attributes (variables, created on the first call; their names are
    checkpoint paths): `router` (an `snt.Linear`, `w: [model_size,
    num_experts]`); the experts stacked on a leading expert axis, one
    variable per parameter: `w_in [num_experts, model_size, hidden_size]`,
    `b_in [num_experts, hidden_size]`, `w_gate`/`b_gate` (SwiGLU only, as
    `w_in`/`b_in`), `w_out [num_experts, hidden_size, model_size]`, `b_out
    [num_experts, model_size]`; with a shared expert `shared_w_in`,
    `shared_b_in`, `shared_w_gate`, `shared_b_gate`, `shared_w_out`,
    `shared_b_out` (the same without the expert axis).

    Shapes:
      inputs `[..., model_size]` (rank >= 2) -> outputs of the same shape
      and dtype. The router computes in float32 (float64 for float64
      inputs); under a `snt.precision` policy the variables are float32 and
      the experts compute in its compute dtype.

    >>> moe = snt.MixtureOfExperts(num_experts=4, hidden_size=16, top_k=2)
    >>> outputs, losses = moe(tf.ones([2, 3, 8]), return_aux_losses=True)
    >>> outputs.shape, sorted(losses)
    (TensorShape([2, 3, 8]), ['load_balancing', 'router_z'])
    >>> moe.w_in.shape, moe.router.w.shape
    (TensorShape([4, 8, 16]), TensorShape([8, 4]))
    """

    # The variables' dtype, set when the module is built.
    _dtype: tf.DType | None = None

    # Created on the first call (`_make_mlp`); the gates with SwiGLU only,
    # the biases with `with_bias` only, the `shared_` ones with a shared expert.
    model_size: int
    w_in: tf.Variable
    b_in: tf.Variable
    w_gate: tf.Variable
    b_gate: tf.Variable
    w_out: tf.Variable
    b_out: tf.Variable
    shared_w_in: tf.Variable
    shared_b_in: tf.Variable
    shared_w_gate: tf.Variable
    shared_b_gate: tf.Variable
    shared_w_out: tf.Variable
    shared_b_out: tf.Variable

    def __init__(
        self,
        num_experts: int,
        hidden_size: int,
        top_k: int = 2,
        activation: str = "gelu",
        gating: str = "softmax",
        normalize_gates: bool | None = None,
        capacity_factor: float | None = None,
        shared_expert: bool = False,
        shared_hidden_size: int | None = None,
        with_bias: bool = True,
        w_init: tensors.Initializer | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.num_experts = checks.size("num_experts", num_experts)
        self.hidden_size = checks.size("hidden_size", hidden_size)
        self.top_k = checks.size("top_k", top_k)
        if self.top_k > self.num_experts:
            raise errors.bad_value(
                "top_k",
                f"must be at most `num_experts` ({self.num_experts}): each token "
                "chooses `top_k` different experts",
                top_k,
            )
        self.activation = checks.choice(
            "activation", activation, mlp_activation.ACTIVATIONS
        )
        self.gating = checks.choice("gating", gating, _GATINGS)
        if normalize_gates is None:
            normalize_gates = self.top_k > 1
        self.normalize_gates = checks.flag("normalize_gates", normalize_gates)
        if capacity_factor is not None:
            capacity_factor = float(
                checks.real("capacity_factor", capacity_factor, allow_tensor=False)
            )
            if capacity_factor <= 0:
                raise errors.bad_value(
                    "capacity_factor",
                    "must be > 0 (or None: no token is dropped)",
                    capacity_factor,
                )
        self.capacity_factor = capacity_factor
        self.shared_expert = checks.flag("shared_expert", shared_expert)
        shared_size = checks.optional_size("shared_hidden_size", shared_hidden_size)
        if shared_size is not None and not self.shared_expert:
            raise errors.bad_value(
                "shared_hidden_size",
                "must be None when `shared_expert=False` (there is no shared expert)",
                shared_hidden_size,
            )
        self.shared_hidden_size = shared_size or self.hidden_size
        self.with_bias = checks.flag("with_bias", with_bias)
        checks.initializer("w_init", w_init)
        self.w_init = w_init
        self.router = linear.Linear(
            self.num_experts, with_bias=False, w_init=w_init, name="router"
        )

    # -- Building ----------------------------------------------------------

    def _kernel(self, name: str, shape: list[int], dtype: tf.DType) -> tf.Variable:
        """A kernel `[(experts,) fan_in, fan_out]`; each expert draws its own."""
        *experts, fan_in, fan_out = shape
        w_init = self.w_init or initializers.TruncatedNormal(
            stddev=1 / math.sqrt(max(fan_in, 1))
        )
        values = [
            tensors.initial_value("w_init", w_init, [fan_in, fan_out], dtype)
            for _ in range(experts[0] if experts else 1)
        ]
        return tf.Variable(tf.stack(values) if experts else values[0], name=name)

    def _bias(self, name: str, shape: list[int], dtype: tf.DType) -> tf.Variable:
        return tf.Variable(tf.zeros(shape, dtype), name=name)

    def _make_mlp(
        self, prefix: str, experts: list[int], model: int, hidden: int, dtype: Any
    ) -> None:
        """Creates one (stacked) MLP's variables, named `<prefix>w_in`, ..."""
        names = ["in", "gate"] if self.activation == "swiglu" else ["in"]
        for part in names:
            kernel = self._kernel(f"{prefix}w_{part}", [*experts, model, hidden], dtype)
            setattr(self, f"{prefix}w_{part}", kernel)
            if self.with_bias:
                bias = self._bias(f"{prefix}b_{part}", [*experts, hidden], dtype)
                setattr(self, f"{prefix}b_{part}", bias)
        kernel = self._kernel(f"{prefix}w_out", [*experts, hidden, model], dtype)
        setattr(self, f"{prefix}w_out", kernel)
        if self.with_bias:
            setattr(
                self,
                f"{prefix}b_out",
                self._bias(f"{prefix}b_out", [*experts, model], dtype),
            )

    @once.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        # The inputs were checked by `_check_inputs`: the last size is known.
        model_size: int = inputs.shape[-1]  # pyright: ignore[reportAssignmentType]
        dtype = precision.variable_dtype(self, inputs.dtype)
        self.router._initialize(np.zeros([0, model_size], dtype.as_numpy_dtype))
        self._make_mlp("", [self.num_experts], model_size, self.hidden_size, dtype)
        if self.shared_expert:
            self._make_mlp("shared_", [], model_size, self.shared_hidden_size, dtype)
        self.model_size = model_size
        self._dtype = dtype

    # -- Calling -----------------------------------------------------------

    def _check_inputs(self, inputs: Any) -> tf.Tensor:
        shape, dtype = tensors.shape_and_dtype(inputs)
        if shape.rank is not None and shape.rank < 2:
            raise errors.bad_value(
                "inputs", "must have rank >= 2: [..., model_size]", inputs
            )
        if not dtype.is_floating:
            raise errors.bad_type("inputs", "must have a floating point dtype", inputs)
        size = shape[-1] if shape.rank is not None else None
        if self._dtype is None:
            if size is None:
                raise errors.bad_value(
                    "inputs",
                    "must have a known last dimension (`model_size`) on the first "
                    "call, which creates the weights",
                    inputs,
                )
        else:
            if size is not None and size != self.model_size:
                raise errors.bad_value(
                    "inputs",
                    f"must have last dimension {self.model_size}, the model size "
                    "the weights were created for",
                    inputs,
                )
            if self._precision is None and dtype != self._dtype:
                raise errors.bad_type(
                    "inputs",
                    f"must have dtype {self._dtype.name}, the dtype of the first input",
                    inputs,
                )
        return utils.to_tensor("inputs", inputs)

    def _weights(self, prefix: str, dtype: tf.DType | None, experts: bool) -> _Weights:
        """One MLP's variables, cast to `dtype`, biases broadcastable over
        rows (`[E, 1, H]` for the stacked experts)."""

        def get(name: str) -> Any:
            value = getattr(self, prefix + name, None)
            if value is None:
                return None
            value = value if dtype is None else precision.cast(value, dtype)
            if experts and name.startswith("b_"):
                value = value[:, None, :]
            return value

        return _Weights(*(get(n) for n in _Weights._fields))

    def _capacity_experts(
        self, rows: tf.Tensor, routing: Routing, gates: tf.Tensor, dtype: Any
    ) -> tf.Tensor:
        """The routed part with a capacity: `[E, C, D]` dispatch (docstring)."""
        num_experts, top_k = self.num_experts, self.top_k
        tokens = rows.shape[0]
        if tokens is None:
            tokens = tf.shape(rows)[0]
        assert self.capacity_factor is not None
        slots = capacity(self.capacity_factor, tokens, top_k, num_experts)
        position = slot_positions(routing.experts, num_experts)
        kept = position < slots
        # A dropped assignment points at slot `E * C`: one past the last.
        slot = tf.where(kept, routing.experts * slots + position, num_experts * slots)
        token = tf.broadcast_to(tf.range(tf.shape(rows)[0])[:, None], tf.shape(slot))
        # Which token each slot holds, plus one (0: empty, reads a zero row).
        holder = tf.scatter_nd(
            tf.reshape(slot, [-1, 1]),
            tf.reshape(token + 1, [-1]),
            [num_experts * slots + 1],
        )[:-1]
        padded = tf.concat([tf.zeros_like(rows[:1]), rows], axis=0)
        dispatched = tf.reshape(
            tf.gather(padded, holder), [num_experts, slots, self.model_size]
        )
        results = _mlp(dispatched, self._weights("", dtype, True), self.activation)
        results = tf.concat(
            [
                tf.reshape(results, [num_experts * slots, self.model_size]),
                tf.zeros_like(rows[:1]),
            ],
            axis=0,
        )
        chosen = tf.gather(results, slot)  # [N, top_k, D]; dropped: zeros.
        return tf.reduce_sum(chosen * gates[:, :, None], axis=1)

    def _dropless_experts(
        self, rows: tf.Tensor, routing: Routing, gates: tf.Tensor, dtype: Any
    ) -> tf.Tensor:
        """The routed part without capacity: one group per expert (docstring)."""
        if tf_compat.in_xla_trace():
            raise errors.bad_value("capacity_factor", _NO_XLA, None)
        num_experts, top_k = self.num_experts, self.top_k
        assigned = tf.reshape(routing.experts, [-1])  # Token-major.
        order = tf.argsort(assigned, stable=True)
        token = order // top_k
        groups = tf.split(
            tf.gather(rows, token),
            tf.math.bincount(assigned, minlength=num_experts, maxlength=num_experts),
            num=num_experts,
        )
        w = self._weights("", dtype, False)
        per_expert = [
            tf.unstack(v, num_experts) if v is not None else [None] * num_experts
            for v in w
        ]
        results = tf.concat(
            [
                _mlp(group, _Weights(*(p[e] for p in per_expert)), self.activation)
                for e, group in enumerate(groups)
            ],
            axis=0,
        )
        weighted = results * tf.gather(tf.reshape(gates, [-1]), order)[:, None]
        return tf.math.unsorted_segment_sum(weighted, token, tf.shape(rows)[0])

    @overload
    def __call__(
        self, inputs: Any, *, return_aux_losses: Literal[False] = False
    ) -> tf.Tensor: ...

    @overload
    def __call__(
        self, inputs: Any, *, return_aux_losses: Literal[True]
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]: ...

    @overload
    def __call__(
        self, inputs: Any, *, return_aux_losses: bool
    ) -> tf.Tensor | tuple[tf.Tensor, dict[str, tf.Tensor]]: ...

    @utils.no_autograph
    def __call__(
        self, inputs: Any, *, return_aux_losses: bool = False
    ) -> tf.Tensor | tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """Applies the experts.

        Args:
          inputs: A float tensor `[..., model_size]` (rank >= 2).
          return_aux_losses: Whether to return the auxiliary losses too
            (default False): a Python bool.

        Returns:
          The outputs, of the shape and dtype of `inputs`; with
          `return_aux_losses=True`, `(outputs, losses)` with `losses` a dict
          of float32 scalars `{"load_balancing": ..., "router_z": ...}`.

        Raises:
          ValueError: if `inputs` has rank < 2 or a last dimension other than
            the first call's; if `capacity_factor` is None in a function
            compiled with XLA.
          TypeError: if `inputs` is not floating point or (without a
            `snt.precision` policy) has a dtype other than the first call's.
        """
        return_aux = checks.flag("return_aux_losses", return_aux_losses)
        x = self._check_inputs(inputs)
        policy = self._precision
        dtype = None if policy is None else policy.compute_dtype
        if dtype is not None:
            x = precision.cast(x, dtype)
        if self._dtype is None:
            self._initialize(x)
        shape = x.shape if x.shape.is_fully_defined() else tf.shape(x)
        rows = tf.reshape(x, [-1, self.model_size])
        # Routing in float32 (Switch Transformer's selective precision): a
        # bfloat16 softmax would reorder close experts.
        router_dtype = tf.float64 if rows.dtype == tf.float64 else tf.float32
        logits = linear.product(
            self.router, precision.cast(rows, router_dtype), router_dtype
        )
        routing = route(logits, self.top_k, self.gating, self.normalize_gates)
        gates = precision.cast(routing.gates, rows.dtype)
        if self.capacity_factor is None:
            y = self._dropless_experts(rows, routing, gates, dtype)
        else:
            y = self._capacity_experts(rows, routing, gates, dtype)
        if self.shared_expert:
            y += _mlp(rows, self._weights("shared_", dtype, False), self.activation)
        outputs = tf.reshape(y, shape)
        if policy is not None:
            outputs = precision.cast_outputs(policy, outputs)
        if not return_aux:
            return outputs
        return outputs, aux_losses(logits, routing)
