"""Golden corpus: every file under golden/ is parsed (dialect detected) and validated.

Each ``<dialect>_<dom>_<name>.txt`` has ``<same>.expected.json`` next to it holding the verdict,
the plan read and every diagnostic. Set ``MASORCH_UPDATE_GOLDEN=1`` to rewrite the expectations
after an intended change, then review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from masorch.plan import DoM, check, parse, render

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*.txt"))


def _verdict(path: Path, catalogue) -> dict:
    dom = path.stem.split("_", 2)[1]
    result = check(path.read_text(encoding="utf-8"), DoM(dom), catalogue)
    return {
        "dom": dom,
        "dialect": result.dialect,
        "valid": result.valid,
        "plan": None if result.plan is None else result.plan.model_dump(mode="json"),
        "diagnostics": [d.to_dict() for d in result.diagnostics],
    }


def test_corpus_covers_every_dialect_both_ways():
    names = [p.stem for p in CASES]
    for dialect in ("calls", "json", "xml"):
        assert any(n.startswith(dialect) for n in names)
    expected = [json.loads(p.with_suffix(".expected.json").read_text()) for p in CASES]
    assert any(e["valid"] for e in expected) and any(not e["valid"] for e in expected)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden(path: Path, catalogue):
    got = _verdict(path, catalogue)
    expected_path = path.with_suffix(".expected.json")
    if os.environ.get("MASORCH_UPDATE_GOLDEN") == "1":
        expected_path.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(expected_path.read_text(encoding="utf-8"))
    assert got == expected
    assert got["dialect"] == path.stem.split("_", 1)[0]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden_plans_round_trip_in_every_dialect(path: Path):
    plan = parse(path.read_text(encoding="utf-8")).plan
    if plan is None:
        pytest.skip("no plan read")
    for dialect in ("calls", "json", "xml"):
        assert parse(render(plan, dialect), dialect).plan == plan, dialect
