"""`snt.summary`: rows, parameters and FLOPs checked against hand counts."""

from __future__ import annotations

import io
import math
import os
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt


def rows(result) -> list[tuple[str, str, int, int, int]]:
    return [
        (r.path, r.class_name, r.trainable, r.non_trainable, r.flops)
        for r in result.rows
    ]


# ---------------------------------------------------------------------------
# Hand-counted parameters and FLOPs.


def test_linear():
    result = snt.summary(snt.Linear(3), tf.TensorSpec([8, 4]))
    # [8, 4] x [4, 3]: 8 * 3 outputs of 4 multiply-adds each, then the bias.
    flops = 2 * 8 * 4 * 3 + 8 * 3
    assert rows(result) == [("linear", "Linear", 4 * 3 + 3, 0, flops)]
    (row,) = result.rows
    assert row.outputs == (("", tf.TensorSpec([8, 3], tf.float32)),)
    assert (row.call, row.depth, row.runs, row.sequence) == (1, 0, 1, False)
    assert row.bytes == 15 * 4
    assert (result.trainable, result.non_trainable) == (15, 0)
    assert (result.bytes, result.flops) == (60, flops)
    assert not result.unknown_dims and not result.unknown_loops


def test_conv2d():
    conv = snt.Conv2D(8, kernel_shape=3, stride=2)
    result = snt.summary(conv, tf.TensorSpec([2, 9, 9, 3]))
    # SAME padding, stride 2: 5x5 outputs; each one 3*3*3 multiply-adds.
    outputs = 2 * 5 * 5 * 8
    assert rows(result) == [
        ("conv2_d", "Conv2D", 3 * 3 * 3 * 8 + 8, 0, 2 * outputs * 27 + outputs)
    ]
    assert result.rows[0].outputs[0][1].shape == (2, 5, 5, 8)


def test_mlp_rows_in_call_order_and_an_inclusive_total():
    mlp = snt.nets.MLP([16, 10])
    result = snt.summary(mlp, tf.TensorSpec([8, 32]))
    linear_0 = 2 * 8 * 32 * 16 + 8 * 16
    linear_1 = 2 * 8 * 16 * 10 + 8 * 10
    relu = 8 * 16
    assert rows(result) == [
        ("mlp", "MLP", 698, 0, linear_0 + relu + linear_1),
        ("mlp/linear_0", "Linear", 32 * 16 + 16, 0, linear_0),
        ("mlp/linear_1", "Linear", 16 * 10 + 10, 0, linear_1),
    ]
    assert [r.depth for r in result.rows] == [0, 1, 1]
    assert result.trainable == 698 and result.flops == linear_0 + relu + linear_1


def resnet50_by_hand(batch: int, size: int, classes: int) -> dict[str, int]:
    """Parameters and FLOPs of ResNet-50 v1 (inference), layer by layer."""
    counts = {"trainable": 0, "bn_channels": 0, "bn_layers": 0, "flops": 0}

    def conv(h: int, cin: int, cout: int, kernel: int, stride: int) -> int:
        out = math.ceil(h / stride)  # SAME padding.
        counts["trainable"] += kernel * kernel * cin * cout  # No bias.
        counts["flops"] += 2 * batch * out * out * cout * kernel * kernel * cin
        return out

    def batch_norm(h: int, c: int) -> None:  # Scale and shift per element.
        counts["trainable"] += 2 * c
        counts["bn_channels"] += c
        counts["bn_layers"] += 1
        counts["flops"] += 2 * batch * h * h * c

    def elementwise(h: int, c: int) -> None:  # A ReLU or an addition.
        counts["flops"] += batch * h * h * c

    h = conv(size, 3, 64, 7, 2)
    batch_norm(h, 64)
    elementwise(h, 64)
    h = math.ceil(h / 2)  # 3x3 max pool, stride 2: 9 reads per output.
    counts["flops"] += batch * h * h * 64 * 9
    cin = 64
    for blocks, channels, stride in zip(
        [3, 4, 6, 3], [256, 512, 1024, 2048], [1, 2, 2, 2]
    ):
        for i in range(blocks):
            s = stride if i == 0 else 1
            if i == 0:  # Projection shortcut.
                batch_norm(conv(h, cin, channels, 1, s), channels)
            mid = channels // 4
            h1 = conv(h, cin, mid, 1, 1)
            batch_norm(h1, mid)
            elementwise(h1, mid)
            h2 = conv(h1, mid, mid, 3, s)
            batch_norm(h2, mid)
            elementwise(h2, mid)
            h3 = conv(h2, mid, channels, 1, 1)
            batch_norm(h3, channels)
            elementwise(h3, channels)  # + shortcut
            elementwise(h3, channels)  # relu
            h, cin = h3, channels
    counts["flops"] += batch * h * h * cin  # Global mean pool.
    counts["trainable"] += cin * classes + classes
    counts["flops"] += 2 * batch * cin * classes + batch * classes
    return counts


