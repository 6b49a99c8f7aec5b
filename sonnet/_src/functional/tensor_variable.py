"""`TensorVariable`: a `tf.Variable` whose value is an ordinary tensor.

`snt.functional` runs stateful Sonnet code as pure functions: inside
`snt.functional.variables()` every `tf.Variable(...)` call makes a
`TensorVariable` instead, whose value (`tensor_value`) is a plain Python
attribute. Transformed functions swap parameter tensors in and out of these
variables around each call, and observe which variables the code uses.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import checks, eager_init, errors, utils

_NO_VALUE = """TensorVariable {name!r} has no value in this context.

Its value is only set while a transformed function (`init` or `apply` of
`snt.functional.transform`/`transform_with_state`) runs, and `init` leaves
the variables it created without one. So this happens when:

1. a variable created by `init` is read inside another transformed function
   that was not given its value, or by a second `init` of the same code;
2. a variable is read in plain (untransformed) code after `init` created it;
3. a variable is read after `assign(None)`.

Reading metadata (`shape`, `dtype`, `name`, `trainable`) is always fine. To
use the value, run the code inside `apply` and pass the parameters and state
returned by `init`:

    f = snt.functional.transform_with_state(model)
    params, state = f.init(x)
    out, state = f.apply(params, state, x)

Received: a read of {name!r}, which has no value."""


class _Observers(threading.local):
    """Per-thread stack of callbacks notified when a TensorVariable is used."""

    def __init__(self) -> None:
        super().__init__()
        self.callbacks: list[Callable[[TensorVariable], None]] = []


_observers = _Observers()


@contextlib.contextmanager
def observe(callback: Callable[[TensorVariable], None]) -> Iterator[None]:
    """Calls `callback(variable)` before every read or write of a TensorVariable.

    Observers nest; all active ones are called, outermost first. Only uses in
    the current thread are reported.
    """
    callbacks = _observers.callbacks
    callbacks.append(callback)
    try:
        yield
    finally:
        callbacks.remove(callback)


def _notify(variable: TensorVariable) -> None:
    for callback in _observers.callbacks:
        callback(variable)


def _shape_text(shape: tf.TensorShape) -> str:
    return "<unknown>" if shape.rank is None else str(shape.as_list())


def _scatter_method(op: Callable[..., tf.Tensor], doc: str) -> Callable[..., Any]:
    """A `scatter_*` method of `TensorVariable` (rows given as IndexedSlices)."""

    def method(
        self: TensorVariable,
        sparse_delta: Any,
        use_locking: bool = False,
        name: str | None = None,
    ) -> tf.Tensor:
        if not isinstance(sparse_delta, tf.IndexedSlices):
            raise errors.bad_type(
                "sparse_delta", "must be a tf.IndexedSlices", sparse_delta
            )
        indices = tf.expand_dims(sparse_delta.indices, -1)
        return self._replace(op(self._read(), indices, sparse_delta.values))

    method.__doc__ = doc + " Returns the new value."
    return method


def _scatter_nd_method(
    op: Callable[..., tf.Tensor], op_name: str
) -> Callable[..., Any]:
    """A `scatter_nd_*` method of `TensorVariable`: `op` on the value."""

    def method(
        self: TensorVariable, indices: Any, updates: Any, name: str | None = None
    ) -> tf.Tensor:
        return self._replace(op(self._read(), indices, updates))

    method.__doc__ = f"`tf.{op_name}` on the value; returns the new value."
    return method


class TensorVariable(tf.Variable):
    """A `tf.Variable` holding a plain tensor value, for `snt.functional`.

    Created by `tf.Variable(...)` inside `snt.functional.variables()`. It
    behaves like a variable in ops, maths and `assign*` calls, but its value
    is an ordinary tensor (`tensor_value`) that transformed functions replace;
    `tensor_value` may be None, and reading the variable then raises a
    `ValueError` explaining why. Metadata (`shape`, `dtype`, `name`,
    `trainable`, `device`) is always available. Writes return the new value
    (a tensor) instead of the variable.

    Args:
      initial_value: The initial value (anything convertible to a tensor).
      trainable: Whether the variable is a parameter (True, the default) or
        state (False).
      name: The variable's full name, e.g. `"linear/w:0"` (default
        `"Variable:0"`).
      shape: Optional less specific static shape for later assignments.

    Attributes:
      initial_tensor_value: The value given on creation; None once the
        `init` that created the variable has returned, until an eager
        `assign*` sets it.
      tensor_value: The current value, or None.
      on_write: None, or a function called with the variable before each
        write (`assign*`, `scatter_*`) and each request for its resource
        handle (which writes through raw ops need, and a TensorVariable
        lacks); it may raise. `snt.LayerStack` refuses layers that update
        their variables with it.

    >>> with snt.functional.variables():
    ...   v = tf.Variable(tf.ones([2]), name="v")
    >>> v
    TensorVariable(shape=[2], dtype=float32, name='v:0')
    >>> (v * 3).numpy().tolist()
    [3.0, 3.0]
    """

    on_write: Callable[[TensorVariable], None] | None = None

    def __init__(
        self,
        initial_value: Any,
        trainable: bool = True,
        name: str | None = None,
        shape: Any = None,
    ):
        value = utils.to_tensor("initial_value", initial_value)
        if isinstance(value, tf.Variable):
            value = tf.convert_to_tensor(value)
        trainable = checks.flag("trainable", trainable)
        if name is not None and not isinstance(name, str):
            raise errors.bad_type("name", "must be a string or None", name)
        static_shape = value.shape
        if shape is not None:
            static_shape = tf.TensorShape(shape)
            if not static_shape.is_compatible_with(value.shape):
                raise errors.bad_value(
                    "shape",
                    f"must be compatible with the initial value's shape "
                    f"{_shape_text(value.shape)}",
                    shape,
                )
        if name is None:
            name = "Variable:0"
        elif ":" not in name:
            name = f"{name}:0"
        self.initial_tensor_value: tf.Tensor | None = value
        self.tensor_value: tf.Tensor | None = value
        self._trainable = trainable
        self._name = name
        self._shape = static_shape
        self._dtype = value.dtype
        self._device = value.device

    # Metadata: never notifies, never needs a value.

    @property
    def name(self) -> str:
        return self._name

    @property
    def shape(self) -> tf.TensorShape:
        return self._shape

    @property
    def dtype(self) -> tf.DType:
        return self._dtype

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def device(self) -> str:
        return self._device

    @property
    def synchronization(self) -> tf.VariableSynchronization:
        return tf.VariableSynchronization.AUTO

    @property
    def aggregation(self) -> tf.VariableAggregation:
        return tf.VariableAggregation.NONE

    @property
    def constraint(self) -> None:
        return None

    @property
    def initial_value(self) -> tf.Tensor | None:
        return self.initial_tensor_value

    @property
    def handle(self) -> Any:
        """A TensorVariable has no resource handle: raises AttributeError."""
        self._writing()
        raise AttributeError(
            f"'TensorVariable' object has no attribute 'handle': {self._name!r} "
            "holds a plain tensor value, which no raw variable op can read or write"
        )

    def get_shape(self) -> tf.TensorShape:
        return self._shape

    def set_shape(self, shape: Any) -> None:
        """Refines the static shape (it must stay compatible)."""
        try:
            self._shape = self._shape.merge_with(tf.TensorShape(shape))
        except (TypeError, ValueError) as e:
            raise errors.bad_value(
                "shape",
                f"must be compatible with the variable's shape "
                f"{_shape_text(self._shape)}",
                shape,
            ) from e

    def __repr__(self) -> str:
        return (
            f"TensorVariable(shape={_shape_text(self._shape)}, "
            f"dtype={self._dtype.name}, name={self._name!r})"
        )

    # Reads: notify observers, then need a value.

    def _read(self) -> tf.Tensor:
        _notify(self)
        value = self.tensor_value
        if value is None:
            raise ValueError(_NO_VALUE.format(name=self._name))
        return value

    def value(self) -> tf.Tensor:
        return self._read()

    def read_value(self) -> tf.Tensor:
        return self._read()

    def initialized_value(self) -> tf.Tensor:
        return self._read()

    def numpy(self) -> np.ndarray:
        return self._read().numpy()  # type: ignore[attr-defined]

    def eval(self, session: Any = None) -> np.ndarray:
        del session
        return self.numpy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        del copy
        return np.asarray(self.numpy(), dtype=dtype)

    def __float__(self) -> float:
        return float(self._read())

    def __int__(self) -> int:
        return int(self._read())

    def __index__(self) -> int:
        return self._read().__index__()  # type: ignore[attr-defined]

    def __bool__(self) -> bool:
        return bool(self._read())

    def sparse_read(self, indices: Any, name: str | None = None) -> tf.Tensor:
        return tf.gather(self._read(), indices, name=name)

    def gather_nd(self, indices: Any, name: str | None = None) -> tf.Tensor:
        return tf.gather_nd(self._read(), indices, name=name)

    # Writes: check, notify observers (who may record the old value), write.

    def _check(self, argument: str, value: Any) -> tf.Tensor:
        try:
            tensor = tf.convert_to_tensor(value, dtype=self._dtype)
        except (TypeError, ValueError) as e:
            raise errors.error_like(
                e,
                argument,
                f"must be convertible to a {self._dtype.name} tensor",
                value,
            ) from e
        if not tensor.shape.is_compatible_with(self._shape):
            # Unlike `tf.Variable`, the original's TensorVariable took any
            # shape; the ops that then met it failed.
            raise errors.invalid_argument(
                argument,
                f"must have the variable's shape {_shape_text(self._shape)}",
                value,
            )
        return tensor

    def _writing(self) -> None:
        on_write = self.on_write
        if on_write is not None:
            on_write(self)

    def _write(self, value: tf.Tensor, read_value: bool = True) -> tf.Tensor | None:
        self._writing()
        # A variable whose initial value was lost (it belonged to an ended
        # trace) adopts the first eager value written to it.
        if self.initial_tensor_value is None and not tf.is_symbolic_tensor(value):
            self.initial_tensor_value = value
        self.tensor_value = value
        return value if read_value else None

    def assign(
        self,
        value: Any,
        use_locking: bool | None = None,
        name: str | None = None,
        read_value: bool = True,
    ) -> tf.Tensor | None:
        """Replaces the value; returns the new value (None if `read_value=False`).

        As in the original, `assign(None)` leaves the variable without a value.
        """
        tensor = None if value is None else self._check("value", value)
        _notify(self)
        if tensor is None:
            self._writing()
            self.tensor_value = None
            return None
        return self._write(tensor, read_value)

    def assign_add(
        self,
        delta: Any,
        use_locking: bool | None = None,
        name: str | None = None,
        read_value: bool = True,
    ) -> tf.Tensor | None:
        """Adds `delta` to the value; returns the new value."""
        tensor = self._check("delta", delta)
        return self._write(self._read() + tensor, read_value)

    def assign_sub(
        self,
        delta: Any,
        use_locking: bool | None = None,
        name: str | None = None,
        read_value: bool = True,
    ) -> tf.Tensor | None:
        """Subtracts `delta` from the value; returns the new value."""
        tensor = self._check("delta", delta)
        return self._write(self._read() - tensor, read_value)

    def _replace(self, new: tf.Tensor) -> tf.Tensor:
        self._writing()
        self.tensor_value = new
        return new

    scatter_add = _scatter_method(
        tf.tensor_scatter_nd_add,
        "Adds `sparse_delta.values` to the rows `sparse_delta.indices`.",
    )
    scatter_sub = _scatter_method(
        tf.tensor_scatter_nd_sub,
        "Subtracts `sparse_delta.values` from the rows `sparse_delta.indices`.",
    )
    scatter_update = _scatter_method(
        tf.tensor_scatter_nd_update,
        "Replaces the rows `sparse_delta.indices` by `sparse_delta.values`.",
    )
    scatter_max = _scatter_method(
        tf.tensor_scatter_nd_max,
        "Element-wise maximum of the indexed rows and `sparse_delta.values`.",
    )
    scatter_min = _scatter_method(
        tf.tensor_scatter_nd_min,
        "Element-wise minimum of the indexed rows and `sparse_delta.values`.",
    )
    scatter_nd_add = _scatter_nd_method(
        tf.tensor_scatter_nd_add, "tensor_scatter_nd_add"
    )
    scatter_nd_sub = _scatter_nd_method(
        tf.tensor_scatter_nd_sub, "tensor_scatter_nd_sub"
    )
    scatter_nd_update = _scatter_nd_method(
        tf.tensor_scatter_nd_update, "tensor_scatter_nd_update"
    )

    def _unsupported(self, method: str) -> NotImplementedError:
        return NotImplementedError(
            f"`TensorVariable.{method}` is not supported: a TensorVariable only "
            "offers reads, `assign*`, `scatter_{add,sub,update,max,min}` and "
            f"`scatter_nd_*`. Received: a call to `{method}` on {self._name!r}."
        )

    def scatter_mul(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("scatter_mul")

    def scatter_div(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("scatter_div")

    def batch_scatter_update(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("batch_scatter_update")

    def count_up_to(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("count_up_to")

    def load(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("load")

    def to_proto(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("to_proto")


# AutoGraph would convert these methods each time user code calling them is
# traced; they contain no control flow on tensors, so it is told not to.
for _name, _method in list(vars(TensorVariable).items()):
    if inspect.isfunction(_method) and not _name.startswith("__"):
        setattr(TensorVariable, _name, utils.no_autograph(_method))


def _to_tensor(
    variable: TensorVariable,
    dtype: tf.DType | None = None,
    name: str | None = None,
    as_ref: bool = False,
) -> tf.Tensor:
    del name, as_ref
    if dtype is not None and not tf.as_dtype(dtype).is_compatible_with(variable.dtype):
        raise errors.bad_type(
            "dtype",
            f"must match the variable's dtype {variable.dtype.name} to convert "
            f"{variable.name!r} to a tensor",
            tf.as_dtype(dtype).name,
        )
    return variable.value()


tf.register_tensor_conversion_function(TensorVariable, _to_tensor)


def _create(next_creator: Any, **kwargs: Any) -> TensorVariable:
    del next_creator  # Never makes a real variable.
    initial_value = kwargs.get("initial_value")
    if callable(initial_value):
        initial_value = initial_value()
    dtype = kwargs.get("dtype")
    value = utils.to_tensor("initial_value", initial_value, dtype=dtype)
    trainable = kwargs.get("trainable")
    name = kwargs.get("name") or "Variable"
    scope = tf.get_current_name_scope()
    return TensorVariable(
        value,
        trainable=True if trainable is None else trainable,
        name=f"{scope}/{name}:0" if scope else f"{name}:0",
        shape=kwargs.get("shape"),
    )


def variables() -> contextlib.AbstractContextManager[Any]:
    """Context manager in which `tf.Variable(...)` creates `TensorVariable`s.

    Use it to build modules for `snt.functional` (variables created inside
    `init` of a transformed function are TensorVariables automatically). The
    variable's name is the current name scope plus the given name, as for
    real variables; `trainable` defaults to True.

    Returns:
      A context manager.

    >>> with snt.functional.variables():
    ...   with tf.name_scope("foo"):
    ...     v = tf.Variable(1.0, name="bar")
    >>> v.name, float(v + 1)
    ('foo/bar:0', 2.0)
    """
    return _variables()


@contextlib.contextmanager
def _variables() -> Iterator[None]:
    # Initial values stay in the graph being traced (`jit(init)` gives new
    # random values on every call), so modules must not compute them eagerly.
    with eager_init.disabled(), tf.variable_creator_scope(_create):
        yield
