"""docs/view.md: its flags exist, its endpoints answer, its pictures are there."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner
from view_helpers import make_training_run

from masorch.cli.main import build_app
from masorch.view.app import ViewApp
from masorch.view.source import detect

DOC = Path(__file__).parents[2] / "docs" / "view.md"


def test_every_documented_flag_exists() -> None:
    help_text = CliRunner().invoke(build_app(), ["view", "--help"], env={"COLUMNS": "200"}).output
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", DOC.read_text(encoding="utf-8")))
    flags -= {"--samples", "--keep", "--mode", "--trace", "--out"}  # the bench script's, other commands'
    assert flags and not sorted(f for f in flags if f not in help_text)


def test_every_documented_endpoint_answers(eval_run: Path, tmp_path: Path) -> None:
    endpoints = set(re.findall(r"^\| `(/api/[a-z]+)", DOC.read_text(encoding="utf-8"), re.M))
    assert endpoints == {
        "/api/info",
        "/api/run",
        "/api/report",
        "/api/sample",
        "/api/runs",
        "/api/training",
        "/api/samples",
    }
    run = ViewApp(detect(eval_run)).get("/api/run")
    key, run_id = (run["rows"][0][run["columns"].index(name)] for name in ("key", "trace_id"))
    answered = set()
    for path, asks in (
        (eval_run, ["/api/info", "/api/run", "/api/report", f"/api/sample?key={key}", "/api/runs"]),
        (eval_run / "traces.jsonl", [f"/api/sample?run={run_id}"]),
        (make_training_run(tmp_path / "train"), ["/api/training", "/api/samples?step=1"]),
    ):
        app = ViewApp(detect(path))
        for ask in asks:
            assert app.get(ask)
            answered.add(ask.split("?")[0])
    assert answered == endpoints


def test_the_pictures_are_there_and_small() -> None:
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", DOC.read_text(encoding="utf-8"))
    assert len(pictures) == 2
    for picture in pictures:
        path = DOC.parent / picture
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size < 200_000
