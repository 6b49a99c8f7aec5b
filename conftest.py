"""Pytest setup shared by tests and doctests.

Four virtual CPU devices are configured before TensorFlow initialises, so that
distribution tests can use 2- and 4-replica `MirroredStrategy`s on CPU.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(4)]
)

import sonnet as snt  # noqa: E402


@pytest.fixture(autouse=True)
def _doctest_globals(doctest_namespace):
    doctest_namespace.update(snt=snt, tf=tf, np=np)


# The suites that take most of the run (thousands of parametrized cases, or
# whole example scripts): marked `slow`, so a development loop can skip them
# with `-m "not slow"`. CI runs everything.
_SLOW = ("tests/conformance/", "tests/differential/", "tests/test_examples.py")


def pytest_collection_modifyitems(config, items):
    del config
    root = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        path = os.path.relpath(str(item.fspath), root).replace(os.sep, "/")
        if path.startswith(_SLOW):
            item.add_marker(pytest.mark.slow)
