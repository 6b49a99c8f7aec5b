"""ResNet-50: tracing a train step, checkpoints, and executing a train step.

`snt.nets.ResNet50(1000)` against `keras.applications.ResNet50(weights=None)`
(and the original Sonnet's `ResNet50` with `--vs`). The step is the one of
`bench/resnet50_trace.py`: forward in training mode, mean-square loss,
gradients, SGD `assign_sub`, on `[8, 224, 224, 3]` inputs (`[2, 64, 64, 3]`
with `--quick`); it reads the trainable variables after the forward pass,
so the same step also works when the forward pass creates them.

Rows:
- `resnet50_first_call`: construct the model and trace a fresh
  `tf.function` of the step with `get_concrete_function` (no execution).
  Sonnet creates its variables during this trace (outside the graph, so
  TensorFlow traces once; the original Sonnet's variables make TensorFlow
  trace a second time); Keras creates them while constructing the model, so
  construction is timed for every implementation.
- `resnet50_first_call_eager`: the same with the step wrapped in
  `snt.distribute.create_variables_eagerly` (initial values computed and
  variables created outside the graph; Sonnet only, Keras always does so).
- `resnet50_trace`: trace a fresh `tf.function` of the step when the model
  and its variables exist (one trace).
- `resnet50_ckpt_save` / `resnet50_ckpt_restore`: `tf.train.Checkpoint`
  `write` / `read` (+ `assert_consumed`) of the whole model to a local
  temporary directory. "raw" checkpoints a flat list of plain variables of
  the same shapes (the floor without any object graph to walk).
- `resnet50_step` (not run by default): execute the compiled train step.
"""

from __future__ import annotations

import gc
import tempfile
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from bench.harness import Clock, Sampler, self_timed, timed
from bench.workloads import KERAS, OURS, RAW, Row, Target, Workload

LEARNING_RATE = 0.01


def _spec(quick: bool) -> tf.TensorSpec:
    return tf.TensorSpec([2, 64, 64, 3] if quick else [8, 224, 224, 3], tf.float32)


def _model(impl: str, quick: bool) -> tuple[Callable[[tf.Tensor], Any], Any]:
    """`(forward in training mode, model)`; Keras builds its variables here."""
    if impl == "sonnet":
        import sonnet as snt

        net = snt.nets.ResNet50(num_classes=1000)
        return (lambda x: net(x, is_training=True)), net
    import keras

    shape = tuple(_spec(quick).shape[1:])
    model = keras.applications.ResNet50(weights=None, input_shape=shape)
    return (lambda x: model(x, training=True)), model


def _step(
    forward: Callable[[tf.Tensor], tf.Tensor], model: Any
) -> Callable[[tf.Tensor], tf.Tensor]:
    def step(images: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(images)))
        params = model.trainable_variables
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads, strict=True):
            p.assign_sub(LEARNING_RATE * g)
        return loss

    return step


def _built_model(impl: str, quick: bool) -> tuple[Callable[[tf.Tensor], Any], Any]:
    forward, model = _model(impl, quick)
    if impl == "sonnet":
        shape = [1, *_spec(quick).shape[1:]]
        forward(tf.zeros(shape))  # Create the variables.
    return forward, model


def build_trace(impl: str, quick: bool) -> dict[str, Sampler]:
    spec = _spec(quick)

    def first_call() -> tuple[float, float]:
        gc.collect()
        with Clock() as clock:
            forward, model = _model(impl, quick)
            tf.function(_step(forward, model)).get_concrete_function(spec)
        return clock.both

    def first_call_eager() -> tuple[float, float]:
        import sonnet as snt

        gc.collect()
        with Clock() as clock:
            forward, model = _model(impl, quick)
            step = snt.distribute.create_variables_eagerly(_step(forward, model))
            tf.function(step).get_concrete_function(spec)
        return clock.both

    forward, model = _built_model(impl, quick)

    def trace() -> tuple[float, float]:
        function = tf.function(_step(forward, model))
        with Clock() as clock:
            function.get_concrete_function(spec)
        return clock.both

    samplers = {
        "resnet50_first_call": self_timed(first_call),
        "resnet50_trace": self_timed(trace),
    }
    if impl == "sonnet":  # Keras always creates its variables eagerly.
        samplers["resnet50_first_call_eager"] = self_timed(first_call_eager)
    return samplers


def build_ckpt(impl: str, quick: bool) -> dict[str, Sampler]:
    if impl == "raw":
        _, model = _built_model("sonnet", quick)
        variables = [tf.Variable(tf.zeros_like(v)) for v in model.variables]
        checkpoint = tf.train.Checkpoint(variables=variables)
    else:
        _, model = _built_model(impl, quick)
        checkpoint = tf.train.Checkpoint(model=model)
    directory = tempfile.TemporaryDirectory(prefix="bench_ckpt_")
    prefix = checkpoint.write(f"{directory.name}/ckpt")

    def save() -> tuple[float, float]:
        with Clock() as clock:
            # Through `directory`, the samplers keep the files alive.
            checkpoint.write(f"{directory.name}/ckpt")
        return clock.both

    def restore() -> tuple[float, float]:
        with Clock() as clock:
            checkpoint.read(prefix).assert_consumed()
        return clock.both

    return {
        "resnet50_ckpt_save": self_timed(save),
        "resnet50_ckpt_restore": self_timed(restore),
    }


def build_step(impl: str, quick: bool) -> dict[str, Sampler]:
    spec = _spec(quick)
    forward, model = _built_model(impl, quick)
    step = tf.function(_step(forward, model))
    x = tf.random.normal(spec.shape, seed=0)
    return {"resnet50_step": timed(lambda: step(x))}


WORKLOADS = {
    "resnet50_trace": Workload(
        name="resnet50_trace",
        rows=(
            Row(
                "resnet50_first_call",
                "s",
                "ResNet-50 train step: construct + first tf.function trace "
                "(creates the variables), batch 8 of 224x224x3",
            ),
            Row(
                "resnet50_first_call_eager",
                "s",
                "as resnet50_first_call, step wrapped in "
                "snt.distribute.create_variables_eagerly",
            ),
            Row(
                "resnet50_trace",
                "s",
                "ResNet-50 train step: tf.function trace, variables exist",
            ),
        ),
        impls=(OURS, KERAS),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_trace,
        targets=(
            Target("resnet50_trace", KERAS, 1.0),
            Target("resnet50_trace", "original", 0.5),
            Target("resnet50_first_call", OURS, 2.0, other_row="resnet50_trace"),
            Target("resnet50_first_call_eager", OURS, 2.0, other_row="resnet50_trace"),
        ),
    ),
    "resnet50_ckpt": Workload(
        name="resnet50_ckpt",
        rows=(
            Row("resnet50_ckpt_save", "ms", "ResNet-50 tf.train.Checkpoint write"),
            Row(
                "resnet50_ckpt_restore",
                "ms",
                "ResNet-50 tf.train.Checkpoint read + assert_consumed",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=7,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_ckpt,
    ),
    "resnet50_step": Workload(
        name="resnet50_step",
        rows=(
            Row(
                "resnet50_step",
                "s",
                "ResNet-50 tf.function train step execution, batch 8 of 224x224x3",
            ),
        ),
        impls=(OURS, KERAS),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_step,
        default=False,
    ),
}
