"""The configuration of ``masorch train rounds``: GRPO over whole multi-round trajectories.

Two config records (:class:`~masorch.config.ConfigModel`: strict, closed, an unknown key is an
error naming the closest field): :class:`RoundsRewardConfig` holds every weight and threshold of
the trajectory reward (:mod:`masorch.train.rounds_rewards`), :class:`RoundsTrainConfig` the rest
of a run. Each field documents itself; ``masorch train rounds --show-config`` lists them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from masorch.config import ConfigModel, describe_fields
from masorch.errors import UsageError
from masorch.run.budget import Budget
from masorch.run.round_exec import RoundsOptions
from masorch.train.config import (
    GRPO_OWNED,
    PolicySampling,
    PolicyTraining,
    SourceConfig,
    check_models,
    check_trl,
    check_weights,
)


class RoundsRewardConfig(ConfigModel):
    """Weights and thresholds of the trajectory reward; the thresholds and budgets are the paper's."""

    show_config: ClassVar[str] = "masorch train rounds --show-config"

    success: float = Field(default=1.0, description="weight of task success (the scorer on the final answer)")
    protocol: float = Field(
        default=0.2, description="weight of protocol compliance (share of calls not FORMAT_ERR/REJECTED)"
    )
    diversity: float = Field(default=0.1, description="weight of diversity (parallel calls, distinct tools)")
    efficiency: float = Field(
        default=0.1, description="weight of efficiency (soft budgets on tokens and units)"
    )
    theta_par: float = Field(
        default=1.25, gt=0, description="mean parallel calls per round for half the diversity"
    )
    theta_tool: int = Field(default=3, ge=1, description="distinct tools per trajectory for the other half")
    tokens_target: float = Field(default=12_288, gt=0, description="L_tar: total tokens with full efficiency")
    tokens_max: float = Field(
        default=24_576, gt=0, description="L_max: total tokens where it reaches 0 (2x target)"
    )
    units_target: float = Field(default=8, gt=0, description="C_tar: cost units with full efficiency")
    units_max: float = Field(default=16, gt=0, description="C_max: cost units where it reaches 0 (2x target)")
    shaping_needs_success: bool = Field(
        default=False, description="diversity and efficiency count only for a trajectory whose task succeeded"
    )

    @model_validator(mode="after")
    def _maxima_above_targets(self) -> RoundsRewardConfig:
        if self.tokens_max <= self.tokens_target or self.units_max <= self.units_target:
            raise ValueError("tokens_max and units_max must be above their targets")
        return self

    def weights(self) -> dict[str, float]:
        """The weight of each component, by the names of :data:`masorch.train.rounds_rewards.COMPONENTS`."""
        return {
            "success": self.success,
            "protocol": self.protocol,
            "diversity": self.diversity,
            "efficiency": self.efficiency,
        }

    def thresholds(self) -> dict[str, Any]:
        """The keyword arguments of :func:`masorch.train.rounds_rewards.components`."""
        return self.model_dump(exclude={"success", "protocol", "diversity", "efficiency"})


