"""Two GRPO steps over multi-round trajectories on the smallest embedded model (needs
`masorch models pull smollm2-135m`): real generation, TRL's tool loop, the environment, the rewards."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from masorch.backends.scripted import ScriptedBackend
from masorch.train.config import SourceConfig
from masorch.train.rounds_config import RoundsTrainConfig
from masorch.train.rounds_grpo import TRAJECTORIES_FILE, train_rounds
from masorch.train.trainer_parts import LOG_FILE, REPORT_FILE

pytestmark = pytest.mark.model


@pytest.mark.timeout(1800)  # 750 s measured on a loaded 2-core machine
def test_two_grpo_steps_over_trajectories(tmp_path: Path, smollm2: str) -> None:
    cfg = RoundsTrainConfig(
        model=smollm2,
        chat_template="qwen2_5",  # SmolLM2's own ChatML template renders no tools
        train=[SourceConfig(kind="masbench_gen", axis="depth", values="2", count=2)],
        num_generations=2,
        batch_size=2,
        max_steps=2,
        max_rounds=2,
        max_completion_length=48,
        lora=True,
        lora_target_modules=["q_proj", "v_proj"],
        output_dir=str(tmp_path / "run"),
    )
    report = train_rounds(cfg, subagent=ScriptedBackend(lambda m, c: "\\boxed{3}"))
    assert report.steps == 2
    steps = [line for line in report.logs if "loss" in line]
    assert len(steps) == 2
    for line in steps:
        assert math.isfinite(line["loss"])
        for name in ("success", "protocol", "diversity", "efficiency"):
            assert f"rewards/{name}/mean" in line
        assert "rounds/rounds" in line and "rounds/calls" in line
    out = tmp_path / "run"
    assert len((out / LOG_FILE).read_text().splitlines()) == len(report.logs)
    assert json.loads((out / REPORT_FILE).read_text())["steps"] == 2
    records = [json.loads(x) for x in (out / TRAJECTORIES_FILE).read_text().splitlines()]
    assert len(records) == 4 and all(
        set(r["components"]) == {"success", "protocol", "diversity", "efficiency"} for r in records
    )
    assert (out / "final" / "config.json").is_file()
