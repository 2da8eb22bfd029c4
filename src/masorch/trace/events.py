"""Typed, schema-versioned run events: one pydantic model per ``type``, a discriminated union.

Events carry model ids (``provider:model``) only, never backend configuration, so no secret can
reach a trace. Bump :data:`SCHEMA_VERSION` on any incompatible change; readers refuse versions they
do not know.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import PydanticSerializationError

from masorch.backends.base import Usage
from masorch.files import MAX_LINE_BYTES

SCHEMA_VERSION: Literal[1] = 1

RunStatusName = Literal["ok", "error", "timeout", "budget", "invalid_plan"]
NodeStatusName = Literal["ok", "error", "timeout", "budget", "skipped"]


class UsageSummary(BaseModel):
    """Calls, tokens and cost of one call, node or run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    @classmethod
    def of(cls, usage: Usage) -> UsageSummary:
        """The summary of a backend :class:`Usage`."""
        return cls(
            calls=usage.calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost=usage.cost,
        )


class EventBase(BaseModel):
    """Fields every event has: schema version, run id and unix time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    run_id: str
    ts: float = Field(default_factory=time.time, description="unix time the event was made")

    def json_line(self) -> str:
        """The event as one line of JSON, as a trace file holds it.

        pydantic refuses text that has no UTF-8 form (a lone surrogate, from a ``"\\ud800"`` escape
        in a plan the model wrote): such an event is written by the standard library instead, the
        surrogate as its JSON escape, so the line reads back as the same event.

        >>> line = RunStarted(run_id="r", question="q" + chr(0xD800), ts=0).json_line()
        >>> '"question":"q\\\\ud800"' in line
        True
        """
        try:
            line = self.model_dump_json()
        except PydanticSerializationError:
            line = json.dumps(self.model_dump(mode="json"), separators=(",", ":"))
        if len(line) * 4 > MAX_EVENT_BYTES and len(line.encode("utf-8", "surrogatepass")) > MAX_EVENT_BYTES:
            line = _shrunk(self.model_dump(mode="json"))
        return line


#: The largest trace line an event writes (half of what the readers take, :data:`MAX_LINE_BYTES`):
#: a reply of megabytes (a server that ignores ``max_tokens``) must not make a trace unreadable.
MAX_EVENT_BYTES = MAX_LINE_BYTES // 2


def _shrunk(data: dict[str, Any]) -> str:
    """``data`` as one JSON line within :data:`MAX_EVENT_BYTES`: its longest texts cut, each to the
    same length, with a note of how much was cut."""

    def cut(value: Any, cap: int) -> Any:
        if isinstance(value, str) and len(value) > cap:
            return f"{value[:cap]}... [{len(value) - cap} characters cut from the trace]"
        if isinstance(value, dict):
            return {k: cut(v, cap) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v, cap) for v in value]
        return value

    cap = MAX_EVENT_BYTES // 8
    while True:
        line = json.dumps(cut(data, cap), separators=(",", ":"))
        if len(line.encode("utf-8", "surrogatepass")) <= MAX_EVENT_BYTES or cap < 64:
            return line
        cap //= 2


class RunStarted(EventBase):
    """A run began: the question, the options and the model id of each role."""

    type: Literal["run_started"] = "run_started"
    question: str
    mode: str = "orchestrate"
    dom: str | None = None
    dialect: str | None = None
    models: dict[str, str] = Field(default_factory=dict, description="role -> model id")
    budget: dict[str, int | float | None] = Field(default_factory=dict)


class PlanParsed(EventBase):
    """The orchestrator's text parsed and validated into a plan."""

    type: Literal["plan_parsed"] = "plan_parsed"
    dialect: str
    text: str
    plan: dict[str, Any]
    attempt: int = 0
    diagnostics: list[dict[str, Any]] = Field(default_factory=list, description="warnings, if any")


class PlanRejected(EventBase):
    """The orchestrator's text did not give a valid plan; ``diagnostics`` say why."""

    type: Literal["plan_rejected"] = "plan_rejected"
    dialect: str
    text: str
    attempt: int = 0
    diagnostics: list[dict[str, Any]]


class NodeStarted(EventBase):
    """A plan node began running (its parents had all ended ok)."""

    type: Literal["node_started"] = "node_started"
    node: str
    kind: str
    task: str
    params: dict[str, Any] = Field(default_factory=dict)


class NodeFinished(EventBase):
    """A plan node ended, with its status, answer or error, and the usage of its calls."""

    type: Literal["node_finished"] = "node_finished"
    node: str
    status: NodeStatusName
    answer: str = ""
    error: str = ""
    usage: UsageSummary = Field(default_factory=UsageSummary)
    wall_s: float = 0.0


class LlmCall(EventBase):
    """One LLM call through the budget gate (ok or failed): its usage, and its messages and reply."""

    type: Literal["llm_call"] = "llm_call"
    role: Literal["orchestrator", "subagent", "judge"]
    node: str | None = None
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost: float = 0.0
    cached: bool = False
    attempts: int = 1
    error: str = ""
    finish: str = Field(default="", description="why the reply ended: stop, length (the token cap), ...")
    messages: list[dict[str, str]] = Field(default_factory=list, description="the request: role and content")
    response: str = Field(default="", description="the reply's text ('' for a failed call)")
    tool_calls: list[dict[str, str]] = Field(default_factory=list, description="the reply's tool calls")


class ToolResult(EventBase):
    """One tool call of a multi-round run ended: its round, tool, model, status and cost units.

    ``status`` is one of the rounds mode's statuses (``OK``, ``EXEC_ERR``, ``TIMEOUT``, ``BUDGET``,
    ``FORMAT_ERR``, ``REJECTED``); ``node`` is the call's id in the run (``r2c1``: round 2, call
    1), also when it was refused; ``model`` is the model that ran it (empty when it did not run);
    ``injected`` marks a failure made on purpose (:mod:`masorch.run.faults`).
    """

    type: Literal["tool_result"] = "tool_result"
    round: int
    call_id: str
    tool: str
    status: Literal["OK", "EXEC_ERR", "TIMEOUT", "BUDGET", "FORMAT_ERR", "REJECTED"]
    node: str = ""
    model: str = ""
    units: float = 0.0
    error: str = ""
    wall_s: float = 0.0
    injected: bool = False


class RunFinished(EventBase):
    """The run ended with a status, an answer (when ok) and its total usage and wall time."""

    type: Literal["run_finished"] = "run_finished"
    status: RunStatusName
    answer: str = ""
    error: str = ""
    usage: UsageSummary = Field(default_factory=UsageSummary)
    wall_s: float = 0.0


Event = Annotated[
    RunStarted | PlanParsed | PlanRejected | NodeStarted | NodeFinished | LlmCall | ToolResult | RunFinished,
    Field(discriminator="type"),
]

#: Validates any event dict (or JSON) into its typed model.
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
