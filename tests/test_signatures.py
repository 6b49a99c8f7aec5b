"""`inspect.signature`, `help()` and IDEs see the constructors' parameters."""

from __future__ import annotations

import inspect
import pydoc
import types

import pytest

import sonnet as snt
from sonnet._src import base


def _public_classes() -> dict[str, type]:
    """Every class exported by the `snt` namespaces, by public name."""
    found: dict[str, type] = {}
    queue: list[tuple[str, types.ModuleType]] = [("snt", snt)]
    seen: set[str] = set()
    while queue:
        prefix, namespace = queue.pop(0)
        if namespace.__name__ in seen:
            continue
        seen.add(namespace.__name__)
        for name in namespace.__all__:
            value = getattr(namespace, name)
            if isinstance(value, types.ModuleType):
                queue.append((f"{prefix}.{name}", value))
            elif isinstance(value, type):
                found.setdefault(f"{prefix}.{name}", value)
    return found


_CLASSES = _public_classes()
# What `inspect.signature(snt.Linear)` used to show: the metaclass's call.
_METACLASS_CALL = inspect.signature(base.ModuleMetaclass.__call__).replace(
    parameters=list(
        inspect.signature(base.ModuleMetaclass.__call__).parameters.values()
    )[1:]
)


def _constructor(cls: type) -> inspect.Signature:
    signature = inspect.signature(cls.__init__)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def test_every_module_class_is_checked():
    modules = [n for n, c in _CLASSES.items() if issubclass(c, snt.Module)]
    assert len(modules) > 50
    assert {"snt.Linear", "snt.nets.MLP", "snt.optimizers.Adam"} <= set(modules)


@pytest.mark.parametrize("name", sorted(_CLASSES))
def test_signature_is_the_constructors(name):
    cls = _CLASSES[name]
    signature = inspect.signature(cls)
    assert signature != _METACLASS_CALL
    if cls.__init__ is not object.__init__:  # NamedTuples: their fields.
        assert signature == _constructor(cls)


def test_linear_signature_in_full():
    assert str(inspect.signature(snt.Linear)) == (
        "(output_size: 'int', with_bias: 'bool' = True, "
        "w_init: 'Initializer | None' = None, b_init: 'Initializer | None' = None, "
        "name: 'str | None' = None)"
    )


def test_help_shows_the_constructor():
    text = pydoc.render_doc(snt.Linear, renderer=pydoc.plaintext)
    assert "Linear(output_size: 'int', with_bias: 'bool' = True" in text


def test_instances_keep_the_signature_of_their_call():
    assert list(inspect.signature(snt.Linear(2)).parameters) == ["inputs"]
    assert "is_training" in inspect.signature(snt.BatchNorm(True, True)).parameters


def test_user_subclasses():
    class Scale(snt.Module):
        def __init__(self, factor: float, *, name: str | None = None):
            super().__init__(name=name)
            self.factor = factor

        def __call__(self, x):
            return x * self.factor

    class Doubler(Scale):  # Inherits the constructor.
        pass

    expected = "(factor: 'float', *, name: 'str | None' = None)"
    assert str(inspect.signature(Scale)) == expected
    assert str(inspect.signature(Doubler)) == expected
    assert list(inspect.signature(Scale(2.0)).parameters) == ["x"]


def test_a_signature_set_in_the_class_body_wins():
    declared = inspect.Signature([inspect.Parameter("size", 1)])

    class Declared(snt.Module):
        __signature__ = declared

        def __init__(self, *args, **kwargs):
            super().__init__()

    assert inspect.signature(Declared) is declared


def test_computed_once_per_class():
    assert inspect.signature(snt.Linear) is inspect.signature(snt.Linear)


def test_uninspectable_constructor_falls_back():
    # `min` has no signature that `inspect` can read.
    assert base._constructor_signature(type("Odd", (), {"__init__": min})) is None
