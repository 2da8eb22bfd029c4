"""Issue 13 item 5: a key written into a model string or server URL never reaches an output.

A canary key goes into the URL of each backend kind that takes one (``vllm:URL#model``, ``openai:``
with a base URL from the environment, the same behind ``--cache``); every output is searched for
it: ``--json`` and rich stdout, stderr, ``-v`` logs (the HTTP client's included), trace files, eval
directories (log, traces, report), error messages.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from masorch.backends.loopback import FaultPlan, LoopbackServer
from masorch.cli.main import main
from masorch.redact import RedactFilter, redact

CANARY = "CANARY-9f8e7d"
RECORD = {"id": "s1", "question": "Item 1. What is 1 plus 2?", "answers": [3], "ground_truth": "3"}


def responder(messages):
    text = "\n".join(str(m.get("content")) for m in messages)
    return 'create_agent(id="a", kind="cot", task="Add 1 and 2.")' if "create_agent" in text else "\\boxed{3}"


def secret_url(server: LoopbackServer) -> str:
    return f"http://user:{CANARY}@127.0.0.1:{server.port}/v1"


def assert_clean(*texts: str) -> None:
    for text in texts:
        assert CANARY not in text


def files_text(directory: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(directory.rglob("*")) if p.is_file())


@pytest.fixture
def debug_logs(caplog):
    """What ``-v`` would print: every record at DEBUG, through the CLI's handlers and filter."""
    caplog.set_level(logging.DEBUG)
    return caplog


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "rich"])
def test_vllm_url_credentials_stay_out_of_run_outputs(as_json, tmp_path, capsys, debug_logs):
    trace = tmp_path / "trace.jsonl"
    with LoopbackServer(responder) as server:
        model = f"vllm:{secret_url(server)}#m"
        argv = ["-v", "run", "What is 1+2?", "--orchestrator", model, "--trace", str(trace)]
        assert main(argv + (["--json"] if as_json else [])) == 0
        assert server.request_count == 2
        port = server.port
    out, err = capsys.readouterr()
    assert "3" in out
    assert "HTTP Request" in debug_logs.text  # the client did log its URLs
    assert_clean(out, err, debug_logs.text, trace.read_text())
    started = json.loads(trace.read_text().splitlines()[0])
    assert started["models"]["orchestrator"] == f"vllm:http://127.0.0.1:{port}/v1#m"


def test_openai_base_url_credentials_stay_out_of_run_outputs(tmp_path, capsys, debug_logs, monkeypatch):
    trace = tmp_path / "trace.jsonl"
    with LoopbackServer(responder) as server:
        monkeypatch.setenv("MASORCH_OPENAI_BASE_URL", secret_url(server))
        monkeypatch.setenv("MASORCH_OPENAI_API_KEY", CANARY + "-env")
        argv = ["-v", "run", "What is 1+2?", "--orchestrator", "openai:m", "--json", "--trace", str(trace)]
        assert main(argv) == 0
    out, err = capsys.readouterr()
    assert_clean(out, err, debug_logs.text, trace.read_text())


def test_a_failing_server_reports_without_the_key(tmp_path, capsys, debug_logs):
    # 401 is not retried: the run fails at once with the server's refusal in its error.
    with LoopbackServer(responder, faults=FaultPlan(rate=1.0, kinds=("401",))) as server:
        model = f"vllm:{secret_url(server)}#m"
        assert main(["-v", "run", "q", "--orchestrator", model, "--json"]) == 1
        assert main(["-v", "run", "q", "--orchestrator", model]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out.splitlines()[0])["status"] == "error"
    assert "HTTP 401" in " ".join(out.split())
    assert_clean(out, err, debug_logs.text)


