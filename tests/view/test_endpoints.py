"""The viewer's data endpoints on recorded runs: eval report and table, samples, traces, training."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from view_helpers import PLAN_NODES, make_training_run

from masorch.errors import UsageError
from masorch.eval.harness import TRACE_FILE
from masorch.eval.log import LOG_FILE
from masorch.view.app import NotFound, ViewApp
from masorch.view.payload import to_json
from masorch.view.source import detect


def _app(path: Path) -> ViewApp:
    return ViewApp(detect(path))


def _rows(run: dict) -> list[dict]:
    return [dict(zip(run["columns"], row, strict=True)) for row in run["rows"]]


def test_an_eval_run_gives_its_report_and_a_row_per_sample(eval_run: Path) -> None:
    app = _app(eval_run)
    assert app.get("/api/info")["kind"] == "eval"
    run = app.get("/api/run")
    rows = _rows(run)
    assert run["done"] == run["expected"] == 6
    assert {r["system"] for r in rows} == {"sas:cot", "mas:high"}
    assert sum(r["correct"] for r in rows) == 4  # item 0 is answered wrongly by both systems
    report = app.get("/api/report")
    cells = {c["system"]: c for c in report["cells"] if c["value"] is None}
    assert cells["mas:high"]["accuracy"]["mean"] == pytest.approx(2 / 3)
    assert cells["mas:high"]["calls"] == 4 and cells["sas:cot"]["calls"] == 1
    [paired] = [p for p in report["paired"] if p["value"] is None]
    assert (paired["mas"], paired["sas"], paired["diff"]["n"]) == ("mas:high", "sas:cot", 3)


def _handwritten_run(directory: Path, systems: list[str], records: list[tuple[str, str, bool]]) -> Path:
    """An eval run directory whose log holds these (system, sample id, correct) records of dataset d."""
    directory.mkdir(parents=True)
    header = {
        "type": "header",
        "version": 1,
        "systems": [{"name": s, "mode": s.split(":")[0], "model": "m"} for s in systems],
        "datasets": [{"name": "d", "n": 4, "scorer": "math"}],
    }
    lines = [header] + [
        {"type": "sample", "key": f"{s}|d|{i}", "system": s, "dataset": "d", "sample_id": i, "status": "ok",
         "correct": ok, "score": float(ok)}
        for s, i, ok in records
    ]  # fmt: skip
    (directory / LOG_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return directory


def test_an_interval_over_no_samples_is_null_and_one_with_no_width_says_so(tmp_path: Path) -> None:
    records = [("sas:cot", "0", True), ("sas:cot", "1", True)]
    records += [("mas:high", "2", True), ("mas:high", "3", False)]
    report = _app(_handwritten_run(tmp_path / "run", ["sas:cot", "mas:high"], records)).get("/api/report")
    [paired] = report["paired"]
    assert paired["diff"] == {"mean": None, "low": None, "high": None, "n": 0, "degenerate": False}
    cells = {c["system"]: c["accuracy"] for c in report["cells"] if c["value"] is None}
    assert cells["sas:cot"]["degenerate"] and cells["sas:cot"]["mean"] == 1.0
    assert not cells["mas:high"]["degenerate"]


def test_a_system_with_no_finished_sample_has_a_cell_with_no_numbers(tmp_path: Path) -> None:
    records = [("sas:cot", "0", True), ("sas:cot", "1", False)]
    report = _app(_handwritten_run(tmp_path / "run", ["sas:cot", "mas:high"], records)).get("/api/report")
    cells = {c["system"]: c for c in report["cells"] if c["value"] is None}
    empty = cells["mas:high"]
    assert empty["accuracy"]["n"] == 0 and empty["accuracy"]["mean"] is None
    assert [empty[k] for k in ("score", "calls", "tokens", "cost", "wall_s")] == [None] * 5
    assert cells["sas:cot"]["score"] == 0.5 and cells["sas:cot"]["calls"] is not None


def test_a_mas_sample_has_its_plan_graph_timeline_and_every_call(eval_run: Path) -> None:
    app = _app(eval_run)
    row = next(r for r in _rows(app.get("/api/run")) if r["system"] == "mas:high")
    sample = app.get(f"/api/sample?key={row['key']}")
    assert sample["record"]["key"] == row["key"]
    trace = sample["trace"]
    assert trace["run"]["question"].startswith("Item ")
    graph = trace["graph"]
    assert [n["id"] for n in graph["nodes"]] == list(PLAN_NODES)
    edges = {(e["src"], e["dst"]): e["implied"] for e in graph["edges"]}
    assert edges == {("first", "total"): False, ("second", "total"): True}  # ${second} implied its flow
    assert [n["layer"] for n in graph["nodes"]] == [0, 0, 1]
    assert graph["critical_path"][-1] == "total" and len(graph["critical_path"]) == 2
    assert {n["status"] for n in graph["nodes"]} == {"ok"}
    # one orchestrator call, one call per node: each with its messages and reply
    calls = trace["calls"]
    assert [c["role"] for c in calls] == ["orchestrator", "subagent", "subagent", "subagent"]
    assert all(c["messages"] and c["response"] for c in calls)
    assert "create_agent" in calls[0]["response"]
    timeline = trace["timeline"]
    assert timeline["lanes"] == ["orchestrator", *PLAN_NODES]
    assert len(timeline["bars"]) == len(PLAN_NODES) + len(calls)
    assert all(0 <= b["start"] <= b["end"] <= trace["wall_s"] + 1e-6 for b in timeline["bars"])
    first, second = (n for n in graph["nodes"] if n["id"] in ("first", "second"))
    assert first["start"] < second["end"] and second["start"] < first["end"]  # they ran in parallel
    assert trace["plans"][0]["valid"] and trace["plans"][0]["dialect"] == "calls"


def test_a_sas_sample_is_one_node_without_a_plan(eval_run: Path) -> None:
    app = _app(eval_run)
    row = next(r for r in _rows(app.get("/api/run")) if r["system"] == "sas:cot")
    trace = app.get(f"/api/sample?key={row['key']}")["trace"]
    assert trace["plans"] == [] and [n["kind"] for n in trace["graph"]["nodes"]] == ["cot"]
    assert len(trace["timeline"]["bars"]) == 2


def test_unknown_samples_and_endpoints_are_not_found(eval_run: Path) -> None:
    app = _app(eval_run)
    with pytest.raises(NotFound, match="no sample"):
        app.get("/api/sample?key=nope")
    with pytest.raises(NotFound, match="no endpoint"):
        app.get("/api/nope")
    with pytest.raises(NotFound, match="not a training run"):
        app.get("/api/training")


def test_a_run_still_being_written_loads_and_follows_new_records(eval_run: Path) -> None:
    log, traces = eval_run / LOG_FILE, eval_run / TRACE_FILE
    lines = log.read_text().splitlines(keepends=True)
    held = lines.pop()  # the last record has not been written yet ...
    log.write_text("".join(lines) + held[:25])  # ... but its first bytes have
    with traces.open("a") as fh:
        fh.write('{"schema_version": 1, "run_id": "torn", "ty')
    app = _app(eval_run)
    assert app.get("/api/run")["done"] == 5
    key = json.loads(held)["key"]
    with pytest.raises(NotFound):
        app.get(f"/api/sample?key={key}")
    log.write_text("".join(lines) + held)  # the write completes
    assert app.get("/api/run")["done"] == 6
    assert app.get(f"/api/sample?key={key}")["trace"]["found"]
    assert sum(c["accuracy"]["n"] for c in app.get("/api/report")["cells"] if c["value"] is None) == 6


def test_no_credential_reaches_a_payload(eval_run: Path) -> None:
    secret = "sk-SECRET-0123456789"
    log = eval_run / LOG_FILE
    lines = log.read_text().splitlines()
    record = json.loads(lines[-1])
    record["error"] = f"could not reach http://user:{secret}@10.0.0.1:8000/v1?api_key={secret}"
    record["answer"] = f"see https://{secret}@host/x"
    log.write_text("\n".join([*lines[:-1], json.dumps(record)]) + "\n")
    app = _app(eval_run)
    text = to_json(app.get("/api/run")) + to_json(app.get(f"/api/sample?key={record['key']}"))
    assert secret not in text and "10.0.0.1:8000/v1" in text


def test_a_trace_file_lists_its_runs_and_shows_each(eval_run: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes((eval_run / TRACE_FILE).read_bytes())
    app = _app(trace)
    assert app.get("/api/info")["kind"] == "trace"
    runs = app.get("/api/runs")["runs"]
    assert len(runs) == 6 and all(r["question"].startswith("Item ") for r in runs)
    mas = [r for r in runs if r["mode"] == "orchestrate"]
    sample = app.get(f"/api/sample?run={mas[0]['run_id']}")
    assert sample["record"] is None and len(sample["trace"]["graph"]["nodes"]) == 3
    assert _app(eval_run).traces is not None  # the directory of a run holds a trace too
    assert app.get("/api/sample?run=absent")["trace"] == {"found": False}


def test_a_training_run_gives_its_series_in_order(tmp_path: Path) -> None:
    app = _app(make_training_run(tmp_path / "train", steps=4))
    assert app.get("/api/info")["kind"] == "training"
    data = app.get("/api/training")
    assert data["steps"] == [1, 2, 3, 4]
    assert list(data["series"])[:3] == ["reward", "rewards/correctness/mean", "plan/valid_rate"]
    assert data["series"]["reward"] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert data["summary"]["train_runtime"] == 7.0
    assert data["report"]["steps"] == 4 and "logs" not in data["report"]
    assert data["sample_steps"] == [1, 2, 3, 4]
    sampled = app.get("/api/samples?step=3")["samples"]
    assert [(s["step"], s["valid"], s["status"]) for s in sampled] == [
        (3, True, "ok"),
        (3, False, "invalid_plan"),
    ]
    assert "create_agent" in sampled[0]["plan"]
    with pytest.raises(NotFound, match="step= must be"):
        app.get("/api/samples?step=last")
    with (tmp_path / "train" / "log.jsonl").open("a") as fh:
        fh.write('{"step": 5, "rew')  # a line still being written
    assert app.get("/api/training")["steps"] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "absent", "no such file or directory"),
        (lambda d: d, "holds no eval run, training run or trace"),
        (lambda d: _write(d / "x.jsonl", '{"a": 1}\n'), "is not a masorch trace"),
        (lambda d: _write(d / "x.bin", "\x00\x01\n"), "is binary"),
        (lambda d: _fifo(d / "f.jsonl"), "is not a regular file"),  # reading it would block
        (lambda d: _write(d / "traces.jsonl", "").parent, "is not a masorch trace"),  # as the file itself
    ],
)
def test_a_path_that_is_nothing_to_view_is_a_usage_error(tmp_path: Path, make, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        detect(make(tmp_path))


def test_a_run_directory_whose_log_is_not_json_names_the_log(tmp_path: Path) -> None:
    _write(tmp_path / "log.jsonl", "not json\n")
    with pytest.raises(UsageError, match=r"log\.jsonl:1") as err:
        detect(tmp_path)
    assert "eval or training run" in (err.value.hint or "")
    assert "trace" not in (err.value.hint or "")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path
