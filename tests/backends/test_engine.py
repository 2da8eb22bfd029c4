"""The llama.cpp server engine's cache and build, with a fake CMake and pip (no compiler, no network)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from masorch.backends.engine import EngineStore


def _legacy(store: EngineStore) -> Path:
    """A binary where builds went before the cache was keyed on the architecture."""
    binary = store.cache_dir / f"llama-server-{store.source.version}" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return binary


@pytest.mark.parametrize("machine", ["aarch64", "arm64"])
def test_a_cached_engine_is_not_reused_by_another_architecture(
    tmp_path: Path, machine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: machine)
    store = EngineStore(tmp_path / "engines", env={})
    _legacy(store)  # an x86-64 build in a shared cache
    assert store.find() is None and store.build_dir.name == "llama-server-0.3.36-aarch64"


def test_an_x86_64_build_from_before_the_key_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    store = EngineStore(tmp_path / "engines", env={})
    legacy = _legacy(store)
    assert store.find() == legacy and store.build() == legacy  # no rebuild
    store.built_binary.parent.mkdir(parents=True)
    store.built_binary.write_text("#!/bin/sh\n")
    store.built_binary.chmod(0o755)
    assert store.find() == store.built_binary  # a build for this architecture comes first
