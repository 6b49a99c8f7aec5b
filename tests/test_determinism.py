"""Determinism: the same seed and op determinism give bit-identical training.

`examples/mlp_digits.py --quick` (MLP + Adam on the digits data, seeded with
`--seed`) runs twice, side by side, as separate processes with
`tf.config.experimental.enable_op_determinism()` switched on before it
starts; the checkpoints it writes at the end must hold bit-identical values
for every variable (model and optimizer, slots included).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "mlp_digits.py"

# Runs the example as `python examples/mlp_digits.py ...` would, with op
# determinism enabled first.
_RUNNER = """
import runpy, sys
import tensorflow as tf
tf.config.experimental.enable_op_determinism()
script = sys.argv[1]
sys.path.insert(0, str(__import__("pathlib").Path(script).parent))
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


def _start(out: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), env.get("PYTHONPATH")])
    )
    command = [sys.executable, "-c", _RUNNER, str(EXAMPLE)]
    return subprocess.Popen(
        [*command, "--quick", "--seed", "3", "--out", str(out)],
        cwd=out.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _checkpoint_values(out: Path) -> dict[str, np.ndarray]:
    path = tf.train.latest_checkpoint(str(out / "checkpoint"))
    assert path is not None, f"no checkpoint written to {out}"
    reader = tf.train.load_checkpoint(path)
    return {
        key: reader.get_tensor(key)
        for key in reader.get_variable_to_shape_map()
        if key != "_CHECKPOINTABLE_OBJECT_GRAPH"
    }


def test_two_seeded_runs_of_the_example_are_bit_identical(tmp_path):
    outs = [tmp_path / "first", tmp_path / "second"]
    procs = [_start(out) for out in outs]
    try:
        for proc in procs:
            output, _ = proc.communicate(timeout=600)
            assert proc.returncode == 0, output[-3000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    first, second = (_checkpoint_values(out) for out in outs)
    assert sorted(first) == sorted(second)
    # The model and Adam's state (step counter and slots) are all compared.
    assert any("model/" in key for key in first)
    assert any(key.startswith("optimizer/m/") for key in first)
    assert any(key.startswith("optimizer/step") for key in first)
    for key, value in first.items():
        np.testing.assert_array_equal(second[key], value, err_msg=key)
