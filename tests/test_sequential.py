"""Tests for `snt.Sequential`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def test_repr():
    assert repr(snt.Sequential()) == "Sequential()"
    seq = snt.Sequential([snt.Linear(1), snt.Linear(2)])
    assert (
        repr(seq) == "Sequential(layers=[Linear(output_size=1), Linear(output_size=2)])"
    )
    long = snt.Sequential(
        [
            snt.Linear(1000, name="a_very_long_name_for_this"),
            snt.Linear(200, name="another_long_name_here"),
        ]
    )
    assert repr(long) == (
        "Sequential(\n"
        "    layers=[Linear(output_size=1000, name='a_very_long_name_for_this'),\n"
        "            Linear(output_size=200, name='another_long_name_here')],\n"
        ")"
    )


def test_empty_is_identity():
    x = object()
    assert snt.Sequential()(x) is x
    assert snt.Sequential([])(x, 1, extra=2) is x
    with pytest.raises(ValueError, match="does not currently contain any variables"):
        snt.Sequential().variables  # noqa: B018


def test_layers_run_in_order_and_match_numpy():
    seq = snt.Sequential([snt.Linear(4), tf.nn.relu, snt.Linear(2)])
    x = tf.random.stateless_normal([3, 5], seed=[0, 1])
    y = seq(x)
    first, _, last = seq._layers
    h = np.maximum(x.numpy() @ first.w.numpy() + first.b.numpy(), 0)
    np.testing.assert_allclose(
        y.numpy(), h @ last.w.numpy() + last.b.numpy(), rtol=1e-5, atol=1e-6
    )


def test_variables_and_checkpoint_paths(tmp_path):
    seq = snt.Sequential([snt.Linear(4), tf.nn.relu, snt.Linear(2)])
    seq(tf.ones([1, 3]))
    assert [(v.name, v.shape.as_list()) for v in seq.variables] == [
        ("linear/b:0", [4]),
        ("linear/w:0", [3, 4]),
        ("linear/b:0", [2]),
        ("linear/w:0", [4, 2]),
    ]
    path = tf.train.Checkpoint(module=seq).write(str(tmp_path / "ckpt"))
    keys = {name for name, _ in tf.train.list_variables(path)}
    for layer in (0, 2):
        for var in ("w", "b"):
            assert f"module/_layers/{layer}/{var}/.ATTRIBUTES/VARIABLE_VALUE" in keys


def test_extra_arguments_go_to_the_first_layer_only():
    calls = []

    def first(x, scale, shift=0):
        calls.append(("first", scale, shift))
        return x * scale + shift

    def second(x):
        calls.append(("second",))
        return x + 1

    assert snt.Sequential([first, second])(2, 3, shift=1) == 8
    assert calls == [("first", 3, 1), ("second",)]


def test_python_values_and_generators():
    seq = snt.Sequential(f for f in [lambda v: str(v), len])
    assert seq(12345) == 5


def test_bad_layers():
    with pytest.raises(TypeError, match="`layers` must be an iterable of callables"):
        snt.Sequential(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`layers` must be an iterable of callables"):
        snt.Sequential("relu")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`layers` must contain only callables"):
        snt.Sequential([tf.nn.relu, 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"`layers` must contain only callables.*not"):
        snt.Sequential([snt.Linear])  # A class, not a module.
    with pytest.raises(TypeError, match="`layers` must be an iterable of callables"):
        snt.Sequential(tf.constant(1))  # type: ignore[arg-type]
