"""The registry covers every public `snt.Module` subclass."""

from __future__ import annotations

import types

import sonnet as snt
from tests.conformance.registry import CASES, NOT_REGISTERED


def _public_module_classes() -> set[type]:
    found: set[type] = set()
    seen: set[int] = set()

    def visit(module: types.ModuleType) -> None:
        if id(module) in seen:
            return
        seen.add(id(module))
        for name in dir(module):
            if name.startswith("_"):
                continue
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                # `sonnet.src` (2.0.2's internal paths, once imported) names
                # the same classes plus internals such as `ConvND`: not API.
                if (
                    value.__name__.startswith("sonnet")
                    and "_src" not in value.__name__
                    and value.__name__.split(".")[:2] != ["sonnet", "src"]
                ):
                    visit(value)
            elif isinstance(value, type) and issubclass(value, snt.Module):
                found.add(value)

    visit(snt)
    return found


def _key(cls: type) -> str:
    # Compared by qualified name, not identity: a test elsewhere in the same
    # worker may re-import a module and create fresh class objects.
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_public_module_is_registered():
    covered = {_key(case.cls) for case in CASES} | {_key(c) for c in NOT_REGISTERED}
    missing = sorted(
        c.__qualname__ for c in _public_module_classes() if _key(c) not in covered
    )
    assert not missing, f"public modules missing from the registry: {missing}"


def test_registered_classes_are_public():
    public = {_key(c) for c in _public_module_classes()}
    private = sorted(c.cls.__qualname__ for c in CASES if _key(c.cls) not in public)
    assert not private, f"registered classes that are not public: {private}"


def test_not_registered_only_lists_abstract_or_covered_bases():
    for cls, reason in NOT_REGISTERED.items():
        assert reason.strip(), f"{cls.__name__} needs a reason"
