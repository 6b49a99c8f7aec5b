"""bfloat16 convolutions computed in float32 on CPUs without bfloat16 units.

`precision.bfloat16_convolutions_in_float32()` picks the path; the plain
bfloat16 kernels (the path switched off) are the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src import precision

CONVS = {
    "conv1d": (lambda: snt.Conv1D(4, 3), [2, 9, 3]),
    "conv2d": (lambda: snt.Conv2D(8, 3, stride=2), [2, 9, 9, 3]),
    "conv2d_nchw": (lambda: snt.Conv2D(4, 3, data_format="NCHW"), [2, 3, 6, 6]),
    "conv2d_dilated": (lambda: snt.Conv2D(4, 3, rate=2), [2, 8, 8, 3]),
    "conv3d": (lambda: snt.Conv3D(2, 2), [1, 4, 4, 4, 2]),
    "conv2d_transpose": (lambda: snt.Conv2DTranspose(4, 3, stride=2), [2, 4, 4, 3]),
    "depthwise_conv2d": (lambda: snt.DepthwiseConv2D(3, 2), [2, 6, 6, 3]),
}


def _run(name: str, in_float32: bool, monkeypatch) -> tuple[tf.Tensor, list]:
    monkeypatch.setattr(
        precision, "bfloat16_convolutions_in_float32", lambda: in_float32
    )
    tf.random.set_seed(0)
    factory, shape = CONVS[name]
    conv = snt.precision.apply(factory(), "mixed_bfloat16")
    x = tf.random.normal(shape, seed=1)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            y = conv(x)
            loss = tf.reduce_sum(tf.square(tf.cast(y, tf.float32)))
        return y, tape.gradient(loss, conv.trainable_variables)

    y, grads = step(x)
    ops = step.get_concrete_function(x).graph.get_operations()
    conv_dtypes = {
        op.get_attr("T")
        for op in ops
        if op.type.startswith(("Conv", "DepthwiseConv")) and "T" in op.node_def.attr
    }
    assert conv_dtypes == {tf.float32 if in_float32 else tf.bfloat16}
    return y, grads


@pytest.mark.parametrize("name", sorted(CONVS))
def test_float32_path_matches_the_bfloat16_kernels(name, monkeypatch):
    y_bf16, g_bf16 = _run(name, False, monkeypatch)
    y_f32, g_f32 = _run(name, True, monkeypatch)
    assert y_f32.dtype == y_bf16.dtype == tf.bfloat16
    a = tf.cast(y_f32, tf.float32).numpy()
    b = tf.cast(y_bf16, tf.float32).numpy()
    scale = max(1.0, float(np.abs(b).max()))
    np.testing.assert_allclose(a, b, rtol=1e-2, atol=1e-2 * scale)
    for ga, gb in zip(g_f32, g_bf16, strict=True):
        assert ga.dtype == gb.dtype == tf.float32
        rel = np.linalg.norm(ga.numpy() - gb.numpy()) / np.linalg.norm(gb.numpy())
        assert rel < 0.03


def test_no_policy_and_float16_keep_their_kernels(monkeypatch):
    monkeypatch.setattr(precision, "bfloat16_convolutions_in_float32", lambda: True)
    x = tf.ones([1, 5, 5, 2])
    for policy, dtype in ((None, tf.float32), ("mixed_float16", tf.float16)):
        conv = snt.Conv2D(3, 3)
        if policy is not None:
            snt.precision.apply(conv, policy)
        graph = tf.function(conv).get_concrete_function(x).graph
        types = {o.get_attr("T") for o in graph.get_operations() if o.type == "Conv2D"}
        assert types == {dtype}


@pytest.mark.parametrize(
    ("machine", "flags", "onednn", "expected"),
    [
        ("x86_64", frozenset({"avx2", "fma"}), False, True),
        ("x86_64", frozenset({"avx2", "fma"}), True, True),
        ("x86_64", frozenset({"avx2", "avx512_bf16"}), True, False),
        ("x86_64", frozenset({"avx2", "amx_bf16"}), True, False),
        # bfloat16 units, but TensorFlow's default kernels do not use them.
        ("x86_64", frozenset({"avx2", "avx512_bf16"}), False, True),
        ("x86_64", None, True, False),
        ("aarch64", frozenset({"bf16"}), True, False),
    ],
)
def test_detection(machine, flags, onednn, expected, monkeypatch):
    monkeypatch.setattr(precision.platform, "machine", lambda: machine)
    monkeypatch.setattr(precision, "_cpu_flags", lambda: flags)
    monkeypatch.setattr(precision.tf_compat, "onednn_enabled", lambda: onednn)
    precision.bfloat16_convolutions_in_float32.cache_clear()
    try:
        # This test machine has no GPU (CI): the CPU decides.
        if tf.config.list_logical_devices("GPU"):
            expected = False
        assert precision.bfloat16_convolutions_in_float32() is expected
    finally:
        precision.bfloat16_convolutions_in_float32.cache_clear()


def test_cpu_flags_are_read_on_linux():
    flags = precision._cpu_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo here")
    assert isinstance(flags, frozenset) and flags
