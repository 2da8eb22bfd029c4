"""OpenAIBackend against the loopback server: answers, every fault, retries counted, secrets redacted."""

from __future__ import annotations

import asyncio
import json
import logging
import socket

import pytest

from masorch.backends.base import Backend, GenerateConfig, Message, ToolCall, ToolSpec
from masorch.backends.loopback import FAULT_KINDS, TRANSIENT_FAULTS, FaultPlan, LoopbackServer
from masorch.backends.openai_compat import OpenAIBackend, Pricing, RetryPolicy, redact_url
from masorch.errors import BackendError, UsageError

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-SECRET-0123456789"
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01)
ASK = [Message("system", "be brief"), Message("user", "what is two plus two")]


def backend(server: LoopbackServer, **kwargs: object) -> OpenAIBackend:
    # 5 s: on a loaded machine a loopback reply has taken over 0.5 s, and the call was retried; the
    # tests of slow faults set their own short timeout.
    options: dict[str, object] = {"api_key": KEY, "timeout_s": 5.0, "retry": FAST_RETRY}
    options.update(kwargs)
    return OpenAIBackend("echo-model", base_url=server.base_url, **options)  # type: ignore[arg-type]


async def test_answer_usage_and_one_attempt() -> None:
    with LoopbackServer() as server:
        b = backend(server)
        assert isinstance(b, Backend)
        c = await b.complete(ASK, GenerateConfig())
        await b.aclose()
    assert c.text == "echo: what is two plus two"
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.calls) == (7, 6, 1)
    assert not c.usage.estimated
    assert c.finish == "stop" and c.attempts == 1 and c.model == "openai:echo-model"
    assert server.request_count == 1
    assert server.bodies[0]["messages"][1] == {"role": "user", "content": "what is two plus two"}


@pytest.mark.parametrize("fault", TRANSIENT_FAULTS)
async def test_transient_fault_is_retried(fault: str) -> None:
    with LoopbackServer(faults=FaultPlan(schedule=(fault,)), slow_s=10) as server:  # type: ignore[arg-type]
        b = backend(server, timeout_s=0.3)
        c = await b.complete(ASK, GenerateConfig())
        await b.aclose()
        assert c.text.startswith("echo:")
        assert c.attempts == 2 == server.request_count


@pytest.mark.parametrize("fault", TRANSIENT_FAULTS)
async def test_persistent_fault_gives_up_after_max_attempts(fault: str) -> None:
    codes = {
        "429": "backend_rate_limited",
        "500": "backend_server_error",
        "slow": "backend_timeout",
        "drop": "backend_connection",
        "malformed": "backend_malformed_reply",
    }
    with LoopbackServer(faults=FaultPlan(schedule=(fault,) * 10), slow_s=10) as server:  # type: ignore[arg-type]
        b = backend(server, timeout_s=0.3)
        with pytest.raises(BackendError) as info:
            await b.complete(ASK, GenerateConfig())
        await b.aclose()
        assert server.request_count == 3
    err = info.value
    assert err.code == codes[fault] and err.retryable
    assert "after 3 attempts" in err.message and err.message.startswith("openai:echo-model: ")
    assert err.attempts == 3
    assert err.hint


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("400", "backend_bad_request"),
        ("401", "backend_auth"),
        ("bad_shape", "backend_bad_reply"),
        ("context", "backend_context"),  # an HTTP 500 that another attempt cannot mend
    ],
)
async def test_permanent_fault_fails_at_once(fault: str, code: str) -> None:
    with LoopbackServer(faults=FaultPlan(schedule=(fault,))) as server:  # type: ignore[arg-type]
        b = backend(server)
        with pytest.raises(BackendError) as info:
            await b.complete(ASK, GenerateConfig())
        await b.aclose()
        assert server.request_count == 1
    assert info.value.code == code and not info.value.retryable
    assert "after 1 attempt)" in info.value.message and info.value.attempts == 1


@pytest.mark.parametrize(
    ("provider", "key"), [("openai", "MASORCH_OPENAI_API_KEY"), ("vllm", "MASORCH_VLLM_API_KEY")]
)
async def test_a_refused_key_names_the_variable_its_provider_reads(provider: str, key: str) -> None:
    with LoopbackServer(faults=FaultPlan(schedule=("401",))) as server:  # type: ignore[arg-type]
        b = backend(server, provider=provider)
        with pytest.raises(BackendError) as info:
            await b.complete(ASK, GenerateConfig())
        await b.aclose()
    assert key in (info.value.hint or "")


