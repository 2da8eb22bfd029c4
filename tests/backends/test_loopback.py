"""The loopback server itself: binds 127.0.0.1 only, counts requests, schedules faults, stops cleanly."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from masorch.backends.loopback import FaultPlan, LoopbackServer
from masorch.errors import UsageError

pytestmark = pytest.mark.timeout(30)


def post(server: LoopbackServer, body: object) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_serves_chat_on_loopback_and_counts() -> None:
    with LoopbackServer(lambda messages: messages[-1]["content"].upper(), latency_ms=20) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        start = time.perf_counter()
        status, body = post(server, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert time.perf_counter() - start >= 0.02
        reply = json.loads(body)
        assert status == 200 and reply["choices"][0]["message"]["content"] == "HI"
        assert reply["usage"]["prompt_tokens"] == 1
        assert server.request_count == 1


def test_schedule_then_seeded_rate() -> None:
    plan = FaultPlan(schedule=("500", None, "429"), rate=0.5, kinds=("500",), seed=3)
    statuses: list[list[int]] = []
    for _ in range(2):
        with LoopbackServer(faults=plan) as server:
            statuses.append([post(server, {"messages": []})[0] for _ in range(20)])
    assert statuses[0][:3] == [500, 200, 429]
    assert statuses[0] == statuses[1]  # seeded: the same faults each run
    assert 0 < statuses[0][3:].count(500) < 17


def test_fault_plan_rejects_nonsense() -> None:
    with pytest.raises(UsageError):
        FaultPlan(schedule=("teapot",))  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        FaultPlan(rate=1.5)


def test_stop_does_not_wait_for_slow_replies() -> None:
    server = LoopbackServer(faults=FaultPlan(schedule=("slow",)), slow_s=60).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=0.2)
    conn.request("POST", "/v1/chat/completions", "{}", {"content-type": "application/json"})
    with pytest.raises(TimeoutError):
        conn.getresponse()
    conn.close()
    start = time.perf_counter()
    server.stop()
    assert time.perf_counter() - start < 5
    with pytest.raises(UsageError):
        _ = server.port


def test_garbled_requests_get_400() -> None:
    import socket

    with LoopbackServer() as server, socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: many\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")


def test_unknown_route_is_404() -> None:
    with LoopbackServer() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("GET", "/nope")
        assert conn.getresponse().status == 404
        conn.close()
        assert server.request_count == 0
