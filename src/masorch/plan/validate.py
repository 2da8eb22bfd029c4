"""Judge a plan under a degree of MAS: every problem at once; the only producer of ``ValidatedPlan``.

Rules, in the order they are checked (codes in :data:`masorch.plan.diagnostics.CODES`):

1. shape - ``empty_plan``, ``answer_with_agents``, ``empty_answer``, ``dom_direct_answer``;
2. size - ``too_many_agents``, ``too_many_flows``, ``task_too_long``;
3. DoM - LOW allows at most one agent and no flows (``dom_agents``, ``dom_flows``);
4. agents - ``bad_id``, ``duplicate_id``, ``unknown_kind``, ``unknown_param``, ``missing_param``,
   ``bad_param``;
5. flows - ``dangling_flow``, ``self_loop``, ``duplicate_flow``;
6. references - ``bad_ref_field`` (``${a.result}``), ``unknown_ref``, ``self_ref``; a reference
   to an agent without a flow from it implies that flow (``implied_flow``, an info), which the
   graph rules then see like any other;
7. graph - ``cycle`` (each cycle named), then ``multiple_sinks`` and ``unreachable``; with
   ``Limits.prune_unused`` the agents that never reach the final agent (the last one written) are
   left out instead (``pruned_agent``, a warning) and the rest is validated and run;
8. tasks - ``empty_task`` (a warning; see docs/plan-language.md for when an empty task is fine),
   ``empty_task_alone`` (``task_only`` without a task: the agent would see nothing to solve).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from masorch.plan._rules import Suggestions, check_agent
from masorch.plan.catalogue import Catalogue
from masorch.plan.diagnostics import Diagnostic, diag
from masorch.plan.graph import ancestors, cycle_through, strongly_connected, topological_order
from masorch.plan.model import DoM, Flow, Plan, ValidatedPlan
from masorch.plan.parse import MAX_TEXT_CHARS, DialectChoice, ParseResult, parse
from masorch.plan.refs import REF_RE, bad_field_refs


@dataclass(frozen=True)
class Limits:
    """Size limits and policy switches for validation; the defaults suit MAS-Orchestra-size plans."""

    #: most agents in one plan
    max_agents: int = 10
    #: most characters in one agent's task
    max_task_chars: int = 4000
    #: most flows in one plan (a 10-agent DAG has at most 45 distinct edges)
    max_flows: int = 64
    #: whether a HIGH-DoM plan may answer directly instead of delegating
    direct_answer_in_high: bool = False
    #: most characters in the text ``check`` reads; a longer text is rejected unread (``plan_too_large``)
    max_text_chars: int = MAX_TEXT_CHARS
    #: whether agents whose output never reaches the final agent (the last one written, when it has
    #: no outgoing flow) are left out with a ``pruned_agent`` warning instead of failing the plan
    #: with ``multiple_sinks``/``unreachable``; off by default, on in orchestrated runs (System.prune)
    prune_unused: bool = False


@dataclass(frozen=True)
class ValidationResult:
    """The verdict on a plan: its diagnostics and, when it is valid, the ``ValidatedPlan`` to run."""

    plan: Plan
    diagnostics: tuple[Diagnostic, ...]
    validated: ValidatedPlan | None

    @property
    def valid(self) -> bool:
        """True when no diagnostic is an error."""
        return not any(d.is_error for d in self.diagnostics)


@dataclass(frozen=True)
class CheckResult:
    """Parse and validation in one: every diagnostic of both stages, and the plan to run if valid."""

    parse: ParseResult
    validation: ValidationResult | None
    diagnostics: tuple[Diagnostic, ...] = field(default=())

    @property
    def valid(self) -> bool:
        """True when a plan was read and neither stage found an error."""
        return self.validation is not None and not any(d.is_error for d in self.diagnostics)

    @property
    def dialect(self) -> str | None:
        """The dialect the text was read in (None when no dialect matched)."""
        return self.parse.dialect

    @property
    def plan(self) -> Plan | None:
        """The plan as read (possibly invalid), or None when none was found."""
        return self.parse.plan

    @property
    def validated(self) -> ValidatedPlan | None:
        """The plan ready to run, only when everything is valid."""
        return self.validation.validated if self.valid and self.validation is not None else None


def check(
    text: str,
    dom: DoM,
    catalogue: Catalogue,
    dialect: DialectChoice = "auto",
    limits: Limits = Limits(),
) -> CheckResult:
    """Parse ``text`` and validate the plan it holds; all diagnostics of both stages together."""
    parsed = parse(text, dialect, limits.max_text_chars)
    if parsed.plan is None:
        return CheckResult(parsed, None, parsed.diagnostics)
    result = validate(parsed.plan, dom, catalogue, limits)
    return CheckResult(parsed, result, parsed.diagnostics + result.diagnostics)


def _final_answer(plan: Plan, answer: str, dom: DoM, limits: Limits, out: list[Diagnostic]) -> None:
    """Rules on a direct answer: not with agents, not empty, not at DoM high (unless allowed)."""
    if plan.agents:
        out.append(
            diag(
                "answer_with_agents",
                "the plan both answers directly and creates agents; it is unclear which to use",
                "either delegate (remove the final answer) or answer directly (remove the agents)",
            )
        )
    if not answer.strip():
        out.append(diag("empty_answer", "the final answer is empty", "put the answer in the final answer"))
    if dom is DoM.HIGH and not plan.agents and not limits.direct_answer_in_high:
        out.append(
            diag(
                "dom_direct_answer",
                "at DoM high the plan must delegate to agents, not answer directly",
                "create agents and flows whose sink answers the question",
            )
        )


def _shape(plan: Plan, dom: DoM, limits: Limits, out: list[Diagnostic]) -> bool:
    """Rules on the plan as a whole; False when there is nothing more to check."""
    if not plan.agents and plan.final_answer is None:
        out.append(
            diag(
                "empty_plan",
                "the plan has no agents and no final answer",
                "create at least one agent, or give a final answer"
                + (" (allowed at this DoM)" if dom is DoM.LOW else ""),
            )
        )
        return False
    if plan.final_answer is not None:
        _final_answer(plan, plan.final_answer, dom, limits, out)
    if len(plan.agents) > limits.max_agents:
        out.append(
            diag(
                "too_many_agents",
                f"the plan has {len(plan.agents)} agents; the limit is {limits.max_agents}",
                "merge or drop agents",
            )
        )
    if len(plan.flows) > limits.max_flows:
        out.append(
            diag(
                "too_many_flows",
                f"the plan has {len(plan.flows)} flows; the limit is {limits.max_flows}",
                "drop redundant flows",
            )
        )
    if dom is DoM.LOW:
        if len(plan.agents) > 1:
            out.append(
                diag(
                    "dom_agents",
                    f"at DoM low a plan may create at most one agent, this one creates {len(plan.agents)}",
                    "keep the one agent that answers the whole question, or answer directly",
                )
            )
        if plan.flows:
            out.append(
                diag(
                    "dom_flows",
                    f"at DoM low a plan may have no flows, this one has {len(plan.flows)}",
                    "remove the flows: the single agent's answer is the plan's answer",
                )
            )
    return True


def _flows(plan: Plan, ids: set[str], out: list[Diagnostic], suggest: Suggestions) -> list[tuple[str, str]]:
    """Flow rules; the distinct, well-formed edges that the graph rules then look at."""
    edges: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for flow in plan.flows:
        where = f"flow:{flow.src}->{flow.dst}"
        missing = [end for end in (flow.src, flow.dst) if end not in ids]
        for end in dict.fromkeys(missing):
            out.append(
                diag(
                    "dangling_flow",
                    f"the flow {flow.src} -> {flow.dst} names {end!r}, which is not an agent",
                    f"{suggest(end)}create agent {end!r} or fix the flow's id",
                    where,
                )
            )
        if flow.src == flow.dst:
            out.append(
                diag(
                    "self_loop",
                    f"the flow {flow.src} -> {flow.dst} connects an agent to itself",
                    "remove it; to refine an answer use a reflexion agent or a second agent",
                    where,
                )
            )
            continue
        if missing:
            continue
        key = (flow.src, flow.dst)
        if key in seen:
            out.append(
                diag(
                    "duplicate_flow",
                    f"the flow {flow.src} -> {flow.dst} is declared twice",
                    "declare each flow once",
                    where,
                )
            )
            continue
        seen.add(key)
        edges.append(key)
    return edges


def _refs(
    plan: Plan, ids: set[str], edges: set[tuple[str, str]], out: list[Diagnostic], suggest: Suggestions
) -> list[Flow]:
    """Reference rules; the flows that references imply (``${a}`` in b's task: a -> b)."""
    implied: list[Flow] = []
    for agent in plan.agents:
        where = f"agent:{agent.id}"
        if "${" not in agent.task:
            continue
        for target, name in dict.fromkeys(bad_field_refs(agent.task)):
            out.append(
                diag(
                    "bad_ref_field",
                    f"${{{target}.{name}}} reads the field {name!r}, which a reference does not have",
                    f"write ${{{target}}} for its answer or ${{{target}.rationale}} for its reasoning",
                    where,
                )
            )
        for target in dict.fromkeys(t for t, _ in REF_RE.findall(agent.task)):
            token = "${" + target + "}"
            if target == agent.id:
                out.append(
                    diag(
                        "self_ref",
                        f"{token} refers to the agent it appears in",
                        "refer only to upstream agents",
                        where,
                    )
                )
            elif target not in ids:
                out.append(
                    diag(
                        "unknown_ref",
                        f"{token} refers to {target!r}, which is not an agent",
                        f"{suggest(target)}use the id of an upstream agent",
                        where,
                    )
                )
            elif (target, agent.id) not in edges:
                edges.add((target, agent.id))
                implied.append(Flow(src=target, dst=agent.id))
                out.append(
                    diag(
                        "implied_flow",
                        f"{token} implies the flow {target} -> {agent.id}, which was added",
                        f"nothing to do; declare the flow {target} -> {agent.id} to make it explicit",
                        where,
                    )
                )
    return implied


def _cycles(components: list[list[str]], edges: list[tuple[str, str]], out: list[Diagnostic]) -> None:
    """The cycle rule: one diagnostic per strongly connected component, naming a cycle through it."""
    children: dict[str, list[str]] = {}
    for src, dst in edges:
        children.setdefault(src, []).append(dst)
    for component in components:
        path = cycle_through(component[0], set(component), children)
        out.append(
            diag(
                "cycle",
                f"the flows form a cycle: {' -> '.join(path)}",
                "remove one flow of the cycle; a plan must be a DAG",
                "cycle:" + "->".join(path),
            )
        )


def _prune(final: str, order_ids: list[str], edges: list[tuple[str, str]], out: list[Diagnostic]) -> set[str]:
    """The agents whose output never reaches ``final``, each reported (info) as left out."""
    upstream = ancestors(final, edges)
    pruned = {a for a in order_ids if a != final and a not in upstream}
    for agent_id in (a for a in order_ids if a in pruned):
        out.append(
            diag(
                "pruned_agent",
                f"the output of {agent_id!r} never reaches the final agent {final!r} (the last one "
                "written), so it is left out",
                f"use ${{{agent_id}}} in a task downstream, or remove the agent",
                f"agent:{agent_id}",
            )
        )
    return pruned


def _graph(
    order_ids: list[str], edges: list[tuple[str, str]], out: list[Diagnostic], sink_rules: bool, prune: bool
) -> tuple[str | None, list[str] | None, set[str]]:
    """Cycle and sink rules; the single sink when there is one, a topological order, and the agents
    left out because their output never reaches the final agent (with ``prune``)."""
    # Tarjan's components are only needed to name cycles; a topological order proves there are none.
    order = topological_order(order_ids, edges)
    components = [] if order is not None else strongly_connected(order_ids, edges)
    if components:
        _cycles(components, edges, out)
        return None, None, set()
    has_out = {src for src, _ in edges}
    sinks = [a for a in order_ids if a not in has_out]
    if len(sinks) == 1:
        return sinks[0], order, set()
    if not sinks or not sink_rules:
        return None, order, set()
    if prune and order_ids[-1] in sinks:  # the final agent is the last one written
        final = order_ids[-1]
        pruned = _prune(final, order_ids, edges, out)
        return final, [a for a in order or [] if a not in pruned], pruned
    if len(sinks) <= 16:  # the sink that gathers the most work is probably the intended one
        main = max(reversed(sinks), key=lambda s: len(ancestors(s, edges)))
    else:  # a pathological plan: keep this linear
        has_in = {dst for _, dst in edges}
        main = next((s for s in reversed(sinks) if s in has_in), sinks[-1])
    upstream = ancestors(main, edges)
    out.append(
        diag(
            "multiple_sinks",
            f"{len(sinks)} agents have no outgoing flow ({', '.join(sinks)}); a plan needs exactly one",
            f"connect the others to the final agent (probably {main!r}) with flows",
            "sinks:" + ",".join(sinks),
        )
    )
    for agent_id in order_ids:
        if agent_id != main and agent_id not in upstream:
            out.append(
                diag(
                    "unreachable",
                    f"the output of {agent_id!r} never reaches the final agent {main!r}",
                    f"add a flow from {agent_id!r} towards {main!r}, or remove the agent",
                    f"agent:{agent_id}",
                )
            )
    return None, order, set()


def _agents(plan: Plan, catalogue: Catalogue, limits: Limits, out: list[Diagnostic]) -> list[str]:
    """Each agent's own rules and the duplicate-id rule; the distinct ids in the order written."""
    order_ids: list[str] = []
    seen: set[str] = set()
    for agent in plan.agents:
        check_agent(agent, catalogue, limits.max_task_chars, out)
        if agent.id in seen:
            out.append(
                diag(
                    "duplicate_id",
                    f"two agents have the id {agent.id!r}",
                    "give every agent its own id",
                    f"agent:{agent.id}",
                )
            )
        else:
            order_ids.append(agent.id)
            seen.add(agent.id)
    return order_ids


def validate(plan: Plan, dom: DoM, catalogue: Catalogue, limits: Limits = Limits()) -> ValidationResult:
    """Every problem of ``plan`` under ``dom`` at once; a ``ValidatedPlan`` when there is no error."""
    out: list[Diagnostic] = []
    if not _shape(plan, dom, limits, out):
        return ValidationResult(plan, tuple(out), None)
    order_ids = _agents(plan, catalogue, limits, out)
    ids = set(order_ids)
    suggest = Suggestions(ids)  # bounded "did you mean" hints keep huge plans linear
    edges = _flows(plan, ids, out, suggest)
    implied = _refs(plan, ids, set(edges), out, suggest)
    edges += [(f.src, f.dst) for f in implied]
    # At DoM low, extra agents and flows are already DoM errors; sink rules would only repeat them.
    graph = _graph(order_ids, edges, out, dom is DoM.HIGH, limits.prune_unused) if order_ids else None
    sink, order, pruned = graph or (None, [], set())
    if pruned:  # the plan that runs: without the agents that feed nothing into the final one
        plan = plan.model_copy(
            update={
                "agents": tuple(a for a in plan.agents if a.id not in pruned),
                "flows": tuple(f for f in plan.flows if f.src not in pruned and f.dst not in pruned),
            }
        )
        order_ids = [a for a in order_ids if a not in pruned]
        edges = [(src, dst) for src, dst in edges if src not in pruned and dst not in pruned]
        implied = [f for f in implied if f.src not in pruned and f.dst not in pruned]
    parents: dict[str, list[str]] = {a: [] for a in order_ids}
    for src, dst in edges:
        parents[dst].append(src)
    for agent in plan.agents:
        if agent.task_only and not agent.task:
            out.append(
                diag(
                    "empty_task_alone",
                    f"{agent.id!r} asks for its task alone (task_only) but has no task: it would see "
                    "nothing to solve",
                    "write the task it should solve, or leave out task_only to give it the original question",
                    f"agent:{agent.id}",
                )
            )
        elif not agent.task and parents.get(agent.id):
            out.append(
                diag(
                    "empty_task",
                    f"{agent.id!r} has inputs ({', '.join(parents[agent.id])}) but no task; it will get "
                    "the original question with its inputs as context",
                    "say what to do with the inputs, using ${id} to place them",
                    f"agent:{agent.id}",
                )
            )
    if any(d.is_error for d in out):
        return ValidationResult(plan, tuple(out), None)
    assert order is not None  # no cycle was reported
    validated = ValidatedPlan(
        plan=plan.model_copy(update={"flows": plan.flows + tuple(implied)}) if implied else plan,
        dom=dom,
        order=tuple(order),
        parents={a: tuple(p) for a, p in parents.items()},
        sink=sink if plan.final_answer is None else None,
    )
    return ValidationResult(plan, tuple(out), validated)
