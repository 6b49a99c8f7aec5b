"""Tests for `snt.optimizers.Muon` and its routing rule `muon_route`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sonnet as snt
from sonnet._src.optimizers import muon as muon_lib


def _newton_schulz(g: np.ndarray, steps: int = 5) -> np.ndarray:
    """Keller Jordan's `zeropower_via_newtonschulz5`, in NumPy."""
    a, b, c = (3.4445, -4.7750, 2.0315)
    x = g / (np.linalg.norm(g) + 1e-7)
    transposed = g.shape[0] > g.shape[1]
    if transposed:
        x = x.T
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if transposed else x


def _torch_muon_step(
    weight: np.ndarray,
    grad: np.ndarray,
    buf: np.ndarray,
    lr: float,
    momentum: float,
    nesterov: bool,
    weight_decay: float,
    adjust_lr: str,
) -> tuple[np.ndarray, np.ndarray]:
    """One step of PyTorch's `torch.optim.Muon` on an `[out, in]` weight."""
    buf = buf + (1 - momentum) * (grad - buf)  # buf.lerp_(grad, 1 - momentum)
    update = grad + momentum * (buf - grad) if nesterov else buf  # grad.lerp(buf, m)
    update = _newton_schulz(update)
    rows, cols = weight.shape
    if adjust_lr == "original":
        adjusted = lr * max(1.0, rows / cols) ** 0.5
    else:
        adjusted = lr * 0.2 * max(rows, cols) ** 0.5
    weight = weight * (1 - lr * weight_decay)
    return weight - adjusted * update, buf


@pytest.mark.parametrize("shape", [[6, 3], [3, 6], [4, 4]])
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("adjust_lr", ["original", "match_rms_adamw"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_matches_numpy_reference_of_the_published_update(
    shape, nesterov, adjust_lr, weight_decay
):
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=shape).astype(np.float32)
    w = tf.Variable(w0)
    opt = snt.optimizers.Muon(
        learning_rate=0.05,
        momentum=0.9,
        use_nesterov=nesterov,
        weight_decay=weight_decay,
        adjust_lr=adjust_lr,
    )
    # PyTorch's layout is `[out, in]`: ours transposed.
    weight, buf = w0.T.astype(np.float64), np.zeros(shape[::-1])
    for _ in range(3):
        g = rng.normal(size=shape).astype(np.float32)
        opt.apply([tf.constant(g)], [w])
        weight, buf = _torch_muon_step(
            weight, g.T, buf, 0.05, 0.9, nesterov, weight_decay, adjust_lr
        )
    np.testing.assert_allclose(w.numpy(), weight.T, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        opt.accumulated_momentum[0].numpy(), buf.T, rtol=1e-5, atol=1e-6
    )


def test_newton_schulz_matches_reference_and_is_transpose_equivariant():
    rng = np.random.default_rng(1)
    g = rng.normal(size=(5, 3)).astype(np.float32)
    q = muon_lib.newton_schulz(tf.constant(g)).numpy()
    np.testing.assert_allclose(q, _newton_schulz(g.astype(np.float64)), atol=1e-5)
    np.testing.assert_allclose(
        muon_lib.newton_schulz(tf.constant(g.T)).numpy(), q.T, atol=1e-6
    )
    singular = np.linalg.svd(q, compute_uv=False)
    assert np.all((singular > 0.6) & (singular < 1.3))


def test_traced_equals_eager_with_a_schedule():
    def run(traced):
        w = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), [3, 4]) / 10)
        opt = snt.optimizers.Muon(snt.optimizers.schedules.LinearWarmup(0.1, 2))
        apply = tf.function(opt.apply) if traced else opt.apply
        for i in range(3):
            apply([tf.fill([3, 4], float(i + 1)) * tf.eye(3, 4)], [w])
        assert int(opt.step) == 3
        return w.numpy()

    np.testing.assert_allclose(run(True), run(False), rtol=1e-6)


def _language_model() -> snt.Sequential:
    model = snt.Sequential(
        [
            snt.Embed(10, 4),
            snt.Linear(8, name="hidden"),
            snt.LayerNorm(-1, True, True),
            snt.Linear(6, name="head"),
        ]
    )
    model(tf.constant([[1, 2, 3]]))
    return model


