"""Typed plan objects: what an orchestrator's text becomes after parsing.

These types are pure data. ``Plan`` is whatever the parser could read (it may be invalid);
``ValidatedPlan`` is produced only by :func:`masorch.plan.validate.validate` and is what the
executor runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

#: A parameter value in a plan: literals only, never code.
ParamValue = str | int | float | bool | None | list[Any]


class DoM(str, Enum):
    """Degree of MAS: how much multi-agent structure a plan may have.

    LOW: at most one sub-agent and no flows (the orchestrator may also answer directly).
    HIGH: any valid DAG within the size limits.
    """

    LOW = "low"
    HIGH = "high"


class AgentSpec(BaseModel):
    """One sub-agent node: an id, a registered kind, its task and its typed parameters.

    ``task_only`` asks for the task alone: the agent is not shown the original question (its task
    must then say everything). Serialised only when set, so plans that do not use it keep their form.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: str
    task: str = ""
    params: dict[str, ParamValue] = Field(default_factory=dict)
    task_only: bool = False

    @model_serializer(mode="wrap")
    def _omit_default_task_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.task_only:
            data.pop("task_only", None)
        return data


class Flow(BaseModel):
    """A data-flow edge: the answer of ``src`` is an input of ``dst``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    src: str
    dst: str


class Plan(BaseModel):
    """A whole multi-agent system as written by an orchestrator (not yet validated)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agents: tuple[AgentSpec, ...] = ()
    flows: tuple[Flow, ...] = ()
    final_answer: str | None = None

    def agent(self, agent_id: str) -> AgentSpec | None:
        """The agent with this id, or None."""
        return next((a for a in self.agents if a.id == agent_id), None)


def kinds_label(kinds: Iterable[str]) -> str:
    """The kinds a plan uses, as one label for counting plan shapes: its distinct kinds, sorted and
    joined by ``+``; ``direct`` for a plan with no agent (a direct answer).

    >>> kinds_label(["sc", "cot", "sc"]), kinds_label([])
    ('cot+sc', 'direct')
    """
    return "+".join(sorted(set(kinds))) or "direct"


@dataclass(frozen=True)
class ValidatedPlan:
    """A plan that passed validation under a DoM; only ``validate`` constructs it.

    ``order`` is a topological order of agent ids, ``parents`` the upstream ids of each agent
    (from flows, in plan order) and ``sink`` the id whose answer is the plan's answer (None when
    the plan is a direct ``final_answer``).
    """

    plan: Plan
    dom: DoM
    order: tuple[str, ...]
    parents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sink: str | None = None
