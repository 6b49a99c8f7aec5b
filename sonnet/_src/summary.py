"""`snt.summary`: a table of the module calls a module makes, traced on specs.

How calls are seen: while `summary` traces, the `__call__` (and the fused
`_unroll_sequence` of recurrent cores) of every `snt.Module` class that
defines one is replaced by a recording wrapper, and put back afterwards. This
costs nothing outside `summary` (no hook on the hot path), keeps the classes'
identities (`type(core).__call__ is LSTM.__call__` still holds), and sees
modules created during the call. The patching is `class_patch.ClassPatch`'s
(counted, so summaries may nest or run in several threads at once); each
thread records only its own calls.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shutil
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import tabulate
import tensorflow as tf

from sonnet._src import (
    base,
    build,
    checks,
    class_patch,
    errors,
    flops,
    freezing,
    keras_variables,
    tf_compat,
    variable_table,
)

# Methods recorded as calls: `__call__`, and the whole-sequence fast path that
# `snt.dynamic_unroll` takes for LSTM/GRU cores (and stacks of them) instead
# of calling the core once per step.
_RECORDED = ("__call__", "_unroll_sequence")
_HEADERS = (
    "Module",
    "Class",
    "Outputs",
    "Trainable",
    "Non-trainable",
    "Bytes",
    "FLOPs",
)


@dataclasses.dataclass(frozen=True)
class SummaryRow:
    """One module call of an `snt.summary`.

    Attributes:
      path: Where the call sits in the tree of calls, e.g.
        `"mlp/linear_0"`: the outermost module's name, then for each nested
        call the caller's public attribute holding the module, or else the
        module's name.
      class_name: The module's class name, e.g. `"Linear"`.
      call: 1 for the module's first call in the trace, 2 for its second, ...
      depth: How many recorded calls enclose this one (0: outermost).
      sequence: Whether this is a recurrent core's whole-sequence fast path
        under `snt.dynamic_unroll`, rather than one step.
      runs: How many times the traced call runs per call of the summarised
        function: more than 1 inside a `tf.while_loop` body (the steps of
        `snt.dynamic_unroll` after the first), None if that loop's number of
        iterations is unknown while tracing.
      outputs: `(label, tf.TensorSpec)` per tensor in the call's outputs;
        the label is the nearest dict key or namedtuple field, or "".
      trainable: Parameters (scalars) in the module's trainable variables.
      non_trainable: Parameters in its other variables (e.g. moving averages,
        or variables of modules frozen with `snt.freeze`).
      bytes: Memory of all its variables.
      flops: Floating-point operations of one run of this call (see
        `snt.summary`), including the calls it makes.
      module: The module.
    """

    path: str
    class_name: str
    call: int
    depth: int
    sequence: bool
    runs: int | None
    outputs: tuple[tuple[str, tf.TensorSpec], ...]
    trainable: int
    non_trainable: int
    bytes: int
    flops: int
    module: Any = dataclasses.field(repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Summary:
    """What `snt.summary` returns: rows, totals, and the table as `str()`.

    Attributes:
      rows: One `SummaryRow` per module call, in call order (a module before
        the calls it makes).
      variables: Every variable of the recorded modules, each once.
      trainable: Parameters in the trainable `variables`.
      non_trainable: Parameters in the others (frozen modules' included).
      bytes: Memory of `variables`.
      flops: Floating-point operations of one call of the summarised
        function, loops counted once per iteration where known.
      unknown_dims: Whether some dimension was unknown while tracing (a `None`
        batch size) and counted as 1 in `flops`.
      unknown_loops: Whether a loop with an unknown number of iterations was
        counted as running once.
    """

    rows: tuple[SummaryRow, ...]
    variables: tuple[tf.Variable, ...]
    trainable: int
    non_trainable: int
    bytes: int
    flops: int
    unknown_dims: bool
    unknown_loops: bool

    def format(
        self,
        depth: int | None = None,
        tablefmt: str = "simple",
        width: int | None = None,
    ) -> str:
        """The table, with a total row and a line of notes, fitted to a width.

        A table wider than `width` is narrowed in steps, each only if the
        last was not enough: paths become a tree (each call indented under
        its caller, named by its last path segment), the `Non-trainable`
        header takes two lines, then long class names and outputs are
        wrapped onto more lines (at spaces, `/`, `_`, commas and inside
        CamelCase names), each step narrowing the column that adds the
        fewest lines, and the module paths last. Numbers are never wrapped,
        so a very narrow width may still be exceeded.

        Args:
          depth: Show only calls nested at most this deep (0: the outermost
            calls only); default None shows all. Totals always cover all.
          tablefmt: A `tabulate` table format (default `"simple"`: no
            vertical rules, so the seven columns fit in 80 characters).
          width: The widest line wanted, in characters. Default None: the
            terminal's width when printing to one, else 100 (logs, files,
            notebooks). 0: no limit, the full table (a row per line, full
            paths).

        Returns:
          The table as a string.

        >>> result = snt.summary(snt.nets.MLP([16, 10]), tf.TensorSpec([8, 32]))
        >>> print(result.format(width=76))
        Module      Class    Outputs      Trainable         Non-    Bytes    FLOPs
                                                       trainable
        ----------  -------  ---------  -----------  -----------  -------  -------
        mlp         MLP      f32[8,10]          698            0    2,792   11,088
          linear_0  Linear   f32[8,16]          528            0    2,112    8,320
          linear_1  Linear   f32[8,10]          170            0      680    2,640
        Total                                   698            0    2,792   11,088
        698 trainable and 0 non-trainable parameters (2.7 KiB), 11.1 kFLOPs per call
        (a multiply-add is 2 FLOPs).
        """
        if depth is not None:
            depth = checks.integer("depth", depth, minimum=0)
        if not isinstance(tablefmt, (str, tabulate.TableFormat)):
            raise errors.bad_type(
                "tablefmt", "must be a tabulate table format", tablefmt
            )
        if width is None:
            width = _output_width()
        width = checks.integer("width", width, minimum=0)
        rows = [row for row in self.rows if depth is None or row.depth <= depth]
        total = ("Total", "", "", f"{self.trainable:,}", f"{self.non_trainable:,}")
        total += (f"{self.bytes:,}", f"{self.flops:,}")
        table = _fit(rows, total, tablefmt, width)
        return f"{table}\n{self._notes(width)}"

    def _notes(self, width: int = 0) -> str:
        """The totals in words, then caveats; wrapped between phrases."""
        phrases = [
            f"{_human(self.trainable)} trainable and {_human(self.non_trainable)} "
            f"non-trainable parameters ({_human_bytes(self.bytes)}),",
            f"{_human(self.flops, 'FLOPs')} per call",
            "(a multiply-add is 2 FLOPs).",
        ]
        if self.unknown_dims:
            phrases.append("Unknown dimensions (None) count as 1 in FLOPs.")
        if self.unknown_loops:
            phrases.append(
                "A loop whose number of iterations is unknown counts as one iteration."
            )
        lines = [phrases[0]]
        for phrase in phrases[1:]:
            if width and len(lines[-1]) + 1 + len(phrase) > width:
                lines.append(phrase)
            else:
                lines[-1] += f" {phrase}"
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:  # So that a REPL or a doctest shows the table.
        return self.format()


def summary(module: Callable[..., Any], *args: Any, **kwargs: Any) -> Summary:
    """A table of the module calls `module(*args, **kwargs)` makes, with their
    outputs, parameters and FLOPs, traced without running anything.

    `module` is called once inside a `tf.function` trace on the specs of the
    inputs: tensors and NumPy arrays stand for their shape and dtype
    (`tf.TensorSpec`s may be passed instead, so no real data is needed), and
    as in `snt.build`, a top-level positional argument that is a list of
    ints and Nones is a float32 spec of that shape. Other arguments (Python
    numbers and flags such as `is_training`) are passed as they are. Stateful
    updates (moving averages) are traced, never run.

    A module that has not been called yet is built by this trace, just as
    its first call would build it: its variables exist afterwards, with the
    shapes these inputs imply. Inside a `tf.distribute` strategy's scope the
    variables are created in that scope (each distributed variable counts
    once, not once per replica).

    There is one row per call of an `snt.Module`, in call order, with the
    outermost call (`module` itself) first. A row's path is the outermost
    module's name followed, for each nested call, by the caller's public
    attribute that holds the module (`vqvae/encoder`) or else the module's
    name (`mlp/linear_0`). Parameters are those of the module's variables,
    its submodules' included; the total counts each variable once, however
    many modules share it or how often it is used. A module called twice
    has a row per call (`(call 2)`). Under
    `snt.dynamic_unroll` the first step is traced before the loop and the
    others as one call in the loop body (its row says how many times it
    runs); LSTM and GRU cores (and stacks of them) take a faster
    whole-sequence path, shown as one row.

    FLOPs are counted from the traced graph's ops and their static shapes:
    a multiply-add is 2 FLOPs (`2 * M * N * K` for a `[M, K] x [K, N]`
    product, `2 * outputs * kh * kw * cin` for a 2-D convolution), an
    element-wise operation or activation is 1 per output element, a
    reduction or pooling 1 per element read, softmax 5 per element, a fused
    batch norm 2 per element (6 when it computes the batch statistics);
    shape, indexing and random ops count 0. A row counts one run of that
    call, including the calls it makes; the total counts the whole function,
    with each loop counted once per iteration when the number of iterations
    is known while tracing. Dimensions unknown while tracing (a `None` batch
    size) count as 1, so those counts are per example.

    Args:
      module: The module (or any callable) to summarise.
      *args: Its positional inputs: tensors, arrays, `tf.TensorSpec`s,
        shapes (lists of ints and Nones), or other values.
      **kwargs: Its keyword inputs, converted likewise (except shapes).

    Returns:
      A `Summary`: `rows` (one `SummaryRow` per call), the totals, and the
      table as `str(result)` (fitted to the terminal's width, or 100
      characters) or `result.format(depth=..., tablefmt=..., width=...)`.

    Raises:
      TypeError: if `module` is not callable (or is a class).

    >>> mlp = snt.nets.MLP([16, 10])
    >>> result = snt.summary(mlp, tf.TensorSpec([8, 32]))
    >>> print(result)
    Module        Class    Outputs      Trainable    Non-trainable    Bytes    FLOPs
    ------------  -------  ---------  -----------  ---------------  -------  -------
    mlp           MLP      f32[8,10]          698                0    2,792   11,088
    mlp/linear_0  Linear   f32[8,16]          528                0    2,112    8,320
    mlp/linear_1  Linear   f32[8,10]          170                0      680    2,640
    Total                                     698                0    2,792   11,088
    698 trainable and 0 non-trainable parameters (2.7 KiB),
    11.1 kFLOPs per call (a multiply-add is 2 FLOPs).
    >>> [(row.path, row.trainable, row.flops) for row in result.rows]
    [('mlp', 698, 11088), ('mlp/linear_0', 528, 8320), ('mlp/linear_1', 170, 2640)]
    """
    checks.function("module", module, "must be an snt.Module or a callable")
    specs = tuple(_input_spec(build._as_spec(a)) for a in args)
    kwspecs = {k: _input_spec(v) for k, v in kwargs.items()}

    def call(*call_args: Any, **call_kwargs: Any) -> Any:
        return module(*call_args, **call_kwargs)

    recording = _Recording()
    with _PATCH.scope(_recorded_methods, recording):
        concrete = tf.function(call).get_concrete_function(*specs, **kwspecs)
    return recording.summarise(concrete.graph)


def _input_spec(value: Any) -> Any:
    def leaf(x: Any) -> Any:
        if isinstance(x, tf.TypeSpec):
            return x
        if isinstance(x, (tf.Tensor, tf.Variable)):
            return tf.TensorSpec(x.shape, x.dtype)
        if isinstance(x, (tf.RaggedTensor, tf.SparseTensor)):
            return tf.type_spec_from_value(x)
        if hasattr(x, "shape") and hasattr(x, "dtype"):  # NumPy arrays and scalars.
            try:
                return tf.TensorSpec(x.shape, tf.as_dtype(x.dtype))
            except TypeError:
                return x
        return x

    return tf.nest.map_structure(leaf, value)


@dataclasses.dataclass
class _Call:
    """A call being recorded: where its ops start, what it returned."""

    module: Any
    method: str
    depth: int
    graph: Any
    first_op: int
    parent: _Call | None = None
    outputs: Any = None
    ops: tuple[tf.Operation, ...] = ()


class _Recording:
    """The calls seen in one thread during one `summary` trace."""

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.stack: list[_Call] = []

    def wants(self, module: Any) -> bool:
        # A subclass's `__call__` calling `super().__call__()` is one call.
        return not (self.stack and self.stack[-1].module is module)

    def enter(self, module: Any, method: str) -> _Call:
        graph = tf.compat.v1.get_default_graph()
        record = _Call(
            module,
            method,
            depth=len(self.stack),
            graph=graph,
            first_op=len(graph.get_operations()),
            parent=self.stack[-1] if self.stack else None,
        )
        self.calls.append(record)
        self.stack.append(record)
        return record

    def exit(self, record: _Call, outputs: Any, failed: bool) -> None:
        self.stack.pop()
        if failed or (record.method == "_unroll_sequence" and outputs is None):
            # Not a call after all: the core fell back to stepping.
            self.calls.remove(record)
            return
        record.outputs = outputs
        record.ops = tuple(record.graph.get_operations()[record.first_op :])

    def summarise(self, graph: Any) -> Summary:
        counter = flops.Counter()
        counter.graph_runs(graph)
        unique: dict[Any, tf.Variable] = {}
        rows = []
        paths: dict[int, str] = {}
        counts: dict[int, int] = {}
        # Variables of frozen modules (`snt.freeze`, `snt.lora`) count as
        # non-trainable: they are not in `trainable_variables`.
        frozen: set[int] = set()
        if freezing.ACTIVE:
            modules = {id(r.module): r.module for r in self.calls}
            for module in modules.values():
                if isinstance(module, tf.Module):
                    frozen |= freezing.frozen_ids(module)
        for record in self.calls:
            # `tf.function` traces twice when the first trace creates
            # variables with `tf.Variable` (not in an init scope): the rows
            # are those of the trace that gave `graph`.
            if _outermost(record.graph) is not graph:
                continue
            counts[id(record.module)] = counts.get(id(record.module), 0) + 1
            paths[id(record)] = _call_path(record, paths)
            variables = _variables(record.module)
            for v in variables:
                unique.setdefault(v.ref(), v)
            trainable, non_trainable, size = _sizes(variables, frozen)
            rows.append(
                SummaryRow(
                    path=paths[id(record)],
                    class_name=type(record.module).__name__,
                    call=counts[id(record.module)],
                    depth=record.depth,
                    sequence=record.method == "_unroll_sequence",
                    runs=counter.runs.get(id(record.graph), 1),
                    outputs=tuple(_output_specs(record.outputs)),
                    trainable=trainable,
                    non_trainable=non_trainable,
                    bytes=size,
                    flops=counter.count(record.ops),
                    module=record.module,
                )
            )
        total_flops = counter.count(graph.get_operations())
        variables = tuple(unique.values())
        trainable, non_trainable, size = _sizes(variables, frozen)
        return Summary(
            rows=tuple(rows),
            variables=variables,
            trainable=trainable,
            non_trainable=non_trainable,
            bytes=size,
            flops=total_flops,
            unknown_dims=counter.unknown_dims,
            unknown_loops=counter.unknown_loops,
        )


def _module_classes() -> list[type]:
    """Every subclass of `snt.Module` defined so far."""
    found: list[type] = []
    queue = [base.Module]
    seen: set[type] = set()
    while queue:
        cls = queue.pop()
        if cls in seen:
            continue
        seen.add(cls)
        found.append(cls)
        queue.extend(cls.__subclasses__())
    return found


def _recorded_methods() -> list[tuple[type, str]]:
    """`(class, method)` for each recorded method a module class defines."""
    return [
        (cls, name)
        for cls in _module_classes()
        for name in _RECORDED
        if cls.__dict__.get(name) is not None
        and not isinstance(cls.__dict__[name], (staticmethod, classmethod))
    ]


def _recording_method(cls: type, method: str, original: Any) -> Callable[..., Any]:
    """`original` (a function or method descriptor), recording its calls."""
    plain = isinstance(original, types.FunctionType)

    # Small and free of try/except: AutoGraph converts it (and then
    # `original`, as it would have) when the module is called from converted
    # code.
    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _Recorded(self, method) as recorded:
            if plain:
                outputs = original(self, *args, **kwargs)
            else:
                outputs = original.__get__(self, type(self))(*args, **kwargs)
            recorded.outputs = outputs
        return outputs

    return wrapper


# While a summary traces, in place (so which class defines `__call__`, the
# recurrent fast path's rule, is unchanged); a scope's value is its thread's
# `_Recording`.
_PATCH = class_patch.ClassPatch(_recording_method)


class _Recorded:
    """Records a call, if wanted, between `__enter__` and `__exit__`; a call
    that raises is dropped."""

    def __init__(self, module: Any, method: str) -> None:
        self.module = module
        self.method = method
        self.recording: _Recording | None = None
        self.record: _Call | None = None
        self.outputs: Any = None

    def __enter__(self) -> _Recorded:
        recording = _PATCH.current()
        if recording is not None and recording.wants(self.module):
            self.recording = recording
            self.record = recording.enter(self.module, self.method)
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if self.recording is not None and self.record is not None:
            self.recording.exit(self.record, self.outputs, failed=kind is not None)


def _variables(module: Any) -> list[tf.Variable]:
    """The module's variables (its submodules' too), each once."""
    if isinstance(module, tf.Module):
        found = keras_variables.variables(module)  # Keras 3 layers' too.
    else:
        found = ()
    unique: dict[Any, tf.Variable] = {}
    for v in found:
        unique.setdefault(v.ref(), v)
    return list(unique.values())


def _sizes(variables: Sequence[tf.Variable], frozen: set[int]) -> tuple[int, int, int]:
    trainable = non_trainable = size = 0
    for v in variables:
        count = v.shape.num_elements() or 0
        if v.trainable and id(v) not in frozen:
            trainable += count
        else:
            non_trainable += count
        size += count * tf.as_dtype(v.dtype).size
    return trainable, non_trainable, size


def _outermost(graph: Any) -> Any:
    """The function graph `graph` is nested in (itself if outermost)."""
    # Function graphs have an `outer_graph`; the eager context's graph not.
    while hasattr(getattr(graph, "outer_graph", None), "outer_graph"):
        graph = graph.outer_graph
    return graph


def _call_path(record: _Call, paths: dict[int, str]) -> str:
    """Where the call sits in the tree of calls, e.g. `vqvae/encoder/conv`.

    An outermost call is named by the module's name scope (`mlp`); a nested
    one adds to its caller's path the public attribute of the caller that
    holds the module (`encoder`), or else the module's name (`linear_0` for
    a module in a list). Name scopes alone are ambiguous: in eager mode two
    submodules of one parent may share one (two `snt.Sequential`s).
    """
    module = record.module
    if record.parent is None:
        scope = getattr(module, "name_scope", None)
        name = getattr(scope, "name", None) or getattr(module, "name", "")
        return str(name).rstrip("/")
    segment = getattr(module, "name", type(module).__name__)
    owner = (
        vars(record.parent.module) if hasattr(record.parent.module, "__dict__") else {}
    )
    for key, value in owner.items():
        if value is module and not key.startswith("_"):
            segment = key
            break
    return f"{paths[id(record.parent)]}/{segment}"


def _output_specs(outputs: Any, label: str = "") -> Iterator[tuple[str, Any]]:
    """`(label, spec)` for each tensor in a nest of outputs."""
    if isinstance(outputs, (tf.Tensor, tf.Variable)):
        yield label, tf.TensorSpec(outputs.shape, outputs.dtype)
    elif isinstance(outputs, Mapping):
        for key in sorted(outputs, key=str):
            yield from _output_specs(outputs[key], str(key))
    elif isinstance(outputs, tuple) and hasattr(outputs, "_fields"):
        for field in outputs._fields:  # type: ignore[attr-defined]
            yield from _output_specs(getattr(outputs, field), field)
    elif isinstance(outputs, (list, tuple)):
        for item in outputs:
            yield from _output_specs(item, label)
    elif isinstance(outputs, tf_compat.CompositeTensor):
        yield label, tf.type_spec_from_value(outputs)


def _describe_output(label: str, spec: Any) -> str:
    if isinstance(spec, tf.TensorSpec):
        dtype = variable_table._DTYPE_ABBREVIATIONS.get(spec.dtype, spec.dtype.name)
        if spec.shape.rank is None:
            text = f"{dtype}[...]"
        else:
            dims = ",".join("?" if d is None else str(d) for d in spec.shape.as_list())
            text = f"{dtype}[{dims}]"
    else:
        text = type(spec).__name__
    return f"{label}: {text}" if label else text


def _describe_call(row: SummaryRow) -> str:
    notes = []
    if row.sequence:
        notes.append("whole sequence")
    if row.call > 1:
        notes.append(f"call {row.call}")
    if row.runs is None:
        notes.append("in a loop")
    elif row.runs != 1:
        notes.append(f"runs {row.runs}x")
    return f"{row.path} ({', '.join(notes)})" if notes else row.path


# Where a table fits when no width is given and the output is not a terminal.
_DEFAULT_WIDTH = 100
_ALIGN = ("left", "left", "left", "right", "right", "right", "right")
# Line breaks in order of preference: after a space or `/`; then after `_` or
# `,` and between the words of a CamelCase name.
_BREAKS = (
    re.compile(r"(?<=[ /])"),
    re.compile(r"(?<=[_,])|(?<=[a-z])(?=[A-Z])|(?<=[A-Z0-9])(?=[A-Z][a-z])"),
)


def _output_width() -> int:
    """The terminal's width if `sys.stdout` is one, else `_DEFAULT_WIDTH`."""
    try:
        if sys.stdout is not None and sys.stdout.isatty():
            return shutil.get_terminal_size((_DEFAULT_WIDTH, 24)).columns
    except (AttributeError, ValueError, OSError):  # A closed or odd stream.
        pass
    return _DEFAULT_WIDTH


