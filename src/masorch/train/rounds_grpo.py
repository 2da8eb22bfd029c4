"""GRPO over whole multi-round trajectories with TRL: one sample is one trajectory of the rounds mode.

:func:`train_rounds` plugs into ``GRPOTrainer`` through its extension points only: the prompt
dataset (the rounds system prompt and the question), ``environment_factory`` (one
:class:`masorch.train.rounds_env.RoundsEnvironment` per trajectory: its methods are the tools, and
TRL masks their results out of the loss), the reward functions (:class:`RoundsRewards`, one per
component of :mod:`masorch.train.rounds_rewards`, weighted by ``GRPOConfig.reward_weights``), the
JSONL log callback and peft's LoRA (:mod:`masorch.train.trainer_parts`). The final model is saved
as a plain Hugging Face checkpoint in ``<output_dir>/final`` (LoRA merged).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.agents.base import AgentRegistry
from masorch.backends.base import Backend, ToolSpec
from masorch.backends.chat import hermes_block_count, tools_payload
from masorch.errors import UsageError
from masorch.run.executor import RoleBackends
from masorch.run.rounds import turn_grammar
from masorch.score.scorer import Scorer
from masorch.train.grpo import search_corpus, search_retriever, subagent_backend
from masorch.train.rounds_config import RoundsRewardConfig, RoundsTrainConfig
from masorch.train.rounds_env import RoundsEnvironment, RoundsSetting, environment_factory, rounds_prompt
from masorch.train.rounds_rewards import COMPONENTS, trajectory_reward
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

#: Every trajectory the policy played and its reward, one JSON line each, in the output directory.
TRAJECTORIES_FILE = "trajectories.jsonl"

RewardFunc = Callable[..., Awaitable[list[float | None]]]


class RoundsRewards:
    """TRL reward functions over the environments of a batch: one per component, each the pure
    function of :mod:`masorch.train.rounds_rewards` on the trajectory's figures.

    The components of a trajectory are computed once (on the first function TRL calls) and kept on
    its rollout; the first function also logs the batch's trajectory figures (``rounds/...``) and
    appends each trajectory to ``log_path``.
    """

    def __init__(self, config: RoundsRewardConfig, log_path: Path | None = None) -> None:
        self.config = config
        self.log_path = log_path
        self._scorers: dict[str, Scorer] = {}

    def reward_funcs(self) -> list[RewardFunc]:
        """One function per component, named after it (TRL logs ``rewards/<name>/mean``)."""
        return [self._func(name) for name in COMPONENTS]

    def reward_weights(self) -> list[float]:
        """The weights, in the order of :meth:`reward_funcs`."""
        weights = self.config.weights()
        return [weights[name] for name in COMPONENTS]

    async def parts(
        self,
        completions: Sequence[Any],
        environments: Sequence[RoundsEnvironment],
        completion_ids: Sequence[Sequence[int]] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        step: int = 0,
    ) -> list[dict[str, float]]:
        """Every component of each trajectory of the batch (computed once per trajectory, after
        :meth:`Rollout.close`, which the component functions TRL runs together share)."""
        await asyncio.gather(
            *(env.rollout.close(_turn_texts(completions[i])) for i, env in enumerate(environments))
        )
        fresh = [env.rollout for env in environments if env.rollout.components is None]
        for i, env in enumerate(environments):
            rollout = env.rollout
            if rollout.components is not None:
                continue
            rollout.score(
                self.config,
                self._scorers,
                trainer_calls=_trainer_calls(completions[i]),
                policy_tokens=len(completion_ids[i]) if completion_ids is not None else 0,
            )
        if fresh:
            self._log(fresh, log_metric, step)
        return [dict(env.rollout.components or {}) for env in environments]

    def _func(self, name: str) -> RewardFunc:
        # Async, so that TRL runs it on the event loop of the environments' tools, where a
        # trajectory at the round cap is closed by its synthesis call.
        async def reward(
            completions: Sequence[Any],
            environments: Sequence[RoundsEnvironment] = (),
            completion_ids: Sequence[Sequence[int]] | None = None,
            log_metric: Callable[[str, float], None] | None = None,
            trainer_state: Any = None,
            **_: Any,
        ) -> list[float | None]:
            step = int(getattr(trainer_state, "global_step", 0) or 0)
            parts = await self.parts(completions, environments, completion_ids, log_metric, step)
            return [p[name] for p in parts]

        reward.__name__ = name
        return reward

    def _log(
        self, rollouts: Sequence[Any], log_metric: Callable[[str, float], None] | None, step: int
    ) -> None:
        weights = self.config.weights()
        records = []
        for r in rollouts:
            f = r.figures_seen
            assert f is not None
            records.append(
                {
                    "step": step,
                    "id": r.row.get("id", ""),
                    "question": r.question,
                    "answer": r.answer,
                    "synthesized": r.synthesized,
                    "synthesis_error": r.synthesis_error,
                    "ground_truth": r.row.get("ground_truth", ""),
                    "reward": trajectory_reward(r.components, weights),
                    "components": r.components,
                    "rounds": r.rounds,
                    "calls_per_round": list(f.calls_per_round),
                    "statuses": list(f.statuses),
                    "tools": list(f.tools),
                    "undelivered": f.undelivered,
                    "tokens": f.tokens,
                    "units": f.units,
                }
            )
        if log_metric is not None:
            n = len(records)
            log_metric("rounds/rounds", sum(r["rounds"] for r in records) / n)
            calls = sum(len(r["statuses"]) for r in records)
            log_metric("rounds/calls", calls / n)
            log_metric("rounds/answered", sum(bool(r["answer"]) for r in records) / n)
            log_metric("rounds/units", sum(r["units"] for r in records) / n)
            log_metric("rounds/tokens", sum(r["tokens"] for r in records) / n)
            bad = sum(s in ("FORMAT_ERR", "REJECTED") for r in records for s in r["statuses"])
            log_metric("rounds/bad_call_rate", bad / calls if calls else 0.0)
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as fh:
                for rec in records:
                    fh.write(json.dumps(rec) + "\n")


def _turn_texts(completion: Any) -> list[tuple[str, list[str]]]:
    """The text and tool names of each of the policy's turns in one completion (TRL's assistant
    messages)."""
    if not isinstance(completion, Sequence) or isinstance(completion, str):
        return []
    turns = [m for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
    return [(str(m.get("content") or ""), _call_names(m)) for m in turns]


def _call_names(message: Mapping[str, Any]) -> list[str]:
    calls = message.get("tool_calls") or ()
    functions = [c.get("function") for c in calls if isinstance(c, Mapping)]
    return [str(f.get("name", "")) for f in functions if isinstance(f, Mapping)]


def _trainer_calls(completion: Any) -> int:
    """The tool calls the policy wrote in its turns of one completion: per turn, those the trainer
    parsed, or more where the turn's text still holds ``<tool_call>`` blocks (TRL leaves a turn it
    cannot parse as plain text, so its calls, good or bad, are never delivered).

    >>> _trainer_calls([{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "cot"}}]}])
    1
    >>> text = '<tool_call>{"name": "cot"}</tool_call><tool_call>{bad</tool_call>'
    >>> _trainer_calls([{"role": "assistant", "content": text}])
    2
    """
    if not isinstance(completion, Sequence) or isinstance(completion, str):
        return 0
    return sum(
        max(len(m.get("tool_calls") or ()), hermes_block_count(str(m.get("content") or "")))
        for m in completion
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    )


@dataclass
class RoundsReport:
    """What a run did: steps, time per step, the per-step log lines."""

    output_dir: str
    final_model: str
    steps: int
    seconds_per_step: float
    wall_s: float
    logs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the content of ``report.json``)."""
        return dict(self.__dict__)


