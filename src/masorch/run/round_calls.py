"""The tools of the multi-round mode and what becomes of each call: checked, then run or refused.

Each sub-agent kind is one tool (its arguments: ``task``, optionally ``model`` from the pool, and
the kind's typed parameters), plus ``final_answer``. Every call a round makes ends with exactly one
:class:`CallOutcome` whose status is one of :data:`TOOL_STATUSES`, so nothing the orchestrator asks
for is dropped silently: ``REJECTED`` (over the per-round limit, an unknown tool, ``final_answer``
beside other calls), ``FORMAT_ERR`` (arguments that are not a JSON object, a bad parameter with
the validator's hint, a model not in the pool), ``BUDGET`` (not run: the run's units or calls are
spent), or the run's outcome: ``OK``, ``EXEC_ERR``, ``TIMEOUT``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from masorch.agents.answer import boxed_answer, extract_answer
from masorch.agents.base import NodeOutput, NodeStatus
from masorch.agents.common import tail
from masorch.backends.base import ToolCall, ToolSpec
from masorch.backends.chat import hermes_block_count
from masorch.errors import UsageError
from masorch.plan import AgentSpec, DoM, Plan, ValidatedPlan, validate
from masorch.plan.catalogue import Catalogue
from masorch.plan.parse_json import read_json_calls
from masorch.run.orchestrate import param_schema
from masorch.run.trajectory import FINAL_TOOL, CallOutcome, ToolStatus

#: Cost units of one call of each tool (ParaManager-style tool costs): a rough price of what the
#: tool spends, so that the orchestrator can weigh a cheap reasoner against an ensemble. A kind not
#: listed costs :data:`DEFAULT_UNITS`. ``System.tool_costs`` overrides entries.
DEFAULT_TOOL_COSTS: Mapping[str, float] = MappingProxyType(
    {
        "cot": 1.0,
        "review": 1.0,
        "search": 2.0,
        "python": 2.0,
        "reflexion": 3.0,
        "debate": 4.0,
        "sc": 5.0,
        FINAL_TOOL: 0.0,
    }
)
DEFAULT_UNITS = 1.0

#: The paper's names of the agent tools, shown to the orchestrator beside our kind names.
TOOL_TITLES: Mapping[str, str] = MappingProxyType(
    {
        "cot": "Standard Reasoner",
        "review": "Critical Reviewer",
        "python": "Code Reasoner",
        "search": "Knowledge Searcher",
        "sc": "Ensemble Solver",
    }
)

_STATUS_OF_NODE: Mapping[NodeStatus, ToolStatus] = MappingProxyType(
    {
        NodeStatus.OK: "OK",
        NodeStatus.ERROR: "EXEC_ERR",
        NodeStatus.TIMEOUT: "TIMEOUT",
        NodeStatus.BUDGET: "BUDGET",
        NodeStatus.SKIPPED: "EXEC_ERR",
    }
)


def tool_costs(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The cost table: :data:`DEFAULT_TOOL_COSTS` with ``overrides`` applied.

    >>> tool_costs({"cot": 0.5})["cot"], tool_costs()["sc"]
    (0.5, 5.0)
    """
    return {**DEFAULT_TOOL_COSTS, **(overrides or {})}


def check_tool_costs(costs: Mapping[str, float], kinds: Collection[str]) -> None:
    """A UsageError when ``costs`` prices a tool that is neither one of ``kinds`` nor a built-in
    tool: a typo would otherwise leave the intended tool at its default price, silently.

    >>> check_tool_costs({"sc": 3.0}, ["cot"])
    >>> check_tool_costs({"pyhton": 3.0}, ["cot", "python"])
    Traceback (most recent call last):
    masorch.errors.UsageError: tool_costs names unknown tools: pyhton (hint: did you mean 'python'? ...)
    """
    known = sorted({*kinds, *DEFAULT_TOOL_COSTS})
    unknown = sorted(set(costs) - set(known))
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = (f"did you mean {close[0]!r}? " if close else "") + f"the tools: {', '.join(known)}"
        raise UsageError(f"tool_costs names unknown tools: {', '.join(unknown)}", hint=hint)


def units_of(tool: str, costs: Mapping[str, float]) -> float:
    """The cost in units of one call of ``tool``."""
    return float(costs.get(tool, DEFAULT_UNITS))


