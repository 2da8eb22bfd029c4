"""The holistic mode: question -> orchestrator prompt -> plan text -> check -> execute -> answer.

The orchestrator sees the catalogue of signatures only (never agent code), the rules of the
degree of multi-agent structure (DoM), the budget and its dialect's syntax with a short example.
A rejected plan is fed back with :func:`masorch.plan.repair_message` up to ``repair`` times; when
no valid plan comes, the run ends with status ``invalid_plan`` and the diagnostics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from masorch.agents.base import AgentRegistry, Retriever
from masorch.backends.base import Backend, Completion, GenerateConfig, Message, Sampling
from masorch.errors import BudgetExceeded, DeadlineExceeded, MasorchError, UsageError
from masorch.plan import Diagnostic, DoM, Limits, check, repair_message
from masorch.plan.catalogue import PARAM_TEXT_CHARS, KindSignature, ParamSpec
from masorch.plan.grammar import max_plan_agents, plan_grammar
from masorch.plan.parse import Dialect
from masorch.plan.parse_xml import KIND_TO_NAME, PARAM_TO_ARG
from masorch.plan.refs import ID_PATTERN
from masorch.prompts import render
from masorch.run.budget import Budget
from masorch.run.executor import Executor, RoleBackends
from masorch.run.official import (
    PromptFile,
    load_prompt_file,
    model_name,
    official_catalogue,
    official_messages,
)
from masorch.run.response import plan_text
from masorch.run.result import RunResult, RunStatus
from masorch.run.session import RunSession
from masorch.run.system import PromptFamily, PromptProfile, System
from masorch.trace.events import PlanParsed, PlanRejected
from masorch.trace.writer import TraceSink

logger = logging.getLogger(__name__)

#: Longest string the plan schema allows. llama.cpp turns maxLength into a bounded repetition and
#: refuses repetitions above 2000 (a grammar that fails to parse), so task texts are capped here.
_SCHEMA_MAX_CHARS = 1000


@dataclass(frozen=True)
class OrchestrateOptions(Sampling):
    """How one orchestrated run goes.

    ``dialect`` is what the orchestrator is asked to write (``xml`` is the MAS-Orchestra tag format,
    so the released checkpoints can be driven); ``constrain`` decodes the plan under its dialect's
    constraint where the backend supports one (:func:`plan_generate_config`; off: free decoding, the
    paper's setting); ``repair`` is how many times a rejected plan is sent back with its
    diagnostics (0: one shot).
    ``timeout_s`` bounds the whole run, orchestrator call included; ``node_timeout_s`` each node.
    :meth:`of` derives them from a :class:`~masorch.run.system.System`.
    """

    dom: DoM = DoM.HIGH
    dialect: Dialect = "calls"
    repair: int = 0
    budget: Budget = field(default_factory=Budget)
    timeout_s: float | None = None
    node_timeout_s: float | None = None
    limits: Limits = field(default_factory=Limits)
    max_plan_tokens: int = 1024
    constrain: bool = True
    prompt: PromptProfile = "default"
    prompt_family: PromptFamily = "general"
    prompt_file: PromptFile | None = None
    prompt_examples: str | None = None
    subagent_model: str = ""

    @classmethod
    def of(cls, system: System) -> OrchestrateOptions:
        """The options of a one-step-plan system (``mas:low`` / ``mas:high``)."""
        if system.dom is None:
            raise UsageError(
                f"{system.name} does not write a one-step plan", hint="use a mas:low or mas:high system"
            )
        return cls(
            dom=system.dom,
            dialect=system.dialect,
            repair=system.repair,
            constrain=system.constrain,
            limits=Limits(prune_unused=system.prune),
            max_plan_tokens=system.plan_tokens,
            budget=system.budget,
            timeout_s=system.timeout_s,
            node_timeout_s=system.node_timeout_s,
            **system.sampling(),
            prompt=system.prompt,
            prompt_family=system.prompt_family,
            prompt_file=load_prompt_file(system.prompt_file, system.dom) if system.prompt_file else None,
            prompt_examples=system.prompt_examples,
            subagent_model=model_name(system.model),
        )


def orchestrator_messages(
    question: str, catalogue: Mapping[str, KindSignature], options: OrchestrateOptions
) -> list[Message]:
    """The orchestrator's prompt for ``question``: a system and a user message (the official
    profile: system, user and developer block, :func:`~masorch.run.official.official_messages`).
    ``options.prompt_examples`` replaces the default prompt's worked example plans."""
    if options.prompt == "official":
        return official_messages(
            question,
            catalogue,
            options.dom,
            model=options.subagent_model,
            family=options.prompt_family,
            prompt_file=options.prompt_file,
        )
    dom = options.dom.value
    budget = options.budget.describe()
    if options.dialect == "xml":
        agents = [_xml_agent(sig) for sig in catalogue.values()]
        names = [a["name"] for a in agents]
        max_agents = max_plan_agents(options.dialect, options.dom, options.limits)
        system = render(
            "orchestrator/xml_system.j2", dom=dom, agents=agents, budget=budget, max_agents=max_agents
        )
        user = render(
            "orchestrator/xml_user.j2", dom=dom, question=question, names=names, max_agents=max_agents
        )
        return [Message("system", system), Message("user", user)]
    system = render(
        "orchestrator/system.j2",
        dom=dom,
        catalogue=list(catalogue.values()),
        budget=budget,
        max_agents=max_plan_agents(options.dialect, options.dom, options.limits),
        dialect=options.dialect,
        examples=options.prompt_examples,
    )
    return [Message("system", system), Message("user", render("orchestrator/user.j2", question=question))]


