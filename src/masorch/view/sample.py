"""One run's events as what the sample page draws: the plan graph, the timeline, the calls and the rounds.

Pure: a function of the events. Times are seconds from the run's start. A node's bar runs from its
``node_started`` to its ``node_finished`` event (to the last event seen while it still runs); a call's
bar ends at its ``llm_call`` event and starts ``latency_s`` before. The critical path is the chain of
plan edges with the largest summed node time: the wall time a run cannot go below.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from masorch.plan.graph import topological_order
from masorch.plan.refs import find_refs
from masorch.trace import events as ev


def sample_view(events: Sequence[ev.Event]) -> dict[str, Any]:
    """The page data of one run: its start, plans, graph, timeline, calls, rounds and result."""
    if not events:
        return {"found": False}
    t0 = min(e.ts for e in events)
    started = next((e for e in events if isinstance(e, ev.RunStarted)), None)
    finished = next((e for e in events if isinstance(e, ev.RunFinished)), None)
    plans = [e for e in events if isinstance(e, ev.PlanParsed | ev.PlanRejected)]
    mode = started.mode if started is not None else ""
    # the multi-round modes: "rounds" in older traces, "mas:rounds" / "mas:rounds-serial" now
    rounds = mode == "rounds" or mode.startswith("mas:rounds")
    nodes = _nodes(events, t0)
    calls = _calls(events, t0)
    graph = _graph(plans, nodes, rounds=rounds)
    return {
        "found": True,
        "run_id": events[0].run_id,
        "run": None if started is None else started.model_dump(exclude={"schema_version", "type"}),
        "plans": [
            {
                "attempt": p.attempt,
                "dialect": p.dialect,
                "text": p.text,
                "valid": isinstance(p, ev.PlanParsed),
                "diagnostics": p.diagnostics,
                "t": p.ts - t0,
            }
            for p in plans
        ],
        "graph": graph,
        "timeline": _timeline(graph["nodes"], calls),
        "calls": calls,
        "rounds": _rounds(plans, nodes, events) if rounds else [],
        "result": None if finished is None else finished.model_dump(exclude={"schema_version", "type"}),
        "wall_s": max(e.ts for e in events) - t0,
    }


def _nodes(events: Sequence[ev.Event], t0: float) -> dict[str, dict[str, Any]]:
    """Each node's start, end, status, answer and usage, from its node events."""
    last = max(e.ts for e in events) - t0
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        if isinstance(e, ev.NodeStarted):
            out[e.node] = {
                "id": e.node,
                "kind": e.kind,
                "task": e.task,
                "params": e.params,
                "start": e.ts - t0,
                "end": last,
                "status": "running",
            }
        elif isinstance(e, ev.NodeFinished):
            node = out.setdefault(e.node, {"id": e.node, "kind": "", "task": "", "params": {}, "start": None})
            node.update(
                end=e.ts - t0,
                status=e.status,
                answer=e.answer,
                error=e.error,
                usage=e.usage.model_dump(),
                wall_s=e.wall_s,
            )
            if node["start"] is None:  # a node skipped before it started
                node["start"] = node["end"]
    return out


def _calls(events: Sequence[ev.Event], t0: float) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for e in events:
        if isinstance(e, ev.LlmCall):
            end = e.ts - t0
            call = e.model_dump(exclude={"schema_version", "type", "run_id", "ts"})
            call.update(index=len(calls), start=max(0.0, end - e.latency_s), end=end)
            calls.append(call)
    return calls


def _plan_of(plans: Sequence[ev.PlanParsed | ev.PlanRejected], rounds: bool) -> tuple[list[Any], list[Any]]:
    """The agents and flows to draw: the accepted plan, or every round's calls in the rounds mode."""
    parsed = [p for p in plans if isinstance(p, ev.PlanParsed)]
    if rounds:
        agents = [a for p in parsed for a in p.plan.get("agents", [])]
        return agents, []
    if not parsed:
        return [], []
    return list(parsed[-1].plan.get("agents", [])), list(parsed[-1].plan.get("flows", []))


