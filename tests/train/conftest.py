"""Shared fixtures of the training tests; the shared test helpers importable under any import mode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="module")
def smollm2() -> str:
    """The smallest embedded model as a policy string; the test is skipped when it is not pulled."""
    from masorch.backends.models import ModelStore

    status = {m.name: m for m in ModelStore().list()}["smollm2-135m"]
    if not status.cached:
        pytest.skip("smollm2-135m is not pulled (masorch models pull smollm2-135m)")
    return "local:smollm2-135m"