def test_muon_route_sends_embeddings_norms_biases_and_heads_to_the_fallback():
    model = _language_model()
    route = snt.optimizers.muon_route(model)
    assert [v.name for v in model.trainable_variables if route(v)] == ["hidden/w:0"]
    everything = snt.optimizers.muon_route(model, head_pattern=None)
    assert [v.name for v in model.trainable_variables if everything(v)] == [
        "hidden/w:0",
        "head/w:0",
    ]


def test_fallback_trains_the_rest_as_it_would_alone():
    model, reference = _language_model(), _language_model()
    for v, r in zip(model.variables, reference.variables, strict=True):
        r.assign(v)
    opt = snt.optimizers.Muon(
        0.02,
        fallback=snt.optimizers.AdamW(0.01),
        route=snt.optimizers.muon_route(model),
    )
    muon_alone, adamw_alone = snt.optimizers.Muon(0.02), snt.optimizers.AdamW(0.01)
    tokens = tf.constant([[1, 2, 3], [4, 5, 6]])
    for _ in range(2):
        for m, apply in ((model, opt.apply), (reference, None)):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(m(tokens)))
            grads = tape.gradient(loss, m.trainable_variables)
            if apply is not None:
                apply(grads, m.trainable_variables)
                continue
            pairs = list(zip(grads, m.trainable_variables, strict=True))
            hidden = [(g, v) for g, v in pairs if v.name == "hidden/w:0"]
            rest = [(g, v) for g, v in pairs if v.name != "hidden/w:0"]
            muon_alone.apply(*map(list, zip(*hidden, strict=True)))
            adamw_alone.apply(*map(list, zip(*rest, strict=True)))
    for v, r in zip(model.variables, reference.variables, strict=True):
        np.testing.assert_allclose(v.numpy(), r.numpy(), rtol=1e-6, err_msg=v.name)
    assert len(opt.accumulated_momentum) == 1
    assert len(opt.fallback.m) == len(model.trainable_variables) - 1


def test_mixed_bfloat16_policy_trains_float32_variables_like_float32():
    def run(policy):
        model = snt.Linear(3, w_init=tf.initializers.constant(0.5), name="hidden")
        if policy is not None:
            snt.precision.apply(model, policy)
        x = tf.reshape(tf.range(8, dtype=tf.float32), [2, 4]) / 8
        model(x)
        opt = snt.optimizers.Muon(0.1, weight_decay=0.1, route=lambda v: True)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(model(x), tf.float32) * [1.0, -1.0, 2.0])
        opt.apply(tape.gradient(loss, [model.w]), [model.w])
        return model.w

    w32, wbf16 = run(None), run("mixed_bfloat16")
    assert wbf16.dtype == tf.float32
    np.testing.assert_allclose(wbf16.numpy(), w32.numpy(), rtol=2e-2, atol=2e-3)


def test_bfloat16_variables_are_updated_in_float32_and_rounded_once():
    rng = np.random.default_rng(3)
    w0 = rng.normal(size=(4, 3)).astype(np.float32)
    g = rng.normal(size=(4, 3)).astype(np.float32)
    w16 = tf.Variable(tf.constant(w0, tf.bfloat16))
    w32 = tf.Variable(tf.cast(tf.constant(w0, tf.bfloat16), tf.float32))
    for w in (w16, w32):
        snt.optimizers.Muon(0.1).apply([tf.cast(tf.constant(g), w.dtype)], [w])
    g16 = tf.cast(tf.cast(tf.constant(g), tf.bfloat16), tf.float32)
    reference = tf.Variable(tf.cast(tf.constant(w0, tf.bfloat16), tf.float32))
    snt.optimizers.Muon(0.1).apply([g16], [reference])
    np.testing.assert_array_equal(w16.numpy(), tf.cast(reference, tf.bfloat16).numpy())
    assert snt.optimizers.Muon(0.1).accumulated_momentum == []


def _devices(n: int) -> list[str]:
    return [d.name for d in tf.config.list_logical_devices("CPU")[:n]]