class RoundsTrainConfig(PolicyTraining, PolicySampling):
    """Everything ``masorch train rounds`` needs; the defaults make a small MASBench run (the
    policy, LoRA, precision and logging fields are those ``train grpo`` and ``train sft`` share)."""

    show_config: ClassVar[str] = "masorch train rounds --show-config"
    what: ClassVar[str] = "rounds training config"

    chat_template: Literal["model", "qwen2_5"] = Field(
        default="model",
        description="the policy's own chat template, or TRL's Qwen2.5 one (tool calls as <tool_call> JSON) "
        "for a ChatML model whose template has no tools",
    )
    subagent: str = Field(
        default="local:qwen2.5-coder-0.5b", description="the model the sub-agent tools run on"
    )
    subagent_max_tokens: int = Field(default=512, ge=1, description="the cap on each sub-agent reply")
    synthesis: str | None = Field(
        default=None,
        description="the model that writes the answer from the trajectory when final_answer asks "
        "synthesize: true (as the rounds mode's synthesis model, e.g. local:qwen2.5-coder-1.5b; its "
        "tokens count for efficiency); none: synthesize is refused (FORMAT_ERR)",
    )
    cache_path: str | None = Field(
        default=None, description="sub-agent record/replay cache (default <output_dir>/subagent_cache.sqlite)"
    )
    cache_mode: Literal["read_write", "record", "replay", "off"] = Field(
        default="read_write", description="sub-agent cache mode (replay: no sub-agent model)"
    )
    train: list[SourceConfig] = Field(
        default_factory=list, description="prompt sources: masbench, masbench_gen or dataset (as for grpo)"
    )
    max_rounds: int = Field(
        default=12, ge=1, le=12, description="rounds per trajectory (the turn of final_answer aside)"
    )
    max_calls_per_round: int = Field(default=4, ge=1, le=4, description="tool calls per round")
    tool_costs: dict[str, float] = Field(
        default_factory=dict, description="cost units per tool kind, e.g. {sc: 3}"
    )
    max_units: float | None = Field(
        default=None, gt=0, description="units cap per trajectory (a call past it ends BUDGET)"
    )
    max_calls: int | None = Field(
        default=24,
        ge=1,
        description=(
            "LLM calls per trajectory: the policy's turns, the sub-agents' and the synthesis's, as the "
            "rounds mode's budget counts them at inference"
        ),
    )
    max_tokens: int | None = Field(
        default=None, ge=1, description="sub-agent and synthesis tokens per trajectory (not the policy's)"
    )
    plan_tokens: int = Field(
        default=1024,
        ge=1,
        description="tokens of each policy turn (as a mas:rounds system's plan_tokens at inference)",
    )
    node_timeout_s: float | None = Field(
        default=120.0, gt=0, description="time limit of each tool call (and of the synthesis call)"
    )
    rewards: RoundsRewardConfig = Field(
        default_factory=RoundsRewardConfig, description="weights and thresholds of the reward"
    )
    num_generations: int = Field(default=4, ge=2, description="K: trajectories per prompt (the GRPO group)")
    batch_size: int = Field(
        default=4,
        ge=1,
        description="trajectories per device step (times gradient_accumulation_steps: a multiple of K)",
    )
    gradient_accumulation_steps: int = Field(
        default=1,
        ge=1,
        description=(
            "device steps per optimisation step: a step trains on batch_size x this trajectories, sampled "
            "together, so a group's loss pass can be split to fit memory"
        ),
    )
    max_steps: int = Field(default=20, ge=1, description="optimisation steps")
    learning_rate: float = Field(default=1e-5, gt=0, description="learning rate")
    beta: float = Field(default=0.0, ge=0, description="KL coefficient (0: no reference model)")
    temperature: float = Field(default=1.0, gt=0, description="sampling temperature of the policy")
    max_completion_length: int = Field(
        default=2048,
        ge=1,
        description="tokens of a whole trajectory after the prompt: turns and tool results",
    )
    output_dir: str = Field(
        default="runs/rounds-grpo", min_length=1, description="where the log, samples and final model go"
    )
    trl: dict[str, Any] = Field(
        default_factory=dict, description="extra GRPOConfig fields, passed through (e.g. use_vllm: true)"
    )

    @model_validator(mode="after")
    def _groups_fit(self) -> RoundsTrainConfig:
        check_models({"subagent": self.subagent, "synthesis": self.synthesis})
        check_weights("rewards", self.rewards.weights())
        check_trl(self.trl, {**GRPO_OWNED, "gradient_accumulation_steps": "gradient_accumulation_steps"})
        per_step = self.batch_size * self.gradient_accumulation_steps
        if per_step % self.num_generations:
            raise ValueError(
                f"batch_size x gradient_accumulation_steps ({per_step}) is not a multiple of num_generations"
            )
        return self

    def options(self) -> RoundsOptions:
        """The limits each trajectory runs under, as the rounds mode takes them (the synthesis at
        the round cap answers in at most ``plan_tokens`` tokens, as a ``mas:rounds`` system's)."""
        return RoundsOptions(
            max_tokens=self.plan_tokens,
            max_rounds=self.max_rounds,
            max_calls_per_round=self.max_calls_per_round,
            budget=Budget(max_calls=self.max_calls, max_tokens=self.max_tokens),
            node_timeout_s=self.node_timeout_s,
            tool_costs=dict(self.tool_costs),
            max_units=self.max_units,
        )


def load_rounds_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RoundsTrainConfig:
    """Read a YAML ``train rounds`` config; ``overrides`` (keys, dotted for nested ones) win over the file."""
    cfg = RoundsTrainConfig.load(path, overrides)
    if not cfg.train:
        raise UsageError(f"{path} has no train sources", hint="train: [{kind: masbench_gen, axis: depth}]")
    return cfg


def describe_rounds() -> list[tuple[str, str, str]]:
    """(name, default, meaning) of every field, the reward's as ``rewards.<name>``."""
    return describe_fields(RoundsTrainConfig)
