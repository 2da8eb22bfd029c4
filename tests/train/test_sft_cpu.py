"""``masorch train sft``: TRL's SFTTrainer on masked trajectories, with a tiny random model (CPU, seconds).

Checks that TRL trains on the labels masorch built (the orchestrator's tokens only), that two steps
run with LoRA and with full training, and the config's errors and the CLI's listing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("trl")

from sft_helpers import RECORD, tokenizer_for

from masorch.cli.main import main
from masorch.errors import UsageError
from masorch.train.sft import train_sft
from masorch.train.sft_config import SftConfig, load_sft_config
from masorch.train.sft_data import IGNORE, masked_example
from tiny_models import tiny_qwen2


def tiny_policy():
    tokenizer = tokenizer_for(RECORD)
    tokenizer.pad_token = "[UNK]"
    return tiny_qwen2(
        tokenizer, hidden_size=32, max_position_embeddings=256, eos_token_id=None, pad_token_id=None
    ), tokenizer


def data(tmp_path: Path) -> Path:
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps(RECORD) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("lora", [True, False])
def test_two_sft_steps_train_on_the_orchestrator_tokens(tmp_path: Path, lora: bool, monkeypatch) -> None:
    import trl

    seen: list[list[int]] = []
    original = trl.SFTTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        seen.extend(inputs["labels"].tolist())
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(trl.SFTTrainer, "compute_loss", spy)
    model, tokenizer = tiny_policy()
    cfg = SftConfig(
        data=str(data(tmp_path)),
        output_dir=str(tmp_path / "run"),
        lora=lora,
        max_steps=2,
        gradient_accumulation_steps=1,
        precision="fp32",
        gradient_checkpointing=False,
        learning_rate=1e-3,
    )
    report = train_sft(cfg, policy=(model, tokenizer))
    assert report.steps == 2 and report.examples == 2
    expected = masked_example(tokenizer, RECORD)
    assert seen and all(labels == expected["labels"] for labels in seen)  # TRL kept masorch's mask
    assert report.loss_tokens == 2 * sum(1 for t in expected["labels"] if t != IGNORE)
    assert report.loss_tokens < report.tokens
    losses = [line["loss"] for line in report.logs if "loss" in line]
    assert losses and all(loss == loss and loss > 0 for loss in losses)
    assert (tmp_path / "run" / "final" / "config.json").is_file()
    assert json.loads((tmp_path / "run" / "report.json").read_text())["steps"] == 2


def test_a_killed_run_resumes_from_its_newest_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "run"

    def sitting(max_steps: int):
        cfg = SftConfig(
            data=str(data(tmp_path)),
            output_dir=str(run),
            max_steps=max_steps,
            save_steps=1,
            resume=True,
            gradient_accumulation_steps=1,
            precision="fp32",
            gradient_checkpointing=False,
        )
        return train_sft(cfg, policy=tiny_policy())

    first = sitting(2)  # no checkpoint yet: the run starts
    assert first.steps == 2
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    with (run / "log.jsonl").open("a") as log:  # a step the kill interrupted after the checkpoint
        log.write(json.dumps({"step": 3, "loss": 9.0}) + "\n" + '{"step": 4, "lo')
    second = sitting(3)
    assert second.steps == 3
    losses = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [line["step"] for line in losses if "loss" in line] == [1, 2, 3]
    assert 9.0 not in [line["loss"] for line in losses if "loss" in line]
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    state = json.loads((run / "checkpoint-3" / "trainer_state.json").read_text())
    assert [h["step"] for h in state["log_history"] if "loss" in h] == [1, 2, 3]  # one history, continued


def losses(run: Path) -> list[tuple[int, float]]:
    lines = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return [(line["step"], line["loss"]) for line in lines if "loss" in line]


@pytest.mark.parametrize("lora", [True, False])
def test_a_finished_run_started_again_trains_no_more_steps(tmp_path: Path, lora: bool) -> None:
    """The same command after the last step (or after a kill between the last checkpoint and the
    final model) saves the final model from the last checkpoint, and trains nothing more."""
    run = tmp_path / "run"
    cfg = SftConfig(
        data=str(data(tmp_path)),
        output_dir=str(run),
        max_steps=2,
        save_steps=1,
        resume=True,
        gradient_accumulation_steps=1,
        precision="fp32",
        gradient_checkpointing=False,
        lora=lora,
    )
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)  # the same base weights each sitting (the checkpoints hold LoRA adapters)
    assert train_sft(cfg, policy=tiny_policy()).steps == 2
    log = losses(run)
    first = (run / "final" / "model.safetensors").read_bytes()
    shutil.rmtree(run / "final")  # killed before the final model was saved
    torch.manual_seed(0)
    again = train_sft(cfg, policy=tiny_policy())
    assert again.steps == 2
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert losses(run) == log  # no step trained again
    assert [(line["step"], line["loss"]) for line in again.logs if "loss" in line] == log  # the run's steps
    assert (run / "final" / "model.safetensors").read_bytes() == first  # the checkpoint's weights


def test_sft_config_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no data"):
        SftConfig()
    with pytest.raises(UsageError, match="precision"):
        SftConfig(data="x", precision="fp16")
    p = tmp_path / "sft.yaml"
    p.write_text("data: runs/collect\nlearning_rat: 1\n")
    with pytest.raises(UsageError, match="did you mean 'learning_rate'"):
        load_sft_config(p)
    p.write_text("data: runs/collect\nmax_steps: 3\n")
    assert load_sft_config(p, {"lora": False}).max_steps == 3


def test_cli_lists_the_sft_fields(capsys) -> None:
    assert main(["train", "sft", "--show-config"]) == 0
    out = capsys.readouterr().out
    assert "max_length" in out and "lora_target_modules" in out
    assert main(["train", "sft"]) == 2