def test_resnet50():
    net = snt.nets.ResNet50(num_classes=1000)
    result = snt.summary(net, tf.TensorSpec([1, 224, 224, 3]), is_training=False)
    expected = resnet50_by_hand(batch=1, size=224, classes=1000)
    assert result.trainable == expected["trainable"] == 25_557_032
    # Each batch norm's two moving averages hold `hidden`, `average` ([C]
    # each) and an int64 step `counter`.
    bn_channels, bn_layers = expected["bn_channels"], expected["bn_layers"]
    assert bn_layers == 53
    assert result.non_trainable == 4 * bn_channels + 2 * bn_layers
    assert result.flops == expected["flops"]
    assert 8.1e9 < result.flops < 8.3e9  # The usual "4.1 G multiply-adds".
    assert result.bytes == 4 * (result.trainable + 4 * bn_channels) + 8 * 2 * bn_layers
    top = [r for r in result.rows if r.depth == 1]
    assert [r.path for r in top] == [
        "res_net50/initial_conv",
        "res_net50/initial_batchnorm",
        "res_net50/block_group_0",
        "res_net50/block_group_1",
        "res_net50/block_group_2",
        "res_net50/block_group_3",
        "res_net50/logits",
    ]
    assert result.rows[0].flops == result.flops
    text = result.format(depth=1)
    assert "25,557,032" in text and "block_group_0/" not in text
    assert "25.6 M trainable" in text


# ---------------------------------------------------------------------------
# Counting once.


def test_a_module_called_twice_has_two_rows_and_counts_once():
    linear = snt.Linear(3)
    seq = snt.Sequential([linear, linear])
    result = snt.summary(seq, tf.TensorSpec([2, 3]))
    one = 2 * 2 * 3 * 3 + 2 * 3
    assert rows(result) == [
        ("sequential", "Sequential", 12, 0, 2 * one),
        ("sequential/linear", "Linear", 12, 0, one),
        ("sequential/linear", "Linear", 12, 0, one),
    ]
    assert [r.call for r in result.rows] == [1, 1, 2]
    assert result.trainable == 12 and len(result.variables) == 2
    assert "sequential/linear (call 2)" in str(result)


class EncoderDecoder(snt.Module):
    def __init__(self):
        super().__init__()
        self.encoder = snt.Sequential([snt.Linear(4, name="layer")])
        self.decoder = snt.Sequential([snt.Linear(2, name="layer")])

    def __call__(self, x):
        return self.decoder(self.encoder(x))


