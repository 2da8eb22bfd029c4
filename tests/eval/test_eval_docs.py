"""The YAML system files and CLI flags shown in docs/eval.md are valid."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from typer.testing import CliRunner

from masorch.cli import eval as eval_cli
from masorch.eval.systems import systems_from_yaml

DOC = Path(__file__).parents[2] / "docs" / "eval.md"


def test_every_yaml_example_parses_into_systems() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        text = "\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines())
        specs = systems_from_yaml(text)
        assert specs and all(s.model for s in specs)


def test_every_documented_run_flag_exists() -> None:
    app = typer.Typer()
    eval_cli.register(app)
    help_text = CliRunner().invoke(app, ["eval", "run", "--help"], env={"COLUMNS": "200"}).output
    doc = DOC.read_text(encoding="utf-8")
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", doc)) - {"--paper", "--port", "--axis", "--values"}
    flags -= {"--n", "--split", "--help", "--latency-ms"}  # masorch bench make, bench script
    missing = sorted(f for f in flags if f not in help_text)
    assert not missing, missing
