"""Canonical text of a plan in each dialect (``parse(render(p, d), d).plan == p``) and a Mermaid graph.

Round-trip holds for plans whose tasks and answers are stripped of surrounding whitespace (the
readers strip them). The XML dialect, like the checkpoints' format itself, cannot carry text holding
its own tags (``</agent_input>`` inside a task), a task that is literally ``""`` (it means empty
there) or a direct answer beside agents (an ``<answer>`` beside agents is ignored).
"""

from __future__ import annotations

import json
from typing import Any

from masorch.plan.model import AgentSpec, Plan
from masorch.plan.parse import Dialect
from masorch.plan.parse_xml import KIND_TO_NAME, PARAM_TO_ARG


def _py(value: Any) -> str:
    """A Python literal for a plan value (strings in double quotes, like JSON)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    raise TypeError(f"not a plan value: {value!r}")


def render_calls(plan: Plan) -> str:
    """The plan as ``create_agent``/``create_flow``/``final_answer`` lines."""
    lines = []
    for a in plan.agents:
        args = [f"id={_py(a.id)}", f"kind={_py(a.kind)}", f"task={_py(a.task)}"]
        args += [f"{k}={_py(v)}" for k, v in a.params.items()]
        args += ["task_only=True"] if a.task_only else []
        lines.append(f"create_agent({', '.join(args)})")
    lines += [f"create_flow({_py(f.src)}, {_py(f.dst)})" for f in plan.flows]
    if plan.final_answer is not None:
        lines.append(f"final_answer({_py(plan.final_answer)})")
    return "\n".join(lines)


def render_json(plan: Plan) -> str:
    """The plan as one JSON object ``{"agents", "flows", "final_answer"}``."""
    obj = {
        "agents": [
            {
                "id": a.id,
                "kind": a.kind,
                "task": a.task,
                **({"params": a.params} if a.params else {}),
                **({"task_only": True} if a.task_only else {}),
            }
            for a in plan.agents
        ],
        "flows": [{"src": f.src, "dst": f.dst} for f in plan.flows],
        "final_answer": plan.final_answer,
    }
    return json.dumps(obj, indent=2, ensure_ascii=False)


def tool_calls(plan: Plan) -> list[dict[str, Any]]:
    """The plan as OpenAI-style tool calls ``[{"name", "arguments"}]`` (arguments as objects)."""
    calls: list[dict[str, Any]] = [
        {
            "name": "create_agent",
            "arguments": {
                "id": a.id,
                "kind": a.kind,
                "task": a.task,
                **a.params,
                **({"task_only": True} if a.task_only else {}),
            },
        }
        for a in plan.agents
    ]
    calls += [{"name": "create_flow", "arguments": {"src": f.src, "dst": f.dst}} for f in plan.flows]
    if plan.final_answer is not None:
        calls.append({"name": "final_answer", "arguments": {"text": plan.final_answer}})
    return calls


def _xml_value(value: Any) -> str:
    if isinstance(value, str):
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            if value == value.strip():
                return value
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


def _description(a: AgentSpec) -> str:
    first = a.task.splitlines()[0] if a.task else "Answer the original question."
    return first if len(first) <= 80 else first[:77] + "..."


def _xml_agent(a: AgentSpec, low: bool) -> str:
    name = KIND_TO_NAME.get(a.kind, a.kind)
    lines = ["<agent>"]
    if not low:
        lines.append(f"  <agent_id>{a.id}</agent_id>")
    lines += [
        f"  <agent_name>{name}</agent_name>",
        f"  <agent_description>{_description(a)}</agent_description>",
        "  <required_arguments>",
        f"    <agent_input>{a.task}</agent_input>",
    ]
    lines += [
        f"    <{PARAM_TO_ARG.get(k, k)}>{_xml_value(v)}</{PARAM_TO_ARG.get(k, k)}>"
        for k, v in a.params.items()
    ]
    lines += ["    <task_only>true</task_only>"] if a.task_only else []
    lines.append("  </required_arguments>")
    if low:
        lines.append(f"  <agent_output_id>{a.id}</agent_output_id>")
    lines.append("</agent>")
    return "\n".join(lines)


def render_xml(plan: Plan) -> str:
    """The plan in MAS-Orchestra tags: low-DoM style for one agent without flows, else high-DoM style."""
    low = len(plan.agents) == 1 and not plan.flows and plan.final_answer is None
    parts = [_xml_agent(a, low) for a in plan.agents]
    if plan.flows:
        pairs = "\n".join(f"  <from>{f.src}</from><to>{f.dst}</to>" for f in plan.flows)
        parts.append(f"<edge>\n{pairs}\n</edge>")
    if low:
        parts.append(f"<answer>{plan.agents[0].id}</answer>")
    elif plan.final_answer is not None:
        parts.append(f"<answer>{plan.final_answer}</answer>")
    return "\n\n".join(parts)


def render(plan: Plan, dialect: Dialect) -> str:
    """The canonical text of ``plan`` in ``dialect``; parsing it gives the same plan back."""
    if dialect == "calls":
        return render_calls(plan)
    if dialect == "json":
        return render_json(plan)
    return render_xml(plan)


def _label(text: str) -> str:
    """Text safe inside a quoted Mermaid label."""
    one = " ".join(text.split())
    if len(one) > 60:
        one = one[:57] + "..."
    return one.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def to_mermaid(plan: Plan) -> str:
    """A Mermaid ``flowchart`` of the plan: one node per agent (kind and task), one arrow per flow."""
    lines = ["flowchart TD"]
    index = {a.id: i for i, a in enumerate(plan.agents)}
    for a in plan.agents:
        task = _label(a.task) if a.task else "(the original question)"
        lines.append(f'  n{index[a.id]}["<b>{_label(a.id)}</b> · {_label(a.kind)}<br/>{task}"]')
    for k, f in enumerate(plan.flows):
        src = f"n{index[f.src]}" if f.src in index else f"missing{k}a"
        dst = f"n{index[f.dst]}" if f.dst in index else f"missing{k}b"
        for node, name in ((src, f.src), (dst, f.dst)):
            if node.startswith("missing"):
                lines.append(f'  {node}["{_label(name)} (missing)"]')
        lines.append(f"  {src} --> {dst}")
    if plan.final_answer is not None:
        lines.append(f'  answer(["final answer: {_label(plan.final_answer)}"])')
    return "\n".join(lines)
