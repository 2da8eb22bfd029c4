"""The address a local server listens on (``masorch serve``, ``masorch view``): one clear error each
for a busy port, a host that is not this machine's, and a host name that does not resolve.

The operating system's own words (``[Errno 98] Address already in use``) say neither which flag is
wrong nor what to pass instead; :func:`listen_error` does.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Any

from masorch.errors import UsageError

#: The names a request's ``Host`` header gives for a server on this machine's loopback address.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` is reachable from this machine only.

    >>> is_loopback("localhost"), is_loopback("127.0.0.2"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: Connections a listening socket queues (asyncio's and uvicorn's default).
SOCKET_BACKLOG = 2048

#: The hint for a --host the server cannot listen on.
HOST_HINT = (
    "pass an address of this machine as --host (127.0.0.1: this machine only; 0.0.0.0: every interface)"
)


def listen_error(exc: OSError | UnicodeError, host: str, port: int, *, free_port: bool = False) -> UsageError:
    """The UsageError for ``exc``, raised binding ``host:port``: it names the flag to change.

    ``free_port`` says that ``--port 0`` picks a free port (so the hint offers it).

    >>> listen_error(OSError(errno.EADDRINUSE, "Address already in use"), "127.0.0.1", 8000).hint
    'pass another --port, or stop the program that holds it'
    >>> listen_error(socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "999.1.1.1", 80).message
    'cannot listen on 999.1.1.1: not an IP address or a host name this machine resolves'
    """
    where = f"{host}:{port}"
    if isinstance(exc, (socket.gaierror, UnicodeError)):  # UnicodeError: a name IDNA cannot encode (a..b)
        return UsageError(
            f"cannot listen on {host}: not an IP address or a host name this machine resolves", hint=HOST_HINT
        )
    if exc.errno == errno.EADDRINUSE:
        return UsageError(
            f"cannot listen on {where}: the port is in use",
            hint="pass another --port"
            + (" (0 picks a free one)" if free_port else ", or stop the program that holds it"),
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return UsageError(
            f"cannot listen on {where}: {host} is not an address of this machine", hint=HOST_HINT
        )
    if exc.errno == errno.EACCES:
        return UsageError(
            f"cannot listen on {where}: no permission to use port {port}",
            hint="pass a --port above 1023 (lower ones need privileges)",
        )
    return UsageError(f"cannot listen on {where}: {exc.strerror or exc}", hint="check --host and --port")


def check_host(host: str, port: int) -> None:
    """A UsageError (see :func:`listen_error`) unless ``host`` is an address or a name that resolves
    (a blank one is refused: the OS would read it as every interface)."""
    _addresses(host, port)


def address_family(host: str, port: int) -> int:
    """The address family a one-socket server on ``host`` binds: IPv4 where ``host`` has an IPv4
    address (``localhost``), else IPv6 (``::1``); a UsageError as :func:`check_host` gives."""
    families = [info[0] for info in _addresses(host, port)]
    return socket.AF_INET if socket.AF_INET in families or not families else families[0]


def url_host(host: str) -> str:
    """``host`` as a URL writes it (an IPv6 address in brackets).

    >>> url_host("::1"), url_host("127.0.0.1"), url_host("localhost")
    ('[::1]', '127.0.0.1', 'localhost')
    """
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Sockets bound (not yet listening) to every address of ``host`` on ``port``, as asyncio's
    ``create_server`` binds them; a UsageError (see :func:`listen_error`) when one cannot be bound."""
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in _addresses(host, port):
            try:
                sock = socket.socket(family, kind, proto)
            except OSError:  # a family this kernel lacks (IPv6 off): skipped, as asyncio skips it
                continue
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # ::1 and 127.0.0.1 are two sockets, as asyncio makes them
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(SOCKET_BACKLOG)  # listening now: a second server on the port fails here, not later
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise listen_error(exc, host, port) from None
    if not sockets:
        raise UsageError(
            f"cannot listen on {host}:{port}: no address family of it works here", hint=HOST_HINT
        )
    return sockets


def _addresses(host: str, port: int) -> list[tuple[Any, ...]]:
    if not host.strip():  # the OS reads "" as every interface: too much for a flag left blank
        raise UsageError("--host is empty", hint=HOST_HINT)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:  # socket.gaierror: a name that does not resolve
        raise listen_error(exc, host, port) from None
    return list(dict.fromkeys(infos))  # one socket an address (getaddrinfo may repeat one)