async def test_a_reply_no_token_cap_could_give_is_refused() -> None:
    # A server that ignores max_tokens: 5 MB in one reply would be a run-log line too long to resume.
    with LoopbackServer(lambda messages: "x" * 5_000_000) as server:
        b = backend(server)
        with pytest.raises(BackendError, match="holds 5,000,000 characters") as info:
            await b.complete(ASK, GenerateConfig())
        await b.aclose()
    assert info.value.code == "backend_bad_reply" and not info.value.retryable


@pytest.mark.timeout(120)
async def test_many_concurrent_calls_with_random_faults_all_end_and_attempts_add_up() -> None:
    plan = FaultPlan(rate=0.3, seed=7)
    with LoopbackServer(faults=plan, latency_ms=5, slow_s=60) as server:
        # The server counts a request once it has read it. With 80 calls in flight on a loaded
        # machine a short timeout passes before that (0.5 s: one attempt more on the client than the
        # server saw; 2 s: 45 more with two busy cores beside); 8 s still times out every slow fault
        # (60 s) and leaves the count exact.
        b = backend(
            server, timeout_s=8.0, retry=RetryPolicy(max_attempts=4, base_delay_s=0.001, max_delay_s=0.01)
        )
        results = await asyncio.gather(
            *[b.complete([Message("user", f"q{i}")], GenerateConfig()) for i in range(80)],
            return_exceptions=True,
        )
        await b.aclose()
        count = server.request_count
        faults = sum(server.fault_counts.values())
    answered = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(r, BackendError) and r.retryable for r in failed)
    assert sorted(r.text for r in answered) == sorted(
        f"echo: q{i}" for i, r in enumerate(results) if r in answered
    )
    assert sum(r.attempts for r in answered) + sum(e.attempts for e in failed) == count
    assert all(e.attempts == 4 for e in failed)
    assert faults == count - len(answered) > 0


async def test_missing_usage_is_estimated_and_flagged() -> None:
    with LoopbackServer(omit_usage=True) as server:
        b = backend(server)
        c = await b.complete(ASK, GenerateConfig())
        await b.aclose()
    assert c.usage.estimated and c.usage.prompt_tokens > 0 and c.usage.completion_tokens > 0


async def test_pricing_fills_cost() -> None:
    with LoopbackServer() as server:
        b = backend(server, pricing=Pricing(prompt_per_m=1_000_000.0, completion_per_m=2_000_000.0))
        c = await b.complete(ASK, GenerateConfig())
        await b.aclose()
    assert c.usage.cost == pytest.approx(7 * 1.0 + 6 * 2.0)


async def test_request_carries_sampling_schema_tools_and_distinct_sample_seeds() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    tool = ToolSpec("add", "add two numbers", {"type": "object", "properties": {"a": {"type": "number"}}})
    with LoopbackServer() as server:
        b = backend(server)
        for i in range(2):
            config = GenerateConfig(
                temperature=0.7,
                max_tokens=50,
                stop=("END",),
                seed=10,
                sample_index=i,
                json_schema=schema,
                tools=(tool,),
            )
            await b.complete(ASK, config)
        await b.aclose()
    first, second = server.bodies
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": schema},
    }
    assert first["tools"][0]["function"]["name"] == "add"
    assert (first["temperature"], first["max_tokens"], first["stop"]) == (0.7, 50, ["END"])
    assert (first["seed"], second["seed"]) == (10, 11)


async def test_schema_as_json_object_for_llama_cpp_python_servers() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
    with LoopbackServer() as server:
        b = backend(server, schema_format="json_object")
        await b.complete(ASK, GenerateConfig(json_schema=schema))
        await b.aclose()
    assert server.bodies[0]["response_format"] == {"type": "json_object", "schema": schema}
    with pytest.raises(UsageError):
        OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", schema_format="yaml")  # type: ignore[arg-type]


async def test_tool_calls_are_returned() -> None:
    def call_tool(messages: list[dict[str, object]]) -> dict[str, object]:
        args = {"a": 2, "b": 2}
        return {
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": args}}]
        }

    with LoopbackServer(call_tool) as server:
        b = backend(server)
        c = await b.complete(ASK, GenerateConfig())
        await b.aclose()
    assert c.finish == "tool_calls" and c.text == ""
    assert c.tool_calls[0].name == "add" and c.tool_calls[0].id == "c1"
    assert json.loads(c.tool_calls[0].arguments) == {"a": 2, "b": 2}