def test_paths_follow_public_attributes_where_name_scopes_collide():
    model = EncoderDecoder()
    # Eagerly, name scopes are not made unique: both are `.../sequential/`.
    assert model.encoder.name_scope.name == model.decoder.name_scope.name
    result = snt.summary(model, tf.TensorSpec([1, 3]))
    assert [r.path for r in result.rows] == [
        "encoder_decoder",
        "encoder_decoder/encoder",
        "encoder_decoder/encoder/layer",
        "encoder_decoder/decoder",
        "encoder_decoder/decoder/layer",
    ]
    assert [r.call for r in result.rows] == [1, 1, 1, 1, 1]


class Tied(snt.Module):
    """An encoder and a decoder that share one weight matrix."""

    def __init__(self):
        super().__init__()
        self.encoder = snt.Linear(4, with_bias=False, name="encoder")
        self.decoder_bias = tf.Variable(tf.zeros([6]), name="decoder_bias")

    def __call__(self, x):
        h = self.encoder(x)
        self.decoder_w = self.encoder.w  # Shared: also an attribute here.
        return tf.matmul(h, self.decoder_w, transpose_b=True) + self.decoder_bias


def test_shared_variables_count_once():
    result = snt.summary(Tied(), tf.TensorSpec([2, 6]))
    assert result.rows[0].trainable == 6 * 4 + 6
    assert result.trainable == 6 * 4 + 6
    flops = (2 * 2 * 6 * 4) * 2 + 2 * 6
    assert result.flops == flops
    assert "multiple" not in str(result)


# ---------------------------------------------------------------------------
# Built or not, real inputs or specs.


def test_builds_an_unbuilt_module_without_running_it():
    bn = snt.BatchNorm(create_scale=True, create_offset=True)
    x = tf.random.normal([4, 3]) + 5.0
    result = snt.summary(bn, x, is_training=True)
    assert [v.shape.as_list() for v in bn.trainable_variables] == [[3], [3]]
    # The moving averages were traced, never updated: nothing ran on `x`.
    assert all(np.all(v.numpy() == 0) for v in bn.moving_mean.variables)
    # In training the statistics come from the batch: 6 FLOPs per element.
    assert result.rows[0].flops >= 6 * 12
    assert result.rows[0].outputs[0][1] == tf.TensorSpec([4, 3])


def test_a_built_module_keeps_its_variables():
    mlp = snt.nets.MLP([5, 2])
    mlp(tf.zeros([1, 3]))
    before = [v.ref() for v in mlp.variables]
    values = [v.numpy() for v in mlp.variables]
    result = snt.summary(mlp, np.zeros([7, 3], np.float32))
    assert [v.ref() for v in mlp.variables] == before
    for v, value in zip(mlp.variables, values):
        np.testing.assert_array_equal(v.numpy(), value)
    assert result.rows[0].outputs[0][1] == tf.TensorSpec([7, 2])


def test_shapes_as_lists_and_unknown_dimensions():
    result = snt.summary(snt.Linear(3), [None, 4])
    assert result.rows[0].outputs[0][1] == tf.TensorSpec([None, 3])
    assert result.flops == 2 * 4 * 3 + 3  # Per example.
    assert result.unknown_dims
    assert "Unknown dimensions (None) count as 1" in str(result)
    assert "f32[?,3]" in str(result)


def test_any_callable_and_outputs_by_key():
    linear = snt.Linear(2)

    def heads(x):
        return {"logits": linear(x), "probs": tf.nn.softmax(linear(x))}

    result = snt.summary(heads, tf.TensorSpec([3, 5]))
    assert [r.path for r in result.rows] == ["linear", "linear"]
    one = 2 * 3 * 5 * 2 + 3 * 2
    assert result.flops == 2 * one + 5 * 3 * 2


def test_outputs_of_a_module_returning_a_dict():
    class Heads(snt.Module):
        def __call__(self, x):
            return {"sum": tf.reduce_sum(x), "x": x}

    result = snt.summary(Heads(), tf.TensorSpec([2, 3]))
    assert result.rows[0].outputs == (
        ("sum", tf.TensorSpec([], tf.float32)),
        ("x", tf.TensorSpec([2, 3], tf.float32)),
    )
    assert "sum: f32[]" in str(result) and "x: f32[2,3]" in str(result)
    assert result.flops == 6


