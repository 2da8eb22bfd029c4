"""A loopback OpenAI-compatible HTTP server for tests and benchmarks (stdlib only, 127.0.0.1 only).

It serves ``POST /v1/chat/completions`` (non-streaming) from its own event loop in a background
thread, so sync and async callers alike can use it as a context manager::

    with LoopbackServer(latency_ms=5, faults=FaultPlan(schedule=("429", None))) as server:
        backend = OpenAIBackend("echo", base_url=server.base_url, api_key="test")
        ...
        assert server.request_count == 2

Replies come from a responder (messages -> text, or -> an assistant message mapping with
``tool_calls``); faults are injected by a :class:`FaultPlan`: a fixed schedule for the first requests
and/or a seeded probability. Every request is counted, so tests can check a client's attempts.

Like llama.cpp's server it also renders a chat (``POST /apply-template``: each message on its own
lines, and with tools the Hermes ``<tool_call>`` instructions unless ``hermes_template`` is off)
and completes a prompt (``POST /v1/completions``: the responder sees the prompt as one user
message and answers text), so the template-and-grammar way of a rounds turn can be tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from masorch.errors import UsageError

log = logging.getLogger(__name__)

HOST = "127.0.0.1"  # never anything else: the server is for this machine's tests only
FaultKind = Literal["429", "500", "slow", "drop", "malformed", "bad_shape", "400", "401", "context"]
#: Transient faults a client should retry: the default kinds of a random fault plan.
TRANSIENT_FAULTS: tuple[FaultKind, ...] = ("429", "500", "slow", "drop", "malformed")
#: Every fault: the transient ones, a JSON reply that is not a completion, a rejected request, a bad key,
#: a request past the model's context (llama.cpp's HTTP 500).
FAULT_KINDS: tuple[FaultKind, ...] = (*TRANSIENT_FAULTS, "bad_shape", "400", "401", "context")
Responder = Callable[[list[dict[str, Any]]], "str | Mapping[str, Any]"]

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 411: "Length Required"}
_REASONS.update({429: "Too Many Requests", 500: "Internal Server Error"})


def echo_responder(messages: list[dict[str, Any]]) -> str:
    """The default responder: the content of the last message, prefixed with ``echo:``."""
    last = messages[-1].get("content", "") if messages else ""
    return f"echo: {last}"


def _words(text: object) -> int:
    return len(str(text or "").split())


@dataclass(frozen=True)
class FaultPlan:
    """Which requests fail, and how.

    Request ``i`` (0-based, in arrival order) gets ``schedule[i]`` while the schedule lasts (``None``
    means a normal reply); after it, each request fails with probability ``rate``, the kind drawn
    uniformly from ``kinds`` by an RNG seeded with ``seed``.
    """

    schedule: tuple[FaultKind | None, ...] = ()
    rate: float = 0.0
    kinds: tuple[FaultKind, ...] = TRANSIENT_FAULTS
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [k for k in (*self.schedule, *self.kinds) if k is not None and k not in FAULT_KINDS]
        if bad:
            raise UsageError(f"unknown fault kind(s) {bad}", hint=f"use one of {list(FAULT_KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise UsageError(f"fault rate {self.rate} is not a probability", hint="use 0.0 <= rate <= 1.0")
        if self.rate > 0 and not self.kinds:
            raise UsageError("fault rate > 0 but no fault kinds", hint="give kinds=(...) or rate=0")


class LoopbackServer:
    """An OpenAI-compatible chat server on 127.0.0.1 with latency and fault injection.

    ``latency_ms`` delays every reply; ``slow_s`` is how long a ``slow`` fault stalls (it should exceed
    the client's timeout); ``omit_usage`` leaves ``usage`` out of replies. ``request_count`` counts
    chat requests received, ``fault_counts`` the faults served, ``bodies`` the request bodies (when
    ``record_bodies``); ``hermes_template`` says whether ``/apply-template`` renders tools with
    Hermes ``<tool_call>`` instructions (as Qwen's chat template does).
    """

    def __init__(
        self,
        responder: Responder = echo_responder,
        *,
        latency_ms: float = 0.0,
        faults: FaultPlan | None = None,
        slow_s: float = 30.0,
        omit_usage: bool = False,
        record_bodies: bool = True,
        hermes_template: bool = True,
        port: int = 0,
    ) -> None:
        self.responder = responder
        self.latency_ms = latency_ms
        self.faults = faults or FaultPlan()
        self.slow_s = slow_s
        self.omit_usage = omit_usage
        self.record_bodies = record_bodies
        self.hermes_template = hermes_template
        self._port = port
        self._rng = random.Random(self.faults.seed)
        self._lock = threading.Lock()
        self._count = 0
        self.fault_counts: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._startup_error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (a free one chosen by the OS unless given)."""
        if self._server is None:
            raise UsageError("the loopback server is not running", hint="use it as a context manager")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of this server, ``http://127.0.0.1:PORT/v1``."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def request_count(self) -> int:
        """Chat-completion requests received so far (faulty ones included)."""
        with self._lock:
            return self._count

    def start(self) -> LoopbackServer:
        """Start serving in a background thread; returns once the port is bound."""
        if self._thread is not None:
            raise UsageError("the loopback server is already running", hint="start it once")
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name="masorch-loopback", daemon=True
        )
        self._thread.start()
        ready.wait(timeout=30)
        if self._startup_error is not None or self._server is None:
            self._thread.join(timeout=5)
            self._thread = None
            raise UsageError(
                f"the loopback server could not start: {self._startup_error!r}", hint="free a port or retry"
            )
        return self

    def stop(self) -> None:
        """Stop serving: close the listener, cancel pending replies (slow ones too), join the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop may already be closed
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = None
        self._server = None
        self._loop = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> LoopbackServer:
        return self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, HOST, self._port, backlog=2048)
                )
            except OSError as exc:
                self._startup_error = exc
                return
            finally:
                ready.set()
            loop.run_forever()
            self._server.close()
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(self._server.wait_closed())
        finally:
            loop.close()

    # -- HTTP ------------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line.strip():
                    return
                parts = request_line.decode("latin-1").split()
                headers: dict[str, str] = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    key, _, value = line.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                if len(parts) != 3:
                    await self._write(writer, 400, {"error": {"message": "bad request line"}}, close=True)
                    return
                method, target, _version = parts
                if "content-length" not in headers and method == "POST":
                    await self._write(
                        writer, 411, {"error": {"message": "content-length required"}}, close=True
                    )
                    return
                length = headers.get("content-length", "0") or "0"
                if not length.isdigit():
                    await self._write(writer, 400, {"error": {"message": "bad content-length"}}, close=True)
                    return
                body = await reader.readexactly(int(length))
                close = headers.get("connection", "").lower() == "close"
                path = target.split("?", 1)[0]
                if method == "POST" and path.rstrip("/").endswith("/chat/completions"):
                    if not await self._chat(writer, body, headers, close):
                        return
                elif method == "POST" and path.rstrip("/").endswith("/completions"):
                    if not await self._chat(writer, body, headers, close, text=True):
                        return
                elif method == "POST" and path == "/apply-template":
                    await self._apply_template(writer, body, close)
                elif method == "GET" and path.rstrip("/").endswith("/models"):
                    await self._write(writer, 200, {"object": "list", "data": [{"id": "loopback"}]}, close)
                elif method == "GET" and path == "/health":  # as llama.cpp's server answers once loaded
                    await self._write(writer, 200, {"status": "ok"}, close)
                else:
                    await self._write(writer, 404, {"error": {"message": f"no route {method} {path}"}}, close)
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.debug("loopback: client went away: %r", exc)
        except asyncio.CancelledError:
            # Only stop() cancels handlers; ending quietly keeps asyncio from logging each one.
            log.debug("loopback: connection handler cancelled at shutdown")
        finally:
            writer.close()

    def _next_fault(self) -> tuple[int, FaultKind | None]:
        with self._lock:
            index = self._count
            self._count += 1
            if index < len(self.faults.schedule):
                fault = self.faults.schedule[index]
            elif self.faults.rate > 0 and self._rng.random() < self.faults.rate:
                fault = self._rng.choice(self.faults.kinds)
            else:
                fault = None
            if fault is not None:
                self.fault_counts[fault] += 1
        return index, fault

    async def _apply_template(self, writer: asyncio.StreamWriter, body: bytes, close: bool) -> None:
        try:
            request = json.loads(body)
        except ValueError:
            await self._write(writer, 400, {"error": {"message": "request body is not JSON"}}, close)
            return
        if self.record_bodies:
            with self._lock:
                self.bodies.append(request)
        lines = []
        if request.get("tools"):
            lines.append("<|tools|>\n" + "\n".join(json.dumps(t) for t in request["tools"]))
            if self.hermes_template:
                lines.append(
                    'Call each function as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>'
                )
        for m in request.get("messages") or []:
            calls = "".join(f"\n<call>{json.dumps(c)}</call>" for c in m.get("tool_calls") or [])
            lines.append(f"<|{m.get('role')}|>\n{m.get('content') or ''}{calls}")
        await self._write(writer, 200, {"prompt": "\n".join([*lines, "<|assistant|>\n"])}, close)

    async def _chat(
        self,
        writer: asyncio.StreamWriter,
        body: bytes,
        headers: Mapping[str, str],
        close: bool,
        text: bool = False,
    ) -> bool:
        """Serve one chat request (``text``: a text completion of a prompt); False when the
        connection was dropped on purpose."""
        index, fault = self._next_fault()
        if self.latency_ms > 0:
            await asyncio.sleep(self.latency_ms / 1000.0)
        if fault == "drop":
            writer.transport.abort()
            return False
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        if fault == "429":
            await self._write(
                writer, 429, {"error": {"message": "rate limited", "type": "rate_limit"}}, close
            )
            return True
        if fault == "500":
            await self._write(writer, 500, {"error": {"message": "injected server error"}}, close)
            return True
        if fault == "context":  # llama.cpp's reply when generation runs past a slot's context
            await self._write(writer, 500, {"error": {"message": "Context size has been exceeded."}}, close)
            return True
        if fault == "400":
            await self._write(writer, 400, {"error": {"message": "injected bad request"}}, close)
            return True
        if fault == "401":  # like hosted APIs, echo the key back: clients must redact it
            key = headers.get("authorization", "").removeprefix("Bearer ")
            await self._write(
                writer, 401, {"error": {"message": f"Incorrect API key provided: {key}"}}, close
            )
            return True
        try:
            request = json.loads(body)
        except ValueError:
            await self._write(writer, 400, {"error": {"message": "request body is not JSON"}}, close)
            return True
        if self.record_bodies:
            with self._lock:
                self.bodies.append(request)
        if fault == "malformed":
            await self._write_raw(writer, 200, b'{"id": "chatcmpl-broken", "choices": [{"message": ', close)
            return True
        if fault == "bad_shape":
            await self._write(writer, 200, {"object": "list", "data": []}, close)
            return True
        await self._write(
            writer, 200, self._text_reply(index, request) if text else self._reply(index, request), close
        )
        return True

    def _text_reply(self, index: int, request: Mapping[str, Any]) -> dict[str, Any]:
        answer = self.responder([{"role": "user", "content": str(request.get("prompt", ""))}])
        text = answer if isinstance(answer, str) else json.dumps(answer)
        reply: dict[str, Any] = {
            "id": f"cmpl-loopback-{index}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": request.get("model", "loopback"),
            "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
        }
        if not self.omit_usage:
            prompt, completion = _words(request.get("prompt")), _words(text)
            reply["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return reply

    def _reply(self, index: int, request: Mapping[str, Any]) -> dict[str, Any]:
        messages = list(request.get("messages") or [])
        answer = self.responder(messages)
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        if isinstance(answer, Mapping):
            message = {"role": "assistant", "content": None, **answer}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        # ``n`` completions of the prompt (the same answer each time), as the n parameter asks.
        asked = request.get("n")
        n = asked if isinstance(asked, int) and asked > 1 else 1
        content = message.get("content")
        max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
        if isinstance(content, str) and isinstance(max_tokens, int) and _words(content) > max_tokens:
            message["content"] = " ".join(content.split()[:max_tokens])
            finish = "length"
        reply: dict[str, Any] = {
            "id": f"chatcmpl-loopback-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "loopback"),
            "choices": [{"index": j, "message": message, "finish_reason": finish} for j in range(n)],
        }
        if not self.omit_usage:
            prompt = sum(_words(m.get("content")) for m in messages if isinstance(m, Mapping))
            calls = message.get("tool_calls")
            completion = n * (_words(message.get("content")) + (_words(json.dumps(calls)) if calls else 0))
            reply["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return reply

    async def _write(self, writer: asyncio.StreamWriter, status: int, payload: object, close: bool) -> None:
        await self._write_raw(writer, status, json.dumps(payload).encode(), close)

    async def _write_raw(self, writer: asyncio.StreamWriter, status: int, body: bytes, close: bool) -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
            "content-type: application/json\r\n"
            f"content-length: {len(body)}\r\n"
            f"connection: {'close' if close else 'keep-alive'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        await writer.drain()
