"""The one place for TensorFlow behaviour without public API (`tf_compat.py`)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

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


# ---------------------------------------------------------------------------
# Restore-on-create in one `RestoreV2` per variable (`handle_deferred_dependencies`).


class _Scaled(snt.Module):
    """Creates `w` and, from the value `w` has then, `twice`."""

    def __init__(self, with_twice: bool = True):
        super().__init__(name="scaled")
        self._with_twice = with_twice

    @snt.once
    def _initialize(self, x: tf.Tensor) -> None:
        self.w = tf.Variable(tf.fill([x.shape[-1]], 1.0), name="w")
        if self._with_twice:
            self.twice = tf.Variable(self.w * 2.0, name="twice")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        self._initialize(x)
        return x * self.w


def _count_paths(monkeypatch) -> dict[str, int]:
    """Counts the variables restored by the quick path and by TensorFlow's."""
    counts = {"quick": 0, "tensorflow": 0}
    quick = tf_compat._restore_quickly
    general = tf.Module._handle_deferred_dependencies  # pyright: ignore[reportAttributeAccessIssue]

    def counting_quick(owner, name, trackable):
        restored = quick(owner, name, trackable)
        counts["quick"] += restored
        return restored

    def counting_general(owner, name, trackable):
        if owner._deferred_dependencies.get(name):
            counts["tensorflow"] += 1
        general(owner, name, trackable)

    monkeypatch.setattr(tf_compat, "_restore_quickly", counting_quick)
    monkeypatch.setattr(tf.Module, "_handle_deferred_dependencies", counting_general)
    return counts


def _saved(tmp_path, module: snt.Module, x: tf.Tensor, name: str = "ckpt") -> str:
    module(x)
    for v in module.variables:
        if v.dtype.is_floating:
            v.assign(tf.random.normal(v.shape, seed=len(v.name)))
    return tf.train.Checkpoint(model=module).write(str(tmp_path / name))


class _ConvNet(snt.Module):
    def __init__(self):
        super().__init__(name="conv_net")
        self.conv = snt.Conv2D(4, 3)
        self.norm = snt.BatchNorm(True, True)
        self.linear = snt.Linear(2)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        y = self.norm(self.conv(x), is_training=False)
        return self.linear(tf.reshape(y, [y.shape[0], -1]))


def test_modules_restore_variables_on_create_quickly(tmp_path, monkeypatch):
    x = tf.ones([2, 4, 4, 3])
    saved = _ConvNet()
    path = _saved(tmp_path, saved, x)
    counts = _count_paths(monkeypatch)
    fresh = _ConvNet()
    status = tf.train.Checkpoint(model=fresh).read(path)
    result = fresh(x)
    status.assert_consumed()
    # Conv w, b; batch norm scale, offset and two moving averages' hidden and
    # average (their counters exist before the read); linear w, b.
    assert counts == {"quick": 10, "tensorflow": 0}
    for a, b in zip(saved.variables, fresh.variables, strict=True):
        assert a.name == b.name
        assert a.numpy().tobytes() == b.numpy().tobytes()
    assert result.numpy().tobytes() == saved(x).numpy().tobytes()


def test_quick_restore_happens_when_the_module_assigns_the_variable(tmp_path):
    # `twice` is made from `w` right after `w` is assigned: `w` must already
    # hold the checkpoint's value then, as with TensorFlow's own method.
    x = tf.ones([1, 3])
    path = _saved(tmp_path, _Scaled(with_twice=False), x)
    fresh = _Scaled()
    tf.train.Checkpoint(model=fresh).read(path).expect_partial()
    fresh(x)
    reader = tf.train.load_checkpoint(path)
    restored = reader.get_tensor("model/w/.ATTRIBUTES/VARIABLE_VALUE")
    assert fresh.w.numpy().tolist() == restored.tolist()
    assert fresh.twice.numpy().tolist() == (restored * 2).tolist()


