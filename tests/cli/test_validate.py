"""``masorch validate``: reports, JSON output and exit codes."""

from __future__ import annotations

import io
import json

from masorch.cli.main import main

VALID = (
    'create_agent(id="facts", kind="search", task="Find the founding year of X.")\n'
    'create_agent(id="calc", kind="sc", task="Using ${facts}, compute the age of X in 2024.", n=5)\n'
    'create_flow("facts", "calc")\n'
)
INVALID = 'create_agent(id="a", kind="cot", task="x")\ncreate_agent(id="b", kind="sc", n=99, task="${a}")\n'


def test_valid_plan_exits_0_and_lists_the_plan(tmp_path, capsys):
    path = tmp_path / "plan.txt"
    path.write_text(VALID)
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "facts" in out and "calc" in out and "valid" in out


def test_invalid_plan_exits_1_and_lists_diagnostics(tmp_path, capsys):
    path = tmp_path / "plan.txt"
    path.write_text(INVALID)
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "[bad_param]" in out and "[implied_flow]" in out and "invalid" in out


def test_json_output_is_one_object(tmp_path, capsys):
    path = tmp_path / "plan.txt"
    path.write_text(INVALID)
    assert main(["validate", str(path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"valid", "dialect", "plan", "diagnostics"}
    assert data["valid"] is False and data["dialect"] == "calls"
    assert data["plan"]["agents"][1]["params"] == {"n": 99}
    assert [d["code"] for d in data["diagnostics"]] == ["bad_param", "implied_flow"]
    assert set(data["diagnostics"][0]) == {"code", "severity", "message", "hint", "where"}


def test_stdin_dom_and_dialect(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO('{"final_answer": "4"}'))
    assert main(["validate", "-", "--dom", "low", "--dialect", "json", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == {
        "valid": True,
        "dialect": "json",
        "plan": {"agents": [], "flows": [], "final_answer": "4"},
        "diagnostics": [],
    }
    monkeypatch.setattr("sys.stdin", io.StringIO('{"final_answer": "4"}'))
    assert main(["validate", "--dom", "high", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["diagnostics"][0]["code"] == "dom_direct_answer"


def test_usage_errors_exit_2_with_one_line_reason(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("error: no such file")
    path = tmp_path / "plan.txt"
    path.write_text(VALID)
    assert main(["validate", str(path), "--dialect", "yaml"]) == 2
    assert "unknown dialect 'yaml'" in capsys.readouterr().err
    assert main(["validate", str(path), "--dom", "medium"]) == 2
    assert "unknown DoM 'medium'" in capsys.readouterr().err
    assert main(["validate", str(path), "--bogus"]) == 2
    assert "No such option" in capsys.readouterr().err
    assert main(["validate", str(tmp_path)]) == 2


def test_no_file_and_a_terminal_on_stdin_is_a_usage_error(monkeypatch, capsys):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal(""))
    assert main(["validate"]) == 2
    assert capsys.readouterr().err.startswith("error: no plan given")


def test_plan_text_is_shown_as_text_not_read_as_markup(tmp_path, capsys):
    # A model's task "x[/i] y" crashed the report with a rich MarkupError; "[red]z[/red]" lost its text.
    path = tmp_path / "plan.txt"
    path.write_text(
        'create_agent(kind="cot", id="a", task="x[/i] y [red]z[/red]", temperature="[/x]")\n'
        'create_flow("[/z]", "a")\n'
    )
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "x[/i] y [red]z[/red]" in out and "'[/x]'" in out and "[/z] -> a" in out


def test_closed_standard_input_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", None)  # as `masorch validate <&-` starts
    assert main(["validate"]) == 2
    assert "no standard input" in capsys.readouterr().err
