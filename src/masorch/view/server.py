"""The local HTTP server of ``masorch view``: the standard library's threading server, loopback by default.

``/`` is the page, ``/static/NAME`` its scripts and styles, ``/api/...`` the data endpoints of
:class:`~masorch.view.app.ViewApp`. Only GET is served; a request whose ``Host`` is not the address
the server listens on (a DNS-rebinding page in another tab) is refused.
"""

from __future__ import annotations

import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from masorch.errors import MasorchError
from masorch.listen import LOOPBACK_HOSTS, address_family, is_loopback, listen_error, url_host
from masorch.view.app import NotFound, ViewApp
from masorch.view.page import ASSETS, asset, render_page
from masorch.view.payload import to_json

logger = logging.getLogger(__name__)

#: The address served unless the user asks for another.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


#: Connections served at once; one more is closed at once (each holds a thread until it ends).
MAX_CONNECTIONS = 64
#: Seconds a connection may stay silent (a request not sent, a kept-alive connection unused).
IDLE_TIMEOUT_S = 30.0


class ViewServer(ThreadingHTTPServer):
    """A threading HTTP server bound to one :class:`ViewApp`, IPv4 or IPv6 as ``host`` is; at most
    :data:`MAX_CONNECTIONS` connections at once, each closed after :data:`IDLE_TIMEOUT_S` silent."""

    daemon_threads = True

    def __init__(self, app: ViewApp, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
        self.app = app
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.address_family = address_family(host, port)
        try:
            super().__init__((host, port), _Handler)
        except (OSError, UnicodeError) as exc:  # UnicodeError: a --host IDNA cannot encode
            raise listen_error(exc, host, port, free_port=True) from None

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection in a thread of its own, or close it when every slot is taken."""
        if not self._slots.acquire(blocking=False):
            logger.warning("view: %d connections open; one more closed", MAX_CONNECTIONS)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until :meth:`shutdown`, building the first requests' data in a thread meanwhile."""
        threading.Thread(target=self.app.warm, name="view-warm", daemon=True).start()
        super().serve_forever(poll_interval)

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach the server."""
        return is_loopback(str(self.server_address[0]))

    @property
    def url(self) -> str:
        """The page's address."""
        host, port = self.server_address[:2]
        return f"http://{url_host(str(host))}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: bytes, content_type: str, *, cache: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, hint: str = "") -> None:
        body = to_json({"error": message, "hint": hint}).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _host_ok(self) -> bool:
        """Whether the Host header names this machine when the server listens on loopback only."""
        if not self.server.loopback:
            return True
        try:
            name = urlsplit(f"//{self.headers.get('Host', '')}").hostname or ""
        except ValueError:  # "Host: [": not a host at all
            return False
        return name in LOOPBACK_HOSTS or name == str(self.server.server_address[0])

    def do_GET(self) -> None:
        if not self._host_ok():
            self._error(
                HTTPStatus.FORBIDDEN, "unexpected Host header", "open the page at the printed address"
            )
            return
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            # A file name that is not UTF-8 (os.fsdecode's surrogates) is shown escaped.
            page = render_page(self.server.app.source.path.name).encode("utf-8", "backslashreplace")
            self._send(HTTPStatus.OK, page, "text/html; charset=utf-8")
        elif path.startswith("/static/") and path.removeprefix("/static/") in ASSETS:
            name = path.removeprefix("/static/")
            self._send(HTTPStatus.OK, asset(name), ASSETS[name], cache=True)
        elif path.startswith("/api/"):
            self._api()
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no page {path}", "open /")

    def _api(self) -> None:
        try:
            payload = self.server.app.get(self.path)
        except NotFound as exc:
            self._error(HTTPStatus.NOT_FOUND, exc.message, exc.hint)
            return
        except MasorchError as exc:  # a damaged file: the page shows the message and the fix
            logger.warning("%s: %s", self.path, exc.message)
            self._error(HTTPStatus.UNPROCESSABLE_ENTITY, exc.message, exc.hint)
            return
        except OSError as exc:  # the file moved, removed or unreadable since the server started
            message = f"cannot read {exc.filename or 'the viewed file'}: {exc.strerror or exc}"
            logger.warning("%s: %s", self.path, message)
            self._error(HTTPStatus.UNPROCESSABLE_ENTITY, message, "check the file, then restart masorch view")
            return
        self._send(HTTPStatus.OK, to_json(payload).encode("utf-8"), "application/json; charset=utf-8")
