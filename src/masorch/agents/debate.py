"""Debate: speakers with different roles argue over rounds, concurrently; a final judge decides."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from masorch.agents import signatures
from masorch.agents.answer import extract_answer
from masorch.agents.base import AgentContext, NodeInput, NodeOutput
from masorch.agents.common import CallLog, missing_problem, problem_vars, prompt_messages
from masorch.backends.base import Completion, GenerateConfig
from masorch.errors import BackendError
from masorch.plan.catalogue import KindSignature


@dataclass(frozen=True)
class Argument:
    """One speaker's contribution to one round."""

    role: str
    argument: str


class DebateAgent:
    """``rounds`` rounds of all ``roles`` speaking at once, each seeing the previous round; then a judge.

    A speaker whose call fails drops out of that round; a round where every speaker fails ends the
    node with an error. The node's answer is the judge's.
    """

    def __init__(
        self,
        *,
        max_tokens: int = 2048,
        speaker_temperature: float = 0.7,
        judge_temperature: float = 0.0,
        signature: KindSignature | None = None,
    ) -> None:
        self._max_tokens = max_tokens
        self._speaker_temperature = speaker_temperature
        self._judge_temperature = judge_temperature
        self._signature = signature or signatures.DEBATE

    @property
    def signature(self) -> KindSignature:
        """The ``debate`` kind's signature (the default catalogue's unless an agent profile sets one)."""
        return self._signature

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        """Run the rounds, then ask the judge."""
        problem = missing_problem(node)
        if problem is not None:
            return problem
        params = self.signature.resolve(node.params)
        roles = [str(r) for r in params["roles"]]
        rounds = int(params["rounds"])
        if len(roles) < 2:
            return CallLog().error(f"a debate needs at least 2 roles, got {len(roles)}")
        log = CallLog()
        previous: list[Argument] = []
        for round_number in range(1, rounds + 1):
            arguments, failures = await self._round(ctx, log, node, roles, round_number, rounds, previous)
            if not arguments:
                return log.error(f"every speaker failed in round {round_number}: " + "; ".join(failures))
            previous = arguments
        judge_messages = prompt_messages(
            "agents/debate_judge.j2",
            system_role="the judge of a debate",
            roles=roles,
            arguments=previous,
            **problem_vars(node),
        )
        config = GenerateConfig(temperature=self._judge_temperature, max_tokens=self._max_tokens)
        try:
            verdict = await log.complete(ctx, judge_messages, config)
        except BackendError as exc:
            return log.error(f"the judge's call failed: {exc}")
        answer = extract_answer(verdict.text)
        if not answer:
            return log.error("the judge's reply was empty")
        details = {"rounds": rounds, "roles": roles, "final_arguments": len(previous)}
        return log.ok(answer, verdict.text, details)

    async def _round(
        self,
        ctx: AgentContext,
        log: CallLog,
        node: NodeInput,
        roles: Sequence[str],
        round_number: int,
        rounds: int,
        previous: Sequence[Argument],
    ) -> tuple[list[Argument], list[str]]:
        config = GenerateConfig(temperature=self._speaker_temperature, max_tokens=self._max_tokens)
        calls = [
            log.complete(
                ctx,
                prompt_messages(
                    "agents/debate_speaker.j2",
                    system_role=f"the {role}",
                    role=role,
                    roles=roles,
                    round=round_number,
                    rounds=rounds,
                    previous=previous,
                    **problem_vars(node),
                ),
                config,
            )
            for role in roles
        ]
        results = await asyncio.gather(*calls, return_exceptions=True)
        arguments: list[Argument] = []
        failures: list[str] = []
        for role, result in zip(roles, results, strict=True):
            if isinstance(result, BackendError):
                failures.append(f"{role}: {result}")
            elif isinstance(result, BaseException):
                raise result
            else:
                assert isinstance(result, Completion)
                if result.text.strip():
                    arguments.append(Argument(role, result.text.strip()))
                else:
                    failures.append(f"{role}: empty reply")
        return arguments, failures
