"""The harness with scripted backends: accuracy, failure accounting, concurrency, systems, CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer
from eval_helpers import SumBackendFactory, SumModel, scorer_factory, write_sums
from typer.testing import CliRunner

from masorch.backends.scripted import ScriptedBackend
from masorch.cli import eval as eval_cli
from masorch.errors import BackendError, UsageError
from masorch.eval.harness import EnvSpec, EvalOptions, evaluate
from masorch.eval.log import RunLog
from masorch.eval.record import EvalRecord
from masorch.eval.sources import DataSource, resolve
from masorch.eval.systems import parse_systems, systems_from_yaml


def _env(**kw) -> EnvSpec:
    return EnvSpec(backend_factory=SumBackendFactory(**kw), scorer_factory=scorer_factory)


def test_every_system_on_every_sample_with_known_accuracy(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 6, values=(2, 3))))
    systems = parse_systems("sas:cot,sas:sc,sas:debate,sas:reflexion,mas:low,mas:high", model="scripted:m")
    tally = evaluate(systems, [data], tmp_path / "o", env_spec=_env(wrong_every=3))
    assert tally.done == tally.total == 6 * 12
    _, records = RunLog.read(tmp_path / "o")
    assert {r["status"] for r in records} == {"ok"}
    for system in ("sas:cot", "sas:sc", "mas:low", "mas:high"):
        mine = [r for r in records if r["system"] == system]
        wrong = {r["sample_id"] for r in mine if not r["correct"]}
        # items 0 and 3 (of 0..5) answer wrongly, at both axis values
        assert wrong == {f"sum-depth-{v}-{i}" for v in (2, 3) for i in (0, 3)}, system
    by = {r["system"]: r for r in records if r["sample_id"] == "sum-depth-2-1"}
    assert by["sas:cot"]["calls"] == 1 and by["sas:sc"]["calls"] == 5
    assert by["mas:high"]["calls"] == 2 and by["mas:high"]["plan_kinds"] == ["cot"]
    assert by["sas:cot"]["trace_id"] and by["sas:cot"]["prompt_tokens"] > 0
    traces = [json.loads(x) for x in (tmp_path / "o" / "traces.jsonl").read_text().splitlines()]
    assert {e["run_id"] for e in traces} >= {r["trace_id"] for r in records}


def test_rounds_systems_run_and_report_their_rounds(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 3)))
    systems = parse_systems("sas:cot,mas:rounds,mas:rounds-serial", model="scripted:m")
    assert [s.max_calls_per_round for s in systems[1:]] == [4, 1]
    tally = evaluate(systems, [data], tmp_path / "o", env_spec=_env(wrong_every=2))
    assert tally.done == tally.total == 9
    _, records = RunLog.read(tmp_path / "o")
    for system in ("mas:rounds", "mas:rounds-serial"):
        mine = {r["sample_id"]: r for r in records if r["system"] == system}
        assert {r["status"] for r in mine.values()} == {"ok"}
        # the orchestrator passes the cot answer on: wrong on items 0 and 2, like sas:cot
        assert {k for k, r in mine.items() if not r["correct"]} == {"sum-depth-2-0", "sum-depth-2-2"}
        one = mine["sum-depth-2-1"]
        assert (one["rounds"], one["units"], one["tool_statuses"], one["plan_kinds"]) == (
            1,
            1.0,
            {"OK": 1},
            ["cot"],
        )
        assert one["calls"] == 3
        assert (one["tools_ran"], one["rounds_without_calls"], one["undelivered_calls"]) == ({"cot": 1}, 0, 0)
        assert (one["ended_by"], one["final_call"]) == ("final_answer", True)
        assert EvalRecord.from_json(one).valid_calls() == (2, 2)  # the cot call and the final_answer
    assert all(r["rounds"] is None for r in records if r["system"] == "sas:cot")
    assert all(r["tools_ran"] == {} and r["ended_by"] == "" for r in records if r["system"] == "sas:cot")
    from masorch.eval.report import write_report

    report = write_report(tmp_path / "o", plots=False, n_boot=50).read_text()
    assert "| mas:rounds-serial | 3 |" in report


def test_failures_are_recorded_and_counted_never_dropped(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 6)))

    def factory(spec: str):
        if spec == "scripted:orch":  # an orchestrator whose plans never parse
            return ScriptedBackend(["this is not a plan"], cycle=True, name="orch")
        return ScriptedBackend(SumModel(fail_items=(1, 2)), name=spec)

    def scorer(name: str, **_: object):
        class Flaky:
            def score(self, prediction: str, sample):
                if sample.id.endswith("-5"):
                    raise RuntimeError("scorer crashed")
                return scorer_factory(name).score(prediction, sample)

        return Flaky()

    systems = [
        *parse_systems("sas:cot", model="scripted:m"),
        *parse_systems("mas:high", model="scripted:m", orchestrator="scripted:orch"),
    ]
    tally = evaluate(
        systems, [data], tmp_path / "o", env_spec=EnvSpec(backend_factory=factory, scorer_factory=scorer)
    )
    _, records = RunLog.read(tmp_path / "o")
    assert len(records) == 12 and tally.done == 12
    status = {(r["system"], r["sample_id"][-1]): r["status"] for r in records}
    assert status[("sas:cot", "1")] == status[("sas:cot", "2")] == "error"
    assert status[("sas:cot", "5")] == "failed"
    assert "scorer crashed" in next(r["error"] for r in records if r["status"] == "failed")
    assert {status[("mas:high", str(i))] for i in range(6)} == {"invalid_plan"}
    assert tally.not_ok == 3 + 6 and tally.correct == 3
    from masorch.eval.report import write_report

    text = write_report(tmp_path / "o", plots=False, n_boot=200).read_text()
    assert "error 2, failed 1" in text and "invalid_plan 6" in text


def test_samples_run_concurrently(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 16)))
    systems = parse_systems("sas:cot", model="scripted:m")
    t0 = time.monotonic()
    evaluate(systems, [data], tmp_path / "o", options=EvalOptions(concurrency=16), env_spec=_env(delay_s=0.2))
    assert time.monotonic() - t0 < 0.2 * 16 / 3, "16 samples of 0.2 s each must overlap"


def test_cells_take_turns_so_a_stopped_run_covers_every_cell(tmp_path: Path) -> None:
    depth = resolve(str(write_sums(tmp_path / "d.jsonl", 3, values=(2, 4))))
    breadth = resolve(str(write_sums(tmp_path / "b.jsonl", 2, axis="breadth")))
    systems = parse_systems("sas:cot,mas:low", model="scripted:m")
    evaluate(systems, [depth, breadth], tmp_path / "o", env_spec=_env())  # concurrency 1: log order
    _, records = RunLog.read(tmp_path / "o")
    order = [r["sample_id"] for r in records[::2]]
    assert order == [
        "sum-depth-2-0", "sum-depth-4-0", "sum-breadth-2-0",
        "sum-depth-2-1", "sum-depth-4-1", "sum-breadth-2-1",
        "sum-depth-2-2", "sum-depth-4-2",
    ]  # fmt: skip
    assert [r["system"] for r in records[:2]] == ["sas:cot", "mas:low"]  # systems finish a sample together
    assert all(a["sample_id"] == b["sample_id"] for a, b in zip(records[::2], records[1::2], strict=True))


def test_search_system_indexes_the_corpus_once_and_reuses_it(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    docs = [{"id": str(i), "title": f"T{i}", "text": f"Paragraph {i} about sums."} for i in range(20)]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    base = resolve(str(write_sums(tmp_path / "s.jsonl", 2)))
    data = DataSource("sums-search", base.samples, "masbench", corpus)
    systems = parse_systems("sas:search", model="scripted:m")
    evaluate(systems, [data], tmp_path / "o", env_spec=_env())
    index = tmp_path / "corpus.jsonl.index"
    assert index.is_dir()
    stamp = {p.name: p.stat().st_mtime_ns for p in index.iterdir()}
    tally = evaluate(systems, [data], tmp_path / "o2", env_spec=_env())
    assert {p.name: p.stat().st_mtime_ns for p in index.iterdir()} == stamp, "index reused, not rebuilt"
    assert tally.correct == 2


def test_a_single_agent_the_run_cannot_offer_is_refused_before_any_sample(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 2)))  # no corpus, so no search agent
    with pytest.raises(UsageError, match="does not offer the search agent") as caught:
        evaluate(parse_systems("sas:search", model="scripted:m"), [data], tmp_path / "o", env_spec=_env())
    assert "corpus" in (caught.value.hint or "")
    assert (
        not (tmp_path / "o" / "log.jsonl").exists()
        or len((tmp_path / "o" / "log.jsonl").read_text().splitlines()) <= 1
    )


def test_yaml_systems_and_errors() -> None:
    text = """