@pytest.mark.parametrize("cache", [False, True], ids=["direct", "cached"])
def test_eval_directories_and_reports_hold_no_key(cache, tmp_path, capsys, debug_logs):
    data = tmp_path / "sums.jsonl"
    data.write_text(json.dumps(RECORD) + "\n")
    out_dir = tmp_path / "run"
    with LoopbackServer(responder) as server:
        model = f"vllm:{secret_url(server)}#m"
        argv = ["-v", "eval", "run", "--data", str(data), "--out", str(out_dir), "--no-plots"]
        argv += ["--systems", "sas:cot,mas:high", "--model", model, "--judge", model]
        argv += ["--cache", str(tmp_path / "cache.sqlite")] if cache else []
        assert main(argv) == 0
        port = server.port
    assert main(["eval", "report", str(out_dir), "--no-plots"]) == 0
    out, err = capsys.readouterr()
    header = json.loads((out_dir / "log.jsonl").read_text().splitlines()[0])
    assert header["systems"][0]["model"] == f"vllm:http://127.0.0.1:{port}/v1#m"
    assert "127.0.0.1" in (out_dir / "report.md").read_text()
    assert_clean(out, err, debug_logs.text, files_text(out_dir))


@pytest.mark.parametrize(
    "model",
    [
        f"nope:{CANARY}",
        CANARY,
        f"vllm:http://u:{CANARY}@127.0.0.1:9/v1",  # no #model
        f"vllm:ftp://u:{CANARY}@host/v1#m",
        f"local:http://u:{CANARY}@host/x.bin",
    ],
)
def test_model_string_errors_do_not_echo_the_key(model, capsys):
    assert main(["run", "q", "--orchestrator", model, "--json"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: ")
    assert_clean(out, err)


def test_eval_model_string_errors_do_not_echo_the_key(tmp_path, capsys):
    data = tmp_path / "sums.jsonl"
    data.write_text(json.dumps(RECORD) + "\n")
    argv = ["eval", "run", "--data", str(data), "--out", str(tmp_path / "o"), "--systems", "sas:cot"]
    assert main([*argv, "--model", f"nope:{CANARY}"]) == 2
    out, err = capsys.readouterr()
    assert_clean(out, err, files_text(tmp_path / "o"))


def test_verbose_logs_of_a_real_process_hold_no_key(tmp_path):
    root = Path(__file__).parents[2]
    with LoopbackServer(responder) as server:
        model = f"vllm:{secret_url(server)}#m"
        proc = subprocess.run(
            [sys.executable, "-m", "masorch", "-v", "run", "What is 1+2?", "--orchestrator", model, "--json"],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(root / "src"), "HOME": str(tmp_path)},
            cwd=root,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert "HTTP Request: POST http://127.0.0.1:" in proc.stderr
    assert_clean(proc.stdout, proc.stderr)


def test_the_filter_redacts_messages_args_and_tracebacks():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "GET %s", (f"https://a:{CANARY}@h/p",), None)
    try:
        raise ValueError(f"failed at http://{CANARY}@h/")
    except ValueError:
        record.exc_info = sys.exc_info()
    assert RedactFilter().filter(record)
    assert record.getMessage() == "GET https://h/p"
    assert CANARY not in (record.exc_text or "")


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        (f"vllm:http://user:{CANARY}@127.0.0.1:8000/v1#org/model", "vllm:http://127.0.0.1:8000/v1#org/model"),
        (f"vllm:https://{CANARY}@h/v1#m", "vllm:https://h/v1#m"),
        (f"vllm:http://u:p@ss{CANARY}@h:1/v1#m", "vllm:http://h:1/v1#m"),
        (f"http://h/v1?key={CANARY}&api-version=2#m", "http://h/v1?key=***&api-version=***#m"),
        (f"two http://a:{CANARY}@x/ and https://b:{CANARY}@y/z", "two http://x/ and https://y/z"),
        ("openai:gpt-4o-mini", "openai:gpt-4o-mini"),
        ("mail me: a@b.c", "mail me: a@b.c"),
    ],
)
def test_redact(text, clean):
    assert redact(text) == clean


async def test_a_client_exception_quoting_a_url_is_redacted_in_the_trace():
    from masorch.backends.base import GenerateConfig, Message
    from masorch.backends.scripted import ScriptedBackend
    from masorch.run.session import RunSession
    from masorch.trace.writer import MemoryTrace

    def fail(messages, config):
        raise ValueError(f"cannot reach http://user:{CANARY}@10.0.0.1/v1")

    trace = MemoryTrace()
    with pytest.raises(ValueError):
        await RunSession(trace=trace).complete(
            ScriptedBackend(fail, name="s"), [Message("user", "hi")], GenerateConfig(), role="subagent"
        )
    [call] = [e for e in trace.events if e.type == "llm_call"]
    assert call.error == "ValueError: cannot reach http://10.0.0.1/v1"
