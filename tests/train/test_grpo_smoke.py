"""A 2-step GRPO run with TRL on the smallest embedded model (needs `masorch models pull smollm2-135m`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from masorch.backends.scripted import ScriptedBackend
from masorch.train.config import SourceConfig, TrainConfig
from masorch.train.grpo import LOG_FILE, REPORT_FILE, train_grpo

pytestmark = pytest.mark.model


@pytest.mark.timeout(1800)  # 685 s measured with a study on the same 2 cores
def test_two_grpo_steps_log_rewards_and_save_a_loadable_checkpoint(tmp_path: Path, smollm2: str) -> None:
    cfg = TrainConfig(
        model=smollm2,
        lora=True,
        lora_target_modules=["q_proj", "v_proj"],
        train=[SourceConfig(kind="masbench_gen", axis="depth", values="2", count=3)],
        eval_limit=1,
        eval_sampled=True,
        num_generations=2,
        batch_size=2,
        max_steps=2,
        max_completion_length=12,
        save_steps=1,
        resume=True,
        output_dir=str(tmp_path / "run"),
    )
    report = train_grpo(cfg, backends={cfg.subagent: ScriptedBackend(lambda m, c: "\\boxed{3}")})
    assert report.steps == 2
    steps = [line for line in report.logs if "loss" in line]
    assert len(steps) == 2
    for line in steps:
        assert math.isfinite(line["loss"])
        for name in ("correctness", "validity", "dom", "cost"):
            assert f"rewards/{name}/mean" in line
        assert "plan/valid_rate" in line and "plan/calls_per_plan" in line
    on_disk = [json.loads(x) for x in (tmp_path / "run" / LOG_FILE).read_text().splitlines()]
    assert len(on_disk) == len(report.logs)
    saved = json.loads((tmp_path / "run" / REPORT_FILE).read_text())
    assert saved["steps"] == 2
    # Before and after: one held-out prompt each, through the eval harness (an eval run directory).
    for tag in ("before", "after", "before_sampled", "after_sampled"):
        summary = saved[f"eval_{tag}"]
        assert summary["n"] == 1 and sum(summary["statuses"].values()) == 1
        assert (tmp_path / "run" / f"eval_{tag}" / "report.md").is_file()

    # The next sitting: one more step from checkpoint-2; the finished "before" evaluation is kept.
    before_log = (tmp_path / "run" / "eval_before" / "log.jsonl").read_text()
    more = train_grpo(
        cfg.model_copy(update={"max_steps": 3}),
        backends={cfg.subagent: ScriptedBackend(lambda m, c: "\\boxed{3}")},
    )
    trained = [line["step"] for line in more.logs if "loss" in line]
    assert more.steps == 3 and trained == [1, 2, 3]  # the run's steps, step 3 trained now
    assert more.logs[: len(report.logs)] == report.logs
    assert (tmp_path / "run" / "eval_before" / "log.jsonl").read_text().startswith(before_log)
    logged = [json.loads(x)["step"] for x in (tmp_path / "run" / LOG_FILE).read_text().splitlines()]
    assert [s for s in logged if s] == sorted(s for s in logged if s)  # one history, in order

    from masorch.backends.base import GenerateConfig, Message
    from masorch.backends.registry import make_backend

    orchestrator = make_backend(f"hf:{report.final_model}")
    import asyncio

    out = asyncio.run(orchestrator.complete([Message("user", "Hi")], GenerateConfig(max_tokens=4)))
    assert out.usage.completion_tokens >= 1
