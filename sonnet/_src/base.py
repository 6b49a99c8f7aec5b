"""`snt.Module`: a `tf.Module` whose methods run inside the module's name scope."""

from __future__ import annotations

import abc
import functools
import inspect
import os
import pprint
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import tensorflow as tf

from sonnet._src import eager_init, tf_compat, variable_walk

T = TypeVar("T")

_WITH_NAME_SCOPE = "__snt_with_name_scope"
_ALLOW_EMPTY = "__snt_allow_empty_result"
_SUPER_CTOR_MESSAGE = (
    "The super constructor must be called before any other methods in your "
    "constructor. If this is not possible then annotate all the methods called "
    "with `@snt.no_name_scope`."
)
_MAX_REPR_LINE = 80


def no_name_scope(method: T) -> T:
    """Marks a method so that it does *not* run inside the module's name scope.

    Works on `__init__` (then the constructor body runs in the caller's scope),
    on ordinary methods and on property getters/setters (apply it below
    `@property`). Use it for methods that must be called before
    `super().__init__()` or for hot methods that never create variables.

    Args:
      method: The function to mark.

    Returns:
      `method` itself.

    >>> class Stateless(snt.Module):
    ...   @snt.no_name_scope
    ...   def __call__(self, x):
    ...     return x * 2
    >>> Stateless()(3)
    6
    """
    setattr(method, _WITH_NAME_SCOPE, False)
    return method


def allow_empty_variables(module_or_cls: T) -> T:
    """Lets `variables`/`trainable_variables` return `()` instead of raising.

    Usable on an instance or as a class decorator.

    Args:
      module_or_cls: A module instance or a module class.

    Returns:
      `module_or_cls` itself.

    >>> snt.allow_empty_variables(snt.Module()).variables
    ()
    """
    setattr(module_or_cls, _ALLOW_EMPTY, True)
    return module_or_cls


def _wants_name_scope(f: Any) -> bool:
    return getattr(f, _WITH_NAME_SCOPE, True)


def with_name_scope(method: Callable[..., T]) -> Callable[..., T]:
    """Wraps `method` so that each call runs inside `self.name_scope`."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> T:
        try:
            scope = self.name_scope
        except AttributeError as e:
            raise AttributeError(_SUPER_CTOR_MESSAGE) from e
        with scope:
            return method(self, *args, **kwargs)

    return wrapper


def _bound_with_name_scope(method: Any) -> Callable[..., Any]:
    """`with_name_scope` for a method that is a descriptor but not a plain
    function, e.g. one decorated with `wrapt.decorator`: it is bound to the
    instance (`method.__get__(self, cls)`) on each call, so that the decorator
    sees the instance it is called on."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            scope = self.name_scope
        except AttributeError as e:
            raise AttributeError(_SUPER_CTOR_MESSAGE) from e
        with scope:
            return method.__get__(self, type(self))(*args, **kwargs)

    return wrapper


def _traced_with_name_scope(method: Callable[..., T]) -> Callable[..., T]:
    # Inside a traced `tf.function` AutoGraph cannot convert try/except, so the
    # scope lookup is not guarded here.
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> T:
        with self.name_scope:
            return method(self, *args, **kwargs)

    return wrapper


def _scopes_enabled() -> bool:
    flag = os.environ.get("SNT_MODULE_NAME_SCOPES", "1").lower()
    return flag not in ("0", "false")


def _wrap_property(prop: property) -> property:
    def wrap(f: Any) -> Any:
        if f is None or not _wants_name_scope(f):
            return f
        return with_name_scope(f)

    return property(wrap(prop.fget), wrap(prop.fset), wrap(prop.fdel), prop.__doc__)


_ARGSPECS: dict[type, inspect.FullArgSpec] = {}
_SIGNATURE = "_snt_signature"


def _constructor_signature(cls: type) -> inspect.Signature | None:
    """`cls.__init__`'s signature without `self`: what `inspect.signature`
    gives for a class whose metaclass has no `__call__` of its own."""
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):  # E.g. a C-implemented `__init__`.
        return None
    parameters = list(signature.parameters.values())[1:]
    return signature.replace(parameters=parameters)


def _argspec(cls: type) -> inspect.FullArgSpec:
    spec = _ARGSPECS.get(cls)
    if spec is None:
        init = cls.__init__
        init = getattr(init, "__wrapped__", init)
        spec = inspect.getfullargspec(init)
        _ARGSPECS[cls] = spec
    return spec


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # Arrays, tensors and odd `__eq__`s count as different.
        return False