def rounds_questions(cfg: RoundsTrainConfig, agents: AgentRegistry) -> list[dict[str, Any]]:
    """Each train source's questions with their gold answer and scorer (read before any backend is
    built, so a bad source leaves nothing behind)."""
    from masorch.plan import DoM
    from masorch.train.data import build_rows

    return build_rows(cfg.train, dom=DoM.LOW, dialect="calls", catalogue=agents.catalogue())


def rounds_rows(
    cfg: RoundsTrainConfig, agents: AgentRegistry, questions: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The training rows: each question (``questions``, else :func:`rounds_questions`) with the
    rounds prompt, gold answer and scorer. No model is built (``masorch train data --rounds``
    writes them without one)."""
    rows = rounds_questions(cfg, agents) if questions is None else questions
    options = cfg.options()
    return [
        {
            **{k: v for k, v in row.items() if k not in ("prompt", "dom")},
            "prompt": rounds_prompt(agents, options, row["question"]),
        }
        for row in rows
    ]


def rounds_setting(
    cfg: RoundsTrainConfig,
    *,
    subagent: Backend | None = None,
    agents: AgentRegistry | None = None,
    synthesis: Backend | None = None,
) -> RoundsSetting:
    """The sub-agents, their model, the search corpus, the synthesis model and the per-trajectory
    limits of ``cfg`` (``subagent``, ``agents`` and ``synthesis`` replace the configured ones in
    tests). Both models are built by :func:`masorch.train.grpo.subagent_backend` (one cache).

    ``search`` is offered, over the HotpotQA BM25 corpus, exactly when a train source is HotpotQA
    (:func:`masorch.train.grpo.search_corpus`, the choice of ``train grpo``)."""
    corpus = search_corpus(cfg.train)
    retriever = search_retriever(corpus)  # before any backend exists: a missing corpus leaks nothing
    agents = agents or rounds_agents(cfg)
    subagent = subagent or subagent_backend(cfg)
    if synthesis is None and cfg.synthesis is not None:
        synthesis = subagent if cfg.synthesis == cfg.subagent else subagent_backend(cfg, cfg.synthesis)
    return RoundsSetting(
        agents=agents,
        backends=RoleBackends(subagent),
        options=cfg.options(),
        retriever=retriever,
        synthesis=synthesis,
    )


def rounds_agents(cfg: RoundsTrainConfig) -> AgentRegistry:
    """The sub-agents a run offers (each answer capped at ``subagent_max_tokens``): ``search`` exactly
    when a train source is HotpotQA, and the kinds that read a reasoning history."""
    from masorch.agents.registry import default_registry, offered_registry

    corpus = search_corpus(cfg.train)
    return offered_registry(
        default_registry(max_tokens=cfg.subagent_max_tokens), retriever=corpus is not None, history=True
    )


def rollout_grammar(cfg: RoundsTrainConfig, setting: RoundsSetting) -> str | None:
    """The tool-call grammar of the policy's turns under ``constrain_rollouts`` (the one inference
    decodes a turn under: the offered kinds, the pool, ``max_calls_per_round``), else None."""
    if not cfg.constrain_rollouts:
        return None
    grammar = turn_grammar(setting.tool_calls(), setting.options)
    if grammar is None:
        raise UsageError(
            "constrain_rollouts: the offered tools cannot be written in the tool-call grammar",
            hint="set constrain_rollouts: false",
        )
    return grammar


def rounds_grpo_args(cfg: RoundsTrainConfig, weights: list[float], precision: str) -> Any:
    """TRL's ``GRPOConfig`` of a rounds config: a tool-calling turn per round plus the turn of
    ``final_answer``, each turn at most ``plan_tokens`` tokens (TRL generates every turn with its
    ``generation_kwargs``; ``max_completion_length`` caps the whole trajectory), and
    ``batch_size x gradient_accumulation_steps`` trajectories sampled together for each
    optimisation step (TRL's generation batch)."""
    return grpo_args(
        cfg,
        weights,
        precision,
        max_tool_calling_iterations=cfg.max_rounds + 1,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        generation_kwargs={"max_new_tokens": cfg.plan_tokens},
    )


def policy_tokenizer(tokenizer: Any, chat_template: str) -> Any:
    """The tokenizer with the chat template the config asks for (``qwen2_5``: TRL's, which it knows
    how to parse tool calls from)."""
    if chat_template == "qwen2_5":
        from trl.chat_template_utils import qwen2_5_chat_template

        tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def offered_schemas(tokenizer: Any, specs: Sequence[ToolSpec]) -> Any:
    """The tokenizer, rendering the environment's tool methods with the exact schemas inference
    offers (those of ``specs``, as :func:`masorch.backends.chat.tools_payload` writes them).

    TRL hands the chat template the environment's methods in name order, and transformers derives
    a method's schema from its signature and docstring, which cannot carry a parameter's bounds or
    default and adds a return type: the policy would be trained on a tools block it never sees in
    collection or evaluation. Here the tokenizer's ``apply_chat_template`` (this instance's only)
    puts each offered tool's own schema in place of the method of the same name, in the offered
    order (any other tool after them, as given); every other argument goes through unchanged.
    The wrapper is a closure over this tokenizer: a copy of it would render through this one, and
    it does not pickle (TRL 1.16 does neither)."""
    payload = {t["function"]["name"]: t for t in tools_payload(specs)}
    order = {name: i for i, name in enumerate(payload)}
    render = tokenizer.apply_chat_template

    def name_of(tool: Any) -> str:
        return str(getattr(tool, "__name__", "")) if callable(tool) else ""

    def apply_chat_template(*args: Any, tools: Sequence[Any] | None = None, **kwargs: Any) -> Any:
        if tools is not None:
            ranked = sorted(tools, key=lambda t: order.get(name_of(t), len(order)))
            tools = [payload.get(name_of(t), t) for t in ranked]
        return render(*args, tools=tools, **kwargs)

    tokenizer.apply_chat_template = apply_chat_template
    return tokenizer


def train_rounds(
    cfg: RoundsTrainConfig,
    *,
    subagent: Backend | None = None,
    agents: AgentRegistry | None = None,
    policy: tuple[Any, Any] | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
) -> RoundsReport:
    """Run GRPO over trajectories as ``cfg`` says; ``subagent``, ``agents`` and ``policy`` (a
    model and its tokenizer) replace the configured ones (tests)."""
    require_train_stack()
    from datasets import Dataset

    from masorch.train.constrained import grpo_trainer
    from masorch.train.gguf import check_model_source, load_policy

    out = Path(cfg.output_dir)
    t_start = time.monotonic()
    if policy is None:
        check_model_source(cfg.model)
    run_config = cfg.model_dump(mode="json")
    check_resume_config(out, run_config, resume=cfg.resume, overwrite=cfg.overwrite)
    agents = agents or rounds_agents(cfg)
    questions = rounds_questions(cfg, agents)
    created = make_output_dir(out)  # after the model and data checks: those leave nothing behind
    try:  # until the run's files change, a failure removes a directory it made
        setting = rounds_setting(cfg, subagent=subagent, agents=agents)
        rows = rounds_rows(cfg, setting.agents, questions)
        logger.info("%d training prompts; tools: %s", len(rows), ", ".join(setting.agents.catalogue()))
        rewards = RoundsRewards(cfg.rewards, out / TRAJECTORIES_FILE)
        precision, weights_dtype = precisions(cfg.precision, cfg.lora)
        args = rounds_grpo_args(
            cfg, rewards.reward_weights(), precision
        )  # TRL's checks, before a model loads
        model, tokenizer = policy or load_policy(cfg.model, dtype=weights_dtype)
        tokenizer = offered_schemas(
            policy_tokenizer(tokenizer, cfg.chat_template), setting.tool_calls().tools
        )
        grammar = rollout_grammar(cfg, setting)
        # the run's files change only now, with the config, the data and the policy known good
        sitting = begin_sitting(
            out,
            {LOG_FILE: 1, TRAJECTORIES_FILE: 0},
            resume=cfg.resume,
            config=run_config,
            overwrite=cfg.overwrite,
        )
    except BaseException:
        discard_output_dir(out, created)
        raise
    callback = log_callback(out / LOG_FILE, on_log, cfg.max_train_s)
    trainer = grpo_trainer(
        grammar,
        model=model,
        reward_funcs=list[Any](rewards.reward_funcs()),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(cfg) if cfg.lora else None,
        callbacks=[callback],
        environment_factory=environment_factory(setting),
    )
    trained = train_and_save(trainer, tokenizer, out, lora=cfg.lora, sitting=sitting)
    report = RoundsReport(
        output_dir=str(out),
        final_model=str(trained.final),
        steps=trained.steps,
        seconds_per_step=trained.seconds_per_step,
        wall_s=time.monotonic() - t_start,
        logs=callback.lines,
    )
    (out / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
    return report
