#!/usr/bin/env bash
# Builds the API reference (HTML, from the docstrings, with pdoc) into
# docs/_build; open docs/_build/index.html. Works offline. Fails, listing the
# problems, on any pdoc warning or on an `Args:` entry naming no parameter.
#
#   docs/build.sh              # or: docs/build.sh -o OTHER_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
exec python docs/build.py "$@"