def tool_specs(
    catalogue: Catalogue, *, pool: Mapping[str, str] | None = None, costs: Mapping[str, float] | None = None
) -> tuple[ToolSpec, ...]:
    """One tool per sub-agent kind (task, model, typed parameters), plus ``final_answer``.

    ``pool`` maps the pool's model names to their descriptions; with one, each tool takes an
    optional ``model`` naming one of them.
    """
    table = tool_costs(costs)
    tools = []
    for sig in catalogue.values():
        task = "what this agent must do, written out in full with every number and fact it needs"
        props: dict[str, Any] = {"task": {"type": "string", "description": task}}
        if pool:
            props["model"] = {
                "type": "string",
                "enum": list(pool),
                "description": "the pool model to run this call (default: the sub-agent model)",
            }
        for p in sig.params:
            props[p.name] = {**param_schema(p), "description": p.description, "default": p.default}
        title = TOOL_TITLES.get(sig.kind)
        summary = f"{title}. {sig.summary}" if title else sig.summary
        tools.append(
            ToolSpec(
                name=sig.kind,
                description=f"{summary} Costs {units_of(sig.kind, table):g} units.",
                parameters={"type": "object", "properties": props, "required": ["task"]},
            )
        )
    answer = {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "description": "the final answer"},
            "synthesize": {
                "type": "boolean",
                "description": "true, with no answer: the synthesis model writes it from the results",
            },
        },
    }
    description = "Give the final answer to the question, or ask for it to be synthesized from the results."
    tools.append(ToolSpec(name=FINAL_TOOL, description=description, parameters=answer))
    return tuple(tools)


@dataclass(frozen=True)
class CheckedCall:
    """A call that passed the checks: its node, validated one-node plan and pool model name."""

    round: int
    call_id: str
    node: str
    tool: str
    task: str
    plan: ValidatedPlan
    pool_name: str = ""

    @property
    def spec(self) -> AgentSpec:
        """The call as a plan node."""
        return self.plan.plan.agents[0]

    def refused(self, status: ToolStatus, error: str) -> CallOutcome:
        """The outcome of this call when it is not run (``BUDGET``)."""
        return CallOutcome(
            self.round, self.call_id, self.node, self.tool, status, task=self.task, error=error
        )

    def ran(self, out: NodeOutput, *, model: str, units: float, wall_s: float) -> CallOutcome:
        """The outcome of this call once it ran, from its node's output."""
        status = _STATUS_OF_NODE[out.status]
        error = out.error
        if status == "EXEC_ERR" and "stderr" in out.details:
            # The Code Reasoner's last program: how it ended and its output, verbatim (not the
            # agent's summary of every attempt, which quotes the same stderr).
            d = out.details
            ended = f"the last program {d.get('exit', 'failed')}"
            stdout, stderr = (tail(str(d.get(name, "")), TOOL_STREAM_CHARS) for name in ("stdout", "stderr"))
            error = f"{ended}\nstdout:\n{stdout}\nstderr:\n{stderr}".rstrip()
        return CallOutcome(
            round=self.round,
            call_id=self.call_id,
            node=self.node,
            tool=self.tool,
            status=status,
            task=self.task,
            result=out.answer if status == "OK" else "",
            error="" if status == "OK" else error,
            model=model,
            pool_name=self.pool_name,
            units=units,
            wall_s=wall_s,
            output=out,
        )


#: The characters of a failed program's stdout and of its stderr a tool message keeps (their ends).
TOOL_STREAM_CHARS = 2000


def call_ids(calls: Sequence[ToolCall], round_no: int) -> tuple[ToolCall, ...]:
    """The calls with ids that are set and distinct (``call_rRcI`` where the model gave none or a
    repeated one, suffixed where the model used that id too), so that each result message can name
    its call.

    >>> [c.id for c in call_ids([ToolCall("cot", "{}", id="call_r1c2"), ToolCall("sc", "{}")], 1)]
    ['call_r1c2', 'call_r1c2_2']
    """
    seen: set[str] = set()
    out = []
    for i, call in enumerate(calls, start=1):
        cid = call.id
        if not cid or cid in seen:
            cid, n = f"call_r{round_no}c{i}", 1
            while cid in seen or any(c.id == cid for c in calls[i:]):
                n += 1
                cid = f"call_r{round_no}c{i}_{n}"
        seen.add(cid)
        out.append(ToolCall(call.name, call.arguments, id=cid))
    return tuple(out)


