"""An OpenAI-compatible endpoint whose models are systems: ``/v1/models``, ``/v1/chat/completions``.

Any OpenAI client can call an orchestrated system as if it were one model: the request's ``model``
names a system (``mas:high``, ``sas:cot``, a name from a systems file), the last user message is
the question, and :func:`masorch.run.run` answers it. The reply is a chat completion whose usage
sums every call of the run, with the run's status, trace id, plan and cost in an extra ``masorch``
field. ``stream: true`` sends the run's progress (node and call events, in ``masorch`` fields of
chunks with an empty delta) and then the answer as server-sent events.

A run that ends without an answer (``invalid_plan``, ``budget``, ``timeout``, ``error``) is an HTTP
502 with the status and the error; a bad request is a 4xx naming the problem; with a token set
every request needs ``Authorization: Bearer TOKEN``. A request's deadline counts its wait for a run
slot; past ``concurrency`` runs and ``max_waiting`` waiting requests a new one is a 503 with
``Retry-After``; a client that goes away, streamed or not, cancels its run.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from masorch.backends.base import encodable
from masorch.errors import MasorchError
from masorch.redact import redact
from masorch.run import Environment, RunResult, System, run
from masorch.trace.events import Event
from masorch.trace.writer import CallbackSink

logger = logging.getLogger(__name__)

#: Largest request body read (a chat request is small; this bounds a hostile one).
MAX_BODY_BYTES = 1 << 20


#: How often a non-streamed request checks whether its client is still there (seconds).
DISCONNECT_POLL_S = 0.5


@dataclass(frozen=True)
class ServeOptions:
    """How the endpoint runs: ``token`` (None: no auth), runs at once, and each request's deadline.

    ``timeout_s`` counts from the request's arrival, its wait for a run slot included; beyond
    ``concurrency`` running and ``max_waiting`` waiting requests, a new one is refused (503) instead
    of queued without end. ``hosts`` (None: any) are the names a request's ``Host`` header may give;
    a server on loopback accepts only loopback names, so a web page rebinding its own name to
    127.0.0.1 reaches nothing. ``read_timeout_s`` is how long a client has to send a whole request
    once its connection opens (or its previous response ends): see :mod:`masorch.serve.http`.
    """

    token: str | None = None
    concurrency: int = 4
    timeout_s: float | None = 1800.0
    hosts: tuple[str, ...] | None = None
    max_waiting: int = 64
    read_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            raise ValueError("a blank token would lock every client out: give a token, or None for no auth")
        if self.concurrency < 1 or self.max_waiting < 0:
            raise ValueError("concurrency must be at least 1 and max_waiting at least 0")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError("timeout_s must be a positive number of seconds, or None for no deadline")
        if not self.read_timeout_s > 0:
            raise ValueError("read_timeout_s must be a positive number of seconds")


class _JSONResponse(JSONResponse):
    """Starlette's JSON response, sendable whatever its text: a lone surrogate (a ``"\\ud800"``
    escape in the plan a model wrote, or in a client's request) goes out as its JSON escape."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")  # inside a JSON string: the JSON escape


