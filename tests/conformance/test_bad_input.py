"""Bad inputs for every registered module (see `bad_input.py` for the contract).

Each registered case is built with its valid example inputs; hypothesis then
replaces one input tensor with a variant of the wrong rank, the wrong dtype or
a changed size and calls the module again. The call must either work or raise
a `ValueError`/`TypeError` naming an argument and showing the received value;
after a failure the module's variables are unchanged and a valid call still
gives the original result. The same variants are also tried on a fresh module
(so build-time checks are exercised).
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance import bad_input
from tests.conformance.registry import CASES, Case

EXAMPLES = int(os.environ.get("SNT_FUZZ_EXAMPLES", "25"))

_BAD_DTYPES = [tf.string, tf.bool, tf.complex64, tf.float64, tf.int32, tf.float16]


def _argument_names(case: Case, module: Any) -> list[str]:
    names = set(bad_input.parameter_names(type(module)))
    call = vars(type(module)).get("__call__") or type(module).__call__
    if call is not None:
        try:
            names.update(inspect.signature(inspect.unwrap(call)).parameters)
        except (TypeError, ValueError):
            pass
    names.discard("self")
    names.update({"inputs", "input_sequence", "prev_state", "initial_state"})
    return sorted(names)


def _variant(x: tf.Tensor, kind: str, amount: int, dtype: tf.DType, axis: int) -> Any:
    rank = x.shape.rank or 0
    if kind == "add_dims":
        for _ in range(amount):
            x = tf.expand_dims(x, 0)
        return x
    if kind == "drop_dims":
        for _ in range(min(amount, rank)):
            x = x[0]
        return x
    if kind == "dtype":
        if dtype == tf.string:
            return tf.fill(x.shape, "a")
        if dtype == tf.bool:
            return tf.fill(x.shape, True)
        return tf.cast(tf.math.real(x) if x.dtype.is_complex else x, dtype)
    # kind == "resize"
    if rank == 0:
        return tf.stack([x, x])
    pad = [[0, 0]] * rank
    pad[axis % rank] = [0, amount]
    return tf.pad(x, pad)


variants = st.tuples(
    st.sampled_from(["add_dims", "drop_dims", "dtype", "resize"]),
    st.integers(1, 2),
    st.sampled_from(_BAD_DTYPES),
    st.integers(-3, 3),
)


def _replace_leaf(inputs: tuple[Any, ...], index: int, value: Any) -> tuple[Any, ...]:
    leaves = tf.nest.flatten(inputs)
    leaves[index] = value
    return tuple(tf.nest.pack_sequence_as(inputs, leaves))


def _tensor_leaf_indices(inputs: tuple[Any, ...]) -> list[int]:
    return [
        i
        for i, leaf in enumerate(tf.nest.flatten(inputs))
        if isinstance(leaf, tf.Tensor)
    ]


def _close(a: Any, b: Any) -> None:
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_inputs_after_build(case: Case):
    module = case.factory()
    inputs = case.inputs()
    case.run(module, *inputs)
    leaves = _tensor_leaf_indices(inputs)
    if not leaves:
        pytest.skip("case has no tensor inputs")
    names = _argument_names(case, module)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(st.sampled_from(leaves), variants)
    def check(index, variant):
        leaf = tf.nest.flatten(inputs)[index]
        bad = _replace_leaf(inputs, index, _variant(leaf, *variant))
        before = bad_input.snapshot(module)
        ok, _ = bad_input.outcome(lambda: case.run(module, *bad), names)
        if not ok:
            bad_input.assert_unchanged(module, before)
            # The module is still usable after the failure.
            case.run(module, *inputs)

    check()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_inputs_on_first_call(case: Case):
    inputs = case.inputs()
    leaves = _tensor_leaf_indices(inputs)
    if not leaves:
        pytest.skip("case has no tensor inputs")

    @settings(
        max_examples=max(EXAMPLES // 5, 5),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(st.sampled_from(leaves), variants)
    def check(index, variant):
        module = case.factory()
        names = _argument_names(case, module)
        leaf = tf.nest.flatten(inputs)[index]
        bad = _replace_leaf(inputs, index, _variant(leaf, *variant))
        ok, _ = bad_input.outcome(lambda: case.run(module, *bad), names)
        if not ok:
            # A failed first call must not leave a half-built module behind.
            case.run(module, *inputs)

    check()
