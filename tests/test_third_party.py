"""A project built on the original Sonnet 2 runs its own tests on ours.

graph_nets 1.1.0 (DeepMind's graph network library) ships a TensorFlow 2
test suite (`graph_nets/tests_tf2`) written against Sonnet 2's `snt.Module`,
`snt.Linear`, `snt.LayerNorm`, `snt.Conv2D`, `snt.nets.MLP` and
`snt.Sequential`: variable creation on first call, name scopes, nested
modules, `tf.function` and gradients. It is run twice, as it is: in the
second environment with the original Sonnet 2.0.2 and here with ours, and
every test that passes with the original must pass with ours. (Some fail
with both: they match TensorFlow's error messages of 2020.)

`.ci/run` downloads graph_nets' sources from the package registry into
`.ci-third-party/` and installs its dependencies (dm-tree, networkx, six,
future) in both environments; without them the test is skipped with the
reason.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.differential import original

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / ".ci-third-party" / "graph_nets-1.1.0"
SUITE = "graph_nets/tests_tf2"
_DEPENDENCIES = ("tree", "networkx", "six", "future")

pytestmark = pytest.mark.slow


def _missing() -> str | None:
    if not (SOURCES / SUITE).is_dir():
        return f"graph_nets' sources are not at {SOURCES} (run .ci/run)"
    absent = [m for m in _DEPENDENCIES if importlib.util.find_spec(m) is None]
    if absent:
        return f"graph_nets' dependencies are not installed here: {absent}"
    python = original.original_python()
    if python is None:
        return original.missing_reason()
    imports = "import " + ", ".join((*_DEPENDENCIES, "pytest"))
    if subprocess.run([python, "-c", imports], capture_output=True).returncode:
        return f"graph_nets' dependencies are not installed for the original: {python}"
    return None


def _run(python: str) -> tuple[set[str], int, str]:
    """Runs graph_nets' TF2 suite with `python`: (failed ids, passed, log)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SOURCES)
    env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            "-rf",
            "-p",
            "no:cacheprovider",
            # graph_nets' own directory as the root: without these, pytest
            # would find this repository's configuration and conftest.py
            # above it, and import our Sonnet into the original's run.
            "-c",
            "setup.cfg",
            "--rootdir",
            ".",
            "--confcutdir",
            ".",
            SUITE,
        ],
        cwd=SOURCES,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = result.stdout + result.stderr
    failed = set(re.findall(r"^FAILED (\S+)", log, flags=re.MULTILINE))
    passed = re.search(r"(\d+) passed", log)
    return failed, int(passed.group(1)) if passed else 0, log


def test_graph_nets_suite_passes_as_with_the_original():
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    python = original.original_python()
    assert python is not None
    theirs, theirs_passed, their_log = _run(python)
    ours, ours_passed, our_log = _run(sys.executable)
    # The suite ran (hundreds of tests) with the original.
    assert theirs_passed > 250, their_log[-3000:]
    regressions = sorted(ours - theirs)
    assert not regressions, (
        f"pass with Sonnet 2.0.2, fail with ours: {regressions}\n{our_log[-6000:]}"
    )
    assert ours_passed >= theirs_passed, our_log[-3000:]
