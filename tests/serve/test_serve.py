"""masorch serve: systems as models, through the official openai client and raw HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")

import openai  # noqa: E402
from eval_helpers import SumBackendFactory  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from gate import GatedBackend  # noqa: E402
from masorch.cli.main import build_app, main  # noqa: E402
from masorch.errors import UsageError  # noqa: E402
from masorch.eval.systems import parse_systems  # noqa: E402
from masorch.run import Environment, EnvSpec  # noqa: E402
from masorch.serve.app import ServeOptions, make_app  # noqa: E402
from masorch.serve.http import uvicorn_config  # noqa: E402

pytestmark = pytest.mark.timeout(60)
QUESTION = "Item 1. What is 2 plus 3?"


def _app(
    token: str | None = None,
    hosts: tuple[str, ...] | None = None,
    limits: dict[str, Any] | None = None,
    factory: Any = None,
    **model: object,
):
    systems = parse_systems("sas:cot,mas:high", model="scripted:m")
    env = Environment(EnvSpec(backend_factory=factory or SumBackendFactory(**model)))
    options = ServeOptions(token=token, hosts=hosts, **({"concurrency": 4, "timeout_s": 30} | (limits or {})))
    return make_app(systems, env, options)


@contextlib.contextmanager
def _served(app: Any, options: ServeOptions) -> Iterator[int]:
    """``app`` on a free loopback port under the CLI's uvicorn config, in a thread; yields the port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port, options, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(10)


@pytest.fixture()
def server() -> Iterator[str]:
    """The app on a free loopback port, in a thread; yields its base URL."""
    with _served(_app(token="t0k"), ServeOptions(token="t0k")) as port:
        yield f"http://127.0.0.1:{port}/v1"


def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Whether the server closes ``sock`` within ``seconds`` while the client sends ``trickle`` a
    byte every 0.1 s (each byte would restart uvicorn's keep-alive timer)."""
    sock.settimeout(0.1)
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() <= end:
        try:
            if sock.recv(1024) == b"":
                return True
        except TimeoutError:
            pass
        except ConnectionError:
            return True
        if sent < len(trickle):
            try:
                sock.sendall(trickle[sent : sent + 1])
            except ConnectionError:
                return True
            sent += 1
    return False


def test_a_client_that_trickles_or_withholds_its_request_is_cut_off_at_the_read_deadline() -> None:
    options = ServeOptions(read_timeout_s=0.5)
    with _served(_app(), options) as port:
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 200
        with socket.create_connection(("127.0.0.1", port)) as slow:
            assert _closed_within(slow, 5.0, trickle=head), "a trickled head must not hold the connection"
        with socket.create_connection(("127.0.0.1", port)) as silent:
            assert _closed_within(silent, 5.0), "a connection that sends nothing must be closed"


def test_the_read_deadline_never_cuts_a_run_longer_than_it_and_rearms_on_keep_alive() -> None:
    options = ServeOptions(read_timeout_s=0.4)
    body = b'{"model": "sas:cot", "messages": [{"role": "user", "content": "Item 1. What is 2 plus 3?"}]}'
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    with _served(_app(delay_s=1.0), options) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)  # the run takes 1 s, past the 0.4 s deadline to send the request
        sock.settimeout(10)
        reply = b""
        while b'"content":"5"' not in reply.replace(b" ", b""):
            chunk = sock.recv(65536)
            assert chunk, f"closed before the answer: {reply!r}"
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 200")
        assert _closed_within(sock, 2.0), "an idle kept-alive connection gets the deadline again (not 5 s)"


def test_the_openai_client_lists_systems_and_gets_answers_with_summed_usage(server: str) -> None:
    client = openai.OpenAI(base_url=server, api_key="t0k")
    assert [m.id for m in client.models.list()] == ["sas:cot", "mas:high"]
    reply = client.chat.completions.create(model="mas:high", messages=[{"role": "user", "content": QUESTION}])
    assert reply.choices[0].message.content == "5"
    assert reply.usage is not None and reply.usage.total_tokens > 0
    extra = reply.model_extra["masorch"]  # type: ignore[index]
    assert extra["status"] == "ok" and extra["calls"] == 2 and extra["plan"]["agents"][0]["id"] == "solver"
    assert extra["trace_id"]


