"""Self-consistency: n chain-of-thought samples run concurrently, majority vote on the answer."""

from __future__ import annotations

import asyncio
import logging

from masorch.agents import signatures
from masorch.agents.answer import extract_answer, majority_vote
from masorch.agents.base import AgentContext, NodeInput, NodeOutput
from masorch.agents.common import CallLog, missing_problem, problem_vars, prompt_messages
from masorch.backends.base import Completion, GenerateConfig
from masorch.errors import BackendError
from masorch.plan.catalogue import KindSignature

logger = logging.getLogger(__name__)


class SelfConsistencyAgent:
    """``n`` independent samples of the chain-of-thought prompt (``sample_index`` 0..n-1), then a vote.

    Answers are compared in normalised form (:func:`masorch.agents.answer.normalize_answer`); a tie
    goes to the answer that appeared first. A sample whose call fails or whose reply has no answer
    does not vote; when no sample votes the node fails with every reason.
    """

    def __init__(self, *, max_tokens: int = 2048, signature: KindSignature | None = None) -> None:
        self._max_tokens = max_tokens
        self._signature = signature or signatures.SC

    @property
    def signature(self) -> KindSignature:
        """The ``sc`` kind's signature (the default catalogue's unless an agent profile sets one)."""
        return self._signature

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        """Sample concurrently, vote, and answer with a winning sample's reasoning."""
        problem = missing_problem(node)
        if problem is not None:
            return problem
        params = self.signature.resolve(node.params)
        n = int(params["n"])
        temperature = float(params["temperature"])
        messages = prompt_messages("agents/cot.j2", **problem_vars(node))
        log = CallLog()
        configs = [
            GenerateConfig(temperature=temperature, max_tokens=self._max_tokens, sample_index=i)
            for i in range(n)
        ]
        results = await asyncio.gather(
            *(log.complete(ctx, messages, config) for config in configs), return_exceptions=True
        )
        texts: list[str] = []
        answers: list[str] = []
        failures: list[str] = []
        for index, result in enumerate(results):
            if isinstance(result, BackendError):
                failures.append(f"sample {index}: model call failed: {result}")
                texts.append("")
                answers.append("")
                continue
            if isinstance(result, BaseException):
                # Budget, deadline and implementation errors stop the node, as for a single call.
                raise result
            assert isinstance(result, Completion)
            answer = extract_answer(result.text)
            if not answer:
                failures.append(f"sample {index}: the reply had no answer")
            texts.append(result.text)
            answers.append(answer)
        vote = majority_vote(answers)
        if vote is None:
            return log.error(f"all {n} samples failed: " + "; ".join(failures))
        if failures:
            logger.info("node %s: %d of %d samples failed", node.node_id, len(failures), n)
        details = {
            "votes": vote.count,
            "voters": vote.total,
            "samples": n,
            "failed_samples": len(failures),
            "answers": answers,
        }
        return log.ok(answers[vote.first_index], texts[vote.first_index], details)
