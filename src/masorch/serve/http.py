"""The HTTP server under ``masorch serve``: uvicorn with a deadline on receiving each request.

uvicorn bounds the idle time between requests (``timeout_keep_alive``) but not the time a client
takes to send one: every byte that arrives restarts its keep-alive timer, so a client that sends a
request's head a byte at a time (or opens a connection and sends nothing) holds a connection for as
long as it likes, and enough of them fill ``limit_concurrency`` so that every other client gets 503
("slowloris"). :func:`deadline_protocol` wraps uvicorn's h11 protocol: from the moment a connection
opens, and again from the end of each response on a kept-alive connection, the client has
``read_timeout_s`` to send a whole request (head and body); past it the connection is closed. Once
a request has arrived the deadline is off, so a long run or a long stream is never cut by it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from masorch.serve.app import ServeOptions

logger = logging.getLogger(__name__)

#: Seconds a stopping server waits for its requests before it cancels their runs.
SHUTDOWN_GRACE_S = 10
#: Connections beyond the admitted requests that still get an answer (e.g. /v1/models, or a 503).
CONNECTION_MARGIN = 16


def deadline_protocol(read_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 HTTP protocol, closing a connection whose request has not fully arrived
    ``read_timeout_s`` seconds after the connection opened or its previous response ended."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    if not read_timeout_s > 0:
        raise ValueError(f"read_timeout_s must be a positive number of seconds, got {read_timeout_s!r}")
    receiving = (h11.IDLE, h11.SEND_BODY)  # the client's states while a request is still on its way

    class DeadlineH11Protocol(H11Protocol):
        _read_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state not in receiving:  # the request is in (or the connection is over)
                self._disarm()

        def handle_websocket_upgrade(self, event: Any) -> None:
            self._disarm()  # the connection becomes a websocket's, which this deadline is not for
            super().handle_websocket_upgrade(event)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state in receiving:
                self._arm()  # a kept-alive connection: the next request has the same time to arrive

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._read_deadline = self.loop.call_later(read_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _expire(self) -> None:
            self._read_deadline = None
            if not self.transport.is_closing():
                logger.warning(
                    "closing a connection from %s: no whole request within %g s", self.client, read_timeout_s
                )
                self.transport.close()

    return DeadlineH11Protocol


def uvicorn_config(app: Any, host: str, port: int, options: ServeOptions, *, log_level: str = "info") -> Any:
    """The ``uvicorn.Config`` that serves ``app``: the request-receipt deadline of ``options``, a
    connection cap past the admitted requests (beyond it uvicorn answers 503), and a graceful
    shutdown that waits :data:`SHUTDOWN_GRACE_S` for running requests."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="off",
        http=deadline_protocol(options.read_timeout_s),
        limit_concurrency=options.concurrency + options.max_waiting + CONNECTION_MARGIN,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
