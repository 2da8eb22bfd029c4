"""``masorch run`` end to end on the smallest embedded model (needs `masorch models pull smollm2-135m`)."""

from __future__ import annotations

import json

import pytest

from masorch.cli.main import main
from masorch.errors import UsageError
from masorch.trace.events import LlmCall, NodeFinished, PlanParsed, PlanRejected
from masorch.trace.writer import read_trace

pytestmark = [pytest.mark.model, pytest.mark.timeout(900)]

MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def pulled() -> None:
    from masorch.backends.models import path

    try:
        path(MODEL)
    except UsageError as exc:
        pytest.skip(f"{exc.message}; run: {exc.hint}")


def test_a_real_plan_runs_end_to_end_on_smollm2(pulled, tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    code = main(
        [
            "run",
            "What is 2 + 3?",
            "--orchestrator",
            f"local:{MODEL}",
            "--subagent",
            f"local:{MODEL}",
            "--dom",
            "low",
            "--dialect",
            "json",  # schema-constrained: even this tiny model writes a parseable plan
            "--max-tokens",
            "96",
            "--budget-calls",
            "4",
            "--timeout",
            "240",
            "--json",
            "--trace",
            str(trace),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"answer", "status", "error", "plan", "diagnostics", "usage", "wall_s", "rounds"}
    assert code == (0 if out["status"] == "ok" else 1)
    events = read_trace(trace)
    calls = [e for e in events if isinstance(e, LlmCall)]
    assert calls and {c.model for c in calls} == {f"local:{MODEL}"}
    assert all(c.completion_tokens > 0 and c.error == "" for c in calls)
    assert out["usage"]["calls"] == len(calls) <= 4
    # The constrained plan parses; it either runs (nodes finish) or is rejected with diagnostics.
    assert any(isinstance(e, PlanParsed | PlanRejected) for e in events)
    if out["status"] != "invalid_plan":
        assert out["plan"] is not None
        finished = [e for e in events if isinstance(e, NodeFinished)]
        assert len(finished) == len(out["plan"]["agents"])
    assert events[-1].type == "run_finished" and events[-1].status == out["status"]
