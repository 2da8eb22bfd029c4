"""GRPO rollouts under the inference grammar (``constrain_rollouts``): a random tiny policy, whose
free turns are noise, samples through TRL's own tool loop turns whose calls the round runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("llguidance")

from test_rounds_trl_cpu import boxed_one, tiny_config, tiny_policy

from masorch.agents.base import AgentRegistry
from masorch.agents.registry import default_registry
from masorch.errors import UsageError
from masorch.train.config import SourceConfig, TrainConfig
from masorch.train.grpo import rollout_constraint, train_grpo
from masorch.train.rounds_grpo import TRAJECTORIES_FILE, train_rounds
from masorch.train.samples import SAMPLES_FILE
from tiny_models import CHATML, byte_tokenizer, tiny_qwen2


def _trajectories(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / TRAJECTORIES_FILE).read_text().splitlines()]


def _run(tmp_path: Path, name: str, constrain: bool) -> list[dict[str, Any]]:
    import torch

    torch.manual_seed(0)
    model, tokenizer = tiny_policy()
    # one round, and turns long enough for a random policy to finish the grammar's text
    cfg = tiny_config(
        tmp_path / name,
        max_steps=1,
        max_rounds=1,
        plan_tokens=3000,
        max_completion_length=12_000,
        temperature=1.0,
        constrain_rollouts=constrain,
    )
    train_rounds(cfg, subagent=boxed_one(), policy=(model, tokenizer))
    return _trajectories(tmp_path / name)


@pytest.mark.timeout(600)
def test_constrained_rollouts_make_calls_the_round_runs(tmp_path: Path) -> None:
    free = _run(tmp_path, "free", constrain=False)
    assert len(free) == 2
    assert all(r["rounds"] == 0 and not r["tools"] and not r["answer"] for r in free)  # noise
    bound = _run(tmp_path, "bound", constrain=True)
    assert len(bound) == 2
    for record in bound:
        # every call is well-formed (what comes after the round cap is refused, REJECTED); the
        # first turn made calls that ran or answered with final_answer
        assert "FORMAT_ERR" not in record["statuses"], record
        assert record["rounds"] == 1 or (record["answer"] and not record["synthesized"]), record
    assert any(record["tools"] for record in bound)  # seed 0: one trajectory calls, one answers


@pytest.mark.timeout(600)
def test_constrained_plan_rollouts_are_valid_plans(tmp_path: Path) -> None:
    """``train grpo`` with ``constrain_rollouts``: a random policy (saved, loaded as an HF directory)
    samples only plans the validator accepts, and GRPO trains on them."""
    import torch

    tokenizer = byte_tokenizer(
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, chat_template=CHATML
    )
    torch.manual_seed(0)
    tiny_qwen2(tokenizer).save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    cfg = TrainConfig(
        model=str(tmp_path / "policy"),
        lora=False,
        precision="fp32",
        gradient_checkpointing=False,
        train=[SourceConfig(kind="masbench_gen", axis="depth", values="2", count=2)],
        eval_limit=0,
        num_generations=4,
        batch_size=4,
        max_steps=1,
        temperature=1.0,
        max_completion_length=2000,  # a byte a token: the grammar's longest plan fits
        constrain_rollouts=True,
        output_dir=str(tmp_path / "run"),
    )
    report = train_grpo(cfg, backends={cfg.subagent: boxed_one()})
    assert report.steps == 1
    samples = [json.loads(x) for x in (tmp_path / "run" / SAMPLES_FILE).read_text().splitlines()]
    assert len(samples) == 4 and all(s["valid"] for s in samples), samples


def test_rollout_constraint_of_a_plan_config_is_its_dialects() -> None:
    agents = default_registry()
    source = [SourceConfig(kind="masbench_gen", axis="depth", values="2", count=2)]
    assert rollout_constraint(TrainConfig(train=source), agents).grammar is None  # off by default
    calls = rollout_constraint(TrainConfig(train=source, constrain_rollouts=True), agents)
    assert calls.grammar and "create_agent" in calls.grammar and calls.json_schema is None
    schema = rollout_constraint(TrainConfig(train=source, constrain_rollouts=True, dialect="json"), agents)
    assert schema.grammar is None and schema.json_schema


def test_rollout_constraint_without_a_writable_kind_is_a_usage_error() -> None:
    source = [SourceConfig(kind="masbench_gen", axis="depth", values="2", count=2)]
    empty = AgentRegistry()
    with pytest.raises(UsageError, match="constrain_rollouts"):
        rollout_constraint(TrainConfig(train=source, constrain_rollouts=True), empty)
