"""Critical Reviewer: reads the reasoning history so far and returns its issues, each with a fix."""

from __future__ import annotations

import re
from dataclasses import dataclass

from masorch.agents import signatures
from masorch.agents.base import AgentContext, NodeInput, NodeOutput
from masorch.agents.common import CallLog, missing_problem, problem_vars, prompt_messages, tail
from masorch.backends.base import GenerateConfig
from masorch.errors import BackendError
from masorch.plan.catalogue import KindSignature

#: How much of each step's reasoning the reviewer reads (its tail holds the conclusion).
REASONING_CHARS = 2000

_VERDICT = re.compile(r"verdict\W{0,5}(sound|flawed)", re.IGNORECASE)
_ISSUE = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+\S", re.MULTILINE)
_NONE = re.compile(r"issues\W{0,3}none\b", re.IGNORECASE)


@dataclass(frozen=True)
class Review:
    """A reviewer's reply read: the issues listed and the verdict (None when it gave none)."""

    issues: int
    sound: bool | None


def parse_review(text: str) -> Review:
    """Count the listed issues and read the ``VERDICT:`` line, leniently.

    >>> parse_review("ISSUES:\\n1. 3*4 is 12 -- FIX: redo step 2\\nVERDICT: flawed")
    Review(issues=1, sound=False)
    >>> parse_review("ISSUES: none\\nVERDICT: sound")
    Review(issues=0, sound=True)
    """
    verdicts = _VERDICT.findall(text)
    sound = None if not verdicts else verdicts[-1].casefold() == "sound"
    issues = 0 if _NONE.search(text) else len(_ISSUE.findall(text))
    return Review(issues=issues, sound=sound)


class ReviewAgent:
    """One call that reviews the reasoning so far: the node's context (earlier steps' answers and
    reasoning, which the multi-round mode passes as the history) and its task (what to look at).

    The answer is the review itself (issues and fixes), for the orchestrator to act on.
    """

    #: The reviewer reads a history, which only the multi-round mode gives (``AgentRegistry.offered``).
    requires: frozenset[str] = frozenset({"history"})

    def __init__(self, *, max_tokens: int = 2048) -> None:
        self._max_tokens = max_tokens

    @property
    def signature(self) -> KindSignature:
        """The ``review`` kind's signature."""
        return signatures.REVIEW

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        """Review once; a failed or empty reply is an error status."""
        problem = missing_problem(node)
        if problem is not None:
            return problem
        params = self.signature.resolve(node.params)
        variables = problem_vars(node)
        history = [
            {"id": step.id, "answer": step.answer, "reasoning": tail(step.rationale.strip(), REASONING_CHARS)}
            for step in variables.pop("context")
        ]
        messages = prompt_messages(
            "agents/review.j2",
            system_role="a critical reviewer",
            history=history,
            max_issues=int(params["max_issues"]),
            **variables,
        )
        config = GenerateConfig(temperature=float(params["temperature"]), max_tokens=self._max_tokens)
        log = CallLog()
        try:
            completion = await log.complete(ctx, messages, config)
        except BackendError as exc:
            return log.error(f"model call failed: {exc}")
        text = completion.text.strip()
        if not text:
            return log.error("the reviewer's reply was empty")
        review = parse_review(text)
        return log.ok(text, text, {"issues": review.issues, "sound": review.sound})
