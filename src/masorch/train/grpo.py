"""GRPO on one machine with TRL: sample K whole plans per prompt, execute each, reward its answer.

:func:`train_grpo` wires the pieces together through TRL's extension points only: the prompt
dataset (:mod:`masorch.train.data`), the reward functions (:class:`masorch.train.rewards.PlanRewards`,
one per component, weighted by ``GRPOConfig.reward_weights``), a ``TrainerCallback`` that appends
every log line to ``<output_dir>/log.jsonl``, and peft's ``LoraConfig`` for LoRA. The final model
is saved as a plain Hugging Face checkpoint in ``<output_dir>/final`` (LoRA merged), loadable by
``transformers``, by ``masorch`` as ``hf:<dir>`` and servable by vLLM.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.agents.base import AgentRegistry, Retriever
from masorch.backends.base import Backend, GenerateConfig
from masorch.errors import UsageError
from masorch.run.executor import RoleBackends
from masorch.run.lifecycle import check_agent_models
from masorch.run.orchestrate import OrchestrateOptions, plan_generate_config
from masorch.run.system import System
from masorch.train.config import SourceConfig, TrainConfig
from masorch.train.data import Row, build_rows
from masorch.train.evaluate import EvalSummary, SharedBackend, evaluate_policy
from masorch.train.reward_components import CostTarget
from masorch.train.rewards import BatchHook, PlanRewards
from masorch.train.rollout import PlanExecutor, RolloutSettings
from masorch.train.rounds_config import RoundsTrainConfig
from masorch.train.samples import SAMPLES_FILE, SampleLog
from masorch.train.trainer_parts import (
    LOG_FILE,
    REPORT_FILE,
    begin_sitting,
    check_resume_config,
    discard_output_dir,
    grpo_args,
    log_callback,
    lora_config,
    make_output_dir,
    precisions,
    require_train_stack,
    train_and_save,
)

logger = logging.getLogger(__name__)


@dataclass
class TrainReport:
    """What a training run did: steps, time per step, per-step logs, and the before/after evaluation."""

    output_dir: str
    final_model: str
    steps: int
    seconds_per_step: float
    wall_s: float
    logs: list[dict[str, Any]] = field(default_factory=list)
    eval_before: EvalSummary | None = None
    eval_after: EvalSummary | None = None
    eval_before_sampled: EvalSummary | None = None
    eval_after_sampled: EvalSummary | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the content of ``report.json``)."""
        return {
            "output_dir": self.output_dir,
            "final_model": self.final_model,
            "steps": self.steps,
            "seconds_per_step": self.seconds_per_step,
            "wall_s": self.wall_s,
            "eval_before": self.eval_before.to_dict() if self.eval_before else None,
            "eval_after": self.eval_after.to_dict() if self.eval_after else None,
            "eval_before_sampled": self.eval_before_sampled.to_dict() if self.eval_before_sampled else None,
            "eval_after_sampled": self.eval_after_sampled.to_dict() if self.eval_after_sampled else None,
            "logs": self.logs,
        }


def rollout_settings(cfg: TrainConfig) -> RolloutSettings:
    """The per-plan limits of a config, and its dialect (the one inference parses, not ``auto``)."""
    return RolloutSettings.of(cfg.policy_system(), cfg.concurrency)


def subagent_backend(cfg: TrainConfig | RoundsTrainConfig, model: str | None = None) -> Backend:
    """The backend of ``model`` (default the config's sub-agent model), wrapped in the config's
    record/replay cache unless it is off; ``train rounds`` builds its synthesis model this way too."""
    from masorch.backends.registry import BackendSettings, make_backend

    cache = Path(cfg.cache_path) if cfg.cache_path else Path(cfg.output_dir) / "subagent_cache.sqlite"
    cache.parent.mkdir(parents=True, exist_ok=True)
    settings = BackendSettings(cache_path=cache, cache_mode=cfg.cache_mode)
    return make_backend(model or cfg.subagent, settings=settings)


