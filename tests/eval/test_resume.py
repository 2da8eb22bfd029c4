"""A run killed with SIGKILL resumes with no sample lost or run twice; torn lines are dropped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import typer
from eval_helpers import SumBackendFactory, scorer_factory, write_sums
from typer.testing import CliRunner

from masorch.cli import eval as eval_cli
from masorch.errors import UsageError
from masorch.eval.harness import EnvSpec, EvalOptions, evaluate
from masorch.eval.log import RunLog
from masorch.eval.sources import resolve
from masorch.eval.systems import parse_systems

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"


def _sample_lines(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "sample"]


def test_sigkill_then_resume_runs_each_sample_exactly_once(tmp_path: Path) -> None:
    data = write_sums(tmp_path / "sums.jsonl", 12)
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(HERE)]))
    # 0.4 s a call: slow enough (about 5 s in all) that the kill lands mid-run on a stalled machine
    cmd = [sys.executable, str(HERE / "resume_worker.py"), str(out), str(data), "0.4"]
    proc = subprocess.Popen([*cmd, "new"], env=env)
    log = out / "log.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists() and len(_sample_lines(log)) >= 5:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    before = _sample_lines(log)
    assert 5 <= len(before) < 24, "the kill should land mid-run"
    # a torn write at the moment of the kill must not break the resume
    with log.open("a") as fh:
        fh.write('{"type": "sample", "key": "sas:cot|masbench:sums|sum-de')

    factory = SumBackendFactory(wrong_every=4)
    calls: Counter[str] = Counter()

    def counting(spec: str):  # count the samples the resume actually runs
        backend = factory(spec)
        inner = backend.complete

        async def complete(messages, config):
            text = "\n".join(m.content for m in messages)
            if "Write the plan now." not in text:
                calls[text.split("Item ")[1].split(".")[0]] += 1
            return await inner(messages, config)

        backend.complete = complete  # type: ignore[method-assign]
        return backend

    tally = evaluate(
        parse_systems("sas:cot,mas:high", model="scripted:m"),
        [resolve(str(data))],
        out,
        options=EvalOptions(concurrency=4, resume=True),
        env_spec=EnvSpec(backend_factory=counting, scorer_factory=scorer_factory),
    )
    after = _sample_lines(log)
    keys = Counter(r["key"] for r in after)
    assert len(keys) == 24 and max(keys.values()) == 1, "no sample lost, none twice"
    assert sum(calls.values()) == 24 - len(before), "only the unfinished samples ran again"
    assert tally.done == 24 and tally.correct == 18  # items 0, 4, 8 wrong for both systems
    assert [r["type"] for r in map(json.loads, log.read_text().splitlines())].count("resume") == 1


def test_new_run_refuses_an_existing_log_and_resume_checks_the_systems(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 2)))
    env = EnvSpec(backend_factory=SumBackendFactory(), scorer_factory=scorer_factory)
    systems = parse_systems("sas:cot", model="scripted:m")
    evaluate(systems, [data], tmp_path / "o", env_spec=env)
    with pytest.raises(UsageError, match="already holds a run"):
        evaluate(systems, [data], tmp_path / "o", env_spec=env)
    with pytest.raises(UsageError, match="different systems"):
        evaluate(
            parse_systems("sas:sc", model="scripted:m"),
            [data],
            tmp_path / "o",
            options=EvalOptions(resume=True),
            env_spec=env,
        )
    header, records = RunLog.read(tmp_path / "o")
    assert len(records) == 2 and header["systems"][0]["name"] == "sas:cot"


def test_retry_failed_reruns_only_failed_samples(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 4)))
    systems = parse_systems("sas:cot", model="scripted:m")

    def broken(spec: str):
        raise RuntimeError("no such server")

    first = evaluate(systems, [data], tmp_path / "o", env_spec=EnvSpec(backend_factory=broken))
    assert first.done == 4 and first.not_ok == 4 and first.correct == 0
    good = EnvSpec(backend_factory=SumBackendFactory(), scorer_factory=scorer_factory)
    again = evaluate(systems, [data], tmp_path / "o", options=EvalOptions(resume=True), env_spec=good)
    assert again.done == 4 and again.not_ok == 4, "plain --resume keeps failures as done"
    fixed = evaluate(
        systems, [data], tmp_path / "o", options=EvalOptions(resume=True, retry_failed=True), env_spec=good
    )
    assert fixed.done == 4 and fixed.not_ok == 0 and fixed.correct == 4
    _, records = RunLog.read(tmp_path / "o")
    assert [r["status"] for r in records] == ["ok"] * 4


def test_retry_failed_reruns_the_samples_a_dead_endpoint_ended_in_error(tmp_path: Path) -> None:
    # A model call that fails (a dead endpoint, a server error) ends the run with status "error",
    # not "failed": retrying must reach those, and leave the wrong answers alone.
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 4)))
    systems = parse_systems("sas:cot", model="scripted:m")
    dead = EnvSpec(
        backend_factory=SumBackendFactory(wrong_every=2, fail_items=[1, 3]), scorer_factory=scorer_factory
    )
    first = evaluate(systems, [data], tmp_path / "o", env_spec=dead)
    _, records = RunLog.read(tmp_path / "o")
    assert sorted(r["status"] for r in records) == ["error", "error", "ok", "ok"]
    good = EnvSpec(backend_factory=SumBackendFactory(wrong_every=2), scorer_factory=scorer_factory)
    fixed = evaluate(
        systems, [data], tmp_path / "o", options=EvalOptions(resume=True, retry_failed=True), env_spec=good
    )
    _, records = RunLog.read(tmp_path / "o")
    assert [r["status"] for r in records] == ["ok"] * 4
    assert fixed.done == 4 and first.correct == fixed.correct - 2


def test_resume_refuses_another_choice_of_samples_of_the_same_size(tmp_path: Path) -> None:
    path = write_sums(tmp_path / "s.jsonl", 6)
    env = EnvSpec(backend_factory=SumBackendFactory(), scorer_factory=scorer_factory)
    systems = parse_systems("sas:cot", model="scripted:m")
    evaluate(systems, [resolve(str(path), limit=3)], tmp_path / "o", env_spec=env)
    with pytest.raises(UsageError, match="different datasets"):
        evaluate(
            systems,
            [resolve(str(path), limit=3, skip=3)],
            tmp_path / "o",
            options=EvalOptions(resume=True),
            env_spec=env,
        )
    # a log begun before the fingerprint existed resumes as before
    log = tmp_path / "o" / "log.jsonl"
    lines = log.read_text().splitlines()
    header = json.loads(lines[0])
    for entry in header["datasets"]:
        del entry["ids"]
    log.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    again = evaluate(
        systems, [resolve(str(path), limit=3)], tmp_path / "o", options=EvalOptions(resume=True), env_spec=env
    )
    assert again.done == 3


def test_a_second_run_on_a_directory_in_use_is_refused(tmp_path: Path) -> None:
    # Two runs on one --out each ran every sample (every model call paid twice) into one log.
    header = {"systems": [], "datasets": []}
    with (
        RunLog.create(tmp_path / "o", header, resume=False),
        pytest.raises(UsageError, match="another masorch run is writing to"),
    ):
        RunLog.create(tmp_path / "o", header, resume=True)
    with RunLog.create(tmp_path / "o", header, resume=True) as log:  # free once the first has ended
        assert log.header["systems"] == []


def test_a_new_run_does_not_append_to_traces_left_by_another(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 2)))
    env = EnvSpec(backend_factory=SumBackendFactory(), scorer_factory=scorer_factory)
    systems = parse_systems("sas:cot", model="scripted:m")
    evaluate(systems, [data], tmp_path / "o", env_spec=env)
    traces = tmp_path / "o" / "traces.jsonl"
    first = traces.read_text()
    (tmp_path / "o" / "log.jsonl").unlink()  # the log removed, its traces left
    evaluate(systems, [data], tmp_path / "o", env_spec=env)
    assert len(traces.read_text().splitlines()) == len(first.splitlines())


def test_a_run_begun_before_a_system_field_existed_resumes(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 2)))
    env = EnvSpec(backend_factory=SumBackendFactory(), scorer_factory=scorer_factory)
    systems = parse_systems("sas:cot", model="scripted:m")
    evaluate(systems, [data], tmp_path / "o", env_spec=env)
    log = tmp_path / "o" / "log.jsonl"
    lines = log.read_text().splitlines()
    header = json.loads(lines[0])
    del header["systems"][0]["top_k"]  # as written by a version without the field
    log.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    tally = evaluate(systems, [data], tmp_path / "o", options=EvalOptions(resume=True), env_spec=env)
    assert tally.done == 2
    header["systems"][0]["top_k"] = 40  # a real difference is still one
    log.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(UsageError, match="different systems"):
        evaluate(systems, [data], tmp_path / "o", options=EvalOptions(resume=True), env_spec=env)


def test_resume_refuses_other_settings_and_the_report_names_them(tmp_path: Path) -> None:
    # A resume with another --max-tokens or --agents mixed answers of two settings in one run.
    data = write_sums(tmp_path / "s.jsonl", 3)
    app = typer.Typer()
    env = EnvSpec(backend_factory=SumBackendFactory(), scorer_factory=scorer_factory)
    eval_cli.register(app, env_factory=lambda args: env)
    out = tmp_path / "o"
    args = ["eval", "run", "--systems", "sas:cot", "--model", "scripted:m", "--data", str(data)]
    args += ["--out", str(out), "--no-plots", "--max-tokens", "64"]
    runner = CliRunner()
    assert runner.invoke(app, args).exit_code == 0
    assert "Settings: agents default, max_tokens 64." in (out / "report.md").read_text()
    for other in (["--max-tokens", "128"], ["--agents", "paper"]):
        refused = runner.invoke(app, [*args, *other, "--resume"])
        assert isinstance(refused.exception, UsageError), refused.output
        assert "different settings" in str(refused.exception)
    resumed = runner.invoke(app, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    # a log begun before settings were kept resumes as before
    log = out / "log.jsonl"
    lines = log.read_text().splitlines()
    header = json.loads(lines[0])
    del header["settings"]
    log.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert runner.invoke(app, [*args, "--max-tokens", "128", "--resume"]).exit_code == 0


def test_resume_refuses_other_prices_and_the_report_keeps_the_runs_seed(tmp_path: Path) -> None:
    # A resume under another --price mixed the costs of two price tables in one run; `eval report`
    # rebuilt the report with seed 0 whatever --seed the run had.
    data = write_sums(tmp_path / "s.jsonl", 37)
    app = typer.Typer()
    env = EnvSpec(backend_factory=SumBackendFactory(wrong_every=3), scorer_factory=scorer_factory)
    eval_cli.register(app, env_factory=lambda args: env)
    out = tmp_path / "o"
    args = ["eval", "run", "--systems", "sas:cot", "--model", "scripted:m", "--data", str(data)]
    args += ["--out", str(out), "--no-plots", "--seed", "1", "--price", "scripted:m=1000,1000"]
    runner = CliRunner()
    assert runner.invoke(app, args).exit_code == 0
    written = (out / "report.md").read_text()
    assert "prices scripted:m=1000,1000" in written
    for other in (["--price", "scripted:m=1,1"], []):
        base = [a for a in args if a not in ("--price", "scripted:m=1000,1000")]
        refused = runner.invoke(app, [*base, *other, "--resume"])
        assert isinstance(refused.exception, UsageError), refused.output
        assert "different settings" in str(refused.exception)
    assert runner.invoke(app, ["eval", "report", str(out), "--no-plots"]).exit_code == 0
    assert (out / "report.md").read_text() == written
    assert runner.invoke(app, ["eval", "report", str(out), "--no-plots", "--seed", "0"]).exit_code == 0
    assert (out / "report.md").read_text() != written
