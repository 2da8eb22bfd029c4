"""The rich view of ``masorch run``: the plan as a tree, live per-node progress, the result."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from masorch.plan import Plan
from masorch.run.result import RunResult
from masorch.trace.events import Event

_STATUS_STYLE = {
    "pending": "dim",
    "running": "yellow",
    "ok": "green",
    "error": "red",
    "timeout": "red",
    "budget": "magenta",
    "skipped": "dim",
    "OK": "green",
    "EXEC_ERR": "red",
    "TIMEOUT": "red",
    "BUDGET": "magenta",
    "FORMAT_ERR": "yellow",
    "REJECTED": "yellow",
}


class LiveView:
    """The plan tree and a per-node progress table, updated from trace events."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live: Live | None = None
        self.phase = "planning"
        self.plan: Plan | None = None
        self.status: dict[str, str] = {}
        self.detail: dict[str, str] = {}
        self.calls = 0

    def on_event(self, event: Event) -> None:
        """Update the state from one trace event and redraw."""
        if event.type == "plan_parsed":
            plan = Plan.model_validate(event.plan)
            if event.dialect == "tools" and self.plan is not None:  # rounds mode: one event per round
                plan = Plan(agents=self.plan.agents + plan.agents)
            self.plan = plan
            for a in plan.agents:
                self.status.setdefault(a.id, "pending")
            self.phase = "running"
        elif event.type == "plan_rejected":
            self.phase = f"plan rejected (attempt {event.attempt + 1})"
        elif event.type == "node_started":
            self.status[event.node] = "running"
        elif event.type == "node_finished":
            self.status[event.node] = event.status
            self.detail[event.node] = event.answer if event.status == "ok" else event.error
        elif event.type == "tool_result":  # rounds mode: every call's status, refused ones too
            self.status[event.node] = event.status
            if event.status != "OK":
                self.detail[event.node] = event.error
        elif event.type == "llm_call":
            self.calls += 1
        elif event.type == "run_finished":
            self.phase = "done"
        if self.live is not None:
            self.live.update(self.render())

    def render(self) -> Group | Table:
        """The plan tree (once there is a plan) above the node table."""
        table = Table(title=f"{self.phase} - {self.calls} LLM calls", show_edge=False)
        table.add_column("node")
        table.add_column("status")
        table.add_column("answer / error", overflow="fold", max_width=70)
        for nid, status in self.status.items():
            style = _STATUS_STYLE.get(status, "")
            table.add_row(escape(nid), f"[{style}]{status}[/]", escape(_clip(self.detail.get(nid, ""))))
        if self.plan is None:
            return table
        return Group(plan_tree(self.plan), table)


def plan_tree(plan: Plan) -> Tree:
    """The plan as a tree: the sink at the root, each node's inputs below it."""
    if not plan.agents:
        return Tree(f"[bold]final answer[/]: {escape(plan.final_answer or '')}")
    parents: dict[str, list[str]] = {a.id: [] for a in plan.agents}
    sources = set()
    for f in plan.flows:
        parents.setdefault(f.dst, []).append(f.src)
        sources.add(f.src)
    sinks = [a.id for a in plan.agents if a.id not in sources] or [plan.agents[-1].id]
    root = Tree("[bold]plan[/]")

    def add(node: Tree, nid: str, seen: Sequence[str]) -> None:
        spec = plan.agent(nid)
        if spec is None:
            label = escape(nid)
        else:
            task = escape(_clip(spec.task or "(the question)", 60))
            label = f"[bold]{escape(nid)}[/] [cyan]{escape(spec.kind)}[/] {task}"
        branch = node.add(label)
        for p in parents.get(nid, []):
            if p not in seen:
                add(branch, p, [*seen, nid])

    for s in sinks:
        add(root, s, [])
    return root


def show_result(console: Console, result: RunResult) -> None:
    """Diagnostics, the answer (or why there is none) and the usage line."""
    for d in result.diagnostics:
        console.print(f"[yellow]{d.severity.value}[/] {escape(f'[{d.code}] {d.message}')}", highlight=False)
    if result.ok:
        console.print(f"[bold green]answer[/]: {escape(result.answer)}", highlight=False)
    else:
        console.print(f"[bold red]{result.status}[/]: {escape(result.error)}", highlight=False)
    if result.trajectory is not None:
        t = result.trajectory
        counts = ", ".join(f"{n} {s}" for s, n in t.statuses().items()) or "no calls"
        console.print(
            f"[dim]{len(t.rounds)} rounds ({counts}), {t.units:g} units, ended by {t.ended_by}[/]",
            highlight=False,
        )
    u = result.usage
    console.print(
        f"[dim]{u.calls} calls, {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens, "
        f"${u.cost:.4f}, {result.wall_s:.2f} s[/]",
        highlight=False,
    )


def _clip(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
