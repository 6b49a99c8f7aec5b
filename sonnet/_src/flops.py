"""Floating-point operations of a traced graph, counted op by op (for `snt.summary`).

The count is read from the ops and their static shapes, nothing is run. The
conventions (a multiply-add is 2 FLOPs) are in `OP_RULES` and in
`snt.summary`'s docstring:

- matrix products and convolutions: 2 per multiply-add, e.g. `2 * M * N * K`
  for an `[M, K] x [K, N]` `MatMul`, `2 * outputs * kh * kw * cin` for a
  `Conv2D` (`cin` per group);
- element-wise arithmetic, activations and comparisons: 1 per output element
  (`AddN`: one per element per added operand after the first);
- reductions and pooling: 1 per element read;
- `Softmax`/`LogSoftmax`: 5 per element (max, subtract, exp, sum, divide);
- fused batch norm: 2 per element with given statistics (scale, shift), 6
  when it computes them (mean 1, variance 3, then scale and shift);
- everything else (reshapes, gathers, casts, random numbers, ...) and any op
  that neither reads nor writes floating point values: 0.

Control flow is followed into the functions it calls: a `tf.function` call
counts its body; a `tf.cond`/`tf.case` its most expensive branch; a
`tf.while_loop` its body (and condition) once per iteration when the number of
iterations is known while tracing (`maximum_iterations`, which
`snt.dynamic_unroll` sets), else once (`Counter.unknown_loops` tells).
Dimensions unknown while tracing (a `None` batch size) count as 1
(`Counter.unknown_dims` tells), so such counts are per unit of that dimension.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import tensorflow as tf

from sonnet._src import tf_compat

_MATMUL = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"})
# 2 * outputs * (every filter dimension but the last): kernel size times the
# input channels per group.
_CONV = frozenset({"Conv2D", "Conv3D", "Conv"})
# Transposed convolutions: the forward convolution's count, with the input
# (`out_backprop`) in the place of the output.
_CONV_TRANSPOSE = frozenset(
    {"Conv2DBackpropInput", "Conv2DBackpropInputV2", "Conv3DBackpropInputV2"}
)
_DEPTHWISE = frozenset({"DepthwiseConv2dNative"})
_POOL = frozenset({"MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D", "MaxPoolV2"})
_REDUCTION = frozenset(
    {"Sum", "Mean", "Max", "Min", "Prod", "EuclideanNorm", "ArgMax", "ArgMin"}
    | {"Cumsum", "Cumprod", "L2Loss"}
)
_SOFTMAX = frozenset({"Softmax", "LogSoftmax"})
_BATCH_NORM = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"})
_ELEMENTWISE = frozenset(
    {"Add", "AddV2", "BiasAdd", "Sub", "Mul", "MulNoNan", "Div", "RealDiv"}
    | {"DivNoNan", "FloorDiv", "FloorMod", "Mod", "TruncateDiv", "Pow"}
    | {"Maximum", "Minimum", "SquaredDifference", "Xlogy", "Xdivy", "Atan2"}
    | {"Neg", "Abs", "Sign", "Square", "Sqrt", "Rsqrt", "Reciprocal", "Inv"}
    | {"Exp", "Expm1", "Log", "Log1p", "Sin", "Cos", "Tan", "Erf", "Erfc"}
    | {"Floor", "Ceil", "Round", "Rint", "Sigmoid", "Tanh", "Relu", "Relu6"}
    | {"Elu", "Selu", "LeakyRelu", "Softplus", "Softsign", "Gelu", "ClipByValue"}
    | {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"}
    | {"IsNan", "IsFinite", "IsInf", "AssignAddVariableOp", "AssignSubVariableOp"}
)
_LOOPS = frozenset({"While", "StatelessWhile"})
_BRANCHES = frozenset({"If", "StatelessIf", "Case", "StatelessCase"})

#: How each op type is counted (the op types not listed count 0).
OP_RULES: dict[str, str] = {
    **dict.fromkeys(_MATMUL, "2 * output elements * contracted size"),
    **dict.fromkeys(_CONV, "2 * output elements * kernel size * input channels"),
    **dict.fromkeys(
        _CONV_TRANSPOSE, "2 * input elements * kernel size * output channels"
    ),
    **dict.fromkeys(_DEPTHWISE, "2 * output elements * kernel size"),
    "Einsum": "2 * product of all index sizes (two operands)",
    **dict.fromkeys(_POOL, "output elements * window size"),
    **dict.fromkeys(_REDUCTION, "input elements"),
    **dict.fromkeys(_SOFTMAX, "5 * elements"),
    **dict.fromkeys(_BATCH_NORM, "2 * elements (6 when computing the statistics)"),
    **dict.fromkeys(_ELEMENTWISE, "output elements"),
    "AddN": "(operands - 1) * output elements",
    **dict.fromkeys(_LOOPS, "iterations * (body + condition)"),
    **dict.fromkeys(_BRANCHES, "the most expensive branch"),
}


def _is_float(dtype: tf.DType) -> bool:
    return dtype.is_floating or dtype.is_complex


class Counter:
    """Counts the FLOPs of graph ops, following calls into function graphs.

    Results are cached per op, so counting nested ranges of the same graph
    (a module and its submodules) costs each op once.
    """

    def __init__(self) -> None:
        self.unknown_dims = False
        self.unknown_loops = False
        self._cache: dict[int, int] = {}
        # id(function graph) -> how many times it runs per run of the outer
        # graph (None: a loop whose number of iterations is unknown).
        self.runs: dict[int, int | None] = {}

    def count(self, ops: Iterable[tf.Operation]) -> int:
        """The FLOPs of `ops`."""
        return sum(self.op_flops(op) for op in ops)

    def graph_runs(self, graph: Any, outer_runs: int | None = 1) -> None:
        """Records in `runs` how often `graph` and the graphs it calls run."""
        self.runs.setdefault(id(graph), outer_runs)
        for op in graph.get_operations():
            called = tf_compat.called_graphs(op)
            if not called:
                continue
            trips = self._trips(op) if op.type in _LOOPS else 1
            runs = None if outer_runs is None or trips is None else outer_runs * trips
            for graphs in called.values():
                for inner in graphs:
                    self.graph_runs(inner, runs)

    def op_flops(self, op: tf.Operation) -> int:
        key = id(op)
        flops = self._cache.get(key)
        if flops is None:
            flops = self._compute(op)
            self._cache[key] = flops
        return flops

    def _elements(self, shape: tf.TensorShape) -> int:
        if shape.rank is None:
            self.unknown_dims = True
            return 1
        dims = shape.as_list()
        if None in dims:
            self.unknown_dims = True
        return math.prod(1 if d is None else d for d in dims)

    def _elementwise_size(self, tensor: tf.Tensor) -> int:
        """Elements of an element-wise op's result. Where even its rank is
        unknown (it reads a variable inside a nested `tf.function`), the
        largest fully known operand up the chain of element-wise ops gives
        the size; failing that, unknown dimensions count as 1."""
        known = _known_size(tensor, depth=0)
        return self._elements(tensor.shape) if known is None else known

    def _dims(self, shape: tf.TensorShape) -> list[int]:
        if shape.rank is None:
            self.unknown_dims = True
            return []
        dims = shape.as_list()
        if None in dims:
            self.unknown_dims = True
        return [1 if d is None else d for d in dims]

    def _compute(self, op: tf.Operation) -> int:
        kind = op.type
        if kind in _LOOPS or kind in _BRANCHES or tf_compat.called_graphs(op):
            return self._control_flow(op)
        tensors = [*op.inputs, *op.outputs]
        if not any(_is_float(t.dtype) for t in tensors):
            return 0
        if kind in _ELEMENTWISE:
            if kind.startswith("Assign"):
                return self._elementwise_size(op.inputs[1])
            return self._elementwise_size(op.outputs[0])
        if kind in _MATMUL:
            return self._matmul(op)
        if kind in _CONV:
            filters = self._dims(op.inputs[1].shape)
            return 2 * self._elements(op.outputs[0].shape) * math.prod(filters[:-1])
        if kind in _CONV_TRANSPOSE:
            filters = self._dims(op.inputs[1].shape)
            return 2 * self._elements(op.inputs[2].shape) * math.prod(filters[:-1])
        if kind in _DEPTHWISE:
            filters = self._dims(op.inputs[1].shape)
            return 2 * self._elements(op.outputs[0].shape) * math.prod(filters[:-2])
        if kind == "Einsum":
            return self._einsum(op)
        if kind in _POOL:
            return self._pool(op)
        if kind in _REDUCTION:
            return self._elements(op.inputs[0].shape)
        if kind in _SOFTMAX:
            return 5 * self._elements(op.outputs[0].shape)
        if kind in _BATCH_NORM:
            per_element = 6 if op.get_attr("is_training") else 2
            return per_element * self._elements(op.inputs[0].shape)
        if kind == "AddN":
            return (len(op.inputs) - 1) * self._elements(op.outputs[0].shape)
        return 0

    def _matmul(self, op: tf.Operation) -> int:
        a = self._dims(op.inputs[0].shape)
        if not a:
            return 0
        if op.type == "MatMul":
            transposed = op.get_attr("transpose_a")
        else:
            transposed = op.get_attr("adj_x")
        contracted = a[-2] if transposed else a[-1]
        return 2 * self._elements(op.outputs[0].shape) * contracted

    def _einsum(self, op: tf.Operation) -> int:
        equation = op.get_attr("equation")
        if isinstance(equation, bytes):
            equation = equation.decode()
        inputs = equation.replace(" ", "").split("->")[0].split(",")
        if len(inputs) != 2 or "." in equation:
            return self._elements(op.outputs[0].shape)
        sizes: dict[str, int] = {}
        for letters, tensor in zip(inputs, op.inputs):
            for letter, size in zip(letters, self._dims(tensor.shape)):
                sizes[letter] = max(sizes.get(letter, 1), size)
        return 2 * math.prod(sizes.values())

    def _pool(self, op: tf.Operation) -> int:
        if op.type == "MaxPoolV2":
            window = tf.get_static_value(op.inputs[1])
            if window is None:
                return self._elements(op.outputs[0].shape)
        else:
            window = op.get_attr("ksize")
        return self._elements(op.outputs[0].shape) * int(np.prod(window))

    def _control_flow(self, op: tf.Operation) -> int:
        called = tf_compat.called_graphs(op)
        totals = {
            attr: [self.count(g.get_operations()) for g in graphs]
            for attr, graphs in called.items()
        }
        if op.type in _LOOPS:
            trips = self._trips(op)
            if trips is None:
                self.unknown_loops = True
                trips = 1
            body = sum(totals.get("body", []))
            condition = sum(totals.get("cond", []))
            return trips * body + (trips + 1) * condition
        if op.type in _BRANCHES:
            return max((f for flops in totals.values() for f in flops), default=0)
        return sum(f for flops in totals.values() for f in flops)

    def _trips(self, op: tf.Operation) -> int | None:
        """The number of iterations of a `tf.while_loop`, if known when traced.

        A v2 while loop's second input is its `maximum_iterations` (-1 for
        none); `snt.dynamic_unroll` sets it to the number of steps.
        """
        if len(op.inputs) < 2:
            return None
        value = static_value(op.inputs[1])
        if value is None or np.ndim(value) != 0 or int(value) < 0:
            return None
        return int(value)


def _known_size(tensor: tf.Tensor, depth: int) -> int | None:
    if tensor.shape.is_fully_defined():
        return tensor.shape.num_elements()
    op = tensor.op
    # Only a result of unknown rank: with a known rank the unknown dimensions
    # count as 1 (a scalar operand must not stand for a `[None, 10]` result).
    if tensor.shape.rank is not None or op.type not in _ELEMENTWISE or depth > 20:
        return None
    sizes = [_known_size(t, depth + 1) for t in op.inputs]
    known = [size for size in sizes if size is not None]
    return max(known) if known else None


def static_value(tensor: tf.Tensor) -> Any:
    """`tf.get_static_value`, also through the small integer arithmetic that
    computes sizes from static shapes (`tf.shape(x)[0] - 1`)."""
    value = tf.get_static_value(tensor)
    if value is not None:
        return value
    op = tensor.op
    if op.type in ("Identity", "Cast"):
        return static_value(op.inputs[0])
    inputs = [static_value(t) for t in op.inputs]
    if any(v is None for v in inputs):
        return None
    if op.type in ("Sub", "AddV2", "Add", "Maximum", "Minimum", "Mul"):
        apply = {
            "Sub": np.subtract,
            "AddV2": np.add,
            "Add": np.add,
            "Maximum": np.maximum,
            "Minimum": np.minimum,
            "Mul": np.multiply,
        }[op.type]
        return apply(inputs[0], inputs[1])
    if op.type == "StridedSlice":
        return _strided_slice(op, *inputs)
    return None


def _strided_slice(op: tf.Operation, x: Any, begin: Any, end: Any, strides: Any) -> Any:
    if op.get_attr("ellipsis_mask") or op.get_attr("new_axis_mask"):
        return None
    begin_mask, end_mask = op.get_attr("begin_mask"), op.get_attr("end_mask")
    shrink = op.get_attr("shrink_axis_mask")
    index: list[Any] = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if shrink & (1 << i):
            index.append(int(b))
        else:
            start = None if begin_mask & (1 << i) else int(b)
            stop = None if end_mask & (1 << i) else int(e)
            index.append(slice(start, stop, int(s)))
    try:
        return np.asarray(x)[tuple(index)]
    except IndexError:
        return None
