"""The CLI entry point: version, help and clean errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import masorch
from masorch.cli.main import main


def test_version_flag(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == masorch.__version__


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_python_dash_m_runs_the_cli():
    root = Path(__file__).parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "masorch", "--help"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root / "src")},
        cwd=root,
    )
    assert out.returncode == 0, out.stderr
    assert "multi-agent" in out.stdout


def test_a_missing_extra_names_the_extra_in_brackets(capsys, monkeypatch):
    # Rich would read "[train]" as a style tag and print "pip install 'masorch'".
    monkeypatch.setitem(sys.modules, "torch", None)  # find_spec then says "not installed"
    code = main(["run", "2+2?", "--orchestrator", "hf:/nowhere", "--subagent", "hf:/nowhere", "--json"])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'masorch[train]'" in err, err


def test_paths_with_brackets_are_printed_as_text(tmp_path, monkeypatch, capsys):
    # A cache path holding "[/x]" crashed `models list` and `models verify all` (rich markup).
    cache = tmp_path / "c[/x]"
    monkeypatch.setenv("MASORCH_CACHE", str(cache))
    assert main(["models", "list"]) == 0
    assert main(["models", "verify", "all"]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert "c[/x]" in out and "nothing to verify" in out
