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
- `resnet50_first_result`: construct the model, call a fresh `tf.function`
  of the step (trace, create the variables, execute) and fetch the loss:
  the time until a new model's first result.
- `resnet50_ckpt_save` / `resnet50_ckpt_restore`: `tf.train.Checkpoint`
  `write` / `read` (+ `assert_consumed`) of the whole model to a local
  temporary directory. "raw" checkpoints a flat list of plain variables of
  the same shapes (the floor without any object graph to walk).
- `resnet50_ckpt_restore_on_create`: restore into a model whose variables
  do not exist yet: construct a fresh model, `tf.train.Checkpoint(model=m)
  .read(path)` (`restore` without the save counter `write` does not keep),
  then its first (eager, inference-mode) call on one
  image creates the variables, which take their values from the checkpoint
  as they are created, until the result is fetched (`assert_consumed` is
  checked after the timed part). Keras creates its variables in the
  constructor, so it restores them at `restore`.
- `resnet50_step`, `resnet50_step_bf16`: execute the compiled train step,
  in float32 and with bfloat16 compute (ours: `snt.precision.apply(model,
  "mixed_bfloat16")`; Keras: the model built under the global
  `"mixed_bfloat16"` dtype policy; variables float32 in both, the outputs
  cast to float32 for the loss). The models are built by the first
  (warm-up) sample, so the memory workload's `resnet50_step` process builds
  only the float32 one.
"""

from __future__ import annotations

import gc
import tempfile
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from bench.harness import Clock, Sampler, Skip, fetch, self_timed, timed
from bench.workloads import KERAS, ORIGINAL, OURS, RAW, Row, Target, Workload

LEARNING_RATE = 0.01


def _spec(quick: bool) -> tf.TensorSpec:
    return tf.TensorSpec([2, 64, 64, 3] if quick else [8, 224, 224, 3], tf.float32)


BF16 = "mixed_bfloat16"


def _model(
    impl: str, quick: bool, policy: str | None = None
) -> tuple[Callable[[tf.Tensor], Any], Any]:
    """`(forward in training mode, model)`; Keras builds its variables here.

    `policy="mixed_bfloat16"`: bfloat16 compute, float32 variables.
    """
    if impl == "sonnet":
        import sonnet as snt

        net = snt.nets.ResNet50(num_classes=1000)
        if policy is not None:
            snt.precision.apply(net, policy)  # type: ignore[attr-defined]
        return (lambda x: net(x, is_training=True)), net
    import keras

    shape = tuple(_spec(quick).shape[1:])
    previous = keras.mixed_precision.dtype_policy()
    if policy is not None:
        keras.mixed_precision.set_dtype_policy(policy)
    try:
        model = keras.applications.ResNet50(weights=None, input_shape=shape)
    finally:
        keras.mixed_precision.set_dtype_policy(previous)
    return (lambda x: model(x, training=True)), model


def _inference(impl: str, model: Any) -> Callable[[tf.Tensor], Any]:
    if impl == "sonnet":
        return lambda x: model(x, is_training=False)
    return lambda x: model(x, training=False)


def _step(
    forward: Callable[[tf.Tensor], tf.Tensor], model: Any
) -> Callable[[tf.Tensor], tf.Tensor]:
    def step(images: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            # No op in float32; bfloat16 outputs are cast for the loss.
            logits = tf.cast(forward(images), tf.float32)
            loss = tf.reduce_mean(tf.square(logits))
        params = model.trainable_variables
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads, strict=True):
            p.assign_sub(LEARNING_RATE * g)
        return loss

    return step


def _built_model(
    impl: str, quick: bool, policy: str | None = None
) -> tuple[Callable[[tf.Tensor], Any], Any]:
    forward, model = _model(impl, quick, policy)
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


def build_first_result(impl: str, quick: bool) -> dict[str, Sampler]:
    x = tf.random.normal(_spec(quick).shape, seed=0)

    def first_result() -> tuple[float, float]:
        gc.collect()
        with Clock() as clock:
            forward, model = _model(impl, quick)
            fetch(tf.function(_step(forward, model))(x))
        return clock.both

    return {"resnet50_first_result": self_timed(first_result)}


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

    image = tf.random.normal([1, *_spec(quick).shape[1:]], seed=0)

    def restore_on_create() -> tuple[float, float]:
        gc.collect()
        with Clock() as clock:
            _, fresh = _model(impl, quick)
            status = tf.train.Checkpoint(model=fresh).read(prefix)
            fetch(_inference(impl, fresh)(image))
        status.assert_consumed()
        return clock.both

    samplers = {
        "resnet50_ckpt_save": self_timed(save),
        "resnet50_ckpt_restore": self_timed(restore),
    }
    if impl != "raw":
        samplers["resnet50_ckpt_restore_on_create"] = self_timed(restore_on_create)
    return samplers


def _lazy_step(impl: str, quick: bool, x: tf.Tensor, policy: str | None) -> Sampler:
    """Times the compiled step; the model is built by the first sample."""
    steps: list[Callable[[tf.Tensor], tf.Tensor]] = []

    def run() -> tf.Tensor:
        if not steps:
            steps.append(tf.function(_step(*_built_model(impl, quick, policy))))
        return steps[0](x)

    return timed(run)


def build_step(impl: str, quick: bool) -> dict[str, Sampler | Skip]:
    x = tf.random.normal(_spec(quick).shape, seed=0)
    samplers: dict[str, Sampler | Skip] = {
        "resnet50_step": _lazy_step(impl, quick, x, None)
    }
    if impl == "sonnet":
        import sonnet as snt

        if not hasattr(snt, "precision"):
            samplers["resnet50_step_bf16"] = Skip(
                "needs snt.precision (snt.precision.apply(model, 'mixed_bfloat16'))"
            )
            return samplers
    samplers["resnet50_step_bf16"] = _lazy_step(impl, quick, x, BF16)
    return samplers


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
    "resnet50_first_result": Workload(
        name="resnet50_first_result",
        rows=(
            Row(
                "resnet50_first_result",
                "s",
                "ResNet-50: construct + first call of a tf.function train step "
                "(trace, create the variables, execute) + fetch, batch 8",
            ),
        ),
        impls=(OURS, KERAS),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_first_result,
        targets=(Target("resnet50_first_result", KERAS, 0.8),),
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
            Row(
                "resnet50_ckpt_restore_on_create",
                "ms",
                "ResNet-50: construct, Checkpoint.restore before the variables "
                "exist, first eager call on 1 image (creates + restores them)",
            ),
        ),
        impls=(OURS, RAW, KERAS),
        repeats=7,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_ckpt,
        targets=(Target("resnet50_ckpt_restore_on_create", ORIGINAL, 0.9),),
    ),
    "resnet50_step": Workload(
        name="resnet50_step",
        rows=(
            Row(
                "resnet50_step",
                "s",
                "ResNet-50 tf.function train step execution, batch 8 of 224x224x3",
            ),
            Row(
                "resnet50_step_bf16",
                "s",
                "the same with bfloat16 compute (mixed_bfloat16: float32 variables)",
            ),
        ),
        impls=(OURS, KERAS),
        repeats=3,
        number=1,
        quick_repeats=1,
        quick_number=1,
        build=build_step,
        targets=(
            Target("resnet50_step", KERAS, 0.9),
            Target("resnet50_step_bf16", KERAS, 0.9),
        ),
    ),
}
