"""Did a multi-agent run's agents find the answer its final agent gave up? Read from a run's log and traces.

For each MAS run of an eval directory (``log.jsonl`` and ``traces.jsonl``), every agent's answer is
graded with the math scorer against the sample's gold answer, and the table gives per system and
dataset: runs, final answers right, runs where some agent was right, and runs where a plain vote over
the agents' answers (ties to the first seen) would have been right. Nothing is run again; it reads what
the runs wrote.

    python bench/study/agent_answers.py runs/study1/eval --dataset math500-subset
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path
from typing import Any

from masorch.agents.answer import majority_vote, normalize_answer
from masorch.eval.log import RunLog
from masorch.score.registry import get_scorer
from masorch.score.scorer import Scorer


class _Gold:
    """The gold answer as the scorer reads a sample."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.question = ""
        self.meta: dict[str, Any] = {}


def agent_answers(run_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """run id -> (node id, answer) of every agent that finished, in the order they finished; every
    run with a trace has a key (an empty list when no agent finished)."""
    out: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    with (run_dir / "traces.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            event = json.loads(line)
            if event.get("run_id"):
                out.setdefault(event["run_id"], [])  # the run is traced, whatever its agents did
            if event.get("type") == "node_finished" and event.get("answer"):
                out[event["run_id"]].append((str(event.get("node")), str(event["answer"])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", type=Path, help="An eval --out directory.")
    parser.add_argument("--dataset", default="math500-subset", help="Which dataset's runs (math scorer).")
    args = parser.parse_args()
    scorer = get_scorer("math")
    assert isinstance(scorer, Scorer)
    answers = agent_answers(args.run_dir)
    _, records = RunLog.read(args.run_dir)  # the last record per sample: a retried run counts once
    rows: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    untraced = 0
    for r in records:
        if not r.get("key") or r["dataset"] != args.dataset or r["system"].startswith("sas:"):
            continue
        if r.get("trace_id") not in answers:  # e.g. runs resumed from kept records: no trace here
            untraced += 1
            continue
        gold = _Gold(str(r["gold"]))
        agents = [a for _, a in answers.get(r["trace_id"], [])]
        right = [scorer.score(a, gold).correct for a in agents]
        vote = majority_vote(agents)
        voted = next((a for a in agents if vote and normalize_answer(a) == vote.key), None)
        counts = rows[r["system"]]
        counts["runs"] += 1
        counts["final right"] += bool(r["correct"])
        counts["some agent right"] += any(right)
        counts["vote right"] += voted is not None and scorer.score(voted, gold).correct
        counts["final wrong, some agent right"] += any(right) and not r["correct"]
    columns = ("runs", "final right", "some agent right", "vote right", "final wrong, some agent right")
    print(f"{'system':<12}" + "".join(f"  {c}" for c in columns))
    for system, counts in sorted(rows.items()):
        print(f"{system:<12}" + "".join(f"  {counts[c]:>{len(c)}}" for c in columns))
    if untraced:
        traces = args.run_dir / "traces.jsonl"
        print(f"({untraced} runs of the log have no trace in {traces} and are left out)")


if __name__ == "__main__":
    main()
