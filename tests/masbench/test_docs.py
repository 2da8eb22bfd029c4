"""The rendered examples in docs/masbench.md are exactly what the generator makes.

Run with ``MASBENCH_REGEN_DOCS=1`` to rewrite the examples after an intended generator change.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from masorch.masbench.axes import generate_instance
from masorch.masbench.evaluator import solve_text

DOC = Path(__file__).parents[2] / "docs" / "masbench.md"
EXAMPLE = re.compile(
    r"<!-- example: (\w+) (\d+) -->\n```text\n(.*?)\n```\n\nAnswers: `([^`]*)`; measured: ([^\n]*)\.\n", re.S
)


def _render(axis: str, value: int) -> tuple[dict, str]:
    rec = generate_instance(axis, value, split="train", seed=0, index=0)
    measured = ", ".join(f"{k} {v}" for k, v in rec["measured"].items())
    block = (
        f"<!-- example: {axis} {value} -->\n```text\n{rec['question']}\n```\n\n"
        f"Answers: `{rec['ground_truth']}`; measured: {measured}.\n"
    )
    return rec, block


def test_every_axis_has_a_reproducible_example():
    text = DOC.read_text(encoding="utf-8")
    if os.environ.get("MASBENCH_REGEN_DOCS"):
        text = EXAMPLE.sub(lambda m: _render(m.group(1), int(m.group(2)))[1], text)
        DOC.write_text(text, encoding="utf-8")
    examples = list(EXAMPLE.finditer(text))
    assert sorted(m.group(1) for m in examples) == sorted(
        ["depth", "breadth", "horizon", "parallel", "robustness"]
    )
    for m in examples:
        rec, block = _render(m.group(1), int(m.group(2)))
        assert m.group(0) == block, (
            f"docs example for {m.group(1)} is stale (MASBENCH_REGEN_DOCS=1 rewrites it)"
        )
        assert solve_text(m.group(3), rec["worlds"]).answers == rec["answers"]