def auto_repr(cls: type, *args: Any, **kwargs: Any) -> str:
    """The `repr` of the constructor call `cls(*args, **kwargs)`.

    Arguments equal to their defaults are left out; a line longer than 80
    characters is split into one argument per line.

    >>> from sonnet._src.base import auto_repr
    >>> auto_repr(snt.Linear, 3, name="lin")
    "Linear(output_size=3, name='lin')"
    """
    spec = _argspec(cls)
    names = spec.args[1:]
    defaults = dict(
        zip(names[len(names) - len(spec.defaults or ()) :], spec.defaults or ())
    )
    if spec.kwonlydefaults:
        defaults.update(spec.kwonlydefaults)
    named: list[tuple[str | None, Any]] = []
    for name, value in zip(names, args):
        named.append((name, value))
    extra_args = args[len(names) :]
    for name in names + list(spec.kwonlyargs):
        if name in kwargs:
            named.append((name, kwargs[name]))
    named = [(n, v) for n, v in named if not (n in defaults and _same(v, defaults[n]))]
    named.extend((None, v) for v in extra_args)
    known = set(names) | set(spec.kwonlyargs)
    named.extend((k, v) for k, v in kwargs.items() if k not in known)

    parts = [repr(v) if n is None else f"{n}={v!r}" for n, v in named]
    line = f"{cls.__name__}({', '.join(parts)})"
    if len(line) <= _MAX_REPR_LINE:
        return line
    lines = []
    for n, v in named:
        if n is None:
            lines.append("    " + pprint.pformat(v).replace("\n", "\n    "))
        else:
            indent = " " * (4 + len(n) + 1)
            text = pprint.pformat(v).replace("\n", "\n" + indent)
            lines.append(f"    {n}={text}")
    return f"{cls.__name__}(\n" + ",\n".join(lines) + ",\n)"


# The constructor call of every module is recorded once, when the
# constructor returns (`_record_call`): as the `repr` text (all arguments as
# given, the original's format) and as the arguments themselves, kept by
# reference for `snt.KerasLayer.get_config` (`module_config` describes a
# module by them), except values that could be large or single-use.


class Dropped:
    """Stands in a recorded constructor call for an argument not kept (e.g. an
    array)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


_PLAIN = frozenset({type(None), bool, int, float, str})
# Values of these types are not kept: they can be large (the module holds
# what it needs of them) or used up (iterators), so keeping them could cost
# memory or break pickling and deep copies of the module.
_NOT_KEPT = (np.ndarray, tf.Tensor, tf.Variable, Iterator)


def _keep(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list or kind is tuple:
        return kind(_keep(v) for v in value)
    if kind is dict:
        return {k: _keep(v) for k, v in value.items()}
    if issubclass(kind, _NOT_KEPT):
        return Dropped(f"{kind.__module__}.{kind.__qualname__}")
    return value


def _kept_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The constructor call `(args, kwargs)` as kept on the module."""
    return tuple(map(_keep, args)), {k: _keep(v) for k, v in kwargs.items()}


