"""`snt.Deferred`: build a module on first use instead of at construction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sonnet._src import base, errors


class Deferred(base.Module):
    """Defers constructing a target module until it is first used.

    The target is built by calling `constructor()` the first time the
    `target` property, `__call__`, or one of `call_methods` is used. It is
    built in the *caller's* name scope. Once built, reads and writes of public
    attributes this module does not have are forwarded to the target.

    Args:
      constructor: A no-argument callable returning the target module.
      call_methods: Names of target methods to expose on this module (in
        addition to `__call__`, which is always forwarded).
      name: Module name (default `deferred`).

    >>> m = snt.Deferred(lambda: snt.Linear(2))
    >>> m(tf.ones([1, 3])).shape
    TensorShape([1, 2])
    >>> m.target.w.shape
    TensorShape([3, 2])
    """

    def __init__(
        self,
        constructor: Callable[[], Any],
        call_methods: Sequence[str] = ("__call__",),
        name: str | None = None,
    ):
        if not callable(constructor):
            raise TypeError(
                "`constructor` must be a callable returning a module. "
                f"Received: {constructor!r}."
            )
        if isinstance(call_methods, str):
            raise TypeError(
                "`call_methods` must be a sequence of method names, not a string. "
                f"Received: {call_methods!r}."
            )
        if not isinstance(call_methods, Sequence) or not all(
            isinstance(m, str) and m.isidentifier() for m in call_methods
        ):
            raise errors.bad_type(
                "call_methods", "must be a sequence of method names", call_methods
            )
        super().__init__(name=name)
        self._constructor = constructor
        self._target = None
        for method_name in call_methods:
            if method_name == "__call__":
                continue
            vars(self)[method_name] = self._forwarder(method_name)

    def _forwarder(self, method_name: str) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            return getattr(self.target, method_name)(*args, **kwargs)

        forward.__name__ = method_name
        return forward

    @property
    @base.no_name_scope
    def target(self) -> Any:
        """The target module, built on first access."""
        if self._target is None:
            constructor = self._constructor
            assert constructor is not None
            # Drop the constructor before `_target` is set: from then on attribute
            # writes are forwarded to the target.
            self._constructor = None
            self._target = constructor()
        return self._target

    @base.no_name_scope
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target(*args, **kwargs)

    def __str__(self) -> str:
        return f"Deferred({self.target})"

    def __repr__(self) -> str:
        return f"Deferred({self.target!r})"

    def __getattr__(self, name: str) -> Any:
        # Private names are never forwarded: TensorFlow's tracking machinery
        # probes lazily created `_...` attributes that must describe this module.
        if not name.startswith("_") and self.__dict__.get("_target") is not None:
            return getattr(self._target, name)
        raise AttributeError(f"'Deferred' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and self.__dict__.get("_target") is not None:
            setattr(self._target, name, value)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if not name.startswith("_") and self.__dict__.get("_target") is not None:
            delattr(self._target, name)
        else:
            super().__delattr__(name)
