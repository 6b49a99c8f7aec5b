"""A Haiku/JAX-style functional API: modules as pure `(init, apply)` functions."""

from sonnet._src.functional.haiku import transform as transform
from sonnet._src.functional.haiku import transform_with_state as transform_with_state
from sonnet._src.functional.haiku import without_state as without_state
from sonnet._src.functional.jax import device_get as device_get
from sonnet._src.functional.jax import device_put as device_put
from sonnet._src.functional.jax import grad as grad
from sonnet._src.functional.jax import jit as jit
from sonnet._src.functional.jax import value_and_grad as value_and_grad
from sonnet._src.functional.optimizers import adam as adam
from sonnet._src.functional.optimizers import momentum as momentum
from sonnet._src.functional.optimizers import optimizer as optimizer
from sonnet._src.functional.optimizers import rmsprop as rmsprop
from sonnet._src.functional.optimizers import sgd as sgd
from sonnet._src.functional.tensor_variable import variables as variables

__all__ = [
    "variables",
    "transform",
    "transform_with_state",
    "without_state",
    "device_get",
    "device_put",
    "grad",
    "jit",
    "value_and_grad",
    "optimizer",
    "sgd",
    "adam",
    "rmsprop",
    "momentum",
]
