"""docs/plan-language.md: every ```plan block is checked against its header, python blocks run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.plan import CODES, DoM, check

DOC = Path(__file__).parents[2] / "docs" / "plan-language.md"
TEXT = DOC.read_text(encoding="utf-8")
PLAN_BLOCK = re.compile(r"^(`{3,})plan ([^\n]*)\n(.*?)^\1[ \t]*$", re.M | re.S)
PY_BLOCK = re.compile(r"^```python\n(.*?)^```[ \t]*$", re.M | re.S)
BLOCKS = [(m.group(2), m.group(3)) for m in PLAN_BLOCK.finditer(TEXT)]


def _header(header: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in header.split())


def test_the_page_has_examples_in_every_dialect():
    assert len(BLOCKS) >= 10
    dialects = {check(body, DoM.HIGH, builtin_catalogue()).dialect for _, body in BLOCKS}
    assert dialects == {"calls", "json", "xml"}


@pytest.mark.parametrize(("header", "body"), BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_plan_block(header: str, body: str):
    spec = _header(header)
    result = check(body, DoM(spec["dom"]), builtin_catalogue())
    codes = [d.code for d in result.diagnostics]
    verdict, _, listed = spec["expect"].partition(":")
    assert verdict in ("valid", "invalid")
    assert result.valid == (verdict == "valid"), result.diagnostics
    assert codes == (listed.split(",") if listed else []), result.diagnostics


def test_python_blocks_run(capsys):
    outside = PLAN_BLOCK.sub("", TEXT)
    blocks = PY_BLOCK.findall(outside)
    assert blocks
    for source in blocks:
        exec(compile(source, str(DOC), "exec"), {})
    assert "<agent_id>facts</agent_id>" in capsys.readouterr().out


def test_every_code_is_documented():
    documented = set(re.findall(r"^\| `([a-z_]+)` \| (?:error|warning|info) \|", TEXT, re.M))
    assert documented == set(CODES)
    for code, (severity, _) in CODES.items():
        assert re.search(rf"^\| `{code}` \| {severity.value} \|", TEXT, re.M), code
