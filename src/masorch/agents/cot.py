"""Chain-of-thought: one model call that reasons step by step and ends with a boxed answer."""

from __future__ import annotations

from masorch.agents import signatures
from masorch.agents.answer import extract_answer
from masorch.agents.base import AgentContext, NodeInput, NodeOutput
from masorch.agents.common import CallLog, missing_problem, problem_vars, prompt_messages
from masorch.backends.base import GenerateConfig
from masorch.errors import BackendError
from masorch.plan.catalogue import KindSignature


class CotAgent:
    """One call: the node's problem, upstream context and a request for a ``\\boxed{}`` answer."""

    def __init__(self, *, max_tokens: int = 2048, signature: KindSignature | None = None) -> None:
        self._max_tokens = max_tokens
        self._signature = signature or signatures.COT

    @property
    def signature(self) -> KindSignature:
        """The ``cot`` kind's signature (the default catalogue's unless an agent profile sets one)."""
        return self._signature

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        """Ask once and extract the answer; a failed or empty reply is an error status."""
        problem = missing_problem(node)
        if problem is not None:
            return problem
        params = self.signature.resolve(node.params)
        log = CallLog()
        messages = prompt_messages("agents/cot.j2", **problem_vars(node))
        config = GenerateConfig(temperature=float(params["temperature"]), max_tokens=self._max_tokens)
        try:
            completion = await log.complete(ctx, messages, config)
        except BackendError as exc:
            return log.error(f"model call failed: {exc}")
        answer = extract_answer(completion.text)
        if not answer:
            return log.error("the model's reply was empty")
        return log.ok(answer, completion.text)