def prompt_rows(cfg: TrainConfig, agents: AgentRegistry) -> tuple[list[Row], list[Row]]:
    """Training rows and held-out rows (``eval`` sources, else the last ``eval_limit`` train rows)."""
    budget = cfg.plan_budget
    catalogue = agents.catalogue()

    def rows(sources: list[SourceConfig]) -> list[Row]:
        return build_rows(
            sources,
            dom=cfg.dom,
            dialect=cfg.dialect,
            catalogue=catalogue,
            budget=budget,
            prompt_examples=cfg.prompt_examples,
        )

    train = rows(cfg.train)
    if cfg.eval_limit <= 0:
        return train, []
    if cfg.eval:
        held = rows(cfg.eval)[: cfg.eval_limit]
        if not cfg.eval_overlaps_train:
            _refuse_shared_questions(train, held)
        return train, held
    if len(train) <= cfg.eval_limit:
        raise UsageError(
            f"{len(train)} train rows cannot spare {cfg.eval_limit} held-out rows",
            hint="add eval sources, lower eval_limit, or raise the train limit",
        )
    return train[: -cfg.eval_limit], train[-cfg.eval_limit :]


def _refuse_shared_questions(train: list[Row], held: list[Row]) -> None:
    """A UsageError where a held-out question is also a training question (the config's own check
    sees only sources spelled alike: two generated sets that share tasks, one file by two paths)."""
    seen = {row["question"] for row in train}
    shared = [row for row in held if row["question"] in seen]
    if shared:
        raise UsageError(
            f"{len(shared)} of the {len(held)} held-out questions are also training questions "
            f"(first: {shared[0]['id']}, {str(shared[0]['question'])[:80]!r})",
            hint="make the eval sources disjoint from the train sources (skip and limit, another split, "
            "seed or file), or set eval_overlaps_train: true to evaluate on training items on purpose",
        )


def search_corpus(sources: Iterable[SourceConfig]) -> Path | None:
    """The HotpotQA search corpus when one of ``sources`` is HotpotQA (search agents need it), else None.

    ``train grpo`` passes its train and eval sources, ``train rounds`` its train sources."""
    if not any(src.kind == "dataset" and src.name == "hotpotqa" for src in sources):
        return None
    from masorch.eval.datasets import corpus_path

    return corpus_path()


def train_agents(cfg: TrainConfig, agents: AgentRegistry | None = None) -> AgentRegistry:
    """The sub-agents a config's plans are offered and run with (``agents``: the built-in ones).

    The same choice as ``run`` and ``eval`` (:func:`masorch.agents.registry.offered_registry`):
    search only with the config's corpus, python only where the sandbox starts.
    """
    from masorch.agents.registry import default_registry, offered_registry

    agents = agents or default_registry(max_tokens=cfg.subagent_max_tokens)
    return offered_registry(agents, retriever=search_corpus([*cfg.train, *cfg.eval]) is not None)


def search_retriever(corpus: Path | None) -> Retriever | None:
    """The BM25 retriever over ``corpus`` (from :func:`search_corpus`), or None without one."""
    if corpus is None:
        return None
    from masorch.run.environment import default_retriever_factory

    return default_retriever_factory(corpus)


def subagent_roles(
    cfg: TrainConfig, agents: AgentRegistry, lent: Mapping[str, Backend] | None = None
) -> RoleBackends:
    """The backends that run a config's plans: ``subagent`` for every kind but those
    ``subagent_models`` gives another model. One backend per distinct model: a lent one (tests)
    where ``lent`` has the model string, else :func:`subagent_backend`. A kind ``agents`` does not
    offer is a UsageError, as in ``masorch run``."""
    check_agent_models(cfg.subagent_models, agents)
    built: dict[str, Backend] = {}

    def backend(model: str) -> Backend:
        if model not in built:
            built[model] = (lent or {}).get(model) or subagent_backend(cfg, model)
        return built[model]

    return RoleBackends(
        subagent=backend(cfg.subagent),
        per_kind={kind: backend(model) for kind, model in cfg.subagent_models.items()},
    )