def _cells(row: SummaryRow, tree: bool) -> tuple[str, ...]:
    """A row's seven cells; `tree`: the path as an indented last segment."""
    name = _describe_call(row)
    if tree and row.depth:
        name = "  " * row.depth + name[len(row.path.rsplit("/", 1)[0]) + 1 :]
    outputs = "\n".join(_describe_output(label, s) for label, s in row.outputs)
    numbers = (row.trainable, row.non_trainable, row.bytes, row.flops)
    return (name, row.class_name, outputs, *(f"{n:,}" for n in numbers))


def _render(cells: Sequence[Sequence[str]], headers: Sequence[str], fmt: Any) -> str:
    return tabulate.tabulate(
        cells,
        headers=headers,
        tablefmt=fmt,
        disable_numparse=True,
        colalign=_ALIGN,
        preserve_whitespace=True,  # The tree's indentation.
    )


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _fit(
    rows: Sequence[SummaryRow], total: tuple[str, ...], fmt: Any, width: int
) -> str:
    """The table of `rows` and `total`, narrowed in steps to fit `width`
    (0: as it comes); see `Summary.format`."""
    cells = [_cells(row, tree=False) for row in rows] + [total]
    table = _render(cells, _HEADERS, fmt)
    if not width or _widest(table) <= width:
        return table
    cells = [_cells(row, tree=True) for row in rows] + [total]
    table = _render(cells, _HEADERS, fmt)
    if _widest(table) <= width:
        return table
    headers = (*_HEADERS[:4], "Non-\ntrainable", *_HEADERS[5:])
    table = _render(cells, headers, fmt)
    if _widest(table) <= width:
        return table
    # Wrap the output and class columns, narrowing each time the one that
    # adds the fewest lines per character saved (outputs on ties), then the
    # module column, until the table fits or none can be narrowed.
    widths = [max(_widest(c[i]) for c in cells) for i in range(3)]
    other = _widest(table) - sum(widths)  # The other columns and the rules.
    while other + sum(widths) > width:
        best = None
        # Module paths are wrapped only if that makes the table fit.
        paths = (0,) if other + sum(widths[1:]) + _floor(cells, 0) <= width else ()
        for columns in ((2, 1), paths):
            for i in columns:
                narrowed = _narrower(cells, i, widths[i])
                # Not below the header's width: that would add lines, not room.
                if len(_HEADERS[i]) + 2 <= narrowed < widths[i]:
                    trial = [*widths[:i], narrowed, *widths[i + 1 :]]
                    added = _height(cells, trial) - _height(cells, widths)
                    cost = added / (widths[i] - narrowed)
                    if best is None or cost < best[0]:
                        best = (cost, trial)
            if best is not None:
                break
        if best is None:
            break
        widths = best[1]
    # Narrowing in steps may overshoot: widen outputs, then modules, then
    # classes again as far as the width allows.
    for i in (2, 0, 1):
        while (wider := _wider(cells, i, widths[i])) > widths[i] and (
            other + sum(widths) - widths[i] + wider <= width
        ):
            widths[i] = wider
    return _render(_wrapped(cells, widths), headers, fmt)


