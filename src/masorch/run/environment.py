"""What a process needs to run systems: backends per model string, agents, retrievers, scorers.

:class:`EnvSpec` says how to build them and is picklable, so Ray workers build the same things a
local run does; :class:`Environment` builds each once per process, on first use, decides the
catalogue a run offers (only kinds it can execute), and closes them all once. ``masorch run``, the
eval harness and training all run systems through one (:func:`masorch.run.run`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.agents.base import AgentRegistry, Retriever
from masorch.agents.signatures import AgentProfileName
from masorch.backends.base import Backend
from masorch.errors import MasorchError, UsageError
from masorch.plan import AgentSpec, DoM, Plan, ValidatedPlan, validate
from masorch.redact import redact
from masorch.run.executor import RoleBackends
from masorch.run.faults import ToolFaults
from masorch.run.system import System
from masorch.score.registry import get_scorer

logger = logging.getLogger(__name__)


def sas_plan(system: System) -> Plan:
    """The one-node plan of a single-agent baseline: its kind on the whole question."""
    return Plan(agents=(AgentSpec(id="solver", kind=system.variant, task="", params=dict(system.params)),))


def default_backend_factory(
    spec: str,
    cache_path: str | None = None,
    n_threads: int | None = None,
    slots: int | None = None,
    n_ctx: int | None = None,
) -> Backend:
    """A backend from a model string (:func:`masorch.backends.registry.make_backend`), cached if asked.

    ``n_threads`` sets an embedded (``local:``) model's CPU threads (default: all cores), ``slots`` the
    requests its server decodes at once (default 8), ``n_ctx`` the context tokens of each request,
    prompt and answer together (default 4096).
    """
    from masorch.backends.registry import BackendSettings, make_backend

    settings = BackendSettings(cache_path=Path(cache_path) if cache_path else None, n_threads=n_threads)
    if slots is not None:
        settings = dataclasses.replace(settings, slots=slots)
    if n_ctx is not None:
        settings = dataclasses.replace(settings, n_ctx=n_ctx)
    return make_backend(spec, settings=settings)


def default_agents_factory(
    max_tokens: int | None = None, profile: AgentProfileName = "default"
) -> AgentRegistry:
    """The built-in sub-agents of an agent ``profile`` (``default`` or ``paper``, see
    :data:`~masorch.agents.signatures.AGENT_PROFILES`); ``max_tokens`` caps each call's completion
    (None: their default)."""
    from masorch.agents import default_registry

    if max_tokens is None:
        return default_registry(profile=profile)
    return default_registry(max_tokens=max_tokens, profile=profile)


def default_retriever_factory(corpus: Path) -> Retriever:
    """BM25 over a corpus: a saved index directory, or a JSONL file (its index built once and saved
    beside it as ``NAME.index``)."""
    from masorch.agents.corpus import BM25Corpus

    if corpus.is_dir():
        return BM25Corpus.load(corpus)
    if not corpus.is_file():
        raise UsageError(f"no corpus at {corpus}", hint="pass a JSONL corpus file or a saved index directory")
    return BM25Corpus.open(corpus, corpus.with_name(corpus.name + ".index"))


@dataclass(frozen=True)
class EnvSpec:
    """How a process builds what running needs: picklable, so Ray workers build the same things.

    ``backend_factory`` maps a model string to a Backend, ``agents_factory`` gives the sub-agent
    registry, ``retriever_factory`` a corpus path to a Retriever, ``scorer_factory`` a scorer name
    (with ``scorer_options``) to a scorer. Tests inject scripted backends here. ``faults`` makes
    some multi-round tool calls fail on purpose (:class:`~masorch.run.faults.ToolFaults`; None: none).
    """

    backend_factory: Callable[[str], Backend] = default_backend_factory
    agents_factory: Callable[[], AgentRegistry] = default_agents_factory
    retriever_factory: Callable[[Path], Retriever] = default_retriever_factory
    scorer_factory: Callable[..., Any] = get_scorer
    scorer_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    faults: ToolFaults | None = None

    @classmethod
    def default(
        cls,
        *,
        cache_path: Path | None = None,
        max_tokens: int | None = None,
        scorer_options: Mapping[str, Mapping[str, Any]] | None = None,
        n_threads: int | None = None,
        slots: int | None = None,
        faults: ToolFaults | None = None,
        agent_profile: AgentProfileName = "default",
        n_ctx: int | None = None,
    ) -> EnvSpec:
        """The real environment; with ``cache_path`` every backend records/replays through that cache;
        ``agent_profile`` picks the sub-agents and their defaults (``paper``: the official ones)."""
        return cls(
            backend_factory=functools.partial(
                default_backend_factory,
                cache_path=str(cache_path) if cache_path else None,
                n_threads=n_threads,
                slots=slots,
                n_ctx=n_ctx,
            ),
            agents_factory=functools.partial(default_agents_factory, max_tokens, agent_profile),
            scorer_options=dict(scorer_options or {}),
            faults=faults,
        )


class Environment:
    """One process's backends (one per model string), agent registry, retrievers and scorers."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec
        self._backends: dict[str, Backend] = {}
        self._retrievers: dict[Path, Retriever] = {}
        self._scorers: dict[str, Any] = {}
        self._agents: AgentRegistry | None = None
        self._offered: dict[tuple[bool, bool], AgentRegistry] = {}
        self._plans: dict[str, ValidatedPlan] = {}
        self._lock = threading.Lock()

    def backend(self, model: str) -> Backend:
        """The shared backend of ``model`` (built on first use)."""
        with self._lock:
            if model not in self._backends:
                self._backends[model] = self.spec.backend_factory(model)
            return self._backends[model]

    def build_backends(self, models: Iterable[str]) -> None:
        """Build the backend of each of ``models`` now, before any run: a model that cannot be built
        for a reason the user can fix (a malformed string, an unknown local model, a missing API key)
        raises its usage error here, not in every run one by one. Any other failure is logged and
        left to the runs, each of which records it."""
        for model in dict.fromkeys(models):
            try:
                self.backend(model)
            except MasorchError:
                raise
            except Exception as exc:
                logger.warning("backend %s could not be built: %s", redact(model), redact(str(exc)))

    def agents(self) -> AgentRegistry:
        """The sub-agent registry (built on first use)."""
        with self._lock:
            return self._agents_locked()

    def offered_agents(self, *, retriever: bool, history: bool = False) -> AgentRegistry:
        """The agents an orchestrator is offered where the run has (or lacks) a retriever, and where
        calls can (multi-round mode) or cannot (one-step plans) read a reasoning history.

        Decided by :func:`masorch.agents.registry.offered_registry`, once per case.
        """
        from masorch.agents.registry import offered_registry

        with self._lock:
            key = (retriever, history)
            if key not in self._offered:
                self._offered[key] = offered_registry(
                    self._agents_locked(), retriever=retriever, history=history
                )
            return self._offered[key]

    def _agents_locked(self) -> AgentRegistry:
        if self._agents is None:
            self._agents = self.spec.agents_factory()
        return self._agents

    def roles(self, system: System) -> RoleBackends:
        """The sub-agent, per-kind and judge backends of ``system``."""
        return RoleBackends(
            subagent=self.backend(system.model),
            per_kind={k: self.backend(m) for k, m in system.agent_models.items()},
            judge=self.backend(system.judge) if system.judge else None,
        )

    def sas_plan(self, system: System, *, retriever: bool | None = None) -> ValidatedPlan:
        """The validated one-node plan of a single-agent system (validated once per system).

        With ``retriever`` (whether the run has a corpus), a kind this run cannot offer (see
        :meth:`offered_agents`) is refused too, as it is to an orchestrator.
        """
        with self._lock:
            if system.name not in self._plans:
                checked = validate(sas_plan(system), DoM.HIGH, self._agents_locked().catalogue())
                if checked.validated is None:
                    problems = "; ".join(d.message for d in checked.diagnostics if d.is_error)
                    raise UsageError(
                        f"bad parameters for {system.name}: {problems}",
                        hint="fix the system's params (see the agent's signature in docs/agents.md)",
                    )
                self._plans[system.name] = checked.validated
            plan = self._plans[system.name]
        if retriever is not None and system.variant not in self.offered_agents(retriever=retriever):
            needs = {
                "search": "give it a corpus to search (masorch run --corpus FILE; in an eval, a dataset "
                "that has one, such as hotpotqa)",
                "python": "its sandbox lacks a boundary on this host (the warning logged above; "
                "docs/agents.md, Known limits)",
            }
            raise UsageError(
                f"{system.name} cannot run here: this run does not offer the {system.variant} agent",
                hint=needs.get(system.variant, "see docs/agents.md for what the agent needs"),
            )
        return plan

    def retriever(self, corpus: Path) -> Retriever:
        """The retriever over ``corpus`` (indexed once per process)."""
        with self._lock:
            if corpus not in self._retrievers:
                self._retrievers[corpus] = self.spec.retriever_factory(corpus)
            return self._retrievers[corpus]

    def scorer(self, name: str) -> Any:
        """The scorer ``name`` (one instance per process)."""
        with self._lock:
            if name not in self._scorers:
                self._scorers[name] = self.spec.scorer_factory(name, **self.spec.scorer_options.get(name, {}))
            return self._scorers[name]

    async def aclose(self) -> None:
        """Close every backend and every scorer that holds resources (math-verify workers)."""
        for backend in self._backends.values():
            await backend.aclose()
        self._backends.clear()
        for scorer in self._scorers.values():
            close = getattr(scorer, "close", None)
            if callable(close):
                close()
        self._scorers.clear()
