"""Study 1: does an orchestrated multi-agent system beat a single agent on this machine?

Pre-registered in docs/results.md (systems, data, metric, what counts as "MAS helps"). One command
runs it and prints the report; it resumes where it stopped (the eval log) and every LLM call goes
through a record/replay cache, so the study can span several sittings and a re-run is free:

    python bench/study/sas_vs_mas.py --out runs/study1            # run (resumable) + report
    python bench/study/sas_vs_mas.py --out runs/study1 --report   # the report of what has run
    python bench/study/sas_vs_mas.py --out runs/study1 --first math500-subset  # that cell first

The records (the eval log: one JSON line per finished run, no cache, no traces) are results, kept in
git at bench/study/records/study1.jsonl: every report copies the log there, and a run on a machine
without ``--out``'s log starts from that copy, so a new machine resumes the study instead of
starting it again (``--records ''`` turns both off).

Data: the MASBench test split (seed 3) at depth, parallel and robustness values 2 and 4, 20 tasks
per cell, and the first 40 math500-subset problems; the same samples for every system (paired).

Study 1c (the multi-round mode beside ``sas:cot``, math500 only) runs through the same script:

    python bench/study/sas_vs_mas.py --out runs/study1c --config bench/study/systems_rounds.yaml \
        --no-masbench --records bench/study/records/study1c.jsonl
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
AXES = ("depth", "parallel", "robustness")


def _masorch(*args: str) -> None:
    command = [sys.executable, "-m", "masorch", *args]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def make_data(out: Path, masbench_cells: bool = True) -> list[str]:
    """The MASBench files (one per axis, unless not ``masbench_cells``) and the math500 subset, as
    --data arguments."""
    masbench = out / "masbench"
    masbench.mkdir(parents=True, exist_ok=True)
    data: list[str] = []
    for axis in AXES if masbench_cells else ():
        target = masbench / f"{axis}.jsonl"
        if not target.exists():
            _masorch("bench", "make", "-o", str(target), "--axis", axis, "--values", "2,4", "--n", "20",
                     "--split", "test", "--seed", "3", "-q")  # fmt: skip
        data += ["--data", str(target)]
    _masorch("data", "pull", "math500-subset")
    return [*data, "--data", "math500-subset"]


def seed_log(run_dir: Path, records: Path | None) -> None:
    """Start ``run_dir``'s log from the kept records when this machine has no log of its own."""
    log = run_dir / "log.jsonl"
    if records is not None and records.exists() and not log.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(records, log)
        print(f"resuming from the kept records {records}", flush=True)


def keep_log(run_dir: Path, records: Path | None) -> None:
    """Copy ``run_dir``'s log to the kept records (the file to commit at the end of a sitting)."""
    log = run_dir / "log.jsonl"
    if records is None or not log.exists():
        return
    if records.exists() and _lines(log) < _lines(records):  # never replace more runs with fewer
        print(f"not copied: {log} holds fewer lines than {records}; resume from the records", flush=True)
        return
    records.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, records)
    print(f"records kept in {records}", flush=True)


def _lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for _ in fh)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("runs/study1"))
    parser.add_argument("--report", action="store_true", help="Only print the report of what has run.")
    parser.add_argument("--concurrency", type=int, default=2, help="Samples in flight (and server slots).")
    parser.add_argument("--first", action="append", default=[],
                        help="Run this dataset's samples first (order only): math500-subset.")  # fmt: skip
    parser.add_argument("--records", default=str(HERE / "records" / "study1.jsonl"),
                        help="The log's copy kept in git ('' for none).")  # fmt: skip
    parser.add_argument("--config", type=Path, default=HERE / "systems.yaml",
                        help="The systems file (study 1c: systems_rounds.yaml).")  # fmt: skip
    parser.add_argument("--no-masbench", action="store_true",
                        help="Only the math500 cell (study 1c).")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run_dir = args.out / "eval"
    records = Path(args.records) if args.records else None
    seed_log(run_dir, records)
    if not args.report:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout
        with (args.out / "commits.txt").open("a") as sink:  # the code each sitting ran
            sink.write(commit.strip() + "\n")
        command = ["eval", "run", "--config", str(args.config), *make_data(args.out, not args.no_masbench)]
        command += ["--limit", "40", "--out", str(run_dir), "--concurrency", str(args.concurrency)]
        command += ["--slots", str(args.concurrency), "--cache", str(args.out / "cache.sqlite")]
        command += ["--max-tokens", "768"]
        for name in args.first:
            command += ["--first", name]
        if (run_dir / "log.jsonl").exists():
            command.append("--resume")
        try:
            _masorch(*command)
        finally:  # a failed or interrupted sitting keeps what it ran
            keep_log(run_dir, records)
    else:
        keep_log(run_dir, records)
    _masorch("eval", "report", str(run_dir))


if __name__ == "__main__":
    main()
