"""Known differences from Sonnet 2.0.2, one entry per scenario id.

`ALLOWED`: deliberate improvements, each with a comment. A kind is one of

- `"garbage"`: the original accepts and returns a silently wrong result (say
  which); we raise a clean `ValueError` or `TypeError`.
- `"crash"`: the original's process dies inside a TensorFlow kernel; we raise
  a clean `ValueError` or `TypeError`.
- `"fixed"`: the original accepts and returns a silently wrong result (say
  which); we return the right one.

Where both reject no entry is needed: our exception must simply be an
instance of the original's class (so a clean error for an input on which a
TF op failed is `sonnet._src.checks.InvalidArgumentError`). An entry that no
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

from tests.differential.xfail import XFAIL, XFAIL_LENIENT

ALLOWED: dict[str, tuple[str, str]] = {
    # The original iterates `layers` twice, so a generator gives a DeepRNN
    # without layers (outputs = inputs); we keep the layers.
    "recurrent/DeepRNN(layers=generator)": ("fixed", "generator layers dropped"),
}

__all__ = ["ALLOWED", "XFAIL", "XFAIL_LENIENT"]