async def test_tool_calls_and_tool_results_are_sent_in_the_openai_format() -> None:
    call = ToolCall("add", '{"a": 2, "b": 2}', id="c1")
    history = [*ASK, Message("assistant", "", tool_calls=(call,)), Message("tool", "4", tool_call_id="c1")]
    with LoopbackServer() as server:
        b = backend(server)
        await b.complete(history, GenerateConfig())
        await b.aclose()
    sent = server.bodies[0]["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": call.arguments}}
        ],
    }
    assert sent[3] == {"role": "tool", "content": "4", "tool_call_id": "c1"}
    assert sent[0] == {"role": "system", "content": "be brief"}


async def test_length_finish() -> None:
    with LoopbackServer(lambda m: "one two three four five") as server:
        b = backend(server)
        c = await b.complete(ASK, GenerateConfig(max_tokens=2))
        await b.aclose()
    assert (c.text, c.finish) == ("one two", "length")


async def test_dead_endpoint_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    b = OpenAIBackend("m", base_url=f"http://127.0.0.1:{port}/v1", retry=FAST_RETRY, timeout_s=1)
    with pytest.raises(BackendError) as info:
        await b.complete(ASK, GenerateConfig())
    await b.aclose()
    assert info.value.code == "backend_connection" and "after 3 attempts" in info.value.message


async def test_the_key_never_shows(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://user:{KEY}@127.0.0.1:1/v1?api_key={KEY}"
    assert KEY not in redact_url(url)
    seen: list[str] = []
    for fault in FAULT_KINDS:
        with LoopbackServer(faults=FaultPlan(schedule=(fault,) * 3), slow_s=10) as server:
            b = backend(server, timeout_s=0.3)
            seen += [b.model_id, repr(b)]
            with pytest.raises(BackendError) as info:
                await b.complete(ASK, GenerateConfig())
            await b.aclose()
            seen += [str(info.value), json.dumps(info.value.to_dict())]
            assert info.value.__context__ is None and info.value.__cause__ is None  # no chained client error
    assert any("Incorrect API key provided: ***" in s for s in seen)
    assert all(KEY not in s for s in seen)
    assert KEY not in caplog.text


def test_key_and_url_come_from_env_and_a_missing_key_is_a_usage_error() -> None:
    env = {"MASORCH_OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": KEY}
    b = OpenAIBackend("m", env=env)
    assert b.base_url == "http://127.0.0.1:9/v1" and KEY not in repr(b)
    assert OpenAIBackend("m", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}).base_url is not None
    with pytest.raises(UsageError, match="no API key"):
        OpenAIBackend("m", env={})


def test_one_backend_serves_successive_event_loops() -> None:
    with LoopbackServer() as server:
        b = backend(server)
        for _ in range(2):
            assert asyncio.run(b.complete(ASK, GenerateConfig())).attempts == 1
        asyncio.run(b.aclose())
        assert server.request_count == 2


def test_retry_delay_grows_and_honours_retry_after() -> None:
    import random

    policy = RetryPolicy(max_attempts=5, base_delay_s=1.0, max_delay_s=8.0)
    rng = random.Random(0)
    delays = [policy.delay(a, rng) for a in (1, 2, 3, 4, 5)]
    assert 0.5 <= delays[0] <= 1.0 and 4.0 <= delays[3] <= 8.0 and delays[4] <= 8.0
    assert policy.delay(1, rng, retry_after_s=5.0) == 5.0
    with pytest.raises(UsageError):
        RetryPolicy(max_attempts=0)


class _FixedReply:
    """A server answering every POST with one fixed body (a JSON content type) on a free port."""

    def __init__(self, body: bytes, content_type: str | None = "application/json") -> None:
        import http.server
        import threading

        payload = body

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                if content_type is not None:
                    self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # nested past the recursion limit
        b'{"choices": [{"message": {"content": "\xff\xfe"}}]}',  # not UTF-8
        b'{"id": ' + b"7" * 5000 + b"}",  # an integer past Python's digit limit
    ],
    ids=["deep", "not-utf8", "huge-int"],
)
async def test_a_reply_python_cannot_decode_is_a_backend_error_not_a_crash(body: bytes) -> None:
    server = _FixedReply(body)
    try:
        b = OpenAIBackend("m", base_url=server.base_url, retry=FAST_RETRY, timeout_s=5)
        with pytest.raises(BackendError) as info:
            await b.complete(ASK, GenerateConfig())
        await b.aclose()
    finally:
        server.close()
    assert info.value.code == "backend_malformed_reply" and "cannot be decoded" in info.value.message


