"""A module as the constructor call that made it, for Keras configs.

`snt.KerasLayer.get_config` describes its module the way Keras describes a
layer: by what rebuilds it. For a Sonnet module that is its constructor call,
which the metaclass records for every module (`record`, at construction: the
arguments as given, kept by reference, except values that could be large or
single-use, such as arrays, tensors and iterators). `describe` turns the
call into JSON-ready data, `rebuild` makes the module again; variables are not
part of it (Keras saves and loads the layer's weights itself). What was done
to the module after construction (LoRA adapters, int8 weights, freezing) is
recorded beside it (`describe_changes`) and made again on the rebuilt module
(`replay_changes`), see below.

What can be described: public Sonnet classes (`snt.Linear`, `snt.nets.MLP`,
...) and classes Keras knows by name (`keras.saving.get_custom_objects()`),
called with `None`, booleans, numbers, strings, lists, tuples, dicts, dtypes,
shapes, slices, such modules and module classes, Sonnet initializers, Keras objects
Keras can serialise, and functions found by their module and name (e.g.
`tf.nn.relu`) in TensorFlow, Keras, Sonnet, NumPy or `math`, or registered
with Keras. Anything else (a lambda, an array, a module used twice, a module
under a precision policy other than the one the layer's Keras dtype policy
sets) raises a `ValueError` that names the argument and says what to do.
Keras is imported only when describing or rebuilding.
"""

from __future__ import annotations

import importlib
import re
import reprlib
import types
from typing import Any

import numpy as np
import tensorflow as tf

# The tag of every encoded value that is not JSON data itself.
_TAG = "__snt__"
# Where a function may be looked up by module and name when rebuilding.
_FUNCTION_PACKAGES = ("tensorflow", "keras", "sonnet", "numpy", "math")

_FIX = (
    "Make custom classes and functions known to Keras by name "
    "(`keras.saving.get_custom_objects()[name] = obj`, before saving and "
    "loading), or save without a config: `model.save_weights(...)` or "
    "`model.export(...)`."
)
_HOLDS = (
    "None, a bool, number or string, a list, tuple or dict of these, a dtype, "
    "a shape, a slice, a Sonnet module or module class, a Sonnet initializer, "
    "a function found by name (e.g. `tf.nn.relu`) or an object Keras can "
    "serialise"
)


def _cannot_describe(what: str, received: str) -> ValueError:
    return ValueError(
        "`snt.KerasLayer` cannot write its module into a Keras config (as "
        f"`model.save` needs): {what}. Received: {received}. {_FIX}"
    )


def _cannot_rebuild(what: str, received: str) -> ValueError:
    return ValueError(
        "`snt.KerasLayer` cannot rebuild its module from the Keras config: "
        f"{what}. Received: {received}."
    )


# ---------------------------------------------------------------------------
# Names of classes.

_PUBLIC: dict[type, str] = {}
_PUBLIC_BY_NAME: dict[str, type] = {}


def _public_classes() -> dict[type, str]:
    """Every class the `snt` namespaces export, by its shortest public name."""
    if not _PUBLIC:
        import sonnet

        queue: list[tuple[str, Any]] = [("snt", sonnet)]
        visited = set()
        while queue:
            prefix, namespace = queue.pop(0)
            if id(namespace) in visited:
                continue
            visited.add(id(namespace))
            for name in sorted(getattr(namespace, "__all__", dir(namespace))):
                value = getattr(namespace, name, None)
                if isinstance(value, types.ModuleType):
                    if value.__name__.startswith("sonnet.") and "._src" not in (
                        value.__name__
                    ):
                        queue.append((f"{prefix}.{name}", value))
                elif isinstance(value, type) and value not in _PUBLIC:
                    _PUBLIC[value] = f"{prefix}.{name}"
        _PUBLIC_BY_NAME.update({v: k for k, v in _PUBLIC.items()})
    return _PUBLIC


