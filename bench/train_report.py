"""Summarise a GRPO run directory: per-step rewards and plan figures, a reward-curve PNG, before/after.

    /work/main/.venv/bin/python bench/train_report.py RUN_DIR [--png docs/train/reward_curve.png]

Reads ``RUN_DIR/log.jsonl`` and ``RUN_DIR/report.json`` written by ``masorch train grpo``, or by
``masorch train rounds`` (its reward components and trajectory figures per step, and the tools
its trajectories called per step, from ``RUN_DIR/trajectories.jsonl``). With ``--config`` (the
run's ``train grpo`` config) it also reads the executed training plans, ``RUN_DIR/samples.jsonl``:
the kinds they chose and how many of each were right (each answer graded again by its row's
scorer against the row's answer), per block of steps, and the groups whose plans were not all
graded alike (the only groups GRPO learns from) with the kinds right and wrong in each. With
``--baseline DIR`` (an ``eval run`` directory over the same held-out questions, e.g. one fixed
sub-agent with no orchestrator) it also prints that run's accuracy and the paired differences
trained-minus-baseline and baseline-minus-untrained over the greedy evaluations.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter
from pathlib import Path

PLAN_COLUMNS = (
    ("reward", "reward"),
    ("rewards/correctness/mean", "correct"),
    ("rewards/validity/mean", "valid"),
    ("plan/valid_rate", "vrate"),
    ("plan/agents_per_plan", "agents"),
    ("plan/calls_per_plan", "calls"),
    ("completions/mean_length", "len"),
    ("step_time", "s/step"),
)
ROUNDS_COLUMNS = (
    ("reward", "reward"),
    ("rewards/success/mean", "success"),
    ("rewards/protocol/mean", "protocol"),
    ("rewards/diversity/mean", "divers"),
    ("rewards/efficiency/mean", "effic"),
    ("rounds/rounds", "rounds"),
    ("rounds/calls", "calls"),
    ("rounds/bad_call_rate", "bad"),
    ("frac_reward_zero_std", "flat"),  # share of groups whose rewards are all equal: no signal
    ("step_time", "s/step"),
)
#: What the halves compare and the plot draws: (log key, label), per kind of run.
PLAN_CURVES = (
    ("reward", "reward"),
    ("plan/valid_rate", "valid-plan rate"),
    ("rewards/correctness/mean", "correctness"),
)
ROUNDS_CURVES = (
    ("reward", "reward"),
    ("rewards/success/mean", "success"),
    ("rewards/protocol/mean", "protocol"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--png", type=Path, default=None, help="write the reward curve here")
    parser.add_argument("--window", type=int, default=5, help="steps in the moving mean of the plot")
    parser.add_argument(
        "--config", type=Path, default=None, help="the run's train grpo config: training plans"
    )
    parser.add_argument("--block", type=int, default=10, help="steps per block of the training-plan kinds")
    parser.add_argument(
        "--baseline", type=Path, default=None, help="an eval run over the same held-out questions"
    )
    args = parser.parse_args()
    log = args.run_dir / "log.jsonl"  # absent until the first step: the report then has no steps
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()] if log.is_file() else []
    steps = [x for x in lines if "loss" in x]
    rounds = (args.run_dir / "trajectories.jsonl").is_file() or any(
        "rewards/success/mean" in s for s in steps
    )
    columns, curves = (ROUNDS_COLUMNS, ROUNDS_CURVES) if rounds else (PLAN_COLUMNS, PLAN_CURVES)
    print("step " + " ".join(f"{short:>8}" for _, short in columns))
    for s in steps:
        cells = [f"{s[k]:8.3f}" if isinstance(s.get(k), (int, float)) else f"{'-':>8}" for k, _ in columns]
        print(f"{s['step']:4d} " + " ".join(cells))
    if rounds:
        tools_per_step(args.run_dir / "trajectories.jsonl")
    elif args.config is not None:
        training_plans(args.run_dir / "samples.jsonl", args.config, args.block)
    if len(steps) >= 4:
        half = len(steps) // 2
        for key, label in curves:
            first = mean([s.get(key) or 0.0 for s in steps[:half]])
            last = mean([s.get(key) or 0.0 for s in steps[-half:]])
            print(f"{label}: first {half} steps {first:.3f}, last {half} steps {last:.3f}")
    report_file = args.run_dir / "report.json"
    if report_file.is_file():
        report = json.loads(report_file.read_text())
        print(
            f"steps {report['steps']}, {report['seconds_per_step']:.1f} s/step, wall {report['wall_s']:.0f} s"
        )
        for tag in ("eval_before", "eval_after", "eval_before_sampled", "eval_after_sampled"):
            if report.get(tag):
                print(tag, json.dumps(report[tag]))
    greedy = before_after(args.run_dir, "")
    before_after(args.run_dir, "_sampled")
    if args.baseline is not None:
        against_baseline(greedy, args.baseline)
    if args.png and steps:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.2), dpi=80)
        x = [s["step"] for s in steps]
        for (key, label), colour in zip(curves, ("C0", "C1", "C2"), strict=True):
            y = [s.get(key) or 0.0 for s in steps]
            ax.plot(x, y, "o", ms=3, alpha=0.35, color=colour)
            ax.plot(
                x, moving_mean(y, args.window), "-", color=colour, label=f"{label} ({args.window}-step mean)"
            )
        ax.set_xlabel("GRPO step")
        ax.set_ylabel("mean over the step's " + ("trajectories" if rounds else "plans"))
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.png)
        print(f"wrote {args.png} ({args.png.stat().st_size} bytes)")


def tools_per_step(path: Path) -> None:
    """Per step of a ``train rounds`` run (numbered as in the table: a record's ``step`` is the
    number of steps finished when it was sampled): its trajectories' calls that ran, per tool, and
    the mean number of distinct tools a trajectory ran."""
    if not path.is_file():
        return
    by_step: dict[int, list[dict]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            by_step.setdefault(int(record.get("step", 0)), []).append(record)
    for step, records in sorted(by_step.items()):
        tools = Counter(t for r in records for t in r.get("tools") or [])
        distinct = mean([float(len(set(r.get("tools") or []))) for r in records])
        right = sum(1 for r in records if (r.get("components") or {}).get("success", 0.0) >= 1.0)
        ran = dict(tools.most_common())
        print(
            f"step {step + 1}: {len(records)} trajectories, {right} with full score; calls that ran {ran}; "
            f"{distinct:.2f} distinct tools a trajectory ran"
        )


def training_plans(path: Path, config: Path, block: int) -> None:
    """The executed training plans of a ``train grpo`` run, numbered as in the table: their kinds
    and how many of each kind were right, per ``block`` steps, and the groups (a step's plans for
    one question) whose plans were not all graded alike, with the kinds right and wrong in each. A
    plan's kind is its agents' kinds joined by ``+`` (``direct`` for a final answer alone,
    ``invalid`` for a plan that failed its check). Answers are graded by their row's scorer; a
    ``masbench`` row is graded on the logged answer (the trainer grades the sink's whole reply,
    which ``samples.jsonl`` does not keep), so its figures can differ from the reward."""
    from masorch.files import iter_jsonl
    from masorch.plan.model import kinds_label
    from masorch.plan.parse import parse
    from masorch.train.config import load_config
    from masorch.train.grpo import prompt_rows, train_agents
    from masorch.train.reward_components import answer_correctness

    if not path.is_file():
        return
    # math-verify warns once that its own timeout is off: the scorer bounds its time itself.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    cfg = load_config(config)
    train, held = prompt_rows(cfg, train_agents(cfg))
    gold = {(row["question"], row["dom"]): row for row in [*held, *train]}
    hint = "a samples.jsonl written by masorch train grpo"
    samples = [record for _, record in iter_jsonl(path, hint=hint, complete_only=True)]
    groups: dict[tuple[int, str, str], list[tuple[str, bool]]] = {}
    for sample in samples:
        row = gold.get((sample["question"], sample["dom"]))
        if row is None:
            raise SystemExit(f"{path}: a question the config's rows do not hold: {sample['question']!r}")
        plan = parse(sample["plan"], cfg.dialect).plan if sample["valid"] else None
        kind = "invalid" if plan is None else kinds_label(a.kind for a in plan.agents)
        graded = answer_correctness(
            [sample["plan"]],
            status=[sample["status"]],
            answer=[sample["answer"]],
            ground_truth=[row["ground_truth"]],
            scorer=row["scorer"],
            question=[row["question"]],
        )[0]
        key = (int(sample["step"]) + 1, sample["question"], sample["dom"])
        groups.setdefault(key, []).append((kind, bool(graded)))
    print(f"training plans (executed; identical plans of a group run once): {len(samples)}")
    last = max((step for step, _, _ in groups), default=0)
    for start in range(1, last + 1, block):
        plans = [p for (step, _, _), ps in groups.items() if start <= step < start + block for p in ps]
        kinds = Counter(kind for kind, _ in plans)
        right = Counter(kind for kind, ok in plans if ok)
        cells = ", ".join(f"{kind} {right[kind]}/{n}" for kind, n in kinds.most_common())
        print(
            f"  steps {start}-{min(start + block - 1, last)}: {len(plans)} plans; kind right/plans: {cells}"
        )
    spread = {key: plans for key, plans in groups.items() if len({ok for _, ok in plans}) > 1}
    print(f"groups with a reward spread: {len(spread)} of {len(groups)}")
    for (step, _, _), plans in sorted(spread.items()):
        right_kinds = dict(Counter(kind for kind, ok in plans if ok))
        wrong_kinds = dict(Counter(kind for kind, ok in plans if not ok))
        print(f"  step {step}: right {right_kinds}, wrong {wrong_kinds}")


def before_after(run_dir: Path, suffix: str) -> dict[str, dict[str, float]]:
    """Held-out accuracy before and after training with 95% bootstrap intervals, and the paired
    difference over the prompts both evaluations answered (``suffix``: greedy "" or "_sampled").
    Returns each evaluation's 0/1 per sample id, by tag ("before", "after"; those logged)."""

    runs = {tag: run_dir / f"eval_{tag}{suffix}" for tag in ("before", "after")}
    runs = {
        tag: d for tag, d in runs.items() if (d / "log.jsonl").is_file()
    }  # a run in progress: before only
    mode = "sampled" if suffix else "greedy"
    correct = {tag: held_out(d, f"{mode} {tag}") for tag, d in runs.items()}
    if len(runs) == 2:
        paired(correct["after"], correct["before"], f"{mode} after - before")
    return correct