def plan_json_schema(catalogue: Mapping[str, KindSignature], dom: DoM, limits: Limits) -> dict[str, Any]:
    """The JSON schema of a plan object for schema-constrained decoding (arrays and strings bounded).

    Bounds matter: without ``maxItems``/``maxLength`` small models loop to the token limit. Each kind
    is its own object, with only its parameters and their ranges. ValueError for an empty catalogue.
    """
    id_schema = {"type": "string", "pattern": f"^{ID_PATTERN}$"}
    task = {"type": "string", "maxLength": min(limits.max_task_chars, _SCHEMA_MAX_CHARS)}
    agents_of = [_agent_schema(sig, id_schema, task) for sig in catalogue.values()]
    if not agents_of:
        raise ValueError("the catalogue offers no kind")
    any_agent: dict[str, Any] = agents_of[0] if len(agents_of) == 1 else {"anyOf": agents_of}
    flow = {
        "type": "object",
        "properties": {"src": id_schema, "dst": id_schema},
        "required": ["src", "dst"],
        "additionalProperties": False,
    }
    answer = {"type": "string", "minLength": 1, "maxLength": _SCHEMA_MAX_CHARS}

    def shape(min_agents: int, max_agents: int, max_flows: int, final: dict[str, Any]) -> dict[str, Any]:
        agents = {"type": "array", "items": any_agent, "minItems": min_agents, "maxItems": max_agents}
        return {
            "type": "object",
            "properties": {
                "agents": agents,
                "flows": {"type": "array", "items": flow, "maxItems": max_flows},
                "final_answer": final,
            },
            "required": ["agents", "flows", "final_answer"],
            "additionalProperties": False,
        }

    # The DoM's either/or is in the schema: delegate (agents, no final answer) or answer directly.
    if dom is DoM.LOW:
        return {"anyOf": [shape(1, 1, 0, {"type": "null"}), shape(0, 0, 0, answer)]}
    delegate = shape(1, limits.max_agents, limits.max_flows, {"type": "null"})
    if limits.direct_answer_in_high:
        return {"anyOf": [delegate, shape(0, 0, 0, answer)]}
    return delegate


