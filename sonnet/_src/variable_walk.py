"""The variables of a module tree: the one walk behind `variables` and
`trainable_variables`.

`snt.Module.variables` / `trainable_variables`, `snt.KerasLayer`'s weights,
`snt.summary` and the fine-tuning tools all list a tree's variables here.
It is `tf.Module`'s walk (attributes in sorted name order, into lists,
tuples and dicts, then each submodule depth first; each variable once), with
the two variants features need, each behind a switch that costs one read
when unused:

- Keras 3 layers and `keras.Variable`s held by a module stand for the
  `tf.Variable`s that hold their values, and Keras decides which of them are
  trainable (`keras_variables.py`);
- once anything was frozen (`snt.freeze`, `snt.lora.add`), the variables
  that frozen modules hold leave the trainable list (`freezing.py`).

A trainable list read while a `tf.function` is traced is noted, so that a
later freeze can warn that the traced function keeps the old list.
"""

from __future__ import annotations

import tensorflow as tf

from sonnet._src import freezing, keras_variables


def variables(module: tf.Module) -> tuple[tf.Variable, ...]:
    """All variables of `module`'s tree, Keras layers' included."""
    return keras_variables.variables(module)


def trainable_variables(module: tf.Module) -> tuple[tuple[tf.Variable, ...], bool]:
    """The variables `module` trains, and whether frozen ones were left out.

    (A module whose variables are all frozen has none to train, which is
    not the error of a module without variables.)
    """
    if tf.inside_function():
        freezing.record_traced_read(module)
    if freezing.ACTIVE:
        return freezing.trainable_variables(module)
    return keras_variables.trainable_variables(module), False