@pytest.mark.parametrize("env_name", ["OPENAI_API_KEY", "MASORCH_VLLM_API_KEY"])
async def test_a_key_with_a_line_end_is_stripped_and_a_bad_character_refused_unshown(env_name: str) -> None:
    from masorch.backends.registry import make_backend

    with LoopbackServer() as server:
        spec = "openai:echo-model" if env_name == "OPENAI_API_KEY" else f"vllm:{server.base_url}#echo-model"
        env = {"OPENAI_BASE_URL": server.base_url, env_name: KEY + "\r\n"}
        b = make_backend(spec, env=env)
        assert (await b.complete(ASK, GenerateConfig())).text.startswith("echo:")
        await b.aclose()
        for bad in (KEY[:8] + "é" + KEY[8:], KEY[:8] + "\n" + KEY[8:], KEY[:8] + " " + KEY[8:]):
            with pytest.raises(UsageError, match="a character an HTTP header cannot carry") as info:
                make_backend(spec, env={**env, env_name: bad})
            assert KEY[8:] not in str(info.value) and env_name in (info.value.hint or "")


@pytest.mark.parametrize(
    "url",
    [
        "127.0.0.1:8000/v1",
        " http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8o00/v1",
        "http://127.0.0.1:99999/v1",
    ],
)
def test_a_bad_server_url_is_refused_when_the_backend_is_built(url: str) -> None:
    from masorch.backends.registry import make_backend

    with pytest.raises(UsageError, match="the server URL"):
        OpenAIBackend("m", env={"OPENAI_BASE_URL": url})
    with pytest.raises(UsageError, match="the server URL"):
        make_backend(f"vllm:{url}#m", env={})


async def test_usage_counts_that_are_not_counts_are_estimated_not_taken() -> None:
    reply = {
        "choices": [{"message": {"role": "assistant", "content": "four"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": -50,
            "completion_tokens": True,
            "prompt_tokens_details": {"cached_tokens": -3},
        },
    }
    server = _FixedReply(json.dumps(reply).encode())
    try:
        b = OpenAIBackend("m", base_url=server.base_url, retry=FAST_RETRY, pricing=Pricing(1000.0, 1000.0))
        c = await b.complete(ASK, GenerateConfig())
        await b.aclose()
    finally:
        server.close()
    assert c.text == "four" and c.usage.estimated
    assert c.usage.prompt_tokens > 0 and c.usage.completion_tokens > 0 and c.usage.cached_prompt_tokens == 0
    assert c.usage.cost > 0  # a negative count no longer lowers what a cost budget has counted


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    import email.utils
    import time

    from masorch.backends.openai_compat import retry_after_seconds

    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after_seconds(soon) or 0) <= 31
    assert retry_after_seconds(email.utils.formatdate(time.time() - 30, usegmt=True)) == 0.0
    assert retry_after_seconds("2.5") == 2.5
    assert retry_after_seconds("inf") is None and retry_after_seconds("-1") == 0.0
    assert retry_after_seconds("tomorrow") is None


@pytest.mark.parametrize("content_type", ["text/plain", None, "text/html"])
async def test_json_sent_as_text_is_read_and_text_that_is_not_json_is_quoted(
    content_type: str | None,
) -> None:
    reply = {"choices": [{"message": {"role": "assistant", "content": "four"}, "finish_reason": "stop"}]}
    for body, expected in ((json.dumps(reply).encode(), "four"), (b"<html>Bad gateway</html>", None)):
        server = _FixedReply(body, content_type)
        try:
            b = OpenAIBackend("m", base_url=server.base_url, retry=FAST_RETRY)
            if expected is not None:
                assert (await b.complete(ASK, GenerateConfig())).text == expected
            else:
                with pytest.raises(BackendError, match="not JSON: '<html>Bad gateway</html>'") as info:
                    await b.complete(ASK, GenerateConfig())
                assert info.value.code == "backend_bad_reply"
            await b.aclose()
        finally:
            server.close()
