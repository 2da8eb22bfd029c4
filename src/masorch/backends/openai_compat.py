"""Any OpenAI-compatible chat server (vLLM, SGLang, llama.cpp server, Ollama, hosted APIs) as a Backend.

Retries are ours, not the client's (``max_retries=0``), so that :attr:`Completion.attempts` counts
every request really sent. Transient failures (429, 408/409, 5xx, timeouts, dropped connections,
a truncated JSON body) are retried with exponential backoff and jitter; the rest fail at once with a
:class:`~masorch.errors.BackendError` naming the problem. The API key never leaves the client: it is
redacted from ``model_id``, ``repr``, error messages and logs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from masorch.backends.base import Completion, GenerateConfig, Message, ToolCall, Usage
from masorch.backends.chat import (
    HERMES_TAG,
    estimate_tokens,
    hermes_calls,
    messages_payload,
    parse_chat_choice,
    parse_text_choice,
    tools_payload,
)
from masorch.backends.prices import Pricing
from masorch.errors import BackendError, UsageError
from masorch.redact import redact, redact_url

log = logging.getLogger(__name__)

BASE_URL_ENV = ("MASORCH_OPENAI_BASE_URL", "OPENAI_BASE_URL")
API_KEY_ENV = ("MASORCH_OPENAI_API_KEY", "OPENAI_API_KEY")
#: The longest reply taken (about a million tokens: past any context of a model this project runs).
MAX_REPLY_CHARS = 4 * 1024 * 1024
_RETRYABLE_STATUS = frozenset({408, 409, 429})
#: How servers say a request does not fit the model's context: llama.cpp ("the request exceeds the
#: available context size", or HTTP 500 "Context size has been exceeded" mid-generation), vLLM and
#: OpenAI ("maximum context length", "context_length_exceeded"). Sending it again cannot help.
_CONTEXT_EXCEEDED = re.compile(r"context (?:size|length|window)|context_length_exceeded", re.IGNORECASE)
SchemaFormat = Literal["json_schema", "json_object"]
#: How a server takes a GBNF grammar: llama.cpp's server a top-level ``grammar``; vLLM (0.12 and
#: later) ``structured_outputs.grammar``; older vLLM ``guided_grammar``.
GrammarFormat = Literal["llama.cpp", "vllm", "vllm-guided"]
GRAMMAR_FORMATS: tuple[GrammarFormat, ...] = ("llama.cpp", "vllm", "vllm-guided")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry transient failures (exponential backoff, equal jitter)."""

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise UsageError(f"max_attempts={self.max_attempts} < 1", hint="use max_attempts >= 1")

    def delay(self, attempt: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based).

        >>> RetryPolicy(max_delay_s=20.0).delay(5_000, random.Random(0)) <= 20.0  # no overflow
        True
        """
        # The exponent is capped: 2**1024 does not fit in a float, and the ceiling is reached long before.
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** min(attempt - 1, 64))
        wait = ceiling / 2 + rng.uniform(0, ceiling / 2)
        if retry_after_s is not None:
            wait = max(wait, min(retry_after_s, self.max_delay_s))
        return wait


def _raise_if_cancelling() -> None:
    """Raise CancelledError where the running task has a cancel pending that a library swallowed
    (it then ran on as if nothing had happened): a cancelled call is never retried."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class _AttemptFailed(Exception):
    """One failed attempt: the error, and how long the server asked us to wait (Retry-After)."""

    def __init__(self, error: BackendError, retry_after_s: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after_s = retry_after_s


def _api_key(key: str | None, base_url: str | None, model: str) -> str:
    """The key to send: the given one (surrounding whitespace, e.g. a file's line end, stripped), any
    for a self-hosted server, else a UsageError. A key an HTTP header cannot carry is refused without
    showing it: sent, it failed inside the client with the key quoted in the error."""
    key = key.strip() if key is not None else None
    if key:
        if not all("!" <= ch <= "~" for ch in key):
            raise UsageError(
                f"the API key for {model} holds a character an HTTP header cannot carry (a space, a "
                "control character or a non-ASCII letter)",
                hint="check the key's variable (MASORCH_OPENAI_API_KEY, OPENAI_API_KEY or "
                "MASORCH_VLLM_API_KEY, or the settings) for a stray character, e.g. a CRLF line end",
            )
        return key
    if base_url is None:
        raise UsageError(
            f"no API key for {model}",
            hint="set MASORCH_OPENAI_API_KEY (or OPENAI_API_KEY), or give a base URL of a self-hosted server",
        )
    return "EMPTY"  # self-hosted servers (vLLM, llama.cpp, Ollama) accept any key


def check_base_url(url: str, example: str = "http://127.0.0.1:8000/v1") -> str:
    """``url`` if it is an http(s) URL with a host and a valid port, else a UsageError naming it
    (credentials hidden). Checked when the backend is built, not at the first call: a URL without a
    scheme was retried as a dead server on every call, and a bad port crashed inside the client."""
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or 1 <= parts.port <= 65535
    except ValueError:  # not a number, or out of range
        port_ok = False
    shown = redact(url)
    if url != url.strip() or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"the server URL {shown!r} is not an http(s) URL with a host",
            hint=f"e.g. {example} (no spaces around it)",
        )
    if not port_ok:
        raise UsageError(
            f"the server URL {shown!r} has an invalid port", hint=f"a number 1-65535, e.g. {example}"
        )
    return url