def _wrapped(
    cells: Sequence[Sequence[str]], widths: Sequence[int]
) -> list[tuple[str, ...]]:
    """`cells` with their first columns wrapped at `widths`."""
    return [
        tuple(
            _wrap(text, widths[i]) if i < len(widths) else text
            for i, text in enumerate(row)
        )
        for row in cells
    ]


def _height(cells: Sequence[Sequence[str]], widths: Sequence[int]) -> int:
    """The lines of the table's body once wrapped at `widths`."""
    return sum(
        max(text.count("\n") + 1 for text in row) for row in _wrapped(cells, widths)
    )


def _floor(cells: Sequence[Sequence[str]], column: int) -> int:
    """The narrowest `column` can be wrapped."""
    return max(_widest(_wrap(c[column], 1)) for c in cells)


def _wider(cells: Sequence[Sequence[str]], column: int, width: int) -> int:
    """The width of `column` wrapped at the smallest limit that makes it
    wider than `width`, or `width` if none does."""
    natural = max(_widest(c[column]) for c in cells)
    for limit in range(width + 1, natural + 1):
        widened = max(_widest(_wrap(c[column], limit)) for c in cells)
        if widened > width:
            return widened
    return width


def _narrower(cells: Sequence[Sequence[str]], column: int, width: int) -> int:
    """The width of `column` wrapped at the largest limit that makes it
    narrower than `width`, or `width` if no limit does."""
    for limit in range(width - 1, 0, -1):
        narrowed = max(_widest(_wrap(c[column], limit)) for c in cells)
        if narrowed < width:
            return narrowed
    return width


