"""Every public symbol has a docstring with a runnable `>>>` example.

The examples themselves run as doctests (`--doctest-modules` over `sonnet/`),
and once more under the plain `doctest` runner (see
`test_examples_pass_under_plain_doctest`).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import types

import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import mixed_precision

FACADES = [
    "",
    "nets",
    "nets.resnet",
    "optimizers",
    "optimizers.schedules",
    "initializers",
    "regularizers",
    "distribute",
    "mixed_precision",
    "pad",
    "precision",
    "functional",
    "lora",
    "int8",
    "hf",
    "spectral_norm",
    "weight_norm",
    "surgery",
]


def _facade(path: str) -> types.ModuleType:
    obj = snt
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part)
    return obj


def _public_symbols() -> list[tuple[str, object]]:
    found = []
    for path in FACADES:
        module = _facade(path)
        names = getattr(module, "__all__", [])
        for name in names:
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                continue
            found.append((f"{path}.{name}".lstrip("."), obj))
    return found


SYMBOLS = _public_symbols()


@pytest.mark.parametrize("name, obj", SYMBOLS, ids=[n for n, _ in SYMBOLS])
def test_public_docstring_has_example(name, obj):
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"{name} has no docstring"
    assert ">>>" in doc, f"{name}'s docstring has no runnable example"


def test_all_names_resolve():
    for path in FACADES:
        module = _facade(path)
        for name in getattr(module, "__all__", []):
            assert hasattr(module, name), f"{path}.{name} in __all__ but missing"


def _global_state() -> tuple[object, ...]:
    """Process-wide settings that an example may change but must restore."""
    # With an op seed given, `get_seed` reads the global seed without drawing
    # from the op-seed sequence.
    return (
        mixed_precision.current_mode(),
        tf.config.functions_run_eagerly(),
        tf.compat.v1.get_seed(0)[0],
    )


def test_examples_pass_under_plain_doctest():
    """Every example passes under the stdlib runner, as the original's did.

    The original Sonnet's harness runs `doctest` with `ELLIPSIS |
    NORMALIZE_WHITESPACE` and the globals `snt` and `tf`. pytest's run adds the
    defining module's globals, so here each docstring gets a fresh copy of
    `{snt, tf}` only: an example imports whatever else it uses (NumPy, a
    private helper) and rounds or formats the floats it prints.
    """
    names = ["sonnet"]
    names += [info.name for info in pkgutil.walk_packages(snt.__path__, "sonnet.")]
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    report: list[str] = []
    failed: list[str] = []
    changed_state: list[str] = []
    for name in names:
        module = importlib.import_module(name)
        for test in finder.find(module, name, globs={"snt": snt, "tf": tf}):
            before = _global_state()
            if runner.run(test, out=report.append).failed:
                failed.append(test.name)
            if _global_state() != before:
                changed_state.append(test.name)
    assert runner.tries > 300, f"only {runner.tries} examples found"
    assert not failed, (
        f"{len(failed)} docstrings fail under plain doctest: {failed}\n"
        + "".join(report)
    )
    assert not changed_state, f"examples left global state changed: {changed_state}"
