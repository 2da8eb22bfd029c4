"""Report arithmetic from a hand-written log: means, intervals, failures, paired differences, plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from masorch.cli import eval as eval_cli
from masorch.cli.main import main
from masorch.eval.metrics import bootstrap_mean, paired_difference
from masorch.eval.report import summarize, write_report


def _rec(system: str, sid: str, correct: bool, **kw: Any) -> dict[str, Any]:
    base = {
        "type": "sample",
        "key": f"{system}|masbench:t|{sid}",
        "system": system,
        "dataset": "masbench:t",
        "sample_id": sid,
        "axis": "depth",
        "value": int(sid[0]),
        "status": "ok",
        "correct": correct,
        "score": 1.0 if correct else 0.0,
        "calls": 1,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cost": 0.0,
        "wall_s": 1.0,
    }
    return base | kw


HEADER = {
    "type": "header",
    "version": 1,
    "systems": [
        {"name": "sas:cot", "mode": "sas", "variant": "cot", "model": "m", "budget": {}},
        {"name": "sas:sc", "mode": "sas", "variant": "sc", "model": "m", "budget": {"max_calls": 9}},
        {"name": "mas:high", "mode": "mas", "variant": "high", "model": "m", "budget": {}},
    ],
    "datasets": [{"name": "masbench:t", "origin": "file:t", "n": 4, "scorer": "masbench"}],
}

# samples 2a, 2b (depth 2) and 3a, 3b (depth 3)
RECORDS = [
    _rec("sas:cot", "2a", True),
    _rec("sas:cot", "2b", False),
    _rec("sas:cot", "3a", False),
    _rec("sas:cot", "3b", False, status="error", calls=0),
    _rec("sas:sc", "2a", True, calls=5, cost=0.5),
    _rec("sas:sc", "2b", True, calls=5, cost=0.5),
    _rec("sas:sc", "3a", False, calls=5, cost=0.5),
    _rec("sas:sc", "3b", False, calls=5, cost=0.5),
    _rec("mas:high", "2a", True, calls=3, prompt_tokens=40, completion_tokens=20, cost=0.25, wall_s=3.0),
    _rec("mas:high", "2b", False, calls=3, cost=0.25, wall_s=2.0),
    _rec("mas:high", "3a", True, calls=4, cost=0.25, wall_s=2.0),
    # 3b never finished for mas:high (an incomplete run)
]


def test_cells_hold_hand_computed_means_and_failures() -> None:
    s = summarize(HEADER, RECORDS, n_boot=500)
    cot = s.cell("sas:cot", "masbench:t")
    assert cot is not None
    assert cot.n == 4 and cot.accuracy.mean == pytest.approx(0.25)  # the error counts as wrong
    assert cot.not_ok == 1 and cot.statuses == {"ok": 3, "error": 1}
    assert cot.calls == pytest.approx(0.75) and cot.tokens == pytest.approx(15)
    mas = s.cell("mas:high", "masbench:t")
    assert mas is not None and mas.n == 3
    assert mas.accuracy.mean == pytest.approx(2 / 3)
    assert mas.calls == pytest.approx(10 / 3)
    assert mas.tokens == pytest.approx((60 + 15 + 15) / 3)
    assert mas.cost == pytest.approx(0.25) and mas.wall_s == pytest.approx(7 / 3)
    # per axis value
    sc3 = s.cell("sas:sc", "masbench:t", 3)
    assert sc3 is not None and sc3.n == 2 and sc3.accuracy.mean == 0.0
    # intervals are the bootstrap of the 0/1 outcomes with the report's seed
    assert cot.accuracy == bootstrap_mean([1, 0, 0, 0], n_boot=500, seed=0)


def test_paired_difference_against_best_sas_on_shared_samples() -> None:
    s = summarize(HEADER, RECORDS, n_boot=500)
    overall = [p for p in s.paired if p.value is None]
    assert len(overall) == 1
    p = overall[0]
    # best SAS overall is sas:sc (2/4 vs 1/4); shared samples with mas:high: 2a, 2b, 3a
    assert (p.mas, p.sas, p.diff.n) == ("mas:high", "sas:sc", 3)
    assert p.diff.mean == pytest.approx((0 + -1 + 1) / 3)
    assert p.diff == paired_difference([1, 0, 1], [1, 1, 0], n_boot=500, seed=0)
    depth2 = next(p for p in s.paired if p.value == 2)
    # at depth 2 the best SAS is sas:sc (2/2); mas:high got 1/2
    assert depth2.sas == "sas:sc" and depth2.diff.mean == pytest.approx(-0.5)
    depth3 = next(p for p in s.paired if p.value == 3)
    # at depth 3 both SAS are 0/2: the tie goes to the first listed system (sas:cot)
    assert depth3.sas == "sas:cot" and depth3.diff.n == 1 and depth3.diff.mean == 1.0


def test_a_multi_round_system_is_paired_with_the_best_sas_and_gets_its_rounds(tmp_path: Path) -> None:
    rounds = {"name": "mas:rounds", "mode": "rounds", "variant": "", "model": "m",
              "orchestrator": "o", "budget": {"max_calls": 80}}  # fmt: skip
    header = HEADER | {"systems": [*HEADER["systems"], rounds]}
    runs = [
        _rec("mas:rounds", "2a", True, rounds=2, tools_ran={"python": 3}, tool_statuses={"OK": 3},
             ended_by="final_answer"),
        _rec("mas:rounds", "2b", True, rounds=3, tools_ran={"python": 2, "cot": 2},
             tool_statuses={"OK": 3, "EXEC_ERR": 1}, ended_by="synthesis"),
        _rec("mas:rounds", "3a", False, status="budget", rounds=3, tools_ran={"sc": 4},
             tool_statuses={"OK": 4, "BUDGET": 2}),
    ]  # fmt: skip
    s = summarize(header, [*RECORDS, *runs], n_boot=500)
    p = next(p for p in s.paired if p.mas == "mas:rounds" and p.value is None)
    # best SAS overall is sas:sc; shared samples 2a, 2b, 3a: rounds 1, 1, 0 against sc 1, 1, 0
    assert (p.sas, p.diff.n, p.diff.mean) == ("sas:sc", 3, 0.0)
    (r,) = s.rounds
    assert (r.system, r.n, r.rounds) == ("mas:rounds", 3, pytest.approx(8 / 3))
    assert r.tools == {"python": 5, "sc": 4, "cot": 2}
    assert r.statuses == {"OK": 10, "EXEC_ERR": 1, "BUDGET": 2}
    assert r.ended_by == {"final_answer": 1, "synthesis": 1, "budget": 1}  # no ending: the run's status
    tmp_path.joinpath("log.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in [header, *RECORDS, *runs]), encoding="utf-8"
    )
    text = write_report(tmp_path, plots=False, n_boot=500).read_text(encoding="utf-8")
    assert "| mas:rounds | sas:sc | 3 |" in text
    assert "| mas:rounds | 3 | 2.67 | python 5, sc 4, cot 2 | OK 10, BUDGET 2, EXEC_ERR 1 |" in text
    assert "| mas:rounds | mas:rounds | orchestrator o, sub-agents m |" in text


def _write_log(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [HEADER, *RECORDS]
    # a retried key: the last record wins
    lines.append(_rec("sas:cot", "2b", True, status="ok"))
    (directory / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def test_report_from_log_alone_with_plots(tmp_path: Path) -> None:
    _write_log(tmp_path)
    path = write_report(tmp_path, plots=True, n_boot=500)
    text = path.read_text(encoding="utf-8")
    assert "## masbench:t" in text and "### by depth value" in text
    # sas:cot now 2/4 after the retried record; error counted in "not ok"
    assert "| sas:cot | 4 | 50.0 [" in text and "| error 1 |" in text
    assert "Incomplete run" in text
    assert "| mas:high | sas:cot | 3 |" in text or "| mas:high | sas:sc | 3 |" in text
    assert (tmp_path / "plots" / "accuracy_vs_axis.png").stat().st_size > 1000
    assert (tmp_path / "plots" / "accuracy_vs_cost.png").stat().st_size > 1000


def test_cli_report_rebuilds_the_report(tmp_path: Path) -> None:
    _write_log(tmp_path)
    app = typer.Typer()
    eval_cli.register(app)
    result = CliRunner().invoke(app, ["eval", "report", str(tmp_path), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report.md").is_file()
    assert not (tmp_path / "plots").exists()


def test_summary_does_not_depend_on_finish_order() -> None:
    forward = summarize(HEADER, RECORDS, n_boot=300)
    backward = summarize(HEADER, list(reversed(RECORDS)), n_boot=300)
    assert forward.cells == backward.cells and forward.paired == backward.paired


def _report_of(directory: Path, header: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The report that ``masorch eval report DIR --no-plots`` writes for this log."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [header, *records]
    (directory / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert main(["eval", "report", str(directory), "--no-plots"]) == 0
    return (directory / "report.md").read_text(encoding="utf-8")


def _plain(system: str, sid: str, correct: bool, **kw: Any) -> dict[str, Any]:
    """A record of dataset ``d`` (no axis)."""
    return _rec(system, sid, correct, key=f"{system}|d|{sid}", dataset="d", axis=None, value=None) | kw


def _header(n: int, *systems: str) -> dict[str, Any]:
    entries = [s for s in HEADER["systems"] if s["name"] in systems]
    datasets = [{"name": "d", "origin": "file:d", "n": n, "scorer": "math"}]
    return HEADER | {"systems": entries, "datasets": datasets}


def test_a_paired_difference_over_no_shared_sample_is_not_a_number(tmp_path: Path) -> None:
    records = [
        _plain("sas:cot", "0", True),
        _plain("sas:cot", "1", False),
        _plain("mas:high", "2", True),
        _plain("mas:high", "3", False),
    ]
    text = _report_of(tmp_path, _header(4, "sas:cot", "mas:high"), records)
    assert "| mas:high | sas:cot | 0 | n/a |" in text
    assert "0.0 [0.0, 0.0]" not in text


def test_an_interval_of_samples_that_all_agree_is_marked_and_explained(tmp_path: Path) -> None:
    records = [_plain("sas:cot", str(i), True) for i in range(5)]
    records += [_plain("mas:high", str(i), i < 2) for i in range(5)]
    text = _report_of(tmp_path, _header(5, "sas:cot", "mas:high"), records)
    assert "| sas:cot | 5 | 100.0 [100.0, 100.0] † |" in text
    mas = next(line for line in text.splitlines() if line.startswith("| mas:high | 5 |"))
    assert "†" not in mas  # 2 of 5: the interval has a width
    note = "every bootstrap resample gives the same value and the interval has no width"
    assert text.count(note) == 1  # under the table with the mark; the paired table has none
    table_end = text.index("| mas:high | 5 |")
    assert table_end < text.index(note) < text.index("| MAS | best SAS |")


def test_a_single_sample_has_a_marked_interval(tmp_path: Path) -> None:
    text = _report_of(tmp_path, _header(1, "sas:cot"), [_plain("sas:cot", "0", True)])
    assert "| sas:cot | 1 | 100.0 [100.0, 100.0] † |" in text


def test_samples_the_scorer_could_not_decide_are_counted_wrong_and_shown(tmp_path: Path) -> None:
    timed_out = {"extracted": "3", "gold": "1", "method": "none", "error": "timed out", "undecided": True}
    records = [
        _plain("sas:cot", "0", True, details={"extracted": "1", "gold": "1", "method": "exact"}),
        _plain("sas:cot", "1", False, details=timed_out),
        _plain("sas:cot", "2", False, details=timed_out),
        _plain("sas:cot", "3", False, status="error", calls=0),
    ]
    header = _header(4, "sas:cot")
    cell = summarize(header, records, n_boot=200).cell("sas:cot", "d")
    assert cell is not None and cell.undecided == 2 and cell.accuracy.mean == 0.25
    text = _report_of(tmp_path, header, records)
    assert "| sas:cot | 4 | 25.0 [" in text and "| error 1, scorer undecided 2 |" in text


def test_a_file_with_several_axes_keeps_their_cells_apart(tmp_path: Path) -> None:
    records = [
        _rec("sas:cot", f"{v}{axis}{i}", axis == "depth", axis=axis, value=v)
        for axis in ("depth", "horizon")
        for v in (2, 4)
        for i in range(3)
    ]
    header = _header(12, "sas:cot") | {"datasets": [{"name": "masbench:t", "n": 12, "scorer": "masbench"}]}
    s = summarize(header, records, n_boot=200)
    depth, horizon = (
        s.cell("sas:cot", "masbench:t", 2, "depth"),
        s.cell("sas:cot", "masbench:t", 2, "horizon"),
    )
    assert depth is not None and (depth.n, depth.accuracy.mean) == (3, 1.0)
    assert horizon is not None and (horizon.n, horizon.accuracy.mean) == (3, 0.0)
    text = _report_of(tmp_path, header, records)
    assert "mixed" not in text
    depth_part, horizon_part = text.split("### by depth value")[1].split("### by horizon value")
    assert "| 2 · sas:cot | 3 | 100.0 [" in depth_part and "| 4 · sas:cot | 3 | 100.0 [" in depth_part
    assert "| 2 · sas:cot | 3 | 0.0 [" in horizon_part and "| 4 · sas:cot | 3 | 0.0 [" in horizon_part


def test_a_header_system_with_no_finished_sample_keeps_its_row(tmp_path: Path) -> None:
    records = [_plain("sas:cot", str(i), i > 0) for i in range(3)]
    header = _header(3, "sas:cot", "mas:high")
    cell = summarize(header, records, n_boot=200).cell("mas:high", "d")
    assert cell is not None and cell.n == 0
    text = _report_of(tmp_path, header, records)
    assert "| mas:high | 0 | n/a | - |" in text
    assert "Incomplete run: samples finished per system {'sas:cot': 3, 'mas:high': 0} of 3." in text
    assert "| mas:high | sas:cot | 0 | n/a |" in text


def test_a_log_with_no_sample_reports_every_system_at_zero(tmp_path: Path) -> None:
    text = _report_of(tmp_path, _header(3, "sas:cot", "mas:high"), [])
    assert "| sas:cot | 0 | n/a |" in text and "| mas:high | 0 | n/a |" in text
    assert "Incomplete run: samples finished per system {'sas:cot': 0, 'mas:high': 0} of 3." in text
    assert "| MAS | best SAS |" not in text  # no SAS finished a sample to compare with
