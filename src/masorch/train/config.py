"""The GRPO training configuration: pydantic records whose fields document themselves, read from YAML.

Every field carries its meaning in ``Field(description=...)``; :func:`describe` lists them, and
``masorch train grpo --show-config`` prints that list. Unknown keys are errors that name the key
and the closest known one, so a typo never silently falls back to a default
(:class:`masorch.config.ConfigModel`). The fields that mean what a :class:`~masorch.run.system.System`
field means (DoM, dialect, constrained decoding, the per-plan budget, the plan token cap) have its
types, and :meth:`TrainConfig.policy_system` turns them into the one system that the rollouts and
the before/after evaluation both derive their settings from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import Field, field_validator, model_validator

from masorch.backends.cache import CacheMode
from masorch.backends.registry import check_model_string
from masorch.config import ConfigModel, describe_fields
from masorch.errors import UsageError
from masorch.plan.model import DoM
from masorch.plan.parse import Dialect
from masorch.run.budget import Budget
from masorch.run.system import System
from masorch.score.registry import canonical_scorer
from masorch.train.reward_components import DEFAULT_WEIGHTS

Precision = Literal["auto", "bf16", "fp32"]
#: The values of ``precision``.
PRECISIONS: tuple[str, ...] = get_args(Precision)


def check_models(models: Mapping[str, str | None]) -> None:
    """A UsageError naming the key unless each model string (``None``: unset) is ``provider:model``
    with a known provider; nothing is built, so a config fails on loading, before a run writes."""
    for key, model in models.items():
        if model is None:
            continue
        try:
            check_model_string(model)
        except UsageError as exc:
            raise UsageError(f"config.{key}: {exc.message}", hint=exc.hint) from None


def check_weights(key: str, weights: Mapping[str, float]) -> None:
    """A UsageError unless every reward weight is >= 0 and one of them is above 0."""
    for name, weight in weights.items():
        if weight < 0:
            raise UsageError(
                f"config.{key}.{name} is {weight}: a weight is >= 0",
                hint="a component the policy should not earn gets weight 0",
            )
    if not any(weights.values()):
        raise UsageError(
            f"config.{key}: every weight is 0, so every sample earns the same reward and nothing is learnt",
            hint="give the component that measures success a weight, e.g. 1.0",
        )


#: The TRL config fields masorch sets from a config field of its own (TRL name: config field);
#: the ``trl`` pass-through may not set them, or a checked field would be silently replaced.
COMMON_OWNED = {
    "output_dir": "output_dir",
    "logging_steps": "logging_steps",
    "save_steps": "save_steps",
    "save_strategy": "save_steps",
    "save_total_limit": "keep_checkpoints",
    "seed": "seed",
    "bf16": "precision",
    "gradient_checkpointing": "gradient_checkpointing",
    "per_device_train_batch_size": "batch_size",
    "max_steps": "max_steps",
    "learning_rate": "learning_rate",
}
GRPO_OWNED = {
    **COMMON_OWNED,
    "num_generations": "num_generations",
    "beta": "beta",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "max_completion_length": "max_completion_length",
    "reward_weights": "reward_weights",
}


def check_trl(trl: Mapping[str, Any], owned: Mapping[str, str]) -> None:
    """A UsageError naming the config field to set instead when the ``trl`` pass-through sets a TRL
    field that masorch sets from one of its own (``owned``)."""
    for key in trl:
        if key in owned:
            raise UsageError(
                f"config.trl.{key}: masorch sets TRL's {key} from the config's own `{owned[key]}`",
                hint=f"set `{owned[key]}` instead and remove trl.{key}",
            )


#: The fields each kind of prompt source reads.
_SOURCE_FIELDS: dict[str, frozenset[str]] = {
    "masbench": frozenset({"kind", "path", "skip", "limit", "scorer"}),
    "masbench_gen": frozenset(
        {"kind", "axis", "values", "count", "split", "seed", "skip", "limit", "scorer"}
    ),
    "dataset": frozenset({"kind", "name", "where", "skip", "limit", "scorer"}),
}


class SourceConfig(ConfigModel):
    """One source of prompts: a MASBench file, generated MASBench tasks, or an eval dataset."""

    kind: Literal["masbench", "masbench_gen", "dataset"] = Field(
        default="masbench",
        description="masbench (a JSONL/parquet file), masbench_gen (generated now) or dataset",
    )
    path: str | None = Field(
        default=None, description="masbench: the .jsonl or .parquet file of MASBench instances"
    )
    name: str | None = Field(
        default=None, description="dataset: a masorch.eval.datasets name (aime24, hotpotqa, ...)"
    )
    axis: Literal["depth", "horizon", "breadth", "parallel", "robustness"] = Field(
        default="depth", description="masbench_gen: the MASBench axis"
    )
    values: str = Field(default="2-4", description="masbench_gen: axis values, e.g. 2-4 or 2,3,8")
    count: int = Field(
        default=32, ge=1, description="masbench_gen: instances in all (spread over the values)"
    )
    split: Literal["train", "test"] = Field(
        default="train", description="masbench_gen: train or test (template-disjoint)"
    )
    seed: int = Field(default=0, description="masbench_gen: generator seed")
    where: dict[str, str] = Field(
        default_factory=dict,
        description="dataset: keep the items whose fields have these values (HotpotQA: {type: bridge})",
    )
    skip: int = Field(
        default=0, ge=0, description="leave out the first N items (keeps a held-out range disjoint)"
    )
    limit: int | None = Field(default=None, ge=0, description="keep at most this many prompts of this source")
    scorer: str | None = Field(
        default=None, description="grading of the executed answer (default: masbench, or the dataset's)"
    )

    @model_validator(mode="after")
    def _fields_of_its_kind(self) -> SourceConfig:
        """A field another kind of source reads is refused: it would be ignored without a word."""
        foreign = sorted(self.model_fields_set - _SOURCE_FIELDS[self.kind])
        if foreign:  # a ValueError, so the error names the source (config.train[0])
            raise ValueError(
                f"a {self.kind} source does not read {', '.join(foreign)}; it takes "
                f"{', '.join(sorted(_SOURCE_FIELDS[self.kind]))}"
            )
        return self

    @field_validator("scorer")
    @classmethod
    def _known_scorer(cls, name: str | None) -> str | None:
        if name is not None:
            try:
                canonical_scorer(name)
            except UsageError as exc:  # a ValueError, so the error names the key (config.train[0].scorer)
                raise ValueError(f"{exc.message}; {exc.hint}") from None
        return name


def _overlap(a: SourceConfig, b: SourceConfig) -> bool:
    """Whether two sources can yield the same items: the same items in the same order (a dataset
    with the same filter, a file, tasks generated alike) and overlapping skip/limit ranges."""
    if a.kind != b.kind:
        return False
    same = {
        "dataset": lambda: (a.name, a.where) == (b.name, b.where),
        "masbench": lambda: a.path == b.path,
        "masbench_gen": lambda: (
            (a.axis, a.values, a.split, a.seed, a.count) == (b.axis, b.values, b.split, b.seed, b.count)
        ),
    }[a.kind]()
    a_end = a.skip + a.limit if a.limit is not None else math.inf
    b_end = b.skip + b.limit if b.limit is not None else math.inf
    return same and a.skip < b_end and b.skip < a_end


class PolicyTraining(ConfigModel):
    """The fields GRPO and SFT share: the policy being trained, LoRA, precision, checkpointing,
    logging, saving, the time limit and the seed."""

    model: str = Field(
        default="local:qwen2.5-coder-0.5b",
        min_length=1,
        description="orchestrator to train: local:<embedded GGUF>, a .gguf path, or a Hugging Face model dir",
    )
    lora: bool = Field(default=True, description="train LoRA adapters (peft) instead of all weights")
    lora_r: int = Field(default=8, ge=1, description="LoRA rank")
    lora_alpha: int = Field(default=16, ge=1, description="LoRA alpha")
    lora_dropout: float = Field(default=0.0, ge=0, lt=1, description="LoRA dropout")
    precision: Precision = Field(
        default="auto",
        description=(
            "auto (bf16 where the hardware has fast bf16: a CUDA GPU, or a CPU with AMX/AVX512-BF16; "
            "else fp32), bf16 or fp32. bf16 with LoRA keeps the frozen base weights in bf16 and the "
            "adapters in fp32; full training keeps fp32 weights under bf16 autocast"
        ),
    )
    lora_target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="modules LoRA adapts",
    )
    gradient_checkpointing: bool = Field(
        default=True,
        description=(
            "recompute activations in the backward pass instead of keeping them: more compute, far less "
            "memory (without it, GRPO on 8 x 1,300-token sequences of a 0.5B model passed 24 GB on a CPU)"
        ),
    )
    logging_steps: int = Field(default=1, ge=1, description="log every N steps")
    save_steps: int = Field(
        default=0, ge=0, description="save a checkpoint every N steps (0: only at the end)"
    )
    keep_checkpoints: int = Field(
        default=2, ge=1, description="checkpoints kept in output_dir (the oldest deleted as new ones come)"
    )
    resume: bool = Field(
        default=False,
        description=(
            "continue the run in output_dir from its newest checkpoint (written every save_steps), or "
            "start it if there is none: the same command can end each sitting and begin the next. Log "
            "lines of steps past the checkpoint are dropped; a started held-out evaluation goes on"
        ),
    )
    overwrite: bool = Field(
        default=False,
        description=(
            "start the run over in an output_dir that holds one (its checkpoints, log and sampled plans "
            "are deleted); without it (and without resume) such a directory is refused"
        ),
    )
    max_train_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "stop training cleanly after this many seconds (then save; GRPO then evaluates); None: no limit"
        ),
    )
    seed: int = Field(default=0, ge=0, description="random seed")


class PolicySampling(ConfigModel):
    """How a GRPO policy samples, besides its temperature: the cut of the distribution, the same in
    the training rollouts and in the held-out sampled evaluation."""

    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus cut of the sampled plans (1: none)")
    top_k: int | None = Field(
        default=None,
        ge=0,
        description=(
            "keep the k likeliest tokens (0: no cut; unset: each engine's default, TRL's training "
            "sampler none, the sampled evaluation transformers' 50)"
        ),
    )
    min_p: float | None = Field(
        default=None, ge=0, le=1, description="drop tokens under min_p times the likeliest's probability"
    )
    constrain_rollouts: bool = Field(
        default=False,
        description=(
            "decode the training rollouts under the grammar inference uses (grpo: the plan's dialect "
            "grammar or JSON schema; rounds: the tool-call grammar of each turn); off: free sampling"
        ),
    )


class TrainConfig(PolicyTraining, PolicySampling):
    """Everything ``masorch train grpo`` needs; the defaults make a small LOW-DoM MASBench run."""

    show_config: ClassVar[str] = "masorch train grpo --show-config"
    what: ClassVar[str] = "training config"

    # -- prompts --
    train: list[SourceConfig] = Field(
        default_factory=list, description="prompt sources for training (at least one)"
    )
    eval: list[SourceConfig] = Field(
        default_factory=list, description="held-out prompt sources for the before/after evaluation"
    )
    eval_limit: int = Field(
        default=16,
        ge=0,
        description="held-out prompts evaluated before and after training (0: no evaluation)",
    )
    eval_overlaps_train: bool = Field(
        default=False,
        description=(
            "allow eval sources that share items with the train sources (a pilot that evaluates on "
            "training items on purpose); by default such an overlap is refused"
        ),
    )
    eval_sampled: bool = Field(
        default=False,
        description=(
            "evaluate the held-out prompts a second time with the policy sampling as in training "
            "(temperature, top_p, top_k, min_p; one plan a prompt, seeded), besides the greedy evaluation"
        ),
    )
    dom: DoM = Field(
        default=DoM.LOW,
        strict=False,  # YAML writes the value ("low"), which only lax mode reads as the enum
        description="degree of MAS in the orchestrator prompt and validation: low or high",
    )
    dialect: Dialect = Field(
        default="calls", description="plan dialect the orchestrator is asked to write: calls, json or xml"
    )
    prompt_examples: str | None = Field(
        default=None,
        description=(
            "text that replaces the orchestrator prompt's worked example plans in training and "
            'evaluation alike (calls and json dialects; "" leaves them out; None: the default examples)'
        ),
    )
    constrain: bool = Field(
        default=False,
        description=(
            "decode the held-out evaluation's plans under the dialect's grammar where the backend can "
            "(the training rollouts: constrain_rollouts)"
        ),
    )
    # -- the sub-agents that execute sampled plans --
    subagent: str = Field(
        default="local:smollm2-135m", min_length=1, description="sub-agent model string (provider:model)"
    )
    subagent_models: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "per agent kind, the model that runs it instead of `subagent` in training and evaluation "
            "alike, e.g. {cot: local:qwen2.5-coder-0.5b} (an eval system's agent_models)"
        ),
    )
    subagent_max_tokens: int = Field(default=256, ge=1, description="completion cap of each sub-agent call")
    cache_path: str | None = Field(
        default=None,
        description=(
            "record/replay SQLite cache of sub-agent calls (default: <output_dir>/subagent_cache.sqlite)"
        ),
    )
    cache_mode: CacheMode = Field(
        default="read_write", description="sub-agent cache mode: read_write, replay, record or off"
    )
    plan_max_calls: int | None = Field(default=16, ge=1, description="per-plan budget: sub-agent calls")
    plan_max_tokens: int | None = Field(default=None, ge=0, description="per-plan budget: sub-agent tokens")
    plan_deadline_s: float | None = Field(
        default=180.0, gt=0, description="per-plan wall-clock deadline (seconds)"
    )
    concurrency: int = Field(default=4, ge=1, description="sampled plans executed at once")
    # -- reward --
    reward_weights: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        description="weight of each component: correctness, validity, dom, cost",
    )
    cost_target_calls: int | None = Field(
        default=8, ge=0, description="cost component: sub-agent calls per plan before a penalty"
    )
    cost_target_tokens: int | None = Field(
        default=None, ge=0, description="cost component: sub-agent tokens per plan before a penalty"
    )
    cost_cap: float = Field(
        default=1.0, ge=0, allow_inf_nan=False, description="cost component: largest penalty"
    )
    # -- GRPO (TRL) --
    num_generations: int = Field(default=4, description="K: plans sampled per prompt (the GRPO group)")
    batch_size: int = Field(
        default=4, ge=1, description="completions per optimisation step (a multiple of num_generations)"
    )
    max_steps: int = Field(default=20, ge=1, description="optimisation steps")
    learning_rate: float = Field(
        default=1e-4,
        gt=0,
        allow_inf_nan=False,
        description="learning rate (1e-4 suits LoRA; use ~1e-6 for full fine-tuning)",
    )
    beta: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="KL coefficient (0: no reference model, as in recent GRPO practice)",
    )
    temperature: float = Field(default=1.0, gt=0, description="sampling temperature of the K plans")
    max_completion_length: int = Field(default=160, ge=1, description="token cap of a sampled plan")
    output_dir: str = Field(
        default="runs/grpo", min_length=1, description="where checkpoints, logs and the final model go"
    )
    trl: dict[str, Any] = Field(
        default_factory=dict, description="extra GRPOConfig fields passed through unchanged (see TRL's docs)"
    )

    @model_validator(mode="after")
    def _group(self) -> TrainConfig:
        check_models(
            {
                "subagent": self.subagent,
                **{f"subagent_models.{k}": m for k, m in self.subagent_models.items()},
            }
        )
        unknown = sorted(set(self.reward_weights) - set(DEFAULT_WEIGHTS))
        if unknown:
            raise UsageError(
                f"config.reward_weights: unknown component {unknown[0]!r}",
                hint=f"components: {', '.join(DEFAULT_WEIGHTS)}",
            )
        check_weights("reward_weights", self.reward_weights)
        check_trl(self.trl, GRPO_OWNED)
        for i, held in enumerate(self.eval):
            for j, train in enumerate(self.train):
                if not self.eval_overlaps_train and _overlap(train, held):
                    raise UsageError(
                        f"config.eval[{i}] overlaps config.train[{j}]: "
                        "the same items would be trained on and held out",
                        hint="give the held-out source a skip past the train source's skip + limit "
                        "(or a test split of masbench_gen)",
                    )
        if self.num_generations < 2:
            raise UsageError(
                "num_generations must be >= 2: GRPO compares plans within a group", hint="e.g. 4"
            )
        if self.batch_size % self.num_generations:
            raise UsageError(
                f"batch_size {self.batch_size} is not a multiple of num_generations {self.num_generations}",
                hint=f"e.g. batch_size: {2 * self.num_generations}",
            )
        return self

    @property
    def plan_budget(self) -> Budget:
        """The per-plan budget: ``plan_max_calls`` sub-agent calls, ``plan_max_tokens`` tokens."""
        return Budget(max_calls=self.plan_max_calls, max_tokens=self.plan_max_tokens)

    def policy_system(self) -> System:
        """The policy as a ``mas:<dom>`` system: what its plans are checked and run with.

        Its orchestrator is the policy (the sub-agent model stands in until a caller names it),
        writing one greedy plan in ``dialect`` with no repair, capped at ``max_completion_length``
        tokens (``constrain`` applies to the evaluation only; ``constrain_rollouts`` to the
        trainer's samples), run by
        ``subagent`` within :attr:`plan_budget` and ``plan_deadline_s``. The rollouts
        (:meth:`masorch.train.rollout.RolloutSettings.of`) and the before/after evaluation
        (:func:`masorch.train.evaluate.evaluate_policy`) both derive their settings from it.
        """
        return System(
            mode="mas",
            variant=self.dom.value,
            model=self.subagent,
            agent_models=dict(self.subagent_models),
            dialect=self.dialect,
            prompt_examples=self.prompt_examples,
            constrain=self.constrain,
            plan_tokens=self.max_completion_length,
            budget=self.plan_budget,
            timeout_s=self.plan_deadline_s,
        )


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read a YAML training config; ``overrides`` (keys, dotted for nested ones) win over the file."""
    cfg = TrainConfig.load(path, overrides)
    if not cfg.train:
        raise UsageError(
            f"{path} has no train sources", hint="add train: [{kind: masbench_gen, axis: depth}]"
        )
    return cfg


def describe() -> list[tuple[str, str, str]]:
    """(name, default, help) of every field, nested source fields as ``train[] / eval[]: <name>``."""
    return describe_fields(TrainConfig)
