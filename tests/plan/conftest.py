"""Shared fixtures for the plan-language tests."""

from __future__ import annotations

import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.plan.catalogue import KindSignature


@pytest.fixture
def catalogue() -> dict[str, KindSignature]:
    """The built-in catalogue: what the CLI and the orchestrator use."""
    return builtin_catalogue()
