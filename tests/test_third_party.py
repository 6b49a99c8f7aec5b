"""Projects built on the original Sonnet 2 run their own tests on ours.

graph_nets 1.1.0 (DeepMind's graph network library) ships a TensorFlow 2
test suite (`graph_nets/tests_tf2`) written against Sonnet 2's `snt.Module`,
`snt.Linear`, `snt.LayerNorm`, `snt.Conv2D`, `snt.nets.MLP` and
`snt.Sequential`: variable creation on first call, name scopes, nested
modules, `tf.function` and gradients. It is run twice, as it is: in the
second environment with the original Sonnet 2.0.2 and here with ours, and
every test that passes with the original must pass with ours. (Some fail
with both: they match TensorFlow's error messages of 2020.)

acme 0.4.0 (DeepMind's reinforcement learning framework; its TensorFlow
agents are built on Sonnet 2): its TensorFlow tests (networks, losses,
savers, utilities) run in both environments in the same way, and
`third_party/acme_networks.py` runs every network acme exports (Atari,
IMPALA and R2D2 cores with their unrolls, continuous-control torsos and
distribution heads, a D4PG-style learner step, snapshots and checkpoints)
with fixed weights in both and must print the same results. acme's other
imports that its TensorFlow code never calls (launchpad, gym, reverb, ...)
are answered by `third_party/acme_stubs`.

`.ci/run` downloads both projects' sources from the package registry into
`.ci-third-party/`, installs graph_nets' dependencies (dm-tree, networkx,
six, future) in both environments and acme's (TensorFlow Probability,
tf-keras, dm-env, trfl, Pillow) into `.ci-third-party/acme-deps`, which
only these runs put on the path; without them a test is skipped with the
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
THIRD_PARTY = ROOT / ".ci-third-party"
SOURCES = THIRD_PARTY / "graph_nets-1.1.0"
SUITE = "graph_nets/tests_tf2"
_DEPENDENCIES = ("tree", "networkx", "six", "future")
ACME = THIRD_PARTY / "dm-acme-0.4.0"
ACME_DEPENDENCIES = THIRD_PARTY / "acme-deps"
ACME_STUBS = Path(__file__).resolve().parent / "third_party" / "acme_stubs"
ACME_NETWORKS = Path(__file__).resolve().parent / "third_party" / "acme_networks.py"
# acme's TensorFlow tests that pytest runs (its savers' tests need absl's
# flags, so they run through their own `absltest.main()`).
ACME_TESTS = (
    "acme/tf/losses/distributional_test.py",
    "acme/tf/networks/distributional_test.py",
    "acme/tf/networks/distributions_test.py",
    "acme/tf/networks/recurrence_test.py",
    "acme/tf/utils_test.py",
    "acme/tf/variable_utils_test.py",
)
ACME_ABSL_TESTS = ("acme/tf/savers_test.py",)

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


def _environment(*path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def _pytest(
    python: str, cwd: Path, env: dict[str, str], *tests: str
) -> tuple[set[str], int, str]:
    """Runs a project's tests with `python` in its own directory: (failed
    ids, number passed, log)."""
    result = subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            "-rf",
            "-p",
            "no:cacheprovider",
            # The project's own directory as the root: without these, pytest
            # would find this repository's configuration and conftest.py
            # above it, and import our Sonnet into the original's run.
            "-c",
            "setup.cfg",
            "--rootdir",
            ".",
            "--confcutdir",
            ".",
            *tests,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = result.stdout + result.stderr
    failed = set(re.findall(r"^FAILED (\S+)", log, flags=re.MULTILINE))
    passed = re.search(r"(\d+) passed", log)
    return failed, int(passed.group(1)) if passed else 0, log


def _assert_no_regressions(
    theirs: tuple[set[str], int, str], ours: tuple[set[str], int, str], minimum: int
) -> None:
    """Fails if a test that passed with the original (`theirs`, a `_pytest`
    result, at least `minimum` passing) failed with ours (`ours`)."""
    their_failed, their_passed, their_log = theirs
    our_failed, our_passed, our_log = ours
    assert their_passed >= minimum, their_log[-3000:]
    regressions = sorted(our_failed - their_failed)
    assert not regressions, (
        f"pass with Sonnet 2.0.2, fail with ours: {regressions}\n{our_log[-6000:]}"
    )
    assert our_passed >= their_passed, our_log[-3000:]


def _run(python: str) -> tuple[set[str], int, str]:
    """Runs graph_nets' TF2 suite with `python`: (failed ids, passed, log)."""
    return _pytest(python, SOURCES, _environment(SOURCES), SUITE)


def test_graph_nets_suite_passes_as_with_the_original():
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    python = original.original_python()
    assert python is not None
    # The suite runs hundreds of tests with the original.
    _assert_no_regressions(_run(python), _run(sys.executable), minimum=251)


def _acme_missing() -> str | None:
    if not (ACME / "acme" / "tf").is_dir():
        return f"acme's sources are not at {ACME} (run .ci/run)"
    if not (ACME_DEPENDENCIES / "tensorflow_probability").is_dir():
        return f"acme's dependencies are not at {ACME_DEPENDENCIES} (run .ci/run)"
    if importlib.util.find_spec("tree") is None:
        return "dm-tree is not installed here"
    python = original.original_python()
    if python is None:
        return original.missing_reason()
    return None


def _acme_environment() -> dict[str, str]:
    return _environment(ACME_DEPENDENCIES, ACME_STUBS, ACME)


def _acme_python(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, *args],
        cwd=ACME,
        env=_acme_environment(),
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_acme_tests_pass_as_with_the_original():
    reason = _acme_missing()
    if reason is not None:
        pytest.skip(reason)
    python = original.original_python()
    assert python is not None
    env = _acme_environment()
    _assert_no_regressions(
        _pytest(python, ACME, env, *ACME_TESTS),
        _pytest(sys.executable, ACME, env, *ACME_TESTS),
        minimum=25,
    )
    for test in ACME_ABSL_TESTS:
        their_run = _acme_python(python, test)
        assert their_run.returncode == 0, their_run.stderr[-3000:]
        our_run = _acme_python(sys.executable, test)
        assert our_run.returncode == 0, our_run.stderr[-6000:]


def test_acme_networks_compute_as_with_the_original():
    reason = _acme_missing()
    if reason is not None:
        pytest.skip(reason)
    python = original.original_python()
    assert python is not None
    their_run = _acme_python(python, str(ACME_NETWORKS))
    assert their_run.returncode == 0, their_run.stderr[-3000:]
    our_run = _acme_python(sys.executable, str(ACME_NETWORKS))
    assert our_run.returncode == 0, our_run.stderr[-6000:]
    theirs = their_run.stdout.splitlines()
    ours = our_run.stdout.splitlines()
    assert len(theirs) > 80, their_run.stdout[-3000:]
    assert not [line for line in theirs if ".error = " in line], theirs
    differences = [(a, b) for a, b in zip(theirs, ours, strict=False) if a != b] + (
        [("(lines)", f"{len(theirs)} vs {len(ours)}")]
        if len(theirs) != len(ours)
        else []
    )
    assert not differences, "\n".join(
        f"original: {a[:300]}\nours:     {b[:300]}" for a, b in differences
    )
