"""Study 1: does an orchestrated multi-agent system beat a single agent on this machine?

Pre-registered in docs/results.md (systems, data, metric, what counts as "MAS helps"). One command
runs it and prints the report; it resumes where it stopped (the eval log) and every LLM call goes
through a record/replay cache, so the study can span several sittings and a re-run is free:

    python bench/study/sas_vs_mas.py --out runs/study1            # run (resumable) + report
    python bench/study/sas_vs_mas.py --out runs/study1 --report   # the report of what has run
    python bench/study/sas_vs_mas.py --out runs/study1 --first math500-subset  # that cell first

Data: the MASBench test split (seed 3) at depth, parallel and robustness values 2 and 4, 20 tasks
per cell, and the first 40 math500-subset problems; the same samples for every system (paired).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
AXES = ("depth", "parallel", "robustness")


def _masorch(*args: str) -> None:
    command = [sys.executable, "-m", "masorch", *args]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def make_data(out: Path) -> list[str]:
    """The MASBench files (one per axis) and the math500 subset, as --data arguments."""
    masbench = out / "masbench"
    masbench.mkdir(parents=True, exist_ok=True)
    data = []
    for axis in AXES:
        target = masbench / f"{axis}.jsonl"
        if not target.exists():
            _masorch("bench", "make", "-o", str(target), "--axis", axis, "--values", "2,4", "--n", "20",
                     "--split", "test", "--seed", "3", "-q")  # fmt: skip
        data += ["--data", str(target)]
    _masorch("data", "pull", "math500-subset")
    return [*data, "--data", "math500-subset"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("runs/study1"))
    parser.add_argument("--report", action="store_true", help="Only print the report of what has run.")
    parser.add_argument("--concurrency", type=int, default=2, help="Samples in flight (and server slots).")
    parser.add_argument("--first", action="append", default=[],
                        help="Run this dataset's samples first (order only): math500-subset.")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run_dir = args.out / "eval"
    if not args.report:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout
        with (args.out / "commits.txt").open("a") as sink:  # the code each sitting ran
            sink.write(commit.strip() + "\n")
        command = ["eval", "run", "--config", str(HERE / "systems.yaml"), *make_data(args.out)]
        command += ["--limit", "40", "--out", str(run_dir), "--concurrency", str(args.concurrency)]
        command += ["--slots", str(args.concurrency), "--cache", str(args.out / "cache.sqlite")]
        command += ["--max-tokens", "768"]
        for name in args.first:
            command += ["--first", name]
        if (run_dir / "log.jsonl").exists():
            command.append("--resume")
        _masorch(*command)
    _masorch("eval", "report", str(run_dir))


if __name__ == "__main__":
    main()