def _count(value: Any) -> int | None:
    """A token count a server reported, or None where it is not one (missing, negative, a bool, a
    float): then the count is estimated, as for a server that reports none.

    >>> _count(12), _count(-50), _count(True), _count("7")
    (12, None, None, None)
    """
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def retry_after_seconds(header: str, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for: seconds, or an HTTP date (RFC 9110); None for
    anything else (then the backoff alone decides).

    >>> retry_after_seconds("3"), retry_after_seconds("soon"), retry_after_seconds("nan")
    (3.0, None, None)
    >>> retry_after_seconds("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0)
    10.0
    """
    import email.utils
    import math

    try:
        seconds = float(header)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _first_env(env: Mapping[str, str], names: Sequence[str]) -> str | None:
    for name in names:
        value = env.get(name)
        if value:
            return value
    return None


class OpenAIBackend:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint, through the ``openai`` client.

    ``base_url`` and ``api_key`` default to ``MASORCH_OPENAI_BASE_URL``/``OPENAI_BASE_URL`` and
    ``MASORCH_OPENAI_API_KEY``/``OPENAI_API_KEY``; a self-hosted server (a base URL given) needs no key.
    ``timeout_s`` bounds each request; ``retry`` says how transient failures are retried; ``pricing``
    fills :attr:`Usage.cost`. ``model_id`` is ``provider:model`` unless ``model_id`` is given.
    With a ``seed``, sample ``i`` of a prompt uses seed ``seed + i`` so that samples stay distinct.
    ``schema_format`` says how a JSON schema is sent: ``json_schema`` (OpenAI, vLLM, SGLang, Ollama,
    the llama.cpp C++ server) or ``json_object`` with a ``schema`` field (llama-cpp-python's server,
    which rejects ``json_schema``). ``grammar_format`` says whether and how the server takes a GBNF
    grammar (:data:`GrammarFormat`); None (hosted APIs) means a ``GenerateConfig.grammar`` is not
    sent and the call decodes freely, which is logged once. ``connection_shards`` HTTP clients share
    the calls round-robin, which keeps the cost per call low with many calls in flight.
    ``fresh_connection`` gives every call its own connection, closed when the call ends, is cancelled
    or times out: a server that stops generating for a client that went away (llama.cpp's) then
    frees the slot. ``n_usage`` says what a reply's usage counts when one request asks for ``n``
    completions (:meth:`complete_n`): ``sum`` over the choices (OpenAI, vLLM) or the ``first`` choice
    only (llama.cpp's server; the other choices' tokens are then estimated).

    A call with ``tools`` and a ``grammar`` (an orchestrator turn of the multi-round mode,
    :func:`masorch.plan.grammar.tool_turn_grammar`) decodes under that grammar only on llama.cpp's
    server, which refuses a grammar beside tools on its chat endpoint: the server renders the
    conversation and the tools with the model's own chat template (``/apply-template``), the
    prompt is completed under the grammar (``/v1/completions``), and the ``<tool_call>`` blocks of
    the text become the completion's tool calls, as the chat endpoint would return them. A model
    whose template does not write Hermes ``<tool_call>`` blocks, and every other server, decodes
    such a call freely with native tools (logged once). Such a call's attempt is two requests (the
    rendering and the completion), counted as one in :attr:`Completion.attempts`.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str = "openai",
        model_id: str | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        pricing: Pricing | None = None,
        extra_body: Mapping[str, Any] | None = None,
        schema_format: SchemaFormat = "json_schema",
        grammar_format: GrammarFormat | None = None,
        connection_shards: int = 8,
        fresh_connection: bool = False,
        n_usage: Literal["sum", "first"] = "sum",
        rng_seed: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not model:
            raise UsageError("empty model name", hint="give the served model's name, e.g. openai:gpt-4o-mini")
        env = os.environ if env is None else env
        self.model = model
        self.base_url = base_url or _first_env(env, BASE_URL_ENV)
        if self.base_url is not None:
            check_base_url(self.base_url)
        self._api_key = _api_key(
            api_key or _first_env(env, API_KEY_ENV), self.base_url, f"{provider}:{model}"
        )
        self._model_id = model_id or f"{provider}:{model}"
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.pricing = pricing
        self.extra_body = dict(extra_body or {})
        if schema_format not in ("json_schema", "json_object"):
            raise UsageError(
                f"unknown schema format {schema_format!r}", hint="use json_schema or json_object"
            )
        self.schema_format = schema_format
        if grammar_format is not None and grammar_format not in GRAMMAR_FORMATS:
            raise UsageError(
                f"unknown grammar format {grammar_format!r}",
                hint=f"use one of {', '.join(GRAMMAR_FORMATS)}, or none for a server without grammars",
            )
        self.grammar_format = grammar_format
        self._grammar_notice = False
        self._tool_grammar_notice = False
        #: whether the server's chat template asks for Hermes ``<tool_call>`` blocks (None: not seen yet)
        self._hermes_template: bool | None = None
        self._rng = random.Random(rng_seed)
        if connection_shards < 1:
            raise UsageError(f"connection_shards={connection_shards} < 1", hint="use 1 or more")
        self.connection_shards = connection_shards
        self.fresh_connection = fresh_connection
        self.n_usage = n_usage
        self._clients: list[Any] = []
        self._next_client = 0
        self._client_loop: asyncio.AbstractEventLoop | None = None

    @property
    def model_id(self) -> str:
        """The ``provider:model`` string; never contains the key."""
        return self._model_id

    @property
    def cache_id(self) -> str:
        """What a record/replay cache keys this backend's answers by: the model id, and the server's
        URL (without credentials) where one other than OpenAI's is set and the model id lacks it
        (a ``vllm:`` id names its server; ``openai:m`` answers from two servers must not mix)."""
        url = redact_url(self.base_url).rstrip("/") if self.base_url else ""
        if url in ("", "https://api.openai.com/v1") or url in self._model_id:
            return self._model_id
        return f"{self._model_id}@{url}"

    def __repr__(self) -> str:
        url = redact_url(self.base_url) if self.base_url else "default"
        return f"OpenAIBackend(model_id={self._model_id!r}, base_url={url!r})"

    def _redact(self, text: str) -> str:
        if self._api_key != "EMPTY" and len(self._api_key) >= 4:
            # also as a repr shows it (a quote or backslash in the key escaped)
            text = text.replace(self._api_key, "***").replace(repr(self._api_key)[1:-1], "***")
        return text

    def _client_for_loop(self) -> Any:
        # An httpx client is bound to the event loop it first ran on; a new loop needs new clients.
        # Calls go round-robin over a few clients: the HTTP connection pool scans all its
        # connections on every request, so one pool under 64 calls in flight costs far more CPU.
        loop = asyncio.get_running_loop()
        if not self._clients or self._client_loop is not loop:
            import openai

            self._clients = [
                openai.AsyncOpenAI(
                    api_key=self._api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s
                )
                for _ in range(self.connection_shards)
            ]
            self._client_loop = loop
        self._next_client = (self._next_client + 1) % len(self._clients)
        return self._clients[self._next_client]

    def _fresh_client(self) -> Any:
        import openai

        return openai.AsyncOpenAI(
            api_key=self._api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s
        )

    async def _send_once(self, body: dict[str, Any], path: str = "/chat/completions") -> Any:
        if not self.fresh_connection:
            return await self._send(self._client_for_loop(), body, path)
        client = self._fresh_client()
        try:
            return await self._send(client, body, path)
        finally:  # closing the connection is how the server learns that a cancelled call is over
            await client.close()

    def _templated(self, config: GenerateConfig) -> bool:
        """Whether this call goes the template-and-grammar way (see the class docs)."""
        if not (config.tools and config.grammar is not None):
            return False
        if self.grammar_format == "llama.cpp" and self._hermes_template is not False:
            return True
        self._tool_notice("the server takes no grammar beside tools")
        return False

    def _tool_notice(self, why: str) -> None:
        if not self._tool_grammar_notice:
            self._tool_grammar_notice = True
            log.info("%s: %s; tool calls decode freely", self._model_id, why)

    async def _send_templated(self, body: dict[str, Any]) -> Any | None:
        """The chat ``body`` rendered by the server's chat template and completed under its
        grammar: the text-completion reply, or None when the template writes no Hermes tool calls."""
        base = (self.base_url or "").rstrip("/")
        root = base.removesuffix("/v1")
        try:
            rendered = await self._send_once(
                {"messages": body["messages"], "tools": body["tools"]}, f"{root}/apply-template"
            )
        except _AttemptFailed as failed:  # not llama.cpp's server after all (or a proxy that refuses)
            if failed.error.code not in ("backend_not_found", "backend_bad_request"):
                raise
            self._hermes_template = False
            self._tool_notice(f"the server renders no chat template (/apply-template: {failed.error.code})")
            return None
        prompt = rendered.get("prompt") if isinstance(rendered, dict) else None
        if not isinstance(prompt, str):
            raise BackendError(
                "the server's /apply-template reply holds no prompt",
                hint="a llama.cpp server with --jinja renders chat templates; check the server",
                code="backend_bad_reply",
                retryable=False,
            )
        if HERMES_TAG not in prompt:
            self._hermes_template = False
            self._tool_notice("the model's chat template asks for no <tool_call> blocks")
            return None
        completion = {k: v for k, v in body.items() if k not in ("messages", "tools")}
        try:
            reply = await self._send_once({**completion, "prompt": prompt}, f"{base}/completions")
        except _AttemptFailed as failed:
            if failed.error.code != "backend_not_found":
                raise
            self._hermes_template = False
            self._tool_notice("the server completes no prompt (no /v1/completions)")
            return None
        self._hermes_template = True
        return reply

    def _request(self, messages: Sequence[Message], config: GenerateConfig) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages_payload(messages),
            "temperature": config.temperature,
            "top_p": config.top_p,
            "max_tokens": config.max_tokens,
        }
        if config.stop:
            body["stop"] = list(config.stop)
        for name in ("top_k", "min_p"):  # not OpenAI's API: sent only when asked (llama.cpp, vLLM, SGLang)
            if getattr(config, name) is not None:
                body[name] = getattr(config, name)
        if config.seed is not None:
            body["seed"] = config.seed + config.sample_index
        if config.json_schema is not None and self.schema_format == "json_object":
            body["response_format"] = {"type": "json_object", "schema": dict(config.json_schema)}
        elif config.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": dict(config.json_schema)},
            }
        if config.tools:
            body["tools"] = tools_payload(config.tools)
        if config.grammar is not None and (not config.tools or self._templated(config)):
            self._add_grammar(body, config.grammar)
        return body

    def _add_grammar(self, body: dict[str, Any], grammar: str) -> None:
        if self.grammar_format == "llama.cpp":
            body["grammar"] = grammar
        elif self.grammar_format == "vllm":
            body["structured_outputs"] = {"grammar": grammar}
        elif self.grammar_format == "vllm-guided":
            body["guided_grammar"] = grammar
        elif not self._grammar_notice:
            self._grammar_notice = True
            log.info(
                "%s: the server takes no grammar (grammar_format is not set); plans decode freely",
                self._model_id,
            )

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """One chat completion, retrying transient failures; raises :class:`BackendError` when it fails."""
        return (await self.complete_n(messages, config, 1))[0]

    async def complete_n(
        self, messages: Sequence[Message], config: GenerateConfig, n: int
    ) -> list[Completion]:
        """``n`` completions of one prompt in one request (the ``n`` parameter): samples
        ``config.sample_index`` to ``sample_index + n - 1``, the prompt processed once.

        The servers that take ``n`` (OpenAI, vLLM, llama.cpp's) give sample ``j`` the seed
        ``seed + j``, so with a seed each sample matches the one a single call would ask for. The
        reply's usage is split: the first completion carries the prompt tokens (processed once),
        the completion tokens are shared out evenly (the reply gives only their sum).
        """
        if not messages:
            empty = BackendError(f"{self._model_id}: no messages to send", hint="give at least one message")
            empty.attempts = 0
            raise empty
        if n < 1:
            raise UsageError(f"complete_n needs n >= 1, got {n}", hint="ask for one completion or more")
        templated = self._templated(config)
        if templated and n > 1:  # a text completion of a rendered prompt: one request per sample
            samples = []
            for j in range(n):
                one = dataclasses.replace(config, sample_index=config.sample_index + j)
                samples += await self.complete_n(messages, one, 1)
            return samples
        body = self._request(messages, config)
        if n > 1:
            body["n"] = n
        start = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                data = await self._send_templated(body) if templated else None
                if templated and data is None:  # the model's template has no Hermes tool calls
                    templated, body = False, self._request(messages, config)
                if templated:
                    completions = [self._parse_text(data, messages)]
                else:
                    completions = self._parse_n(await self._send_once(body), messages, config, n)
            except (BackendError, _AttemptFailed) as caught:
                failure = caught if isinstance(caught, _AttemptFailed) else _AttemptFailed(caught)
            except asyncio.CancelledError as cancelled:
                # A node timeout or the deadline mid-call: the ledger still counts the requests sent.
                cancelled.attempts = attempt  # type: ignore[attr-defined]
                raise
            else:
                latency = time.perf_counter() - start
                return [
                    dataclasses.replace(c, model=self._model_id, latency_s=latency, attempts=attempt)
                    for c in completions
                ]
            # Outside the except block: the error raised below carries no chained client exception,
            # whose text may hold what a server echoed back (a key, a prompt).
            exc = failure.error
            if not exc.retryable or attempt >= self.retry.max_attempts:
                raise self._gave_up(exc, attempt)
            delay = self.retry.delay(attempt, self._rng, failure.retry_after_s)
            log.info(
                "%s: attempt %d failed (%s); retrying in %.2fs", self._model_id, attempt, exc.code, delay
            )
            try:
                _raise_if_cancelling()
                await asyncio.sleep(delay)
            except asyncio.CancelledError as cancelled:
                cancelled.attempts = attempt  # type: ignore[attr-defined]
                raise

    def _gave_up(self, exc: BackendError, attempt: int) -> BackendError:
        """The error of a call that is not retried again: the last failure, naming the model and
        how many attempts were made."""
        tries = "attempt" if attempt == 1 else "attempts"
        final = BackendError(
            f"{self._model_id}: {exc.message} (after {attempt} {tries})",
            hint=exc.hint,
            code=exc.code,
            retryable=exc.retryable,
        )
        final.attempts = attempt
        return final

    async def _send(self, client: Any, body: dict[str, Any], path: str) -> Any:
        """One request to ``path`` (relative to the base URL, or absolute); the decoded JSON body,
        or a BackendError saying whether a retry may help."""
        import openai

        try:
            # The client's generic `post` (its documented way to send a raw body) skips the typed
            # parameter transform and the response model: about a fifth less CPU per call, and the
            # reply is checked by parse_chat_choice instead.
            # A backstop: the client's own timeout is per read. asyncio.timeout, not wait_for: on
            # Python 3.11 wait_for loses a cancel that arrives as the request ends (the task then
            # retried on; a test saw it send thousands of requests after its cancel).
            async with asyncio.timeout(self.timeout_s + 1.0):
                data = await client.post(path, body={**body, **self.extra_body}, cast_to=object)
            # The client decodes only a JSON content type; some servers and proxies send JSON as
            # text/plain or with no content type.
            return self._json_text(data) if isinstance(data, str) else data
        except json.JSONDecodeError as exc:
            raise BackendError(
                f"the server sent malformed JSON ({exc.msg} at byte {exc.pos})",
                hint="a truncated reply; if it persists, check the server or a proxy in between",
                code="backend_malformed_reply",
                retryable=True,
            ) from None
        except (ValueError, RecursionError) as exc:
            # A body JSON cannot hold as Python: not UTF-8, nested past the recursion limit, an
            # integer of thousands of digits. A server's bug, not a transient failure.
            why = redact(self._redact(str(exc)))[:120]
            raise BackendError(
                f"the server's reply cannot be decoded ({type(exc).__name__}: {why})",
                hint="check the server or a proxy in between",
                code="backend_malformed_reply",
                retryable=False,
            ) from None
        except TimeoutError:
            raise BackendError(
                f"no reply within {self.timeout_s:g}s",
                hint="raise the timeout or check the server load",
                code="backend_timeout",
                retryable=True,
            ) from None
        except openai.APITimeoutError:
            raise BackendError(
                f"request timed out after {self.timeout_s:g}s",
                hint="raise the timeout or check the server load",
                code="backend_timeout",
                retryable=True,
            ) from None
        except openai.APIConnectionError as exc:
            cause = redact(self._redact(repr(exc.__cause__ or exc)))[:200]
            where = redact_url(self.base_url) if self.base_url else "the default OpenAI endpoint"
            raise BackendError(
                f"connection to {where} failed: {cause}",
                hint="check that the server is up and the base URL",
                code="backend_connection",
                retryable=True,
            ) from None
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None

    def _json_text(self, text: str) -> Any:
        """A reply the client left as text: its JSON, or a BackendError quoting its start."""
        if len(text) > MAX_REPLY_CHARS:
            raise BackendError(
                f"the server's reply is {len(text):,} characters of text, not JSON",
                hint="check the base URL: it should name the server's OpenAI-compatible API (e.g. .../v1)",
                code="backend_bad_reply",
                retryable=False,
            )
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            start = redact(self._redact(text.strip()[:80]))
            raise BackendError(
                f"the server's reply is not JSON: {start!r}",
                hint="check the base URL: it should name the server's OpenAI-compatible API (e.g. .../v1)",
                code="backend_bad_reply",
                retryable=False,
            ) from None

    def _status_error(self, exc: Any) -> _AttemptFailed:
        status = int(exc.status_code)
        detail = redact(self._redact(str(getattr(exc, "message", "") or exc)))[:300]
        retry_after: float | None = None
        header = exc.response.headers.get("retry-after") if exc.response is not None else None
        if header:
            retry_after = retry_after_seconds(header)
        if status >= 400 and _CONTEXT_EXCEEDED.search(detail):
            err = BackendError(
                f"the request does not fit the model's context (HTTP {status}): {detail}",
                hint="lower the completion cap (max_tokens) or shorten the prompt, or serve the model "
                "with a longer context",
                code="backend_context",
                retryable=False,
            )
        elif status == 429:
            err = BackendError(
                f"rate limited (HTTP 429): {detail}",
                hint="lower the concurrency or raise the rate limit",
                code="backend_rate_limited",
                retryable=True,
            )
        elif status >= 500 or status in _RETRYABLE_STATUS:
            err = BackendError(
                f"server error (HTTP {status}): {detail}",
                hint="the server failed; retry later or check its logs",
                code="backend_server_error",
                retryable=True,
            )
        elif status in (401, 403):
            err = BackendError(
                f"not authorised (HTTP {status}): {detail}",
                hint=(
                    "set MASORCH_VLLM_API_KEY to the server's key"
                    if self._model_id.startswith("vllm:")
                    else "set MASORCH_OPENAI_API_KEY (or OPENAI_API_KEY) to a valid key"
                ),
                code="backend_auth",
                retryable=False,
            )
        elif status == 404:
            err = BackendError(
                f"not found (HTTP 404): {detail}",
                hint="check the model name and that the base URL ends in /v1",
                code="backend_not_found",
                retryable=False,
            )
        else:
            err = BackendError(
                f"request rejected (HTTP {status}): {detail}",
                hint="the server refused the request; check the model's limits and the sampling settings",
                code="backend_bad_request",
                retryable=False,
            )
        return _AttemptFailed(err, retry_after)

    def _parse_n(
        self, data: Any, messages: Sequence[Message], config: GenerateConfig, n: int
    ) -> list[Completion]:
        choices = data.get("choices") if isinstance(data, dict) else None
        if n > 1 and (not isinstance(choices, list) or len(choices) != n):
            got = len(choices) if isinstance(choices, list) else 0
            raise BackendError(
                f"asked for {n} completions in one request, the server sent {got}",
                hint="the server may not take the n parameter; use one request per sample",
                code="backend_bad_reply",
                retryable=False,
            )
        if n == 1 or not isinstance(choices, list):
            return [self._parse(data, messages, config)]
        # One choice at a time through the one reader; the usage is the whole reply's, split below.
        usage = data.get("usage")
        parsed = [self._parse({"choices": [c], "usage": usage}, messages, config) for c in choices]
        total = parsed[0].usage
        share, extra = divmod(total.completion_tokens, n)
        out = []
        for j, completion in enumerate(parsed):
            if self.n_usage == "first":  # the reply counts the first choice only: estimate the rest
                tokens, estimated = total.completion_tokens, total.estimated
                if j > 0:
                    tokens, estimated = estimate_tokens(completion.text), True
            else:
                tokens, estimated = share + (1 if j < extra else 0), total.estimated
            usage = dataclasses.replace(
                total,
                prompt_tokens=total.prompt_tokens if j == 0 else 0,
                cached_prompt_tokens=total.cached_prompt_tokens if j == 0 else 0,
                completion_tokens=tokens,
                estimated=estimated,
            )
            usage = dataclasses.replace(usage, cost=self.pricing.cost_of(usage)) if self.pricing else usage
            out.append(dataclasses.replace(completion, usage=usage))
        return out

    def _parse(self, data: Any, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        try:
            text, tool_calls, finish = parse_chat_choice(data)
        except ValueError as exc:
            raise BackendError(
                f"the server's reply is not a chat completion: {self._redact(str(exc))[:300]}",
                hint="check that the base URL points at an OpenAI-compatible /v1 endpoint",
                code="backend_bad_reply",
                retryable=False,
            ) from None
        self._check_size(text, tool_calls)
        usage = self._usage(data.get("usage"), messages, text, tool_calls)
        return Completion(text=text, usage=usage, finish=finish, tool_calls=tool_calls, model=self._model_id)

    def _check_size(self, text: str, tool_calls: tuple[ToolCall, ...]) -> None:
        """A BackendError for a reply no token cap of this project could give (a server that ignores
        ``max_tokens``): whole, it would be a run-log line too long to read back on resume."""
        size = len(text) + sum(len(c.name) + len(c.arguments) for c in tool_calls)
        if size > MAX_REPLY_CHARS:
            raise BackendError(
                f"the server's reply holds {size:,} characters, more than {MAX_REPLY_CHARS:,}",
                hint="check that the server honours max_tokens (a completion cap)",
                code="backend_bad_reply",
                retryable=False,
            )

    def _parse_text(self, data: Any, messages: Sequence[Message]) -> Completion:
        """A text completion of a rendered chat prompt, its ``<tool_call>`` blocks read as calls."""
        try:
            text, finish = parse_text_choice(data)
        except ValueError as exc:
            raise BackendError(
                f"the server's reply is not a text completion: {self._redact(str(exc))[:300]}",
                hint="check that the server is llama.cpp's and serves /v1/completions",
                code="backend_bad_reply",
                retryable=False,
            ) from None
        tool_calls: tuple[ToolCall, ...] = ()
        read = hermes_calls(text)
        if read is not None:  # else the whole text stays, for the caller to read or explain
            text, tool_calls = read
            finish = "tool_calls" if finish == "stop" else finish
        self._check_size(text, tool_calls)
        usage = self._usage(data.get("usage"), messages, text, tool_calls)
        return Completion(text=text, usage=usage, finish=finish, tool_calls=tool_calls, model=self._model_id)

    def _usage(
        self, raw: Any, messages: Sequence[Message], text: str, tool_calls: tuple[ToolCall, ...]
    ) -> Usage:
        prompt = _count(raw.get("prompt_tokens")) if isinstance(raw, dict) else None
        completion = _count(raw.get("completion_tokens")) if isinstance(raw, dict) else None
        estimated = False
        if prompt is None:
            prompt = sum(
                estimate_tokens(m.content + "".join(c.name + c.arguments for c in m.tool_calls)) + 4
                for m in messages
            )
            estimated = True
        if completion is None:
            completion = estimate_tokens(text) + sum(
                estimate_tokens(t.name + t.arguments) for t in tool_calls
            )
            estimated = True
        details = raw.get("prompt_tokens_details") if isinstance(raw, dict) else None
        cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
        usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            calls=1,
            estimated=estimated,
            cached_prompt_tokens=min(cached, prompt) if cached else 0,
        )
        return dataclasses.replace(usage, cost=self.pricing.cost_of(usage)) if self.pricing else usage

    async def aclose(self) -> None:
        """Close the HTTP clients (ones bound to another, finished event loop are just dropped)."""
        clients, loop = self._clients, self._client_loop
        self._clients, self._client_loop = [], None
        if loop is asyncio.get_running_loop():
            for client in clients:
                await client.close()
