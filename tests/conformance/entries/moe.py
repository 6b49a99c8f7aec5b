"""Registry entries for `snt.MixtureOfExperts`."""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

import sonnet as snt
from tests.conformance import case

_MOE = snt.MixtureOfExperts


def _with_losses(module: Any, x: tf.Tensor) -> Any:
    return module(x, return_aux_losses=True)


CASES = [
    # Dropless routing: the group sizes are known only when it runs, so XLA
    # cannot compile it (the module refuses it with a clean error).
    dataclasses.replace(
        case.from_kwargs(
            "MixtureOfExperts",
            _MOE,
            {"num_experts": 4, "hidden_size": 6},
            lambda: (case.sequence(2, 4, 8),),
        ),
        xla=False,
    ),
    case.from_kwargs(
        "MixtureOfExperts-capacity-swiglu-shared",
        _MOE,
        {
            "num_experts": 4,
            "hidden_size": 6,
            "top_k": 2,
            "activation": "swiglu",
            "capacity_factor": 1.0,
            "shared_expert": True,
            "shared_hidden_size": 5,
        },
        lambda: (case.sequence(2, 4, 8),),
    ),
    case.from_kwargs(
        "MixtureOfExperts-sigmoid-top1-aux-losses",
        _MOE,
        {
            "num_experts": 3,
            "hidden_size": 4,
            "top_k": 1,
            "gating": "sigmoid",
            "capacity_factor": 2.0,
            "with_bias": False,
            "activation": "relu",
        },
        lambda: (case.sequence(3, 5, 6),),
        _with_losses,
    ),
]
