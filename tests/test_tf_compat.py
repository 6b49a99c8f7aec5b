"""The one place for TensorFlow behaviour without public API (`tf_compat.py`)."""

from __future__ import annotations

import pathlib
import re

import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import tf_compat, utils

_SRC = pathlib.Path(snt.__file__).parent

# Spellings that reach past TensorFlow's public API (or a second way to opt out
# of AutoGraph): allowed in `tf_compat.py` only.
_PRIVATE = re.compile(
    r"tensorflow\.(python|core|compiler|tsl)|tf\.__internal__|\._pywrap"
    r"|experimental\.do_not_convert|autograph_info__"
)


def test_private_tensorflow_uses_live_in_tf_compat_only():
    offenders = []
    for path in sorted(_SRC.rglob("*.py")):
        if path.name == "tf_compat.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _PRIVATE.search(line):
                offenders.append(f"{path.relative_to(_SRC)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_scan_sees_what_it_looks_for():
    assert _PRIVATE.search("from tensorflow.python.ops import array_ops")
    assert _PRIVATE.search("@tf.autograph.experimental.do_not_convert")
    assert not _PRIVATE.search("import tensorflow as tf")


def test_no_autograph_marks_the_function_itself():
    def f(x: tf.Tensor) -> tf.Tensor:
        return x

    assert utils.no_autograph(f) is f  # No wrapper: no per-call cost.


def test_no_autograph_stops_conversion_and_unmarked_code_converts():
    def converted(x: tf.Tensor) -> tf.Tensor:
        if x > 0:  # Python control flow on a tensor: needs AutoGraph in a graph.
            return x
        return -x

    @utils.no_autograph
    def unconverted(x: tf.Tensor) -> tf.Tensor:
        if x > 0:
            return x
        return -x

    spec = tf.TensorSpec([], tf.float32)
    assert float(tf.function(converted)(tf.constant(-2.0))) == 2.0
    tf.function(converted).get_concrete_function(spec)
    with pytest.raises(TypeError):  # OperatorNotAllowedInGraphError
        tf.function(unconverted).get_concrete_function(spec)


def test_no_autograph_survives_module_method_wrapping():
    class M(snt.Module):
        @utils.no_autograph
        def __call__(self, x: tf.Tensor) -> tf.Tensor:
            if x > 0:
                return x
            return -x

    m = M()
    with pytest.raises(TypeError):
        tf.function(m).get_concrete_function(tf.TensorSpec([], tf.float32))
    assert float(m(tf.constant(-3.0))) == 3.0  # Eagerly it is plain Python.


def test_composite_tensor_covers_ragged_and_sparse():
    ragged = tf.ragged.constant([[1], [2, 3]])
    sparse = tf.sparse.from_dense([[0, 1]])
    assert isinstance(ragged, tf_compat.CompositeTensor)
    assert isinstance(sparse, tf_compat.CompositeTensor)
    assert not isinstance(tf.constant(1), tf_compat.CompositeTensor)


def test_trackable_object_graph_reads_a_checkpoint(tmp_path):
    module = snt.Linear(2)
    module(tf.ones([1, 3]))
    path = tf.train.Checkpoint(module=module).write(str(tmp_path / "ckpt"))
    reader = tf.train.load_checkpoint(path)
    graph = tf_compat.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    names = {c.local_name for node in graph.nodes for c in node.children}
    assert {"module", "w", "b"} <= names


class _Unconverted(snt.Module):
    @utils.no_autograph
    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.abs(x)


class _Inherits(_Unconverted):
    pass


class _Converted(_Unconverted):
    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        if x > 0:  # Needs AutoGraph in a graph.
            return x
        return -x


def test_modules_with_a_marked_call_carry_the_marker():
    # AutoGraph looks for the marker on the object it calls (the instance): a
    # marked `__call__` alone leaves its name-scope wrapper and every callee
    # converted (4x slower traces of a 128-layer MLP).
    assert hasattr(_Unconverted(name="m"), "autograph_info__")
    assert hasattr(_Inherits(name="m"), "autograph_info__")
    assert not hasattr(_Converted(name="m"), "autograph_info__")
    assert not hasattr(snt.nets.MLP([2]), "autograph_info__")  # Unmarked.
    assert hasattr(snt.Linear(2), "autograph_info__")


def test_a_subclass_with_its_own_call_is_converted_again():
    assert (
        float(tf.function(lambda x: _Converted(name="m")(x))(tf.constant(-2.0))) == 2.0
    )
