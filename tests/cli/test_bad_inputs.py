"""The regression corpus of issue 13 (item 3): every bad CLI input ends with a named error, a fix hint
and exit code 2 (usage) or 1 (the run failed), never a traceback or a silent 0/0 run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from masorch.backends.loopback import LoopbackServer
from masorch.cli.main import main

BINARY = bytes(range(256)) * 8 + b"\x00\xff\xfe" * 100
RECORD = {"id": "s1", "question": "What is 1 plus 2?", "answers": [3], "ground_truth": "3"}
SYSTEMS_YAML = "defaults: {model: nope:x}\nsystems: [sas:cot]\n"
HEADER = (
    b'{"type": "header", "systems": [{"name": "s", "mode": "sas"}], "datasets": [{"name": "d", "n": 1}]}\n'
)
SAMPLE = b'{"type": "sample", "key": "k", "system": "s", "dataset": "d", "sample_id": "1", "status": "ok"}\n'


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The billion-laughs YAML: a few hundred bytes that expand to width**levels values."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + f"\nsystems: [sas:cot]\nbomb: *a{levels - 1}\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Bad and good inputs in a temporary directory."""
    out = {
        "binary": tmp_path / "blob.bin",
        "binary_jsonl": tmp_path / "blob.jsonl",
        "binary_yaml": tmp_path / "blob.yaml",
        "binary_parquet": tmp_path / "blob.parquet",
        "empty_jsonl": tmp_path / "empty.jsonl",
        "garbage_json": tmp_path / "garbage.jsonl",
        "not_records": tmp_path / "numbers.jsonl",
        "one": tmp_path / "one.jsonl",
        "a_file": tmp_path / "a_file",
        "bomb": tmp_path / "bomb.yaml",
        "systems": tmp_path / "systems.yaml",
        "garbage_log_dir": tmp_path / "garbage_run",
        "binary_log_dir": tmp_path / "binary_run",
        "shapeless_log_dir": tmp_path / "shapeless_run",
        "infinite_log_dir": tmp_path / "infinite_run",
        "list_budget_log_dir": tmp_path / "list_budget_run",
        "text_score_log_dir": tmp_path / "text_score_run",
        "huge_int_jsonl": tmp_path / "huge_int.jsonl",
        "text_ts_trace": tmp_path / "text_ts.jsonl",
        "self_yaml": tmp_path / "self.yaml",
        "mode_systems": tmp_path / "mode_systems.yaml",
        "a_dir_jsonl": tmp_path / "a_dir.jsonl",
        "costs_systems": tmp_path / "costs.yaml",
        "fifo": tmp_path / "fifo.csv",
    }
    for key in ("binary", "binary_jsonl", "binary_yaml", "binary_parquet"):
        out[key].write_bytes(BINARY)
    out["empty_jsonl"].write_text("")
    out["garbage_json"].write_text("{not json\n")
    out["not_records"].write_text("1\n[2]\n")
    out["one"].write_text(json.dumps(RECORD) + "\n")
    out["a_file"].write_text("I am a file")
    out["bomb"].write_text(alias_bomb())
    out["systems"].write_text(SYSTEMS_YAML)
    out["huge_int_jsonl"].write_text('{"id": ' + "9" * 5000 + "}\n")
    out["text_ts_trace"].write_text('{"schema_version": 1, "run_id": "r", "ts": "abc"}\n')
    out["self_yaml"].write_text("self: 1\n")
    out["mode_systems"].write_text("systems:\n  - {system: sas:cot, model: nope:x, mode: mas}\n")
    out["a_dir_jsonl"].mkdir()
    os.mkfifo(out["fifo"])  # reading it would block forever
    out["costs_systems"].write_text(
        "defaults: {model: 'vllm:http://127.0.0.1:9/v1#m'}\n"
        "systems:\n  - {system: mas:rounds, tool_costs: {pyhton: 2}}\n"
    )
    for key, content in (
        ("garbage_log_dir", b"garbage\nmore garbage\n"),
        ("binary_log_dir", BINARY + b"\n"),
        ("shapeless_log_dir", b'{"type": "header", "systems": [], "datasets": []}\n{"type": "sample"}\n'),
        ("infinite_log_dir", (HEADER + SAMPLE.replace(b'"ok"', b'"ok", "axis": "depth", "value": 1e999'))),
        ("list_budget_log_dir", HEADER.replace(b'"sas"', b'"sas", "budget": [1, 2]') + SAMPLE),
        ("text_score_log_dir", HEADER + SAMPLE.replace(b'"ok"', b'"ok", "score": "abc"')),
    ):
        out[key].mkdir()
        (out[key] / "log.jsonl").write_bytes(content)
    return out