def held_out(run: Path, label: str) -> dict[str, float]:
    """Print an eval run's accuracy (95% bootstrap interval), plans and statuses; its 0/1 per sample id."""
    from masorch.eval.log import RunLog
    from masorch.eval.metrics import bootstrap_mean
    from masorch.plan.model import kinds_label

    records = RunLog.read(run)[1]
    by_id = {r["sample_id"]: float(bool(r.get("correct"))) for r in records}
    # in id order: the log's order is the order runs finished, which varies with concurrency
    accuracy = bootstrap_mean([by_id[k] for k in sorted(by_id)]).format()
    print(f"held-out accuracy {label}: {accuracy} (n={len(by_id)})")
    valid = [r for r in records if r.get("status") != "invalid_plan"]
    right = sum(bool(r.get("correct")) for r in valid)
    plans = Counter(kinds_label(r.get("plan_kinds") or []) for r in valid)
    print(f"  valid plans {len(valid)}/{len(records)}, right among them {right}; kinds: {dict(plans)}")
    calls = mean([float(r.get("calls") or 0) for r in records])
    tokens = mean([float((r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)) for r in records])
    statuses = dict(Counter(str(r.get("status")) for r in records))
    print(f"  calls {calls:.2f} and tokens {tokens:.0f} a question; statuses {statuses}")
    return by_id


