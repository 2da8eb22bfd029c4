"""bench/rounds_heldout.py, the registered held-out table of multi-round policies, on two small logs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from masorch.eval.log import RunLog
from masorch.eval.record import EvalRecord

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "rounds_heldout.py"


def write_run(directory: Path, records: list[EvalRecord]) -> None:
    header = {"systems": [{"name": "mas:rounds"}], "datasets": [{"name": "d"}]}
    with RunLog.create(directory, header, resume=False) as log:
        for r in records:
            log.append(r.to_json())


def record(i: int, *, correct: bool, statuses: dict[str, int], tools: dict[str, int]) -> EvalRecord:
    return EvalRecord(
        key=f"mas:rounds|d|{i}",
        system="mas:rounds",
        dataset="d",
        sample_id=str(i),
        status="ok",
        correct=correct,
        rounds=2,
        tool_statuses=statuses,
        tools_ran=tools,
        ended_by="final_answer",
        final_call=True,
    )


def test_the_table_shows_accuracy_tools_statuses_and_paired_differences(tmp_path: Path) -> None:
    write_run(
        tmp_path / "a",
        [
            record(1, correct=True, statuses={"OK": 3, "BUDGET": 1}, tools={"python": 2, "cot": 1}),
            record(2, correct=True, statuses={"OK": 2}, tools={"sc": 2}),
        ],
    )
    write_run(
        tmp_path / "b",
        [
            record(1, correct=False, statuses={"OK": 2, "FORMAT_ERR": 2}, tools={"python": 2}),
            record(2, correct=True, statuses={"OK": 1}, tools={"python": 1}),
        ],
    )
    out = subprocess.run(
        [sys.executable, str(SCRIPT), f"sft={tmp_path / 'a'}", f"untrained={tmp_path / 'b'}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert "| 2 | 100.0" in rows["sft"] and "python 2, sc 2, cot 1" in rows["sft"]
    assert rows["sft"].rstrip().endswith("| OK 5, BUDGET 1 |")
    assert "| 2 | 50.0" in rows["untrained"]
    assert rows["untrained"].rstrip().endswith("| yes | OK 3, FORMAT_ERR 2 |")  # python only: collapsed
    assert "paired over the 2 questions" in out and "- sft - untrained:" in out


def test_a_directory_without_a_run_is_a_clear_error(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), f"sft={tmp_path}"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2 and "no run log at" in out.stderr and "Traceback" not in out.stderr
