"""Dialect "xml": the tag format of the released MAS-Orchestra checkpoints, read tolerantly.

Low DoM: ``<thinking>``, at most one ``<agent>`` whose id is ``<agent_output_id>``, and ``<answer>``
holding either that id (delegate) or the answer itself. High DoM: ``<agent>`` blocks with
``<agent_id>`` and one ``<edge>`` block of ``<from>X</from><to>Y</to>`` pairs; data is passed as
``${X}`` inside ``<agent_input>``; an empty ``<agent_input>`` means the original question.

The reader uses regular expressions over tags, not an XML parser: model output is rarely
well-formed XML (``<`` and ``&`` appear in math, tags are left open). ``<from>``/``<to>`` are paired
by structure - a ``<to>`` closes the nearest open ``<from>`` - so one missing tag costs one edge.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from typing import Any

from masorch.plan._build import TASK_ONLY, flag_value, param_value
from masorch.plan._tags import TagPairs
from masorch.plan.diagnostics import Diagnostic, diag
from masorch.plan.model import AgentSpec, Flow, ParamValue, Plan
from masorch.plan.refs import ID_RE

#: MAS-Orchestra agent names -> masorch kinds (matched case-insensitively).
NAME_TO_KIND: dict[str, str] = {
    "cotagent": "cot",
    "scagent": "sc",
    "debateagent": "debate",
    "reflexionagent": "reflexion",
    "websearchagent": "search",
    "searchagent": "search",
    "pythonagent": "python",
}
#: masorch kinds -> the names the checkpoints were trained on (used when rendering).
KIND_TO_NAME: dict[str, str] = {
    "cot": "CoTAgent",
    "sc": "SCAgent",
    "debate": "DebateAgent",
    "reflexion": "ReflexionAgent",
    "search": "WebSearchAgent",
    "python": "PythonAgent",
}
#: Argument tags renamed to masorch parameter names (and back when rendering).
ARG_TO_PARAM: dict[str, str] = {"debate_roles": "roles", "n_samples": "n"}
PARAM_TO_ARG: dict[str, str] = {v: k for k, v in ARG_TO_PARAM.items()}
#: Argument tags the checkpoints write that no masorch agent takes: dropped with a warning.
IGNORED_ARGS: frozenset[str] = frozenset({"vote_method"})

_TAG_HINT = re.compile(r"<(agent|agent_id|agent_name|agent_output_id|edge|from|answer)>", re.I)
# Tag pairs are found with ``TagPairs`` (linear time), not with ``<(x)>.*?</\1>`` patterns, which
# rescan the rest of the text from every tag left open.
_THINKING = TagPairs("thinking|think", ignore_case=True)
_AGENT_OPEN = re.compile(r"<agent>", re.I)
_AGENT_CLOSE = re.compile(r"</agent>", re.I)
_EDGE_TOKEN = re.compile(r"<(from|to)>([^<]*)</\1>", re.I)
_ARG = TagPairs(r"[A-Za-z_][\w\-]*")
_PARTIAL_TAG = re.compile(r"</?(?:[A-Za-z_]\w*)?")
_ANSWER = TagPairs("answer", ignore_case=True, any_close=True)


def looks_like_xml(text: str) -> bool:
    """Whether ``text`` carries MAS-Orchestra plan tags."""
    return xml_start(text) is not None


def xml_start(text: str) -> int | None:
    """Where the first MAS-Orchestra plan tag in ``text`` starts, or None."""
    if "<" not in text:
        return None
    m = _TAG_HINT.search(text)
    return m.start() if m is not None else None


def strip_thinking(text: str) -> str:
    """``text`` without its closed ``<thinking>``/``<think>`` blocks."""
    return _THINKING.sub(text, "")


def blank_thinking(text: str) -> str:
    """``text`` with each closed ``<thinking>``/``<think>`` block replaced by its line breaks only
    (so line numbers after it stay right)."""
    return _THINKING.sub(text)


def kind_of(name: str) -> str:
    """The masorch kind for an agent name: ``CoTAgent`` -> ``cot``; ``FooAgent`` -> ``foo``."""
    name = name.strip()
    known = NAME_TO_KIND.get(name.lower())
    if known is not None:
        return known
    if name.endswith("Agent") and len(name) > len("Agent"):
        return name[: -len("Agent")].lower()
    return name


_FIELDS = TagPairs("agent_id|agent_output_id|agent_name|agent_description|required_arguments", True)


def _fields(block: str) -> dict[str, str]:
    """The first occurrence of each agent field tag in one block, stripped (one pass over it)."""
    out: dict[str, str] = {}
    for name, content in _FIELDS.items(block):
        out.setdefault(name.lower(), content.strip())
    return out


#: Longest text read as a Python list literal (``['A', 'B']``); longer text stays text.
_MAX_LITERAL_CHARS = 2000


def _value(raw: str) -> ParamValue:
    """An argument's value: JSON when it reads as JSON (numbers, lists, quoted strings), a Python
    list literal in either quoting (``['Judge', 'Critic']``, as the checkpoints' reader accepts),
    else text. Literals are read with :func:`ast.literal_eval`, never evaluated as code."""
    text = raw.strip()
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = _list_literal(text)
    except RecursionError:  # nested too deeply to be a parameter
        return text
    if value is None and text != "null":
        return text
    ok, kept = param_value(value)
    return kept if ok else text


def _list_literal(text: str) -> Any:
    """The Python list or tuple literal ``text`` holds, or None."""
    if len(text) > _MAX_LITERAL_CHARS or not text.startswith(("[", "(")):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (list, tuple)) else None


def _agent(
    block: str, index: int, diags: list[Diagnostic], default_id: str | None = None
) -> tuple[AgentSpec | None, bool]:
    """The agent in one block and whether it is low-DoM style (``agent_output_id``).

    ``default_id`` names a block that has neither ``<agent_id>`` nor ``<agent_output_id>`` (the
    lone agent of a low-DoM plan, whose output id the checkpoints' reader does not need)."""
    fields = _fields(block)
    agent_id = fields.get("agent_id")
    low_style = False
    if not agent_id:
        agent_id = fields.get("agent_output_id") or default_id
        low_style = bool(agent_id)
    name = fields.get("agent_name")
    place = f"agent:{agent_id}" if agent_id else f"xml:agent#{index + 1}"
    missing = [t for t, v in (("agent_id", agent_id), ("agent_name", name)) if not v]
    if missing:
        diags.append(
            diag(
                "missing_tag",
                f"agent block {index + 1} has no <{'> or <'.join(missing)}>",
                "give every <agent> an <agent_id> and an <agent_name>",
                place,
            )
        )
        return None, low_style
    args_text = fields.get("required_arguments")
    task = ""
    task_only = False
    params: dict[str, ParamValue] = {}
    for tag, content in _ARG.items(block if args_text is None else args_text):
        if args_text is None and tag.lower() not in ("agent_input", TASK_ONLY, *ARG_TO_PARAM):
            continue  # without <required_arguments>, only the known argument tags are read
        if tag == "agent_input":
            task = content.strip()
            if task == '""':  # the checkpoints' prompts spell "the original question" as ""
                task = ""
        elif tag == TASK_ONLY:
            task_only = flag_value("<agent>", TASK_ONLY, _value(content), diags, place)
        elif tag in IGNORED_ARGS:
            diags.append(
                diag(
                    "ignored_argument",
                    f"<{tag}> is not used by masorch agents and was dropped",
                    f"leave out <{tag}>",
                    place,
                )
            )
        else:
            params[ARG_TO_PARAM.get(tag, tag)] = _value(content)
    assert agent_id is not None and name is not None
    agent = AgentSpec(id=agent_id, kind=kind_of(name), task=task, params=params, task_only=task_only)
    return agent, low_style


def _default_id(blocks: list[str], outside: str, answers: list[str]) -> str | None:
    """The id of a lone agent block written without one: what ``<answer>`` names, else ``agent``.

    Only a single block with no edges (the low-DoM shape) gets one; elsewhere a missing id stays a
    ``missing_tag`` error, since a lost agent changes the graph."""
    if len(blocks) != 1 or _EDGE_TOKEN.search(outside) is not None:
        return None
    answer = answers[-1].strip() if answers else ""
    return answer if ID_RE.fullmatch(answer) else "agent"


def _blocks(text: str, diags: list[Diagnostic]) -> tuple[list[str], str]:
    """The complete ``<agent>`` blocks and the text outside them (a block cut off by the end is left out)."""
    blocks: list[str] = []
    rest: list[str] = []
    pos = 0
    opens = list(_AGENT_OPEN.finditer(text))
    closes = list(_AGENT_CLOSE.finditer(text))
    close_starts = [c.start() for c in closes]
    for i, m in enumerate(opens):
        if m.start() < pos:
            continue
        rest.append(text[pos : m.start()])
        k = bisect.bisect_left(close_starts, m.end())
        close = closes[k] if k < len(closes) else None
        nxt = opens[i + 1] if i + 1 < len(opens) else None
        if close is None or (nxt is not None and nxt.start() < close.start()):
            end = nxt.start() if nxt is not None else len(text)
            body = text[m.end() : end]
            if nxt is None and _EDGE_TOKEN.search(body) is None and "<edge>" not in body.lower():
                diags.append(
                    diag("truncated", f"the text ends inside agent block {i + 1}", "close it with </agent>")
                )
                pos = len(text)
                break
            diags.append(
                diag(
                    "missing_tag",
                    f"agent block {i + 1} is not closed with </agent>",
                    "close every <agent> with </agent>",
                    f"xml:agent#{i + 1}",
                )
            )
            # An unclosed block ends where edges begin, so its edges are still read.
            edge_at = re.search(r"<edge>|<from>", body, re.I)
            if edge_at is not None:
                end = m.end() + edge_at.start()
            blocks.append(text[m.end() : end])
            pos = end
        else:
            blocks.append(text[m.end() : close.start()])
            pos = close.end()
    rest.append(text[pos:])
    return blocks, "".join(rest)


def _edges(text: str, diags: list[Diagnostic]) -> list[Flow]:
    flows: list[Flow] = []
    pending: str | None = None
    pending_at = 0
    for k, m in enumerate(_EDGE_TOKEN.finditer(text)):
        tag, value = m.group(1).lower(), m.group(2).strip()
        if tag == "from":
            if pending is not None:
                diags.append(_unpaired(f"<from>{pending}</from> has no <to>", pending_at))
            pending, pending_at = value, k
        elif pending is None:
            diags.append(_unpaired(f"<to>{value}</to> has no <from>", k))
        else:
            flows.append(Flow(src=pending, dst=value))
            pending = None
    if pending is not None:
        diags.append(_unpaired(f"<from>{pending}</from> has no <to>", pending_at))
    return flows


def _unpaired(message: str, k: int) -> Diagnostic:
    """An unpaired edge tag; ``k`` counts ``<from>``/``<to>`` tags from 0, reported from 1."""
    return diag(
        "unpaired_edge",
        message,
        "write each edge as <from>SOURCE_ID</from><to>TARGET_ID</to>",
        f"xml:edge-tag#{k + 1}",
    )


def _clip(text: str, limit: int = 40) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def parse_xml(text: str) -> tuple[Plan | None, list[Diagnostic]]:
    """The plan written in MAS-Orchestra tags (None when there are none) and its problems."""
    diags: list[Diagnostic] = []
    body = _THINKING.sub(text, "")
    open_thinking = re.search(r"<(thinking|think)>", body, re.I)
    if open_thinking is not None:
        rest = body[open_thinking.end() :]
        tag_at = xml_start(rest)
        if tag_at is None:
            body = body[: open_thinking.start()]
            diags.append(diag("truncated", "the text ends inside <thinking>", "close it with </thinking>"))
        else:  # "</thinking>" forgotten: the reasoning ends where the first plan tag begins
            body = body[: open_thinking.start()] + rest[tag_at:]
    answers = [content for _, content in _ANSWER.items(body)]
    body = _ANSWER.sub(body, "")
    if re.search(r"<answer>", body, re.I):
        diags.append(diag("truncated", "the text ends inside <answer>", "close it with </answer>"))
    blocks, outside = _blocks(body, diags)
    tail = body.rstrip()
    last_open = tail.rfind("<")
    cut_in_tag = last_open >= 0 and _PARTIAL_TAG.fullmatch(tail, last_open) is not None
    if cut_in_tag and not any(d.code == "truncated" for d in diags):
        diags.append(diag("truncated", "the text ends inside a tag", "finish the last tag"))
    agents: list[AgentSpec] = []
    low_style = False
    default_id = _default_id(blocks, outside, answers)
    for i, block in enumerate(blocks):
        agent, low = _agent(block, i, diags, default_id)
        low_style = low_style or low
        if agent is not None:
            agents.append(agent)
    flows = _edges(outside, diags)
    if not agents and not flows and not answers:
        return None, diags
    final: str | None = None
    ids = {a.id for a in agents}
    if answers:
        answer = answers[-1].strip()
        if not agents:
            final = answer
        elif answer not in ids:
            # As the checkpoints' own reader does: with an agent defined, the plan delegates.
            diags.append(
                diag(
                    "answer_ignored",
                    f"<answer> holds {_clip(answer)!r}, not an agent id; the agents' output is the answer",
                    "put the id of the agent whose output answers the question in <answer>, "
                    "or drop the <agent> to answer directly",
                )
            )
    elif agents and low_style:
        diags.append(
            diag(
                "answer_missing",
                "the plan delegates to an agent but has no <answer>; its agent's output is the answer",
                "end with <answer>AGENT_OUTPUT_ID</answer>",
            )
        )
    return Plan(agents=tuple(agents), flows=tuple(flows), final_answer=final), diags
