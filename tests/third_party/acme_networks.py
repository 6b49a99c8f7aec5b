"""acme 0.4.0's TensorFlow networks, run the way its agents run them.

Run by `tests/test_third_party.py` twice, with the original Sonnet 2.0.2 and
with ours, with acme's sources on the path; it prints one line per result
and the test requires the two outputs to be identical. Every network that
acme exports is built on fixed inputs, its variables are then set from a
seeded NumPy generator in the order `module.variables` lists them (so both
runs compute with the same weights whatever the initializers draw), and
its outputs, variable names, shapes and trainability, submodule classes
and distribution statistics are printed. Then a D4PG-style learner step
(two `snt.optimizers.Adam` in one `tf.function`, clipped gradients), acme's
`Snapshotter` (a SavedModel of a `snt.Sequential` policy) and
`Checkpointer`, `acme.tf.utils.create_variables`, and an IMPALA-style
`snt.static_unroll` / `snt.dynamic_unroll` with `snt.BatchApply` heads.
"""

import tempfile

import numpy as np
import tensorflow as tf
import tree
from acme import specs
from acme.tf import networks, savers
from acme.tf import utils as tf2_utils
from acme.wrappers.observation_action_reward import OAR

import sonnet as snt

results = {}


def fill(module, seed=0):
    """Sets every variable of `module` from a seeded generator; returns
    (name, shape, trainable) per variable, in `module.variables` order."""
    rng = np.random.RandomState(seed)
    listed = []
    for v in module.variables:
        value = rng.uniform(-0.3, 0.3, v.shape.as_list())
        v.assign(value.astype(v.dtype.as_numpy_dtype))
        listed.append((v.name, tuple(v.shape.as_list()), v.trainable))
    return listed


def rounded(structure):
    return tree.map_structure(
        lambda t: np.round(np.asarray(t, np.float64), 4).tolist(), structure
    )


def check(name, module, *args, post=lambda y: y, call=None):
    call = call or module
    try:
        call(*args)  # Builds the variables.
        results[name + ".variables"] = fill(module)
        results[name + ".outputs"] = rounded(post(call(*args)))
        results[name + ".submodules"] = [type(m).__name__ for m in module.submodules]
    except Exception as e:  # noqa: BLE001 - an error is a result to compare.
        results[name + ".error"] = f"{type(e).__name__}: {str(e)[:200]}"


rng = np.random.RandomState(1)
images = tf.constant(rng.randint(0, 255, [2, 84, 84, 4]).astype(np.uint8))
frames = tf.cast(images, tf.float32) / 255.0
observations = tf.constant(rng.randn(3, 6).astype(np.float32))
actions = tf.constant(rng.randn(3, 2).astype(np.float32))
oar = OAR(
    observation=frames, action=tf.constant([1, 3]), reward=tf.constant([0.5, -1.0])
)
oar_sequence = OAR(
    observation=tf.stack([frames, frames * 0.5, frames * 0.2]),
    action=tf.constant([[1, 3], [0, 2], [2, 2]]),
    reward=tf.constant([[0.5, -1.0], [0.0, 1.0], [1.0, 1.0]]),
)
sequence = tf.stack([observations, observations * 2.0])
bounds = specs.BoundedArray((2,), np.float32, -2.0, 3.0)

# -- Atari networks, feed-forward and recurrent.
check("atari_torso", networks.AtariTorso(), frames)
check("dqn", networks.DQNAtariNetwork(5), frames)
r2d2 = networks.R2D2AtariNetwork(4)
check("r2d2", r2d2, oar, r2d2.initial_state(2))
r2d2 = networks.R2D2AtariNetwork(4)
check("r2d2_unroll", r2d2, oar_sequence, r2d2.initial_state(2), 3, call=r2d2.unroll)
impala = networks.IMPALAAtariNetwork(4)
check("impala", impala, oar, impala.initial_state(2))
deep = networks.DeepIMPALAAtariNetwork(3)
check("deep_impala", deep, oar, deep.initial_state(2))
deep = networks.DeepIMPALAAtariNetwork(3)
check(
    "deep_impala_unroll", deep, oar_sequence, deep.initial_state(2), 3, call=deep.unroll
)
check(
    "resnet_torso",
    networks.ResNetTorso(
        num_channels=(4, 8), num_blocks=(1, 2), num_output_hidden=(16,)
    ),
    images,
)