#: Why a task cannot hold ``${``, and what to do instead.
_NO_REFS = (
    "which would reference another agent's answer; a call sees only its own task "
    "(hint: write what it needs from earlier results into the task as text)"
)

#: The rounds mode's hints for the plan validator's diagnostics whose own hint speaks of plans.
_ROUND_HINTS = {"task_too_long": "shorten the task: give only what the agent needs from earlier results"}


def check_calls(
    calls: Sequence[ToolCall],
    *,
    round_no: int,
    catalogue: Catalogue,
    pool: Sequence[str],
    max_calls: int,
) -> list[CheckedCall | CallOutcome]:
    """Each call of one round checked, in order: a :class:`CheckedCall` to run or its refusal.

    A round's ``final_answer`` is handled by the caller when it is the round's only call; here it
    is refused (it cannot share a round with tool calls).
    """
    out: list[CheckedCall | CallOutcome] = []
    for i, call in enumerate(calls, start=1):
        node = f"r{round_no}c{i}"

        def refuse(
            status: ToolStatus, error: str, task: str = "", _call: ToolCall = call, _node: str = node
        ) -> None:
            out.append(CallOutcome(round_no, _call.id, _node, _call.name, status, task=task, error=error))

        if i > max_calls:
            refuse("REJECTED", f"at most {max_calls} calls per round; this was call {i}, not run")
            continue
        if call.name == FINAL_TOOL:
            refuse("REJECTED", "final_answer must be the only call of its round; it was not taken")
            continue
        if call.name not in catalogue:
            refuse(
                "REJECTED", f"unknown tool {call.name!r}; the tools are: {', '.join(catalogue)}, {FINAL_TOOL}"
            )
            continue
        args = arguments(call)
        if args is None:
            refuse("FORMAT_ERR", 'the arguments are not a JSON object (hint: send {"task": "...", ...})')
            continue
        task = args.pop("task", "")
        pool_name = args.pop("model", "") or ""
        if not isinstance(task, str) or not task.strip():
            refuse("FORMAT_ERR", "missing task (hint: give a self-contained subtask as the string `task`)")
            continue
        if pool_name and (not isinstance(pool_name, str) or pool_name not in pool):
            names = ", ".join(pool) if pool else "none: leave `model` out"
            refuse("FORMAT_ERR", f"unknown model {pool_name!r} (hint: the pool's models are {names})", task)
            continue
        if "${" in task:  # the plan language's reference: no call of a round can name another
            refuse("FORMAT_ERR", f"the task holds `${{`, {_NO_REFS}", task)
            continue
        try:
            spec = AgentSpec(id=node, kind=call.name, task=task, params=args)
        except ValidationError:  # a value that is no plan literal: an object, a list of objects
            bad = ", ".join(sorted(args)) or "the arguments"
            refuse("FORMAT_ERR", f"{bad}: a value is not a string, number, boolean or list of them", task)
            continue
        checked = validate(Plan(agents=(spec,)), DoM.LOW, catalogue)
        if checked.validated is None:
            errors = [d for d in checked.diagnostics if d.is_error]
            problems = "; ".join(f"{d.message} (hint: {_ROUND_HINTS.get(d.code, d.hint)})" for d in errors)
            refuse("FORMAT_ERR", problems, task)
            continue
        out.append(CheckedCall(round_no, call.id, node, call.name, task, checked.validated, str(pool_name)))
    return out


def calls_in_text(text: str) -> tuple[tuple[ToolCall, ...], str]:
    """Tool calls written as JSON in a reply's text, and what was wrong reading them ("" if nothing).

    The fallback for servers that return the model's tool calls as text instead of native ones:
    Hermes ``<tool_call>`` tags, a list of ``{"name", "arguments"}`` objects, a ``{"tool_calls":
    [...]}`` message (the plan language's JSON reader, :func:`masorch.plan.parse_json.read_json_calls`).

    >>> calls, problem = calls_in_text('<tool_call>{"name": "cot", "arguments": {"task": "t"}}</tool_call>')
    >>> [(c.name, c.arguments) for c in calls], problem
    ([('cot', '{"task": "t"}')], '')
    """
    raw, diagnostics, _found = read_json_calls(text)
    calls = tuple(ToolCall(c.name, json.dumps(c.kwargs), id="") for c in raw if not c.args)
    problems = [f"{d.message} (hint: {d.hint})" for d in diagnostics if d.is_error]
    return calls, "; ".join(problems)


