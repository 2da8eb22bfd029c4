"""Turn the calls read from any dialect into a ``Plan``: one place for argument rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from masorch.plan.diagnostics import Diagnostic, diag
from masorch.plan.model import AgentSpec, Flow, ParamValue, Plan

CREATE_AGENT = "create_agent"
CREATE_FLOW = "create_flow"
FINAL_ANSWER = "final_answer"
KNOWN_CALLS = (CREATE_AGENT, CREATE_FLOW, FINAL_ANSWER)

_AGENT_FIELDS = ("id", "kind", "task")
#: The ``create_agent`` keyword that asks for the task alone (no original question shown).
TASK_ONLY = "task_only"
_FLOW_ALIASES = {"src": "src", "dst": "dst", "source": "src", "target": "dst"}
_ANSWER_ALIASES = ("text", "answer")


class _Unreadable:
    """Stands for an argument already reported as unreadable, so no second diagnostic follows."""

    def __repr__(self) -> str:
        return "<unreadable>"


#: Placeholder for an argument that could not be read (reported once, where it was read).
UNREADABLE: Any = _Unreadable()


@dataclass(slots=True)
class RawCall:
    """One call as written: its name, literal positional and keyword arguments, and its place."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    where: str | None = None


#: Deepest list nesting a parameter value may have; deeper values are refused before they can
#: exhaust the interpreter's recursion limit in repr, equality or serialisation.
MAX_VALUE_DEPTH = 8


