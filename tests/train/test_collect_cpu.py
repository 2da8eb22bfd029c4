"""``masorch train collect``: a scripted teacher over a small training set, graded, selected, written.

The teacher is a function of the conversation and the sampling seed: on its first turn it calls a
tool; after a failed call it calls the tool again (a recovery); then it answers, right or wrong as
the script for that question and seed says. No model is called anywhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from masorch.backends.base import Backend, Completion, GenerateConfig, Message, ToolCall, Usage
from masorch.backends.scripted import ScriptedBackend
from masorch.cli.train import register
from masorch.errors import BackendError, UsageError
from masorch.run.faults import ToolFaults
from masorch.train.collect import (
    ATTEMPTS_FILE,
    DATASET_FILE,
    PARQUET_FILE,
    SUMMARY_FILE,
    collect,
    collect_state,
    env_spec,
    questions,
)
from masorch.train.collect_config import CollectConfig, DataConfig, describe_collect, load_collect_config
from masorch.train.collect_select import recovered, select, tool_shares

#: question -> (gold, tool the teacher calls, seeds whose final answer is right)
SCRIPT: dict[str, tuple[str, str, set[int]]] = {
    "What is 2+3?": ("5", "cot", {0, 1, 2, 3}),
    "What is 7*6?": ("42", "cot", {1}),
    "What is 9-9?": ("0", "review", set()),
}


def teacher_turn(messages: Sequence[Message], config: GenerateConfig) -> Completion:
    """The scripted teacher's next turn (see the module docs)."""
    question = next(m.content for m in messages if m.role == "user")
    gold, tool, right = SCRIPT[question]
    tool_messages = [m for m in messages if m.role == "tool"]
    if not tool_messages or re.match(r"status: (EXEC_ERR|TIMEOUT)", tool_messages[-1].content):
        name, args = tool, {"task": f"Work out: {question}"}
    else:
        name, args = "final_answer", {"answer": gold if config.seed in right else "-1"}
    turn = len([m for m in messages if m.role == "assistant"])
    call = ToolCall(name, json.dumps(args), id=f"call_{turn}")
    return Completion("", usage=Usage(20, 6, 1), finish="tool_calls", tool_calls=(call,))


class Models:
    """The backends of the scripted environment, counting the teacher's real (uncached) calls."""

    def __init__(self) -> None:
        self.teacher = ScriptedBackend(teacher_turn, name="teacher")
        self.sub = ScriptedBackend(lambda m, c: "Worked out. \\boxed{7}", name="sub")

    def __call__(self, spec: str) -> Backend:
        return {"scripted:teacher": self.teacher, "scripted:sub": self.sub}[spec]


