"""Differential suite: the same scenarios against Sonnet 2.0.2 and against us.

How it works:

- `scenarios_*.py` files each define `register(h)`, which adds scenarios to
  `h` (a `harness.Registry`). A scenario is a function without arguments
  that builds modules, calls them and returns what should be compared. The
  files import only `sonnet as snt`, `tensorflow`, `numpy` (and `wrapt`),
  because the original's interpreter runs them too.
- `h.grid` / `h.module_grid` generate one scenario per spelling of each
  argument (`h.ints`, `h.floats`, `h.bools`, `h.shapes`, `h.inputs`, ...:
  ints as NumPy scalars, 0-d arrays, tensors, whole floats, lists, None, and
  invalid values), plus `tf.function` modes.
- The original runs as one background process (`original.py`, cached per
  content of the scenario files); our side runs each scenario in this pytest
  process. Each scenario is one test id, `<file>/<scenario>`.
- A test passes when both accept with equal results (values within rtol
  1e-4 / atol 1e-5, variable names, shapes and dtypes, module names), or
  both reject and our exception is an instance of the original's class.
  `expectations.py` lists deliberate improvements (`ALLOWED`) and real
  differences being fixed (`XFAIL`, strict).

Run: `python -m pytest tests/differential -q -p no:xdist` (needs the second
environment: `.ci-orig-venv`, or `SONNET_ORIGINAL_PYTHON=/path/to/python`;
without it the suite is skipped). `python -m tests.differential.original`
precomputes the original's results.

To add a scenario, add a function to a `register(h)` (`@h.scenario("id")`),
or a grid; give random outputs as `h.Spec(x)`; run the suite; a difference
that is a bug of ours goes to `XFAIL` with `issue 12:` and a reason.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.differential import expectations, harness, original

SCENARIO_MODULES = [
    importlib.import_module(f"tests.differential.{path.stem}")
    for path in original.scenario_files()
]
SCENARIOS = harness.collect(SCENARIO_MODULES)
CLEAN_ERRORS = ("ValueError", "TypeError")
# Bases too general to stand for the original's exception class.
_NOT_SPECIFIC = ("Exception", "BaseException")


def _params() -> list[Any]:
    params = []
    for sid in SCENARIOS:
        marks = []
        reason = expectations.XFAIL.get(sid) or expectations.XFAIL_LENIENT.get(sid)
        if reason:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        params.append(pytest.param(sid, id=sid, marks=marks))
    return params


def _describe(record: dict[str, Any]) -> str:
    if record["status"] == "ok":
        return "accepts"
    if record["status"] == "crashed":
        return f"crashes (process exit {record.get('rc')})"
    return f"raises {record['message']}"


def differences(orig: dict[str, Any], ours: dict[str, Any], sid: str) -> list[str]:
    """Why our record does not match the original's (empty: it does)."""
    allowance = expectations.ALLOWED.get(sid)
    o, u = orig["status"], ours["status"]
    if allowance is not None:
        kind, reason = allowance
        if kind == "fixed":
            if o == u == "ok" and harness.diff_values(orig["value"], ours["value"]):
                return []
            return [f"stale ALLOWED entry ({kind}: {reason}): results now agree"]
        if kind == "lenient":
            if o in ("error", "crashed") and u == "ok":
                return []
            return [
                f"stale ALLOWED entry ({kind}: {reason}): original {_describe(orig)}"
            ]
        if kind == "private":
            public = [c for c in orig["mro"][1:] if c not in _NOT_SPECIFIC]
            if o == u == "error" and any(c in ours["mro"] for c in public):
                return []
            return [f"allowed ({kind}: {reason}) only with {public[:1]}"]
        expected_orig = {"garbage": "ok", "crash": "crashed"}[kind]
        if o == expected_orig and u == "error":
            if any(c in ours["mro"] for c in CLEAN_ERRORS):
                return []
            return [f"allowed ({kind}: {reason}) only with ValueError/TypeError"]
        return [f"stale ALLOWED entry ({kind}: {reason}): original {_describe(orig)}"]
    if o == "ok" and u == "ok":
        return harness.diff_values(orig["value"], ours["value"])
    if o == "error" and u == "error":
        if orig["mro"][0] in ours["mro"]:
            return []
        return [f"exception class: ours is not an instance of {orig['mro'][0]}"]
    return ["acceptance differs"]


@pytest.mark.parametrize("sid", _params())
def test_scenario(sid: str, original_results: original.OriginalResults) -> None:
    orig = original_results.get(sid)
    ours = harness.run_one(SCENARIOS[sid])
    problems = differences(orig, ours, sid)
    if problems:
        lines = [
            f"scenario {sid}",
            f"  original (2.0.2): {_describe(orig)}",
            f"  ours:             {_describe(ours)}",
            *(f"  - {p}" for p in problems[:20]),
        ]
        if ours["status"] == "error":
            lines.append(ours["traceback"])
        pytest.fail("\n".join(lines), pytrace=False)
