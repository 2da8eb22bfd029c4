"""Fixtures of the viewer tests: one recorded eval run per session (it takes about a second)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from view_helpers import make_eval_run


@pytest.fixture(scope="session")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished eval run (sas:cot and mas:high on 3 sums); tests copy it before changing it."""
    return make_eval_run(tmp_path_factory.mktemp("recorded") / "run")


@pytest.fixture
def eval_run(recorded_run: Path, tmp_path: Path) -> Path:
    """A private copy of the recorded run."""
    return Path(shutil.copytree(recorded_run, tmp_path / "run"))