def plan_rewards(
    cfg: TrainConfig,
    agents: AgentRegistry,
    retriever: Retriever | None,
    *,
    backends: Mapping[str, Backend] | None = None,
    on_batch: BatchHook | None = None,
) -> PlanRewards:
    """The reward functions of a config: sampled plans run by ``agents`` on the config's sub-agent
    models (:func:`subagent_roles`; ``backends`` lends some by model string) within the per-plan
    limits (:func:`rollout_settings`), weighted and cost-targeted as the config says."""
    executor = PlanExecutor(
        agents, subagent_roles(cfg, agents, backends), rollout_settings(cfg), retriever=retriever
    )
    cost = CostTarget(calls=cfg.cost_target_calls, tokens=cfg.cost_target_tokens, cap=cfg.cost_cap)
    return PlanRewards(executor, weights=cfg.reward_weights, cost_target=cost, on_batch=on_batch)


@dataclass
class HeldOut:
    """The before/after evaluation of a training run: its held-out rows through the eval harness.

    ``backends`` are sub-agent backends lent by a test, by model string; each evaluation builds
    its own of every other model (same cache), since it runs on its own event loop.
    """

    cfg: TrainConfig
    rows: list[Row]
    agents: AgentRegistry
    corpus: Path | None
    backends: Mapping[str, Backend] = field(default_factory=dict)

    def evaluate(
        self, tag: str, policy: Any, tokenizer: Any, *, resume: bool = False
    ) -> tuple[EvalSummary | None, EvalSummary | None]:
        """Evaluate ``policy`` (a transformers model) greedily into ``<output_dir>/eval_<tag>`` and,
        with ``eval_sampled``, sampling into ``eval_<tag>_sampled``; None for what does not run.

        With ``resume`` a started evaluation of the same rows goes on where it stopped."""
        if not self.rows:
            return None, None
        system = self.cfg.policy_system()
        greedy = self._evaluate(tag, policy, tokenizer, system, resume)
        if not self.cfg.eval_sampled:
            return greedy, None
        cfg = self.cfg
        sampler = {"temperature": cfg.temperature, "top_p": cfg.top_p, "top_k": cfg.top_k, "min_p": cfg.min_p}
        sampling = system.model_copy(update={**sampler, "seed": cfg.seed})
        return greedy, self._evaluate(f"{tag}_sampled", policy, tokenizer, sampling, resume)

    def _evaluate(self, tag: str, policy: Any, tokenizer: Any, system: System, resume: bool) -> EvalSummary:
        from masorch.backends.hf import HFBackend

        t0 = time.monotonic()
        policy.eval()
        summary = evaluate_policy(
            HFBackend(policy, tokenizer, name=f"{self.cfg.model}@{tag}"),
            self.rows,
            Path(self.cfg.output_dir) / f"eval_{tag}",
            system=system,
            concurrency=self.cfg.concurrency,
            subagent_factory=self._subagent,
            agents_factory=lambda: self.agents,
            corpus=self.corpus,
            tag=tag,
            resume=resume,
        )
        logger.info("eval %s (%.0f s): %s", tag, time.monotonic() - t0, summary)
        return summary

    def _subagent(self, model: str) -> Backend:
        lent = self.backends.get(model)
        return SharedBackend(lent) if lent is not None else subagent_backend(self.cfg, model)


def rollout_constraint(cfg: TrainConfig, agents: AgentRegistry) -> GenerateConfig:
    """The settings whose ``grammar`` or ``json_schema`` the training plans decode under: the plan
    constraint inference uses (:func:`masorch.run.orchestrate.plan_generate_config`, the offered
    kinds, DoM and limits) with ``constrain_rollouts``, neither without it."""
    if not cfg.constrain_rollouts:
        return GenerateConfig()
    options = dataclasses.replace(OrchestrateOptions.of(cfg.policy_system()), constrain=True)
    settings = plan_generate_config(agents.catalogue(), options)
    if settings.grammar is None and settings.json_schema is None:
        raise UsageError(
            f"constrain_rollouts: the offered kinds cannot be written in the {cfg.dialect} constraint",
            hint="set constrain_rollouts: false",
        )
    return settings


