"""The before/after evaluation of an orchestrator, through the eval harness: valid-plan rate and accuracy.

The held-out rows become eval data sources (:class:`masorch.eval.sources.DataSource`, one per
``data_source``, graded with the row's scorer) and the policy becomes one ``mas:<dom>`` system of
:mod:`masorch.eval.harness`: the same orchestrator prompt as in training, one greedy plan with no
repair (what the model does on its own), executed by the configured sub-agents under the
per-plan budget. Each evaluation is an ordinary eval run directory (``log.jsonl``, ``traces.jsonl``,
``report.md``), so ``masorch eval report DIR`` reads it like any other run.

The policy is served in process (:class:`~masorch.backends.hf.HFBackend`, one generation at
a time), so held-out plans queue for it: the per-plan deadline of training therefore bounds each
sub-agent node here (``node_timeout_s``), not the run, whose clock would start in that queue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from masorch.agents.base import AgentRegistry
from masorch.backends.base import Backend, Completion, GenerateConfig, Message
from masorch.eval.datasets import Sample
from masorch.eval.harness import TRACE_FILE, EnvSpec, EvalOptions, evaluate
from masorch.eval.log import LOG_FILE, RunLog
from masorch.eval.sources import DataSource
from masorch.run.system import System

#: The model string under which the policy being evaluated is served to the harness.
POLICY_MODEL = "policy"
#: Statuses of a run whose plan passed the checks (it executed, whatever came of it).
EXECUTED = frozenset({"ok", "error", "timeout", "budget"})


@dataclass(frozen=True)
class EvalSummary:
    """Held-out figures of one orchestrator: rows, valid-plan rate, accuracy, plan size, run dir."""

    n: int
    valid_rate: float
    accuracy: float
    agents_per_plan: float
    calls_per_plan: float
    statuses: dict[str, int]
    run_dir: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return asdict(self)

    @staticmethod
    def of(records: Sequence[Mapping[str, Any]], run_dir: str = "") -> EvalSummary:
        """The figures of eval-harness records (one per sample).

        A plan counts as valid when it executed (status ok, error, timeout or budget); a sample the
        harness could not run (``failed``) counts as invalid and wrong, so every sample is counted.

        >>> recs = [
        ...     {"status": "ok", "correct": True, "plan_kinds": ["cot"], "calls": 1},
        ...     {"status": "invalid_plan", "correct": False, "plan_kinds": [], "calls": 0},
        ... ]
        >>> s = EvalSummary.of(recs)
        >>> s.valid_rate, s.accuracy, s.agents_per_plan, s.calls_per_plan, s.statuses
        (0.5, 0.5, 1.0, 0.5, {'ok': 1, 'invalid_plan': 1})
        """
        n = max(1, len(records))
        valid = [r for r in records if r.get("status") in EXECUTED]
        statuses: dict[str, int] = {}
        for r in records:
            key = str(r.get("status"))
            statuses[key] = statuses.get(key, 0) + 1
        return EvalSummary(
            n=len(records),
            valid_rate=len(valid) / n,
            accuracy=sum(bool(r.get("correct")) for r in records) / n,
            agents_per_plan=sum(len(r.get("plan_kinds") or []) for r in valid) / max(1, len(valid)),
            calls_per_plan=sum(int(r.get("calls") or 0) for r in records) / n,
            statuses=statuses,
            run_dir=run_dir,
        )


def rows_to_sources(rows: Sequence[Mapping[str, Any]], corpus: Path | None = None) -> list[DataSource]:
    """Held-out prompt rows as eval data sources: one per ``data_source``, in first-seen order.

    ``corpus`` is the search corpus of HotpotQA rows (the only dataset with one).

    >>> rows = [
    ...     {"id": "a", "question": "Q1", "ground_truth": "3", "scorer": "masbench", "data_source": "depth"},
    ...     {"id": "b", "question": "Q2", "ground_truth": "7", "scorer": "math", "data_source": "aime24"},
    ... ]
    >>> [(s.name, s.scorer, [x.id for x in s.samples]) for s in rows_to_sources(rows)]
    [('depth', 'masbench', ['a']), ('aime24', 'math', ['b'])]
    """
    groups: dict[tuple[str, str], list[Sample]] = {}
    for r in rows:
        name, scorer = str(r["data_source"]), str(r["scorer"])
        groups.setdefault((name, scorer), []).append(
            Sample(id=str(r["id"]), question=str(r["question"]), answer=str(r["ground_truth"]), dataset=name)
        )
    names = [name for name, _ in groups]
    return [
        DataSource(
            name if names.count(name) == 1 else f"{name}:{scorer}",
            tuple(samples),
            scorer,
            corpus if name == "hotpotqa" else None,
            origin="held-out prompts",
        )
        for (name, scorer), samples in groups.items()
    ]


class SharedBackend:
    """A backend lent to the harness: calls go through, closing is left to its owner."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        """The lent backend's model id."""
        return self.inner.model_id

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """The lent backend's completion."""
        return await self.inner.complete(messages, config)

    async def aclose(self) -> None:
        """Nothing: the owner closes the lent backend."""
        return None


def evaluate_policy(
    orchestrator: Backend,
    rows: Sequence[Mapping[str, Any]],
    out_dir: Path,
    *,
    system: System,
    concurrency: int = 4,
    subagent_factory: Callable[[str], Backend],
    agents_factory: Callable[[], AgentRegistry],
    corpus: Path | None = None,
    tag: str = "policy",
    resume: bool = False,
) -> EvalSummary:
    """Run the held-out ``rows`` through the eval harness with ``orchestrator`` planning them.

    ``system`` is the policy's ``mas:<dom>`` system (:meth:`masorch.train.config.TrainConfig.policy_system`):
    its orchestrator becomes the policy, its name gets ``@tag``, and its run deadline bounds each
    node instead (see the module docstring). ``concurrency`` samples run at once.
    Writes an eval run directory at ``out_dir`` (replaced if present; with ``resume`` a started one
    goes on, its logged samples kept) with its ``report.md``.
    ``subagent_factory`` builds the sub-agent backend of a model string (it is closed by the
    harness afterwards; lend a shared one with :class:`SharedBackend`).
    """
    from masorch.eval.report import REPORT_FILE, write_report

    system = system.model_copy(
        update={
            "name": f"{system.label}@{tag}",
            "orchestrator": POLICY_MODEL,
            "timeout_s": None,
            "node_timeout_s": system.timeout_s,
        }
    )
    policy = SharedBackend(orchestrator)

    def backend(model: str) -> Backend:
        return policy if model == POLICY_MODEL else subagent_factory(model)

    env = EnvSpec(backend_factory=backend, agents_factory=agents_factory)
    sources = rows_to_sources(rows, corpus)
    if not resume:  # a rerun of the training replaces its evaluation
        for name in (LOG_FILE, TRACE_FILE, REPORT_FILE):
            (out_dir / name).unlink(missing_ok=True)
    evaluate(
        [system],
        sources,
        out_dir,
        options=EvalOptions(concurrency=concurrency, resume=resume),
        env_spec=env,
    )
    write_report(out_dir, plots=False)
    _, records = RunLog.read(out_dir)
    return EvalSummary.of(records, str(out_dir))
