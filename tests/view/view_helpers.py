"""Small recorded runs for the viewer tests, made by the real harness on scripted models (no network)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from eval_helpers import scorer_factory, write_sums

from masorch.backends.base import Backend, GenerateConfig, Message
from masorch.backends.scripted import ScriptedBackend
from masorch.eval.harness import EnvSpec, evaluate
from masorch.eval.sources import resolve
from masorch.eval.systems import parse_systems
from masorch.plan import DoM
from masorch.train.rollout import PlanOutcome, RolloutItem
from masorch.train.samples import SAMPLES_FILE, SampleLog

#: The plan every MAS system writes: two parallel nodes and a join (one flow declared, one implied).
PLAN = "\n".join(
    [
        'create_agent(id="first", kind="cot", task="Read the first number of the question.")',
        'create_agent(id="second", kind="cot", task="Read the second number of the question.")',
        'create_agent(id="total", kind="cot", task="Add ${first} and ${second}.")',
        'create_flow("first", "total")',
    ]
)
PLAN_NODES = ("first", "second", "total")
_SUM = re.compile(r"What is (\d+) plus (\d+)\?")


class PlanModel:
    """Writes :data:`PLAN` when asked to orchestrate, else answers the sum (wrong on item 0)."""

    def __call__(self, messages: Sequence[Message], config: GenerateConfig) -> str:
        text = "\n".join(m.content for m in messages)
        if "Write the plan now." in text:
            return PLAN
        match = _SUM.search(text)
        if match is None:
            return "\\boxed{0}"
        value = (int(match.group(1)) + int(match.group(2))) % 23
        if "Item 0." in text:
            value += 1
        return f"Adding.\n\\boxed{{{value}}}"


class PlanBackendFactory:
    """One scripted backend per model string, with a small delay so the timeline has widths."""

    def __init__(self, delay_s: float = 0.02) -> None:
        self.delay_s = delay_s

    def __call__(self, spec: str) -> Backend:
        return ScriptedBackend(PlanModel(), name=spec, delay_s=self.delay_s)


def make_eval_run(directory: Path, *, n: int = 3, systems: str = "sas:cot,mas:high") -> Path:
    """An eval run directory of ``n`` sums under ``systems``, with its log and traces."""
    data = resolve(str(write_sums(directory.parent / f"{directory.name}-sums.jsonl", n)))
    env = EnvSpec(backend_factory=PlanBackendFactory(), scorer_factory=scorer_factory)
    evaluate(parse_systems(systems, model="scripted:m"), [data], directory, env_spec=env)
    return directory


def make_training_run(directory: Path, steps: int = 4) -> Path:
    """A training output_dir as ``masorch train grpo`` writes it: log lines and a report."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "step": s,
            "wall_s": 1.5 * s,
            "loss": 0.1 / s,
            "reward": 0.2 * s,
            "rewards/correctness/mean": 0.1 * s,
            "rewards/validity/mean": 0.5 + 0.1 * s,
            "plan/valid_rate": 0.5 + 0.1 * s,
        }
        for s in range(1, steps + 1)
    ]
    lines.append({"step": steps, "wall_s": 7.0, "train_runtime": 7.0, "train_loss": 0.05})
    (directory / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = {"steps": steps, "seconds_per_step": 1.5, "wall_s": 9.0, "final_model": "final", "logs": lines}
    (directory / "report.json").write_text(json.dumps(report))
    log = SampleLog(directory / SAMPLES_FILE)  # what PlanRewards writes through its on_batch hook
    for s in range(1, steps + 1):
        items = [RolloutItem("What is 2 plus 3?", text, DoM.LOW) for text in (PLAN_LOW, "no plan")]
        log(
            s,
            items,
            [PlanOutcome("ok", answer="5", valid=True, n_agents=1, calls=1), PlanOutcome("invalid_plan")],
        )
    return directory


#: The plan a DoM-low policy samples in :func:`make_training_run`.
PLAN_LOW = 'create_agent(id="solve", kind="cot", task="")'
