"""Shared fixtures for the plan-language tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.plan.catalogue import KindSignature

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:  # the shared helpers (gbnf.py) import under any pytest import mode
    sys.path.insert(0, _HERE)


@pytest.fixture
def catalogue() -> dict[str, KindSignature]:
    """The built-in catalogue: what the CLI and the orchestrator use."""
    return builtin_catalogue()