# -- Continuous control: torsos, heads, distributions.
check(
    "layer_norm_mlp", networks.LayerNormMLP([8, 8], activate_final=True), observations
)
check(
    "layer_norm_mlp_nested",
    networks.LayerNormMLP([8, 4], w_init=tf.initializers.VarianceScaling(1e-4)),
    (observations, actions),
)
check("near_zero_linear", networks.NearZeroInitializedLinear(3), observations)
check("residual_mlp", networks.LayerNormAndResidualMLP(6, 2), observations)
check("duelling", networks.DuellingMLP(3, [8, 8]), observations)
check(
    "normal_head",
    networks.MultivariateNormalDiagHead(2),
    observations,
    post=lambda d: (d.mean(), d.stddev(), d.log_prob(actions)),
)
check(
    "normal_head_tanh",
    networks.MultivariateNormalDiagHead(
        2, tanh_mean=True, fixed_scale=True, use_tfd_independent=True
    ),
    observations,
    post=lambda d: (d.mean(), d.stddev()),
)
check(
    "univariate_mixture",
    networks.UnivariateGaussianMixture(2, num_components=3),
    observations,
    post=lambda d: (d.mean(), d.log_prob(actions)),
)
check(
    "multivariate_mixture",
    networks.MultivariateGaussianMixture(2, num_components=3),
    observations,
    post=lambda d: (d.mean(), d.log_prob(actions)),
)
check("policy_value", networks.PolicyValueHead(4), observations)
check("multihead", networks.Multihead([snt.Linear(2), snt.Linear(2)]), observations)
check(
    "critic_multiplexer",
    networks.CriticMultiplexer(
        critic_network=networks.LayerNormMLP([4, 1]),
        action_network=snt.Linear(3),
        observation_network=snt.Linear(5),
    ),
    observations,
    actions,
)
for name, squash in [
    ("tanh_to_spec", networks.TanhToSpec),
    ("rescale_to_spec", networks.RescaleToSpec),
    ("clip_to_spec", networks.ClipToSpec),
]:
    check(name, snt.Sequential([snt.Linear(2), squash(bounds)]), observations)

# -- Recurrent cores with acme's unroll.
lstm = networks.LSTM(5)
check("lstm_unroll", lstm, sequence, lstm.initial_state(3), 2, call=lstm.unroll)
core = networks.DeepRNN([snt.Linear(4), networks.LSTM(3), snt.Linear(2)])
check("deep_rnn_unroll", core, sequence, core.initial_state(3), 2, call=core.unroll)
core = networks.DeepRNN([snt.Linear(4), snt.LSTM(3), snt.GRU(2)])
check("deep_rnn_dynamic", core, sequence, core.initial_state(3), 2, call=core.unroll)
critic = networks.CriticDeepRNN(
    [networks.CriticMultiplexer(), snt.LSTM(4), snt.Linear(1)]
)
check("critic_deep_rnn", critic, observations, actions, critic.initial_state(3))

# -- acme.tf.utils.
mlp = networks.LayerNormMLP([4, 2])
results["create_variables"] = str(
    tf2_utils.create_variables(mlp, [specs.Array((6,), np.float32)])
)
results["create_variables.names"] = [v.name for v in mlp.variables]
rnn = snt.DeepRNN([snt.Linear(3), snt.LSTM(4)])
results["create_variables.rnn"] = str(
    tf2_utils.create_variables(rnn, [specs.Array((6,), np.float32)])
)
results["batch_concat"] = rounded(
    tf2_utils.batch_concat({"a": observations, "b": actions})
)