def _wrap(text: str, limit: int) -> str:
    """Each line of `text` wrapped at `limit` characters where `_BREAKS`
    allow; continuation lines are indented 2 more than their first line."""
    return "\n".join(
        wrapped for line in text.splitlines() for wrapped in _wrap_line(line, limit)
    )


def _wrap_line(line: str, limit: int) -> list[str]:
    if len(line) <= limit:
        return [line]
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    pieces = [body]
    room = limit - len(indent) - 2  # On a continuation line.
    for pattern in _BREAKS:  # Finer breaks only inside pieces still too long.
        pieces = [
            part
            for piece in pieces
            for part in (
                pattern.split(piece) if len(piece.rstrip()) > room else [piece]
            )
            if part
        ]
    lines = [indent]
    for piece in pieces:
        if lines[-1].strip() and len((lines[-1] + piece).rstrip()) > limit:
            lines[-1] = lines[-1].rstrip()
            lines.append(indent + "  ")
        lines[-1] += piece
    lines[-1] = lines[-1].rstrip()
    return lines


def _human(number: int, unit: str = "") -> str:
    """`(1234567, "FLOPs")` -> `"1.2 MFLOPs"`; under 1000 as they are."""
    for size, prefix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k")):
        if number >= size:
            return f"{number / size:.1f} {prefix}{unit}"
    return f"{number} {unit}".rstrip()


def _human_bytes(number: int) -> str:
    for size, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if number >= size:
            return f"{number / size:.1f} {suffix}"
    return f"{number} B"
