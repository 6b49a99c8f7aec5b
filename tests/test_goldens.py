"""Golden checkpoints written by the original Sonnet 2.0.2 (see goldens/README.md).

For every case: build the module (and optimizer) from `case.json`, restore the
checkpoint BEFORE the first call (restore-on-create), evaluate the call, then
`assert_consumed()` must pass and every output must match `io.npz`. The
variables must also match the original's names, shapes, dtypes, trainability
and `module.variables` order.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt

GOLDENS = pathlib.Path(__file__).parent / "goldens"
CASE_DIRS = sorted(p for p in GOLDENS.iterdir() if (p / "case.json").exists())


def train_step(m: Any, opt: Any, x: tf.Tensor) -> None:
    """The training step the goldens' optimizer cases were written with."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(m(x)))
    grads = tape.gradient(loss, m.trainable_variables)
    opt.apply(grads, m.trainable_variables)


def _evaluate(expression: str, names: dict[str, Any]) -> Any:
    return eval(expression, {"snt": snt, "tf": tf, "np": np, **names})


def _build(case: dict[str, Any]) -> tuple[Any, Any]:
    # A case that does not build is a failure (every golden's module exists).
    module = _evaluate(case["module"], {})
    opt = _evaluate(case["opt"], {}) if case["opt"] else None
    return module, opt


def _run(directory: pathlib.Path) -> tuple[dict[str, Any], Any, list, Any]:
    case = json.loads((directory / "case.json").read_text())
    io = np.load(directory / "io.npz")
    module, opt = _build(case)
    objects = {"module": module}
    if opt is not None:
        objects["opt"] = opt
    status = tf.train.Checkpoint(**objects).read(str(directory / "ckpt"))
    inputs = [tf.constant(io[f"in{i}"]) for i in range(case["num_inputs"])]
    result = _evaluate(
        case["call"],
        {"m": module, "opt": opt, "inputs": inputs, "train_step": train_step},
    )
    status.assert_consumed()
    expected = [io[f"out{i}"] for i in range(case["num_outputs"])]
    return case, module, expected, result


@pytest.mark.parametrize("directory", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_golden(directory: pathlib.Path):
    case, module, expected, result = _run(directory)
    outputs = tf.nest.flatten(result)
    assert len(outputs) == len(expected)
    for i, (want, got) in enumerate(zip(expected, outputs)):
        got = np.asarray(got)
        assert got.shape == want.shape, f"out{i}: shape {got.shape} != {want.shape}"
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"out{i}")

    original = case["variables_in_original"]
    ours = [
        [v.name, v.shape.as_list(), v.dtype.name, v.trainable]
        for v in tf.Module.variables.fget(module)  # type: ignore[attr-defined]
    ]
    assert ours == original