def test_replicator_matches_one_device():
    w0 = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    reference = tf.Variable(w0)
    reference_opt = snt.optimizers.Muon(0.1)
    replicator = snt.distribute.Replicator(_devices(2))
    with replicator.scope():
        w = tf.Variable(w0)
        opt = snt.optimizers.Muon(0.1)

    def step(g):
        g = tf.distribute.get_replica_context().all_reduce("sum", g)
        opt.apply([g], [w])

    g = tf.constant(np.sin(np.arange(12)).reshape(3, 4), tf.float32)
    halves = replicator.experimental_distribute_values_from_function(
        lambda ctx: g * (0.25 + 0.5 * ctx.replica_id_in_sync_group)
    )
    train = tf.function(lambda: replicator.run(step, args=(halves,)))
    for _ in range(2):
        train()
        reference_opt.apply([g], [reference])
    for copy in replicator.experimental_local_results(w):
        np.testing.assert_allclose(copy.numpy(), reference.numpy(), rtol=1e-5)


# Bad input ----------------------------------------------------------------------


def _snapshot(*variables: tf.Variable) -> list[np.ndarray]:
    return [v.numpy() for v in variables]


def test_rank_other_than_two_without_routing_changes_nothing():
    w, kernel = tf.Variable(tf.ones([2, 2])), tf.Variable(tf.ones([1, 2, 2]))
    b = tf.Variable(tf.ones([2]))
    opt = snt.optimizers.Muon(0.1)
    with pytest.raises(ValueError, match=r"`parameters\[1\]` must be 2-D for Muon"):
        opt.apply([tf.ones([2, 2]), tf.ones([1, 2, 2])], [w, kernel])
    away = snt.optimizers.Muon(0.1, route=lambda v: v.shape[0] == 3)
    with pytest.raises(ValueError, match=r"`parameters\[0\]` is routed away"):
        away.apply([tf.ones([2, 2])], [w])
    everything = snt.optimizers.Muon(
        0.1, fallback=snt.optimizers.SGD(0.1), route=lambda v: True
    )
    with pytest.raises(ValueError, match=r"route it to the fallback"):
        everything.apply([tf.ones([2, 2]), tf.ones([2])], [w, b])
    for v in (w, kernel, b):
        np.testing.assert_array_equal(v.numpy(), 1.0)
    for o in (opt, away, everything):
        assert o.accumulated_momentum == []


def test_routed_call_changes_nothing_when_the_fallback_refuses():
    w, b = tf.Variable(tf.ones([2, 2])), tf.Variable(tf.ones([2]))
    opt = snt.optimizers.Muon(0.1, fallback=snt.optimizers.Adam(0.1))
    opt.apply([tf.ones([2, 2]), tf.ones([2])], [w, b])
    before = _snapshot(w, b, *opt.accumulated_momentum)
    with pytest.raises(ValueError, match=r"`parameters\[0\]` must be the same"):
        # The fallback's slot is shaped like `b`: it refuses, before Muon steps.
        opt.apply([tf.ones([2, 2]), tf.ones([3])], [w, tf.Variable(tf.ones([3]))])
    for a, e in zip(_snapshot(w, b, *opt.accumulated_momentum), before, strict=True):
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"adjust_lr": "rms"}, ValueError, "`adjust_lr` must be one of"),
        ({"ns_steps": 0}, ValueError, "`ns_steps`"),
        ({"ns_steps": 2.5}, TypeError, "`ns_steps`"),
        ({"fallback": 3}, TypeError, "`fallback`"),
        ({"route": "2d"}, TypeError, "`route`"),
        ({"use_nesterov": "yes"}, TypeError, "`use_nesterov`"),
        ({"momentum": "0.9"}, TypeError, "`momentum`"),
        ({"weight_decay": "0.1"}, TypeError, "`weight_decay`"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any], error, match):
    with pytest.raises(error, match=match):
        snt.optimizers.Muon(**kwargs)


def test_muon_route_bad_arguments():
    model = _language_model()
    with pytest.raises(TypeError, match="`module`"):
        snt.optimizers.muon_route([1])
    with pytest.raises(TypeError, match="`head_pattern`"):
        snt.optimizers.muon_route(model, head_pattern=3)
    with pytest.raises(ValueError, match="`head_pattern` must be a regular"):
        snt.optimizers.muon_route(model, head_pattern="(")