# ---------------------------------------------------------------------------
# Recurrent cores, control flow, strategies.


def vanilla_step_flops(batch: int, inputs: int, hidden: int) -> int:
    # input_to_hidden and hidden_to_hidden (no biases), + them, + b, tanh.
    return (
        2 * batch * inputs * hidden + 2 * batch * hidden * hidden + 3 * batch * hidden
    )


def test_core_under_dynamic_unroll():
    core = snt.VanillaRNN(4)
    result = snt.summary(
        lambda x: snt.dynamic_unroll(core, x, core.initial_state(2)),
        tf.TensorSpec([6, 2, 3]),
    )
    step = vanilla_step_flops(2, 3, 4)
    cores = [r for r in result.rows if r.class_name == "VanillaRNN"]
    # The first step is traced before the loop, the other 5 in its body.
    assert [(r.call, r.runs, r.flops) for r in cores] == [(1, 1, step), (2, 5, step)]
    assert result.flops == 6 * step
    assert result.trainable == 3 * 4 + 4 * 4 + 4
    assert "vanilla_rnn (call 2, runs 5x)" in str(result)


def test_core_under_dynamic_unroll_of_unknown_length():
    core = snt.VanillaRNN(4)
    result = snt.summary(
        lambda x: snt.dynamic_unroll(core, x, core.initial_state(2)),
        tf.TensorSpec([None, 2, 3]),
    )
    assert [r.runs for r in result.rows if r.class_name == "VanillaRNN"] == [1, None]
    assert result.unknown_loops
    assert "(call 2, in a loop)" in str(result)


def test_core_under_static_unroll():
    core = snt.VanillaRNN(4)
    result = snt.summary(
        lambda x: snt.static_unroll(core, x, core.initial_state(2)),
        tf.TensorSpec([3, 2, 3]),
    )
    cores = [r for r in result.rows if r.class_name == "VanillaRNN"]
    assert [r.call for r in cores] == [1, 2, 3]
    assert result.flops == 3 * vanilla_step_flops(2, 3, 4)


def test_lstm_whole_sequence_path():
    core = snt.LSTM(4)
    result = snt.summary(
        lambda x: snt.dynamic_unroll(core, x, core.initial_state(2)),
        tf.TensorSpec([6, 2, 3]),
    )
    (row,) = result.rows
    assert row.sequence and row.path == "lstm"
    assert "lstm (whole sequence)" in str(result)
    # All inputs projected at once, then a [2, 4] x [4, 16] product per step.
    projection = 2 * 12 * 3 * 16 + 12 * 16
    assert row.flops >= projection + 6 * 2 * 2 * 4 * 16
    assert result.trainable == 3 * 16 + 4 * 16 + 16


def test_autograph_control_flow_counts_the_costlier_branch():
    class Gate(snt.Module):
        def __call__(self, x):
            if tf.reduce_sum(x) > 0:  # AutoGraph: a tf.cond.
                return tf.matmul(x, x)
            return x + 1.0

    result = snt.summary(Gate(), tf.TensorSpec([3, 3]))
    assert result.flops == 9 + 1 + 2 * 27  # sum, comparison, the matmul branch.


class Compiled(snt.Module):
    def __init__(self):
        super().__init__()
        self.linear = snt.Linear(3)

    @tf.function
    def __call__(self, x):
        return tf.nn.relu(self.linear(x))


def test_a_tf_function_call_is_counted_through():
    result = snt.summary(Compiled(), tf.TensorSpec([2, 4]))
    linear = 2 * 2 * 4 * 3 + 2 * 3
    assert rows(result) == [
        ("compiled", "Compiled", 15, 0, linear + 6),
        ("compiled/linear", "Linear", 15, 0, linear),
    ]