def _implied(plans: Sequence[ev.PlanParsed | ev.PlanRejected]) -> set[tuple[str, str]]:
    """The flows the accepted plan's ``implied_flow`` diagnostics say a reference added."""
    parsed = [p for p in plans if isinstance(p, ev.PlanParsed)]
    found: set[tuple[str, str]] = set()
    for d in parsed[-1].diagnostics if parsed else []:
        match = _IMPLIED.search(str(d.get("message", ""))) if d.get("code") == "implied_flow" else None
        if match is not None and d.get("where") == f"agent:{match.group(2)}":
            found.add((match.group(1), match.group(2)))
    return found


#: The flow named by an ``implied_flow`` diagnostic's message (``... implies the flow a -> b, ...``).
_IMPLIED = re.compile(r"implies the flow (\S+) -> (\S+),")


def _graph(
    plans: Sequence[ev.PlanParsed | ev.PlanRejected], nodes: Mapping[str, Mapping[str, Any]], *, rounds: bool
) -> dict[str, Any]:
    """Nodes (with layer, row and status), edges (declared or implied by a reference), critical path."""
    agents, flows = _plan_of(plans, rounds)
    ids = [str(a.get("id")) for a in agents]
    ids += [n for n in nodes if n not in ids]  # nodes that ran without a plan (a SAS baseline)
    # The accepted plan's flows hold the ones its references implied: its diagnostics say which.
    implied = _implied(plans) if not rounds else set()
    edges: dict[tuple[str, str], bool] = {}
    for f in flows:
        edges[(str(f.get("src")), str(f.get("dst")))] = (str(f.get("src")), str(f.get("dst"))) in implied
    for a in agents:
        for ref in find_refs(str(a.get("task", ""))):
            if ref.target in ids and ref.target != a.get("id"):
                edges.setdefault((ref.target, str(a.get("id"))), True)
    known = [(s, d) for s, d in edges if s in ids and d in ids]
    order = topological_order(ids, known) or ids
    layer = _layers(order, known, ids, rounds)
    spec = {str(a.get("id")): a for a in agents}
    critical = _critical_path(order, known, nodes)
    out_nodes = []
    rows: dict[int, int] = {}
    for node_id in order:
        a, n = spec.get(node_id, {}), nodes.get(node_id, {})
        row = rows.get(layer[node_id], 0)
        rows[layer[node_id]] = row + 1
        out_nodes.append(
            {
                "id": node_id,
                "kind": a.get("kind") or n.get("kind", ""),
                "task": a.get("task", n.get("task", "")),
                "params": a.get("params", n.get("params", {})),
                "task_only": a.get("task_only") is True,
                "status": n.get("status", "not run"),
                "answer": n.get("answer", ""),
                "error": n.get("error", ""),
                "usage": n.get("usage"),
                "start": n.get("start"),
                "end": n.get("end"),
                "layer": layer[node_id],
                "row": row,
                "critical": node_id in critical,
            }
        )
    return {
        "nodes": out_nodes,
        "edges": [
            {"src": s, "dst": d, "implied": edges[(s, d)], "critical": s in critical and d in critical}
            for s, d in known
        ],
        "critical_path": [n for n in order if n in critical],
    }


def _layers(
    order: Sequence[str], edges: Sequence[tuple[str, str]], ids: Sequence[str], rounds: bool
) -> dict[str, int]:
    """Each node's column: its longest distance from a source (its round, in the rounds mode)."""
    if rounds:
        return {n: _round_of(n) for n in ids}
    layer = dict.fromkeys(order, 0)
    for node in order:
        for src, dst in edges:
            if src == node:
                layer[dst] = max(layer[dst], layer[node] + 1)
    return layer


def _round_of(node_id: str) -> int:
    """The round of a rounds-mode node id ``r<round>c<call>`` (0 for any other id)."""
    head = node_id[1:].partition("c")[0]
    return int(head) if node_id.startswith("r") and head.isdigit() else 0