def test_two_pending_reads_restore_the_later_one(tmp_path, monkeypatch):
    x = tf.ones([1, 3])
    first = _saved(tmp_path, snt.Linear(2), x, "first")
    second = _saved(tmp_path, snt.Linear(2), x * 2, "second")
    counts = _count_paths(monkeypatch)
    fresh = snt.Linear(2)
    tf.train.Checkpoint(model=fresh).read(first)
    tf.train.Checkpoint(model=fresh).read(second)
    fresh(x)
    assert counts == {"quick": 0, "tensorflow": 2}  # TensorFlow's method.
    reader = tf.train.load_checkpoint(second)
    key = "model/w/.ATTRIBUTES/VARIABLE_VALUE"
    assert fresh.w.numpy().tolist() == reader.get_tensor(key).tolist()


def test_quick_restore_leaves_mismatches_to_tensorflow(tmp_path, monkeypatch):
    path = _saved(tmp_path, snt.Linear(2), tf.ones([1, 3]))
    counts = _count_paths(monkeypatch)
    # `w` has another shape, then both have another dtype: TensorFlow's method
    # restores them, and raises (`b`, created first, fits the first time).
    for x, quick in ((tf.ones([1, 4]), 1), (tf.ones([1, 3], tf.float64), 1)):  # Totals.
        fresh = snt.Linear(2)
        tf.train.Checkpoint(model=fresh).read(path)
        tensorflow = counts["tensorflow"]
        with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
            fresh(x)
        assert counts["quick"] == quick and counts["tensorflow"] == tensorflow + 1


def test_a_later_read_of_an_existing_variable_still_restores(tmp_path):
    x = tf.ones([1, 3])
    first = _saved(tmp_path, snt.Linear(2), x, "first")
    second = _saved(tmp_path, snt.Linear(2), x * 2, "second")
    fresh = snt.Linear(2)
    tf.train.Checkpoint(model=fresh).read(second)
    fresh(x)  # Restored from `second` on create.
    tf.train.Checkpoint(model=fresh).read(first).assert_consumed()
    reader = tf.train.load_checkpoint(first)
    assert (
        fresh.b.numpy().tolist()
        == reader.get_tensor("model/b/.ATTRIBUTES/VARIABLE_VALUE").tolist()
    )


def test_restore_on_create_in_a_trace_and_under_a_strategy(tmp_path):
    x = tf.ones([1, 3])
    saved = snt.Linear(2)
    path = _saved(tmp_path, saved, x)
    expected = saved(x).numpy().tolist()
    traced = snt.Linear(2)
    tf.train.Checkpoint(model=traced).read(path).assert_existing_objects_matched()
    assert tf.function(traced)(x).numpy().tolist() == expected
    strategy = tf.distribute.OneDeviceStrategy("cpu:0")
    with strategy.scope():
        replicated = snt.Linear(2)
        tf.train.Checkpoint(model=replicated).read(path)
        assert replicated(x).numpy().tolist() == expected


def test_plain_variables_are_told_from_distributed_and_functional_ones():
    assert tf_compat._is_plain_variable(tf.Variable(1.0))
    with tf.distribute.MirroredStrategy(["cpu:0"]).scope():
        assert not tf_compat._is_plain_variable(tf.Variable(1.0))
    with snt.functional.variables():
        assert not tf_compat._is_plain_variable(tf.Variable(1.0))
    assert not tf_compat._is_plain_variable(tf.constant(1.0))


def _last_line_printed(script: str, env: dict[str, str]) -> str:
    """The last line a fresh interpreter running `script` prints."""
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    return out.strip().splitlines()[-1]


def test_onednn_enabled_follows_tensorflows_setting() -> None:
    # TF_ENABLE_ONEDNN_OPTS decides when set (the test suite's conftest sets it
    # to 0 unless it is set already); a fresh process reports each setting.
    script = (
        "from sonnet._src import tf_compat; "
        "print(tf_compat.onednn_enabled(), tf_compat.onednn_enabled())"
    )
    for setting, expected in (("0", "False False"), ("1", "True True")):
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": setting}
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        assert _last_line_printed(script, env) == expected
    setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    if setting in ("0", "1"):
        assert tf_compat.onednn_enabled() is (setting == "1")


