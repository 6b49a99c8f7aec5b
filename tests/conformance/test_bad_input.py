"""Bad input for every registered module and every public function.

The contract (see `bad_input.py`): given invalid constructor arguments or
invalid inputs, a module or function either works or raises a `ValueError` /
`TypeError` whose message names an argument and shows the received value.
A failed call leaves the module's variables unchanged and the module usable.

Suites, each run over every registered case (`registry.py`):

* `test_bad_inputs_after_build`: the module is built once with its example
  inputs; hypothesis then feeds it variants of those inputs: one tensor with
  the wrong rank, the wrong dtype, a changed size, a zero-size dimension, NaN
  or Inf values, a NumPy array instead of a tensor; a whole batch of zero
  examples; two of these in a row; and, for RNN cores, mismatched
  `prev_state` / `initial_state` structures (wrong nesting, wrong batch,
  wrong sizes). On success: an empty batch gives an empty result of the right
  shape and never poisons variables with NaN; all-NaN inputs propagate to the
  outputs. On failure: variables are unchanged and a valid call still gives
  the reference result.
* `test_bad_inputs_on_first_call`: the same variants on fresh modules (so
  build-time checks run); a failed first call must not leave a half-built
  module behind.
* `test_constructor_junk`: one constructor argument at a time replaced by
  junk (`bad_input.ctor_junk()`); a module the constructor accepts must then
  build cleanly or fail cleanly.
* `test_function_bad_arguments`: the same for the plain functions (reshape,
  unrolls, padding, initializers, regularizers, ...) from `FUNCTIONS`.

The number of examples per case is `SNT_FUZZ_EXAMPLES` (default 200; set it
higher locally to search further). Examples are cheap: each test builds its
module once, attacks are drawn by index from flat lists, each distinct bad
input is called once, and variables are read with one `tf.function` call.
Documented exceptions to the contract: `_NAN_MAY_VANISH` and `_PARTIAL_BUILD`.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sonnet as snt
from tests.conformance import bad_input
from tests.conformance.registry import CASES, Case

EXAMPLES = int(os.environ.get("SNT_FUZZ_EXAMPLES", "200"))
# Each first-call example builds a fresh module: fewer of them.
FIRST_CALL_EXAMPLES = max(EXAMPLES // 10, 5)

pytestmark = pytest.mark.filterwarnings("ignore")


def _settings(examples: int) -> Any:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )


# ---------------------------------------------------------------------------
# Helpers.


def _argument_names(module_or_cls: Any) -> list[str]:
    cls = module_or_cls if inspect.isclass(module_or_cls) else type(module_or_cls)
    names = set(bad_input.parameter_names(cls))
    # The entry points: calls, `apply` for optimizers, `scale` for
    # `snt.precision.DynamicLossScale`.
    for method in ("__call__", "apply", "scale"):
        fn = getattr(cls, method, None)
        if fn is not None:
            try:
                names.update(inspect.signature(inspect.unwrap(fn)).parameters)
            except (TypeError, ValueError):
                pass
    names.discard("self")
    names.discard("args")
    names.discard("kwargs")
    names.update({"inputs", "input_sequence", "prev_state", "initial_state"})
    return sorted(names)


def _variables(module: Any) -> tuple[tf.Variable, ...]:
    return tuple(tf.Module.variables.fget(module))  # type: ignore[attr-defined]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(
        np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    )


class _State:
    """The variables of a built module, read and reset cheaply.

    Walking a module for its variables and reading them one by one costs
    tens of milliseconds for a ResNet; the variables are found once and read
    with one `tf.function` call, and a reset assigns only what changed.
    """

    def __init__(self, module: Any):
        self.module = module
        self.variables = _variables(module)
        variables = self.variables
        self._read = tf.function(
            lambda: [v.read_value() for v in variables], autograph=False
        )
        self.baseline = self.read()

    def read(self) -> list[np.ndarray]:
        return [np.asarray(t) for t in self._read()] if self.variables else []

    def changed(self) -> list[int]:
        return [
            i
            for i, (a, b) in enumerate(zip(self.read(), self.baseline))
            if not _same(a, b)
        ]

    def reset(self) -> None:
        for i in self.changed():
            self.variables[i].assign(self.baseline[i])

    def assert_unchanged(self) -> None:
        changed = [self.variables[i].name for i in self.changed()]
        assert not changed, f"a failed call changed {changed}"

    def assert_same_variables(self) -> None:
        now = _variables(self.module)
        assert len(now) == len(self.variables) and all(
            a is b for a, b in zip(now, self.variables)
        ), "a call created, dropped or replaced variables"


def _finite_mask(values: list[np.ndarray]) -> list[bool]:
    return [
        bool(np.all(np.isfinite(v))) if np.issubdtype(v.dtype, np.inexact) else True
        for v in values
    ]


def _assert_no_new_non_finite(
    values: list[np.ndarray], before: list[bool] | None, what: str
) -> None:
    """NaN/Inf only where there was some `before` (None: nowhere)."""
    after = _finite_mask(values)
    before = [True] * len(after) if before is None else before
    for i, (b, a) in enumerate(zip(before, after)):
        assert a or not b, f"{what} wrote NaN/Inf into variable {i}"


def _assert_propagates(result: Any, what: str) -> None:
    leaves = [
        np.asarray(x)
        for x in tf.nest.flatten(result, expand_composites=True)
        if isinstance(x, (tf.Tensor, tf.Variable, np.ndarray))
    ]
    floating = [x for x in leaves if np.issubdtype(x.dtype, np.inexact) and x.size]
    if floating:
        assert any(not np.all(np.isfinite(x)) for x in floating), (
            f"{what}: all-non-finite inputs gave all-finite outputs"
        )


def _assert_close(case: Case, expected: Any, actual: Any) -> None:
    e_leaves = tf.nest.flatten(expected, expand_composites=True)
    a_leaves = tf.nest.flatten(actual, expand_composites=True)
    assert len(e_leaves) == len(a_leaves), "output structure changed"
    for e, a in zip(e_leaves, a_leaves):
        e, a = np.asarray(e), np.asarray(a)
        assert e.shape == a.shape and e.dtype == a.dtype
        if case.deterministic:
            np.testing.assert_allclose(
                a, e, rtol=case.tolerance, atol=case.tolerance, equal_nan=True
            )


def _tensor_indices(inputs: Any) -> list[int]:
    return [
        i for i, x in enumerate(tf.nest.flatten(inputs)) if isinstance(x, tf.Tensor)
    ]


def _replace_leaf(inputs: Any, index: int, value: Any) -> Any:
    leaves = tf.nest.flatten(inputs)
    leaves[index] = value
    return tf.nest.pack_sequence_as(inputs, leaves)


# ---------------------------------------------------------------------------
# Input variants ("attacks"). An attack is a tuple whose first element names
# its kind; `_apply` turns it into bad inputs.

_SIZES = ("one", "minus_one", "plus_one", "plus_two")
_NON_FINITE = (math.nan, math.inf, -math.inf)


def _single_attacks(
    leaves: list[tuple[int, int]], float_leaves: list[int]
) -> list[tuple[Any, ...]]:
    """Every single attack on tensor leaves given as `(index, rank)`."""
    attacks: list[tuple[Any, ...]] = [("empty_batch",)]
    for i, rank in leaves:
        axes = range(max(rank, 1))
        attacks += [("rank", i, d, t) for d in (-2, -1, 1, 2) for t in (False, True)]
        attacks += [("dtype", i, dtype) for dtype in bad_input.BAD_DTYPES]
        attacks += [("resize", i, axis, size) for axis in axes for size in _SIZES]
        attacks += [("zero_size", i, axis) for axis in axes]
        attacks.append(("numpy", i))
    for i in float_leaves:
        attacks += [("non_finite", i, v, e) for v in _NON_FINITE for e in (False, True)]
    return attacks


def _attack_strategy(
    singles: list[tuple[Any, ...]], states: int
) -> st.SearchStrategy[tuple[Any, ...]]:
    """One attack, two in a row, or (for RNN cores) a mismatched state.

    Attacks are drawn by index from flat lists: per example, that costs
    hypothesis a fraction of what nested strategies do.
    """
    one = st.sampled_from(singles)
    options = [
        one.map(lambda a: ("leaves", (a,))),
        st.tuples(one, one).map(lambda pair: ("leaves", pair)),
    ]
    if states:
        options.append(st.sampled_from([("state", i) for i in range(states)]))
    return st.one_of(*options)


def _new_size(size: int, choice: str) -> int:
    return {
        "one": 1,
        "minus_one": max(size - 1, 1),
        "plus_one": size + 1,
        "plus_two": size + 2,
    }[choice]


def _apply_leaf_attack(
    attack: tuple[Any, ...], inputs: Any, time_major: bool = False
) -> Any:
    kind = attack[0]
    if kind == "empty_batch":
        return bad_input.empty_batch(tuple(inputs), time_major_first=time_major)
    index = attack[1]
    # A previous attack may have made it a NumPy array.
    x = tf.convert_to_tensor(tf.nest.flatten(inputs)[index])
    rank = x.shape.rank or 0
    if kind == "rank":
        bad = bad_input.with_rank_change(x, attack[2], attack[3])
    elif kind == "dtype":
        bad = bad_input.with_dtype(x, attack[2])
    elif kind == "resize":
        axis = attack[2] % rank if rank else 0
        size = int(x.shape[axis]) if rank else 1
        bad = bad_input.with_size(x, axis, _new_size(size, attack[3]))
    elif kind == "zero_size":
        bad = bad_input.with_size(x, attack[2] % rank if rank else 0, 0)
    elif kind == "numpy":
        bad = x.numpy()
    elif kind == "non_finite":
        bad = bad_input.with_non_finite(x, attack[2], attack[3])
    else:
        raise AssertionError(f"unknown attack {attack}")
    return _replace_leaf(inputs, index, bad)


def _state_index(case: Case, inputs: tuple[Any, ...]) -> int | None:
    """Position of the RNN state among the inputs, if the case has one."""
    if len(inputs) >= 2 and issubclass(case.cls, (snt.RNNCore, snt.UnrolledRNN)):
        return 1
    return None


def _time_major(case: Case, inputs: tuple[Any, ...]) -> bool:
    """Whether the first input is a time-major sequence `[T, B, ...]`."""
    if issubclass(case.cls, snt.UnrolledRNN):
        return True
    # Cores registered with a single input are unrolled over a sequence.
    return issubclass(case.cls, snt.RNNCore) and len(inputs) == 1


class _Attacks:
    """The attacks for one case's inputs, with the state variants precomputed."""

    def __init__(self, case: Case, inputs: tuple[Any, ...]):
        self.inputs = inputs
        self.time_major = _time_major(case, inputs)
        self._single: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        flat = tf.nest.flatten(inputs)
        leaves = [(i, flat[i].shape.rank or 0) for i in _tensor_indices(inputs)]
        float_leaves = [i for i, _ in leaves if bad_input.is_float_tensor(flat[i])]
        self.state_index = _state_index(case, inputs)
        self.state_variants: list[tuple[str, Any]] = []
        if self.state_index is not None:
            self.state_variants = bad_input.state_variants(inputs[self.state_index])
        self.strategy = (
            _attack_strategy(
                _single_attacks(leaves, float_leaves), len(self.state_variants)
            )
            if leaves
            else None
        )

    def apply(self, attack: tuple[Any, ...]) -> tuple[Any, ...]:
        if attack[0] == "state":
            assert self.state_index is not None
            bad = list(self.inputs)
            bad[self.state_index] = self.state_variants[attack[1]][1]
            return tuple(bad)
        first, *rest = attack[1]
        inputs = self._single.get(first)
        if inputs is None:
            # Singles recur (alone and as first steps): computed once.
            inputs = tuple(_apply_leaf_attack(first, self.inputs, self.time_major))
            self._single[first] = inputs
        for leaf_attack in rest:
            inputs = tuple(_apply_leaf_attack(leaf_attack, inputs, self.time_major))
        return inputs


