"""Stand-ins for packages that acme's TensorFlow code imports but never uses here.

acme 0.4.0 imports `launchpad`, `gym`, `reverb` and others at import time of
modules that `acme.tf` pulls in (wrappers, environment loop, signals); none of
them is called by its networks, savers or utilities, and several have no
build for current Python. This file is put on `PYTHONPATH` by
`tests/test_third_party.py`, so Python imports it at start-up and registers a
finder that answers those imports with empty modules whose attributes are
inert placeholders.
"""

import importlib.abc
import importlib.machinery
import sys
import types

STUBBED = {
    "atari_py",
    "bsuite",
    "chex",
    "dm_control",
    "flax",
    "gym",
    "haiku",
    "jax",
    "launchpad",
    "optax",
    "pandas",
    "portpicker",
    "reverb",
    "rlax",
    "rlds",
    "tensorflow_datasets",
}


class _Placeholder:
    """Any attribute, call or base class: another placeholder."""

    def __init__(self, *args, **kwargs):
        del args, kwargs

    def __call__(self, *args, **kwargs):
        return _Placeholder()

    def __getattr__(self, name):
        return _Placeholder()

    def __mro_entries__(self, bases):
        return (object,)


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
