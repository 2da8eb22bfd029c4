"""The trajectory reward components (pure) and their config (pydantic, strict, closed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from masorch.errors import UsageError
from masorch.train.rounds_config import RoundsRewardConfig, RoundsTrainConfig, describe_rounds
from masorch.train.rounds_rewards import (
    TrajectoryFigures,
    components,
    diversity,
    efficiency,
    protocol_compliance,
    soft_budget,
    trajectory_reward,
)


def test_defaults_are_the_papers_thresholds_and_budgets() -> None:
    cfg = RoundsRewardConfig()
    assert (cfg.theta_par, cfg.theta_tool) == (1.25, 3)
    assert (cfg.tokens_target, cfg.tokens_max, cfg.units_target, cfg.units_max) == (12_288, 24_576, 8, 16)


def test_soft_budget_edges() -> None:
    assert soft_budget(12_288, 12_288, 24_576) == 1.0
    assert soft_budget(24_576, 12_288, 24_576) == 0.0
    assert soft_budget(18_432, 12_288, 24_576) == 0.5
    assert efficiency(0, 16) == 0.5 and efficiency(24_576, 0) == 0.5


@given(st.floats(0, 1e6), st.floats(1, 1e5))
def test_soft_budget_is_in_unit_range_and_falls(value: float, target: float) -> None:
    v = soft_budget(value, target, 2 * target)
    assert 0.0 <= v <= 1.0
    assert soft_budget(value + 1, target, 2 * target) <= v


def test_diversity_thresholds_are_inclusive() -> None:
    assert diversity([1, 2, 1, 1], ["a", "b", "c"]) == 1.0  # 1.25 calls a round, 3 tools
    assert diversity([1, 1, 1, 2], ["a", "b"], theta_tool=2) == 1.0
    assert diversity([1, 1, 1, 1], ["a", "b"], theta_tool=2) == 0.5


def test_protocol_counts_undelivered_and_missing_final() -> None:
    assert protocol_compliance(["OK", "REJECTED"], undelivered=1, answered=False) == 0.25  # 3 bad of 4
    assert protocol_compliance(["OK", "TIMEOUT", "BUDGET", "EXEC_ERR"]) == 1.0


def test_components_and_weighted_reward() -> None:
    tools = ("cot", "sc", "python")
    f = TrajectoryFigures((4, 1), ("OK",) * 5, tools, answered=True, tokens=20_000, units=12)
    parts = components(f, 1.0)
    assert parts["diversity"] == 1.0
    assert parts["efficiency"] == pytest.approx(0.5 * ((24_576 - 20_000) / 12_288 + 0.5))
    weights = RoundsRewardConfig(protocol=0.0, diversity=0.5).weights()
    assert trajectory_reward(parts, weights) == pytest.approx(1.0 + 0.5 + 0.1 * parts["efficiency"])


def test_config_is_strict_and_closed() -> None:
    cfg = RoundsTrainConfig(**{"train": [{"kind": "masbench_gen", "count": 2}], "rewards": {"theta_tool": 2}})
    assert cfg.rewards.theta_tool == 2 and cfg.options().max_calls_per_round == 4
    with pytest.raises(UsageError, match="did you mean 'theta_par'"):
        RoundsTrainConfig(rewards={"theta_parr": 1.0})
    with pytest.raises(UsageError, match="max_rounds"):
        RoundsTrainConfig(max_rounds="3")  # strict: no string coercion
    with pytest.raises(UsageError, match="above their targets"):
        RoundsTrainConfig(rewards={"units_target": 20})
    names = [name for name, _, _ in describe_rounds()]
    assert "rewards.theta_par" in names and "max_rounds" in names
    assert all(meaning for _, _, meaning in describe_rounds())


def test_a_group_can_be_split_into_accumulated_micro_batches(tmp_path) -> None:
    pytest.importorskip("trl")
    from masorch.train.rounds_grpo import rounds_grpo_args

    cfg = RoundsTrainConfig(
        num_generations=4, batch_size=2, gradient_accumulation_steps=2, output_dir=str(tmp_path / "o")
    )
    args = rounds_grpo_args(cfg, [1.0] * 4, "fp32")
    # one group of 4 trajectories sampled per step, trained on as 2 micro-batches of 2
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (2, 2)
    assert (args.generation_batch_size, args.num_generations) == (4, 4)
    assert args.max_tool_calling_iterations == cfg.max_rounds + 1
    with pytest.raises(UsageError, match=r"batch_size x gradient_accumulation_steps \(6\)"):
        RoundsTrainConfig(num_generations=4, batch_size=3, gradient_accumulation_steps=2)


def test_each_turn_is_capped_at_plan_tokens_as_at_inference(tmp_path) -> None:
    pytest.importorskip("trl")
    from masorch.train.rounds_grpo import rounds_grpo_args

    cfg = RoundsTrainConfig(plan_tokens=512, max_completion_length=6144, output_dir=str(tmp_path / "o"))
    args = rounds_grpo_args(cfg, [1.0] * 4, "fp32")
    assert (args.generation_kwargs, args.max_completion_length) == ({"max_new_tokens": 512}, 6144)
    # the trl pass-through adds generation arguments key by key (or overrides the cap, if it names it)
    cfg = cfg.model_copy(update={"trl": {"generation_kwargs": {"repetition_penalty": 1.1}}})
    args = rounds_grpo_args(cfg, [1.0] * 4, "fp32")
    assert args.generation_kwargs == {"max_new_tokens": 512, "repetition_penalty": 1.1}


def test_the_synthesis_answers_under_plan_tokens_as_at_inference() -> None:
    from masorch.run.round_exec import RoundsOptions
    from masorch.run.system import System

    system = System.parse("mas:rounds", model="local:m", plan_tokens=512)
    trained = RoundsTrainConfig(plan_tokens=512).options()
    assert trained.max_tokens == RoundsOptions.of(system).max_tokens == 512


def test_cli_lists_the_fields_and_refuses_bad_configs(tmp_path, capsys) -> None:
    from masorch.cli.main import main

    assert main(["train", "rounds", "--show-config"]) == 0
    out = capsys.readouterr().out
    assert "rewards.theta_par" in out and "max_calls_per_round" in out
    assert main(["train", "rounds"]) == 2
    cfg = tmp_path / "r.yaml"
    cfg.write_text("train: [{kind: masbench_gen, count: 2}]\nrewards: {theta_tol: 2}\n")
    assert main(["train", "rounds", "--config", str(cfg)]) == 2
    assert "theta_tool" in capsys.readouterr().err
    cfg.write_text("model: x\n")
    assert main(["train", "rounds", "--config", str(cfg)]) == 2  # no train sources


def test_the_docs_config_is_valid_and_shows_the_default_rewards() -> None:
    import re
    from pathlib import Path

    from masorch.files import load_yaml

    text = (Path(__file__).parents[2] / "docs" / "train.md").read_text(encoding="utf-8")
    block = re.search(r"## RL over trajectories.*?```yaml\n(.*?)```", text, re.DOTALL)
    assert block is not None
    cfg = RoundsTrainConfig(**load_yaml(block.group(1)))
    assert cfg.rewards == RoundsRewardConfig()  # the page lists the defaults
