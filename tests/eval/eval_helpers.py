"""Deterministic models and tiny MASBench-style files for the eval tests (importable by Ray workers)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from masorch.backends.base import Backend, Completion, GenerateConfig, Message, ToolCall
from masorch.backends.scripted import ScriptedBackend
from masorch.errors import BackendError

_SUM = re.compile(r"What is (\d+) plus (\d+)\?")


def write_sums(path: Path, n: int, *, axis: str = "depth", values: Sequence[int] = (2,)) -> Path:
    """A MASBench-layout JSONL of ``n`` sums per axis value; answers mod 23 like MASBench."""
    lines = []
    for value in values:
        for i in range(n):
            a, b = i + value, 2 * i + 1
            ans = (a + b) % 23
            rec = {
                "id": f"sum-{axis}-{value}-{i}",
                "axis": axis,
                "value": value,
                "question": f"Item {i}. What is {a} plus {b}? All calculations are done modulo 23.",
                "answers": [ans],
                "ground_truth": str(ans),
                "decoys": [None],
            }
            lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class SumModel:
    """A picklable responder: plans one cot agent when asked to orchestrate, else answers the sum.

    It answers wrongly when the item number is divisible by ``wrong_every`` (so accuracy is known),
    raises a backend error on items listed in ``fail_items``, and reports its answer to the items in
    ``cut_items`` as stopped at the token cap (finish ``length``).
    """

    def __init__(
        self,
        wrong_every: int = 0,
        fail_items: Sequence[int] = (),
        plan_kind: str = "cot",
        cut_items: Sequence[int] = (),
    ) -> None:
        self.wrong_every = wrong_every
        self.fail_items = tuple(fail_items)
        self.plan_kind = plan_kind
        self.cut_items = tuple(cut_items)

    def __call__(self, messages: Sequence[Message], config: GenerateConfig) -> str | Completion:
        if config.tools:
            return _rounds_turn(messages)
        text = "\n".join(m.content for m in messages)
        if "Write the plan now." in text:
            return f'create_agent(id="solver", kind="{self.plan_kind}", task="")'
        match = _SUM.search(text)
        if match is None:
            return "I cannot tell.\n\\boxed{0}"
        item = int(re.search(r"Item (\d+)\.", text).group(1))  # type: ignore[union-attr]
        if item in self.fail_items:
            raise BackendError(f"scripted failure on item {item}", hint="test fault")
        value = (int(match.group(1)) + int(match.group(2))) % 23
        if self.wrong_every and item % self.wrong_every == 0:
            value = (value + 1) % 23
        text = f"Adding the numbers.\n\\boxed{{{value}}}"
        return Completion(text=text, finish="length") if item in self.cut_items else text


def _rounds_turn(messages: Sequence[Message]) -> Completion:
    """A rounds-mode orchestrator: one cot call on the question, then its result as the answer."""
    results = [m.content for m in messages if m.role == "tool"]
    if not results:
        question = next(m.content for m in messages if m.role == "user")
        call = ToolCall("cot", json.dumps({"task": question}), id="c1")
    else:
        answer = results[-1].partition("result:\n")[2].strip()
        call = ToolCall("final_answer", json.dumps({"answer": answer}), id="f1")
    return Completion(text="", tool_calls=(call,), finish="tool_calls")


class SumBackendFactory:
    """A picklable backend factory over :class:`SumModel` (one backend per model string)."""

    def __init__(self, delay_s: float = 0.0, **model: Any) -> None:
        self.delay_s = delay_s
        self.model = model

    def __call__(self, spec: str) -> Backend:
        return ScriptedBackend(SumModel(**self.model), name=spec, delay_s=self.delay_s)


def scorer_factory(name: str, **options: Any) -> Any:
    """Only the MASBench scorer (the eval tests need no math-verify)."""
    from masorch.score.registry import get_scorer

    assert name == "masbench", name
    return get_scorer(name, **options)
