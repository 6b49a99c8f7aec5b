"""Known differences from Sonnet 2.0.2, one entry per scenario id.

`ALLOWED`: deliberate improvements, each with a comment. A kind is one of

- `"garbage"`: the original accepts and returns a silently wrong result (say
  which); we raise a clean `ValueError` or `TypeError`.
- `"crash"`: the original's process dies inside a TensorFlow kernel; we raise
  a clean `ValueError` or `TypeError`.
- `"fixed"`: the original accepts and returns a silently wrong result (say
  which); we return the right one.
- `"private"`: the original raised a private class of another library
  (e.g. NumPy's `_UFuncNoLoopError`); ours is an instance of its nearest
  public base (e.g. `TypeError`).
- `"lenient"`: the original rejects (or crashes on) a spelling whose meaning
  is clear, e.g. a NumPy integer axis; we accept it and return the evident
  result. Each also has a line in the README migration notes.

Entries live in one file per family, `allowed_<family>.py` (a dict
`ALLOWED`), merged here.

Where both reject no entry is needed: our exception must simply be an
instance of the original's class (so a clean error for an input on which a
TF op failed is `sonnet._src.errors.InvalidArgumentError`). An entry that no
longer matches a real difference fails its test, so the list stays current.

`XFAIL` (in `xfail.py`): real differences being fixed (the original accepts
and we reject; both reject with an exception of another class; results
differ). `XFAIL_LENIENT`: we accept what the original rejects; each needs a
decision (reject like the original, or a deliberate `ALLOWED`-style entry and
a migration note). Both run as `xfail(strict=True)`, so a fix turns the entry
into a failure until it is removed. Never move an entry to `ALLOWED` because
it is hard to fix.
"""

from __future__ import annotations

import importlib
import pkgutil

import tests.differential as _package
from tests.differential.xfail import XFAIL, XFAIL_LENIENT

ALLOWED: dict[str, tuple[str, str]] = {}
for _info in sorted(pkgutil.iter_modules(_package.__path__), key=lambda i: i.name):
    if _info.name.startswith("allowed_"):
        _module = importlib.import_module(f"{_package.__name__}.{_info.name}")
        _overlap = set(ALLOWED) & set(_module.ALLOWED)
        assert not _overlap, f"scenarios allowed twice: {sorted(_overlap)}"
        ALLOWED.update(_module.ALLOWED)

__all__ = ["ALLOWED", "XFAIL", "XFAIL_LENIENT"]
