"""``masorch train``: config listing, usage errors and verl parquet export (no training here)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from masorch.cli.main import main


def test_show_config_lists_fields(capsys):
    assert main(["train", "grpo", "--show-config"]) == 0
    out = capsys.readouterr().out
    assert "num_generations" in out and "reward_weights" in out


def test_missing_config_is_a_usage_error(capsys):
    assert main(["train", "grpo"]) == 2
    assert "--config" in capsys.readouterr().err


def test_bad_override_is_a_usage_error(tmp_path: Path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train: [{kind: masbench_gen, count: 2}]\n")
    assert main(["train", "grpo", "--config", str(cfg), "--set", "max_steps"]) == 2
    capsys.readouterr()
    twice = ["--set", "max_steps=5", "--set", "max_steps=6"]
    assert main(["train", "grpo", "--config", str(cfg), *twice]) == 2
    assert "--set max_steps is given twice" in capsys.readouterr().err
    assert main(["train", "grpo", "--config", str(cfg), "--set", ".max_steps=3"]) == 2
    assert "a dotted key has an empty part" in capsys.readouterr().err


def test_a_config_file_that_is_not_a_mapping_says_so(tmp_path: Path, capsys):
    cfg = tmp_path / "c.yaml"
    for text in ("[]\n", "0\n", "false\n"):
        cfg.write_text(text)
        assert main(["train", "grpo", "--config", str(cfg)]) == 2
        assert "must hold a YAML mapping" in capsys.readouterr().err


def test_data_writes_verl_parquet(tmp_path: Path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train: [{kind: masbench_gen, values: '2', count: 5}]\neval_limit: 2\ndom: high\n")
    assert main(["train", "data", "--config", str(cfg), "--out", str(tmp_path / "verl")]) == 0
    train = pq.read_table(tmp_path / "verl" / "train.parquet").to_pylist()
    test = pq.read_table(tmp_path / "verl" / "test.parquet").to_pylist()
    assert len(train) == 3 and len(test) == 2
    assert train[0]["extra_info"]["dom"] == "high" and train[0]["prompt"][0]["role"] == "system"


def test_data_rounds_writes_rows_for_the_rounds_agent_loop(tmp_path: Path) -> None:
    cfg = tmp_path / "rounds.yaml"
    # An embedded sub-agent that is not pulled: writing prompts needs no model, and makes no
    # output_dir or sub-agent cache.
    cfg.write_text(
        f"train: [{{kind: masbench_gen, values: '2', count: 3}}]\nsubagent: local:nosuchmodel\n"
        f"output_dir: {tmp_path / 'out'}\nmax_rounds: 2\n"
    )
    assert main(["train", "data", "--config", str(cfg), "--out", str(tmp_path / "verl"), "--rounds"]) == 0
    assert not (tmp_path / "out").exists()
    rows = pq.read_table(tmp_path / "verl" / "train.parquet").to_pylist()
    assert len(rows) == 3 and {r["agent_name"] for r in rows} == {"masorch_rounds"}
    system, user = rows[0]["prompt"]
    assert system["role"] == "system" and "final_answer" in system["content"]
    assert user == {"role": "user", "content": rows[0]["extra_info"]["question"]}


def test_a_fresh_run_into_a_directory_holding_a_run_is_refused_before_any_model_loads(
    tmp_path: Path, capsys
) -> None:
    out = tmp_path / "run"
    (out / "checkpoint-3").mkdir(parents=True)
    (out / "log.jsonl").write_text('{"step": 1}\n')
    cfg = tmp_path / "c.yaml"
    # Weights that are not a model: a run that got past the check would fail on loading them.
    (tmp_path / "policy.gguf").write_bytes(b"not a model")
    cfg.write_text(
        "train: [{kind: masbench_gen, values: '2', count: 4}]\neval_limit: 0\n"
        f"model: {tmp_path / 'policy.gguf'}\noutput_dir: {out}\n"
    )
    assert main(["train", "grpo", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "holds a training run (checkpoint-3)" in err and "overwrite: true" in err
    assert (out / "checkpoint-3").is_dir() and (out / "log.jsonl").read_text() == '{"step": 1}\n'