def _class_name(cls: type) -> str:
    public = _public_classes().get(cls)
    if public is not None:
        return public
    import keras

    name = keras.saving.get_registered_name(cls)
    if keras.saving.get_registered_object(name) is cls:
        return name
    for key, value in keras.saving.get_custom_objects().items():
        if value is cls:
            return key
    # A class of Sonnet's own that public functions return (e.g. the
    # `snt.deep_rnn_with_skip_connections` stack), found by module and name.
    if cls.__module__.startswith("sonnet."):
        name = f"{cls.__module__}:{cls.__qualname__}"
        if _find_class(name) is cls:
            return name
    raise _cannot_describe(
        "every class must be a public Sonnet class or known to Keras by name",
        f"`{cls.__module__}.{cls.__qualname__}`",
    )


def _find_class(name: str) -> Any:
    """The class `name` (`"sonnet.<module>:<qualified name>"`) names, if any."""
    module, _, qualname = name.partition(":")
    if not module.startswith("sonnet."):
        return None
    try:
        return _lookup(module, qualname)
    except (ImportError, AttributeError):
        return None


def _class_of(name: Any, base: type) -> type:
    _public_classes()
    cls: Any = _PUBLIC_BY_NAME.get(name)
    if cls is None and isinstance(name, str):
        import keras

        cls = keras.saving.get_registered_object(name)
        if cls is None and ":" in name:
            cls = _find_class(name)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise _cannot_rebuild(
            f"a class must be a public Sonnet class or one known to Keras by "
            f"name (`keras.saving.get_custom_objects()`, or `custom_objects` "
            f"of `keras.models.load_model`) deriving from `{base.__name__}`",
            repr(name),
        )
    return cls


# ---------------------------------------------------------------------------
# Describing.


def describe(module: Any, policy: Any = None) -> dict[str, Any]:
    """The JSON-ready description of `module`'s constructor call.

    `policy`: the `snt.precision` policy the layer's Keras dtype policy sets
    on the module (saved as that dtype policy), which the module and its
    submodules may have; None: they must have none.

    Raises:
      ValueError: `module` cannot be described (see the module docstring).
    """
    for sub in getattr(module, "submodules", ()):
        _check_precision(sub, policy)
    return _describe_module(module, set(), policy)


def _check_precision(module: Any, allowed: Any) -> None:
    policy = getattr(module, "_precision", None)
    if policy is not None and policy != allowed:
        raise _cannot_describe(
            "a module must not compute under a precision policy, which is not "
            "part of its constructor call (save it without one and call "
            "`snt.precision.apply` again after loading)",
            f"{module.name!r} under {policy!r}",
        )


def _describe_module(module: Any, seen: set[int], policy: Any) -> dict[str, Any]:
    from sonnet._src import base

    call = vars(module).get("_snt_call") if isinstance(module, base.Module) else None
    if call is None:
        raise _cannot_describe(
            "the module must be a `snt.Module`, which records its constructor call",
            f"a {type(module).__name__}",
        )
    if id(module) in seen:
        raise _cannot_describe(
            "each module may appear once in the constructor calls: rebuilt, "
            "two mentions would be two modules, not sharing variables",
            f"{module.name!r} twice",
        )
    seen.add(id(module))
    _check_precision(module, policy)
    name = _class_name(type(module))
    args, kwargs = call
    return {
        _TAG: "module",
        "class": name,
        "args": [
            _describe(a, f"argument {i} of `{name}`", a, seen, policy)
            for i, a in enumerate(args)
        ],
        "kwargs": {
            k: _describe(v, f"argument `{k}` of `{name}`", v, seen, policy)
            for k, v in kwargs.items()
        },
    }


