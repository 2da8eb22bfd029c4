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

# "verdict", up to five non-word characters ("**Verdict**: "), then a whole verdict word, which a "not"
# before it negates; or "no errors" (mistakes, issues, problems) ending its sentence, which accepts.
# A "no" followed by more words on its line ("no errors in step 1, but ...") is no verdict.
_VERDICT_LINE = re.compile(
    r"verdict\W{0,5}(?:"
    r"(?P<clean>no[ \t]+(?:errors?|mistakes?|issues?|problems?)(?:[ \t]+found)?)[ \t]*(?:[.!]|\r?$)"
    r"|(?P<negated>not[ \t]+)?"
    r"(?P<word>incorrect|correct|wrong|right|yes|true|false|accept(?:ed)?|reject(?:ed)?|no(?![ \t]*\w))\b"
    r")",
    re.IGNORECASE | re.MULTILINE,
)
_TRUE_WORDS = {"correct", "right", "yes", "true", "accept", "accepted", "1"}
_FALSE_WORDS = {"incorrect", "wrong", "no", "false", "reject", "rejected", "0"}
_VERDICT_KEYS = ("correct", "is_correct", "verdict")
#: How many ``{`` (a reply's last ones) a JSON verdict is looked for at: each try may read to the end.
_MAX_JSON_STARTS = 200
_OPEN_BRACE = re.compile(r"\{")


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


def _json_verdict(text: str) -> tuple[dict[str, Any], str] | None:
    """The last JSON object in ``text`` that has a verdict key, and that key; None when there is none.

    An object is decoded at each ``{`` in turn, and the search goes on after the end of each one
    read, so braces in prose around it ("the roots are {2, 3}") do not spoil it and an object nested
    in another is not taken for a verdict.
    """
    decoder = json.JSONDecoder()
    starts = [brace.start() for brace in _OPEN_BRACE.finditer(text)][-_MAX_JSON_STARTS:]
    found: tuple[dict[str, Any], str] | None = None
    resume = 0
    for start in starts:
        if start < resume:
            continue
        try:
            value, resume = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON, a number too long to convert, or too deep
            continue
        key = next((k for k in value if k.casefold() in _VERDICT_KEYS), None)  # a dict: it began with {
        if key is not None:
            found = (value, key)
    return found


def _line_verdict(text: str) -> bool | None:
    """The judgement of the last ``VERDICT:`` phrase in ``text``, or None when there is none."""
    matches = list(_VERDICT_LINE.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    if last.group("clean"):
        return True
    correct = _as_bool(last.group("word"))
    return None if correct is None else correct != bool(last.group("negated"))


def parse_verdict(text: str) -> Verdict:
    """Read a critic's reply leniently: a JSON ``{"correct", "feedback"}`` object or a ``VERDICT:`` line.

    The last JSON object with a verdict key wins, prose around it allowed; failing that, the last
    ``VERDICT:`` phrase, whose verdict word must be a whole word ("correctness" is none).

    >>> parse_verdict('{"correct": false, "feedback": "2+2 is 4"}')
    Verdict(correct=False, feedback='2+2 is 4')
    >>> parse_verdict("**Verdict:** Correct.").correct
    True
    >>> parse_verdict("I am not sure.").correct is None
    True
    """
    found = _json_verdict(text)
    if found is not None:
        obj, key = found
        correct = _as_bool(obj[key])
        if correct is not None:
            return Verdict(correct, str(obj.get("feedback", "") or "").strip())
    return Verdict(_line_verdict(text), text.strip())


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
