"""Training rewards and eval scores agree (MASBench records, math answers): one scorer, one graded text."""

from __future__ import annotations

from typing import Any

import pytest

from masorch.agents.answer import extract_answer
from masorch.agents.base import NodeOutput
from masorch.eval.datasets import Sample
from masorch.eval.item import grade
from masorch.eval.sources import masbench_sample
from masorch.masbench.axes import generate_instance
from masorch.masbench.instance import AXES
from masorch.plan.model import AgentSpec, Plan
from masorch.run.environment import Environment, EnvSpec
from masorch.run.result import RunResult
from masorch.run.trajectory import Trajectory
from masorch.train.reward_components import answer_correctness


def _boxes(values: list[int]) -> str:
    return "Working it out step by step. " + " then ".join(f"\\boxed{{{v}}}" for v in values)


def replies(rec: dict[str, Any]) -> dict[str, str]:
    """Replies of every kind for one record: right, wrong, decoy-following, partly right, unboxed."""
    answers: list[int] = list(rec["answers"])
    wrong = [(a + 1) % 23 for a in answers]
    out = {
        "correct": _boxes(answers),
        "correct_mod_23": _boxes([a + 23 for a in answers]),
        "correct_one_box": f"\\boxed{{{', '.join(map(str, answers))}}}",
        "scratch_then_correct": "\\boxed{99} no wait. " + _boxes(answers),
        "wrong": _boxes(wrong),
        "unboxed": "Answer: " + ", ".join(map(str, answers)),
        "empty": "",
    }
    if len(answers) > 1:
        out["partly_right"] = _boxes([answers[0], *wrong[1:]])
        out["reversed"] = _boxes(answers[::-1])
        out["too_few_boxes"] = _boxes(answers[:1])
    decoys = rec.get("decoys") or []
    if any(d is not None for d in decoys):
        out["decoy_following"] = _boxes(
            [d if d is not None else a for a, d in zip(answers, decoys, strict=True)]
        )
    attacked = rec.get("attacked_answers") or []
    if any(x is not None for x in attacked):
        out["attacked_following"] = _boxes(
            [x if x is not None else a for a, x in zip(answers, attacked, strict=True)]
        )
    return out


def _result(reply: str) -> RunResult:
    # A finished one-node run whose sink replied `reply`; its answer is what the sub-agent extracts.
    plan = Plan(agents=(AgentSpec(id="solver", kind="cot", task=""),))
    node = NodeOutput(answer=extract_answer(reply), rationale=reply)
    return RunResult(status="ok", answer=node.answer, node_results={"solver": node}, plan=plan)


RECORDS = [
    generate_instance(axis, value, split="test", seed=5, index=index)
    for axis in AXES
    for value in (2, 3)
    for index in range(2)
]


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: f"{r['axis']}-{r['value']}-{r['id'][-6:]}")
async def test_masbench_reward_equals_eval_score(rec: dict[str, Any]) -> None:
    sample = masbench_sample(rec, "masbench")
    env = Environment(EnvSpec())
    kinds = replies(rec)
    seen = set()
    for kind, reply in kinds.items():
        result = _result(reply)
        verdict = await grade(result, sample, "masbench", env)  # what the eval harness records
        assert verdict is not None
        # What the training reward grades: the rollout's columns for the same run.
        reward = answer_correctness(
            ["plan"],
            status=[result.status],
            answer=[result.answer],
            reply=[result.reply],
            ground_truth=[rec["ground_truth"]],
            scorer="masbench",
            question=[rec["question"]],
        )
        assert reward == [1.0 if verdict.correct else 0.0], (kind, reply, verdict)
        seen.add((kind, verdict.correct))
    assert ("correct", True) in seen and ("wrong", False) in seen
    assert ("unboxed", False) in seen  # no box, no answer: in eval and in training alike
    if "decoy_following" in kinds:
        assert ("decoy_following", False) in seen
    if "partly_right" in kinds:
        assert ("partly_right", False) in seen


def test_the_records_cover_decoys_and_several_answers() -> None:
    assert any(any(d is not None for d in r.get("decoys") or []) for r in RECORDS)
    assert any(len(r["answers"]) > 1 for r in RECORDS)


# Bare answers as a multi-round run ends with them (a final_answer's argument): a formula is read
# whole (13/3 is not 3, whatever its last number), prose by its last number.
MATH_ANSWERS = [
    (r"\frac{13}{3}", "3", False),
    (r"5\sqrt{2}", "2", False),
    ("240 outfits", "240", True),
    (r"\frac{26}{2}", "13", True),
    (r"\boxed{7}", "7", True),
]


@pytest.mark.parametrize(("answer", "gold", "correct"), MATH_ANSWERS)
async def test_math_reward_equals_eval_score(answer: str, gold: str, correct: bool) -> None:
    result = RunResult(status="ok", answer=answer, trajectory=Trajectory("q", ()))
    env = Environment(EnvSpec())
    try:
        verdict = await grade(result, Sample("m/0", "q", gold, "math"), "math", env)
    finally:
        await env.aclose()
    assert verdict is not None and verdict.correct is correct
    reward = answer_correctness(
        ["turns"], status=["ok"], answer=[answer], ground_truth=[gold], scorer="math", question=["q"]
    )
    assert reward == [1.0 if correct else 0.0]
