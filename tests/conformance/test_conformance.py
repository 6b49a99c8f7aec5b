"""Suites run over every registered module (see `registry.py`).

Each suite builds the module from its `Case`, records the variable values after
the first call, and compares some transformed version of the module (pickled,
copied, traced, compiled, exported, restored, replicated) against the original,
resetting the variables to the recorded values before each call so modules
with side effects (moving averages, optimizers) are compared fairly.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tests.conformance.registry import CASES, Case
from tests.conformance.variable_counts import VARIABLE_COUNTS

pytestmark = pytest.mark.filterwarnings("ignore")


def _ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


def _variables(module: Any) -> tuple[tf.Variable, ...]:
    return tuple(tf.Module.variables.fget(module))  # type: ignore[attr-defined]


def _snapshot(module: Any) -> list[np.ndarray]:
    return [v.numpy() for v in _variables(module)]


def _reset(module: Any, values: list[np.ndarray]) -> None:
    variables = _variables(module)
    assert len(variables) == len(values), (
        f"module has {len(variables)} variables, expected {len(values)}"
    )
    for v, value in zip(variables, values):
        v.assign(value)


def _build(case: Case) -> tuple[Any, tuple[Any, ...], list[np.ndarray]]:
    module = case.factory()
    inputs = case.inputs()
    case.run(module, *inputs)
    return module, inputs, _snapshot(module)


def _reference(case: Case, module: Any, inputs: tuple[Any, ...], snap: list) -> Any:
    _reset(module, snap)
    return case.run(module, *inputs)


def _leaves(structure: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in tf.nest.flatten(structure, expand_composites=True)]


def _assert_same(
    case: Case, expected: Any, actual: Any, tolerance: float | None = None
):
    tol = case.tolerance if tolerance is None else tolerance
    expected_leaves, actual_leaves = _leaves(expected), _leaves(actual)
    assert len(expected_leaves) == len(actual_leaves), "output structure differs"
    for e, a in zip(expected_leaves, actual_leaves):
        assert e.shape == a.shape, f"shape {a.shape} != {e.shape}"
        assert e.dtype == a.dtype, f"dtype {a.dtype} != {e.dtype}"
        if case.deterministic:
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


def _assert_same_variables(a: Any, b: Any) -> None:
    va, vb = _variables(a), _variables(b)
    assert len(va) == len(vb)
    for x, y in zip(va, vb):
        assert x is not y
        assert x.name == y.name
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_pickle(case: Case):
    module, inputs, snap = _build(case)
    _reset(module, snap)
    clone = pickle.loads(pickle.dumps(module))
    _assert_same_variables(module, clone)
    expected = _reference(case, module, inputs, snap)
    _reset(clone, snap)
    _assert_same(case, expected, case.run(clone, *inputs))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_deepcopy(case: Case):
    module, inputs, snap = _build(case)
    _reset(module, snap)
    clone = copy.deepcopy(module)
    _assert_same_variables(module, clone)
    expected = _reference(case, module, inputs, snap)
    _reset(clone, snap)
    _assert_same(case, expected, case.run(clone, *inputs))


@pytest.mark.parametrize("autograph", [True, False], ids=["autograph", "no_autograph"])
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_tf_function_matches_eager(case: Case, autograph: bool):
    module, inputs, snap = _build(case)
    expected = _reference(case, module, inputs, snap)
    traced = tf.function(lambda *a: case.run(module, *a), autograph=autograph)
    _reset(module, snap)
    _assert_same(case, expected, traced(*inputs))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_variables_created_inside_tf_function(case: Case):
    reference, inputs, snap = _build(case)
    expected = _reference(case, reference, inputs, snap)
    module = case.factory()
    traced = tf.function(lambda *a: case.run(module, *a))
    traced(*inputs)
    assert [v.name for v in _variables(module)] == [
        v.name for v in _variables(reference)
    ]
    _reset(module, snap)
    _assert_same(case, expected, traced(*inputs))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_xla(case: Case):
    if not case.xla:
        pytest.skip("case marked as not XLA-compilable")
    module, inputs, snap = _build(case)
    expected = _reference(case, module, inputs, snap)
    compiled = tf.function(lambda *a: case.run(module, *a), jit_compile=True)
    _reset(module, snap)
    _assert_same(case, expected, compiled(*inputs), tolerance=max(case.tolerance, 1e-4))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_saved_model(case: Case, tmp_path):
    if not case.saved_model:
        pytest.skip("case marked as not exportable")
    module, inputs, snap = _build(case)
    # Exported with the batch dimension unknown, called with the example's.
    signature = tf.nest.map_structure(lambda x: _unknown_spec(case, x, "batch"), inputs)
    export = tf.Module()
    export.module = module
    export.all_variables = list(_variables(module))
    export.inference = tf.function(
        lambda *a: case.run(module, *a), input_signature=list(signature)
    )
    _reset(module, snap)
    tf.saved_model.save(export, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    assert [v.name for v in loaded.all_variables] == [
        v.name for v in _variables(module)
    ]
    for v, value in zip(loaded.all_variables, snap):
        np.testing.assert_array_equal(v.numpy(), value)
    expected = _reference(case, module, inputs, snap)
    _assert_same(case, expected, loaded.inference(*inputs))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_checkpoint_round_trip(case: Case, tmp_path):
    module, inputs, snap = _build(case)
    _reset(module, snap)
    path = tf.train.Checkpoint(module=module).write(str(tmp_path / "ckpt"))
    restored, _, _ = _build(case)
    tf.train.Checkpoint(module=restored).read(path).assert_consumed()
    _assert_same_variables(module, restored)
    expected = _reference(case, module, inputs, snap)
    _assert_same(case, expected, case.run(restored, *inputs))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_restore_on_create(case: Case, tmp_path):
    module, inputs, snap = _build(case)
    _reset(module, snap)
    path = tf.train.Checkpoint(module=module).write(str(tmp_path / "ckpt"))
    fresh = case.factory()
    status = tf.train.Checkpoint(module=fresh).read(path)
    actual = case.run(fresh, *inputs)
    status.assert_consumed()
    expected = _reference(case, module, inputs, snap)
    _assert_same(case, expected, actual)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_mirrored_strategy_two_replicas(case: Case):
    if not case.distribute:
        pytest.skip("case marked as not distributable")
    reference, inputs, snap = _build(case)
    expected = _reference(case, reference, inputs, snap)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        module = case.factory()

    @tf.function
    def step(*args):
        return strategy.run(lambda *a: case.run(module, *a), args=args)

    step(*inputs)
    _reset(module, snap)
    for v in _variables(module):
        values = strategy.experimental_local_results(v)
        assert len(values) == 2
    outputs = step(*inputs)
    per_replica = [
        tf.nest.map_structure(
            lambda t, i=i: strategy.experimental_local_results(t)[i], outputs
        )
        for i in range(2)
    ]
    for result in per_replica:
        _assert_same(case, expected, result)


def _unknown_spec(case: Case, x: Any, unknown: str) -> tf.TensorSpec:
    """A spec for `x` with the batch dim, or every dim, unknown.

    The case's `static_axes` stay known.
    """
    x = tf.convert_to_tensor(x)
    shape = x.shape.as_list()
    for axis in range(len(shape)):
        if axis not in case.static_axes and (
            unknown == "all" or axis == case.batch_axis
        ):
            shape[axis] = None
    return tf.TensorSpec(shape, x.dtype)


@pytest.mark.parametrize("unknown", ["batch", "all"])
@pytest.mark.parametrize("autograph", [True, False], ids=["autograph", "no_autograph"])
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_tf_function_with_unknown_dims(case: Case, autograph: bool, unknown: str):
    # Built eagerly first, so no variable needs a static size: every module
    # must then trace with the batch dim, or all dims, unknown.
    module, inputs, snap = _build(case)
    expected = _reference(case, module, inputs, snap)
    signature = tf.nest.map_structure(lambda x: _unknown_spec(case, x, unknown), inputs)
    traced = tf.function(
        lambda *a: case.run(module, *a),
        input_signature=list(signature),
        autograph=autograph,
    )
    _reset(module, snap)
    _assert_same(case, expected, traced(*inputs))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_first_call_traced_with_unknown_batch(case: Case):
    # The variables are created by a trace (AutoGraph on, the default) whose
    # inputs have an unknown batch dim.
    reference, inputs, snap = _build(case)
    expected = _reference(case, reference, inputs, snap)
    module = case.factory()
    signature = tf.nest.map_structure(lambda x: _unknown_spec(case, x, "batch"), inputs)
    traced = tf.function(
        lambda *a: case.run(module, *a), input_signature=list(signature)
    )
    traced(*inputs)
    _reset(module, snap)
    _assert_same(case, expected, traced(*inputs))


def _float_leaves(structure: Any) -> list[tf.Tensor]:
    leaves = tf.nest.flatten(structure, expand_composites=True)
    return [t for t in leaves if isinstance(t, tf.Tensor) and t.dtype.is_floating]


def _loss(case: Case, module: Any, inputs: tuple[Any, ...]) -> tf.Tensor:
    outputs = _float_leaves(case.run(module, *inputs))
    return tf.add_n([tf.reduce_sum(tf.square(tf.cast(t, tf.float32))) for t in outputs])


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_training_step(case: Case):
    # Every trainable variable gets a gradient from the outputs, and a small
    # gradient step on them lowers a loss of the outputs.
    if not case.trainable:
        pytest.skip("case marked as having no trainable path from outputs")
    module, inputs, snap = _build(case)
    trainable = [v for v in _variables(module) if v.trainable]
    if not trainable:
        pytest.skip("no trainable variables")
    _reset(module, snap)
    with tf.GradientTape() as tape:
        loss = _loss(case, module, inputs)
    grads = tape.gradient(loss, trainable)
    missing = [v.name for v, g in zip(trainable, grads) if g is None]
    assert not missing, f"no gradient for {missing}"
    # A step that lowers the loss by about 1% to first order.
    norm = float(tf.linalg.global_norm(grads))
    if norm**2 <= 1e-6 * float(loss):
        pytest.skip("the gradient vanishes at the recorded values")
    rate = 1e-2 * float(loss) / norm**2
    for v, g in zip(trainable, grads):
        v.assign_sub(tf.cast(rate * tf.convert_to_tensor(g), v.dtype))
    after = _loss(case, module, inputs)
    if case.deterministic:
        assert float(after) < float(loss), (float(loss), float(after))


@pytest.mark.parametrize(
    "dtype", [tf.float16, tf.bfloat16], ids=["float16", "bfloat16"]
)
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_low_precision(case: Case, dtype: tf.DType):
    # Built on low-precision inputs, a module computes in that dtype, close to
    # the same module built on float32 inputs.
    if dtype.name not in case.precisions:
        pytest.skip(f"case marked as not supporting {dtype.name}")
    if not any(
        tf.convert_to_tensor(x).dtype == tf.float32
        for x in tf.nest.flatten(case.inputs())
    ):
        pytest.skip("no float32 inputs")
    module, inputs, snap = _build(case)
    expected = _reference(case, module, inputs, snap)

    def cast(x: Any) -> Any:
        x = tf.convert_to_tensor(x)
        return tf.cast(x, dtype) if x.dtype == tf.float32 else x

    low_inputs = tf.nest.map_structure(cast, inputs)
    low = case.factory()
    case.run(low, *low_inputs)
    low_vars, vars32 = _variables(low), _variables(module)
    assert len(low_vars) == len(vars32)
    for v, value in zip(low_vars, snap):
        v.assign(tf.cast(value, v.dtype))
    actual = case.run(low, *low_inputs)
    low_leaves = _float_leaves(actual)
    assert low_leaves, "no floating point outputs"
    assert all(t.dtype in (dtype, tf.float32) for t in low_leaves)
    if case.deterministic:
        tolerance = 2e-2 if dtype == tf.bfloat16 else 4e-3
        for a, e in zip(_float_leaves(actual), _float_leaves(expected)):
            scale = (
                max(1.0, float(tf.reduce_max(tf.abs(e))))
                if e.shape.num_elements()
                else 1.0
            )
            np.testing.assert_allclose(
                tf.cast(a, tf.float32).numpy(),
                tf.cast(e, tf.float32).numpy(),
                atol=tolerance * scale * 4,
                rtol=tolerance * 4,
            )


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_variable_count(case: Case):
    module, _, _ = _build(case)
    assert case.id in VARIABLE_COUNTS, (
        f"add {case.id!r}: {len(_variables(module))} to variable_counts.py"
    )
    assert len(_variables(module)) == VARIABLE_COUNTS[case.id]