def _leaf_key(x: Any) -> Any:
    if isinstance(x, tf.Tensor):
        return ("tensor", tf.io.serialize_tensor(x).numpy())
    if isinstance(x, np.ndarray):
        return ("ndarray", tf.io.serialize_tensor(tf.constant(x)).numpy())
    return repr(x)


def _memo_key(attack: tuple[Any, ...], bad: tuple[Any, ...]) -> Any:
    """Identifies the bad inputs and the checks their success needs, or None.

    Different attack sequences often give the same inputs (e.g. adding a
    dimension, then dropping it); each distinct input is called only once.
    """
    if attack[0] != "leaves":
        return None
    checked = attack[1][0][0] if len(attack[1]) == 1 else None
    return checked, tuple(_leaf_key(x) for x in tf.nest.flatten(bad))


def _kind(attack: tuple[Any, ...]) -> str:
    if attack[0] == "state":
        return "state"
    return "+".join(leaf_attack[0] for leaf_attack in attack[1])


# Classes whose outputs may legitimately stay finite for all-NaN inputs.
_NAN_MAY_VANISH: dict[type, str] = {
    snt.nets.ResNet: (
        "TensorFlow's CPU max-pool kernel maps an all-NaN window to the lowest "
        "float, and the logits layer is zero-initialized"
    ),
}