def _record_call(
    obj: Any, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Records the constructor call of `obj`: its `repr` and its arguments."""
    state = vars(obj)
    state["_auto_repr"] = auto_repr(cls, *args, **kwargs)
    state["_snt_call"] = _kept_call(args, kwargs)


def _auto_repr(self: Any) -> str:
    """The `repr` stored by the constructor (a default one until it returns)."""
    text = getattr(self, "_auto_repr", None)
    return object.__repr__(self) if text is None else text


class ModuleMetaclass(abc.ABCMeta):
    """Wraps methods and properties of `snt.Module` classes in the name scope.

    `@snt.once` methods (lazy initialisation) are also made to run outside any
    `tf.function` being traced (`eager_init.outside_trace`). Records
    constructor arguments for the automatic `repr` and checks that
    `super().__init__()` was called.
    """

    def __new__(
        mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kw: Any
    ) -> ModuleMetaclass:
        scopes = _scopes_enabled()
        methods = []
        for key, value in list(namespace.items()):
            if key == "name_scope" or (key.startswith("__") and key != "__call__"):
                continue
            if isinstance(value, property):
                if scopes:
                    namespace[key] = _wrap_property(value)
            elif (
                isinstance(value, types.FunctionType)
                or eager_init.initialization_of(value) is not None
                or tf_compat.is_tf_function(value)
            ):
                methods.append(key)
        namespace.setdefault("__repr__", _auto_repr)
        cls = super().__new__(mcs, name, bases, namespace, **kw)
        # Read by `ModuleMetaclass.__signature__`: computed once per class.
        signature = namespace.get("__signature__") or _constructor_signature(cls)
        type.__setattr__(cls, _SIGNATURE, signature)
        if "__call__" in namespace:
            # A `utils.no_autograph` `__call__` must mark the instances too.
            tf_compat.mark_instances_do_not_convert(cls, namespace["__call__"])
        for key in methods:
            value = namespace[key]
            if tf_compat.is_tf_function(value):
                if scopes and _wants_name_scope(value.python_function):
                    setattr(
                        cls,
                        key,
                        tf_compat.decorate_tf_function(value, _traced_with_name_scope),
                    )
                continue
            original = eager_init.initialization_of(value)
            if original is not None:
                # A module's lazy initialisation: in the module's name scope,
                # and outside any `tf.function` being traced (`eager_init`).
                if scopes and _wants_name_scope(original) and _wants_name_scope(value):
                    original = with_name_scope(original)
                setattr(cls, key, eager_init.lazy(original))
            elif scopes and _wants_name_scope(value):
                # `wrapt` wrappers pass `isinstance(value, FunctionType)`.
                plain = type(value) is types.FunctionType
                wrap = with_name_scope if plain else _bound_with_name_scope
                setattr(cls, key, wrap(value))
        return cls

    @property
    def __signature__(cls) -> inspect.Signature | None:
        """The constructor's signature, without `self`.

        `inspect.signature(cls)` (and so `help()`, IDEs and notebooks) would
        otherwise show this metaclass's `__call__(*args, **kwargs)`. Defined
        on the metaclass, so instances are unaffected: `inspect.signature`
        of a module instance is still its `__call__`'s.
        """
        return cls.__dict__.get(_SIGNATURE)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        obj: Any = cls.__new__(cls, *args, **kwargs)  # type: ignore[call-overload]
        try:
            obj.__init__(*args, **kwargs)
        finally:
            scope = vars(obj).pop("_ctor_name_scope", None)
            if scope is not None:
                scope.__exit__(None, None, None)
        state = vars(obj)
        if "_name_scope" not in state and "_scope_name" not in state:
            raise ValueError(
                f"`{cls.__name__}.__init__` must call `super().__init__()` before "
                "using the module. Received: a module whose constructor never "
                "called the `snt.Module` constructor. Add "
                f"`super().__init__()` as the first line of `{cls.__name__}"
                ".__init__`."
            )
        _record_call(obj, cls, args, kwargs)
        return obj


_TF2_CHECKED = False


def _check_tf2() -> None:
    global _TF2_CHECKED
    if not _TF2_CHECKED:
        with tf.init_scope():
            assert tf.executing_eagerly(), "Sonnet v2 requires TensorFlow 2"
        _TF2_CHECKED = True


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(
            f"`name` must be a string or None. Received: {name!r} of type "
            f"{type(name).__name__}."
        )
    if not name.isidentifier() or not name.isascii():
        raise ValueError(
            "`name` must be a valid Python identifier (letters, digits and "
            f"underscores, not starting with a digit). Received: {name!r}."
        )


_EMPTY_MESSAGE = """{module!r} does not currently contain any {prop}.

Most Sonnet modules create variables the first time they are called with an
input, so asking for variables before that is usually a mistake.

Request the variables after passing an example input to the module:

    module = {module!r}
    output = module(input)
    params = module.{prop}

If the module is stateless, mark it with `snt.allow_empty_variables(module)` (or
use it as a decorator on your class) to get an empty tuple instead:

    module = {module!r}
    snt.allow_empty_variables(module)
    params = module.{prop}
"""


class Module(tf.Module, metaclass=ModuleMetaclass):
    """Base class for Sonnet modules: a `tf.Module` with automatic name scopes.

    Every method and property of a subclass runs inside the module's name
    scope, so variables created there are named `<module name>/<var name>`.
    The constructor body also runs inside the scope. `repr` is derived from
    the constructor arguments.

    Args:
      name: Module name; defaults to the snake_case class name. Must be a
        valid Python identifier.

    >>> class Scale(snt.Module):
    ...   def __call__(self, x):
    ...     if not hasattr(self, "w"):
    ...       self.w = tf.Variable(2.0, name="w")
    ...     return x * self.w
    >>> m = Scale()
    >>> float(m(3.0)), m.w.name
    (6.0, 'scale/w:0')
    """

    _TF_MODULE_IGNORED_PROPERTIES = tf.Module._TF_MODULE_IGNORED_PROPERTIES | {  # type: ignore[attr-defined]
        "_auto_repr",
        "_snt_call",
        "_snt_once",
        "_precision",
        "_snt_frozen",
    }

    # The `snt.precision.Policy` the module computes under, set per instance
    # by `snt.precision.apply` (outside `tf.Module`'s tracking: not part of
    # the checkpoint). None: compute in the variables' dtype.
    _precision: Any = None

    # Restore-on-create of a plain variable in one `RestoreV2` (`tf_compat`).
    _handle_deferred_dependencies = no_name_scope(
        tf_compat.handle_deferred_dependencies
    )

    def __init__(self, name: str | None = None):
        _check_tf2()
        if name is not None:
            _check_name(name)
        super().__init__(name=name)
        init = type(self).__init__
        if _wants_name_scope(init):
            scope = self.name_scope
            scope.__enter__()
            vars(self)["_ctor_name_scope"] = scope

    @property
    @no_name_scope
    def variables(self) -> Sequence[tf.Variable]:
        """All variables of this module and its submodules (raises if empty).

        In `tf.Module`'s order: the module's attributes in sorted name order
        (into lists, tuples and dicts), then each submodule's variables, depth
        first. Keras 3 layers and `keras.Variable`s held this way count too,
        in their place in that order, as the `tf.Variable`s that hold their
        values (a layer's in `layer.weights` order; one not built yet has
        none). Each variable is listed once.

        >>> import keras
        >>> class Head(snt.Module):
        ...   def __init__(self):
        ...     super().__init__()
        ...     self.dense = keras.layers.Dense(2, name="dense")
        ...     self.scale = tf.Variable(1.0, name="scale")
        ...   def __call__(self, x):
        ...     return self.dense(x) * self.scale
        >>> head = Head()
        >>> _ = head(tf.ones([1, 3]))
        >>> [v.name for v in head.variables]
        ['head/dense/kernel:0', 'head/dense/bias:0', 'head/scale:0']
        """
        result = variable_walk.variables(self)
        if not result and not getattr(self, _ALLOW_EMPTY, False):
            raise ValueError(_EMPTY_MESSAGE.format(module=self, prop="variables"))
        return result

    @property
    @no_name_scope
    def trainable_variables(self) -> Sequence[tf.Variable]:
        """Trainable variables of this module and its submodules (raises if empty).

        As `variables`, keeping trainable `tf.Variable`s and what Keras calls
        trainable (`layer.trainable_weights`, `keras.Variable.trainable`): a
        Keras layer's non-trainable weights, such as batch-norm statistics,
        and frozen layers are only in `variables`. So are the variables of
        modules frozen with `snt.freeze` (or by `snt.lora.add`).
        """
        result, dropped = variable_walk.trainable_variables(self)
        if dropped:  # Frozen ones left out: none left is not an error.
            return result
        if not result and not getattr(self, _ALLOW_EMPTY, False):
            raise ValueError(
                _EMPTY_MESSAGE.format(module=self, prop="trainable_variables")
            )
        return result


class Optimizer(Module):
    """Base class for Sonnet optimizers.

    Subclasses implement `apply(updates, parameters)`, which applies one update
    per parameter (a `None` update leaves its parameter alone).

    >>> class PlainSGD(snt.Optimizer):
    ...   def apply(self, updates, parameters):
    ...     for update, parameter in zip(updates, parameters):
    ...       if update is not None:
    ...         parameter.assign_sub(0.1 * update)
    >>> w = tf.Variable([1.0, 2.0])
    >>> PlainSGD().apply([tf.constant([1.0, 1.0])], [w])
    >>> w.numpy().tolist()
    [0.8999999761581421, 1.899999976158142]
    """

    @abc.abstractmethod
    def apply(self, updates: Sequence[Any], parameters: Sequence[tf.Variable]) -> None:
        """Applies `updates` to `parameters`.

        Args:
          updates: One per parameter: a dense tensor shaped like it, a
            `tf.IndexedSlices` (row updates) or None (the parameter is left
            alone), of the parameter's dtype.
          parameters: The floating point `tf.Variable`s to update. Optimizers
            with slot variables match them to parameters by position: pass the
            same list, in the same order, on every call.

        Raises:
          ValueError / TypeError: Sonnet's optimizers check the whole call
            first and name the offending entry, before any variable is
            modified.
        """
