"""GRPO on one machine with TRL: sample K whole plans per prompt, execute each, reward its answer.

:func:`train_grpo` wires the pieces together through TRL's extension points only: the prompt
dataset (:mod:`masorch.train.data`), the reward functions (:class:`masorch.train.rewards.PlanRewards`,
one per component, weighted by ``GRPOConfig.reward_weights``), a ``TrainerCallback`` that appends
every log line to ``<output_dir>/log.jsonl``, and peft's ``LoraConfig`` for LoRA. The final model
is saved as a plain Hugging Face checkpoint in ``<output_dir>/final`` (LoRA merged), loadable by
``transformers``, by ``masorch`` as ``hf:<dir>`` and servable by vLLM.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.agents.base import AgentRegistry, Retriever
from masorch.backends.base import Backend
from masorch.errors import UsageError
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends
from masorch.train.config import TrainConfig
from masorch.train.data import Row, build_rows
from masorch.train.evaluate import EvalSummary, PolicyEval, SharedBackend, evaluate_policy
from masorch.train.reward_components import CostTarget
from masorch.train.rewards import PlanRewards
from masorch.train.rollout import PlanExecutor, RolloutSettings
from masorch.train.samples import SAMPLES_FILE, SampleLog
from masorch.train.trainer_parts import (
    LOG_FILE,
    REPORT_FILE,
    grpo_args,
    log_callback,
    lora_config,
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
            "logs": self.logs,
        }


def rollout_settings(cfg: TrainConfig) -> RolloutSettings:
    """The per-plan limits of a config, and its dialect (the one inference parses, not ``auto``)."""
    return RolloutSettings(
        dialect=cfg.dialect,
        budget=Budget(max_calls=cfg.plan_max_calls, max_tokens=cfg.plan_max_tokens),
        timeout_s=cfg.plan_deadline_s,
        concurrency=cfg.concurrency,
    )


def subagent_backend(cfg: TrainConfig) -> Backend:
    """The sub-agent backend of a config, wrapped in the record/replay cache unless it is off."""
    from masorch.backends.registry import BackendSettings, make_backend

    cache = Path(cfg.cache_path) if cfg.cache_path else Path(cfg.output_dir) / "subagent_cache.sqlite"
    cache.parent.mkdir(parents=True, exist_ok=True)
    settings = BackendSettings(cache_path=cache, cache_mode=cfg.cache_mode)  # type: ignore[arg-type]
    return make_backend(cfg.subagent, settings=settings)


def prompt_rows(cfg: TrainConfig, agents: AgentRegistry) -> tuple[list[Row], list[Row]]:
    """Training rows and held-out rows (``eval`` sources, else the last ``eval_limit`` train rows)."""
    budget = Budget(max_calls=cfg.plan_max_calls, max_tokens=cfg.plan_max_tokens)
    catalogue = agents.catalogue()
    train = build_rows(cfg.train, dom=cfg.dom, dialect=cfg.dialect, catalogue=catalogue, budget=budget)
    if cfg.eval_limit <= 0:
        return train, []
    if cfg.eval:
        held = build_rows(cfg.eval, dom=cfg.dom, dialect=cfg.dialect, catalogue=catalogue, budget=budget)
        return train, held[: cfg.eval_limit]
    if len(train) <= cfg.eval_limit:
        raise UsageError(
            f"{len(train)} train rows cannot spare {cfg.eval_limit} held-out rows",
            hint="add eval sources, lower eval_limit, or raise the train limit",
        )
    return train[: -cfg.eval_limit], train[-cfg.eval_limit :]


def search_corpus(cfg: TrainConfig) -> Path | None:
    """The HotpotQA search corpus when a source of ``cfg`` is HotpotQA (search agents need it), else None."""
    if not any(src.kind == "dataset" and src.name == "hotpotqa" for src in [*cfg.train, *cfg.eval]):
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
    return offered_registry(agents, retriever=search_corpus(cfg) is not None)


def search_retriever(corpus: Path | None) -> Retriever | None:
    """The BM25 retriever over ``corpus`` (from :func:`search_corpus`), or None without one."""
    if corpus is None:
        return None
    from masorch.run.environment import default_retriever_factory

    return default_retriever_factory(corpus)


def train_grpo(
    cfg: TrainConfig,
    *,
    subagent: Backend | None = None,
    agents: AgentRegistry | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
) -> TrainReport:
    """Run GRPO as ``cfg`` says; ``subagent``/``agents`` replace the configured ones (tests)."""
    require_train_stack()
    from datasets import Dataset
    from trl import GRPOTrainer

    from masorch.backends.hf import HFBackend
    from masorch.train.gguf import load_policy

    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / LOG_FILE).unlink(missing_ok=True)
    (out / SAMPLES_FILE).unlink(missing_ok=True)
    t_start = time.monotonic()
    agents = train_agents(cfg, agents)
    train_rows, held_rows = prompt_rows(cfg, agents)
    corpus = search_corpus(cfg)
    retriever = search_retriever(corpus)  # before any backend exists: a missing corpus leaks nothing
    backends = RoleBackends(subagent=subagent or subagent_backend(cfg))
    settings = rollout_settings(cfg)
    executor = PlanExecutor(agents, backends, settings, retriever=retriever)

    def eval_subagent(model: str) -> Backend:
        # The evaluation runs on its own event loop, so it gets its own backend (same cache),
        # unless one was passed in, which it borrows.
        return SharedBackend(subagent) if subagent is not None else subagent_backend(cfg)

    cost = CostTarget(calls=cfg.cost_target_calls, tokens=cfg.cost_target_tokens, cap=cfg.cost_cap)
    rewards = PlanRewards(
        executor, weights=cfg.reward_weights, cost_target=cost, on_batch=SampleLog(out / SAMPLES_FILE)
    )
    try:
        logger.info("%d training prompts, %d held-out", len(train_rows), len(held_rows))
        precision, weights_dtype = precisions(cfg.precision, cfg.lora)
        model, tokenizer = load_policy(cfg.model, dtype=weights_dtype)

        def evaluate(tag: str, policy: Any) -> EvalSummary | None:
            if not held_rows:
                return None
            t0 = time.monotonic()
            policy.eval()
            summary = evaluate_policy(
                HFBackend(policy, tokenizer, name=f"{cfg.model}@{tag}"),
                held_rows,
                out / f"eval_{tag}",
                settings=PolicyEval(
                    dom=cfg.dom,
                    dialect=cfg.dialect,
                    constrain=cfg.constrain,
                    subagent=cfg.subagent,
                    max_plan_tokens=cfg.max_completion_length,
                    budget=settings.budget,
                    node_timeout_s=cfg.plan_deadline_s,
                    concurrency=cfg.concurrency,
                ),
                subagent_factory=eval_subagent,
                agents_factory=lambda: agents,
                corpus=corpus,
                tag=tag,
            )
            logger.info("eval %s (%.0f s): %s", tag, time.monotonic() - t0, summary)
            return summary

        before = evaluate("before", model)
        peft_config = lora_config(cfg) if cfg.lora else None
        callback = log_callback(out / LOG_FILE, on_log, cfg.max_train_s)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=list[Any](rewards.reward_funcs()),
            args=grpo_args(cfg, rewards.reward_weights(), precision),
            train_dataset=Dataset.from_list(train_rows),
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[callback],
        )
        trained = train_and_save(trainer, tokenizer, out, lora=cfg.lora)
        after = evaluate("after", trained.model)
        report = TrainReport(
            output_dir=str(out),
            final_model=str(trained.final),
            steps=trained.steps,
            seconds_per_step=trained.train_s / max(1, trained.steps),
            wall_s=time.monotonic() - t_start,
            logs=callback.lines,
            eval_before=before,
            eval_after=after,
        )
        (out / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
        return report
    finally:
        rewards.close()
