"""The record of a multi-round run: each round's calls and their outcomes, the whole conversation,
and its export as one chat-format record (messages with tool calls and tool results) for SFT.

>>> from masorch.backends.base import Message
>>> t = Trajectory("What is 2+2?", (Message("user", "What is 2+2?"),), answer="4", ended_by="final_answer")
>>> t.to_chat()["messages"]
[{'role': 'user', 'content': 'What is 2+2?'}]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from masorch.agents.base import NodeOutput
from masorch.agents.common import tail
from masorch.backends.base import Message, ToolSpec
from masorch.backends.chat import messages_payload, tools_payload
from masorch.prompts import render

ToolStatus = Literal["OK", "EXEC_ERR", "TIMEOUT", "BUDGET", "FORMAT_ERR", "REJECTED"]
#: The fixed set of statuses a tool call can end with.
TOOL_STATUSES: tuple[ToolStatus, ...] = get_args(ToolStatus)
#: The statuses of a call that was dispatched to its tool (it ran, or was made to fail as if it had:
#: an injected fault); ``BUDGET``, ``FORMAT_ERR`` and ``REJECTED`` calls never left the orchestrator.
RAN_STATUSES: tuple[ToolStatus, ...] = ("OK", "EXEC_ERR", "TIMEOUT")
#: The tool that ends a run with the orchestrator's answer (not a sub-agent).
FINAL_TOOL = "final_answer"

#: How a multi-round run ended: the orchestrator's final_answer, the synthesis call at the round
#: cap, or a run status that stopped it (an orchestrator error, the budget, the deadline).
EndedBy = Literal["final_answer", "synthesis", "error", "budget", "timeout"]

#: Version of the :meth:`Trajectory.to_chat` record layout.
CHAT_RECORD_VERSION = 1


#: The characters of a call's result or error its tool message keeps (the end, after "...").
TOOL_MESSAGE_CHARS = 6000


@dataclass(frozen=True)
class CallOutcome:
    """How one tool call ended: its status, the result text (OK) or error, model, units and time.

    ``call_id`` is the tool call's id (the ``tool_call_id`` of its result message); ``node`` the
    id it ran under (``r2c1``: round 2, call 1), set also when it was refused; ``model`` the model
    id that ran it ("" when it did not run) and ``pool_name`` the pool entry the call chose;
    ``output`` the sub-agent's output when it ran. ``injected`` marks a failure made on purpose
    (:mod:`masorch.run.faults`): the call did not run, its message reads as a real failure.
    """

    round: int
    call_id: str
    node: str
    tool: str
    status: ToolStatus
    task: str = ""
    result: str = ""
    error: str = ""
    model: str = ""
    pool_name: str = ""
    units: float = 0.0
    wall_s: float = 0.0
    output: NodeOutput | None = field(default=None, compare=False, repr=False)
    injected: bool = False

    @property
    def ok(self) -> bool:
        """True when the call ran and gave a result."""
        return self.status == "OK"

    def message_text(self) -> str:
        """The content of the ``tool`` message that returns this outcome to the orchestrator: its
        result or error cut to their last :data:`TOOL_MESSAGE_CHARS` characters (four calls a
        round over twelve rounds all stay in the orchestrator's context)."""
        return render(
            "rounds/tool_result.j2",
            outcome=self,
            result=tail(self.result, TOOL_MESSAGE_CHARS),
            error=tail(self.error, TOOL_MESSAGE_CHARS),
        )

    def to_dict(self) -> dict[str, Any]:
        """The outcome as JSON-ready data (the sub-agent's output left out)."""
        return {
            "round": self.round,
            "call_id": self.call_id,
            "node": self.node,
            "tool": self.tool,
            "status": self.status,
            "task": self.task,
            "result": self.result,
            "error": self.error,
            "model": self.model,
            "pool_name": self.pool_name,
            "units": self.units,
            "wall_s": round(self.wall_s, 4),
            "injected": self.injected,
        }


@dataclass(frozen=True)
class RoundRecord:
    """One round: its number, the outcome of each call in call order, its wall time (the
    orchestrator's turn and the calls together), and how many calls its turn wrote that could not be
    read (``unreadable``: they have no outcome)."""

    number: int
    calls: tuple[CallOutcome, ...] = ()
    wall_s: float = 0.0
    unreadable: int = 0


@dataclass(frozen=True)
class Trajectory:
    """A whole multi-round run: the conversation the orchestrator saw and wrote, the tools it was
    offered, the rounds, the answer and how the run ended."""

    question: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    rounds: tuple[RoundRecord, ...] = ()
    answer: str = ""
    ended_by: EndedBy = "error"
    #: the orchestrator's own ``final_answer`` call was accepted: an answer, or a request for the
    #: synthesis (``ended_by`` is then ``synthesis``, as at the round cap, where this is False)
    final_call: bool = False
    #: calls the turn that ended the run (its ``final_answer``) wrote beside it that could not be read
    final_unreadable: int = 0

    @property
    def calls(self) -> tuple[CallOutcome, ...]:
        """Every call of every round, in order."""
        return tuple(c for r in self.rounds for c in r.calls)

    @property
    def units(self) -> float:
        """The cost units the run's calls spent."""
        return sum(c.units for c in self.calls)

    def statuses(self) -> dict[str, int]:
        """How many calls ended with each status (statuses that never occurred left out)."""
        counts = {s: 0 for s in TOOL_STATUSES}
        for call in self.calls:
            counts[call.status] += 1
        return {s: n for s, n in counts.items() if n}

    def tools_ran(self) -> dict[str, int]:
        """How many calls of each sub-agent tool ran (:data:`RAN_STATUSES`; ``final_answer`` is not one).

        >>> ok = CallOutcome(round=1, call_id="a", node="r1c1", tool="python", status="OK")
        >>> bad = CallOutcome(round=1, call_id="b", node="r1c2", tool="cot", status="FORMAT_ERR")
        >>> Trajectory("q", (), rounds=(RoundRecord(1, (ok, bad)),)).tools_ran()
        {'python': 1}
        """
        counts: dict[str, int] = {}
        for call in self.calls:
            if call.tool != FINAL_TOOL and call.status in RAN_STATUSES:
                counts[call.tool] = counts.get(call.tool, 0) + 1
        return counts

    @property
    def rounds_without_calls(self) -> int:
        """Rounds in which the orchestrator's turn held no call that could be read."""
        return sum(1 for r in self.rounds if not r.calls)

    @property
    def undelivered_calls(self) -> int:
        """Calls the orchestrator meant but that never reached a tool: in each round, the calls its
        turn wrote that could not be read, or one if its turn held no readable call and none that
        could not be read (a prose turn); plus those beside the ``final_answer`` that ended the run.

        >>> ok = CallOutcome(round=1, call_id="a", node="r1c1", tool="cot", status="OK")
        >>> rounds = (RoundRecord(1, (ok,), unreadable=1), RoundRecord(2))
        >>> Trajectory("q", (), rounds=rounds).undelivered_calls
        2
        """
        return sum(max(r.unreadable, 0 if r.calls else 1) for r in self.rounds) + self.final_unreadable

    def to_chat(self) -> dict[str, Any]:
        """The trajectory as one chat-format record: ``messages`` (OpenAI format: the assistant's
        ``tool_calls`` and each ``tool`` result with its ``tool_call_id``), the ``tools`` offered,
        and ``meta`` (answer, how the run ended, rounds, calls per status, units)."""
        return {
            "version": CHAT_RECORD_VERSION,
            "messages": messages_payload(self.messages),
            "tools": tools_payload(self.tools),
            "meta": {
                "question": self.question,
                "answer": self.answer,
                "ended_by": self.ended_by,
                "rounds": len(self.rounds),
                "calls": [c.to_dict() for c in self.calls],
                "statuses": self.statuses(),
                "units": self.units,
            },
        }