# -- A D4PG-style learner step: two Adams in one tf.function.
policy = snt.Sequential(
    [
        networks.LayerNormMLP([8, 8], activate_final=True),
        networks.NearZeroInitializedLinear(2),
        networks.TanhToSpec(bounds),
    ]
)
critic = networks.CriticMultiplexer(critic_network=networks.LayerNormMLP([8, 1]))
tf2_utils.create_variables(policy, [specs.Array((6,), np.float32)])
tf2_utils.create_variables(
    critic, [specs.Array((6,), np.float32), specs.Array((2,), np.float32)]
)
fill(policy, 3)
fill(critic, 4)
policy_optimizer = snt.optimizers.Adam(1e-3)
critic_optimizer = snt.optimizers.Adam(1e-3)


@tf.function
def learner_step(o, a):
    with tf.GradientTape(persistent=True) as tape:
        critic_loss = tf.reduce_mean(tf.square(critic(o, a) - 1.0))
        policy_loss = -tf.reduce_mean(critic(o, policy(o)))
    critic_variables = critic.trainable_variables
    policy_variables = policy.trainable_variables
    critic_grads = tape.gradient(critic_loss, critic_variables)
    policy_grads = tape.gradient(policy_loss, policy_variables)
    critic_grads, _ = tf.clip_by_global_norm(critic_grads, 40.0)
    policy_grads, _ = tf.clip_by_global_norm(policy_grads, 40.0)
    critic_optimizer.apply(critic_grads, critic_variables)
    policy_optimizer.apply(policy_grads, policy_variables)
    return critic_loss, policy_loss


results["learner_losses"] = [
    rounded(learner_step(observations, actions)) for _ in range(5)
]
for name, optimizer in [("policy", policy_optimizer), ("critic", critic_optimizer)]:
    results[f"learner_{name}_slots"] = sorted(
        (v.name, v.shape.as_list()) for v in optimizer.variables
    )

# -- Snapshots (SavedModel) and checkpoints.
directory = tempfile.mkdtemp()
snapshotter = savers.Snapshotter(
    {"policy": policy}, directory=directory, time_delta_minutes=0
)
snapshotter.save(force=True)
(path,) = list(snapshotter._snapshots)  # noqa: SLF001 - where it saved.
results["snapshot_outputs"] = rounded(tf.saved_model.load(path)(observations))
results["policy_outputs"] = rounded(policy(observations))
checkpointer = savers.Checkpointer(
    {"policy": policy, "optimizer": policy_optimizer},
    directory=directory,
    subdirectory="checkpoint",
    time_delta_minutes=0,
    add_uid=False,
)
checkpointer.save(force=True)
saved = [v.numpy() for v in policy.variables]
for v in policy.variables:
    v.assign(tf.zeros_like(v))
checkpointer.restore()
results["checkpoint_restored"] = all(
    np.array_equal(a, v.numpy()) for a, v in zip(saved, policy.variables)
)
# -- IMPALA-style unrolls with batch-applied heads.
core = snt.DeepRNN([snt.nets.MLP([8]), snt.LSTM(6)])
head = snt.BatchApply(networks.PolicyValueHead(3))
inputs = tf.stack([observations, observations * 0.5, -observations])
snt.static_unroll(core, inputs, core.initial_state(3))
fill(core, 6)
outputs, state = snt.static_unroll(core, inputs, core.initial_state(3))
head(outputs)
fill(head, 7)
results["impala_heads"] = rounded(head(outputs))
results["impala_state"] = rounded(state)
dynamic, _ = snt.dynamic_unroll(core, inputs, core.initial_state(3))
results["unrolls_agree"] = bool(np.allclose(outputs, dynamic, atol=1e-6))

for key in sorted(results):
    print(key, "=", results[key])
