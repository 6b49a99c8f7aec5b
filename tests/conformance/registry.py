"""Registry of every public Sonnet module, used by the conformance suites.

Each family adds a file `tests/conformance/entries/<family>.py` that defines:

* `CASES`: a list of `Case`s (one or more per public module class);
* `NOT_REGISTERED`: a dict `{class: reason}` for public classes that cannot be
  instantiated on their own (abstract bases) and are covered through others.

This module collects them; the suites in `test_conformance.py` run over them.
"""

from __future__ import annotations

import importlib
import pkgutil

from tests.conformance import entries as _entries_pkg
from tests.conformance.case import Case


def _load() -> tuple[list[Case], dict[type, str]]:
    cases: list[Case] = []
    not_registered: dict[type, str] = {}
    for info in sorted(
        pkgutil.iter_modules(_entries_pkg.__path__), key=lambda i: i.name
    ):
        mod = importlib.import_module(f"{_entries_pkg.__name__}.{info.name}")
        assert hasattr(mod, "CASES") or hasattr(mod, "NOT_REGISTERED"), (
            f"{mod.__name__} defines neither CASES nor NOT_REGISTERED (half-loaded?)"
        )
        cases.extend(getattr(mod, "CASES", []))
        not_registered.update(getattr(mod, "NOT_REGISTERED", {}))
    ids = [c.id for c in cases]
    duplicates = {i for i in ids if ids.count(i) > 1}
    assert not duplicates, f"duplicate case ids: {sorted(duplicates)}"
    return cases, not_registered


__all__ = ["CASES", "NOT_REGISTERED", "Case"]

CASES, NOT_REGISTERED = _load()
