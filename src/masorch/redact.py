"""Credentials out of everything masorch writes or logs: one function, :func:`redact`.

A key can hide in a model string (``vllm:http://user:KEY@host:8000/v1#model``) or in a URL a client
logs (``HTTP Request: POST http://user:KEY@host/...``). :func:`redact` drops the user info of every
URL in a text and masks the values of its query string; model strings are redacted before they
reach an eval log, a report, a trace, an error message or a log line, and :class:`RedactFilter`
does the same to every log record a handler emits (the HTTP client's debug logs included).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

# scheme://[userinfo@]rest: the user info runs to the last "@" before the path (as in urlsplit).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/?#]*@)")
# ?a=1&b=2 after a URL's path: each value masked, the names kept.
_QUERY = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s?#]*)\?(?P<query>[^\s#]*)")
_MASK = "***"


def _mask_query(match: re.Match[str]) -> str:
    parts = []
    for item in match.group("query").split("&"):
        name, sep, _ = item.partition("=")
        parts.append(f"{name}={_MASK}" if sep else _MASK if name else "")
    return f"{match.group('head')}?{'&'.join(parts)}"


def redact(text: str) -> str:
    """``text`` with the user info of every URL removed and its query values masked.

    >>> redact("vllm:http://user:sk-123@127.0.0.1:8000/v1#Qwen/Qwen2.5-7B")
    'vllm:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B'
    >>> redact("POST https://h/v1/chat?api-version=1&key=abc done")
    'POST https://h/v1/chat?api-version=***&key=*** done'
    >>> redact("openai:gpt-4o-mini")
    'openai:gpt-4o-mini'
    """
    if "://" not in text:
        return text
    return _QUERY.sub(_mask_query, _USERINFO.sub(r"\g<scheme>", text))


def redact_url(url: str) -> str:
    """The URL without user info, query or fragment (where credentials may hide).

    >>> redact_url("http://user:secret@host:8000/v1?key=abc")
    'http://host:8000/v1'
    """
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a malformed port: keep the host only
        port = None
    host = parts.hostname or ""
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class RedactFilter(logging.Filter):
    """A handler filter that passes every record with credentials in URLs redacted (message and traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact the record in place; never drops it."""
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed format string: logging reports it itself
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Add one :class:`RedactFilter` to each handler of ``logger`` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactFilter) for f in handler.filters):
            handler.addFilter(RedactFilter())