def _agent_schema(sig: KindSignature, id_schema: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    """One kind's agent object: its own parameters only, within their ranges."""
    params = {p.name: param_schema(p) for p in sig.params}
    return {
        "type": "object",
        "properties": {
            "id": id_schema,
            "kind": {"const": sig.kind},
            "task": task,
            "params": {
                "type": "object",
                "properties": params,
                "required": [p.name for p in sig.params if p.required],
                "additionalProperties": False,
            },
        },
        "required": ["id", "kind", "task", "params"],
        "additionalProperties": False,
    }


def plan_generate_config(
    catalogue: Mapping[str, KindSignature], options: OrchestrateOptions
) -> GenerateConfig:
    """The orchestrator call's settings: under ``options.constrain``, the plan's JSON schema (json)
    or its GBNF grammar (calls, xml) built from the offered ``catalogue``, DoM and limits.

    Whether the constraint is applied is the backend's capability (see ``GenerateConfig.grammar``).
    """
    schema: dict[str, Any] | None = None
    grammar: str | None = None
    dialect = options.dialect
    try:
        if options.constrain and dialect == "json":
            schema = plan_json_schema(catalogue, options.dom, options.limits)
        elif options.constrain and dialect != "json":
            grammar = plan_grammar(dialect, catalogue, options.dom, options.limits)
    except ValueError as exc:  # nothing offered can be written: a plan cannot be valid anyway
        logger.warning("no plan constraint (%s); the plan decodes freely", exc)
    return options.generate_config(max_tokens=options.max_plan_tokens, json_schema=schema, grammar=grammar)


async def orchestrate(
    question: str,
    *,
    orchestrator: Backend,
    backends: RoleBackends,
    agents: AgentRegistry,
    options: OrchestrateOptions | None = None,
    trace: TraceSink | None = None,
    retriever: Retriever | None = None,
) -> RunResult:
    """Plan with the orchestrator, check the plan, execute it and return the run's result."""
    opts = options or OrchestrateOptions()
    session = RunSession(opts.budget, trace=trace, deadline_s=opts.timeout_s)

    async def body(session: RunSession) -> RunResult:
        return await _plan_and_run(question, orchestrator, backends, agents, opts, session, retriever)

    models = backends.models(orchestrator)
    return await session.run(
        question, body, mode="orchestrate", dom=opts.dom.value, dialect=opts.dialect, models=models
    )


async def _plan_and_run(
    question: str,
    orchestrator: Backend,
    backends: RoleBackends,
    agents: AgentRegistry,
    opts: OrchestrateOptions,
    session: RunSession,
    retriever: Retriever | None,
) -> RunResult:
    catalogue = agents.catalogue()
    if opts.prompt == "official":  # only the kinds the checkpoints know are offered, and accepted
        catalogue = official_catalogue(catalogue, opts.dom, opts.prompt_family)
    messages = orchestrator_messages(question, catalogue, opts)
    config = plan_generate_config(catalogue, opts)
    text = ""
    dialect = opts.dialect
    diagnostics: tuple[Diagnostic, ...] = ()
    for attempt in range(opts.repair + 1):
        try:
            completion = await _plan_call(session, orchestrator, messages, config)
        except BudgetExceeded as exc:
            return _stopped(session, "budget", f"orchestrator: {exc.message}", text, diagnostics)
        except DeadlineExceeded:  # a repair turn asked for after the deadline
            return _stopped(session, "timeout", _planning_deadline(session), text, diagnostics)
        except MasorchError as exc:  # a backend failure (retries, if any, are the backend's)
            return _stopped(session, "error", f"orchestrator: {exc}", text, diagnostics)
        except TimeoutError:
            if session.past_deadline():
                return _stopped(session, "timeout", _planning_deadline(session), text, diagnostics)
            # Raised by the backend itself (one that does not wrap its timeouts in a BackendError).
            error = "orchestrator: the model request timed out"
            return _stopped(session, "error", error, text, diagnostics)
        text, dialect = plan_text(completion, opts.dialect)
        checked = check(text, opts.dom, catalogue, dialect, opts.limits)
        diagnostics = checked.diagnostics
        validated = checked.validated
        if validated is not None:
            session.emit(
                PlanParsed,
                dialect=checked.dialect or opts.dialect,
                text=text,
                plan=validated.plan.model_dump(mode="json"),
                attempt=attempt,
                diagnostics=[d.to_dict() for d in diagnostics],
            )
            executor = Executor(
                agents, backends, session, node_timeout_s=opts.node_timeout_s, retriever=retriever
            )
            result = await executor.execute(validated, question)
            return dataclasses.replace(result, diagnostics=diagnostics, plan_text=text, plan=validated.plan)
        session.emit(
            PlanRejected,
            dialect=checked.dialect or opts.dialect,
            text=text,
            attempt=attempt,
            diagnostics=[d.to_dict() for d in diagnostics],
        )
        logger.info("plan rejected (attempt %d): %s", attempt, [d.code for d in diagnostics if d.is_error])
        if attempt < opts.repair:
            messages = [*messages, Message("assistant", text), Message("user", repair_message(diagnostics))]
    result = _stopped(session, "invalid_plan", "the orchestrator's plan is invalid", text, diagnostics)
    return dataclasses.replace(result, plan=check(text, opts.dom, catalogue, dialect, opts.limits).plan)


async def _plan_call(
    session: RunSession, orchestrator: Backend, messages: list[Message], config: GenerateConfig
) -> Completion:
    async with asyncio.timeout(session.remaining_s()):  # None: no deadline
        return await session.complete(orchestrator, messages, config, role="orchestrator")


def _planning_deadline(session: RunSession) -> str:
    return f"run deadline of {session.deadline_s:g} s passed while planning"


def _stopped(
    session: RunSession, status: RunStatus, error: str, text: str, diagnostics: tuple[Diagnostic, ...]
) -> RunResult:
    return RunResult(
        status=status,
        usage=session.ledger.totals(),
        ledger=session.ledger,
        wall_s=session.elapsed_s,
        diagnostics=diagnostics,
        error=error,
        plan_text=text,
        run_id=session.run_id,
    )


def param_json_schema(ptype: str) -> dict[str, Any]:
    """The JSON schema of a parameter type (strings and lists bounded for constrained decoding)."""
    if ptype == "list[str]":
        item = {"type": "string", "maxLength": PARAM_TEXT_CHARS}
        return {"type": "array", "items": item, "maxItems": 8}
    if ptype == "str":
        return {"type": "string", "maxLength": PARAM_TEXT_CHARS}
    return {"type": {"int": "integer", "float": "number", "bool": "boolean"}[ptype]}


def param_schema(p: ParamSpec) -> dict[str, Any]:
    """A parameter's schema with its range, choices and item counts (what the validator checks)."""
    out = param_json_schema(p.type)
    if p.type in ("int", "float"):
        if p.minimum is not None:
            out["minimum"] = p.minimum
        if p.maximum is not None:
            out["maximum"] = p.maximum
    elif p.type == "str" and p.choices:
        out = {"type": "string", "enum": list(p.choices)}
    elif p.type == "list[str]":
        if p.min_items is not None:
            out["minItems"] = p.min_items
        if p.max_items is not None:
            out["maxItems"] = min(p.max_items, out["maxItems"])
    return out


def _xml_agent(sig: KindSignature) -> dict[str, Any]:
    """One agent as the MAS-Orchestra prompt lists it: its trained name and argument tags."""
    return {
        "name": KIND_TO_NAME.get(sig.kind, sig.kind.capitalize() + "Agent"),
        "summary": sig.summary,
        "args": [
            {
                "tag": PARAM_TO_ARG.get(p.name, p.name),
                "type": p.type,
                "default": p.default,
                "description": p.description,
            }
            for p in sig.params
        ],
    }