def test_streaming_sends_progress_then_the_answer(server: str) -> None:
    client = openai.OpenAI(base_url=server, api_key="t0k")
    chunks = list(
        client.chat.completions.create(
            model="sas:cot", messages=[{"role": "user", "content": QUESTION}], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    events = [
        c.model_extra["masorch"]["event"]["type"]
        for c in chunks
        if "event" in (c.model_extra or {}).get("masorch", {})
    ]  # type: ignore[union-attr]
    assert text == "5"
    assert events[0] == "run_started" and "llm_call" in events and events[-1] == "run_finished"
    assert chunks[-1].choices[0].finish_reason == "stop" and chunks[-1].usage.total_tokens > 0  # type: ignore[index]


def test_wrong_token_unknown_system_and_bad_bodies_are_clear_4xx() -> None:
    client = TestClient(_app(token="t0k"))
    auth = {"Authorization": "Bearer t0k"}
    assert client.get("/v1/models").status_code == 401
    assert client.get("/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401
    cases = [
        (b"{not json", 400, "not JSON"),
        (b"[1]", 400, "not a JSON object"),
        (b'{"messages": [{"role": "user", "content": "q"}]}', 400, "`model` is missing"),
        (b'{"model": "mas:mid", "messages": [{"role": "user", "content": "q"}]}', 404, "no system 'mas:mid'"),
        (b'{"model": "sas:cot", "messages": []}', 400, "`messages`"),
        (b'{"model": "sas:cot", "messages": [{"role": "system", "content": "hi"}]}', 400, "user message"),
        (b"x" * (2 << 20), 413, "request body over"),
        (b"[" * 20000 + b"]" * 20000, 400, "nested too deeply"),
        (
            b'{"model": "sas:cot", "messages": [{"role": "user", "content": [{"text": 5}]}]}',
            400,
            "user message",
        ),
        (
            b'{"model": "sas:cot", "messages": [{"role": "user", "content": "q"}], "stream": "no"}',
            400,
            "`stream`",
        ),
        (
            b'{"model": "sas:cot", "messages": [{"role": "user", "content": "q"}], "n": 3}',
            400,
            "`n` must be 1",
        ),
        (
            b'{"model": "sas:cot", "messages": [{"role": "user", "content": "q"}], "max_tokens": "9"}',
            400,
            "max_tokens",
        ),
    ]
    json_type = {**auth, "Content-Type": "application/json; charset=utf-8"}
    for body, status, message in cases:
        reply = client.post("/v1/chat/completions", content=body, headers=json_type)
        assert reply.status_code == status, (body[:40], reply.text)
        assert message in reply.json()["error"]["message"]
    # A form or text/plain POST (what a web page may send without asking first) starts nothing.
    ok_body = b'{"model": "sas:cot", "messages": [{"role": "user", "content": "q"}]}'
    for kind in (None, "text/plain;charset=UTF-8", "application/x-www-form-urlencoded"):
        reply = client.post(
            "/v1/chat/completions", content=ok_body, headers=auth | ({"Content-Type": kind} if kind else {})
        )
        assert reply.status_code == 415 and "application/json" in reply.json()["error"]["message"]


def test_a_loopback_server_answers_only_for_loopback_host_names() -> None:
    from masorch.listen import LOOPBACK_HOSTS

    client = TestClient(_app(hosts=LOOPBACK_HOSTS), base_url="http://127.0.0.1:8000")
    assert client.get("/v1/models").status_code == 200
    for host in ("localhost:8000", "[::1]:8000", "LOCALHOST"):
        assert client.get("/v1/models", headers={"Host": host}).status_code == 200, host
    reply = client.get("/v1/models", headers={"Host": "attacker.example:8000"})  # a DNS-rebinding page
    assert reply.status_code == 421 and "Host" in reply.json()["error"]["message"]


def test_a_run_without_an_answer_is_a_502_naming_its_status() -> None:
    client = TestClient(_app(fail_items=(1,)))
    reply = client.post(
        "/v1/chat/completions", json={"model": "sas:cot", "messages": [{"role": "user", "content": QUESTION}]}
    )
    assert reply.status_code == 502
    body = reply.json()
    assert body["error"]["code"] == "error" and "scripted failure" in body["error"]["message"]
    assert body["masorch"]["status"] == "error"


def test_a_streamed_run_without_an_answer_ends_in_an_error_event() -> None:
    # It ended as an empty answer with finish_reason "stop": OpenAI clients took the failure for "".
    client = TestClient(_app(fail_items=(1,)))
    body = {"model": "sas:cot", "messages": [{"role": "user", "content": QUESTION}], "stream": True}
    reply = client.post("/v1/chat/completions", json=body)
    events = [json.loads(line[6:]) for line in reply.text.splitlines() if line.startswith("data: {")]
    assert reply.text.rstrip().endswith("data: [DONE]")
    error = events[-1]["error"]
    assert error["code"] == "error" and "scripted failure" in error["message"]
    last = events[-2]
    assert last["choices"][0]["finish_reason"] is None and last["masorch"]["status"] == "error"
    assert all(not e.get("choices") or not e["choices"][0]["delta"].get("content") for e in events)


def test_concurrent_requests_run_at_once() -> None:
    # Each model call waits until four are in flight: requests served one at a time would time out.
    app = _app(factory=lambda spec: GatedBackend(SumBackendFactory()(spec), 4))

    async def go() -> None:
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as client:
            body = {"model": "sas:cot", "messages": [{"role": "user", "content": QUESTION}]}
            replies = await asyncio.gather(
                *(client.post("/v1/chat/completions", json=body) for _ in range(4))
            )
            assert [r.status_code for r in replies] == [200] * 4, [r.text for r in replies]

    asyncio.run(go())


def test_the_cli_refuses_to_serve_beyond_loopback_without_a_token() -> None:
    result = CliRunner().invoke(
        build_app(),
        ["serve", "--systems", "sas:cot", "--model", "scripted:m", "--host", "0.0.0.0"],
        env={"MASORCH_SERVE_TOKEN": ""},
    )
    assert isinstance(result.exception, UsageError) and "without a token" in str(result.exception)


@pytest.fixture()
def busy_port() -> Iterator[int]:
    """A loopback port another socket listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_the_cli_checks_every_model_string_before_it_serves(busy_port: int, capsys) -> None:
    # On a busy port: a server started past an unchecked model string would fail there instead.
    argv = ["serve", "--systems", "sas:cot,mas:low", "--model", "foo", "--port", str(busy_port)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "error: system 'sas:cot' model: a model string is not provider:model" in err
        and "hint: providers:" in err
    )
    assert "masorch serve:" not in err


def test_a_busy_port_is_a_usage_error_before_the_serving_line(busy_port: int, capsys) -> None:
    assert main(["serve", "--systems", "sas:cot", "--model", "openai:m", "--port", str(busy_port)]) == 2
    err = capsys.readouterr().err
    assert f"error: cannot listen on 127.0.0.1:{busy_port}: the port is in use" in err
    assert "hint: pass another --port" in err and "masorch serve:" not in err


def test_a_host_not_of_this_machine_is_a_usage_error_naming_host(capsys, monkeypatch) -> None:
    # 192.0.2.1 is a documentation address (RFC 5737): no machine has it.
    argv = ["serve", "--systems", "sas:cot", "--model", "openai:m"]
    assert main([*argv, "--host", "192.0.2.1", "--token", "x"]) == 2
    err = capsys.readouterr().err
    assert "error: cannot listen on 192.0.2.1:8000: 192.0.2.1 is not an address of this machine" in err
    assert "hint: pass an address of this machine as --host" in err and "--port" not in err

    def unresolved(host, *args, **kwargs):  # no DNS lookup in a test
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unresolved)
    assert main([*argv, "--host", "999.1.1.1"]) == 2  # not "beyond this machine without a token"
    err = capsys.readouterr().err
    assert "error: cannot listen on 999.1.1.1: not an IP address or a host name" in err
    assert "token" not in err
    monkeypatch.undo()
    assert main([*argv, "--host", "a..b"]) == 2  # a name IDNA cannot encode: no traceback
    assert "error: cannot listen on a..b: not an IP address or a host name" in capsys.readouterr().err


def test_a_port_bound_by_a_server_not_yet_serving_is_busy_too(capsys) -> None:
    from masorch.listen import bind_sockets

    first = bind_sockets("127.0.0.1", 0)  # a masorch server between its check and its start
    try:
        port = first[0].getsockname()[1]
        assert main(["serve", "--systems", "sas:cot", "--model", "openai:m", "--port", str(port)]) == 2
        assert "the port is in use" in capsys.readouterr().err
    finally:
        for sock in first:
            sock.close()


def test_a_lone_surrogate_in_a_reply_or_a_request_is_sent_as_its_json_escape() -> None:
    from masorch.backends.scripted import ScriptedBackend

    # The model's plan answers with a "\ud800" escape: the plan holds a lone surrogate (and at DoM
    # high, answering directly is refused: a 502 whose masorch field shows the plan).
    plan = ScriptedBackend(lambda m, c: 'final_answer("2\\ud800")', name="m")
    client = TestClient(_app(factory=lambda spec: plan), raise_server_exceptions=False)
    body = {"model": "mas:high", "messages": [{"role": "user", "content": "q"}]}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 502 and b'"final_answer":"2\\ud800"' in reply.content
    assert reply.json()["masorch"]["plan"]["final_answer"] == "2" + chr(0xD800)
    raw = b'{"model": "\\ud800", "messages": [{"role": "user", "content": "q"}]}'
    unknown = client.post("/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"})
    assert unknown.status_code == 404 and "no system" in unknown.json()["error"]["message"]


def test_a_stream_survives_a_url_with_a_query(server: str) -> None:
    # (a lone surrogate, which no OpenAI client sends, is _clean's doctest)
    client = openai.OpenAI(base_url=server, api_key="t0k")
    for question in (QUESTION + " (see https://example.com/page?id=3&key=abc)",):
        chunks = list(
            client.chat.completions.create(
                model="sas:cot", messages=[{"role": "user", "content": question}], stream=True
            )
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "5"
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert "key=abc" not in str([c.model_extra for c in chunks])  # query values are masked


def test_routing_errors_are_openai_shaped_and_the_bearer_scheme_is_case_insensitive() -> None:
    client = TestClient(_app(token="t0k"))
    for method, path, status in (("GET", "/v1/nothing", 404), ("GET", "/v1/chat/completions", 405)):
        reply = client.request(method, path)
        assert reply.status_code == status and path in reply.json()["error"]["message"]
    reply = client.get("/v1/models/", headers={"Host": "attacker.example"}, follow_redirects=False)
    assert reply.status_code == 404  # no redirect to the Host the request named
    assert client.get("/v1/models", headers={"Authorization": "bearer t0k"}).status_code == 200


def _post_all(app: Any, count: int) -> list[Any]:
    """``count`` chat requests at once through the ASGI app; their replies."""
    import httpx

    async def go() -> list[Any]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            body = {"model": "sas:cot", "messages": [{"role": "user", "content": QUESTION}]}
            return list(
                await asyncio.gather(*(client.post("/v1/chat/completions", json=body) for _ in range(count)))
            )

    return asyncio.run(go())


def test_a_full_server_says_busy_and_a_deadline_counts_the_wait_for_a_slot() -> None:
    # One run at a time and one waiting: the third request is refused at once, not queued.
    replies = _post_all(_app(limits={"concurrency": 1, "max_waiting": 1}, delay_s=0.3), 3)
    assert sorted(r.status_code for r in replies) == [200, 200, 503]
    busy = next(r for r in replies if r.status_code == 503)
    assert busy.headers["retry-after"] and busy.json()["error"]["type"] == "server_busy"
    # Two runs of 0.6 s through one slot under a 1 s deadline: the second spends 0.6 s waiting, so
    # its deadline passes during its run, and the error says how much of it was the wait.
    replies = _post_all(_app(limits={"concurrency": 1, "timeout_s": 1.0}, delay_s=0.6), 2)
    assert sorted(r.status_code for r in replies) == [200, 502]
    late = next(r for r in replies if r.status_code == 502).json()
    assert (
        late["masorch"]["status"] == "timeout" and "waiting for a free run slot" in late["error"]["message"]
    )


class _Watched:
    """A backend factory whose calls say when they start and when they are cancelled."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()

    def __call__(self, spec: str) -> Any:
        inner = SumBackendFactory(delay_s=30)(spec)
        watch = self

        class Backend:
            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

            async def complete(self, messages: Any, config: Any) -> Any:
                watch.started.set()
                try:
                    return await inner.complete(messages, config)
                except asyncio.CancelledError:
                    watch.cancelled.set()
                    raise

        return Backend()


def test_a_client_that_hangs_up_on_a_plain_request_cancels_its_run() -> None:
    watched = _Watched()
    app = _app(factory=watched)
    body = b'{"model": "sas:cot", "messages": [{"role": "user", "content": "Item 1. What is 2 plus 3?"}]}'
    sent: list[dict[str, Any]] = []

    async def go() -> None:
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            while not watched.started.is_set():  # the client hangs up once the run is under way
                await asyncio.sleep(0.01)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/chat/completions",
            "raw_path": b"/v1/chat/completions",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"t"), (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 1),
            "server": ("t", 80),
        }
        await asyncio.wait_for(app(scope, receive, send), 10)  # not the backend's 30 s

    asyncio.run(go())
    assert watched.cancelled.is_set(), "the run's call must be cancelled when its client hangs up"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_model_that_cannot_be_built_is_a_usage_error_before_the_serving_line(capsys, monkeypatch) -> None:
    # A free port: before the check, the server started here and answered every request with a 502.
    for name in ("OPENAI_API_KEY", "MASORCH_OPENAI_API_KEY", "OPENAI_BASE_URL", "MASORCH_OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    argv = ["serve", "--systems", "sas:cot", "--model", "openai:m", "--port", str(_free_port())]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error: no API key for openai:m" in err and "masorch serve:" not in err


def test_served_calls_are_priced_by_the_price_flags(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from masorch.backends.loopback import LoopbackServer

    port = _free_port()
    root = Path(__file__).parents[2]
    with LoopbackServer() as upstream:
        env = {"PYTHONPATH": str(root / "src"), "HOME": str(tmp_path)}
        env |= {"MASORCH_OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "k"}
        # $1 per input token, $2 per output token: the cost is the tokens the run reports.
        cmd = [sys.executable, "-m", "masorch", "serve", "--systems", "sas:cot", "--model", "openai:e"]
        cmd += ["--port", str(port), "--price", "openai:e=1000000,2000000"]
        proc = subprocess.Popen(cmd, env=env, cwd=root, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            # Warnings may come first (a host without every sandbox layer says so): read to the line.
            seen = [proc.stderr.readline()]
            while "masorch serve: sas:cot" not in seen[-1] and seen[-1] and len(seen) < 50:
                seen.append(proc.stderr.readline())
            assert "masorch serve: sas:cot" in seen[-1], seen
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
            try:
                reply = client.chat.completions.create(
                    model="sas:cot", messages=[{"role": "user", "content": QUESTION}]
                )
                usage, run = reply.usage, reply.model_extra["masorch"]  # type: ignore[index]
            except openai.APIStatusError as exc:  # a run without an answer still reports its usage
                body = exc.response.json()
                usage, run = None, body["masorch"]
            assert run["calls"] == 1
            if usage is not None:
                expected = usage.prompt_tokens + 2 * usage.completion_tokens
                assert run["cost"] == pytest.approx(expected)
            assert run["cost"] > 0
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def test_a_single_agent_the_server_cannot_offer_is_a_usage_error_before_the_serving_line(capsys) -> None:
    # sas:search needs a corpus, which serve has not: the server started and answered every request 502.
    argv = ["serve", "--systems", "sas:search", "--model", "vllm:http://127.0.0.1:9/v1#m"]
    assert main([*argv, "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err
    assert "sas:search" in err and "corpus" in err and "masorch serve:" not in err


def test_the_agents_profile_is_checked_as_eval_checks_it(capsys) -> None:
    argv = ["serve", "--systems", "sas:cot", "--model", "openai:m", "--agents", "nope"]
    assert main([*argv, "--port", str(_free_port())]) == 2
    assert "nope" in capsys.readouterr().err
