"""How often do the embedded models write a valid plan, and what do the runs score next to one CoT call?

For each orchestrator model (qwen2.5-coder-1.5b, qwen2.5-coder-0.5b; the same model runs the
sub-agents) one `masorch eval run` over the same 80 questions: 40 held-out MASBench tasks (test split,
the five axes at values 2 and 3, 4 each) and the first 40 math500-subset questions, with the systems

    sas:cot                         one plain chain-of-thought call (the baseline)
    mas:low  / mas:low-free         DoM LOW, grammar-constrained / free decoding
    mas:high / mas:high-free        DoM HIGH, grammar-constrained / free decoding

all greedy, calls dialect, one shot (no repair). The table gives, per model and system: valid-plan
rate (runs not ended `invalid_plan`), accuracy, mean wall time per question, and the diagnostic codes
of the invalid plans (from the traces). Runs resume (`--resume`) and every call goes through a
record/replay cache, so an interrupted study continues where it stopped and a re-run is free.

    python bench/plan_validity.py --out runs/plan_validity               # run (resumable) + table
    python bench/plan_validity.py --out runs/plan_validity --report      # table only
    python bench/plan_validity.py --out runs/plan_validity --models qwen2.5-coder-1.5b --limit 10
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
AXES = ("depth", "horizon", "breadth", "parallel", "robustness")
SYSTEMS = ("sas:cot", "mas:low", "mas:low-free", "mas:high", "mas:high-free")


def _masorch(*args: str) -> None:
    command = [sys.executable, "-m", "masorch", *args]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def make_data(out: Path) -> list[str]:
    """The MASBench test tasks (one file per axis) and the math500 subset; returns --data arguments."""
    masbench = out / "masbench"
    masbench.mkdir(parents=True, exist_ok=True)
    for axis in AXES:
        target = masbench / f"{axis}.jsonl"
        if not target.exists():
            _masorch("bench", "make", "-o", str(target), "--axis", axis, "--values", "2,3", "--n", "4",
                     "--split", "test", "--seed", "7", "-q")  # fmt: skip
    _masorch("data", "pull", "math500-subset")
    return [str(masbench), "math500-subset"]


def systems_file(out: Path, model: str, plan_tokens: int) -> Path:
    """The YAML systems file of one model."""
    spec = {
        "defaults": {"model": f"local:{model}", "budget": {"calls": 24}},
        "systems": [
            "sas:cot",
            {"system": "mas:low", "plan_tokens": plan_tokens},
            {"system": "mas:low", "name": "mas:low-free", "constrain": False, "plan_tokens": plan_tokens},
            {"system": "mas:high", "plan_tokens": plan_tokens},
            {"system": "mas:high", "name": "mas:high-free", "constrain": False, "plan_tokens": plan_tokens},
        ],
    }
    path = out / f"systems-{model}.yaml"
    path.write_text(json.dumps(spec, indent=2))  # JSON is YAML
    return path


def run(out: Path, model: str, data: list[str], args: argparse.Namespace) -> None:
    """One eval run of the five systems with ``model`` (resumed if its directory exists)."""
    run_dir = out / model
    command = ["eval", "run", "--config", str(systems_file(out, model, args.plan_tokens))]
    for item in data:
        command += ["--data", item]
    command += ["--limit", str(args.limit), "--out", str(run_dir), "--concurrency", str(args.concurrency)]
    command += ["--cache", str(out / "cache.sqlite"), "--max-tokens", str(args.max_tokens)]
    if (run_dir / "log.jsonl").exists():
        command.append("--resume")
    _masorch(*command)


def _records(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "log.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("key")]


def _rejections(run_dir: Path) -> dict[str, list[str]]:
    """trace id -> the error codes of its last rejected plan."""
    codes: dict[str, list[str]] = {}
    traces = run_dir / "traces.jsonl"
    if not traces.exists():
        return codes
    for line in traces.read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "plan_rejected":
            errors = [d["code"] for d in event.get("diagnostics", []) if d.get("severity") == "error"]
            codes[event.get("run_id", "")] = errors
    return codes


def report(out: Path, models: tuple[str, ...]) -> None:
    """Print the table: valid-plan rate, accuracy, mean wall time and invalid-plan codes."""
    head = f"{'model':<20} {'system':<14} {'n':>4} {'valid':>7} {'acc':>7} {'wall s':>7}  invalid-plan codes"
    print(head)
    print("-" * len(head))
    for model in models:
        run_dir = out / model
        if not (run_dir / "log.jsonl").exists():
            continue
        records, rejected = _records(run_dir), _rejections(run_dir)
        for system in SYSTEMS:
            rows = [r for r in records if r["system"] == system]
            if not rows:
                continue
            n = len(rows)
            invalid = [r for r in rows if r["status"] == "invalid_plan"]
            codes = collections.Counter(c for r in invalid for c in set(rejected.get(r["trace_id"], [])))
            valid = "-" if system.startswith("sas") else f"{1 - len(invalid) / n:.0%}"
            accuracy = sum(r["correct"] for r in rows) / n
            wall = sum(r["wall_s"] for r in rows) / n
            shown = ", ".join(f"{c} {k}" for c, k in codes.most_common()) or "-"
            print(f"{model:<20} {system:<14} {n:>4} {valid:>7} {accuracy:>7.0%} {wall:>7.1f}  {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("runs/plan_validity"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--limit", type=int, default=40, help="Questions per dataset.")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--plan-tokens", type=int, default=768)
    parser.add_argument("--max-tokens", type=int, default=768, help="Completion cap of each sub-agent call.")
    parser.add_argument("--report", action="store_true", help="Only print the table of what has run.")
    args = parser.parse_args()
    models = tuple(m for m in args.models.split(",") if m)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        data = make_data(args.out)
        for model in models:
            run(args.out, model, data, args)
    report(args.out, models)


if __name__ == "__main__":
    main()
