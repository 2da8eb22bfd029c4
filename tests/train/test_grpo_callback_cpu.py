"""The trainer callback: JSONL log lines and the wall-clock stop (no model needed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from masorch.errors import UsageError

pytest.importorskip("transformers")

from masorch.train.trainer_parts import log_callback


def test_log_lines_are_appended_and_forwarded(tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []
    cb = log_callback(tmp_path / "log.jsonl", seen.append, None)
    state, control = SimpleNamespace(global_step=3), SimpleNamespace(should_training_stop=False)
    cb.on_log(None, state, control, logs={"loss": 0.5})
    cb.on_step_end(None, state, control)
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert lines[0]["step"] == 3 and lines[0]["loss"] == 0.5 and seen == lines
    assert control.should_training_stop is False


def test_max_train_s_stops_training_after_the_step(tmp_path: Path) -> None:
    cb = log_callback(tmp_path / "log.jsonl", None, 0.0)
    state, control = SimpleNamespace(global_step=1), SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(None, state, control)
    cb.on_step_end(None, state, control)
    assert control.should_training_stop is True


def test_a_resumed_sitting_keeps_the_lines_of_the_checkpointed_steps(tmp_path: Path) -> None:
    from masorch.train.trainer_parts import begin_sitting

    def write(name: str, steps: list[int]) -> None:
        text = "".join(json.dumps({"step": s}) + "\n" for s in steps)
        (tmp_path / name).write_text(text + '{"step": 9, "torn', encoding="utf-8")

    def steps(name: str) -> list[int]:
        return [json.loads(x)["step"] for x in (tmp_path / name).read_text().splitlines()]

    write("log.jsonl", [1, 2, 3, 4])
    write("samples.jsonl", [0, 0, 1, 1, 2, 2, 3, 3])
    for n in (2, 3):  # checkpoint-3 has no trainer state: a save the kill interrupted
        (tmp_path / f"checkpoint-{n}").mkdir()
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text("{}")
    files = {"log.jsonl": 1, "samples.jsonl": 0}
    config = {"learning_rate": 1e-4, "max_train_s": 600, "resume": True}
    sitting = begin_sitting(tmp_path, files, resume=True, config=config)
    assert sitting.step == 2 and sitting.checkpoint == tmp_path / "checkpoint-2"
    assert steps("log.jsonl") == [1, 2]  # the log counts finished steps
    assert steps("samples.jsonl") == [0, 0, 1, 1]  # plans carry the step they were sampled in
    # the next sitting may run longer; another learning rate is another run, refused
    assert begin_sitting(tmp_path, files, resume=True, config={**config, "max_train_s": 900}).step == 2
    with pytest.raises(
        UsageError, match=r"holds a run of another config: learning_rate \(run: 0.0001, now: 0.0002\)"
    ):
        begin_sitting(tmp_path, files, resume=True, config={**config, "learning_rate": 2e-4})
    # a fresh run in the directory of another is refused unless asked to start over: nothing is lost
    with pytest.raises(
        UsageError, match=r"holds a training run \(run_config.json, checkpoint-2, checkpoint-3\)"
    ):
        begin_sitting(tmp_path, files, resume=False, config={**config, "learning_rate": 2e-4})
    assert steps("log.jsonl") == [1, 2] and (tmp_path / "checkpoint-2" / "trainer_state.json").is_file()
    fresh = begin_sitting(
        tmp_path, files, resume=False, config={**config, "learning_rate": 2e-4}, overwrite=True
    )
    assert fresh.checkpoint is None and steps("log.jsonl") == [] and steps("samples.jsonl") == []
    # the replaced run's checkpoints go too: a later resume would have continued that run from them
    assert not list(tmp_path.glob("checkpoint-*"))
    assert begin_sitting(tmp_path, files, resume=True, config={**config, "learning_rate": 2e-4}).step == 0


def test_the_run_record_does_not_compare_how_output_dir_was_spelled(tmp_path: Path) -> None:
    from masorch.train.trainer_parts import begin_sitting

    config = {"learning_rate": 1e-4, "output_dir": str(tmp_path), "resume": True}
    begin_sitting(tmp_path, {}, resume=True, config=config)
    again = {**config, "output_dir": str(tmp_path) + "/"}
    assert begin_sitting(tmp_path, {}, resume=True, config=again).step == 0