defaults: {model: scripted:m, budget: {calls: 12}}
systems:
  - sas:cot
  - {system: sas:sc, name: sas:sc3, params: {n: 3}}
  - {system: mas:high, orchestrator: scripted:o, repair: 1, dialect: json}
"""
    specs = systems_from_yaml(text)
    assert [s.name for s in specs] == ["sas:cot", "sas:sc3", "mas:high"]
    assert specs[1].params == {"n": 3} and specs[0].budget.max_calls == 12
    assert specs[2].orchestrator_model == "scripted:o" and specs[2].dialect == "json"
    with pytest.raises(UsageError, match="unknown single-agent"):
        parse_systems("sas:planner", model="m")
    with pytest.raises(UsageError, match="two systems"):
        systems_from_yaml("systems: [sas:cot, sas:cot]\ndefaults: {model: m}")
    with pytest.raises(UsageError, match="unknown key system 'sas:cot': modle") as caught:
        systems_from_yaml("systems: [{system: sas:cot, modle: x}]")
    assert "did you mean 'model'" in (caught.value.hint or "")
    # a misspelt top-level key would silently drop what it holds (here the budget of every system)
    with pytest.raises(UsageError, match="unknown key 'default': did you mean 'defaults'"):
        systems_from_yaml("systems: [sas:cot]\ndefault: {model: m, budget: {calls: 0}}")
    for budget in ("{cost: .nan}", "{wall_s: .inf}", "{cost: .inf}"):
        with pytest.raises(UsageError, match="must be a finite number >= 0"):
            systems_from_yaml(f"systems: [sas:cot]\ndefaults: {{model: m, budget: {budget}}}")


def test_first_runs_a_dataset_before_the_others_and_a_resume_keeps_its_records(tmp_path: Path) -> None:
    depth = resolve(str(write_sums(tmp_path / "d.jsonl", 2, values=(2, 4))))
    breadth = resolve(str(write_sums(tmp_path / "b.jsonl", 2, axis="breadth")))
    systems = parse_systems("sas:cot", model="scripted:m")
    first = EvalOptions(concurrency=1, first=("masbench:b",))
    evaluate(systems, [depth, breadth], tmp_path / "o", options=first, env_spec=_env())
    _, records = RunLog.read(tmp_path / "o")
    assert [r["sample_id"] for r in records] == [
        "sum-breadth-2-0", "sum-breadth-2-1",
        "sum-depth-2-0", "sum-depth-4-0", "sum-depth-2-1", "sum-depth-4-1",
    ]  # fmt: skip
    # the order is not part of the run: the same run resumed without --first finds every sample done
    resumed = EvalOptions(resume=True)
    tally = evaluate(systems, [depth, breadth], tmp_path / "o", options=resumed, env_spec=_env())
    assert tally.done == tally.total == 6 and len(RunLog.read(tmp_path / "o")[1]) == 6


def test_a_resume_grades_the_logged_answers_again_where_they_are_logged(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 3)))
    systems = parse_systems("sas:cot,mas:rounds", model="scripted:m")
    evaluate(systems, [data], tmp_path / "o", env_spec=_env(wrong_every=2))
    _, graded = RunLog.read(tmp_path / "o")
    path = tmp_path / "o" / "log.jsonl"
    head, *rest = path.read_text().splitlines()
    # As if a scorer since fixed had graded every run the other way.
    flipped = [{**json.loads(x), "correct": not json.loads(x)["correct"]} for x in rest]
    path.write_text("\n".join([head, *map(json.dumps, flipped)]) + "\n")
    tally = evaluate(systems, [data], tmp_path / "o", options=EvalOptions(resume=True), env_spec=_env())
    _, again = RunLog.read(tmp_path / "o")
    before = {r["key"]: r for r in graded}
    for rec in again:
        if rec["system"] == "mas:rounds":  # its reply is its answer, boxed: graded again
            assert rec["correct"] == before[rec["key"]]["correct"]
            assert rec["regraded"]["correct"] == (not rec["correct"])
        else:  # a plan's reply is not logged: its verdict is left as it is
            assert rec["correct"] != before[rec["key"]]["correct"] and "regraded" not in rec
    assert tally.correct == sum(r["correct"] for r in again)
    assert len(path.read_text().splitlines()) == 1 + 6 + 1 + 3  # header, records, resume, regraded


def test_first_with_an_unknown_dataset_names_the_known_ones_and_writes_nothing(tmp_path: Path) -> None:
    depth = resolve(str(write_sums(tmp_path / "d.jsonl", 2)))
    systems = parse_systems("sas:cot", model="scripted:m")
    with pytest.raises(UsageError) as err:
        evaluate(systems, [depth], tmp_path / "o", options=EvalOptions(first=("math500",)), env_spec=_env())
    assert "math500" in str(err.value) and "masbench:d" in (err.value.hint or "")
    assert not (tmp_path / "o" / "log.jsonl").exists()


def test_calls_cut_at_their_token_cap_are_counted_per_record_and_reported(tmp_path: Path) -> None:
    from masorch.eval.report import write_report

    data = resolve(str(write_sums(tmp_path / "s.jsonl", 4)))
    systems = parse_systems("sas:cot,mas:low", model="scripted:m")
    evaluate(systems, [data], tmp_path / "o", env_spec=_env(cut_items=(1,)))
    _, records = RunLog.read(tmp_path / "o")
    cut = {(r["system"], r["sample_id"]): r["truncated_calls"] for r in records}
    assert cut[("sas:cot", "sum-depth-2-1")] == cut[("mas:low", "sum-depth-2-1")] == 1
    assert sum(cut.values()) == 2  # the plan calls and the other items stopped on their own
    report = write_report(tmp_path / "o", plots=False).read_text()
    assert "| cut % |" in report
    cells = [line.split(" | ") for line in report.splitlines()]
    rows = {c[0]: " | ".join(c) for c in cells if len(c) > 2 and c[1] == "4"}  # n = 4: accuracy rows
    assert "| 1.0 | 25 |" in rows["| sas:cot"]  # 1 call a sample; 1 of 4 calls cut
    assert "| 2.0 | 12 |" in rows["| mas:low"]  # a plan and a cot answer a sample; 1 of 8 cut


def test_cli_run_writes_log_report_and_resumes(tmp_path: Path) -> None:
    data = write_sums(tmp_path / "s.jsonl", 4, values=(2, 3))
    app = typer.Typer()
    eval_cli.register(app, env_factory=lambda args: _env(wrong_every=2))
    out = tmp_path / "o"
    args = ["eval", "run", "--systems", "sas:cot,mas:low", "--model", "scripted:m", "--data", str(data)]
    args += ["--out", str(out), "--limit", "3", "--concurrency", "4", "--no-plots"]
    runner = CliRunner()
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    _, records = RunLog.read(out)
    assert len(records) == 2 * 2 * 3  # --limit is per axis value
    assert "report.md" in result.output
    again = runner.invoke(app, args)
    assert isinstance(again.exception, UsageError)
    resumed = runner.invoke(app, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert len(RunLog.read(out)[1]) == 12
    assert "12/12 samples" in resumed.output


def test_cli_skip_leaves_out_the_first_samples_before_limit(tmp_path: Path) -> None:
    data = write_sums(tmp_path / "s.jsonl", 6)
    app = typer.Typer()
    eval_cli.register(app, env_factory=lambda args: _env(wrong_every=2))
    out = tmp_path / "o"
    args = ["eval", "run", "--systems", "sas:cot", "--model", "scripted:m", "--data", str(data)]
    args += ["--out", str(out), "--skip", "2", "--limit", "3", "--no-plots"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    ids = sorted(r["sample_id"] for r in RunLog.read(out)[1])
    assert ids == [f"sum-depth-2-{i}" for i in (2, 3, 4)]
    # Off a terminal (a log file, nohup), each finished sample is a plain progress line.
    lines = [line for line in result.output.splitlines() if line.startswith("eval ")]
    assert [line.split()[1] for line in lines if "/" in line.split()[1]] == ["0/3", "1/3", "2/3", "3/3"]


def test_math_and_f1_scorers_of_the_registry_grade_real_datasets_shape(tmp_path: Path) -> None:
    from masorch.eval.datasets import Sample

    # AIME-style integer answers graded by math-verify (thread-safe, time-bounded), HotpotQA by F1.
    math = DataSource(
        "mathy",
        tuple(
            Sample(f"m{i}", f"Item {i}. What is {i} plus 4?", str((i + 4) % 23), "mathy") for i in range(4)
        ),
        "math",
    )
    qa = DataSource("qa", (Sample("q0", "Item 0. What is 0 plus 3?", "3", "qa"),), "f1")
    env = EnvSpec(
        backend_factory=SumBackendFactory(wrong_every=3), scorer_options={"math": {"isolation": "thread"}}
    )
    tally = evaluate(parse_systems("sas:cot", model="scripted:m"), [math, qa], tmp_path / "o", env_spec=env)
    _, records = RunLog.read(tmp_path / "o")
    verdicts = {r["sample_id"]: r["correct"] for r in records}
    assert verdicts == {"m0": False, "m1": True, "m2": True, "m3": False, "q0": False}
    assert tally.not_ok == 0
    assert next(r for r in records if r["sample_id"] == "m1")["details"]["method"]


def test_a_malformed_model_string_stops_the_run_before_any_sample(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 3)))

    def factory(spec: str):
        raise UsageError(f"unknown model provider in {spec!r}", hint="use openai, vllm, local")

    with pytest.raises(UsageError, match="unknown model provider"):
        evaluate(
            parse_systems("sas:cot", model="x:y"),
            [data],
            tmp_path / "o",
            env_spec=EnvSpec(backend_factory=factory),
        )
    assert not (tmp_path / "o" / "log.jsonl").exists()  # no header for the corrected rerun to trip on


def test_resuming_a_finished_run_builds_no_backend(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 2)))
    systems = parse_systems("sas:cot", model="scripted:m")
    evaluate(systems, [data], tmp_path / "o", env_spec=_env())

    built: list[str] = []
    backends = SumBackendFactory()

    def factory(spec: str):  # an hf: model would load its weights here, for nothing left to run
        built.append(spec)
        return backends(spec)

    spec = EnvSpec(backend_factory=factory, scorer_factory=scorer_factory)
    tally = evaluate(systems, [data], tmp_path / "o", options=EvalOptions(resume=True), env_spec=spec)
    assert tally.done == tally.total == 2 and built == []


def test_bad_agent_parameters_stop_the_run_with_a_usage_error(tmp_path: Path) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 2)))
    systems = parse_systems("sas:sc", model="scripted:m", params={"n": 99})
    with pytest.raises(UsageError, match="bad parameters for sas:sc"):
        evaluate(systems, [data], tmp_path / "o", env_spec=_env())
    assert not (tmp_path / "o" / "log.jsonl").exists()


def test_cli_summary_counts_the_samples_that_ended_in_error_and_shows_the_first(tmp_path: Path) -> None:
    def factory(spec: str) -> ScriptedBackend:
        def reply(messages, config):
            if "Item 1." in messages[-1].content:
                raise BackendError("connection to http://user:CANARY-KEY@127.0.0.1:9/v1 failed", hint="up?")
            return SumModel()(messages, config)

        return ScriptedBackend(reply, name=spec)

    data = write_sums(tmp_path / "s.jsonl", 3)
    app = typer.Typer()
    eval_cli.register(
        app, env_factory=lambda args: EnvSpec(backend_factory=factory, scorer_factory=scorer_factory)
    )
    args = ["eval", "run", "--systems", "sas:cot", "--model", "scripted:m", "--data", str(data)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o"), "--no-plots"])
    assert result.exit_code == 0, result.output  # a run that ends in errors still ran (docs/eval.md)
    line = next(x for x in result.output.splitlines() if "ended in error" in x)
    assert line.startswith("1 of 3 samples ended in error; first: ")
    assert "connection to http://127.0.0.1:9/v1 failed" in line and "CANARY-KEY" not in result.output


async def test_mas_systems_constrain_their_plans_with_the_offered_kinds() -> None:
    from masorch.run import Environment, System, run

    plans = []

    def reply(messages, config):
        if "Write the plan now." in messages[-1].content:
            plans.append(config)
        return SumModel()(messages, config)

    env = Environment(EnvSpec(backend_factory=lambda spec: ScriptedBackend(reply, name=spec)))
    try:
        for constrain in (True, False):
            spec = System.parse("mas:high", model="scripted:m", constrain=constrain)
            result = await run(spec, "Item 1. What is 2 plus 3?", env)
            assert result.status == "ok", result.error
    finally:
        await env.aclose()
    constrained, free = plans
    assert constrained.grammar is not None and free.grammar is None
    assert "head-cot" in constrained.grammar and "head-search" not in constrained.grammar  # no corpus
    assert systems_from_yaml("systems: [{system: mas:low, model: m, constrain: false}]")[0].constrain is False


async def test_sas_python_runs_the_models_program_in_the_sandbox() -> None:
    from masorch.agents.sandbox import sandbox_available
    from masorch.run import Environment, System, run

    if not sandbox_available():
        pytest.skip("the python sandbox cannot start here")
    code = "```python\nprint((19 * 5) % 23)\n```"
    env = Environment(EnvSpec(backend_factory=lambda spec: ScriptedBackend([code, "\\boxed{3}"], name=spec)))
    try:
        result = await run(System.parse("sas:python", model="scripted:m"), "What is 19 * 5 mod 23?", env)
    finally:
        await env.aclose()
    assert result.status == "ok", result.error
    assert result.answer == "3"  # (19 * 5) % 23, printed by the program
    assert result.plan is not None and [a.kind for a in result.plan.agents] == ["python"]


def test_prices_from_the_config_and_flags_fill_every_record_cost(tmp_path: Path) -> None:
    data = write_sums(tmp_path / "s.jsonl", 2)
    config = tmp_path / "systems.yaml"
    config.write_text(
        "defaults: {model: scripted:m}\nsystems: [sas:cot]\nprices:\n  scripted:m: {input: 1000, output: 9}\n"
    )
    app = typer.Typer()
    eval_cli.register(app, env_factory=lambda args: _env())
    base = ["eval", "run", "--config", str(config), "--data", str(data), "--no-plots"]
    runner = CliRunner()
    result = runner.invoke(app, [*base, "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    _, records = RunLog.read(tmp_path / "a")
    for rec in records:
        expected = (rec["prompt_tokens"] * 1000 + rec["completion_tokens"] * 9) / 1e6
        assert rec["cost"] == pytest.approx(expected) and rec["cost"] > 0
    # A --price flag wins over the config's section; the summary line shows the total.
    result = runner.invoke(app, [*base, "--out", str(tmp_path / "b"), "--price", "scripted:m=0,1000000"])
    _, records = RunLog.read(tmp_path / "b")
    total = sum(rec["completion_tokens"] for rec in records)
    assert (
        sum(rec["cost"] for rec in records) == pytest.approx(total) and f"cost ${total:.4f}" in result.output
    )