def param_value(value: Any, depth: int = 0) -> tuple[bool, ParamValue]:
    """Whether ``value`` is a plan literal (tuples become lists), and the value to keep."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return True, value
    if isinstance(value, (list, tuple)) and depth < MAX_VALUE_DEPTH:
        out: list[Any] = []
        for item in value:
            ok, v = param_value(item, depth + 1)
            if not ok:
                return False, None
            out.append(v)
        return True, out
    return False, None


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:
        return "a deeply nested value"
    except ValueError:  # an integer too long to print
        return "a value holding a number too long to print"
    return text if len(text) <= 60 else text[:57] + "..."


def _bind(call: RawCall, names: tuple[str, ...], diags: list[Diagnostic]) -> dict[str, Any] | None:
    """Positional arguments bound to ``names``, merged with keywords; None when they clash."""
    if len(call.args) > len(names):
        diags.append(
            diag(
                "bad_argument",
                f"{call.name} takes at most {len(names)} positional arguments, got {len(call.args)}",
                f"pass extra values as keywords, e.g. {call.name}({', '.join(n + '=...' for n in names)})",
                call.where,
            )
        )
        return None
    bound = dict(zip(names, call.args, strict=False))
    for key, value in call.kwargs.items():
        if key in bound:
            diags.append(
                diag(
                    "bad_argument",
                    f"{call.name} got {key!r} twice (positionally and as a keyword)",
                    f"give {key} once",
                    call.where,
                )
            )
            return None
        bound[key] = value
    return bound


def _text(call: RawCall, key: str, value: Any, diags: list[Diagnostic], required: bool) -> str | None:
    if value is UNREADABLE:
        return None
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        what = "is missing" if value is None else f"must be a string, got {value!r}"
        diags.append(
            diag("bad_argument", f"{call.name}: {key} {what}", f'give {key}="..." as a string', call.where)
        )
        return None
    return value.strip()


def flag_value(name: str, key: str, value: Any, diags: list[Diagnostic], where: str | None) -> bool:
    """A boolean argument of ``name`` (``True``/``False``, JSON ``true``/``false``); else a diagnostic."""
    if value is UNREADABLE:
        return False
    if not isinstance(value, bool):
        diags.append(
            diag(
                "bad_argument",
                f"{name}: {key} must be True or False, got {_short(value)}",
                f"write {key}=True, or leave it out",
                where,
            )
        )
        return False
    return value


def _agent(call: RawCall, diags: list[Diagnostic]) -> AgentSpec | None:
    bound = _bind(call, _AGENT_FIELDS, diags)
    if bound is None:
        return None
    agent_id = _text(call, "id", bound.pop("id", None), diags, required=True)
    kind = _text(call, "kind", bound.pop("kind", None), diags, required=True)
    task = _text(call, "task", bound.pop("task", None), diags, required=False)
    task_only = flag_value(call.name, TASK_ONLY, bound.pop(TASK_ONLY, False), diags, call.where)
    params: dict[str, ParamValue] = {}
    for key, value in bound.items():
        if value is UNREADABLE:
            continue
        ok, kept = param_value(value)
        if not ok:
            diags.append(
                diag(
                    "bad_argument",
                    f"parameter {key} must be a string, number, boolean or list (nested at most "
                    f"{MAX_VALUE_DEPTH} deep), got {_short(value)}",
                    f"give {key} a literal value",
                    call.where if agent_id is None else f"agent:{agent_id}",
                )
            )
            continue
        params[key] = kept
    if agent_id is None or kind is None:
        return None
    return AgentSpec(id=agent_id, kind=kind, task=task or "", params=params, task_only=task_only)


def _flow(call: RawCall, diags: list[Diagnostic]) -> Flow | None:
    args = call.args
    if not call.kwargs and len(args) == 2 and type(args[0]) is str and type(args[1]) is str:
        return Flow(src=args[0].strip(), dst=args[1].strip())  # the common case, checked directly
    bound: dict[str, Any] = {}
    for key, value in call.kwargs.items():
        canon = _FLOW_ALIASES.get(key)
        if canon is None or canon in bound:
            problem = f"has no argument {key!r}" if canon is None else f"got {canon} twice"
            hint = 'write create_flow("source_id", "target_id")'
            diags.append(diag("bad_argument", f"create_flow {problem}", hint, call.where))
            return None
        bound[canon] = value
    if call.args:
        merged = _bind(RawCall(call.name, call.args, bound, call.where), ("src", "dst"), diags)
        if merged is None:
            return None
        bound = merged
    src = _text(call, "src", bound.get("src"), diags, required=True)
    dst = _text(call, "dst", bound.get("dst"), diags, required=True)
    if src is None or dst is None:
        return None
    return Flow(src=src, dst=dst)


def _answer(call: RawCall, diags: list[Diagnostic]) -> str | None:
    extra = [k for k in call.kwargs if k not in _ANSWER_ALIASES]
    values = list(call.args) + [v for k, v in call.kwargs.items() if k in _ANSWER_ALIASES]
    if extra or len(values) != 1:
        diags.append(
            diag(
                "bad_argument",
                f"final_answer takes exactly one argument, got {len(values) + len(extra)}",
                'write final_answer("the answer")',
                call.where,
            )
        )
        return None
    value = values[0]
    if value is UNREADABLE:
        return None
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
        diags.append(
            diag(
                "bad_argument",
                f"final_answer needs text or a number, got {value!r}",
                'write final_answer("the answer")',
                call.where,
            )
        )
        return None
    return value.strip() if isinstance(value, str) else str(value)


def build_plan(calls: Iterable[RawCall]) -> tuple[Plan, list[Diagnostic]]:
    """The plan described by ``calls`` and every problem with their arguments."""
    diags: list[Diagnostic] = []
    agents: list[AgentSpec] = []
    flows: list[Flow] = []
    answer: str | None = None
    for call in calls:
        if call.name == CREATE_AGENT:
            agent = _agent(call, diags)
            if agent is not None:
                agents.append(agent)
        elif call.name == CREATE_FLOW:
            flow = _flow(call, diags)
            if flow is not None:
                flows.append(flow)
        elif call.name == FINAL_ANSWER:
            text = _answer(call, diags)
            if text is None:
                continue
            if answer is not None:
                diags.append(
                    diag(
                        "multiple_answers",
                        "final_answer is given more than once; the first is kept",
                        "give one final_answer",
                        call.where,
                    )
                )
                continue
            answer = text
        else:
            diags.append(
                diag(
                    "unknown_call",
                    f"{call.name}(...) is not part of the plan language and was ignored",
                    "use create_agent, create_flow or final_answer",
                    call.where,
                )
            )
    return Plan(agents=tuple(agents), flows=tuple(flows), final_answer=answer), diags
