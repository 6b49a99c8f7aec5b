"""Registry entries for the basic modules: Linear, Bias, Embed, Dropout,
Sequential, Reshape/Flatten, BatchApply and nets.MLP."""

from __future__ import annotations

import tensorflow as tf

import sonnet as snt
from tests.conformance import case
from tests.conformance.case import Case

_x = case.ramp


CASES = [
    Case(
        id="Linear",
        cls=snt.Linear,
        factory=lambda: snt.Linear(3),
        inputs=lambda: _x(2, 4),
        ctor_kwargs={"output_size": 3},
    ),
    Case(
        id="Linear-nobias-rank3",
        cls=snt.Linear,
        factory=lambda: snt.Linear(3, with_bias=False),
        inputs=lambda: _x(2, 3, 4),
        ctor_kwargs={"output_size": 3, "with_bias": False},
    ),
    Case(
        id="Linear-float64",
        cls=snt.Linear,
        factory=lambda: snt.Linear(2, name="lin64"),
        inputs=lambda: (tf.ones([2, 3], tf.float64),),
        ctor_kwargs={"output_size": 2, "name": "lin64"},
    ),
    Case(
        id="Bias",
        cls=snt.Bias,
        factory=snt.Bias,
        inputs=lambda: _x(2, 3, 3, 3),
        ctor_kwargs={},
    ),
    Case(
        id="Bias-channels",
        cls=snt.Bias,
        factory=lambda: snt.Bias(bias_dims=[-1], b_init=snt.initializers.Ones()),
        inputs=lambda: _x(2, 3, 4),
        ctor_kwargs={"bias_dims": [-1], "b_init": snt.initializers.Ones()},
    ),
    Case(
        id="Bias-axis1-multiplier",
        cls=snt.Bias,
        factory=lambda: snt.Bias(bias_dims=[1], b_init=snt.initializers.Ones()),
        inputs=lambda: _x(2, 3, 4),
        call=lambda m, x: m(x, multiplier=2.0),
        ctor_kwargs={"bias_dims": [1], "b_init": snt.initializers.Ones()},
    ),
    Case(
        id="Embed",
        cls=snt.Embed,
        factory=lambda: snt.Embed(vocab_size=10, embed_dim=3),
        inputs=lambda: (tf.constant([[1, 2, 9], [0, 0, 4]]),),
        ctor_kwargs={"vocab_size": 10, "embed_dim": 3},
    ),
    Case(
        id="Embed-densify",
        cls=snt.Embed,
        factory=lambda: snt.Embed(
            existing_vocab=tf.ones([5, 2]), densify_gradients=True
        ),
        inputs=lambda: (tf.constant([3, 1]),),
        ctor_kwargs={"existing_vocab": tf.ones([5, 2]), "densify_gradients": True},
    ),
    Case(
        id="Dropout-training",
        cls=snt.Dropout,
        factory=lambda: snt.Dropout(0.5),
        inputs=lambda: _x(2, 3, 3),
        call=lambda m, x: m(x, is_training=True),
        deterministic=False,
        ctor_kwargs={"rate": 0.5},
    ),
    Case(
        id="Dropout-eval-variable-rate",
        cls=snt.Dropout,
        factory=lambda: snt.Dropout(tf.Variable(0.25), noise_shape=[2, 1, 3]),
        inputs=lambda: _x(2, 3, 3),
        # Evaluation returns `x` itself; `tf.identity` gives strategy.run a
        # per-replica output to compare.
        call=lambda m, x: tf.identity(m(x, is_training=False)),
        trainable=False,  # The rate variable is unused in evaluation.
        ctor_kwargs={"rate": tf.Variable(0.25), "noise_shape": [2, 1, 3]},
    ),
    Case(
        id="Sequential",
        cls=snt.Sequential,
        factory=lambda: snt.Sequential([snt.Linear(4), tf.nn.relu, snt.Linear(2)]),
        inputs=lambda: _x(2, 3),
        ctor_kwargs={"layers": [snt.Linear(4), tf.nn.relu, snt.Linear(2)]},
    ),
    Case(
        id="Reshape",
        cls=snt.Reshape,
        factory=lambda: snt.Reshape([2, -1]),
        inputs=lambda: _x(2, 3, 4),
        ctor_kwargs={"output_shape": [2, -1]},
    ),
    Case(
        id="Flatten-preserve2",
        cls=snt.Flatten,
        factory=lambda: snt.Flatten(preserve_dims=2),
        inputs=lambda: _x(2, 3, 2, 2),
        ctor_kwargs={"preserve_dims": 2},
    ),
    Case(
        id="BatchApply",
        cls=snt.BatchApply,
        factory=lambda: snt.BatchApply(snt.Linear(3)),
        inputs=lambda: _x(2, 3, 4),
        ctor_kwargs={"module": snt.Linear(3)},
    ),
    Case(
        id="MLP",
        cls=snt.nets.MLP,
        factory=lambda: snt.nets.MLP([4, 5, 3]),
        inputs=lambda: _x(2, 6),
        ctor_kwargs={"output_sizes": [4, 5, 3]},
    ),
    Case(
        id="MLP-nobias-activate-final",
        cls=snt.nets.MLP,
        factory=lambda: snt.nets.MLP(
            [3, 3], with_bias=False, activation=tf.tanh, activate_final=True
        ),
        inputs=lambda: _x(2, 2),
        ctor_kwargs={
            "output_sizes": [3, 3],
            "with_bias": False,
            "activation": tf.tanh,
            "activate_final": True,
        },
    ),
    Case(
        id="MLP-dropout-training",
        cls=snt.nets.MLP,
        # 8 hidden units x 4 rows: NaN inputs stay visible in the output
        # unless dropout zeroes every hidden value (1 in 2**32; with 4 x 2
        # it was 1 in 256, a flaky NaN-propagation check).
        factory=lambda: snt.nets.MLP([8, 2], dropout_rate=0.5),
        inputs=lambda: _x(4, 3),
        call=lambda m, x: m(x, is_training=True),
        deterministic=False,
        ctor_kwargs={"output_sizes": [8, 2], "dropout_rate": 0.5},
    ),
]

NOT_REGISTERED: dict[type, str] = {}
