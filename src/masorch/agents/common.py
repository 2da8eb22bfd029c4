"""Helpers shared by the built-in sub-agents: prompt variables, messages, call bookkeeping."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from masorch.agents.answer import sum_usage
from masorch.agents.base import AgentContext, NodeInput, NodeOutput, NodeStatus
from masorch.backends.base import Completion, GenerateConfig, Message, Usage
from masorch.prompts import render

#: The role named in the system prompt when an agent has no more specific one.
DEFAULT_ROLE = "a careful expert problem solver"


def tail(text: str, limit: int) -> str:
    """``text``, or its last ``limit`` characters after ``...`` (an error, a program's output and
    an answer end where it matters).

    >>> tail("abcdef", 3), tail("abc", 3)
    ('...def', 'abc')
    """
    return text if len(text) <= limit else "..." + text[-limit:]


def problem_vars(node: NodeInput) -> dict[str, Any]:
    """The template variables every agent prompt shares: question, task (empty = the question), context."""
    task = node.task.strip() or node.question.strip()
    return {"question": node.question.strip(), "task": task, "context": node.context}


def missing_problem(node: NodeInput) -> NodeOutput | None:
    """An error output when the node has neither a task nor a question (nothing to solve), else None."""
    if node.task.strip() or node.question.strip():
        return None
    return NodeOutput(
        status=NodeStatus.ERROR,
        error=f"node '{node.node_id}' has neither a task nor a question to solve",
    )


def system_message(role: str = DEFAULT_ROLE) -> Message:
    """The system message of an agent call, naming the agent's role."""
    return Message("system", render("agents/system.j2", role=role))


def prompt_messages(template: str, *, system_role: str = DEFAULT_ROLE, **variables: Any) -> list[Message]:
    """A system message naming ``system_role`` plus one user message rendered from ``prompts/<template>``."""
    return [system_message(system_role), Message("user", render(template, **variables))]


@dataclass
class CallLog:
    """The completions one agent run made, so that its output reports their summed usage."""

    completions: list[Completion] = field(default_factory=list)

    async def complete(
        self, ctx: AgentContext, messages: Sequence[Message], config: GenerateConfig
    ) -> Completion:
        """Call the model through the context and remember the completion."""
        completion = await ctx.complete(messages, config)
        self.completions.append(completion)
        return completion

    @property
    def usage(self) -> Usage:
        """The summed usage of every completion so far."""
        return sum_usage(c.usage for c in self.completions)

    def ok(self, answer: str, rationale: str, details: Mapping[str, Any] | None = None) -> NodeOutput:
        """A successful output carrying the usage so far."""
        return NodeOutput(
            answer=answer, rationale=rationale, status=NodeStatus.OK, usage=self.usage, details=details or {}
        )

    def error(self, message: str, details: Mapping[str, Any] | None = None) -> NodeOutput:
        """A failed output carrying the usage so far."""
        return NodeOutput(status=NodeStatus.ERROR, error=message, usage=self.usage, details=details or {})