def test_inside_a_strategy_scope():
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    strategy = snt.distribute.Replicator(devices)
    with strategy.scope():
        mlp = snt.nets.MLP([8, 2])
        result = snt.summary(mlp, tf.TensorSpec([4, 3]))
    assert all(isinstance(v, tf.distribute.DistributedValues) for v in mlp.variables)
    assert result.trainable == 3 * 8 + 8 + 8 * 2 + 2  # Not once per replica.
    assert len(result.variables) == 4


# ---------------------------------------------------------------------------
# The table and the arguments.


def test_table_layout():
    result = snt.summary(snt.nets.MLP([4, 2]), tf.TensorSpec([1, 3]))
    lines = str(result).splitlines()
    assert lines[0].split() == [
        "Module",
        "Class",
        "Outputs",
        "Trainable",
        "Non-trainable",
        "Bytes",
        "FLOPs",
    ]
    assert lines[-2].split()[0] == "Total"
    assert "per call (a multiply-add is 2 FLOPs)" in lines[-1]
    assert repr(result) == str(result)
    only_top = result.format(depth=0)
    assert "linear_0" not in only_top and "Total" in only_top
    org = result.format(tablefmt="orgtbl")
    assert org.splitlines()[0].startswith("| Module")


class Failing(snt.Module):
    def __init__(self):
        super().__init__()
        self.linear = snt.Linear(2)

    def __call__(self, x):
        self.linear(x)
        raise RuntimeError("failed on purpose")


def test_methods_are_restored_even_after_an_error():
    patched = [(snt.Linear, "__call__"), (Failing, "__call__")]
    patched.append((snt.LSTM, "_unroll_sequence"))
    before = [cls.__dict__[name] for cls, name in patched]
    with pytest.raises(RuntimeError, match="on purpose"):
        snt.summary(Failing(), tf.TensorSpec([2, 3]))
    assert [cls.__dict__[name] for cls, name in patched] == before
    snt.summary(snt.Linear(3), tf.TensorSpec([2, 3]))
    assert [cls.__dict__[name] for cls, name in patched] == before


class Wide(snt.Module):
    """Long names and outputs: a table far wider than 100 characters."""

    def __init__(self):
        super().__init__(name="a_module_with_a_rather_long_name")
        self.first_submodule_with_a_long_name = snt.Sequential(
            [snt.Linear(4, name="exponential_moving_linear_layer")]
        )

    def __call__(self, x):
        y = self.first_submodule_with_a_long_name(x)
        return {"reconstruction_of_the_inputs": y, "another_long_output_name": x}


def test_wide_tables_fit_the_width():
    result = snt.summary(Wide(), tf.TensorSpec([16, 1024]))
    full = result.format(width=0)
    assert max(map(len, full.splitlines())) > 100
    path = "a_module_with_a_rather_long_name/first_submodule_with_a_long_name"
    assert f"{path}/exponential_moving_linear_layer  Linear" in full
    # Without a terminal (as here), `str` fits 100 characters: paths as a
    # tree, names and outputs wrapped; the numbers are all there.
    text = str(result)
    assert text == result.format() == result.format(width=100)
    assert max(map(len, text.splitlines())) <= 100
    assert "\n  first_submodule_with_a_  Sequential  f32[16,4]" in text
    assert "\n    exponential_moving_    Linear      f32[16,4]" in text
    assert "\n                                         of_the_inputs:" in text
    assert text.count("4,100") == 4
    narrow = result.format(width=90)
    assert max(map(len, narrow.splitlines())) <= 90
    # Numbers are never wrapped, and paths only where that makes it fit.
    too_narrow = result.format(width=40)
    assert "\n  first_submodule_with_a_long_name   Sequential" in too_narrow
    # Tables that fit are as they were; the notes wrap between phrases.
    mlp = snt.summary(snt.nets.MLP([16, 10]), tf.TensorSpec([8, 32]))
    assert mlp.format(width=0).splitlines()[:6] == str(mlp).splitlines()[:6]
    assert mlp.format(width=60).splitlines()[-2:] == [
        "698 trainable and 0 non-trainable parameters (2.7 KiB),",
        "11.1 kFLOPs per call (a multiply-add is 2 FLOPs).",
    ]


