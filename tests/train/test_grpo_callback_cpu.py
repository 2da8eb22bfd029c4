"""The trainer callback: JSONL log lines and the wall-clock stop (no model needed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

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
