"""The sub-agent protocol, its inputs and outputs, the context it runs in, and the registry."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from masorch.backends.base import Completion, GenerateConfig, Message, Usage
from masorch.plan.catalogue import KindSignature


class NodeStatus(str, Enum):
    """How a node ended. Only ``ok`` carries a usable answer."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class UpstreamResult:
    """An upstream node's result as passed along a flow (answers only, never prompts)."""

    id: str
    answer: str
    rationale: str = ""


@dataclass(frozen=True)
class NodeInput:
    """Everything a sub-agent receives.

    ``task`` already has its ``${id}`` references substituted; ``context`` holds upstream results
    passed along flows without a reference. ``question`` is the original question (empty when the
    plan asked for the task alone). ``params`` are the kind's parameters with defaults filled in.
    """

    node_id: str
    question: str
    task: str
    params: Mapping[str, Any] = field(default_factory=dict)
    context: tuple[UpstreamResult, ...] = ()


@dataclass(frozen=True)
class NodeOutput:
    """A sub-agent's result. ``error`` explains any status other than ok; ``details`` is optional."""

    answer: str = ""
    rationale: str = ""
    status: NodeStatus = NodeStatus.OK
    error: str = ""
    usage: Usage = field(default_factory=Usage)
    #: Agent-specific facts about how the answer was reached (votes, rounds, hops, attempts), for traces.
    details: Mapping[str, Any] = field(default_factory=dict)


class Retriever(Protocol):
    """A document search the search agent can use (local BM25 corpus or a web provider)."""

    def search(self, query: str, k: int) -> Sequence[Mapping[str, str]]:
        """Up to ``k`` documents, best first, each with at least ``title`` and ``text``."""
        ...


class AgentContext(Protocol):
    """What the executor gives a running sub-agent.

    ``complete`` goes through the executor's budget check, retry, cache, ledger and trace; agents
    never hold a backend themselves.
    """

    @property
    def node_id(self) -> str:
        """The id of the node this agent runs as."""
        ...

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """One LLM call on this node's behalf (raises BudgetExceeded / BackendError)."""
        ...

    @property
    def retriever(self) -> Retriever | None:
        """The document search configured for this run, if any."""
        ...


@runtime_checkable
class SubAgent(Protocol):
    """A black-box function with a typed signature."""

    @property
    def signature(self) -> KindSignature:
        """Its kind, one-line capability and typed parameters."""
        ...

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        """Solve ``node.task``. Model-caused failures become a status; implementation bugs raise."""
        ...


#: What the built-in kinds need from a run's environment: a document search, a program sandbox, a
#: reasoning history to read (the multi-round mode's earlier results).
KIND_NEEDS: Mapping[str, frozenset[str]] = {
    "search": frozenset({"retriever"}),
    "python": frozenset({"sandbox"}),
    "review": frozenset({"history"}),
}


class AgentRegistry:
    """Kind name -> sub-agent. Built per run (no global state); exposes the catalogue."""

    def __init__(self, agents: Sequence[SubAgent] = (), *, withheld: Collection[str] = ()) -> None:
        self._agents: dict[str, SubAgent] = {}
        #: kinds of the registry this one was :meth:`offered` from that it does not offer
        self.withheld = frozenset(withheld)
        for agent in agents:
            self.register(agent)

    def register(self, agent: SubAgent) -> None:
        """Add an agent under its signature's kind (a second one of a kind is a usage error)."""
        from masorch.errors import UsageError

        kind = agent.signature.kind
        if kind in self._agents:
            raise UsageError(
                f"sub-agent kind '{kind}' is registered twice", hint="give the second agent another kind name"
            )
        self._agents[kind] = agent

    def get(self, kind: str) -> SubAgent:
        """The agent of this kind (a usage error naming the known kinds if absent)."""
        from masorch.errors import UsageError

        try:
            return self._agents[kind]
        except KeyError:
            raise UsageError(
                f"no sub-agent of kind '{kind}'", hint=f"known kinds: {', '.join(self._agents)}"
            ) from None

    def catalogue(self) -> dict[str, KindSignature]:
        """The signatures of every registered kind, in registration order."""
        return {k: a.signature for k, a in self._agents.items()}

    def offered(self, available: Collection[str]) -> AgentRegistry:
        """The agents whose needs are all in ``available``: what a run can execute.

        An agent's needs are its ``requires`` attribute (e.g. ``{"retriever"}``) and, for the
        built-in kinds ``search`` and ``python`` under any implementation, :data:`KIND_NEEDS`.
        Use :func:`masorch.agents.registry.offered_registry`, which knows what the host has.
        """
        have = set(available)
        kept = [
            a
            for kind, a in self._agents.items()
            if set(getattr(a, "requires", ())) | KIND_NEEDS.get(kind, frozenset()) <= have
        ]
        if len(kept) == len(self._agents):
            return self
        left_out = {kind for kind in self._agents if kind not in {a.signature.kind for a in kept}}
        return AgentRegistry(kept, withheld=self.withheld | left_out)

    @property
    def known_kinds(self) -> frozenset[str]:
        """Every kind this registry offers or was made without (:attr:`withheld`): the names a
        setting such as a tool's cost may rightly mention."""
        return frozenset(self._agents) | self.withheld

    def __contains__(self, kind: object) -> bool:
        return kind in self._agents
