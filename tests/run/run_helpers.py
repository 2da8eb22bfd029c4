"""Test sub-agents and a hand-built ValidatedPlan helper for the executor tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from masorch.agents.base import AgentContext, AgentRegistry, NodeInput, NodeOutput, NodeStatus
from masorch.backends.base import GenerateConfig, Message
from masorch.plan.catalogue import KindSignature, ParamSpec
from masorch.plan.model import AgentSpec, DoM, Flow, Plan, ValidatedPlan


class CallAgent:
    """Makes ``calls`` model calls (concurrently) with the task plus any context; answers the last."""

    def __init__(self, kind: str = "cot") -> None:
        self._sig = KindSignature(
            kind=kind,
            summary="test agent",
            params=(
                ParamSpec(name="calls", type="int", default=1, minimum=1, maximum=10),
                ParamSpec(name="temperature", type="float", default=0.0),
            ),
        )
        self.inputs: list[NodeInput] = []

    @property
    def signature(self) -> KindSignature:
        return self._sig

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        self.inputs.append(node)
        context = "".join(f"\n[{u.id}] {u.answer}" for u in node.context)
        messages = [Message("user", f"Q: {node.question}\nTask: {node.task}{context}")]
        n = int(node.params["calls"])
        outs = await asyncio.gather(
            *(ctx.complete(messages, GenerateConfig(sample_index=i)) for i in range(n)),
            return_exceptions=True,  # as the real agents do: no call is left running
        )
        for out in outs:
            if isinstance(out, BaseException):
                raise out
        return NodeOutput(answer=outs[-1].text, rationale=f"because {node.node_id}")


class FailAgent:
    """Raises an unexpected exception (an implementation bug)."""

    signature = KindSignature(kind="fail", summary="always raises")

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        raise ValueError(f"boom in {node.node_id}")


class StatusAgent:
    """Returns a model-caused failure as a status, without raising."""

    signature = KindSignature(kind="bad", summary="returns status error")

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        return NodeOutput(status=NodeStatus.ERROR, error="model output unusable")


class SleepAgent:
    """Sleeps ``seconds`` without calling any model, then answers its task."""

    signature = KindSignature(
        kind="sleep", summary="sleeps", params=(ParamSpec(name="seconds", type="float", default=0.05),)
    )

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        await asyncio.sleep(float(node.params["seconds"]))
        return NodeOutput(answer=node.task)


def registry(*extra: object) -> AgentRegistry:
    """cot (CallAgent) plus the given agents."""
    return AgentRegistry([CallAgent(), *extra])  # type: ignore[list-item]


def vplan(
    agents: Sequence[tuple[str, str, str] | tuple[str, str, str, dict]],
    flows: Sequence[tuple[str, str]] = (),
    dom: DoM = DoM.HIGH,
) -> ValidatedPlan:
    """A ValidatedPlan built by hand: agents as (id, kind, task[, params]), flows as (src, dst)."""
    specs = tuple(AgentSpec(id=a[0], kind=a[1], task=a[2], params=a[3] if len(a) > 3 else {}) for a in agents)
    plan = Plan(agents=specs, flows=tuple(Flow(src=s, dst=d) for s, d in flows))
    parents = {a.id: tuple(s for s, d in flows if d == a.id) for a in specs}
    # Topological order (Kahn) and the single sink.
    order: list[str] = []
    pending = dict(parents)
    while pending:
        ready = [n for n, ps in pending.items() if all(p in order for p in ps)]
        order.extend(ready)
        for n in ready:
            del pending[n]
    sources = {s for s, _ in flows}
    sinks = [a.id for a in specs if a.id not in sources]
    assert len(sinks) == 1, sinks
    return ValidatedPlan(plan=plan, dom=dom, order=tuple(order), parents=parents, sink=sinks[0])
