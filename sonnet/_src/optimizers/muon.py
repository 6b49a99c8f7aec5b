"""Muon: orthogonalised momentum for weight matrices (Jordan et al., 2024)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from sonnet._src import base, bias, checks, embed, errors, norm_params, once, utils
from sonnet._src.optimizers import optimizer_utils as opt_utils

# The quintic iteration's coefficients and the normalisation's epsilon, as
# published (Keller Jordan's `muon`, PyTorch's `torch.optim.Muon`).
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_EPSILON = 1e-7
_ADJUST_LR = ("original", "match_rms_adamw")

# Scopes of output layers, which Muon should not train (`muon_route`).
HEAD_PATTERN = r"head|lm_head|logits|classifier|unembed|readout"


def newton_schulz(matrix: tf.Tensor, steps: int = 5) -> tf.Tensor:
    """The orthogonalisation of Muon: `matrix` with singular values near 1.

    `steps` iterations of `X = a X + (b A + c A A) X` with `A = X X^T`,
    from `X = matrix / (||matrix||_F + 1e-7)` (transposed when it has more
    rows than columns, so that `A` is the smaller Gram matrix), with the
    published coefficients `(a, b, c) = (3.4445, -4.7750, 2.0315)`. In the
    dtype of `matrix`; shape `[rows, cols]` in and out. The singular values
    come out in about [0.7, 1.2], not exactly 1: the coefficients trade
    accuracy for speed of convergence from small singular values.
    """
    a, b, c = NS_COEFFICIENTS
    rows, cols = _dims(matrix)
    transposed = rows > cols
    x = tf.transpose(matrix) if transposed else matrix
    x = x / (tf.norm(x) + NS_EPSILON)
    for _ in range(steps):
        gram = tf.matmul(x, x, transpose_b=True)
        x = a * x + tf.matmul(b * gram + c * tf.matmul(gram, gram), x)
    return tf.transpose(x) if transposed else x


def _dims(matrix: Any) -> tuple[int, int]:
    """The static `[rows, cols]` of a 2-D tensor or variable."""
    rows, cols = matrix.shape
    return int(rows or 0), int(cols or 0)


class MuonRoute:
    """Which variables Muon trains: `route(variable)` is True for Muon.

    Made by `snt.optimizers.muon_route`; compares variable names (Sonnet
    variable names are stable), so it pickles and copies without the
    variables.
    """

    def __init__(self, fallback_names: frozenset[str]):
        self.fallback_names = fallback_names

    def __call__(self, variable: tf.Variable) -> bool:
        return variable.shape.rank == 2 and variable.name not in self.fallback_names

    def __repr__(self) -> str:
        return f"MuonRoute(fallback_names={sorted(self.fallback_names)})"


def is_matrix(variable: tf.Variable) -> bool:
    """The default route: True (Muon) for 2-D variables."""
    return variable.shape.rank == 2


def muon_route(module: tf.Module, head_pattern: str | None = HEAD_PATTERN) -> MuonRoute:
    """The routing rule for `snt.optimizers.Muon(route=...)` over `module`.

    Muon trains a trainable variable of `module` unless it is

    * not 2-D (biases, norm scales and offsets, convolution kernels,
      `snt.LayerStack`'s stacked `[num_layers, ...]` matrices);
    * held by an `snt.Embed` (an embedding is a lookup table, not a linear
      map of its inputs), a norm (`snt.LayerNorm`, `snt.BatchNorm`,
      `snt.GroupNorm`, `snt.RMSNorm`, ...) or an `snt.Bias`;
    * in a module whose name matches `head_pattern` (a component of the
      variable's name, e.g. `head` in `lm/head/w:0`): output layers are
      trained by the fallback, as the Muon authors advise.

    Those go to the `fallback` optimizer.

    Args:
      module: The model (built: its variables must exist).
      head_pattern: Regular expression matched against each name-scope
        component of a variable's name (full match); default
        `head|lm_head|logits|classifier|unembed|readout`. Name your output
        layer accordingly (`snt.Linear(vocab_size, name="head")`). None:
        no name rule.

    >>> head = snt.Linear(3, name="head")
    >>> model = snt.Sequential([snt.Linear(4), head])
    >>> _ = model(tf.ones([1, 2]))
    >>> route = snt.optimizers.muon_route(model)
    >>> [v.name for v in model.trainable_variables if route(v)]
    ['linear/w:0']
    """
    if not isinstance(module, tf.Module):
        raise errors.bad_type("module", "must be an `snt.Module`", module)
    pattern = None
    if head_pattern is not None:
        if not isinstance(head_pattern, str):
            raise errors.bad_type("head_pattern", "must be a str or None", head_pattern)
        try:
            pattern = re.compile(head_pattern)
        except re.error as e:
            raise errors.bad_value(
                "head_pattern", "must be a regular expression", head_pattern
            ) from e
    fallback: set[str] = set()
    kinds = (embed.Embed, norm_params.NormParams, bias.Bias)
    for sub in (module, *module.submodules):
        if isinstance(sub, kinds):
            fallback.update(v.name for v in sub.trainable_variables)
    for v in module.trainable_variables:
        scopes = v.name.split(":")[0].split("/")[:-1]
        if pattern is not None and any(pattern.fullmatch(s) for s in scopes):
            fallback.add(v.name)
    return MuonRoute(frozenset(fallback))


class Muon(base.Optimizer):
    """Muon: momentum orthogonalised by Newton-Schulz, for weight matrices.

    For each 2-D parameter, with a momentum buffer `buf` (starts at zero)
    (arXiv:2502.16982; the formulation of PyTorch's `torch.optim.Muon`)::

      buf = momentum * buf + (1 - momentum) * update
      direction = (1 - momentum) * update + momentum * buf  # Nesterov
      direction = buf                                       # otherwise
      parameter -= learning_rate * weight_decay * parameter
      parameter -= learning_rate * scale * newton_schulz(direction)

    `snt.optimizers.newton_schulz` runs 5 iterations (`ns_steps`) with the
    published coefficients on the normalised matrix. `scale` is chosen by
    `adjust_lr`. The update is computed in float32 for float32, bfloat16
    and float16 variables (float64 in float64) and rounded once when stored.

    Muon is for the hidden weight matrices. Everything else (embeddings,
    output heads, biases, norms, any variable that is not 2-D) trains with
    `fallback`, e.g. an `snt.optimizers.AdamW`: `route(variable)` says which
    (True: Muon); `snt.optimizers.muon_route(model)` is the documented rule,
    by module type and name. Without `fallback` every parameter must be 2-D.
    `route` is asked once per parameter, on the first `apply`; pass the same
    parameters in the same order every time.

    Variables: `accumulated_momentum` (one per Muon parameter, made on the
    first `apply`), `step` with a schedule, and the `fallback`'s own.

    Args:
      learning_rate: As for `snt.optimizers.Momentum`; default 0.02 (the
        Muon authors', for `adjust_lr="original"`).
      momentum: Decay of `buf`; default 0.95 (published).
      use_nesterov: Python bool; default True (published).
      weight_decay: Decoupled weight decay per unit of learning rate, as in
        `snt.optimizers.AdamW`; default 0 (the original Muon). The
        "match_rms_adamw" recipe uses 0.1.
      ns_steps: Newton-Schulz iterations, a positive int; default 5.
      adjust_lr: How the step is scaled by the matrix shape. `"original"`
        (default, Keller Jordan's Muon): `sqrt(max(1, fan_out / fan_in))`,
        with the matrix read as `[fan_in, fan_out]`, the layout of
        `snt.Linear.w` (PyTorch's `sqrt(max(1, rows / cols))` for its
        `[out, in]` weights). `"match_rms_adamw"` (Moonshot,
        arXiv:2502.16982): `0.2 * sqrt(max(fan_in, fan_out))`, which gives
        the update AdamW's RMS, so AdamW's learning rate and weight decay
        carry over.
      fallback: None (default) or the optimizer (anything with
        `apply(updates, parameters)`) for the parameters `route` sends
        away; it sees only those, in order (so its errors count positions
        in that sub-list).
      route: Callable `route(variable) -> bool`; default `is_matrix`
        (2-D variables to Muon). Use `snt.optimizers.muon_route(model)`.
      name: Module name; default `"muon"`.

    >>> w = tf.Variable([[1.0, 0.0], [0.0, 1.0]])
    >>> opt = snt.optimizers.Muon(learning_rate=0.1, use_nesterov=False)
    >>> opt.apply([tf.constant([[2.0, 0.0], [0.0, 2.0]])], [w])
    >>> w.numpy().round(2)
    array([[0.89, 0.  ],
           [0.  , 0.89]], dtype=float32)
    """

    def __init__(
        self,
        learning_rate: Any = 0.02,
        momentum: Any = 0.95,
        use_nesterov: bool = True,
        weight_decay: Any = 0.0,
        ns_steps: int = 5,
        adjust_lr: str = "original",
        fallback: Any = None,
        route: Callable[[tf.Variable], bool] | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.learning_rate, self._scheduled = opt_utils.learning_rate(learning_rate)
        if self._scheduled:
            self.step = opt_utils.step_counter()
        self.momentum = opt_utils.hyper_parameter("momentum", momentum)
        self.use_nesterov = checks.flag("use_nesterov", use_nesterov)
        self.weight_decay = opt_utils.hyper_parameter("weight_decay", weight_decay)
        self.ns_steps = checks.size("ns_steps", ns_steps)
        if adjust_lr not in _ADJUST_LR:
            raise errors.bad_value(
                "adjust_lr", f"must be one of {list(_ADJUST_LR)}", adjust_lr
            )
        self.adjust_lr = adjust_lr
        if fallback is not None and not callable(getattr(fallback, "apply", None)):
            raise errors.bad_type(
                "fallback",
                "must be None or have an `apply(updates, parameters)` method",
                fallback,
            )
        self.fallback = fallback
        if route is not None:
            checks.function("route", route)
        self.route = is_matrix if route is None else route
        self.accumulated_momentum: list[tf.Variable] = []
        # Per parameter of the first `apply`: True for Muon.
        self._routes: tuple[bool, ...] | None = None

    @once.once
    def _initialize(self, parameters: Sequence[tf.Variable]) -> None:
        opt_utils.create_slots(
            parameters, accumulated_momentum=self.accumulated_momentum
        )

    @utils.no_autograph
    def apply(self, updates: Sequence[Any], parameters: Sequence[tf.Variable]) -> None:
        """Applies `updates` to `parameters` (see `snt.Optimizer.apply`).

        Raises:
          ValueError: If a parameter routed to Muon is not 2-D (with no
            `fallback`, any parameter that is not), or as
            `snt.Optimizer.apply`; nothing changes then.
        """
        checked = opt_utils.check_updates_parameters(updates, parameters)
        routes = self._route(parameters)
        muon = [i for i, r in enumerate(routes) if r]
        other = [i for i, r in enumerate(routes) if not r]
        muon_parameters = [parameters[i] for i in muon]
        if muon:
            self._initialize(muon_parameters)
        opt_utils.check_same_parameters(muon_parameters, self.accumulated_momentum)
        if other and any(checked[i] is not None for i in other):
            assert self.fallback is not None  # `_route` checked.
            self.fallback.apply(
                [checked[i] for i in other], [parameters[i] for i in other]
            )
        muon_updates = [checked[i] for i in muon]
        if not any(u is not None for u in muon_updates):
            return
        checked_muon, learning_rate = opt_utils.begin_apply(
            self, muon_updates, muon_parameters, self.accumulated_momentum
        )
        hyper = opt_utils.CastCache(
            opt_utils.casts(learning_rate, self.momentum, self.weight_decay)
        )
        opt_utils.for_each_update(
            lambda p, g, buf: self._rule(p, g, buf, hyper),
            checked_muon,
            muon_parameters,
            self.accumulated_momentum,
        )

    @base.no_name_scope
    def _route(self, parameters: Sequence[tf.Variable]) -> tuple[bool, ...]:
        """The route of each parameter (decided on the first call), checked."""
        routes = self._routes
        if routes is None or len(routes) != len(parameters):
            routes = tuple(bool(self.route(p)) for p in parameters)
        for i, (p, r) in enumerate(zip(parameters, routes, strict=True)):
            if r and p.shape.rank != 2:
                raise errors.bad_value(
                    f"parameters[{i}]",
                    "must be 2-D for Muon; route it to the fallback (`route`)",
                    p,
                )
            if not r and self.fallback is None:
                raise errors.bad_value(
                    f"parameters[{i}]",
                    "must be 2-D for Muon; train other variables with a "
                    "`fallback` optimizer (and `route`, e.g. "
                    "`snt.optimizers.muon_route(model)`)"
                    if p.shape.rank != 2
                    else "is routed away from Muon by `route` but there is no "
                    "`fallback` optimizer",
                    p,
                )
        self._routes = routes
        return routes

    @base.no_name_scope
    def _rule(
        self,
        parameter: tf.Variable,
        update: Any,
        buffer: tf.Variable,
        hyper: opt_utils.CastCache,
    ) -> None:
        param, buf = opt_utils.Ref(parameter), opt_utils.Ref(buffer)
        dtype = param.compute_dtype
        lr, mu, decay = hyper(dtype)
        update = tf.cast(tf.convert_to_tensor(update), dtype)
        new_buf = mu * buf.read() + (1 - mu) * update
        buf.assign(new_buf)
        direction = (1 - mu) * update + mu * new_buf if self.use_nesterov else new_buf
        fan_in, fan_out = _dims(parameter)
        if self.adjust_lr == "original":
            scale = max(1.0, fan_out / fan_in) ** 0.5
        else:
            scale = 0.2 * max(fan_in, fan_out) ** 0.5
        step = (lr * scale) * newton_schulz(direction, self.ns_steps)
        decays = not (
            isinstance(self.weight_decay, (int, float)) and self.weight_decay == 0
        )
        if param.dtype == dtype and not decays:
            param.assign_sub(step)
            return
        # Half precision: subtract in float32, round once.
        value = param.read()
        if decays:
            step += (lr * decay) * value
        param.assign(value - step)
