"""The checks of the API-reference build (`docs/build.py`), on small examples.

The build itself (pdoc over the whole package) runs in CI via `docs/build.sh`.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import NamedTuple

import pytest

pytest.importorskip("pdoc")
import pdoc.doc

ROOT = Path(__file__).resolve().parent.parent


def _load_build() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_docs_build", ROOT / "docs" / "build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build()


def test_documented_args_reads_only_the_args_section():
    doc = """Summary.

    Args:
      inputs: A tensor.
        more_text: not a parameter (deeper indentation).
      w_init (Initializer): typed entry.
      *args: rest.
      **kwargs: keywords.

    Returns:
      outputs: not a parameter.
    """
    assert build.documented_args(doc) == ["inputs", "w_init", "args", "kwargs"]


def test_stale_args_names_the_missing_parameter():
    def f(inputs, is_training):
        """F.

        Args:
          inputs: x.
          training: renamed long ago.
        """

    assert build.stale_args(f, f, "f") == [
        "f: `Args:` documents `training`, which is not a parameter"
    ]


def test_stale_args_accepts_matching_and_keyword_catch_alls():
    def f(a, *args, b=1):
        """F.

        Args:
          a: x.
          *args: y.
          b: z.
        """

    def g(a, **kwargs):
        """G.

        Args:
          a: x.
          anything: forwarded through `**kwargs`.
        """

    assert build.stale_args(f, f, "f") == []
    assert build.stale_args(g, g, "g") == []


def test_check_args_covers_classes_and_their_public_methods(tmp_path, monkeypatch):
    source = '''
"""A module."""


class Layer:
    """A layer.

    Args:
      size: the size.
      gone: no longer an argument.
    """

    def __init__(self, size):
        self.size = size

    def __call__(self, inputs):
        """Call.

        Args:
          input: misspelled.
        """

    def _private(self, x):
        """Not documented publicly.

        Args:
          y: not checked.
        """


def helper(x):
    """Helper.

    Args:
      x: fine.
    """
'''
    (tmp_path / "docs_build_sample.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import docs_build_sample  # type: ignore[import-not-found]

        problems = build.check_args(pdoc.doc.Module(docs_build_sample))
    finally:
        sys.modules.pop("docs_build_sample", None)
    assert problems == [
        "docs_build_sample.Layer: `Args:` documents `gone`, which is not a parameter",
        "docs_build_sample.Layer.__call__: `Args:` documents `input`, which is not a "
        "parameter",
    ]


class _Pair(NamedTuple):
    left: int
    right: int


def test_namedtuple_constructor_warnings_are_recognised():
    about_pair = (
        f"Error parsing type annotation ForwardRef('Any') for {__name__}._Pair"
        ".__init__. Import of Any failed: name 'Any' is not defined"
    )
    assert build.is_namedtuple_constructor_warning(about_pair)
    about_function = about_pair.replace("_Pair.__init__", "test_docs_build_x.__init__")
    assert not build.is_namedtuple_constructor_warning(about_function)
    assert not build.is_namedtuple_constructor_warning("Couldn't import sonnet.nets")
