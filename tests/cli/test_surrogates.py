"""Text with no UTF-8 form (a lone surrogate) on its way to the terminal, a server or a file.

A ``"\\ud800"`` escape in a plan (from a file, or written by the model) or in a server's JSON reply
decodes to a lone surrogate, which UTF-8 cannot encode: masorch prints it as its escape, sends
U+FFFD in its place, and writes it into JSON files as its JSON escape, never a traceback.
"""

from __future__ import annotations

import json

import pytest

from masorch.backends.loopback import LoopbackServer
from masorch.cli.main import main
from masorch.trace.writer import read_trace

LONE = chr(0xD800)
PLAN = 'create_agent(id="a", kind="cot", task="Add 2 and 3\\ud800.")'  # the escape, as a file holds it


@pytest.mark.parametrize(
    ("text", "extra"),
    [
        (PLAN, []),
        (PLAN, ["--json"]),
        ('{"agents": [{"id": "a", "kind": "cot", "task": "Add 2 and 3\\ud800."}]}', ["--dialect", "json"]),
    ],
    ids=["calls", "calls-json", "json-dialect"],
)
def test_validate_prints_a_lone_surrogate_as_its_escape(text, extra, tmp_path, capsys):
    plan = tmp_path / "plan.txt"
    plan.write_text(text, encoding="ascii")
    assert main(["validate", str(plan), *extra]) == 0
    out = capsys.readouterr().out
    assert "\\ud800" in out
    if "--json" in extra:  # the escape inside a JSON string is the string's JSON escape
        assert json.loads(out)["plan"]["agents"][0]["task"] == f"Add 2 and 3{LONE}."


def test_run_with_lone_surrogates_answers_and_writes_a_readable_trace(tmp_path, capsys):
    sent: list[str] = []

    def responder(messages):
        # The orchestrator plans with a surrogate escape in a task; the sub-agent answers with a
        # real surrogate (which the server sends as the JSON escape "\ud800").
        sent.extend(str(m.get("content")) for m in messages)
        text = "\n".join(str(m.get("content")) for m in messages)
        return PLAN if "create_agent" in text else f"\\boxed{{5{LONE}}}"

    trace = tmp_path / "t.jsonl"
    with LoopbackServer(responder) as server:
        model = f"vllm:{server.base_url}#m"
        argv = ["run", "What is 2+3?", "--orchestrator", model, "--json", "--trace", str(trace)]
        assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["status"], out["answer"]) == ("ok", "5\ufffd")
    assert out["plan"]["agents"][0]["task"] == f"Add 2 and 3{LONE}."
    assert any("Add 2 and 3\ufffd." in text for text in sent)  # the sub-agent got U+FFFD instead
    events = read_trace(trace)
    assert [e.type for e in events][-1] == "run_finished"
    assert next(e for e in events if e.type == "node_started").task == f"Add 2 and 3{LONE}."


def test_rounds_run_sends_a_surrogate_reply_back_and_exports_the_chat(tmp_path, capsys):
    chat = tmp_path / "chat.json"
    with LoopbackServer(lambda messages: f"I am done{LONE}.") as server:
        model = f"vllm:{server.base_url}#m"
        argv = ["run", "What is 2+3?", "--orchestrator", model, "--mode", "rounds", "--max-rounds", "1"]
        assert main([*argv, "--json", "--chat-out", str(chat)]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "ok"
    record = json.loads(chat.read_text(encoding="utf-8"))
    assert any("I am done\ufffd." in str(m.get("content")) for m in record["messages"])


def test_eval_log_report_and_page_take_a_surrogate_answer(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "1+1?", "answer": "2"}\n', encoding="utf-8")
    out = tmp_path / "o"
    with LoopbackServer(lambda messages: 'final_answer("2\\ud800")') as server:
        model = f"vllm:{server.base_url}#m"
        argv = ["eval", "run", "--data", str(data), "--systems", "mas:low", "--model", model]
        assert main([*argv, "--scorer", "exact", "--no-plots", "--out", str(out)]) == 0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    assert log[-1]["answer"] == f"2{LONE}"
    assert [e.type for e in read_trace(out / "traces.jsonl")][-1] == "run_finished"
    assert main(["view", str(out), "--html", str(tmp_path / "page.html")]) == 0
