"""Every public symbol has a docstring with a runnable `>>>` example.

The examples themselves run as doctests (`--doctest-modules` over `sonnet/`).
"""

from __future__ import annotations

import inspect
import types

import pytest

import sonnet as snt

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