def _grpo_trainer(
    cfg: TrainConfig,
    args: Any,
    constraint: GenerateConfig,
    policy: Any,
    tokenizer: Any,
    rewards: PlanRewards,
    rows: list[Row],
    callback: Any,
) -> Any:
    """TRL's GRPOTrainer over the prompt ``rows``, one reward function per component, its plans
    decoded under ``constraint`` (the dialect's, with ``constrain_rollouts``)."""
    from datasets import Dataset

    from masorch.train.constrained import grpo_trainer

    return grpo_trainer(
        constraint.grammar,
        constraint.json_schema,
        model=policy,
        reward_funcs=list[Any](rewards.reward_funcs()),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(cfg) if cfg.lora else None,
        callbacks=[callback],
    )


def train_grpo(
    cfg: TrainConfig,
    *,
    backends: Mapping[str, Backend] | None = None,
    agents: AgentRegistry | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
) -> TrainReport:
    """Run GRPO as ``cfg`` says; ``backends`` (sub-agent backends by model string) and ``agents``
    replace the configured ones (tests)."""
    require_train_stack()
    from masorch.train.gguf import check_model_source, load_policy

    out = Path(cfg.output_dir)
    t_start = time.monotonic()
    check_model_source(cfg.model)
    run_config = cfg.model_dump(mode="json")
    check_resume_config(out, run_config, resume=cfg.resume, overwrite=cfg.overwrite)
    agents = train_agents(cfg, agents)
    train_rows, held_rows = prompt_rows(cfg, agents)
    corpus = search_corpus([*cfg.train, *cfg.eval])
    retriever = search_retriever(corpus)  # before any backend exists: a missing corpus leaks nothing
    created = make_output_dir(out)  # after the model, data and corpus checks: those leave nothing
    started = False  # until the run's files change, a failure removes a directory it made
    rewards = None
    try:
        rewards = plan_rewards(
            cfg, agents, retriever, backends=backends, on_batch=SampleLog(out / SAMPLES_FILE)
        )
        held_out = HeldOut(cfg, held_rows, agents, corpus, dict(backends or {}))
        logger.info("%d training prompts, %d held-out", len(train_rows), len(held_rows))
        precision, weights_dtype = precisions(cfg.precision, cfg.lora)
        args = grpo_args(cfg, rewards.reward_weights(), precision)  # TRL's checks, before a model loads
        constraint = rollout_constraint(cfg, agents)
        model, tokenizer = load_policy(cfg.model, dtype=weights_dtype)
        # the run's files change only now, with the config, the data and the policy known good
        sitting = begin_sitting(
            out, {LOG_FILE: 1, SAMPLES_FILE: 0}, resume=cfg.resume, config=run_config, overwrite=cfg.overwrite
        )
        started = True
        before, before_sampled = held_out.evaluate("before", model, tokenizer, resume=cfg.resume)
        callback = log_callback(out / LOG_FILE, on_log, cfg.max_train_s)
        trainer = _grpo_trainer(cfg, args, constraint, model, tokenizer, rewards, train_rows, callback)
        trained = train_and_save(trainer, tokenizer, out, lora=cfg.lora, sitting=sitting)
        # the model evaluated "after" in an earlier sitting changed if this one trained further
        after, after_sampled = held_out.evaluate(
            "after", trained.model, tokenizer, resume=cfg.resume and trained.steps == sitting.step
        )
        report = TrainReport(
            output_dir=str(out),
            final_model=str(trained.final),
            steps=trained.steps,
            seconds_per_step=trained.seconds_per_step,
            wall_s=time.monotonic() - t_start,
            logs=callback.lines,
            eval_before=before,
            eval_after=after,
            eval_before_sampled=before_sampled,
            eval_after_sampled=after_sampled,
        )
        (out / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
        return report
    finally:
        if rewards is not None:
            rewards.close()
        if not started:
            discard_output_dir(out, created)
