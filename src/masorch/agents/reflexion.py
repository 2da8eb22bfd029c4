"""Reflexion: answer, then critic/refine rounds until the critic accepts or the answer settles."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from masorch.agents import signatures
from masorch.agents.answer import extract_answer, normalize_answer
from masorch.agents.base import AgentContext, NodeInput, NodeOutput
from masorch.agents.common import CallLog, missing_problem, problem_vars, prompt_messages
from masorch.backends.base import GenerateConfig
from masorch.errors import BackendError
from masorch.plan.catalogue import KindSignature

#: Asked of backends that can constrain output to a schema; the parser does not rely on it.
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"correct": {"type": "boolean"}, "feedback": {"type": "string"}},
    "required": ["correct", "feedback"],
}

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_VERDICT_LINE = re.compile(
    r"verdict\W{0,5}(?P<word>incorrect|correct|wrong|right|yes|no|true|false|accept|reject)",
    re.IGNORECASE,
)
_TRUE_WORDS = {"correct", "right", "yes", "true", "accept", "accepted", "1"}
_FALSE_WORDS = {"incorrect", "wrong", "no", "false", "reject", "rejected", "0"}


@dataclass(frozen=True)
class Verdict:
    """A critic's judgement: ``correct`` is None when the reply could not be read as a verdict."""

    correct: bool | None
    feedback: str


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    word = str(value).strip().strip(".").casefold()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        start, end = candidate.find("{"), candidate.rfind("}")
        if start < 0 or end <= start:
            continue
        try:
            value = json.loads(candidate[start : end + 1])
        except (ValueError, RecursionError):  # not JSON, a number too long to convert, or too deep
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_verdict(text: str) -> Verdict:
    """Read a critic's reply leniently: a JSON ``{"correct", "feedback"}`` object or a ``VERDICT:`` line.

    >>> parse_verdict('{"correct": false, "feedback": "2+2 is 4"}')
    Verdict(correct=False, feedback='2+2 is 4')
    >>> parse_verdict("**Verdict:** Correct.").correct
    True
    >>> parse_verdict("I am not sure.").correct is None
    True
    """
    obj = _json_object(text)
    if obj is not None:
        key = next((k for k in obj if k.casefold() in ("correct", "is_correct", "verdict")), None)
        if key is not None:
            correct = _as_bool(obj[key])
            if correct is not None:
                return Verdict(correct, str(obj.get("feedback", "") or "").strip())
    matches = list(_VERDICT_LINE.finditer(text))
    if matches:
        return Verdict(_as_bool(matches[-1].group("word")), text.strip())
    return Verdict(None, text.strip())


class ReflexionAgent:
    """A first answer, then up to ``max_rounds`` critic reviews, each followed by a refinement.

    Stops early when the critic accepts the solution, or when a refinement leaves the normalised
    answer unchanged (another round would only repeat it). An unreadable critic reply counts as
    not accepted and its text becomes the feedback.
    """

    def __init__(
        self, *, max_tokens: int = 2048, temperature: float = 0.0, signature: KindSignature | None = None
    ) -> None:
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._signature = signature or signatures.REFLEXION

    @property
    def signature(self) -> KindSignature:
        """The ``reflexion`` kind's signature (the default catalogue's unless an agent profile sets one)."""
        return self._signature

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        """Answer, then review and refine until accepted, settled, or out of rounds."""
        problem = missing_problem(node)
        if problem is not None:
            return problem
        max_rounds = int(self.signature.resolve(node.params)["max_rounds"])
        variables = problem_vars(node)
        config = GenerateConfig(temperature=self._temperature, max_tokens=self._max_tokens)
        critic_config = GenerateConfig(
            temperature=0.0, max_tokens=self._max_tokens, json_schema=VERDICT_SCHEMA
        )
        log = CallLog()
        try:
            first = await log.complete(ctx, prompt_messages("agents/cot.j2", **variables), config)
            solution, answer = first.text.strip(), extract_answer(first.text)
            if not answer:
                return log.error("the first reply was empty")
            history = [answer]
            stop = "max_rounds"
            rounds = 0
            for _ in range(max_rounds):
                rounds += 1
                review = await log.complete(
                    ctx,
                    prompt_messages(
                        "agents/reflexion_critic.j2",
                        system_role="a strict reviewer",
                        solution=solution,
                        **variables,
                    ),
                    critic_config,
                )
                verdict = parse_verdict(review.text)
                if verdict.correct:
                    stop = "accepted"
                    break
                refined = await log.complete(
                    ctx,
                    prompt_messages(
                        "agents/reflexion_refine.j2",
                        solution=solution,
                        feedback=verdict.feedback or "The reviewer found the solution incorrect.",
                        **variables,
                    ),
                    config,
                )
                new_answer = extract_answer(refined.text)
                if not new_answer:
                    stop = "empty_refinement"
                    break
                settled = normalize_answer(new_answer) == normalize_answer(answer)
                solution, answer = refined.text.strip(), new_answer
                history.append(answer)
                if settled:
                    stop = "unchanged"
                    break
        except BackendError as exc:
            return log.error(f"model call failed: {exc}")
        return log.ok(answer, solution, {"rounds": rounds, "stop": stop, "answers": history})
