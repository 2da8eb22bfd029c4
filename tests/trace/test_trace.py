"""Trace events: JSONL round-trip, clear errors on bad input, and no secrets in a trace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "run"))
from run_helpers import registry, vplan

from masorch.backends.base import Completion, GenerateConfig, Message, Usage
from masorch.errors import UsageError
from masorch.run.executor import RoleBackends, run_plan
from masorch.trace.events import EVENT_ADAPTER, LlmCall, NodeFinished, PlanRejected, RunStarted
from masorch.trace.writer import TraceWriter, read_trace


async def test_a_run_trace_round_trips(tmp_path):
    from masorch.backends.scripted import ScriptedBackend

    path = tmp_path / "t" / "trace.jsonl"
    plan = vplan([("a", "cot", "one"), ("b", "cot", "two ${a}")], [("a", "b")])
    with TraceWriter(path) as writer:
        result = await run_plan(
            plan, "Q?", agents=registry(), backends=RoleBackends(ScriptedBackend(["x", "y"])), trace=writer
        )
    events = read_trace(path)
    assert [e.type for e in events] == [
        "run_started",
        "node_started",
        "llm_call",
        "node_finished",
        "node_started",
        "llm_call",
        "node_finished",
        "run_finished",
    ]
    assert {e.run_id for e in events} == {result.run_id}
    finished = [e for e in events if isinstance(e, NodeFinished)]
    assert [(e.node, e.status, e.answer, e.usage.calls) for e in finished] == [
        ("a", "ok", "x", 1),
        ("b", "ok", "y", 1),
    ]
    assert events[4].task == "two x"  # the substituted task is what the node received
    last = events[-1]
    assert (last.status, last.answer, last.usage.calls) == ("ok", "y", 2)
    # Writing again appends: the events re-validate to equal objects.
    with TraceWriter(path) as writer:
        for e in events:
            writer.emit(e)
    assert read_trace(path) == events + events


def test_discriminated_union_and_schema_version():
    e = EVENT_ADAPTER.validate_python(
        {
            "type": "plan_rejected",
            "run_id": "r",
            "dialect": "calls",
            "text": "x",
            "diagnostics": [{"code": "E1"}],
        }
    )
    assert isinstance(e, PlanRejected) and e.schema_version == 1
    assert isinstance(
        EVENT_ADAPTER.validate_json(RunStarted(run_id="r", question="q").model_dump_json()), RunStarted
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 2|:2: not JSON"),
        (
            '{"schema_version": 99, "type": "run_started", "run_id": "r", "question": "q"}',
            "schema version 99",
        ),
        ('{"schema_version": 1, "type": "nope", "run_id": "r"}', "invalid 'nope' event"),
        ('{"schema_version": 1, "type": "llm_call", "run_id": "r"}', "llm_call.*role"),
        ("[1]", "must be a JSON object"),
    ],
)
def test_bad_lines_are_clear_errors(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    good = RunStarted(run_id="r", question="q").model_dump_json()
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(UsageError, match=message):
        read_trace(path)


def test_missing_trace_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        read_trace(tmp_path / "absent.jsonl")


class KeyedBackend:
    """A backend holding an API key in its configuration, as a hosted-API backend would."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.base_url = f"https://user:{api_key}@api.example/v1"

    @property
    def model_id(self) -> str:
        return "openai:gpt-test"

    async def complete(self, messages: list[Message], config: GenerateConfig) -> Completion:
        return Completion(text="fine", usage=Usage(5, 1, 1), model=self.model_id)

    async def aclose(self) -> None:
        return None


async def test_an_api_key_never_reaches_the_trace(tmp_path):
    secret = "sk-test-SECRET-0123456789abcdef"
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as writer:
        result = await run_plan(
            vplan([("a", "cot", "hi")]),
            "Q?",
            agents=registry(),
            backends=RoleBackends(KeyedBackend(secret)),
            trace=writer,
        )
    assert result.status == "ok"
    text = path.read_text()
    assert secret not in text and "SECRET" not in text
    calls = [e for e in read_trace(path) if isinstance(e, LlmCall)]
    assert [c.model for c in calls] == ["openai:gpt-test"]
    assert json.loads(text.splitlines()[0])["models"] == {"subagent": "openai:gpt-test"}


async def test_an_openai_backend_key_never_reaches_the_trace(tmp_path):
    from masorch.backends.loopback import LoopbackServer
    from masorch.backends.openai_compat import OpenAIBackend

    secret = "sk-loopback-SECRET-9876543210"
    path = tmp_path / "trace.jsonl"
    async with LoopbackServer(latency_ms=1) as server:
        backend = OpenAIBackend("echo", base_url=server.base_url, api_key=secret, provider="vllm")
        try:
            with TraceWriter(path) as writer:
                result = await run_plan(
                    vplan([("a", "cot", "hi"), ("b", "cot", "${a}")], [("a", "b")]),
                    "Q?",
                    agents=registry(),
                    backends=RoleBackends(backend),
                    trace=writer,
                )
        finally:
            await backend.aclose()
    assert result.status == "ok" and result.usage.calls == 2
    text = path.read_text()
    assert secret not in text and "SECRET" not in text
    assert {c.model for c in read_trace(path) if isinstance(c, LlmCall)} == {"vllm:echo"}


async def test_llm_call_events_carry_messages_and_reply_and_a_torn_tail_is_left_out(tmp_path):
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as writer:
        await run_plan(
            vplan([("a", "cot", "hi")]),
            "Q?",
            agents=registry(),
            backends=RoleBackends(KeyedBackend("k")),
            trace=writer,
        )
    [call] = [e for e in read_trace(path) if isinstance(e, LlmCall)]
    assert (
        call.response == "fine"
        and call.messages[-1]["role"] == "user"
        and "hi" in call.messages[-1]["content"]
    )
    complete = len(read_trace(path))
    with path.open("a") as fh:
        fh.write('{"schema_version": 1, "run_id": "x", "ty')
    assert len(read_trace(path, complete_only=True)) == complete
    with pytest.raises(UsageError, match="not JSON"):
        read_trace(path)


def test_a_reply_of_megabytes_is_cut_so_the_trace_stays_readable(tmp_path):
    from masorch.trace.events import MAX_EVENT_BYTES

    huge = "word " * (5 << 20)  # 25 MB: a server that ignored max_tokens
    call = LlmCall(
        run_id="r", role="orchestrator", model="m", messages=[{"role": "user", "content": "q"}], response=huge
    )
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as writer:
        writer.emit(call)
        writer.emit(RunStarted(run_id="r", question="next"))
    assert all(len(line) <= MAX_EVENT_BYTES for line in path.read_bytes().splitlines())
    read, after = read_trace(path)
    assert isinstance(read, LlmCall) and read.messages == call.messages and read.model == "m"
    assert read.response.startswith("word word") and read.response.endswith("characters cut from the trace]")
    assert isinstance(after, RunStarted) and after.question == "next"
