"""Pytest setup shared by tests and doctests.

Four virtual CPU devices are configured before TensorFlow initialises, so that
distribution tests can use 2- and 4-replica `MirroredStrategy`s on CPU.

TensorFlow's default CPU kernels are pinned (`TF_ENABLE_ONEDNN_OPTS=0`, unless
set already) so that every machine runs the same kernels: TensorFlow turns its
oneDNN kernels on by default only on CPUs with AVX-512-VNNI/BF16 or AMX, and
those kernels treat invalid arguments differently (they accept some that the
default ones reject, crash or compute garbage on others), which would change
what the differential suite records of the original Sonnet from one machine
to the next. `tests/test_onednn.py` runs the suites whose code paths depend on
the kernels again with oneDNN on.
"""

import os
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import pytest
import tensorflow as tf

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(4)]
)

import sonnet as snt  # noqa: E402

# Files that third-party projects' runs execute (`tests/test_third_party.py`),
# with those projects on the path: not test or doctest modules here.
collect_ignore = ["tests/third_party"]


@pytest.fixture(autouse=True)
def _doctest_globals(doctest_namespace):
    doctest_namespace.update(snt=snt, tf=tf)


@pytest.fixture(autouse=True)
def _seeded(request):
    """TensorFlow's global seed set from the test's id before each test.

    Random ops without a seed of their own (initializers, dropout masks)
    then draw the same numbers in every run, whichever worker runs the test
    and whatever ran before it there: a test that passes passes again, and
    one that fails reproduces alone.
    """
    tf.random.set_seed(zlib.crc32(request.node.nodeid.encode()) % 2**31)


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
