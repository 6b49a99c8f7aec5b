"""Builds the HTML API reference of the public `sonnet` namespaces with pdoc.

Run through `docs/build.sh` (CI does). Offline: pdoc renders the docstrings of
the imported package, nothing is fetched. The build fails, listing every
problem, if

- pdoc warns (a module fails to import, an annotation or a docstring cannot be
  processed), or
- an `Args:` section documents a parameter that the signature does not have
  (a renamed or removed argument whose documentation was left behind).

Only the public facades are documented (`sonnet`, `sonnet.nets`,
`sonnet.optimizers`, ...); `sonnet._src` is excluded.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pdoc
import pdoc.doc
import pdoc.render

# Imported here, not by pdoc: TensorFlow runs subprocesses at import time,
# which pdoc's own importer forbids.
import sonnet

ROOT = Path(__file__).resolve().parent.parent
# pdoc finds the submodules of `sonnet` named in its `__all__`; as in the
# original, `mixed_precision` is public but not in `__all__`, so it is named here.
PUBLIC = ("sonnet", "sonnet.mixed_precision")

_ARG_LINE = re.compile(r"^(\s*)(\*{0,2}[A-Za-z_]\w*)\s*(?:\([^)]*\))?:")


def documented_args(docstring: str) -> list[str]:
    """The parameter names listed in a Google-style `Args:` section."""
    names: list[str] = []
    lines = docstring.splitlines()
    for i, line in enumerate(lines):
        if line.strip() not in ("Args:", "Arguments:"):
            continue
        section_indent = len(line) - len(line.lstrip())
        item_indent = None
        for item in lines[i + 1 :]:
            if not item.strip():
                continue
            indent = len(item) - len(item.lstrip())
            if indent <= section_indent:
                break
            if item_indent is None:
                item_indent = indent
            match = _ARG_LINE.match(item)
            if indent == item_indent and match:
                names.append(match.group(2).lstrip("*"))
    return names


def stale_args(obj: object, signature_of: object, where: str) -> list[str]:
    # The object's own docstring: `inspect.getdoc` would fall back to the
    # documentation of an overridden method, written for another signature.
    doc = inspect.cleandoc(getattr(obj, "__doc__", None) or "")
    try:
        parameters = inspect.signature(signature_of).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return []  # Extra keywords may be documented one by one.
    return [
        f"{where}: `Args:` documents `{name}`, which is not a parameter"
        for name in documented_args(doc)
        if name not in parameters
    ]


def check_args(module: pdoc.doc.Module) -> list[str]:
    problems = []
    for member in module.members.values():
        if isinstance(member, pdoc.doc.Function):
            problems += stale_args(member.obj, member.obj, member.fullname)
        elif isinstance(member, pdoc.doc.Class):
            # Constructor arguments are documented in the class docstring.
            init = member.obj.__init__
            problems += stale_args(member.obj, init, member.fullname)
            for method in member.own_members:
                public = not method.name.startswith("_") or method.name in (
                    "__init__",
                    "__call__",
                )
                if isinstance(method, pdoc.doc.Function) and public:
                    problems += stale_args(method.obj, method.obj, method.fullname)
    return problems


def is_namedtuple_constructor_warning(message: str) -> bool:
    """pdoc's complaint about the annotations of a `NamedTuple`'s constructor.

    Python generates that constructor in a namespace of its own, where pdoc
    cannot resolve annotations written as strings (`from __future__ import
    annotations`); the class's own annotations, which pdoc shows, are fine.
    """
    match = re.match(r"Error parsing type annotation .* for (\S+)\.__init__\.", message)
    if not match:
        return False
    module_name, _, qualname = match.group(1).rpartition(".")
    cls = getattr(sys.modules.get(module_name), qualname, None)
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "_build"))
    args = parser.parse_args()

    pdoc.render.configure(
        docformat="google",
        footer_text=f"sonnet {sonnet.__version__}",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*PUBLIC, "!sonnet._src", output_directory=Path(args.output))
        modules = [
            pdoc.doc.Module(sys.modules[name])
            for name in sorted(sys.modules)
            if (name == "sonnet" or name.startswith("sonnet."))
            and not name.startswith("sonnet._src")
        ]
        problems = [p for m in modules for p in check_args(m)]

    pdoc_dir = os.path.dirname(pdoc.__file__)
    problems += [
        f"pdoc: {w.message}"
        for w in caught
        if issubclass(w.category, UserWarning)
        and w.filename.startswith(pdoc_dir)
        and not is_namedtuple_constructor_warning(str(w.message))
    ]
    problems = list(dict.fromkeys(problems))
    if problems:
        print(f"API reference: {len(problems)} problem(s):", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(f"API reference written to {args.output}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