def test_replica_all_reduce_sum_works_inside_a_traced_cond():
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    strategy = snt.distribute.Replicator(devices)

    @tf.function
    def step(flag: tf.Tensor) -> tf.Tensor:
        def replica() -> tf.Tensor:
            context = tf.distribute.get_replica_context()
            value = tf.cast(context.replica_id_in_sync_group, tf.float32) + 1.0

            def reduce() -> tf.Tensor:
                summed = tf_compat.replica_all_reduce_sum(context, [value])
                assert summed is not None
                return summed[0]

            return tf.cond(flag, reduce, lambda: value)

        return strategy.run(replica)

    summed = strategy.experimental_local_results(step(tf.constant(True)))
    assert [float(v) for v in summed] == [3.0, 3.0]  # 1 + 2 on each replica.
    kept = strategy.experimental_local_results(step(tf.constant(False)))
    assert [float(v) for v in kept] == [1.0, 2.0]


def test_replica_all_reduce_sum_declines_strategies_without_collectives():
    context = tf.distribute.get_replica_context()  # The default strategy's.
    assert context is not None
    assert tf_compat.replica_all_reduce_sum(context, [tf.ones([])]) is None


def test_in_xla_trace_tells_compiled_traces():
    seen = []

    def f(x: tf.Tensor) -> tf.Tensor:
        seen.append(tf_compat.in_xla_trace())
        return x + 1

    tf.function(f, jit_compile=True)(tf.ones([]))
    tf.function(f)(tf.ones([]))
    assert seen == [True, False]


# TensorFlow's pooled CPU allocator (`prefer_pooled_allocator`).


def test_prefer_pooled_allocator_sets_the_pool_and_its_cap():
    environ: dict[str, str] = {}
    tf_compat.prefer_pooled_allocator(environ)
    assert environ[tf_compat.POOLED_ALLOCATOR] == "true"
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20
    # Never below TensorFlow's own cap (64 GiB), the host's memory above it.
    assert int(environ[tf_compat.POOL_LIMIT]) == max(pages, 1 << 16)


@pytest.mark.parametrize("choice", ["false", "0", "true"])
def test_prefer_pooled_allocator_keeps_the_users_choice(choice):
    environ = {tf_compat.POOLED_ALLOCATOR: choice}
    tf_compat.prefer_pooled_allocator(environ)
    assert environ == {tf_compat.POOLED_ALLOCATOR: choice}


def test_prefer_pooled_allocator_keeps_the_users_cap():
    environ = {tf_compat.POOL_LIMIT: "123"}
    tf_compat.prefer_pooled_allocator(environ)
    assert environ == {tf_compat.POOLED_ALLOCATOR: "true", tf_compat.POOL_LIMIT: "123"}


def test_prefer_pooled_allocator_without_the_hosts_memory(monkeypatch):
    def no_sysconf(name: str) -> int:
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", no_sysconf)
    environ: dict[str, str] = {}
    tf_compat.prefer_pooled_allocator(environ)
    assert environ == {tf_compat.POOLED_ALLOCATOR: "true"}


_POOL_SCRIPT = """
import tensorflow as tf
import sonnet
tf.ones([1024, 1024]) + 1.0
try:
    info = tf.config.experimental.get_memory_info("CPU:0")
except ValueError:
    print("malloc")
else:
    print("pool" if info["peak"] >= 4 * 1024 * 1024 else "pool without the tensor")
"""


@pytest.mark.parametrize(("setting", "expected"), [(None, "pool"), ("false", "malloc")])
def test_import_sonnet_takes_tensorflows_pooled_allocator(setting, expected):
    # Only the pooled allocator keeps counts that `get_memory_info` reports on
    # the CPU; `import sonnet` after `import tensorflow` (but before any op)
    # still chooses it, and the user's `false` keeps `malloc`.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (tf_compat.POOLED_ALLOCATOR, tf_compat.POOL_LIMIT)
    }
    if setting is not None:
        env[tf_compat.POOLED_ALLOCATOR] = setting
    # TensorFlow's oneDNN kernels bring their own pooled allocator.
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    assert _last_line_printed(_POOL_SCRIPT, env) == expected