def _check_success(
    case: Case,
    attack: tuple[Any, ...],
    result: Any,
    reference: Any,
    read_values: Callable[[], list[np.ndarray]],
    finite_before: list[bool] | None,
) -> None:
    if attack[0] != "leaves" or len(attack[1]) != 1:
        return  # Combined attacks: only "no crash" is required.
    leaf_attack = attack[1][0]
    kind = leaf_attack[0]
    if kind == "empty_batch":
        bad_input.compatible_empty_result(reference, result)
        _assert_no_new_non_finite(read_values(), finite_before, "an empty batch")
    elif (
        kind == "non_finite"
        and leaf_attack[3]
        and math.isnan(leaf_attack[2])
        and not issubclass(case.cls, tuple(_NAN_MAY_VANISH))
    ):
        _assert_propagates(result, "inputs filled with NaN")


# ---------------------------------------------------------------------------
# Modules: bad inputs.

_IDS = [c.id for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_bad_inputs_after_build(case: Case):
    module = case.factory()
    inputs = case.inputs()
    attacks = _Attacks(case, inputs)
    if attacks.strategy is None:
        pytest.skip("case has no tensor inputs")
    case.run(module, *inputs)
    state = _State(module)
    reference = case.run(module, *inputs)
    state.reset()
    finite = _finite_mask(state.baseline)
    names = _argument_names(module)
    usability_checked: set[str] = set()

    def valid_call_still_works() -> None:
        _assert_close(case, reference, case.run(module, *inputs))
        state.reset()
        state.assert_same_variables()

    seen: set[Any] = set()

    @_settings(EXAMPLES)
    @given(attacks.strategy)
    def check(attack):
        bad = attacks.apply(attack)
        key = _memo_key(attack, bad)
        if key is not None and key in seen:
            return
        ok, result = bad_input.outcome(lambda: case.run(module, *bad), names)
        if ok:
            try:
                _check_success(case, attack, result, reference, state.read, finite)
            finally:
                # The next example starts from the same state.
                state.reset()
        else:
            try:
                state.assert_unchanged()
            finally:
                # Leaves no trace for later examples, so failures reproduce.
                state.reset()
            if _kind(attack) not in usability_checked:
                usability_checked.add(_kind(attack))
                valid_call_still_works()
        # Only passing inputs are remembered: hypothesis replays failures.
        if key is not None:
            seen.add(key)

    check()
    valid_call_still_works()


# Classes whose failed first call may keep what it built before failing, so a
# later call may fail (cleanly) on an input size fixed by the failed call.
_PARTIAL_BUILD: dict[type, str] = {
    snt.DeepRNN: (
        "runs its layers one after the other: a bad state for a later layer "
        "is found after earlier layers were built for the (bad) inputs"
    ),
}


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_bad_inputs_on_first_call(case: Case):
    inputs = case.inputs()
    attacks = _Attacks(case, inputs)
    if attacks.strategy is None:
        pytest.skip("case has no tensor inputs")
    built = case.factory()
    reference = case.run(built, *inputs)
    shapes = [(v.shape, v.dtype) for v in _variables(built)]
    names = _argument_names(built)

    @_settings(FIRST_CALL_EXAMPLES)
    @given(attacks.strategy)
    def check(attack):
        module = case.factory()
        bad = attacks.apply(attack)
        ok, result = bad_input.outcome(lambda: case.run(module, *bad), names)
        if ok:
            _check_success(
                case,
                attack,
                result,
                reference,
                lambda: bad_input.snapshot(module),
                None,
            )
            return
        # A failed first call must not leave a half-built module behind.
        if issubclass(case.cls, tuple(_PARTIAL_BUILD)):
            ok, _ = bad_input.outcome(lambda: case.run(module, *inputs), names)
            if not ok:
                return
        else:
            case.run(module, *inputs)
        assert [(v.shape, v.dtype) for v in _variables(module)] == shapes

    check()


# ---------------------------------------------------------------------------
# Modules: junk constructor arguments.

_CTOR_CASES = [c for c in CASES if c.ctor_kwargs is not None]
_CTOR_IDS = [c.id for c in _CTOR_CASES]


def _constructor_parameters(cls: type) -> list[str]:
    target = inspect.unwrap(cls.__init__)  # type: ignore[misc]
    return [
        name
        for name, p in inspect.signature(target).parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


@pytest.mark.parametrize("case", _CTOR_CASES, ids=_CTOR_IDS)
def test_ctor_kwargs_build_the_factory_module(case: Case):
    assert case.ctor_kwargs is not None
    module = case.cls(**copy.deepcopy(case.ctor_kwargs))
    assert repr(module) == repr(case.factory())


@pytest.mark.parametrize("case", _CTOR_CASES, ids=_CTOR_IDS)
def test_constructor_junk(case: Case):
    assert case.ctor_kwargs is not None
    inputs = case.inputs()
    parameters = _constructor_parameters(case.cls)
    junk = bad_input.ctor_junk()
    names = _argument_names(case.cls)

    @_settings(EXAMPLES)
    @given(st.sampled_from([(p, k) for p in parameters for k in range(len(junk))]))
    def check(choice):
        parameter, junk_index = choice
        kwargs = copy.deepcopy(case.ctor_kwargs)
        kwargs[parameter] = junk[junk_index]
        ok, module = bad_input.outcome(lambda: case.cls(**kwargs), names)
        if ok:
            bad_input.outcome(lambda: case.run(module, *inputs), names)

    check()


# ---------------------------------------------------------------------------
# Plain functions.


def _x(*shape: int, dtype: tf.DType = tf.float32) -> tf.Tensor:
    size = int(np.prod(shape))
    return tf.cast(tf.reshape(tf.range(size) % 7, shape), dtype) / 7.0 - 0.3


def _lstm_state(batch: int, hidden: int) -> snt.LSTMState:
    return snt.LSTMState(hidden=_x(batch, hidden), cell=_x(batch, hidden) * 0.5)


@dataclasses.dataclass(frozen=True)
class FunctionCase:
    """A public function with valid keyword arguments.

    Attributes:
      id: Test id.
      fn: Called as `fn(**kwargs)`; wrappers may construct and then call
        (e.g. an initializer built from some kwargs, called with the others).
      kwargs: Returns valid keyword arguments (tensors, cores, ...).
      propagates: Keyword arguments whose NaN values must reach the outputs
        (Inf need not: clipping or a saturating activation may map it to a
        finite value).
      state: The keyword argument holding an RNN state, if any.
      names: More argument names errors may name (e.g. those of a core the
        function calls).
    """

    id: str
    fn: Callable[..., Any]
    kwargs: Callable[[], dict[str, Any]]
    propagates: tuple[str, ...] = ()
    state: str | None = None
    names: tuple[str, ...] = ()


def _initializer(cls: type) -> Callable[..., Any]:
    def fn(shape: Any, dtype: Any, **ctor: Any) -> Any:
        return cls(**ctor)(shape, dtype)

    return fn


def _regularizer(cls: type) -> Callable[..., Any]:
    def fn(tensors: Any, **ctor: Any) -> Any:
        return cls(**ctor)(tensors)

    return fn


def _step_of_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """Builds cores with `factory(**kwargs)` and runs each one step."""

    def fn(**kwargs: Any) -> Any:
        made = factory(**kwargs)
        cores = made if isinstance(made, tuple) else (made,)
        outputs = []
        for core in cores:
            outputs.append(core(_x(2, 3), core.initial_state(2)))
        return outputs

    return fn


def _trainable_state_for_core(**kwargs: Any) -> Any:
    return snt.TrainableState.for_core(**kwargs)(2)


def _format_variables(**kwargs: Any) -> str:
    return snt.format_variables(**kwargs)


# The unrolls call `core(inputs, prev_state)`, whose errors name these.
_CORE_NAMES = ("inputs", "prev_state")
_INIT_SHAPE = {"shape": [3, 4], "dtype": tf.float32}

FUNCTIONS = [
    FunctionCase(
        "reshape",
        snt.reshape,
        lambda: {"inputs": _x(2, 3, 4), "output_shape": [-1, 2], "preserve_dims": 1},
        propagates=("inputs",),
    ),
    FunctionCase(
        "flatten",
        snt.flatten,
        lambda: {"inputs": _x(2, 3, 4)},
        propagates=("inputs",),
    ),
    FunctionCase(
        "apply_rotary_embedding",
        snt.apply_rotary_embedding,
        lambda: {"x": _x(2, 3, 2, 4), "positions": tf.range(3), "base": 100.0},
        propagates=("x",),
    ),
    FunctionCase(
        "merge_leading_dims",
        snt.merge_leading_dims,
        lambda: {"x": _x(2, 3, 4), "num_dims": 2},
        propagates=("x",),
    ),
    FunctionCase(
        "split_leading_dim",
        snt.split_leading_dim,
        lambda: {"x": _x(6, 4), "example": _x(2, 3, 5), "num_dims": 2},
        propagates=("x",),
    ),
    FunctionCase(
        "scale_gradient",
        snt.scale_gradient,
        lambda: {"t": _x(2, 3), "scale": 0.5},
        propagates=("t",),
    ),
    FunctionCase(
        "leaky_clip_by_value",
        snt.leaky_clip_by_value,
        lambda: {"t": _x(2, 3), "clip_value_min": -0.2, "clip_value_max": 0.2},
        propagates=("t",),
    ),
    FunctionCase(
        "static_unroll",
        snt.static_unroll,
        lambda: {
            "core": snt.LSTM(3),
            "input_sequence": _x(3, 2, 4),
            "initial_state": _lstm_state(2, 3),
            "sequence_length": tf.constant([1, 3]),
        },
        propagates=("input_sequence", "initial_state"),
        state="initial_state",
        names=_CORE_NAMES,
    ),
    FunctionCase(
        "dynamic_unroll",
        snt.dynamic_unroll,
        lambda: {
            "core": snt.GRU(3),
            "input_sequence": _x(3, 2, 4),
            "initial_state": _x(2, 3),
            "sequence_length": tf.constant([3, 2]),
            "parallel_iterations": 1,
            "swap_memory": False,
        },
        propagates=("input_sequence", "initial_state"),
        state="initial_state",
        names=_CORE_NAMES,
    ),
    FunctionCase(
        "dynamic_unroll-lstm",
        snt.dynamic_unroll,
        lambda: {
            "core": snt.LSTM(3),
            "input_sequence": _x(2, 2, 4),
            "initial_state": _lstm_state(2, 3),
        },
        propagates=("input_sequence", "initial_state"),
        state="initial_state",
        names=_CORE_NAMES,
    ),
    FunctionCase(
        "pad.create",
        snt.pad.create,
        lambda: {
            "padding": snt.pad.same,
            "kernel": [3, 2],
            "rate": 1,
            "n": 2,
            "channel_index": -1,
        },
    ),
    *[
        FunctionCase(f"pad.{fn.__name__}", fn, lambda: {"effective_kernel_size": 3})
        for fn in (
            snt.pad.valid,
            snt.pad.same,
            snt.pad.full,
            snt.pad.causal,
            snt.pad.reverse_causal,
        )
    ],
    FunctionCase(
        "lstm_with_recurrent_dropout",
        _step_of_factory(snt.lstm_with_recurrent_dropout),
        lambda: {"hidden_size": 3, "dropout": 0.5, "seed": 1},
    ),
    FunctionCase(
        "deep_rnn_with_skip_connections",
        _step_of_factory(snt.deep_rnn_with_skip_connections),
        lambda: {
            "layers": [snt.LSTM(3), snt.GRU(2)],
            "concat_final_output": True,
            "name": "skip",
        },
    ),
    FunctionCase(
        "deep_rnn_with_residual_connections",
        _step_of_factory(snt.deep_rnn_with_residual_connections),
        lambda: {"layers": [snt.LSTM(3), snt.GRU(3)], "name": "residual"},
    ),
    FunctionCase(
        "TrainableState.for_core",
        _trainable_state_for_core,
        lambda: {"core": snt.LSTM(3), "mask": None, "name": "state"},
    ),
    FunctionCase(
        "format_variables",
        _format_variables,
        lambda: {"variables": [tf.Variable(tf.ones([2]), name="v")]},
    ),
    FunctionCase(
        "initializers.Zeros",
        _initializer(snt.initializers.Zeros),
        lambda: dict(_INIT_SHAPE),
    ),
    FunctionCase(
        "initializers.Ones",
        _initializer(snt.initializers.Ones),
        lambda: dict(_INIT_SHAPE),
    ),
    FunctionCase(
        "initializers.Constant",
        _initializer(snt.initializers.Constant),
        lambda: {**_INIT_SHAPE, "value": 0.5},
    ),
    FunctionCase(
        "initializers.RandomUniform",
        _initializer(snt.initializers.RandomUniform),
        lambda: {**_INIT_SHAPE, "minval": -1.0, "maxval": 1.0, "seed": 1},
    ),
    FunctionCase(
        "initializers.RandomNormal",
        _initializer(snt.initializers.RandomNormal),
        lambda: {**_INIT_SHAPE, "mean": 0.0, "stddev": 1.0, "seed": 1},
    ),
    FunctionCase(
        "initializers.TruncatedNormal",
        _initializer(snt.initializers.TruncatedNormal),
        lambda: {**_INIT_SHAPE, "mean": 0.0, "stddev": 1.0, "seed": 1},
    ),
    FunctionCase(
        "initializers.Identity",
        _initializer(snt.initializers.Identity),
        lambda: {**_INIT_SHAPE, "gain": 2.0},
    ),
    FunctionCase(
        "initializers.Orthogonal",
        _initializer(snt.initializers.Orthogonal),
        lambda: {**_INIT_SHAPE, "gain": 1.0, "seed": 1},
    ),
    FunctionCase(
        "initializers.VarianceScaling",
        _initializer(snt.initializers.VarianceScaling),
        lambda: {
            **_INIT_SHAPE,
            "scale": 2.0,
            "mode": "fan_avg",
            "distribution": "uniform",
            "seed": 1,
        },
    ),
    *[
        FunctionCase(
            f"regularizers.{cls.__name__}",
            _regularizer(cls),
            lambda: {"tensors": [_x(3, 4), _x(4, 4)], "scale": 0.5},
            propagates=("tensors",),
        )
        for cls in (
            snt.regularizers.L1,
            snt.regularizers.L2,
            snt.regularizers.OffDiagonalOrthogonal,
        )
    ],
]


def _function_names(case: FunctionCase, kwargs: dict[str, Any]) -> list[str]:
    names = set(kwargs) | set(case.names)
    try:
        names.update(inspect.signature(case.fn).parameters)
    except (TypeError, ValueError):
        pass
    names -= {"kwargs", "ctor", "args"}
    return sorted(names)


class _FunctionAttacks:
    """Attacks on one function's keyword arguments."""

    def __init__(self, case: FunctionCase, kwargs: dict[str, Any]):
        self.kwargs = kwargs
        self.junk = bad_input.ctor_junk()
        self.names = sorted(kwargs)
        # All tensor leaves of all arguments, as (argument, leaf index).
        self.leaves = [
            (name, i)
            for name in self.names
            for i, leaf in enumerate(tf.nest.flatten(kwargs[name]))
            if isinstance(leaf, tf.Tensor)
        ]
        junk = st.sampled_from(
            [("junk", name, k) for name in self.names for k in range(len(self.junk))]
        )
        self.state_variants: list[tuple[str, Any]] = []
        if case.state is not None:
            self.state_variants = bad_input.state_variants(kwargs[case.state])
        self.state = case.state
        if not self.leaves:
            self.strategy = junk
            return
        tensors = [tf.nest.flatten(kwargs[name])[i] for name, i in self.leaves]
        singles = _single_attacks(
            [(j, t.shape.rank or 0) for j, t in enumerate(tensors)],
            [j for j, t in enumerate(tensors) if bad_input.is_float_tensor(t)],
        )
        # Leaf and state attacks have the shape `_attack_strategy` gives
        # them; "leaves" are then indices into `self.leaves`.
        self.strategy = st.one_of(
            junk, _attack_strategy(singles, len(self.state_variants))
        )

    def apply(self, attack: tuple[Any, ...]) -> tuple[dict[str, Any], str | None]:
        """Bad kwargs, and the attacked argument when it was a leaf attack."""
        kwargs = dict(self.kwargs)
        if attack[0] == "junk":
            kwargs[attack[1]] = self.junk[attack[2]]
            return kwargs, None
        if attack[0] == "state":
            assert self.state is not None
            kwargs[self.state] = self.state_variants[attack[1]][1]
            return kwargs, None
        attacked = None
        for leaf_attack in attack[1]:
            if leaf_attack[0] == "empty_batch":
                # No common batch axis: cut every argument's axis 0.
                for name in self.names:
                    kwargs[name] = bad_input.empty_batch((kwargs[name],))[0]
                continue
            name, i = self.leaves[leaf_attack[1]]
            kwargs[name] = _apply_leaf_attack(
                (leaf_attack[0], i, *leaf_attack[2:]), kwargs[name]
            )
            attacked = name
        return kwargs, attacked


@pytest.mark.parametrize("case", FUNCTIONS, ids=[c.id for c in FUNCTIONS])
def test_function_bad_arguments(case: FunctionCase):
    kwargs = case.kwargs()
    case.fn(**kwargs)  # The valid arguments work (and build any core).
    attacks = _FunctionAttacks(case, kwargs)
    names = _function_names(case, kwargs)

    @_settings(EXAMPLES)
    @given(attacks.strategy)
    def check(attack):
        bad, attacked = attacks.apply(attack)
        ok, result = bad_input.outcome(lambda: case.fn(**bad), names)
        if (
            ok
            and attacked in case.propagates
            and len(attack[1]) == 1
            and attack[1][0][0] == "non_finite"
            and attack[1][0][3]
            and math.isnan(attack[1][0][2])
        ):
            _assert_propagates(result, f"`{attacked}` filled with NaN")

    check()


# ---------------------------------------------------------------------------
# Regressions: failures the suites above found, pinned down.


def test_split_leading_dim_rejects_bad_example():
    x = tf.zeros([6, 4])
    with pytest.raises(TypeError, match="`example` must be a tensor or array"):
        snt.split_leading_dim(x, None, 2)
    with pytest.raises(ValueError, match="`example` must have at least `num_dims`=2"):
        snt.split_leading_dim(x, tf.zeros([6]), 2)
    assert snt.split_leading_dim(x, np.zeros([2, 3, 1]), 2).shape == (2, 3, 4)


@pytest.mark.parametrize("variables", [3, "v", np.array(3), [1.0], None])
def test_format_variables_rejects_non_variables(variables):
    with pytest.raises(TypeError, match="`variables` must") as info:
        snt.format_variables(variables)
    bad_input.check_error(info.value, ["variables"])


def test_format_variables_rejects_bad_tablefmt():
    with pytest.raises(TypeError, match="`tablefmt` must be a tabulate table format"):
        snt.format_variables([tf.Variable(1.0)], tablefmt=-1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cls", [snt.initializers.RandomNormal, snt.initializers.TruncatedNormal]
)
def test_initializer_tensor_arguments_must_be_real_scalars(cls):
    with pytest.raises(ValueError, match="`mean` must be a scalar"):
        cls(mean=tf.constant([1.0, 2.0]))
    with pytest.raises(TypeError, match="`stddev` must be a real number"):
        cls(stddev=tf.constant("x"))
    assert cls(mean=tf.constant(1.0))([2], tf.float32).shape == (2,)


def test_random_uniform_whole_float_bounds_for_integer_dtype():
    values = snt.initializers.RandomUniform(-3.0, 3.0, seed=1)([100], tf.int64)
    assert values.dtype == tf.int64
    assert -3 <= int(tf.reduce_min(values)) and int(tf.reduce_max(values)) < 3


def test_dilated_conv_rejects_string_inputs_cleanly():
    conv = snt.Conv2D(2, 2, rate=2, padding=snt.pad.full, with_bias=False)
    x = tf.ones([1, 4, 3, 2])
    conv(x)
    before = bad_input.snapshot(conv)
    with pytest.raises((TypeError, ValueError)) as info:
        conv(tf.fill([1, 4, 3, 2], "a"))
    bad_input.check_error(info.value, ["inputs"])
    bad_input.assert_unchanged(conv, before)


@pytest.mark.parametrize("call_methods", [None, ["x", 1], np.zeros([2]), ("a b",)])
def test_deferred_rejects_bad_call_methods(call_methods):
    with pytest.raises(TypeError, match="`call_methods` must be a sequence") as info:
        snt.Deferred(lambda: snt.Linear(1), call_methods=call_methods)
    bad_input.check_error(info.value, ["call_methods"])


def test_lstm_unroll_without_input_features_matches_steps():
    core = snt.LSTM(3)
    x = tf.zeros([2, 2, 0])
    state = _lstm_state(2, 3)
    dynamic, _ = snt.dynamic_unroll(core, x, state)
    static, _ = snt.static_unroll(core, x, state)
    assert dynamic.shape == (2, 2, 3)
    np.testing.assert_allclose(dynamic, static, rtol=1e-6, atol=1e-6)


def test_unrolled_lstm_rejects_empty_sequences():
    lstm = snt.UnrolledLSTM(3)
    with pytest.raises(ValueError, match="`input_sequence` must have at least one"):
        lstm(tf.zeros([0, 2, 4]), _lstm_state(2, 3))


@pytest.mark.parametrize(
    "conv, shape, axis",
    [
        (lambda: snt.Conv1D(4, 3), [2, 5, 4], -1),
        (lambda: snt.Conv2D(4, 3), [2, 5, 5, 4], -1),
        (lambda: snt.Conv2D(4, 3, data_format="NCHW"), [2, 4, 5, 5], 1),
    ],
)
def test_conv_rejects_a_multiple_of_its_channels(conv, shape, axis):
    # TF's Conv2D would run these as a grouped convolution: a wrong result.
    module = conv()
    x = tf.ones(shape)
    module(x)
    with pytest.raises(ValueError, match="must have 4 channels") as info:
        module(tf.concat([x, x], axis=axis))
    bad_input.check_error(info.value, ["inputs"])


def test_block_group_failed_call_leaves_moving_statistics_alone():
    # Found by the fuzz: the projection shortcut ran (as a grouped
    # convolution) and updated its batch norm before the main path failed.
    group = snt.nets.resnet.BlockGroup(
        channels=4, num_blocks=1, stride=1, bn_config={"decay_rate": 0.5}
    )
    x = tf.ones([2, 3, 3, 4])
    group(x, is_training=True)
    state = _State(group)
    with pytest.raises(ValueError, match="channels"):
        group(tf.concat([x, x], axis=-1), is_training=True)
    state.assert_unchanged()