def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.jsonl"
    rows = [
        {"id": f"q{i}", "question": q, "answer": gold} for i, (q, (gold, _, _)) in enumerate(SCRIPT.items())
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def config(tmp_path: Path, **fields: Any) -> CollectConfig:
    base: dict[str, Any] = {
        "teacher": "scripted:teacher",
        "subagent": "scripted:sub",
        "data": [DataConfig(spec=str(data_file(tmp_path)), scorer="exact")],
        "samples": 4,
        "temperature": 0.7,
        "fault_rate": 0.0,
        "max_tool_share": 1.0,
        "concurrency": 2,
        "output_dir": str(tmp_path / "out"),
    }
    return CollectConfig(**{**base, **fields})


def run_collect(cfg: CollectConfig, models: Models | None = None):
    models = models or Models()
    return collect(cfg, spec=env_spec(cfg, backend_factory=models)), models


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_collect_keeps_one_correct_trajectory_per_question_and_writes_the_dataset(tmp_path: Path) -> None:
    report, models = run_collect(config(tmp_path, stop_when_recovered=False))
    assert {(c.temperature, c.seed) for _, c in models.teacher.calls} == {(0.7, k) for k in range(4)}
    out = tmp_path / "out"
    attempts = lines(out / ATTEMPTS_FILE)
    assert len(attempts) == 12  # 3 questions x K=4
    assert sorted({a["seed"] for a in attempts}) == [0, 1, 2, 3]
    records = lines(out / DATASET_FILE)
    # q0 right with every seed, q1 with seed 1 only, q2 never: two questions kept, one record each.
    assert [(r["question_id"], r["stats"]["seed"]) for r in records] == [("train/q0", 0), ("train/q1", 1)]
    assert all(r["stats"]["correct"] for r in records)
    s = report.summary
    assert (s["questions"], s["attempts"], s["attempts_correct"], s["kept"]) == (3, 12, 5, 2)
    assert s["questions_without_correct"] == 1


def test_dataset_record_schema(tmp_path: Path) -> None:
    run_collect(config(tmp_path, samples=1))
    rec = lines(tmp_path / "out" / DATASET_FILE)[0]
    assert set(rec) == {"id", "dataset", "question_id", "messages", "tools", "meta", "stats"}
    roles = [m["role"] for m in rec["messages"]]
    assert roles[:3] == ["system", "user", "assistant"] and "tool" in roles and roles[-1] == "assistant"
    call = rec["messages"][2]["tool_calls"][0]
    assert call["type"] == "function" and json.loads(call["function"]["arguments"])["task"]
    tool_msg = next(m for m in rec["messages"] if m["role"] == "tool")
    assert tool_msg["tool_call_id"] == call["id"] and tool_msg["content"].startswith("status: OK")
    assert {t["function"]["name"] for t in rec["tools"]} >= {"cot", "final_answer"}
    stats = rec["stats"]
    for key in (
        "sample",
        "seed",
        "rounds",
        "statuses",
        "tools",
        "recovered",
        "tokens",
        "correct",
        "failures",
    ):
        assert key in stats, key
    assert stats["tools"] == {"cot": 1} and stats["statuses"] == {"OK": 1} and stats["rounds"] == 1
    assert stats["tokens"]["total"] > 0 and stats["tokens"]["orchestrator_completion"] == 12
    table = pq.read_table(tmp_path / "out" / PARQUET_FILE).to_pylist()
    assert [r["id"] for r in table] == [rec["id"]]
    assert table[0]["messages"][2]["tool_calls"][0]["function"]["name"] == "cot"
    assert json.loads(table[0]["tools"]) == rec["tools"] and json.loads(table[0]["stats"]) == stats
    summary = json.loads((tmp_path / "out" / SUMMARY_FILE).read_text())
    assert summary["kept"] == 1 and summary["tool_shares_kept"] == {"cot": 1.0}


def test_faults_make_recoveries_and_recovered_trajectories_are_preferred(tmp_path: Path) -> None:
    cfg = config(tmp_path, fault_rate=0.5, faults_per_run=1, stop_when_recovered=False, cache_mode="off")
    report, models = run_collect(cfg)
    attempts = lines(tmp_path / "out" / ATTEMPTS_FILE)
    injected = [a for a in attempts if a["injected"]]
    assert injected and all(a["failures"] >= 1 for a in injected)
    assert all(a["injected"] <= 1 for a in attempts)
    # q0 is right with every seed: the kept one is a recovery when any of its samples recovered.
    q0 = [a for a in attempts if a["question_id"] == "train/q0"]
    kept = {r["question_id"]: r for r in lines(tmp_path / "out" / DATASET_FILE)}
    assert any(a["recovered"] for a in q0)
    assert kept["train/q0"]["stats"]["recovered"]
    failed = next(
        m
        for m in kept["train/q0"]["messages"]
        if m["role"] == "tool" and not m["content"].startswith("status: OK")
    )
    assert "inject" not in failed["content"]  # the orchestrator reads a real-looking failure
    assert any(c["injected"] for c in kept["train/q0"]["meta"]["calls"])
    assert report.summary["injected_faults"] == sum(a["injected"] for a in attempts)
    # An injected call does not reach the sub-agent: fewer sub-agent calls than tool calls.
    tool_calls = sum(sum(a["tools"].values()) for a in attempts)
    assert len(models.sub.calls) == tool_calls - report.summary["injected_faults"]


def test_stop_when_recovered_saves_samples(tmp_path: Path) -> None:
    cfg = config(tmp_path, fault_rate=1.0, faults_per_run=1)
    run_collect(cfg)
    attempts = lines(tmp_path / "out" / ATTEMPTS_FILE)
    q0 = [a for a in attempts if a["question_id"] == "train/q0"]
    assert len(q0) == 1 and q0[0]["recovered"]  # the first sample recovered: no more were drawn


def test_a_smaller_k_selects_from_its_samples_and_a_changed_scorer_is_refused(tmp_path: Path) -> None:
    report, _ = run_collect(config(tmp_path, stop_when_recovered=False))
    assert report.summary["kept"] == 2  # q1 is right only with seed 1
    report, models = run_collect(config(tmp_path, samples=1))
    assert len(models.teacher.calls) == 0
    assert report.summary["attempts"] == 3 and report.summary["kept"] == 1  # q1's sample 1 is past K
    other = [DataConfig(spec=str(data_file(tmp_path)), scorer="math")]
    with pytest.raises(UsageError, match="graded with the 'exact' scorer"):
        run_collect(config(tmp_path, data=other))


def test_resume_skips_finished_attempts_and_replays_from_the_cache(tmp_path: Path) -> None:
    cfg = config(tmp_path, stop_when_recovered=False)
    _, first = run_collect(cfg)
    path = tmp_path / "out" / ATTEMPTS_FILE
    whole = path.read_text(encoding="utf-8").splitlines(keepends=True)
    # A killed run: 7 attempts written, the 8th cut off mid-line.
    path.write_text("".join(whole[:7]) + whole[7][:40], encoding="utf-8")
    report, second = run_collect(cfg)
    again = lines(path)
    assert len(again) == 12
    assert sorted((a["id"], a["sample"]) for a in again) == sorted(
        (json.loads(x)["id"], json.loads(x)["sample"]) for x in whole
    )
    assert len(second.teacher.calls) == 0  # the 5 redone attempts came from the call cache
    assert report.summary["attempts"] == 12 and report.summary["kept"] == 2
    # A finished collection runs nothing and writes the same dataset.
    before = (tmp_path / "out" / DATASET_FILE).read_text()
    _, third = run_collect(cfg)
    assert len(third.teacher.calls) == 0 and len(lines(path)) == 12
    assert (tmp_path / "out" / DATASET_FILE).read_text() == before
    assert len(first.teacher.calls) > 0


def test_a_rerun_grades_the_logged_answers_again_and_keeps_the_earlier_verdicts(tmp_path: Path) -> None:
    cfg = config(tmp_path, samples=1)
    report, _ = run_collect(cfg)
    path = tmp_path / "out" / ATTEMPTS_FILE
    graded = lines(path)
    assert {a["correct"] for a in graded} == {True, False}
    # As if a scorer since fixed had graded every answer the other way.
    path.write_text("".join(json.dumps({**a, "correct": not a["correct"]}) + "\n" for a in graded))
    again, models = run_collect(cfg)
    log = lines(path)
    assert len(models.teacher.calls) == 0 and len(log) == 2 * len(graded)  # nothing sampled, nothing lost
    assert [a["correct"] for a in log[len(graded) :]] == [a["correct"] for a in graded]
    assert [a["regraded"]["correct"] for a in log[len(graded) :]] == [not a["correct"] for a in graded]
    assert again.summary["kept"] == report.summary["kept"]
    run_collect(cfg)
    assert len(lines(path)) == 2 * len(graded)  # verdicts that stand are not logged again


def test_a_rerun_with_other_sampling_settings_is_refused(tmp_path: Path) -> None:
    run_collect(config(tmp_path, samples=1))
    with pytest.raises(UsageError, match="temperature"):
        run_collect(config(tmp_path, samples=1, temperature=0.9))
    # Selection and K may change: a rerun re-selects (and samples only what is missing).
    report, _ = run_collect(config(tmp_path, samples=2, max_tool_share=0.9))
    assert report.summary["attempts"] == 6 and report.summary["max_tool_share"] == 0.9


def test_a_failed_start_leaves_nothing_that_blocks_the_corrected_rerun(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not provider:model"):
        run_collect(config(tmp_path, teacher="foo"))
    assert not (tmp_path / "out").exists()  # the teacher is checked before anything is written

    def gone(spec: str) -> Backend:  # a model that only fails once it is built
        raise UsageError(f"no model {spec}", hint="give a model that exists")

    cfg = config(tmp_path, teacher="scripted:gone")
    with pytest.raises(UsageError, match="no model scripted:"):
        collect(cfg, spec=env_spec(cfg, backend_factory=gone))
    assert not (tmp_path / "out" / ATTEMPTS_FILE).exists()
    (tmp_path / "a_file").write_text("kept")
    with pytest.raises(UsageError, match=r"output_dir .*a_file is a file, not a directory"):
        run_collect(config(tmp_path, output_dir=str(tmp_path / "a_file")))
    report, _ = run_collect(config(tmp_path))  # settings that shaped no attempt do not bind the rerun
    assert report.summary["attempts"] > 0
    with pytest.raises(UsageError, match="other teacher"):  # once there are attempts, they do
        run_collect(config(tmp_path, teacher="scripted:sub"))


@pytest.mark.parametrize("content", [b"garbage{", bytes(range(256))], ids=["not JSON", "binary"])
def test_a_corrupt_settings_file_is_a_usage_error_naming_it(tmp_path: Path, content: bytes) -> None:
    settings = tmp_path / "out" / "collect.json"
    settings.parent.mkdir()
    settings.write_bytes(content)
    with pytest.raises(UsageError, match=r"collect\.json") as caught:
        run_collect(config(tmp_path))
    assert "delete it" in caught.value.hint
    assert settings.read_bytes() == content  # never deleted or rewritten for the user


@pytest.mark.parametrize(
    "content", [b'{"sample": 0}\ngarbage{\n', bytes(range(256)) + b"\n"], ids=["not JSON", "binary"]
)
def test_a_corrupt_attempts_log_is_a_usage_error_naming_it(tmp_path: Path, content: bytes) -> None:
    attempts = tmp_path / "out" / ATTEMPTS_FILE
    attempts.parent.mkdir()
    attempts.write_bytes(content)
    with pytest.raises(UsageError, match=r"attempts\.jsonl"):
        run_collect(config(tmp_path))
    assert attempts.read_bytes() == content


def test_retry_errors_samples_failed_runs_again(tmp_path: Path) -> None:
    cfg = config(tmp_path, samples=1, cache_mode="off")
    models = Models()
    broken = Models()
    broken.teacher = ScriptedBackend(
        [BackendError("server down", retryable=False)], name="teacher", cycle=True
    )
    run_collect(cfg, broken)
    path = tmp_path / "out" / ATTEMPTS_FILE
    assert [a["status"] for a in lines(path)] == ["error"] * 3
    report, _ = run_collect(cfg, models)
    assert len(models.teacher.calls) == 0 and report.summary["kept"] == 0  # errors are attempts too
    report, _ = run_collect(config(tmp_path, samples=1, cache_mode="off", retry_errors=True), models)
    assert len(models.teacher.calls) > 0 and report.summary["attempts"] == 3
    assert report.summary["kept"] == 1 and len(lines(path)) == 6  # the new lines replace the old


def att(
    q: str,
    k: int,
    *,
    correct: bool = True,
    recovered: bool = False,
    rejected: int = 0,
    tools: dict[str, int],
    total: int = 10,
):
    statuses = {"OK": sum(tools.values()), "EXEC_ERR": int(recovered), "REJECTED": rejected}
    return {
        "id": q,
        "sample": k,
        "correct": correct,
        "statuses": {s: n for s, n in statuses.items() if n},
        "tools": tools,
        "tokens": {"total": total},
    }


def test_select_prefers_recovered_then_cheaper_and_drops_wrong() -> None:
    attempts = [
        att("a", 0, tools={"cot": 1}, total=5),
        att("a", 1, tools={"cot": 2}, recovered=True, total=50),
        att("b", 0, tools={"cot": 1}, total=30),
        att("b", 1, tools={"cot": 1}, total=20),
        att("c", 0, tools={"cot": 1}, correct=False),
    ]
    s = select(attempts, max_tool_share=1.0)
    assert [(a["id"], a["sample"]) for a in s.kept] == [("a", 1), ("b", 1)]
    assert s.questions == 3 and s.questions_without_correct == 1


def test_select_puts_protocol_errors_last_and_they_are_no_recovery() -> None:
    attempts = [
        att("a", 0, tools={"cot": 1}, recovered=True, rejected=1, total=5),
        att("a", 1, tools={"cot": 1}, total=50),
        att("b", 0, tools={"cot": 1}, rejected=2, total=5),
        att("b", 1, tools={"cot": 1}, correct=False),
    ]
    s = select(attempts, max_tool_share=1.0)
    # a: the clean attempt beats a cheaper recovered one with a refused call; b keeps its only one.
    assert [(a["id"], a["sample"]) for a in s.kept] == [("a", 1), ("b", 0)]
    assert not recovered(att("q", 0, tools={"cot": 1}, rejected=1))
    assert not recovered(att("q", 0, tools={"cot": 1}, recovered=True, correct=False))


def test_tool_balance_never_empties_a_set_of_one_tool_trajectories() -> None:
    # cot is 2/3 of the calls; dropping a would leave sc at 100%: both stay, marked unbalanced.
    s = select([att("a", 0, tools={"cot": 2}), att("b", 0, tools={"sc": 1})], max_tool_share=0.5)
    assert [a["id"] for a in s.kept] == ["a", "b"] and not s.balanced and s.dropped_for_balance == 0
    s = select([att(f"q{i}", 0, tools={"cot": 1}) for i in range(50)], max_tool_share=0.5)
    assert len(s.kept) == 50 and not s.balanced


def test_tool_balance_swaps_then_drops() -> None:
    attempts = [
        att("a", 0, tools={"cot": 2}, recovered=True),
        att("a", 1, tools={"sc": 1}),
        att("b", 0, tools={"cot": 1}),
        att("c", 0, tools={"review": 1}),
        att("d", 0, tools={"cot": 3}),
    ]
    s = select(attempts, max_tool_share=0.5)
    # cot makes 6 of 7 calls: d (3 cot, no other candidate) is dropped, a moves to its sc sample.
    assert [(a["id"], a["sample"]) for a in s.kept] == [("a", 1), ("b", 0), ("c", 0)]
    assert (s.swapped_for_balance, s.dropped_for_balance) == (1, 1)
    assert max(s.shares.values()) <= 0.5 and s.balanced
    assert s.shares == tool_shares(s.kept)


def test_tool_balance_holds_on_random_sets() -> None:
    import random

    rng = random.Random(3)
    tools = ["cot", "sc", "review", "python"]
    for _ in range(200):
        attempts = [
            att(f"q{q}", k, correct=rng.random() < 0.7, tools={rng.choice(tools): rng.randint(1, 3)})
            for q in range(8)
            for k in range(3)
        ]
        share = rng.choice([0.3, 0.5, 0.8])
        s = select(attempts, max_tool_share=share)
        assert s.balanced == all(v <= share + 1e-9 for v in s.shares.values())
        assert s.kept or not any(a["correct"] for a in attempts)  # balance never empties the set
        assert len({a["id"] for a in s.kept}) == len(s.kept)
        assert all(a["correct"] for a in s.kept)


def test_fault_draws_are_seeded_and_near_the_rate() -> None:
    f = ToolFaults(rate=0.3, seed=7)
    draws = [f.draw("Q", seed, f"r{r}c{c}") for seed in range(20) for r in range(1, 11) for c in range(1, 5)]
    assert draws == [
        f.draw("Q", seed, f"r{r}c{c}") for seed in range(20) for r in range(1, 11) for c in range(1, 5)
    ]
    share = sum(d is not None for d in draws) / len(draws)
    assert 0.25 < share < 0.35
    assert {d for d in draws if d} == {"EXEC_ERR", "TIMEOUT", "FORMAT_DRIFT"}
    assert draws != [ToolFaults(rate=0.3, seed=8).draw("Q", s, n) for s, n in _keys()]
    with pytest.raises(UsageError, match="probability"):
        ToolFaults(rate=1.5)
    with pytest.raises(UsageError, match="kinds"):
        ToolFaults(rate=0.5, kinds=("BUDGET",))  # type: ignore[arg-type]


def _keys() -> list[tuple[int, str]]:
    return [(seed, f"r{r}c{c}") for seed in range(20) for r in range(1, 11) for c in range(1, 5)]


def test_config_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="teacher"):
        CollectConfig()
    with pytest.raises(UsageError, match="temperature"):
        config(tmp_path, temperature=0.0)
    with pytest.raises(UsageError, match="fault kinds"):
        config(tmp_path, fault_kinds=["FORMAT_ERR"])
    with pytest.raises(UsageError, match="multi-round"):
        config(tmp_path, system="mas:low").system_for(0)
    p = tmp_path / "c.yaml"
    p.write_text("teacher: openai:gpt-4o-mini\ndata: [{spec: math500}]\nsample: 3\n")
    with pytest.raises(UsageError, match="did you mean 'samples'"):
        load_collect_config(p)
    p.write_text("teacher: openai:gpt-4o-mini\ndata: [{spec: math500}]\nsystem_fields: {max_round: 3}\n")
    with pytest.raises(UsageError, match="max_round"):
        load_collect_config(p)
    # a system field the config sets itself would be dropped (temperature) or win silently (model)
    p.write_text("teacher: openai:gpt-4o-mini\ndata: [{spec: math500}]\nsystem_fields: {temperature: 0.1}\n")
    with pytest.raises(
        UsageError, match="system_fields sets temperature, which the collect config sets itself"
    ):
        load_collect_config(p)
    with pytest.raises(UsageError, match=r"use subagent: instead"):
        config(tmp_path, system_fields={"model": "openai:gpt-4o"})
    with pytest.raises(UsageError, match="output_dir"):
        config(tmp_path, output_dir="")
    names = [name for name, _, _ in describe_collect()]
    assert "max_tool_share" in names and "data[]: spec" in names


def collect_cli(tmp_path: Path, models: Models, lines: str) -> tuple[typer.Typer, Path]:
    """The CLI with ``masorch train collect`` over ``models``, and a config of the scripted teacher
    on the test questions with ``lines`` added (its output_dir: ``tmp_path/cli``)."""
    app = typer.Typer()
    factory: Callable[[CollectConfig], Any] = lambda cfg: env_spec(cfg, backend_factory=models)  # noqa: E731
    register(app, collect_env=factory)
    path = tmp_path / "collect.yaml"
    path.write_text(
        "teacher: scripted:teacher\nsubagent: scripted:sub\n"
        f"data: [{{spec: {data_file(tmp_path)}, scorer: exact}}]\n"
        f"max_tool_share: 1.0\noutput_dir: {tmp_path / 'cli'}\n{lines}"
    )
    return app, path


def test_cli_collect_with_progress(tmp_path: Path) -> None:
    app, p = collect_cli(tmp_path, Models(), "samples: 2\ntemperature: 0.5\n")
    result = CliRunner().invoke(app, ["train", "collect", "--config", str(p), "--set", "fault_rate=0"])
    assert result.exit_code == 0, result.output
    assert "kept 2 of 3 questions" in result.output and "collect" in result.output
    assert (tmp_path / "cli" / DATASET_FILE).is_file()


def test_a_data_entry_error_names_its_keys_not_evals_flags(tmp_path: Path) -> None:
    cfg = config(tmp_path, data=[DataConfig(spec=str(data_file(tmp_path)))])  # own questions, no scorer
    with pytest.raises(UsageError, match=r"config.data\[0\]: spec .* holds your own questions") as err:
        questions(cfg)
    assert "scorer" in (err.value.hint or "") and "--" not in (err.value.hint or "")


def test_a_dead_teacher_is_reported_with_the_way_to_retry(tmp_path: Path) -> None:
    models = Models()
    models.teacher = ScriptedBackend(
        lambda m, c: BackendError("connection to http://127.0.0.1:9/v1 failed"), name="teacher"
    )
    app, p = collect_cli(tmp_path, models, "samples: 1\nfault_rate: 0\n")
    result = CliRunner().invoke(app, ["train", "collect", "--config", str(p)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "3 of 3 attempts ended in error; first:" in text and "connection to" in text, text
    assert "--set retry_errors=true" in text
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["attempts_errored"] == 3


def test_the_state_of_a_collection_part_way_and_at_its_end(tmp_path: Path) -> None:
    cfg = config(tmp_path, stop_when_recovered=False)
    with pytest.raises(UsageError, match="no attempts"):
        collect_state(cfg)
    report, _ = run_collect(cfg)
    done = collect_state(cfg)
    assert (done["questions_finished"], done["questions_total"]) == (3, 3)
    written = {k: v for k, v in report.summary.items() if k != "wall_s_this_run"}
    assert {k: v for k, v in done.items() if k in written} == written  # what the run wrote at its end
    # Part way: the first question's 4 attempts logged and one of the second's.
    path = tmp_path / "out" / ATTEMPTS_FILE
    whole = path.read_text(encoding="utf-8").splitlines(keepends=True)
    ids = [json.loads(x)["id"] for x in whole]
    kept = [x for x, i in zip(whole, ids, strict=True) if i == ids[0]]
    kept.append(next(x for x, i in zip(whole, ids, strict=True) if i != ids[0]))
    path.write_text("".join(kept), encoding="utf-8")
    part = collect_state(cfg)
    assert part["attempts"] == 5 and part["questions_finished"] == 1
    assert path.read_text(encoding="utf-8") == "".join(kept)  # nothing written


def test_cli_collect_report_runs_nothing(tmp_path: Path) -> None:
    models = Models()
    app, p = collect_cli(tmp_path, models, "samples: 2\ntemperature: 0.5\nfault_rate: 0\n")
    early = CliRunner().invoke(app, ["train", "collect", "--config", str(p), "--report"])
    assert isinstance(early.exception, UsageError) and "no attempts" in str(early.exception)
    assert CliRunner().invoke(app, ["train", "collect", "--config", str(p)]).exit_code == 0
    calls = len(models.teacher.calls)
    result = CliRunner().invoke(app, ["train", "collect", "--config", str(p), "--report"])
    assert result.exit_code == 0, result.output
    assert "3 of 3 questions finished" in result.output and '"kept": 2' in result.output
    assert len(models.teacher.calls) == calls
    hidden = CliRunner().invoke(app, ["train", "sft", "--config", str(p), "--report"])
    assert isinstance(hidden.exception, UsageError) and "has no --report" in str(hidden.exception)


def test_a_data_part_can_skip_its_first_questions(tmp_path: Path) -> None:
    from masorch.train.collect import questions

    part = DataConfig(spec=str(data_file(tmp_path)), scorer="exact", skip=1, limit=1)
    cfg = config(tmp_path, data=[part])
    assert [q.sample.question for q in questions(cfg)] == ["What is 7*6?"]
    with pytest.raises(UsageError, match="skip must be greater than or equal to 0"):
        DataConfig(spec="x", skip=-1)
