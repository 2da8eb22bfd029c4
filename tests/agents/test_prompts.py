"""Snapshot tests of every rendered agent prompt (golden files under ``snapshots/``).

Regenerate after an intended prompt change with ``MASORCH_UPDATE_SNAPSHOTS=1 pytest tests/agents``
and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from masorch.agents.base import UpstreamResult
from masorch.agents.debate import Argument
from masorch.prompts import render

SNAPSHOTS = Path(__file__).parent / "snapshots"

QUESTION = "A farmer has 17 sheep and buys 25 more. How many sheep does he have?"
CONTEXT = (UpstreamResult("count", "He buys 25 sheep."),)
EVIDENCE = [
    {"id": "d1", "title": "Sheep", "text": "A farmer counts 17 sheep."},
    {"id": "d2", "title": "Market", "text": "The market sells 25 sheep."},
]
BASE = {"question": QUESTION, "task": "Add the sheep.", "context": CONTEXT}

CASES: dict[str, tuple[str, dict[str, object]]] = {
    "system": ("agents/system.j2", {"role": "a careful expert problem solver"}),
    "cot": ("agents/cot.j2", BASE),
    "cot_question_only": ("agents/cot.j2", {"question": QUESTION, "task": QUESTION, "context": ()}),
    "cot_task_alone": ("agents/cot.j2", {"question": "", "task": "Add 17 and 25.", "context": ()}),
    "debate_speaker_round1": (
        "agents/debate_speaker.j2",
        {
            **BASE,
            "role": "Skeptic",
            "roles": ["Mathematician", "Skeptic"],
            "round": 1,
            "rounds": 2,
            "previous": [],
        },
    ),
    "debate_speaker_round2": (
        "agents/debate_speaker.j2",
        {
            **BASE,
            "role": "Skeptic",
            "roles": ["Mathematician", "Skeptic"],
            "round": 2,
            "rounds": 2,
            "previous": [
                Argument("Mathematician", r"17 + 25 = 42. \boxed{42}"),
                Argument("Skeptic", r"It is 43. \boxed{43}"),
            ],
        },
    ),
    "debate_judge": (
        "agents/debate_judge.j2",
        {
            **BASE,
            "roles": ["Mathematician", "Skeptic"],
            "arguments": [Argument("Mathematician", r"\boxed{42}"), Argument("Skeptic", r"\boxed{42}")],
        },
    ),
    "reflexion_critic": ("agents/reflexion_critic.j2", {**BASE, "solution": r"17 + 25 = 43. \boxed{43}"}),
    "reflexion_refine": (
        "agents/reflexion_refine.j2",
        {**BASE, "solution": r"17 + 25 = 43. \boxed{43}", "feedback": "17 + 25 is 42."},
    ),
    "python_write": ("agents/python_write.j2", {**BASE, "timeout_s": "10", "packages": ["numpy", "sympy"]}),
    "python_retry_error": (
        "agents/python_retry.j2",
        {
            "code_found": True,
            "timed_out": False,
            "timeout_s": "10",
            "stdout": "partial",
            "error": "ZeroDivisionError: division by zero",
        },
    ),
    "python_retry_timeout": (
        "agents/python_retry.j2",
        {"code_found": True, "timed_out": True, "timeout_s": "10", "stdout": "", "error": ""},
    ),
    "python_retry_no_code": (
        "agents/python_retry.j2",
        {"code_found": False, "timed_out": False, "timeout_s": "10", "stdout": "", "error": ""},
    ),
    "python_answer": ("agents/python_answer.j2", {"stdout": "42"}),
    "search_step_first": ("agents/search_step.j2", {**BASE, "queries": [], "evidence": [], "hops_left": 3}),
    "search_step_later": (
        "agents/search_step.j2",
        {**BASE, "queries": ["sheep farmer"], "evidence": EVIDENCE, "hops_left": 1},
    ),
    "search_answer": ("agents/search_answer.j2", {**BASE, "evidence": EVIDENCE}),
    "review": (
        "agents/review.j2",
        {
            **BASE,
            "max_issues": 3,
            "history": [{"id": "r1c1 cot", "answer": "43", "reasoning": r"17 + 25 = 43. \boxed{43}"}],
        },
    ),
    "review_no_history": ("agents/review.j2", {**BASE, "task": QUESTION, "max_issues": 5, "history": []}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_prompt_matches_snapshot(case):
    template, variables = CASES[case]
    text = render(template, **variables) + "\n"
    path = SNAPSHOTS / f"{case}.txt"
    if os.environ.get("MASORCH_UPDATE_SNAPSHOTS"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot {path.name}: run with MASORCH_UPDATE_SNAPSHOTS=1 and review it"
    assert text == path.read_text(encoding="utf-8")