def _critical_path(
    order: Sequence[str], edges: Sequence[tuple[str, str]], nodes: Mapping[str, Mapping[str, Any]]
) -> set[str]:
    """The nodes of the heaviest chain (summed node times) through the plan's edges."""

    def length(n: str) -> float:
        info = nodes.get(n, {})
        start, end = info.get("start"), info.get("end")
        return float(end - start) if start is not None and end is not None else 0.0

    best: dict[str, tuple[float, str | None]] = {}
    for node in order:
        parents = [s for s, d in edges if d == node and s in best]
        prev = max(parents, key=lambda p: best[p][0], default=None)
        best[node] = (length(node) + (best[prev][0] if prev is not None else 0.0), prev)
    if not best or not any(length(n) for n in order):
        return set()
    tail: str | None = max(best, key=lambda n: best[n][0])
    path: set[str] = set()
    while tail is not None:
        path.add(tail)
        tail = best[tail][1]
    return path


def _timeline(graph_nodes: Sequence[Mapping[str, Any]], calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One lane per node (its own bar, then its calls) plus one for orchestrator/judge calls."""
    # The orchestrator plans before any node runs: its lane comes first.
    lanes: list[str] = (
        ["orchestrator"] if any(c["role"] == "orchestrator" and not c.get("node") for c in calls) else []
    )
    bars: list[dict[str, Any]] = []
    for node in graph_nodes:
        if node.get("start") is None:
            continue
        lanes.append(node["id"])
        bars.append(
            {
                "lane": len(lanes) - 1,
                "kind": "node",
                "label": node["id"],
                "start": node["start"],
                "end": node["end"],
                "status": node["status"],
                "critical": node["critical"],
            }
        )
    lane_of = {name: i for i, name in enumerate(lanes)}
    for call in calls:
        name = call["node"] if call.get("node") in lane_of else call["role"]
        if name not in lane_of:
            lanes.append(name)
            lane_of[name] = len(lanes) - 1
        bars.append(
            {
                "lane": lane_of[name],
                "kind": "call",
                "label": f"call {call['index'] + 1}",
                "call": call["index"],
                "start": call["start"],
                "end": call["end"],
                "status": "error" if call.get("error") else "ok",
                "critical": False,
            }
        )
    return {"lanes": lanes, "bars": bars}


def _rounds(
    plans: Sequence[ev.PlanParsed | ev.PlanRejected],
    nodes: Mapping[str, Mapping[str, Any]],
    events: Sequence[ev.Event],
) -> list[dict[str, Any]]:
    """The rounds of a multi-round run in order: the orchestrator's calls, each call's node status
    and its protocol status (``tool_status``: OK, EXEC_ERR, TIMEOUT, ... where the trace has it).

    A call the round refused (``FORMAT_ERR``, ``REJECTED``) is no agent of the round's plan: it is
    listed from its ``tool_result`` event, as not run, with its error; so is a round whose every
    call was refused."""
    results = [e for e in events if isinstance(e, ev.ToolResult)]
    tool_statuses = {r.node: r.status for r in results if r.node}
    by_round: dict[int, dict[str, Any]] = {}
    for p in plans:
        agents = p.plan.get("agents", []) if isinstance(p, ev.PlanParsed) else []
        by_round[p.attempt] = {
            "round": p.attempt,
            "text": p.text,
            "calls": [
                {
                    "id": a.get("id"),
                    "kind": a.get("kind"),
                    "task": a.get("task"),
                    "status": nodes.get(str(a.get("id")), {}).get("status", "not run"),
                    "tool_status": tool_statuses.get(str(a.get("id")), ""),
                    "answer": nodes.get(str(a.get("id")), {}).get("answer", ""),
                    "error": nodes.get(str(a.get("id")), {}).get("error", ""),
                }
                for a in agents
            ],
        }
    for r in results:
        entry = by_round.setdefault(r.round, {"round": r.round, "text": "", "calls": []})
        if r.node and any(c["id"] == r.node for c in entry["calls"]):
            continue
        entry["calls"].append(
            {
                "id": r.node or r.call_id,
                "kind": r.tool,
                "task": "",
                "status": "not run",
                "tool_status": r.status,
                "answer": "",
                "error": r.error,
            }
        )
    return [by_round[n] for n in sorted(by_round)]