class _BadRequest(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
        self.headers = dict(headers or {})


class _Slots:
    """Runs at once (a semaphore) and the requests admitted so far, running or waiting (a count)."""

    def __init__(self, opts: ServeOptions) -> None:
        self.gate = asyncio.Semaphore(opts.concurrency)
        self.cap = opts.concurrency + opts.max_waiting
        self.admitted = 0

    def admit(self) -> None:
        """Count a new request in, or refuse it when the server is full (no await: no race)."""
        if self.admitted >= self.cap:
            raise _BadRequest(
                503,
                f"the server is busy ({self.cap} requests running or waiting): retry later",
                "server_busy",
                {"Retry-After": "10"},
            )
        self.admitted += 1

    def release(self) -> None:
        self.admitted -= 1


def make_app(systems: Sequence[System], env: Environment, options: ServeOptions | None = None) -> Starlette:
    """The ASGI app serving ``systems`` (by name) with ``env``; the caller closes ``env``."""
    opts = options or ServeOptions()
    by_name = {s.name: s for s in systems}
    slots = _Slots(opts)
    created = int(time.time())

    def check_auth(request: Request) -> None:
        if opts.hosts is not None and _host_name(request.headers.get("host", "")) not in opts.hosts:
            raise _BadRequest(421, "this server does not answer for that Host", "invalid_request_error")
        if opts.token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        # The scheme is case-insensitive (RFC 7235); the token's bytes (headers arrive as latin-1
        # text) are compared in constant time with the token's UTF-8.
        sent = given.strip().encode("latin-1", "replace")
        if scheme.lower() != "bearer" or not hmac.compare_digest(sent, opts.token.encode()):
            raise _BadRequest(401, "missing or wrong bearer token", "authentication_error")

    async def models(request: Request) -> Response:
        try:
            check_auth(request)
        except _BadRequest as exc:
            return _error(exc)
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "masorch"} for name in by_name
        ]
        return _JSONResponse({"object": "list", "data": data})

    async def chat(request: Request) -> Response:
        try:
            check_auth(request)
            # A JSON type makes a browser ask first (CORS), which this server never allows: a web
            # page cannot start runs with a form or a text/plain POST.
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                raise _BadRequest(415, "send the request body as Content-Type: application/json")
            body = await _read_json(request)
            system = _system(body, by_name)
            question = _question(body)
            stream = _options(body)
            slots.admit()
        except _BadRequest as exc:
            return _error(exc)
        events: asyncio.Queue[Event | None] = asyncio.Queue()
        sink = CallbackSink(events.put_nowait) if stream else None
        task = asyncio.ensure_future(_admitted_run(system, question, env, opts, slots, sink, events))
        if stream:
            return StreamingResponse(_stream(system, task, events), media_type="text/event-stream")
        result = await _unless_gone(task, request)
        if result is None:  # the client went away; nobody reads this
            return _error(_BadRequest(499, "the client closed the request; its run was cancelled"))
        if not result.ok:
            return _failed(system, result)
        return _JSONResponse(_completion(system, result))

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        # Routing errors in the OpenAI shape too, and no redirect that echoes the Host header.
        assert isinstance(exc, HTTPException)
        reason = "no such endpoint (see GET /v1/models)" if exc.status_code == 404 else exc.detail
        return _error(_BadRequest(exc.status_code, f"{request.method} {request.url.path[:80]}: {reason}"))

    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found})
    app.router.redirect_slashes = False
    return app


def _host_name(header: str) -> str:
    """The host of a ``Host`` header, without port or IPv6 brackets, lower case.

    >>> _host_name("[::1]:8000"), _host_name("LocalHost:80"), _host_name("127.0.0.1")
    ('::1', 'localhost', '127.0.0.1')
    """
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


async def _read_json(request: Request) -> Mapping[str, Any]:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise _BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes")
    raw = b""
    try:
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY_BYTES:
                raise _BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes")
    except ClientDisconnect:  # gone (or cut off at the read deadline) before its body arrived
        raise _BadRequest(400, "the connection closed before the request body arrived") from None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _BadRequest(400, "the request body is not JSON (or nested too deeply)") from None
    if not isinstance(body, dict):
        raise _BadRequest(400, "the request body is not a JSON object")
    return body


def _system(body: Mapping[str, Any], by_name: Mapping[str, System]) -> System:
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise _BadRequest(400, "`model` is missing: name one of the served systems (GET /v1/models)")
    if name not in by_name:
        raise _BadRequest(404, f"no system {name[:80]!r}; served: {', '.join(by_name)}", "model_not_found")
    return by_name[name]


def _options(body: Mapping[str, Any]) -> bool:
    """Check the request's generation fields; returns whether it asks for a stream.

    A system gives one answer a run (``n`` is 1) and decides its own sampling and token caps, so
    those fields are checked for type and otherwise left to the system's configuration.
    """
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _BadRequest(400, "`stream` must be true or false")
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise _BadRequest(400, "`n` must be 1: a system gives one answer a run (send n requests for n)")
    for field in ("max_tokens", "max_completion_tokens"):
        value = body.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise _BadRequest(400, f"`{field}` must be a positive integer")
    return stream is True


