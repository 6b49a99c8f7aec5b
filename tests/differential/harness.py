"""Scenario runner shared by both sides of the differential suite.

This file is imported by our pytest process (as `tests.differential.harness`)
and run as a script by the *original* Sonnet 2.0.2's Python. It may therefore
import only the standard library, `numpy`, `tensorflow` and `sonnet` (whichever
`sonnet` the running interpreter has).

A scenario is a function without arguments. Whatever it returns is encoded as
JSON (`encode`): tensors as dtype, shape and values; `snt.Module`s as their
variables' names, shapes and dtypes; `Spec(x)` as dtype and shape only (for
random values). An exception is recorded as its class's MRO and message.

As a script it runs every scenario of the scenario files given on the command
line and appends one JSON line per scenario to `--out`. A TensorFlow kernel
that aborts the process must not lose the other results, so the script
supervises a child (itself with `--child`) that skips scenarios already
recorded, and records the one that killed it as `crashed`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

import sonnet as snt

OMIT = object()
"""Spelling factory result meaning "leave the argument out"."""


class Lazy:
    """A `grid` base value built when the scenario runs."""

    def __init__(self, factory: Callable[[], Any]):
        self.factory = factory


def lazy(factory: Callable[[], Any]) -> Lazy:
    return Lazy(factory)


def x(shape: tuple[int, ...], dtype: Any = np.float32) -> Lazy:
    """A lazily built input tensor of `shape` with `ramp` values."""
    return Lazy(lambda: tf.constant(ramp(shape, dtype)))


class Spec:
    """Wraps a value whose dtype and shape are compared, but not its values."""

    def __init__(self, value: Any):
        self.value = value


# ---------------------------------------------------------------- spellings
# A spelling is `(label, factory)`: the factory builds the value when the
# scenario runs (so that importing a scenario file creates no tensors).


def _const(value: Any) -> Callable[[], Any]:
    return lambda: value


def ints(v: int, *, invalid: bool = True) -> list[tuple[str, Callable[[], Any]]]:
    """Alternative spellings of a positive integer argument `v`."""
    out = [
        ("int", _const(v)),
        ("np.int32", lambda: np.int32(v)),
        ("np.int64", lambda: np.int64(v)),
        ("np0d", lambda: np.array(v)),
        ("tensor", lambda: tf.constant(v)),
        ("tensor_int64", lambda: tf.constant(v, tf.int64)),
        ("whole_float", _const(float(v))),
        ("np.float32", lambda: np.float32(v)),
        ("list", lambda: [v]),
        ("tuple", lambda: (v,)),
        ("None", _const(None)),
    ]
    if v == 1:
        out.append(("bool", _const(True)))
    if invalid:
        out += [
            ("zero", _const(0)),
            ("negative", _const(-v)),
            ("str", _const(str(v))),
            ("fraction", _const(v + 0.5)),
            ("tensor_float", lambda: tf.constant(float(v))),
            ("tensor_1d", lambda: tf.constant([v])),
        ]
    return out


def floats(v: float, *, invalid: bool = True) -> list[tuple[str, Callable[[], Any]]]:
    """Alternative spellings of a float argument `v`."""
    out = [
        ("float", _const(v)),
        ("np.float32", lambda: np.float32(v)),
        ("np.float64", lambda: np.float64(v)),
        ("np0d", lambda: np.array(v)),
        ("np0d_float32", lambda: np.array(v, np.float32)),
        ("tensor", lambda: tf.constant(v)),
        ("tensor_float64", lambda: tf.constant(v, tf.float64)),
        ("variable", lambda: tf.Variable(v)),
        ("list", lambda: [v]),
        ("None", _const(None)),
    ]
    if float(v).is_integer():
        out.append(("int", _const(int(v))))
        out.append(("np.int32", lambda: np.int32(v)))
    if invalid:
        out += [
            ("str", _const(str(v))),
            ("negative", _const(-abs(v) - 1.0)),
            ("zero", _const(0.0)),
            ("nan", _const(float("nan"))),
            ("inf", _const(float("inf"))),
        ]
    return out


def bools(v: bool) -> list[tuple[str, Callable[[], Any]]]:
    """Alternative spellings of a boolean argument `v`."""
    return [
        ("bool", _const(v)),
        ("not", _const(not v)),
        ("int", _const(int(v))),
        ("np.bool", lambda: np.bool_(v)),
        ("np0d", lambda: np.array(v)),
        ("tensor", lambda: tf.constant(v)),
        ("None", _const(None)),
        ("str", _const(str(v))),
        ("int2", _const(2)),
        ("list", lambda: [v]),
    ]


def strs(v: str, *others: str) -> list[tuple[str, Callable[[], Any]]]:
    """Spellings of a string argument: `v`, case variants, `others`, bad ones."""
    out = [("str", _const(v))]
    for alt in dict.fromkeys((v.lower(), v.upper()) + others):
        if alt != v:
            out.append((repr(alt), _const(alt)))
    out += [
        ("bogus", _const("bogus")),
        ("empty", _const("")),
        ("None", _const(None)),
        ("int", _const(1)),
        ("bytes", _const(v.encode())),
    ]
    return out


def shapes(t: tuple[int, ...]) -> list[tuple[str, Callable[[], Any]]]:
    """Spellings of a shape-like tuple of positive integers `t`."""
    out = [
        ("tuple", _const(tuple(t))),
        ("list", lambda: list(t)),
        ("np_ints", lambda: tuple(np.int64(i) for i in t)),
        ("ndarray", lambda: np.array(t)),
        ("tensor", lambda: tf.constant(t)),
        ("TensorShape", lambda: tf.TensorShape(t)),
        ("whole_floats", lambda: tuple(float(i) for i in t)),
        ("None", _const(None)),
        ("str", _const("x")),
        ("too_long", lambda: tuple(t) + (1,)),
        ("too_short", lambda: tuple(t)[:-1]),
        ("negative", lambda: tuple(-i for i in t)),
        ("zero", lambda: (0,) * len(t)),
        ("fraction", lambda: tuple(i + 0.5 for i in t)),
    ]
    if len(set(t)) == 1:
        out.append(("int", _const(t[0])))
    return out


def initializers() -> list[tuple[str, Callable[[], Any]]]:
    """Spellings of an initializer argument."""
    return [
        ("None", _const(None)),
        ("ramp", lambda: Ramp()),
        ("Constant", lambda: snt.initializers.Constant(0.25)),
        ("function", _const(lambda shape, dtype: 0.5 * tf.ones(shape, dtype))),
        ("str", _const("zeros")),
        ("int", _const(1)),
    ]


def dtypes() -> list[tuple[str, Callable[[], Any]]]:
    """Spellings of a dtype argument."""
    return [
        ("tf.float32", _const(tf.float32)),
        ("tf.float64", _const(tf.float64)),
        ("str_float32", _const("float32")),
        ("np.float32", _const(np.float32)),
        ("np.dtype", lambda: np.dtype("float32")),
        ("tf.float16", _const(tf.float16)),
        ("tf.int32", _const(tf.int32)),
        ("None", _const(None)),
        ("bogus", _const("bogus")),
    ]


def names() -> list[tuple[str, Callable[[], Any]]]:
    """Spellings of a module `name` argument."""
    return [
        ("None", _const(None)),
        ("custom", _const("custom_name")),
        ("space", _const("has space")),
        ("leading_digit", _const("1abc")),
        ("slash", _const("a/b")),
        ("empty", _const("")),
        ("int", _const(3)),
    ]


def inputs(
    shape: tuple[int, ...], dtype: Any = np.float32
) -> list[tuple[str, Callable[[], Any]]]:
    """Spellings of an input tensor of `shape` (values from `ramp`)."""
    base = lambda shape=shape, dtype=dtype: ramp(shape, dtype)
    out = [
        ("tensor", lambda: tf.constant(base())),
        ("ndarray", base),
        ("list", lambda: base().tolist()),
        ("float64", lambda: tf.constant(base(dtype=np.float64))),
        ("float16", lambda: tf.constant(base(dtype=np.float16))),
        ("bfloat16", lambda: tf.cast(base(), tf.bfloat16)),
        ("int32", lambda: tf.constant((base() * 10).astype(np.int32))),
        ("variable", lambda: tf.Variable(base())),
        ("rank_minus_1", lambda: tf.constant(base(shape[1:]))),
        ("rank_plus_1", lambda: tf.constant(base((1,) + tuple(shape)))),
        ("scalar", lambda: tf.constant(1.0)),
        ("zero_batch", lambda: tf.constant(base((0,) + tuple(shape[1:])))),
        ("str", _const("x")),
        ("None", _const(None)),
    ]
    return out


# ------------------------------------------------------- deterministic values


def ramp(shape: Any, dtype: Any = np.float32, phase: float = 0.0) -> np.ndarray:
    """Deterministic values in [-1, 1] of `shape`."""
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape)) if shape else 1
    values = np.sin(np.arange(n, dtype=np.float64) * 0.37 + 0.1 + phase)
    return values.reshape(shape).astype(dtype)


class Ramp(snt.initializers.Initializer):
    """A user-defined initializer giving deterministic `ramp` values."""

    def __init__(self, phase: float = 0.0):
        self.phase = phase

    def __call__(self, shape, dtype):
        dtype = tf.as_dtype(dtype)
        return tf.constant(ramp(shape, dtype.as_numpy_dtype, self.phase), dtype)


def _variable_values(v: tf.Variable) -> np.ndarray | None:
    name = v.name.split(":")[0]
    phase = zlib.crc32(name.encode()) % 1000 / 100.0
    shape = v.shape.as_list()
    dtype = v.dtype
    if None in shape:
        return None
    if dtype.is_floating:
        return 0.5 + 0.45 * ramp(shape, dtype.as_numpy_dtype, phase)
    if dtype.is_integer:
        return np.full(shape, 1 + int(phase) % 3, dtype.as_numpy_dtype)
    return None


def settle(module: tf.Module) -> None:
    """Gives every variable of `module` a value that depends on its name only."""
    for v in tf.Module.variables.__get__(module):
        values = _variable_values(v)
        if values is not None:
            v.assign(values)


def run_module(module: Any, *args: Any, values: bool = True, **kwargs: Any) -> Any:
    """Calls `module`, settles its variables, calls again; returns both parts.

    The first call creates the variables; after `settle` both implementations
    hold the same values (for variables of the same name), so the second
    call's outputs are comparable.
    """
    module(*args, **kwargs)
    if isinstance(module, tf.Module):
        settle(module)
    out = module(*args, **kwargs)
    return {"out": out if values else Spec(out), "module": module}


MODES = [
    ("autograph", _const("autograph")),
    ("no_autograph", _const("no_autograph")),
    ("unknown_batch", _const("unknown_batch")),
]
"""Ways of calling a module besides eagerly (the `@mode` axis).