def test_the_terminal_width_when_printing_to_one(monkeypatch):
    result = snt.summary(Wide(), tf.TensorSpec([16, 1024]))

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setattr(
        shutil, "get_terminal_size", lambda *_: os.terminal_size((90, 24))
    )
    lines = str(result).splitlines()
    assert 90 - 5 <= max(map(len, lines)) <= 90


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"`module` must be an snt.Module or a "):
        snt.summary(snt.Linear, tf.TensorSpec([2, 3]))
    with pytest.raises(TypeError, match=r"`module` .* Received: 3"):
        snt.summary(3)
    result = snt.summary(snt.Linear(1), [1, 2])
    with pytest.raises(ValueError, match=r"`depth` must be a non-negative integer"):
        result.format(depth=-1)
    with pytest.raises(TypeError, match=r"`tablefmt` must be a tabulate table"):
        result.format(tablefmt=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`width` must be a non-negative integer"):
        result.format(width=-1)


class PlainVariables(snt.Module):
    """Creates its variable with `tf.Variable` inside the call, so that
    `tf.function` traces the first call twice."""

    def __call__(self, x):
        if not hasattr(self, "w"):
            self.w = tf.Variable(tf.ones([x.shape[-1], 2]), name="w")
        return tf.matmul(x, self.w)


def test_a_first_call_traced_twice_gives_one_set_of_rows():
    model = snt.Sequential([PlainVariables(), snt.Linear(1)])
    result = snt.summary(model, tf.TensorSpec([1, 3]))
    assert [(r.path, r.call) for r in result.rows] == [
        ("sequential", 1),
        ("sequential/plain_variables", 1),
        ("sequential/linear", 1),
    ]
    assert result.trainable == 3 * 2 + 2 + 1


@pytest.mark.parametrize(
    ("make", "spec", "flops"),
    [
        # 3x3 windows over 3 channels, 2 outputs each: 2 * 5*5*6 * 9, + bias.
        (lambda: snt.DepthwiseConv2D(3, channel_multiplier=2), [1, 5, 5, 3], 2850),
        # Each of the 4*4*3 inputs meets 3*3*4 filter weights, + bias.
        (lambda: snt.Conv2DTranspose(4, 3, stride=2), [1, 4, 4, 3], 3456 + 256),
        # A [1, 10, 3] Conv1D is a Conv2D over a height of 1.
        (lambda: snt.Conv1D(2, 3), [1, 10, 3], 2 * 20 * 9 + 20),
    ],
)
def test_other_convolutions(make, spec, flops):
    assert snt.summary(make(), tf.TensorSpec(spec)).flops == flops


@pytest.mark.parametrize(
    ("f", "specs", "flops"),
    [
        (lambda a, b: tf.einsum("bij,bjk->bik", a, b), [[2, 3, 4], [2, 4, 5]], 240),
        (lambda a, b: tf.matmul(a, b, transpose_a=True), [[4, 3], [4, 5]], 120),
        (lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), [[1, 4, 4, 1]], 16),
        (lambda x: tf.nn.softmax(x), [[2, 5]], 50),
        (lambda x: tf.reduce_mean(x, axis=0), [[2, 5]], 10),
        (lambda x: tf.add_n([x, x, x]), [[2, 5]], 20),
        (lambda x: tf.reshape(tf.cast(x, tf.int32) + 1, [-1]), [[2, 5]], 0),
    ],
)
def test_op_conventions(f, specs, flops):
    result = snt.summary(f, *[tf.TensorSpec(s) for s in specs])
    assert result.rows == () and result.flops == flops
