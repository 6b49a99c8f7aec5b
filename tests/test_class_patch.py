"""Tests for `class_patch.ClassPatch`, the one class-patching mechanism."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sonnet._src import class_patch


class Base:
    def greet(self) -> str:
        return "base"


class Child(Base):
    pass


@pytest.fixture
def patch() -> class_patch.ClassPatch:
    """A patch whose replacement shouts only in threads inside a scope."""

    def replace(cls: type, name: str, original: Any) -> Any:
        inherited = original or getattr(cls.__mro__[1], name)

        def greet(self: Any) -> str:
            value = patch.current()
            text = inherited(self)
            return text if value is None else f"{text.upper()}{value}"

        return greet

    patch = class_patch.ClassPatch(replace)
    return patch


def test_replaces_while_open_and_restores_own_attribute(patch):
    original = Base.__dict__["greet"]
    with patch.scope(lambda: [(Base, "greet")], "!") as value:
        assert value == "!"
        assert Base().greet() == "BASE!"
        assert patch.replaced == ((Base, "greet"),)
        assert patch.original(Base, "greet") is original
    assert Base.__dict__["greet"] is original
    assert patch.replaced == ()


def test_restores_by_removing_an_attribute_the_class_did_not_have(patch):
    with patch.scope(lambda: [(Child, "greet")]):
        assert "greet" in Child.__dict__
        assert patch.original(Child, "greet") is None
        assert Child().greet() == "BASETrue"
    assert "greet" not in Child.__dict__
    assert Child().greet() == "base"


def test_nested_scopes_count_and_the_innermost_value_is_current(patch):
    replaced = []

    def targets():
        replaced.append(1)
        return [(Base, "greet")]

    with patch.scope(targets, "!"):
        patched = Base.__dict__["greet"]
        with patch.scope(targets, "?"):
            # Replaced once: the second scope only counts.
            assert Base.__dict__["greet"] is patched
            assert Base().greet() == "BASE?"
            assert patch.values == ("!", "?")
        assert Base.__dict__["greet"] is patched
        assert Base().greet() == "BASE!"
        assert patch.values == ("!",)
    assert Base().greet() == "base"
    assert patch.values == ()
    assert len(replaced) == 2


def test_restores_after_an_error_in_the_scope(patch):
    original = Base.__dict__["greet"]
    with pytest.raises(KeyError, match="inside"):
        with patch.scope(lambda: [(Base, "greet")]):
            with patch.scope(lambda: [(Base, "greet"), (Child, "greet")]):
                raise KeyError("inside")
    assert Base.__dict__["greet"] is original
    assert "greet" not in Child.__dict__
    assert patch.current() is None
    assert patch.values == ()


def test_a_scope_failing_to_open_restores_what_it_replaced(patch):
    original = Base.__dict__["greet"]

    def targets():
        yield (Base, "greet")
        yield (Child, "greet")
        raise ValueError("no more")

    with pytest.raises(ValueError, match="no more"):
        with patch.scope(targets):
            pass  # pragma: no cover - never entered
    assert Base.__dict__["greet"] is original
    assert "greet" not in Child.__dict__
    assert patch.values == ()


def test_a_scope_is_single_use(patch):
    scope = patch.scope(lambda: [(Base, "greet")])
    with scope:
        pass
    with pytest.raises(RuntimeError, match="only once"):
        scope.__enter__()
    assert Base().greet() == "base"


def test_other_threads_see_the_class_but_not_the_scope(patch):
    opened = threading.Event()
    done = threading.Event()
    seen: dict[str, Any] = {}

    def other() -> None:
        opened.wait()
        seen["greet"] = Base().greet()
        seen["current"] = patch.current()
        seen["values"] = patch.values
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with patch.scope(lambda: [(Base, "greet")], "!"):
        opened.set()
        done.wait()
        assert Base().greet() == "BASE!"
    thread.join()
    # Replaced for every thread, acting only in the scope's own.
    assert seen == {"greet": "base", "current": None, "values": ("!",)}


def test_overlapping_scopes_in_two_threads_restore_when_the_last_closes(patch):
    original = Base.__dict__["greet"]
    first_open = threading.Event()
    first_closed = threading.Event()
    seen: list[str] = []

    def first() -> None:
        with patch.scope(lambda: [(Base, "greet")], "1"):
            first_open.set()
            second_open.wait()
        first_closed.set()

    second_open = threading.Event()
    thread = threading.Thread(target=first)
    thread.start()
    first_open.wait()
    with patch.scope(lambda: [(Base, "greet")], "2"):
        second_open.set()
        first_closed.wait()
        # The other thread's scope closed; this one still holds the patch.
        seen.append(Base().greet())
    thread.join()
    assert seen == ["BASE2"]
    assert Base.__dict__["greet"] is original