`unknown_batch` traces without AutoGraph, with the batch dimension unknown.
"""
ALL_MODES = ("autograph", "no_autograph", "unknown_batch")
DEFAULT_MODES = ("no_autograph", "unknown_batch")
"""AutoGraph conversion costs the original about half a second per module
class, so grids opt into `autograph` mode (`modes=h.ALL_MODES`) for a
representative set of modules only."""


def traced(f: Callable[..., Any], mode: str) -> Callable[..., Any]:
    """`f` as called in `mode`: eager, autograph, no_autograph."""
    if mode == "eager":
        return f
    return tf.function(f, autograph=mode == "autograph")


# ------------------------------------------------------------------- encoding


def _dtype_name(dtype: Any) -> str:
    try:
        return tf.as_dtype(dtype).name
    except TypeError:
        return str(dtype)


def _array(x: Any, values: bool) -> dict[str, Any]:
    if isinstance(x, tf.IndexedSlices):
        x = tf.convert_to_tensor(x)
    if isinstance(x, (tf.Tensor, tf.Variable)):
        dtype = x.dtype.name
        if not tf.executing_eagerly() and not hasattr(x, "numpy"):
            return {"t": dtype, "shape": str(x.shape)}
        shape = x.shape.as_list()
        arr = x.numpy() if values else None
    else:
        arr = np.asarray(x)
        dtype, shape = _dtype_name(arr.dtype), list(arr.shape)
    out: dict[str, Any] = {"t": dtype, "shape": shape}
    if values and arr is not None:
        if arr.dtype.kind in "SUO":
            out["v"] = np.vectorize(
                lambda s: s.decode(errors="replace") if isinstance(s, bytes) else s,
                otypes=[object],
            )(arr).tolist()
        else:
            out["v"] = arr.astype(np.float64 if arr.dtype.kind in "fcV" else arr.dtype)
            out["v"] = out["v"].tolist()
    return out


def _variables(module: tf.Module) -> Any:
    try:
        variables = module.variables
    except Exception as e:
        return {"error": exception_mro(e)[0]}
    return [
        [v.name, v.shape.as_list(), v.dtype.name, _truth(v.trainable)]
        for v in variables
    ]


def _truth(value: Any) -> Any:
    try:
        return bool(value)
    except Exception:
        return repr(value)


def encode(x: Any, values: bool = True) -> Any:
    """A JSON-able description of `x` (see the module docstring)."""
    if isinstance(x, Spec):
        return encode(x.value, values=False)
    if x is None or isinstance(x, (bool, str)):
        return {"py": type(x).__name__, "v": x}
    if isinstance(x, (int, float)):
        return {"py": "number", "v": x if values else None}
    if isinstance(
        x, (tf.Tensor, tf.Variable, tf.IndexedSlices, np.ndarray, np.generic)
    ):
        out = _array(x, values)
        if isinstance(x, tf.Variable):
            out["var"] = x.name
        return out
    if isinstance(x, tf.TensorShape):
        return {"TensorShape": x.as_list() if x.rank is not None else None}
    if isinstance(x, tf.DType):
        return {"dtype": x.name}
    if isinstance(x, tf.Module):
        return {"module": type(x).__name__, "name": x.name, "vars": _variables(x)}
    if isinstance(x, dict):
        return {"dict": {str(k): encode(v, values) for k, v in sorted(x.items())}}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return {type(x).__name__: [encode(v, values) for v in x]}
    if isinstance(x, (list, tuple)):
        # Tracking wrappers (`ListWrapper`) count as plain lists.
        kind = "list" if isinstance(x, list) else "tuple"
        return {kind: [encode(v, values) for v in x]}
    if isinstance(x, bytes):
        return {"py": "str", "v": x.decode(errors="replace")}
    return {"obj": type(x).__name__}


def _class_name(cls: type) -> str:
    module = cls.__module__ or ""
    if module == "sonnet" or module.startswith(("sonnet.", "sonnet_")):
        return f"sonnet:{cls.__qualname__}"
    if module == "builtins":
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def exception_mro(e: BaseException) -> list[str]:
    return [_class_name(c) for c in type(e).__mro__ if c is not object]


@contextlib.contextmanager
def _clean_global_state() -> Iterator[None]:
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            snt.mixed_precision.disable()
        tf.config.run_functions_eagerly(False)


def run_one(fn: Callable[[], Any]) -> dict[str, Any]:
    """Runs one scenario: `{"status": "ok", "value": ...}` or `"error"`."""
    with _clean_global_state():
        try:
            value = fn()
            return {"status": "ok", "value": encode(value)}
        except Exception as e:
            return {
                "status": "error",
                "mro": exception_mro(e),
                "message": f"{type(e).__name__}: {e}"[:2000],
                "traceback": traceback.format_exc(limit=-6)[-4000:],
            }


# ------------------------------------------------------------------ comparing


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    try:
        x = np.asarray(a, dtype=np.float64)
        y = np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):
        return a == b
    if x.shape != y.shape:
        return False
    return bool(np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True))


def diff_values(  # noqa: C901
    orig: Any, ours: Any, path: str = "", rtol: float = 1e-4, atol: float = 1e-5
) -> list[str]:
    """Differences between two `encode`d values, as readable lines."""
    where = path or "value"
    if isinstance(orig, dict) and isinstance(ours, dict):
        if "t" in orig and "t" in ours:
            problems = []
            for key in ("t", "shape", "var"):
                if orig.get(key) != ours.get(key):
                    problems.append(
                        f"{where}: {key} {orig.get(key)!r} (original) "
                        f"vs {ours.get(key)!r} (ours)"
                    )
            if not problems and "v" in orig and "v" in ours:
                if not _close(orig["v"], ours["v"], rtol, atol):
                    problems.append(f"{where}: values differ")
            return problems
        # A NumPy or tensor scalar and a Python number of equal value match.
        if _is_number(orig) and _is_number(ours):
            if orig.get("v") is None or ours.get("v") is None:
                return []
            if _close(orig["v"], ours["v"], rtol, atol):
                return []
            return [f"{where}: {orig['v']!r} (original) vs {ours['v']!r} (ours)"]
        if set(orig) != set(ours):
            return [f"{where}: {_short(orig)} (original) vs {_short(ours)} (ours)"]
        problems = []
        for key in orig:
            problems += diff_values(orig[key], ours[key], f"{path}.{key}", rtol, atol)
        return problems
    if isinstance(orig, list) and isinstance(ours, list):
        if len(orig) != len(ours):
            return [f"{where}: {_short(orig)} (original) vs {_short(ours)} (ours)"]
        problems = []
        for i, (a, b) in enumerate(zip(orig, ours)):
            problems += diff_values(a, b, f"{path}[{i}]", rtol, atol)
        return problems
    if orig != ours:
        return [f"{where}: {orig!r} (original) vs {ours!r} (ours)"]
    return []


def _is_number(x: dict[str, Any]) -> bool:
    if x.get("py") == "number":
        return True
    return x.get("shape") == [] and x.get("t", "").startswith(("int", "uint", "float"))


def _short(x: Any) -> str:
    text = json.dumps(x)
    return text if len(text) < 300 else text[:300] + "..."


# ------------------------------------------------------------------ registry


class Registry:
    """Collects the scenarios of one scenario file (`register(h)` gets one).

    Besides `add` and `grid` it exposes this module's helpers (`ints`,
    `floats`, `Ramp`, `run_module`, ...) as attributes, so scenario files
    need no import of this file.
    """

    OMIT = OMIT
    MODES = MODES
    ALL_MODES = ALL_MODES
    lazy = staticmethod(lazy)
    x = staticmethod(x)
    Spec = Spec
    Ramp = Ramp
    ints = staticmethod(ints)
    floats = staticmethod(floats)
    bools = staticmethod(bools)
    strs = staticmethod(strs)
    shapes = staticmethod(shapes)
    initializers = staticmethod(initializers)
    dtypes = staticmethod(dtypes)
    names = staticmethod(names)
    inputs = staticmethod(inputs)
    ramp = staticmethod(ramp)
    settle = staticmethod(settle)
    run_module = staticmethod(run_module)
    traced = staticmethod(traced)

    def __init__(self, prefix: str = ""):
        self.prefix = prefix
        self.scenarios: dict[str, Callable[[], Any]] = {}

    def add(self, sid: str, fn: Callable[[], Any]) -> None:
        sid = self.prefix + sid
        if sid in self.scenarios:
            raise ValueError(f"duplicate scenario id {sid!r}")
        self.scenarios[sid] = fn

    def scenario(self, sid: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
        def decorate(fn: Callable[[], Any]) -> Callable[[], Any]:
            self.add(sid, fn)
            return fn

        return decorate

    def grid(
        self,
        name: str,
        build: Callable[..., Any],
        base: dict[str, Any],
        axes: dict[str, list[tuple[str, Callable[[], Any]]]],
    ) -> None:
        """Adds `name(base)` and one scenario per spelling of each axis.

        `base` holds the valid arguments (`Lazy` ones built per scenario);
        `axes` maps an argument to its spellings. The scenario
        `name(arg=label)` calls `build(**arguments)` with `arg` replaced.
        """

        def make(arg: str | None, factory: Callable[[], Any] | None) -> Callable:
            def fn() -> Any:
                kwargs = {
                    k: v.factory() if isinstance(v, Lazy) else v
                    for k, v in base.items()
                    if k != arg
                }
                if arg is not None and factory is not None:
                    value = factory()
                    if value is not OMIT:
                        kwargs[arg] = value
                return build(**kwargs)

            return fn

        self.add(f"{name}(base)", make(None, None))
        for arg, spellings in axes.items():
            # A later spelling with the label of an earlier one is dropped, so
            # grids can add to the generic lists freely.
            for label, factory in dict(spellings).items():
                self.add(f"{name}({arg}={label})", make(arg, factory))

    def module_grid(
        self,
        name: str,
        ctor: Callable[..., Any],
        base: dict[str, Any],
        axes: dict[str, list[tuple[str, Callable[[], Any]]]],
        *,
        values: bool = True,
        modes: bool | tuple[str, ...] = True,
        call: Callable[..., Any] | None = None,
    ) -> None:
        """A `grid` over a module's constructor and call.

        Keys of `base`/`axes` starting with `@` are call arguments (`@inputs`
        is passed positionally, `@mode` picks eager or a `tf.function` kind,
        see `MODES`: `modes` names them, True means `DEFAULT_MODES`); the
        others go to `ctor`. The scenario builds the
        module, calls it (via `call(module, *args, **kwargs)` if given),
        `settle`s its variables and calls it again; it returns the second
        output (or its `Spec` if not `values`) and the module.
        """
        call = call or (lambda module, *a, **k: module(*a, **k))

        def build(**kwargs: Any) -> Any:
            mode = kwargs.pop("@mode", "eager")
            call_kwargs = {k[1:]: kwargs.pop(k) for k in list(kwargs) if k[0] == "@"}
            module = ctor(**kwargs)
            args = (call_kwargs.pop("inputs"),) if "inputs" in call_kwargs else ()
            f = lambda *a: call(module, *a, **call_kwargs)
            if mode != "eager":
                signature = None
                if mode == "unknown_batch":
                    x = tf.convert_to_tensor(args[0])
                    shape = [None] + x.shape.as_list()[1:]
                    signature = [tf.TensorSpec(shape, x.dtype)]
                f = tf.function(
                    f, autograph=mode == "autograph", input_signature=signature
                )
            f(*args)
            if isinstance(module, tf.Module):
                settle(module)
            out = f(*args)
            return {"out": out if values else Spec(out), "module": module}

        axes = dict(axes)
        if modes is True:
            modes = DEFAULT_MODES
        if modes:
            axes.setdefault("@mode", [m for m in MODES if m[0] in modes])
        self.grid(name, build, base, axes)


def load_file(path: str) -> Any:
    name = "snt_differential_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def scenario_prefix(module_name: str) -> str:
    stem = module_name.split(".")[-1].removeprefix("snt_differential_")
    return stem.removeprefix("scenarios_") + "/"


def collect(modules: list[Any]) -> dict[str, Callable[[], Any]]:
    """All scenarios of the given (imported) scenario files, by id."""
    out: dict[str, Callable[[], Any]] = {}
    for module in modules:
        registry = Registry(scenario_prefix(module.__name__))
        module.register(registry)
        out.update(registry.scenarios)
    return out


# -------------------------------------------------------------------- script


def _done_ids(out: str) -> tuple[set[str], str | None]:
    """Ids with a result in `out`, and the id that started without one."""
    done: set[str] = set()
    started: str | None = None
    if os.path.exists(out):
        with open(out) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if record.get("started"):
                    started = record["id"]
                else:
                    done.add(record["id"])
    if started in done:
        started = None
    return done, started


def _child(files: list[str], out: str) -> None:
    scenarios = collect([load_file(f) for f in files])
    done, _ = _done_ids(out)
    with open(out, "a") as f:
        for sid, fn in scenarios.items():
            if sid in done:
                continue
            f.write(json.dumps({"id": sid, "started": True}) + "\n")
            f.flush()
            start = time.perf_counter()
            record = run_one(fn)
            record["ms"] = round((time.perf_counter() - start) * 1000)
            record.pop("traceback", None)
            record["id"] = sid
            f.write(json.dumps(record, default=repr) + "\n")
            f.flush()


def _supervise(files: list[str], out: str, done_marker: str) -> int:
    header = {
        "id": "__header__",
        "sonnet": getattr(snt, "__version__", "?"),
        "tensorflow": tf.__version__,
    }
    with open(out, "a") as f:
        f.write(json.dumps(header) + "\n")
    for _ in range(50):
        rc = subprocess.call(
            [sys.executable, os.path.abspath(__file__), "--child", "--out", out] + files
        )
        if rc == 0:
            with open(done_marker, "w") as f:
                f.write("done\n")
            return 0
        _, started = _done_ids(out)
        if started is None:
            return rc
        with open(out, "a") as f:
            record = {"id": started, "status": "crashed", "rc": rc}
            f.write(json.dumps(record) + "\n")
    return 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--done")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    if args.child:
        _child(args.files, args.out)
        return 0
    return _supervise(args.files, args.out, args.done or args.out + ".done")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