def _describe(
    value: Any, where: str, argument: Any, seen: set[int], policy: Any = None
) -> Any:
    """`value`, part of `argument` (named by `where`), as JSON-ready data."""
    from sonnet._src import base, initializers

    if isinstance(value, (type(None), bool, str, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    kind = type(value)
    if kind is list:
        return [_describe(v, where, argument, seen, policy) for v in value]
    if kind is tuple:
        items = [_describe(v, where, argument, seen, policy) for v in value]
        return {_TAG: "tuple", "items": items}
    if kind is dict and all(isinstance(k, str) for k in value):
        items = {
            k: _describe(v, where, argument, seen, policy) for k, v in value.items()
        }
        return {_TAG: "dict", "items": items}
    if kind is slice:
        parts = (value.start, value.stop, value.step)
        return {
            _TAG: "slice",
            "items": [_describe(p, where, argument, seen, policy) for p in parts],
        }
    if isinstance(value, base.Module):
        return _describe_module(value, seen, policy)
    if isinstance(value, type) and issubclass(value, base.Module):
        return {_TAG: "class", "class": _class_name(value)}
    if isinstance(value, tf.DType):
        return {_TAG: "dtype", "name": value.name}
    if isinstance(value, tf.TensorShape):
        dims = None if value.rank is None else value.as_list()
        return {_TAG: "shape", "dims": dims}
    if isinstance(value, initializers.Initializer) and kind in _public_classes():
        fields = {
            k: _describe(v, where, argument, seen, policy)
            for k, v in value._repr_fields().items()
        }
        return {_TAG: "initializer", "class": _class_name(kind), "fields": fields}
    function = _function_name(value)
    if function is not None:
        return {_TAG: "function", "module": function[0], "name": function[1]}
    keras_config = _keras_config(value)
    if keras_config is not None:
        return {_TAG: "keras", "config": keras_config}
    # A dropped value (`record`) shows as `<its type>`.
    raise _cannot_describe(f"{where} must be {_HOLDS}", reprlib.repr(argument))


def _function_name(value: Any) -> tuple[str, str] | None:
    """`(module, qualified name)` that find the function `value` again, if any:
    `("", key)` for one registered with Keras."""
    name = getattr(value, "__qualname__", None)
    if not callable(value) or isinstance(value, type) or not isinstance(name, str):
        return None
    import keras

    registered = keras.saving.get_registered_name(value)
    if ">" in registered and keras.saving.get_registered_object(registered) is value:
        return "", registered
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        return None
    if module.split(".")[0] not in _FUNCTION_PACKAGES:
        return None
    try:
        found = _lookup(module, name)
    except (ImportError, AttributeError):
        return None
    return (module, name) if found is value else None


def _lookup(module: str, name: str) -> Any:
    """`module.name`, if it is defined in one of `_FUNCTION_PACKAGES`.

    A config is data from a file: no dunder attributes are followed, and
    what is found must come from those packages (not, e.g., `os.system`
    imported into one of their modules).

    Raises:
      AttributeError: Nothing acceptable is found.
    """
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        if part.startswith("__"):
            raise AttributeError(part)
        found = getattr(found, part)
    home = getattr(found, "__module__", None)
    if not isinstance(home, str) or home.split(".")[0] not in _FUNCTION_PACKAGES:
        raise AttributeError(name)
    return found


def _keras_config(value: Any) -> Any:
    """Keras' own serialisation of `value`, if Keras can also undo it."""
    if not callable(getattr(value, "get_config", None)):
        return None
    import keras

    try:
        config = keras.saving.serialize_keras_object(value)
        keras.saving.deserialize_keras_object(config)
    except Exception:  # Keras cannot do it either: the caller explains.
        return None
    return config


# ---------------------------------------------------------------------------
# Rebuilding.


def rebuild(description: Any) -> Any:
    """The module `describe` described (new, without variables yet).

    Raises:
      ValueError: The description names a class or function that cannot be
        found (e.g. a custom class not known to Keras by name).
    """
    return _rebuild(description)


def _rebuild(value: Any) -> Any:
    from sonnet._src import base, initializers

    if isinstance(value, list):
        return [_rebuild(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(_TAG)
    if tag == "tuple":
        return tuple(_rebuild(v) for v in value["items"])
    if tag == "dict":
        return {k: _rebuild(v) for k, v in value["items"].items()}
    if tag == "slice":
        return slice(*(_rebuild(v) for v in value["items"]))
    if tag == "module":
        cls = _class_of(value["class"], base.Module)
        args = [_rebuild(a) for a in value["args"]]
        return cls(*args, **{k: _rebuild(v) for k, v in value["kwargs"].items()})
    if tag == "class":
        return _class_of(value["class"], base.Module)
    if tag == "dtype":
        return tf.as_dtype(value["name"])
    if tag == "shape":
        return tf.TensorShape(value["dims"])
    if tag == "initializer":
        cls = _class_of(value["class"], initializers.Initializer)
        return cls(**{k: _rebuild(v) for k, v in value["fields"].items()})
    if tag == "function":
        return _rebuild_function(value["module"], value["name"])
    if tag == "keras":
        import keras

        return keras.saving.deserialize_keras_object(value["config"])
    raise _cannot_rebuild("the config holds an entry of an unknown kind", repr(value))


def _rebuild_function(module: str, name: str) -> Any:
    found = None
    if not module:
        import keras

        found = keras.saving.get_registered_object(name)
    elif module.split(".")[0] in _FUNCTION_PACKAGES:
        try:
            found = _lookup(module, name)
        except (ImportError, AttributeError):
            found = None
    if not callable(found):
        raise _cannot_rebuild(
            "a function must be found by name in TensorFlow, Keras, Sonnet, "
            "NumPy or `math`, or among those registered with Keras",
            f"{module}.{name}" if module else name,
        )
    return found


# ---------------------------------------------------------------------------
# What was changed after construction: LoRA adapters, int8 layers, freezing.
#
# `snt.lora.add`, `snt.int8.quantize` and `snt.freeze` change a module after
# its constructor call: the call alone would rebuild the plain module, whose
# variables Keras could not load the saved weights into. So the config also
# records the changes, as Keras' `Dense` records its `lora_rank` and int8
# policy, and `replay_changes` makes them again on the rebuilt, built module
# (before Keras loads the weights, which hold the adapters' and the int8
# values). Layers are found again by position in the module's tree (its
# modules in `tf.Module`'s order, adapters left out), and replayed through
# the public functions with a pattern of their exact name paths.

_CHANGES = ("lora", "int8", "frozen")
_CHANGES_FIX = (
    "Fold the adapters into the weights first (`snt.lora.merge(module)`, then "
    "`snt.lora.remove(module, keep_merged=True)`), or save the weights alone "
    "(`model.save_weights(...)`) and rebuild the model in code."
)


def _cannot_record(what: str, received: str) -> ValueError:
    return ValueError(
        "`snt.KerasLayer` cannot record the changes made to its module in a "
        f"Keras config (as `model.save` needs): {what}. Received: {received}. "
        f"{_CHANGES_FIX}"
    )


def _plain_tree(module: tf.Module) -> list[tf.Module]:
    """`module`'s tree without LoRA adapters (positions do not move when
    adapters are added)."""
    from sonnet._src import freezing, lora

    return [m for m in freezing.tree(module) if not isinstance(m, lora.LoRA)]


def _exact_pattern(
    tree: list[tf.Module], chosen: list[tf.Module], kinds: tuple[type, ...]
) -> str | None:
    """A pattern matching the name paths of `chosen` and of no other module
    of `kinds` in `tree`; None if names are shared so that none can."""
    from sonnet._src import module_filter

    names = {module_filter.name_path(m) for m in chosen}
    ids = {id(m) for m in chosen}
    for m in tree:
        if isinstance(m, kinds) and id(m) not in ids:
            if module_filter.name_path(m) in names:
                return None
    return "^(?:" + "|".join(re.escape(n) for n in sorted(names)) + ")$"


def describe_changes(module: tf.Module) -> dict[str, Any]:
    """The changes made to `module` since construction, JSON-ready (empty if
    none): `"lora"` (rank, alpha, layers), `"int8"` (layers), `"frozen"` (the
    freeze mark of each module of the tree, None where none).

    Raises:
      ValueError: a change cannot be replayed (adapters of different ranks or
        alphas, layers whose name paths other layers share).
    """
    from sonnet._src import embed, freezing, linear, lora, module_filter, weights

    changes: dict[str, Any] = {}
    tree = freezing.tree(module)
    plain = _plain_tree(module)
    quantized = [
        i
        for i, m in enumerate(plain)
        if isinstance(m.__dict__.get("_weight_step"), weights.Int8Kernel)
    ]
    if quantized:
        layers = [plain[i] for i in quantized]
        if _exact_pattern(plain, layers, (linear.Linear, embed.Embed)) is None:
            raise _cannot_record(
                "the int8 layers must have name paths no other Linear or Embed "
                "of the module has",
                repr([module_filter.name_path(m) for m in layers]),
            )
        changes["int8"] = {
            "layers": [module_filter.name_path(m) for m in layers],
            "at": quantized,
        }
    if len(plain) < len(tree):  # Adapters.
        adapted = [
            i
            for i, m in enumerate(plain)
            if isinstance(m, linear.Linear) and isinstance(m.lora, lora.LoRA)
        ]
        layers: list[Any] = [plain[i] for i in adapted]
        settings = {(m.lora.rank, m.lora.alpha) for m in layers}
        if len(settings) != 1:
            raise _cannot_record(
                "LoRA adapters must share one rank and alpha (one `snt.lora.add` "
                "replays them)",
                ", ".join(
                    f"{module_filter.name_path(m)}: rank {m.lora.rank}, alpha "
                    f"{m.lora.alpha}"
                    for m in layers
                ),
            )
        if _exact_pattern(plain, layers, (linear.Linear,)) is None:
            raise _cannot_record(
                "the adapted Linears must have name paths no other Linear of the "
                "module has",
                repr([module_filter.name_path(m) for m in layers]),
            )
        ((rank, alpha),) = settings
        changes["lora"] = {
            "rank": rank,
            "alpha": alpha,
            "layers": [module_filter.name_path(m) for m in layers],
            "at": adapted,
        }
    marks = [m.__dict__.get(freezing.KEY) for m in tree]
    if any(marks):
        changes["frozen"] = [
            None if not mark else mark if isinstance(mark, str) else True
            for mark in marks
        ]
    return changes


def pop_changes(config: dict[str, Any]) -> dict[str, Any] | None:
    """Takes the recorded changes out of a layer config (None if none)."""
    changes = {k: config.pop(k) for k in _CHANGES if k in config}
    return changes or None


def replay_changes(module: tf.Module, changes: dict[str, Any]) -> None:
    """Makes the recorded changes again on the rebuilt, built `module`.

    Raises:
      ValueError: the module's tree does not have the recorded layers.
    """
    from sonnet._src import embed, freezing, int8, linear, lora

    plain = _plain_tree(module)
    recorded = changes.get("int8")
    if recorded is not None:
        pattern = _replay_pattern(plain, recorded, (linear.Linear, embed.Embed))
        int8.quantize(module, pattern=pattern)
    recorded = changes.get("lora")
    if recorded is not None:
        pattern = _replay_pattern(plain, recorded, (linear.Linear,))
        lora.add(module, recorded["rank"], recorded["alpha"], pattern=pattern)
    marks = changes.get("frozen")
    if marks is not None:
        tree = freezing.tree(module)
        if len(tree) != len(marks):
            raise _cannot_rebuild(
                "the rebuilt module must have as many modules as the saved one "
                f"({len(marks)}) to freeze them as saved",
                f"{len(tree)} modules",
            )
        for value in {mark for mark in marks}:
            freezing.mark([m for m, mark in zip(tree, marks) if mark == value], value)


def _replay_pattern(
    plain: list[tf.Module], recorded: dict[str, Any], kinds: tuple[type, ...]
) -> str:
    at = recorded["at"]
    if not all(isinstance(i, int) and 0 <= i < len(plain) for i in at) or not all(
        isinstance(plain[i], kinds) for i in at
    ):
        raise _cannot_rebuild(
            "the rebuilt module must have the saved layers at the saved places "
            "(was the class changed since?)",
            repr(recorded["layers"]),
        )
    pattern = _exact_pattern(plain, [plain[i] for i in at], kinds)
    if pattern is None:
        raise _cannot_rebuild(
            "the rebuilt module's layers must have name paths no other layer has",
            repr(recorded["layers"]),
        )
    return pattern
