"""The kernel-dependent suites again, with TensorFlow's oneDNN CPU kernels on.

The rest of the test run pins TensorFlow's default kernels (see the root
`conftest.py`). TensorFlow turns oneDNN on by default on CPUs with
AVX-512-VNNI/BF16 or AMX, and its kernels differ where Sonnet has code paths
of its own: empty inputs and filters of convolutions (oneDNN returns a tensor
of the input's shape for an empty input and rejects filters without output
channels), bfloat16 convolutions (native on such CPUs), fused matmuls in
traced functions. `TF_ENABLE_ONEDNN_OPTS=1` turns them on on any x86-64 CPU,
so these run everywhere.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUITES = (
    "tests/test_conv.py",
    "tests/test_conv_transpose.py",
    "tests/test_depthwise_conv.py",
    "tests/test_precision_conv.py",
    "tests/test_precision.py",
    "tests/test_tf_compat.py",
)


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason="TensorFlow's oneDNN kernels are an x86-64 feature",
)
def test_kernel_dependent_suites_pass_with_onednn() -> None:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *SUITES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert completed.returncode == 0, completed.stdout[-4000:]
    assert " passed" in completed.stdout.splitlines()[-1]