Case = Callable[[dict[str, Path], Path], list[str]]
EVAL = ["eval", "run", "--systems", "sas:cot", "--model", "vllm:http://127.0.0.1:9/v1#m"]

# (name, argv from the files and a scratch dir, expected exit code, text the error must contain)
CASES: list[tuple[str, Case, int, str]] = [
    ("validate /dev/zero", lambda f, d: ["validate", "/dev/zero"], 2, "larger than"),
    ("validate binary", lambda f, d: ["validate", str(f["binary"])], 2, "is binary"),
    ("validate a directory", lambda f, d: ["validate", str(d)], 2, "is a directory"),
    (
        "eval run --data-cache a file",
        lambda f, d: [
            *EVAL,
            "--data",
            "aime24",
            "--out",
            str(d / "o"),
            "--data-cache",
            str(f["a_file"]),
        ],
        2,
        "is a file",
    ),
    (
        "data list --cache-dir a file",
        lambda f, d: ["data", "list", "--cache-dir", str(f["a_file"])],
        2,
        "is a file",
    ),
    ("run --corpus binary", lambda f, d: ["run", "q", "--corpus", str(f["binary_jsonl"])], 2, "is binary"),
    ("run --corpus not documents", lambda f, d: ["run", "q", "--corpus", str(f["one"])], 2, "needs a string"),
    ("run --corpus /dev/zero", lambda f, d: ["run", "q", "--corpus", "/dev/zero"], 2, "no corpus"),
    (
        "eval run binary config",
        lambda f, d: [
            "eval",
            "run",
            "--data",
            str(f["one"]),
            "--out",
            str(d / "o"),
            "--config",
            str(f["binary_yaml"]),
        ],
        2,
        "is binary",
    ),
    (
        "eval run binary dataset",
        lambda f, d: [*EVAL, "--data", str(f["binary_jsonl"]), "--out", str(d / "o")],
        2,
        "is binary",
    ),
    (
        "eval run binary parquet",
        lambda f, d: [*EVAL, "--data", str(f["binary_parquet"]), "--out", str(d / "o")],
        2,
        "not a readable parquet file",
    ),
    (
        "eval run garbage JSONL",
        lambda f, d: [*EVAL, "--data", str(f["garbage_json"]), "--out", str(d / "o")],
        2,
        "not JSON",
    ),
    (
        "eval run JSON that is not records",
        lambda f, d: [*EVAL, "--data", str(f["not_records"]), "--out", str(d / "o")],
        2,
        "must be a JSON object",
    ),
    (
        "eval run empty dataset",
        lambda f, d: [*EVAL, "--data", str(f["empty_jsonl"]), "--out", str(d / "o")],
        2,
        "no samples",
    ),
    (
        "eval run --limit 0",
        lambda f, d: [*EVAL, "--data", str(f["one"]), "--limit", "0", "--out", str(d / "o")],
        2,
        "no samples",
    ),
    (
        "eval run unknown --scorer",
        lambda f, d: [*EVAL, "--data", str(f["one"]), "--out", str(d / "o"), "--scorer", "bogus"],
        2,
        "unknown scorer",
    ),
    (
        "eval run --out a file",
        lambda f, d: [*EVAL, "--data", str(f["one"]), "--out", str(f["a_file"])],
        2,
        "is a file",
    ),
    (
        "eval run alias bomb",
        lambda f, d: [
            "eval",
            "run",
            "--data",
            str(f["one"]),
            "--out",
            str(d / "o"),
            "--config",
            str(f["bomb"]),
        ],
        2,
        "expands to more than",
    ),
    ("eval report garbage log", lambda f, d: ["eval", "report", str(f["garbage_log_dir"])], 2, "not"),
    ("eval report binary log", lambda f, d: ["eval", "report", str(f["binary_log_dir"])], 2, "run log"),
    ("eval report shapeless log", lambda f, d: ["eval", "report", str(f["shapeless_log_dir"])], 2, "lacks"),
    ("eval report a file", lambda f, d: ["eval", "report", str(f["a_file"])], 2, "no run log"),
    ("bench check binary", lambda f, d: ["bench", "check", str(f["binary"])], 2, "unknown format"),
    ("bench check binary JSONL", lambda f, d: ["bench", "check", str(f["binary_jsonl"])], 2, "is binary"),
    ("bench check incomplete record", lambda f, d: ["bench", "check", str(f["one"])], 2, "not a complete"),
    ("bench check empty file", lambda f, d: ["bench", "check", str(f["empty_jsonl"])], 2, "no instances"),
    ("bench stats incomplete record", lambda f, d: ["bench", "stats", str(f["one"])], 2, "not a complete"),
    (
        "train grpo binary config",
        lambda f, d: ["train", "grpo", "--config", str(f["binary_yaml"])],
        2,
        "is binary",
    ),
    (
        "train grpo alias bomb",
        lambda f, d: ["train", "grpo", "--config", str(f["bomb"])],
        2,
        "expands to more than",
    ),
    (
        "train --set alias bomb",
        lambda f, d: [
            "train",
            "grpo",
            "--config",
            str(f["systems"]),
            "--set",
            "x=" + alias_bomb().replace("\n", ", ").join("{}"),
        ],
        2,
        "expands to more than",
    ),
    (
        "eval report infinite value",
        lambda f, d: ["eval", "report", str(f["infinite_log_dir"])],
        2,
        "malformed",
    ),
    (
        "eval report budget not a mapping",
        lambda f, d: ["eval", "report", str(f["list_budget_log_dir"]), "--no-plots"],
        2,
        "malformed",
    ),
    (
        "bench check a 5,000-digit number",
        lambda f, d: ["bench", "check", str(f["huge_int_jsonl"])],
        2,
        "not JSON",
    ),
    (
        "bench make into a directory",
        lambda f, d: ["bench", "make", "-o", str(f["a_dir_jsonl"]), "-q"],
        2,
        "directory",
    ),
    (
        "train grpo a key named self",
        lambda f, d: ["train", "grpo", "--config", str(f["self_yaml"])],
        2,
        "unknown key",
    ),
    (
        "eval run a system field named mode",
        lambda f, d: [
            "eval",
            "run",
            "--config",
            str(f["mode_systems"]),
            "--data",
            str(f["one"]),
            "--out",
            str(d / "o"),
        ],
        2,
        "mode is not a field",
    ),
    (
        "eval run a misspelt tool in tool_costs",
        lambda f, d: [
            "eval",
            "run",
            "--config",
            str(f["costs_systems"]),
            "--data",
            str(f["one"]),
            "--out",
            str(d / "o"),
        ],
        2,
        "tool_costs names unknown tools: pyhton",
    ),
    (
        "eval run --model scripted:",
        lambda f, d: [*EVAL[:4], "--model", "scripted:x", "--data", str(f["one"]), "--out", str(d / "o")],
        2,
        "built in code",
    ),
    (
        "view --html a text timestamp",
        lambda f, d: ["view", str(f["text_ts_trace"]), "--html", str(d / "o.html")],
        2,
        "malformed value",
    ),
    (
        "view --html a text score",
        lambda f, d: ["view", str(f["text_score_log_dir"]), "--html", str(d / "o.html")],
        2,
        "malformed value",
    ),
    ("view a missing path", lambda f, d: ["view", str(d / "absent")], 2, "no such file or directory"),
    ("view a binary file", lambda f, d: ["view", str(f["binary_jsonl"])], 2, "is binary"),
    ("view a garbage run log", lambda f, d: ["view", str(f["garbage_log_dir"])], 2, "not JSON"),
    ("eval run --data ''", lambda f, d: [*EVAL, "--data", "", "--out", str(d)], 2, "names no dataset"),
    ("eval run --data ','", lambda f, d: [*EVAL, "--data", ",", "--out", str(d)], 2, "names no dataset"),
    ("view a plain file", lambda f, d: ["view", str(f["a_file"])], 2, "not a masorch trace"),
    (
        "bench check /dev/null",
        lambda f, d: ["bench", "check", "/dev/null"],
        2,
        "/dev/null is not a regular file",
    ),
    (
        "eval run --data a FIFO",
        lambda f, d: [*EVAL, "--data", str(f["fifo"]), "--out", str(d / "o")],
        2,
        "is not a regular file",
    ),
    (
        "eval run --data an empty directory",
        lambda f, d: [*EVAL, "--data", str(f["a_dir_jsonl"]), "--out", str(d / "o")],
        2,
        "a directory is read as a MASBench suite",
    ),
    (
        "bench make --format without --paper",
        lambda f, d: ["bench", "make", "-o", str(d / "x.jsonl"), "--format", "zzz", "-q"],
        2,
        "--format applies to the --paper suite only",
    ),
    ("view a bad port", lambda f, d: ["view", str(d), "--port", "70000"], 2, "is not a port"),
    (
        "unknown provider",
        lambda f, d: ["run", "q", "--orchestrator", "nope:CANARY-KEY"],
        2,
        "unknown model provider",
    ),
]


