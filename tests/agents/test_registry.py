"""The default registry of built-in sub-agents."""

from __future__ import annotations

import pytest

from masorch.agents import SubAgent, builtin_catalogue, default_registry
from masorch.errors import UsageError


def test_default_registry_has_the_six_kinds_with_their_catalogue_signatures():
    registry = default_registry()
    assert list(registry.catalogue()) == ["cot", "sc", "debate", "reflexion", "search", "python"]
    assert registry.catalogue() == builtin_catalogue()
    for kind in registry.catalogue():
        assert isinstance(registry.get(kind), SubAgent)


def test_registries_are_independent():
    first, second = default_registry(), default_registry()
    assert first.get("cot") is not second.get("cot")
    with pytest.raises(UsageError):
        first.register(second.get("cot"))
