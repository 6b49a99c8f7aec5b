"""Fixtures of the differential suite (see `test_differential.py`)."""

from __future__ import annotations

import pytest

from tests.differential import original


@pytest.fixture(scope="session")
def original_results() -> original.OriginalResults:
    python = original.original_python()
    if python is None:
        pytest.skip(original.missing_reason())
    return original.OriginalResults(python)
