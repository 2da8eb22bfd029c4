"""``masorch validate`` on the inputs that once crashed or hung the readers: a diagnostic and exit 1."""

from __future__ import annotations

import json

import pytest

from masorch.cli.main import main

HOSTILE = {
    "hex integer over 4300 digits": (
        'create_agent(id="a", kind="sc", task="x", n=0x' + "f" * 5000 + ")\n",
        "syntax",
    ),
    "1 MB of calls on one line": ('create_agent(id="a", kind="cot", task="x") ' * 25_000, "plan_too_large"),
    "1 MB of <thinking>": ("<thinking>" * 100_000, "plan_too_large"),
    "NaN temperature": (
        '{"agents": [{"id": "a", "kind": "sc", "task": "x", "temperature": NaN}]}',
        "bad_param",
    ),
}


@pytest.mark.parametrize(("text", "code"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_plans_are_reported_invalid_without_a_traceback(tmp_path, capsys, text: str, code: str):
    path = tmp_path / "plan.txt"
    path.write_text(text)
    assert main(["validate", str(path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is False and code in [d["code"] for d in data["diagnostics"]]
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"[{code}]" in out and "Traceback" not in out
