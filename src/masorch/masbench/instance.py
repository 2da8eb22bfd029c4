"""Instance records: sub-task records, the task graph, measured axes and the rendered question."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from masorch.masbench.problem import Problem, Q
from masorch.masbench.render import Block, Needle, task_text

GENERATOR_VERSION = "masbench-gen/1.1"
AXES = ("depth", "horizon", "breadth", "parallel", "robustness")
#: How a multi-answer (horizon) task joins its answers in ``ground_truth``.
SEPARATOR = "<<horizon>>"


def given_answers(answers: dict[int, int]) -> dict[Q, int]:
    """Answer references ``[answerj]`` with their values, for solving a chained sub-problem."""
    return {Q("ans", "", str(j)): v for j, v in answers.items()}


def igsm_subtask(
    problem: Problem, rng: random.Random, world_index: int, answers: dict[int, int]
) -> dict[str, Any]:
    """The record of an iGSM sub-task (sentences shuffled with ``rng``)."""
    given = given_answers(answers)
    answer = problem.solve(given)
    solution = problem.solution(rng, given)
    sentences = problem.sentences()
    rng.shuffle(sentences)
    sketch = problem.sketch()
    digest, bucket = problem.template()
    deps = problem.dep_map()
    nodes: list[str] = []
    for q, ins in deps.items():
        nodes.extend(d.name() for d in ins if d.kind == "ans" and d.name() not in nodes)
        nodes.append(q.name())
    equations = [
        {
            "quantity": q.name(),
            "rhs": "total" if e is None else e.text(),
            "inputs": [d.name() for d in deps[q]],
        }
        for q, e in problem.steps
    ]
    return {
        "kind": "igsm",
        "world": world_index,
        "body": " ".join(sentences),
        "question": f"How many {problem.query.target} does {problem.query.owner} have?",
        "note": "",
        "answer": answer,
        "graph": {
            "nodes": nodes,
            "edges": [[d.name(), q.name()] for q, ins in deps.items() for d in ins],
            "query": problem.query.name(),
        },
        "equations": equations,
        "n_distractors": len(problem.distractors),
        "solution": solution,
        "sketch": sketch,
        "template_hash": digest,
        "bucket": bucket,
        "depth": problem.depth(),
        "breadth": problem.breadth(),
        "operations": problem.operations(),
        "needle": None,
    }


def needle_subtask(needle: Needle) -> dict[str, Any]:
    """The record of a needle-in-a-haystack sub-task (no template: it takes no part in split hashing)."""
    return {
        "kind": "needle",
        "world": -1,
        "body": needle.body(),
        "question": needle.question(),
        "note": "",
        "answer": needle.answer,
        "graph": {"nodes": [needle.key], "edges": [], "query": needle.key},
        "equations": [],
        "n_distractors": 0,
        "solution": f"The special magic number for {needle.key} is {needle.number}; "
        f"{needle.number} mod 23 = {needle.answer}. Thus, the answer is {needle.answer}.",
        "sketch": "",
        "template_hash": "",
        "bucket": -1,
        "depth": 0,
        "breadth": 0,
        "operations": 0,
        "needle": {
            "key": needle.key,
            "number": needle.number,
            "position": needle.position,
            "repeats": needle.repeats,
        },
    }


def measure(subtasks: list[dict[str, Any]], edges: list[tuple[int, int]]) -> dict[str, int]:
    """The five measured axes of a task from its sub-tasks and task graph (edges between sub-tasks)."""
    n = len(subtasks)
    longest = [1] * n
    for a, b in sorted(edges, key=lambda e: e[1]):
        longest[b] = max(longest[b], longest[a] + 1)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for a, b in edges:
        parent[root(a)] = root(b)
    igsm = [s for s in subtasks if s["kind"] == "igsm"]
    notes = sum(1 for s in subtasks if s["note"])
    return {
        "depth": max((s["depth"] for s in igsm), default=0),
        "horizon": max(longest),
        "breadth": max((s["breadth"] for s in igsm), default=0),
        "parallel": len({root(i) for i in range(n)}),
        "robustness": n if notes else 0,
    }


def assemble(
    *,
    axis: str,
    value: int,
    split: str,
    seed: int,
    index: int,
    attempt: int,
    worlds: list[dict[str, Any]],
    subtasks: list[dict[str, Any]],
    edges: list[tuple[int, int]],
    decoys: list[int | None] | None = None,
    attacked: list[int | None] | None = None,
) -> dict[str, Any]:
    """The full instance record (the JSONL layout)."""
    blocks = [Block(i + 1, s["note"], s["body"], s["question"]) for i, s in enumerate(subtasks)]
    answers = [int(s["answer"]) for s in subtasks]
    hashes = [s["template_hash"] for s in subtasks if s["template_hash"]]
    multi = len(subtasks) > 1
    solution = " ".join(
        (f"Problem {i + 1}: " if multi else "") + s["solution"] for i, s in enumerate(subtasks)
    )
    return {
        "id": f"masbench-{axis}-{split}-v{value}-s{seed}-{index:06d}",
        "axis": axis,
        "value": value,
        "split": split,
        "seed": seed,
        "index": index,
        "attempt": attempt,
        "generator_version": GENERATOR_VERSION,
        "question": task_text(blocks),
        "answers": answers,
        "ground_truth": SEPARATOR.join(str(a) for a in answers),
        "decoys": decoys if decoys is not None else [None] * len(answers),
        "attacked_answers": attacked if attacked is not None else [None] * len(answers),
        "verification": {"solution": solution, "answers": answers},
        "measured": measure(subtasks, edges),
        "template_hash": hashlib.sha256("|".join(hashes).encode("utf-8")).hexdigest(),
        "worlds": worlds,
        "subtasks": subtasks,
        "task_graph": {
            "nodes": [f"s{i + 1}" for i in range(len(subtasks))],
            "edges": [[f"s{a + 1}", f"s{b + 1}"] for a, b in edges],
        },
    }