def unreadable_calls(text: str, read: int, problem: str) -> int:
    """How many calls a turn wrote as ``text`` that could not be read, ``read`` of them having been:
    the ``<tool_call>`` blocks beyond those read, and at least one when nothing was read and reading
    reported a ``problem`` (beside calls that were read, a problem may be prose such as ``\\[x^2\\]``).

    >>> two = '<tool_call>{"name": "cot", "arguments": {}}</tool_call><tool_call>{bad</tool_call>'
    >>> unreadable_calls(two, 1, "")
    1
    >>> unreadable_calls("I will think first.", 0, ""), unreadable_calls("[{oops", 0, "not JSON")
    (0, 1)
    >>> unreadable_calls(two.split("<tool_call>{bad")[0] + " so [0, 1) holds", 1, "not JSON")
    0
    """
    return max(hermes_block_count(text) - read, 1 if problem and not read else 0)


#: Where calls written as text begin: a Hermes tag, a code fence, or a JSON call object or list.
_CALLS_START = re.compile(r'<tool_call>|```|[\[{]\s*\{?\s*"(?:name|tool_calls|agents|final_answer)"')


def text_before_calls(text: str) -> str:
    """The reasoning before the calls a reply wrote as text ("" when it starts with them), so that a
    turn whose calls were read from its text is kept once, as calls.

    >>> text_before_calls('Two parts.\\n<tool_call>{"name": "cot", "arguments": {}}</tool_call>')
    'Two parts.'
    >>> text_before_calls('First add. [{"name": "cot", "arguments": {"task": "t"}}]')
    'First add.'
    >>> text_before_calls('{"name": "final_answer", "arguments": {"answer": "4"}}')
    ''
    """
    found = _CALLS_START.search(text)
    return text[: found.start()].rstrip() if found else ""


#: The tool message that answers ``final_answer`` with ``synthesize``: the synthesis follows.
SYNTHESIS_ACK = "status: OK\nThe synthesis model writes the final answer from this trajectory."


def synthesis_answer(text: str) -> str:
    """The answer in a synthesis reply, or "" when it holds none.

    A boxed answer; else a ``final_answer`` call written as text; else, when the reply holds no
    tool call (not even a ``<tool_call>`` tag it could not read), its ``Answer:`` line or last line
    (a code fence alone is no answer).

    >>> synthesis_answer(r"They agree. \\boxed{7}")
    '7'
    >>> synthesis_answer('{"name": "final_answer", "arguments": {"answer": "7"}}')
    '7'
    >>> synthesis_answer('```json\\n{"name": "cot", "arguments": {"task": "t"}}\\n```')
    ''
    >>> synthesis_answer("<tool_call>{bad</tool_call> and [{oops"), synthesis_answer("x in [0, 1)")
    ('', 'x in [0, 1)')
    """
    boxed = boxed_answer(text)
    if boxed is not None:
        return boxed.strip()
    calls, _problem = calls_in_text(text)
    if calls:
        answers = [final_answer(c) for c in calls if c.name == FINAL_TOOL]
        return next((a for a in reversed(answers) if a), "")
    if hermes_block_count(text):  # a call it could not read is no answer
        return ""
    return extract_answer(text).strip("`").strip()


def wants_synthesis(call: ToolCall) -> bool:
    """True when a ``final_answer`` call asks the synthesis model to write the answer.

    >>> wants_synthesis(ToolCall("final_answer", '{"synthesize": true}'))
    True
    """
    args = arguments(call)
    return args is not None and args.get("synthesize") is True


def final_answer(call: ToolCall) -> str | None:
    """The answer of a ``final_answer`` call, or None when its arguments hold no answer text."""
    args = arguments(call)
    answer = None if args is None else args.get("answer")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    return answer.strip() if isinstance(answer, str) and answer.strip() else None


def arguments(call: ToolCall) -> dict[str, Any] | None:
    """A tool call's JSON arguments as a dict, or None when they are not a JSON object."""
    try:
        value = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):  # not JSON, a number too long to convert, or nested too deeply
        return None
    return value if isinstance(value, dict) else None