@pytest.mark.parametrize(("name", "argv", "code", "text"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_named_error_with_a_hint(name, argv, code, text, files, tmp_path, capsys):
    start = time.perf_counter()
    assert main(argv(files, tmp_path)) == code
    err = capsys.readouterr().err
    assert err.startswith("error: "), err
    assert "\nhint: " in err, err
    assert text in " ".join(err.split()), err
    assert "Traceback" not in err
    assert "CANARY-KEY" not in err
    # A hang guard, not a speed test: an unbounded read (/dev/zero) never returns, while the first
    # case's imports alone took over 20 s on a loaded 2-core machine.
    assert time.perf_counter() - start < 120


def test_an_alias_bomb_is_rejected_before_any_log_is_written(files, tmp_path, capsys):
    out = tmp_path / "run"
    start = time.perf_counter()
    assert (
        main(["eval", "run", "--data", str(files["one"]), "--out", str(out), "--config", str(files["bomb"])])
        == 2
    )
    assert time.perf_counter() - start < 5
    assert not (out / "log.jsonl").exists()


def test_run_trace_to_a_full_disk_is_a_run_error_after_the_answer(capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")

    def responder(messages):
        text = "\n".join(str(m.get("content")) for m in messages)
        return (
            'create_agent(id="a", kind="cot", task="Add 2 and 3.")'
            if "create_agent" in text
            else "\\boxed{5}"
        )

    with LoopbackServer(responder) as server:
        model = f"vllm:{server.base_url}#m"
        argv = ["run", "What is 2+3?", "--orchestrator", model, "--json", "--trace", "/dev/full"]
        assert main(argv) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["answer"] == "5"
    assert captured.err.startswith("error: could not write the trace file /dev/full: No space left on device")
    assert "hint: " in captured.err


def test_a_full_disk_during_eval_is_a_named_error_exit_1(files, tmp_path, capsys, monkeypatch):
    from masorch.eval.log import RunLog

    def full(self, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(RunLog, "_write", full)
    assert main([*EVAL, "--data", str(files["one"]), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "error: the file system refused a read or write: No space left on device" in err
    assert "hint: " in err


def test_a_failed_run_writes_nothing_for_a_rerun_to_trip_on(files, tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["eval", "run", "--systems", "sas:cot", "--model", "scripted:x", "--data", str(files["one"])]
    assert main([*argv, "--out", str(out)]) == 2
    assert not out.exists()


DEAD = "vllm:http://127.0.0.1:9/v1#m"  # never called: each start below fails before its first sample
# name -> (the failing flags, text its error must contain)
FAILED_STARTS: dict[str, tuple[list[str], str]] = {
    "a vllm string without a URL": (["--systems", "sas:cot", "--model", "vllm:notaurl"], "lacks '#<model>'"),
    "an unknown local model": (
        ["--systems", "sas:cot", "--model", "local:nonexistent"],
        "unknown local model",
    ),
    "openai without an API key": (["--systems", "sas:cot", "--model", "openai:gpt-4o"], "no API key"),
    "bad params in a systems config": (["--config", "BAD_PARAMS", "--model", DEAD], "n must be at least 1"),
    "bad params on Ray": (
        ["--config", "BAD_PARAMS", "--model", DEAD, "--ray", "local"],
        "n must be at least 1",
    ),
    "a missing prompt file": (
        [
            "--systems",
            "mas:high",
            "--model",
            DEAD,
            "--prompt",
            "official",
            "--prompt-file",
            "/nonexistent.yaml",
        ],
        "system 'mas:high' prompt_file:",
    ),
    "--ray bogus": (
        ["--systems", "sas:cot", "--model", DEAD, "--ray", "bogus"],
        "--ray 'bogus' is not a Ray cluster address hint: use --ray local, or a cluster's address: "
        "ray://HOST:10001 or HOST:6379",
    ),
}


@pytest.mark.parametrize(("bad", "text"), FAILED_STARTS.values(), ids=list(FAILED_STARTS))
def test_a_failed_start_leaves_the_run_directory_for_the_corrected_rerun(
    bad, text, files, tmp_path, capsys, monkeypatch
):
    for name in ("OPENAI_API_KEY", "MASORCH_OPENAI_API_KEY", "OPENAI_BASE_URL", "MASORCH_OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    params = tmp_path / "params.yaml"
    params.write_text("systems:\n  - {system: sas:sc, params: {n: -1}}\n")
    out = tmp_path / "o"
    common = ["eval", "run", "--data", str(files["one"]), "--out", str(out), "--no-plots"]
    assert main([*common, *(str(params) if a == "BAD_PARAMS" else a for a in bad)]) == 2
    err = capsys.readouterr().err
    assert "\nerror: " in f"\n{err}" and "\nhint: " in err and "Traceback" not in err, err
    assert text in " ".join(err.split()), err
    assert not (out / "log.jsonl").exists()
    with LoopbackServer(lambda messages: "\\boxed{3}") as server:
        good = ["--systems", "sas:cot", "--model", f"vllm:{server.base_url}#m"]
        assert main([*common, *good]) == 0, capsys.readouterr().err
    assert "1/1 samples, accuracy 100.0%" in capsys.readouterr().err


def test_a_model_a_ray_worker_cannot_build_stops_the_run_before_its_log(files, tmp_path, capsys, monkeypatch):
    pytest.importorskip("ray")
    from masorch.eval import ray_runner

    # The workers of a local Ray import masorch from this checkout.
    src = str(Path(__file__).resolve().parents[2] / "src")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "o"
    argv = ["eval", "run", "--data", str(files["one"]), "--out", str(out), "--no-plots", "--ray", "local"]
    try:
        assert main([*argv, "--systems", "sas:cot", "--model", "local:nonexistent"]) == 2
    finally:
        ray_runner.shutdown()
    err = " ".join(capsys.readouterr().err.split())
    assert "error: a Ray worker on " in err and "unknown local model" in err and "hint: " in err, err
    assert "Traceback" not in err
    assert not (out / "log.jsonl").exists()


def test_an_interrupted_bench_make_keeps_the_file_that_was_there(tmp_path, monkeypatch):
    from masorch.masbench import export

    target = tmp_path / "keep.jsonl"
    target.write_text("kept\n")

    def records():
        yield {"id": "x"}
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "to_json_line", json.dumps)
    with pytest.raises(KeyboardInterrupt):
        export.write_records(target, records())
    assert target.read_text() == "kept\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.jsonl"]


def test_sigterm_stops_a_command_with_its_clean_up(tmp_path):
    # `kill` or `timeout` used to leave the half-written temporary file of the output behind.
    out = tmp_path / "x.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    argv = [
        sys.executable,
        "-m",
        "masorch",
        "bench",
        "make",
        "-o",
        str(out),
        "--values",
        "2-3",
        "--n",
        "300000",
        "-q",
    ]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if list(tmp_path.glob(".x.jsonl.*.tmp")):
                break
            time.sleep(0.05)
        else:
            pytest.fail("bench make never began writing")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "aborted" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_paper_suite_stopped_part_way_keeps_no_stale_manifest(tmp_path, monkeypatch):
    # A manifest of the old suite (seed 0) beside files of the new one (seed 7) passed `bench check`.
    from masorch.masbench import export

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "manifest.json").write_text('{"seed": 0}')

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "write_records", interrupted)
    assert main(["bench", "make", "--paper", "-o", str(suite), "--seed", "7", "-q"]) == 130
    assert not (suite / "manifest.json").exists()


def test_ctrl_c_says_aborted_and_exits_130(tmp_path, monkeypatch, capsys):
    from masorch.masbench import export

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "write_records", interrupted)
    assert main(["bench", "make", "-o", str(tmp_path / "x.jsonl"), "-q"]) == 130
    assert capsys.readouterr().err.strip().endswith("aborted")


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "report", "RUN", "--seed", "-1"],
        ["bench", "make", "-o", "OUT/x.parquet", "--seed", str(2**64), "-q"],
    ],
    ids=["eval report --seed -1", "bench make a seed past int64"],
)
def test_a_seed_out_of_range_is_a_usage_error(argv, files, tmp_path, capsys):
    argv = [a.replace("RUN", str(files["text_score_log_dir"])).replace("OUT", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '--seed'" in err and "Traceback" not in err


def test_an_eval_refused_at_its_start_draws_no_empty_bar(tmp_path: Path, monkeypatch, capsys) -> None:
    from masorch.backends.openai_compat import API_KEY_ENV, BASE_URL_ENV

    for name in (*API_KEY_ENV, *BASE_URL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal: the live bar draws
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"question": "What is 1 plus 2?", "answer": "3"}) + "\n")
    args = ["eval", "run", "--systems", "sas:cot", "--model", "openai:gpt-4o-mini", "--scorer", "exact"]
    assert main([*args, "--data", str(data), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err  # where the bar draws
    assert "no API key" in err and "0/?" not in err


DEAD_TEACHER = "vllm:http://127.0.0.1:9/v1#m"  # never called: each start below fails before any call
# name -> (train command, config lines (ONE: a one-question file, OUT: the output directory), error text)
BAD_TRAININGS: dict[str, tuple[str, str, str]] = {
    "collect a negative sample": (
        "collect",
        f"teacher: {DEAD_TEACHER}\ndata: [{{spec: ONE, scorer: exact, sample: -1}}]\noutput_dir: OUT\n",
        "config.data[0].sample must be greater than or equal to 0, got -1",
    ),
    "collect no questions": (
        "collect",
        f"teacher: {DEAD_TEACHER}\ndata: [{{spec: ONE, scorer: exact, limit: 0}}]\noutput_dir: OUT\n",
        "the collect config's data holds no questions",
    ),
    "grpo a missing model directory": (
        "grpo",
        f"model: NOWHERE\nsubagent: {DEAD_TEACHER}\ntrain: [{{kind: dataset, name: math500-subset}}]\n"
        "output_dir: OUT\n",
        "no model at",
    ),
    "grpo an unknown dataset": (
        "grpo",
        f"model: org/model\nsubagent: {DEAD_TEACHER}\ntrain: [{{kind: dataset, name: nosuchdataset}}]\n"
        "output_dir: OUT\n",
        "unknown dataset 'nosuchdataset'",
    ),
    "grpo a directory that holds no model": (
        "grpo",
        f"model: EMPTY\nsubagent: {DEAD_TEACHER}\ntrain: [{{kind: dataset, name: math500-subset}}]\n"
        "output_dir: OUT\n",
        "a directory without config.json",
    ),
    "grpo a served model as the policy": (
        "grpo",
        f"model: 'openai:gpt-4o-mini'\nsubagent: {DEAD_TEACHER}\n"
        "train: [{kind: dataset, name: math500-subset}]\noutput_dir: OUT\n",
        "a served model's string",
    ),
    "grpo a sub-agent model that is not pulled": (
        "grpo",
        "model: org/model\nsubagent: local:nosuchmodel\neval_limit: 0\n"
        "train: [{kind: masbench_gen, count: 2}]\noutput_dir: OUT\n",
        "nosuchmodel",
    ),
    "rounds a synthesis model that is not pulled": (
        "rounds",
        f"model: org/model\nsubagent: {DEAD_TEACHER}\nsynthesis: local:nosuchmodel\n"
        "train: [{kind: masbench_gen, count: 2}]\noutput_dir: OUT\n",
        "nosuchmodel",
    ),
    "sft a missing model directory": ("sft", "model: NOWHERE\ndata: ONE\noutput_dir: OUT\n", "no model at"),
    "sft data that is not UTF-8": ("sft", "model: org/model\ndata: LATIN1\noutput_dir: OUT\n", "UTF-8"),
    "sft data with no trajectory": (
        "sft",
        "model: org/model\ndata: EMPTYFILE\noutput_dir: OUT\n",
        "no trajectories",
    ),
    "sft messages that are not a list": (
        "sft",
        "model: org/model\ndata: NOTALIST\noutput_dir: OUT\n",
        "`messages` is not a list of chat messages",
    ),
    "sft an output_dir under a file": (
        "sft",
        "model: org/model\ndata: GOOD\noutput_dir: ONE/x\n",
        "cannot be written",
    ),
    "sft missing data": ("sft", "model: org/model\ndata: NOWHERE.jsonl\noutput_dir: OUT\n", "no SFT data"),
    "rounds a missing model directory": (
        "rounds",
        f"model: NOWHERE\nsubagent: {DEAD_TEACHER}\ntrain: [{{kind: dataset, name: math500-subset}}]\n"
        "output_dir: OUT\n",
        "no model at",
    ),
    "rounds an unknown dataset": (
        "rounds",
        f"model: org/model\nsubagent: {DEAD_TEACHER}\ntrain: [{{kind: dataset, name: nosuchdataset}}]\n"
        "output_dir: OUT\n",
        "unknown dataset 'nosuchdataset'",
    ),
}


@pytest.mark.parametrize(("command", "config", "text"), BAD_TRAININGS.values(), ids=list(BAD_TRAININGS))
def test_a_training_refused_at_its_start_writes_nothing(command, config, text, files, tmp_path, capsys):
    if command != "collect":
        pytest.importorskip("trl")
    out = tmp_path / "out"
    path = tmp_path / "train.yaml"
    (tmp_path / "empty").mkdir()
    (tmp_path / "latin1.jsonl").write_bytes(b'{"messages": [{"role": "user", "content": "caf\xe9"}]}\n')
    (tmp_path / "empty.jsonl").write_text("\n")
    (tmp_path / "notalist.jsonl").write_text('{"messages": "notalist"}\n')
    (tmp_path / "good.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    for name, file in (
        ("LATIN1", "latin1"),
        ("EMPTYFILE", "empty"),
        ("NOTALIST", "notalist"),
        ("GOOD", "good"),
    ):
        config = config.replace(name, str(tmp_path / f"{file}.jsonl"))
    config = config.replace("EMPTY", str(tmp_path / "empty"))
    config = config.replace("NOWHERE", str(tmp_path / "nowhere")).replace("ONE", str(files["one"]))
    path.write_text(config.replace("OUT", str(out)))
    assert main(["train", command, "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "\nerror: " in f"\n{err}" and "\nhint: " in err and "Traceback" not in err, err
    assert text in " ".join(err.split()), err
    assert not out.exists(), sorted(p.name for p in out.iterdir())


def test_bench_make_refuses_a_file_too_large_to_list_and_a_paper_suite_into_a_file(files, tmp_path, capsys):
    huge = ["bench", "make", "-o", str(tmp_path / "x.jsonl"), "--values", "2-3", "--n", "2000000000", "-q"]
    assert main(huge) == 2
    err = capsys.readouterr().err
    assert "error: 4,000,000,000 instances in one file is over the limit of 1,000,000" in err
    assert not (tmp_path / "x.jsonl").exists()
    assert main(["bench", "make", "--paper", "-o", str(files["a_file"]), "-q"]) == 2
    assert f"error: --paper writes a directory, not the file {files['a_file']}" in capsys.readouterr().err
    assert files["a_file"].read_text() == "I am a file"
