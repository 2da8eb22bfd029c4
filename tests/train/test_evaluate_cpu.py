"""The before/after evaluation through the eval harness, with a scripted orchestrator and sub-agent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from masorch.agents import default_registry, offered_registry
from masorch.backends.base import Backend, GenerateConfig, Message
from masorch.backends.scripted import ScriptedBackend
from masorch.eval.log import RunLog
from masorch.eval.report import summarize
from masorch.run.budget import Budget
from masorch.run.system import System
from masorch.train.config import SourceConfig
from masorch.train.data import build_rows
from masorch.train.evaluate import EvalSummary, evaluate_policy


def orchestrate(messages: Sequence[Message], config: GenerateConfig) -> str:
    q = messages[-1].content
    if "first" in q:
        return 'create_agent(id="a", kind="cot", task="Solve it.")'
    if "second" in q:
        return 'final_answer("5")'
    return "I cannot plan this."


def rows(budget: Budget) -> list[dict[str, object]]:
    out = []
    for i, word in enumerate(("first", "second", "third", "fourth")):
        out.append(
            {
                "prompt": [{"role": "user", "content": f"the {word} question"}],
                "question": f"the {word} question",
                "dom": "low",
                "ground_truth": "17",
                "scorer": "masbench",
                "data_source": "masbench/depth",
                "id": f"q{i}",
            }
        )
    return out


def run(
    tmp_path: Path,
    orchestrator: Backend,
    held: list[dict[str, object]],
    budget: Budget,
    examples: str | None = None,
) -> EvalSummary:
    closed: list[str] = []

    class Sub(ScriptedBackend):
        async def aclose(self) -> None:
            closed.append(self.model_id)

    summary = evaluate_policy(
        orchestrator,
        held,
        tmp_path / "eval_before",
        system=System.parse(
            "mas:low",
            model="scripted:sub",
            constrain=False,
            plan_tokens=64,
            budget=budget,
            prompt_examples=examples,
        ),
        subagent_factory=lambda model: Sub(lambda m, c: "\\boxed{17}", name=model),
        agents_factory=default_registry,
        tag="before",
    )
    assert closed == ["scripted:scripted:sub"]  # the harness closes what it built
    return summary


def test_valid_rate_accuracy_plan_size_and_an_eval_run_dir(tmp_path: Path) -> None:
    budget = Budget(max_calls=8)
    orchestrator = ScriptedBackend(orchestrate)
    summary = run(tmp_path, orchestrator, rows(budget), budget)
    assert summary.n == 4
    assert summary.valid_rate == 0.5
    assert summary.accuracy == 0.25  # only the delegated plan is right
    assert summary.agents_per_plan == 0.5  # one agent, one direct answer
    assert summary.statuses == {"ok": 2, "invalid_plan": 2}
    assert all(c.temperature == 0.0 for _, c in orchestrator.calls)  # greedy, one shot
    assert len(orchestrator.calls) == 4  # no repair round
    # An ordinary eval run directory: `masorch eval report` reads it.
    run_dir = tmp_path / "eval_before"
    assert summary.run_dir == str(run_dir)
    header, records = RunLog.read(run_dir)
    assert [s["name"] for s in header["systems"]] == ["mas:low@before"]
    assert sorted(r["status"] for r in records) == ["invalid_plan", "invalid_plan", "ok", "ok"]
    cell = summarize(header, records).cell("mas:low@before", "masbench/depth")
    assert cell is not None and cell.accuracy.mean == 0.25
    assert "mas:low@before" in (run_dir / "report.md").read_text()
    assert (run_dir / "traces.jsonl").stat().st_size > 0


@pytest.mark.parametrize("examples", [None, 'Example:\n\ncreate_agent(id="s", kind="cot", task="")'])
def test_the_orchestrator_sees_the_training_prompt_and_a_rerun_replaces_the_run(
    tmp_path: Path, examples: str | None
) -> None:
    budget = Budget(max_calls=8)
    held = build_rows(
        [SourceConfig(kind="masbench_gen", axis="depth", values="2", count=2, split="test", seed=3)],
        dom="low",
        dialect="calls",
        # What training offers without a corpus (train_agents): the evaluation offers the same.
        catalogue=offered_registry(default_registry(), retriever=False).catalogue(),
        budget=budget,
        prompt_examples=examples,
    )
    shown = ["Example, for" in r["prompt"][0]["content"] for r in held]
    assert shown == [examples is None] * 2  # the config's examples replace the default ones
    for _ in range(2):  # the second evaluation replaces the first instead of refusing the directory
        orchestrator = ScriptedBackend(lambda m, c: 'final_answer("1")')
        summary = run(tmp_path, orchestrator, held, budget, examples)
        sent = [[{"role": m.role, "content": m.content} for m in msgs] for msgs, _ in orchestrator.calls]
        assert sorted(json.dumps(s) for s in sent) == sorted(json.dumps(r["prompt"]) for r in held)
        assert summary.n == 2 and summary.valid_rate == 1.0
    _, records = RunLog.read(tmp_path / "eval_before")
    assert len(records) == 2