def paired(a: dict[str, float], b: dict[str, float], label: str) -> None:
    """Print the paired difference ``a - b`` (95% bootstrap, id order) over the ids both answered."""
    from masorch.eval.metrics import paired_difference

    both = sorted(set(a) & set(b))
    diff = paired_difference([a[k] for k in both], [b[k] for k in both])
    gained = sum(a[k] > b[k] for k in both)
    lost = sum(a[k] < b[k] for k in both)
    print(f"held-out accuracy {label} (paired, n={len(both)}): {diff.format()}; +{gained} -{lost}")


def against_baseline(greedy: dict[str, dict[str, float]], baseline: Path) -> None:
    """The baseline run's accuracy and its paired differences against the greedy evaluations
    (``greedy``: :func:`before_after`'s)."""
    base = held_out(baseline, f"baseline {baseline.name}")
    if "after" in greedy:
        paired(greedy["after"], base, f"greedy after - {baseline.name}")
    if "before" in greedy:
        paired(base, greedy["before"], f"{baseline.name} - greedy before")


def mean(values: list[float]) -> float:
    """The arithmetic mean (0 for no values)."""
    return sum(values) / len(values) if values else 0.0


def moving_mean(values: list[float], window: int) -> list[float]:
    """The trailing mean over up to ``window`` values at each position."""
    return [mean(values[max(0, i + 1 - window) : i + 1]) for i in range(len(values))]


if __name__ == "__main__":
    main()
