"""`snt.restore_checkpoint`: a checked `tf.train.Checkpoint.restore`.

What TensorFlow 2.21 itself does when a checkpoint does not fit:

* A variable that already exists and has a different shape: `restore`/`read`
  raise `ValueError("Received incompatible tensor with shape (3,) when
  attempting to restore variable with shape (5,) and name linear/b:0.")`,
  but only when they reach that variable: variables restored before it keep
  their new values, so a failed restore can leave a model half-restored.
* A variable created later (restore-on-create): the same `ValueError` is
  raised by the call that creates it (e.g. the module's first call).
* A damaged file: a missing or corrupted data file or index raises an
  `OpError` (`NotFoundError`, `DataLossError`, ...) before any variable
  changes, but a truncated data file gives `IndexError("Read less bytes than
  requested")` and a truncated index "not an sstable (bad magic number)",
  neither naming the file.

`restore_checkpoint` checks the file and every existing variable's shape and
dtype before restoring anything, so a bad file or a mismatched configuration
changes no variable and the error names the file, each variable (its path in
the checkpoint and its name) and both shapes.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf
from google.protobuf import message

from sonnet._src import errors, tf_compat

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_READ_ERRORS = (tf.errors.OpError, IndexError, ValueError, message.DecodeError)


def _unreadable(path: str, error: BaseException) -> ValueError:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return errors.bad_value(
        "save_path",
        "must be a complete, readable TensorFlow checkpoint (reading it failed "
        f"with {type(error).__name__}: {reason})",
        path,
    )


def _object_graph(
    reader: Any,
) -> tf_compat.TrackableObjectGraph | None:
    if not reader.has_tensor(_OBJECT_GRAPH_KEY):
        return None  # A name-based (TF1) checkpoint: nothing to match.
    graph = tf_compat.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
    return graph


def _mismatches(
    root: tf.train.Checkpoint,
    graph: tf_compat.TrackableObjectGraph,
    reader: Any,
) -> list[str]:
    """Existing variables whose checkpointed value has another shape or dtype."""
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    view = tf.train.TrackableView(root)
    found = []
    seen: set[int] = set()
    pending: list[tuple[Any, int, str]] = [(root, 0, "")]
    while pending:
        obj, node_id, path = pending.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        node = graph.nodes[node_id]
        if isinstance(obj, tf.Variable):
            for attribute in node.attributes:
                key = attribute.checkpoint_key
                if attribute.name != "VARIABLE_VALUE" or key not in shapes:
                    continue
                saved = tf.TensorShape(shapes[key])
                if saved != obj.shape or dtypes[key] != obj.dtype:
                    found.append(
                        f"{path} (variable {obj.name!r}): checkpoint has shape "
                        f"{tuple(saved.as_list())} dtype {dtypes[key].name}, the "
                        f"variable has shape {tuple(obj.shape.as_list())} dtype "
                        f"{obj.dtype.name}"
                    )
        children = {child.local_name: child.node_id for child in node.children}
        for name, child in view.children(obj).items():
            if name in children:
                child_path = f"{path}/{name}" if path else name
                pending.append((child, children[name], child_path))
    return sorted(found)


def restore_checkpoint(checkpoint: tf.train.Checkpoint, save_path: Any) -> Any:
    """Restores `checkpoint` from `save_path` after checking that it fits.

    Like `checkpoint.restore(save_path)` (it returns the same status object,
    and values for variables created later are restored on creation), but it
    first reads the file's object graph and compares the shape and dtype of
    every checkpointed value with the variable that already exists at the
    same path. If the file is missing, truncated or corrupted, or a module
    was built with a different configuration, it raises before changing any
    variable, with an error that names the file and, for each mismatch, the
    variable's checkpoint path and name and both shapes.

    Use it wherever a checkpoint comes from elsewhere, e.g. with a
    `tf.train.CheckpointManager`:
    `snt.restore_checkpoint(checkpoint, manager.latest_checkpoint)`.

    Args:
      checkpoint: The `tf.train.Checkpoint` to restore into.
      save_path: A checkpoint prefix as returned by `Checkpoint.save`/`write`
        or `tf.train.latest_checkpoint` (a string or path-like). None, what
        `latest_checkpoint` returns before the first save, restores nothing
        (as with `Checkpoint.restore`).

    Returns:
      The load status returned by `checkpoint.restore`.

    Raises:
      ValueError: If `save_path` cannot be read, or holds values whose shapes
        or dtypes differ from the existing variables'.
      TypeError: If `checkpoint` is not a `tf.train.Checkpoint` or
        `save_path` is not a path.

    >>> import tempfile
    >>> small = snt.Linear(3)
    >>> _ = small(tf.ones([1, 2]))
    >>> path = tf.train.Checkpoint(model=small).write(tempfile.mkdtemp() + "/ckpt")
    >>> same = snt.Linear(3)
    >>> _ = same(tf.ones([1, 2]))
    >>> _ = snt.restore_checkpoint(tf.train.Checkpoint(model=same), path)
    >>> bigger = snt.Linear(4)
    >>> _ = bigger(tf.ones([1, 2]))
    >>> try:
    ...     snt.restore_checkpoint(tf.train.Checkpoint(model=bigger), path)
    ... except ValueError as e:
    ...     print(str(e).split(": ", 1)[1].split("; ")[0])
    model/b (variable 'linear/b:0'): checkpoint has shape (3,) dtype float32, \
the variable has shape (4,) dtype float32
    """
    if not isinstance(checkpoint, tf.train.Checkpoint):
        raise errors.bad_type("checkpoint", "must be a tf.train.Checkpoint", checkpoint)
    if save_path is None:
        return checkpoint.restore(None)  # Nothing saved yet: initialize.
    try:
        path = os.fspath(save_path)
    except TypeError as e:
        raise errors.bad_type(
            "save_path", "must be a checkpoint prefix (str or path)", save_path
        ) from e
    try:
        reader = tf.train.load_checkpoint(path)
        graph = _object_graph(reader)
    except _READ_ERRORS as e:
        raise _unreadable(path, e) from e
    if graph is not None:
        mismatches = _mismatches(checkpoint, graph, reader)
        if mismatches:
            raise errors.bad_value(
                "save_path",
                "holds values that do not fit the existing variables (a module "
                "built with a different configuration?): " + "; ".join(mismatches),
                path,
            )
    try:
        return checkpoint.restore(path)
    except (tf.errors.OpError, IndexError) as e:
        raise _unreadable(path, e) from e