def _question(body: Mapping[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _BadRequest(400, "`messages` must be a non-empty list of chat messages")
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # content parts: the text ones
                texts = (p.get("text") for p in content if isinstance(p, dict))
                content = "".join(t for t in texts if isinstance(t, str))
            if isinstance(content, str) and content.strip():
                return content
            break
    raise _BadRequest(400, "the last user message has no text: it is the question the system answers")


async def _admitted_run(
    system: System,
    question: str,
    env: Environment,
    opts: ServeOptions,
    slots: _Slots,
    sink: CallbackSink | None,
    events: asyncio.Queue[Event | None],
) -> RunResult:
    """An admitted request: wait for a run slot and run, within one deadline; then count it out."""
    try:
        return await _run(system, question, env, opts, slots.gate, sink)
    finally:
        slots.release()
        events.put_nowait(None)


async def _run(
    system: System,
    question: str,
    env: Environment,
    opts: ServeOptions,
    gate: asyncio.Semaphore,
    sink: CallbackSink | None,
) -> RunResult:
    arrived = time.monotonic()
    started: list[float] = []

    async def gated() -> RunResult:
        async with gate:
            started.append(time.monotonic())
            return await run(system, question, env, trace=sink)

    try:
        async with asyncio.timeout(opts.timeout_s):  # None: no deadline
            return await gated()
    except TimeoutError:
        waited = (started[0] if started else time.monotonic()) - arrived
        return RunResult(
            status="timeout",
            error=f"the request deadline of {opts.timeout_s:g} s passed ({waited:.0f} s of it waiting for a "
            "free run slot; raise --timeout or --concurrency)",
        )
    except MasorchError as exc:  # a bad system or environment: the client gets the reason, not a hang
        logger.warning("run failed: %s: %s", type(exc).__name__, redact(str(exc)))
        return RunResult(status="error", error=redact(f"{type(exc).__name__}: {exc}"))
    except Exception as exc:  # anything else may hold paths or internals: they stay in the server's log
        logger.exception("run failed: %s", type(exc).__name__)
        return RunResult(status="error", error=f"internal error ({type(exc).__name__}); see the server log")


def _usage(result: RunResult) -> dict[str, Any]:
    u = result.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


def _extra(result: RunResult) -> dict[str, Any]:
    """The ``masorch`` field: status, trace id, plan, diagnostics, calls, cost and wall time."""
    return {
        "status": result.status,
        "error": result.error,
        "trace_id": result.run_id,
        "plan": result.plan.model_dump(mode="json") if result.plan is not None else None,
        "diagnostics": [d.to_dict() for d in result.diagnostics],
        "calls": result.usage.calls,
        "cost": result.usage.cost,
        "wall_s": round(result.wall_s, 3),
    }


def _completion(system: System, result: RunResult) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{result.run_id or uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": system.name,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": result.answer}, "finish_reason": "stop"}
        ],
        "usage": _usage(result),
        "masorch": _extra(result),
    }


def _failed(system: System, result: RunResult) -> Response:
    return _JSONResponse({"error": _run_error(system, result), "masorch": _extra(result)}, status_code=502)


def _run_error(system: System, result: RunResult) -> dict[str, Any]:
    """The ``error`` object of a run that ended without an answer (a 502's body, a stream's event)."""
    message = f"{system.name} ended {result.status}: {result.error or 'no answer'}"
    return {"message": message, "type": "run_failed", "code": result.status}


def _clean(value: Any) -> Any:
    """A progress event as JSON values: every string redacted (URL credentials, query values) and
    made encodable (a lone surrogate from a model or a client becomes U+FFFD).

    >>> _clean({"error": "GET http://h/v1?key=abc " + chr(0xD800), "n": [1, 2.5, None]})
    {'error': 'GET http://h/v1?key=*** \ufffd', 'n': [1, 2.5, None]}
    """
    if isinstance(value, str):
        return redact(encodable(value))
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _clean(str(value))


def _error(exc: _BadRequest) -> Response:
    body = {"error": {"message": exc.message, "type": exc.kind}}
    return _JSONResponse(body, status_code=exc.status, headers=exc.headers)


async def _unless_gone(task: asyncio.Future[RunResult], request: Request) -> RunResult | None:
    """The run's result, or None (the run cancelled and awaited) once the client has gone away."""
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                logger.info("client went away: run cancelled")
                return None
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _stream(
    system: System, task: asyncio.Future[RunResult], events: asyncio.Queue[Event | None]
) -> AsyncIterator[str]:
    """The run as server-sent events: progress chunks, then the answer, usage, ``[DONE]``."""
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"

    def chunk(delta: Mapping[str, Any], finish: str | None = None, **extra: Any) -> str:
        body: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": system.name,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"  # ASCII: any text, a lone surrogate too, stays sendable

    try:
        yield chunk({"role": "assistant", "content": ""})
        while (event := await events.get()) is not None:
            yield chunk({}, masorch={"event": _clean(event.model_dump(mode="python"))})
        result = await task
        if result.ok:
            yield chunk({"content": result.answer})
            yield chunk({}, "stop", usage=_usage(result), masorch=_extra(result))
        else:  # the last chunk has no finish, then the error event OpenAI clients raise on
            yield chunk({}, usage=_usage(result), masorch=_extra(result))
            yield f"data: {json.dumps({'error': _clean(_run_error(system, result))})}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        task.cancel()  # the client went away: stop the run
