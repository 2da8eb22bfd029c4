"""The held-out figures of multi-round orchestrator policies, side by side (docs/train.md, "Multi-round
training on this machine"): accuracy, valid-call rate, tools chosen, collapse, paired differences.

    /work/main/.venv/bin/python bench/rounds_heldout.py untrained=runs/heldout_untrained \\
        sft=runs/heldout_sft [rl=runs/heldout_rl rl_nodiv=runs/heldout_rl_nodiv] [--pairs sft-untrained,...]

Each NAME=DIR is a `masorch eval run` directory of one policy on the same questions. Differences are
paired over the questions every named run answered; a run still in progress counts what it logged.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from masorch.errors import UsageError
from masorch.eval.log import RunLog
from masorch.eval.metrics import bootstrap_mean, bootstrap_ratio, paired_difference, paired_ratio_difference
from masorch.eval.record import EvalRecord

#: The registered comparisons (a - b), where both runs are given.
PAIRS = ("sft-untrained", "rl-sft", "rl_nodiv-sft", "rl-rl_nodiv")
#: Collapse, as registered: one tool over this share of the calls that ran ...
COLLAPSE_SHARE = 0.8
#: ... or fewer distinct tools per run than this, on average.
COLLAPSE_DISTINCT = 1.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="NAME=DIR, one per policy")
    parser.add_argument("--pairs", default=",".join(PAIRS), help="comparisons a-b, comma-separated")
    args = parser.parse_args()
    runs: dict[str, dict[str, EvalRecord]] = {}
    for item in args.runs:
        name, _, path = item.partition("=")
        if not path:
            parser.error(f"{item!r}: give NAME=DIR")
        try:
            records = RunLog.read(Path(path))[1]
        except UsageError as exc:
            parser.error(f"{name}: {exc}")
        # in id order: the log's order is the order runs finished, which varies with concurrency
        records = sorted(records, key=lambda r: str(r["sample_id"]))
        runs[name] = {r["sample_id"]: EvalRecord.from_json(r) for r in records}
    print(
        "| policy | n | accuracy % [95%] | valid-call rate % [95%] | own final_answer accepted "
        "| calls that ran, per tool | distinct tools a run | calls a round | collapsed | calls per status |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, recs in runs.items():
        print(row(name, list(recs.values())))
    shared = sorted(set.intersection(*(set(r) for r in runs.values())))
    print(f"\npaired over the {len(shared)} questions every run answered:")
    for pair in args.pairs.split(","):
        a, _, b = pair.partition("-")
        if a in runs and b in runs:
            print(f"- {a} - {b}: {differences([runs[a][k] for k in shared], [runs[b][k] for k in shared])}")


def row(name: str, recs: list[EvalRecord]) -> str:
    """One policy's table row."""
    accuracy = bootstrap_mean([float(r.correct) for r in recs]).format()
    good, total = zip(*(r.valid_calls() for r in recs), strict=True) if recs else ((), ())
    valid = bootstrap_ratio(good, total).format()
    own = sum(r.own_final_answer for r in recs)
    # Every status, BUDGET included: the SFT set was collected without a budget line (docs/train.md).
    tools: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    for r in recs:
        tools.update(r.tools_ran)
        statuses.update(r.tool_statuses)
    ran = sum(tools.values())
    distinct = sum(len(r.tools_ran) for r in recs) / max(1, len(recs))
    rounds = sum(r.rounds or 0 for r in recs)
    per_round = ran / rounds if rounds else 0.0
    top = max(tools.values(), default=0) / ran if ran else 0.0
    collapsed = "yes" if recs and (top > COLLAPSE_SHARE or distinct < COLLAPSE_DISTINCT) else "no"
    kinds = ", ".join(f"{k} {n}" for k, n in tools.most_common()) or "-"
    by_status = ", ".join(f"{k} {n}" for k, n in statuses.most_common()) or "-"
    return (
        f"| {name} | {len(recs)} | {accuracy} | {valid} | {own}/{len(recs)} | {kinds} | {distinct:.2f} "
        f"| {per_round:.2f} | {collapsed} | {by_status} |"
    )


def differences(a: list[EvalRecord], b: list[EvalRecord]) -> str:
    """Accuracy and valid-call rate of ``a`` minus ``b`` (aligned), in points with 95% intervals."""
    accuracy = paired_difference([float(r.correct) for r in a], [float(r.correct) for r in b]).format()
    calls_a = [r.valid_calls() for r in a]
    calls_b = [r.valid_calls() for r in b]
    valid = paired_ratio_difference(
        [g for g, _ in calls_a], [t for _, t in calls_a], [g for g, _ in calls_b], [t for _, t in calls_b]
    ).format()
    return f"accuracy {accuracy} points, valid-call rate {valid} points"


if __name__ == "__main__":
    main()
