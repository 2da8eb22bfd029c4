"""A content-addressed record/replay cache of completions (SQLite), and a Backend wrapper that uses it.

The key is the sha256 of the model id (a backend's ``cache_id`` where it has one), the messages and
:meth:`GenerateConfig.cache_key_fields` (which include ``sample_index``, so the n samples of one
prompt stay distinct). Replay mode answers only from the cache, which makes runs and rewards
reproducible and lets tests run without a model; it opens the file read-only. A damaged, locked or
unwritable cache file is a :class:`~masorch.errors.UsageError` coded ``cache_error`` that names the
file and the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from masorch.backends.base import Backend, Completion, GenerateConfig, Message, ToolCall, Usage
from masorch.errors import MALFORMED_VALUE, BackendError, UsageError

log = logging.getLogger(__name__)

CacheMode = Literal["read_write", "replay", "record", "off"]
CACHE_MODES: tuple[str, ...] = get_args(CacheMode)
_SCHEMA_VERSION = 1
#: How long a call waits for another process's write lock on the cache file.
_BUSY_TIMEOUT_S = 30.0
_RECORD_FIRST = "record it first (cache mode read_write or record), or give the path of a recorded cache"


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _message_key(message: Message) -> dict[str, Any]:
    # Tool calls and the answered call's id are in the key only when set, so that entries recorded
    # before messages carried them still match.
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def request_json(model_id: str, messages: Sequence[Message], config: GenerateConfig) -> str:
    """The canonical JSON text of a request: what the cache key hashes."""
    payload = {
        "model": model_id,
        "messages": [_message_key(m) for m in messages],
        "config": _plain(config.cache_key_fields()),
    }
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def cache_key(model_id: str, messages: Sequence[Message], config: GenerateConfig) -> str:
    """The sha256 hex digest that identifies a request.

    >>> a = cache_key("m", [Message("user", "hi")], GenerateConfig())
    >>> a == cache_key("m", [Message("user", "hi")], GenerateConfig(sample_index=1))
    False
    """
    return hashlib.sha256(request_json(model_id, messages, config).encode()).hexdigest()


def _dump(completion: Completion) -> str:
    data = dataclasses.asdict(completion)
    data.pop("cached")
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def _load(text: str) -> Completion:
    data = json.loads(text)
    return Completion(
        text=data["text"],
        usage=Usage(**data["usage"]),
        finish=data["finish"],
        tool_calls=tuple(ToolCall(**t) for t in data["tool_calls"]),
        model=data["model"],
        latency_s=data["latency_s"],
        attempts=data.get("attempts", 1),
    )


#: The columns of a cache's ``completions`` table.
_COLUMNS = ("key", "model_id", "request", "completion", "created_at")


def _cache_error(path: str, exc: Exception, action: str) -> UsageError:
    """The UsageError for a failure of the cache file at ``path``: what failed, and the fix."""
    text = str(exc)
    if "locked" in text:
        hint = (
            f"another process (a masorch run, an sqlite3 shell, a backup) held the file for over "
            f"{_BUSY_TIMEOUT_S:g} s: let it finish, or give this run another cache path"
        )
    elif "readonly" in text or isinstance(exc, PermissionError):
        hint = "make the file and its folder writable, replay it (replay only reads), or use another path"
    else:
        hint = "delete the file (its recorded answers are lost) or give another cache path"
    return UsageError(f"cannot {action} the response cache {path}: {text}", hint=hint, code="cache_error")


def _open_read_only(path: str) -> sqlite3.Connection:
    """A connection that reads the cache file at ``path`` and writes nothing, not even beside it."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"there is no response cache at {path} to replay", hint=_RECORD_FIRST)
    # SQLite opens a WAL file read-only by creating -wal and -shm files beside it, which it then
    # cannot remove. Without a -wal file no writer has answers pending, and `immutable` reads the
    # file as it is; with one (a recording running, or stopped uncleanly) its answers are needed.
    flags = "mode=ro" if Path(f"{path}-wal").exists() else "mode=ro&immutable=1"
    uri = f"{file.resolve().as_uri()}?{flags}"
    return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=_BUSY_TIMEOUT_S)


class ResponseCache:
    """Completions stored in one SQLite file (WAL mode), safe to share between tasks and threads.

    ``path`` may be ``":memory:"`` for a throwaway cache. ``read_only`` (replay) opens an existing
    cache without writing anything: no journal switch, no schema, no ``-wal``/``-shm`` files beside
    it, so a write-protected file or one on read-only media replays; a missing file is an error.
    Every SQLite failure (a damaged file, a lock held past the busy timeout, a write refused) is a
    :class:`UsageError` coded ``cache_error``.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        self._lock = threading.Lock()
        with self._guard("open"):
            self._conn = self._connect()
            with self._lock, self._conn:
                self._check_schema()
                if not read_only:
                    self._conn.execute(
                        "CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, model_id TEXT "
                        "NOT NULL, request TEXT NOT NULL, completion TEXT NOT NULL, created_at REAL NOT NULL)"
                    )
                    self._conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn an SQLite or file-system failure into the UsageError that names this file."""
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise _cache_error(self.path, exc, action) from None

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            return _open_read_only(self.path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=_BUSY_TIMEOUT_S)
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode=WAL")
        return conn

    def _check_schema(self) -> None:
        """A UsageError for a cache of another schema version, an SQLite file that is not a masorch
        cache (other tables, or a ``completions`` table of other columns: it must not be written into,
        nor fail every call), or, read-only, a file with no completions table."""
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, _SCHEMA_VERSION):
            raise UsageError(
                f"the cache {self.path} has schema version {version}, this masorch reads {_SCHEMA_VERSION}",
                hint="use another cache file or delete this one",
            )
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = [r[1] for r in self._conn.execute("PRAGMA table_info(completions)")]
        if tables - {"completions"} or (columns and columns != list(_COLUMNS)):
            raise UsageError(
                f"{self.path} is an SQLite file of something else, not a masorch response cache",
                hint="give the cache a new file name (or the file of an earlier masorch run)",
            )
        if self.read_only and not columns:
            raise UsageError(f"{self.path} holds no recorded completions to replay", hint=_RECORD_FIRST)

    def get(self, key: str) -> Completion | None:
        """The stored completion for ``key``, or None."""
        with self._guard("read"), self._lock:
            row = self._conn.execute("SELECT completion FROM completions WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return _load(row[0])
        except MALFORMED_VALUE as exc:  # a row written by something else, or damaged on disk
            raise _cache_error(self.path, exc, f"read entry {key[:12]} of") from None

    def put(self, key: str, model_id: str, request: str, completion: Completion) -> None:
        """Store (or replace) the completion for ``key``."""
        with self._guard("write to"), self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?)",
                (key, model_id, request, _dump(completion), time.time()),
            )

    def __len__(self) -> int:
        with self._guard("read"), self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()


def _cache_id(backend: Backend) -> str:
    """What a cache key names the model by: the backend's ``cache_id`` where it has one, else its model id."""
    cache_id = getattr(backend, "cache_id", None)
    return cache_id if isinstance(cache_id, str) else backend.model_id


class CachedBackend:
    """A Backend that answers from a :class:`ResponseCache` where it can.

    Modes: ``read_write`` (hits from the cache, misses go to ``inner`` and are stored), ``replay``
    (hits only; a miss is a non-retryable :class:`BackendError` coded ``cache_miss``), ``record``
    (always ask ``inner``, store the answer), ``off`` (pass through). A hit is the recorded completion
    with ``cached=True`` and ``attempts=0`` (no request was sent) and the lookup time as latency; its
    usage is the recorded one, so ledgers should count a cached call as free. Identical requests in
    flight at once share one call to ``inner``, and its answer or its error reaches each of them.
    The key names the model by ``inner.cache_id`` where ``inner`` has one (an OpenAI-compatible
    backend's adds a non-default server URL), else by ``inner.model_id``. The cache file is read
    and written in a worker thread, so that a lock held by another process does not stall the event
    loop.
    """

    def __init__(self, inner: Backend, cache: ResponseCache, mode: CacheMode = "read_write") -> None:
        if mode not in CACHE_MODES:
            raise UsageError(f"unknown cache mode {mode!r}", hint=f"use one of {list(CACHE_MODES)}")
        self.inner = inner
        self.cache = cache
        self.mode = mode
        self._inflight: dict[str, asyncio.Future[Completion]] = {}

    @property
    def model_id(self) -> str:
        """The wrapped backend's model id."""
        return self.inner.model_id

    def __repr__(self) -> str:
        return f"CachedBackend({self.inner!r}, mode={self.mode!r})"

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """Answer from the cache or from the wrapped backend, as the mode says."""
        if self.mode == "off":
            return await self.inner.complete(messages, config)
        start = time.perf_counter()
        request = request_json(_cache_id(self.inner), messages, config)
        key = hashlib.sha256(request.encode()).hexdigest()
        if self.mode != "record":
            hit = await asyncio.to_thread(self.cache.get, key)
            if hit is not None:
                return dataclasses.replace(
                    hit, cached=True, attempts=0, latency_s=time.perf_counter() - start
                )
            if self.mode == "replay":
                miss = BackendError(
                    f"replay cache has no completion for {self.model_id} (request {key[:12]})",
                    hint="record the run first (cache mode read_write or record); model, messages and "
                    "sampling settings must match the recording exactly",
                    code="cache_miss",
                    retryable=False,
                )
                miss.attempts = 0  # no request was sent
                raise miss
        pending = self._inflight.get(key)
        if pending is not None:
            try:
                shared = await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this task was cancelled, not the shared call
            else:
                return dataclasses.replace(
                    shared, cached=True, attempts=0, latency_s=time.perf_counter() - start
                )
        return await self._call(key, request, messages, config)

    async def _call(
        self, key: str, request: str, messages: Sequence[Message], config: GenerateConfig
    ) -> Completion:
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:  # the future is always done at the end: waiters get the answer or the error
            completion = await self.inner.complete(messages, config)
            await asyncio.to_thread(self.cache.put, key, self.model_id, request, completion)
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # mark it retrieved: waiters, if any, re-raise it themselves
            raise
        except BaseException:  # cancelled or interrupted: waiters make their own call
            future.cancel()
            raise
        else:
            future.set_result(completion)
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]
        return completion

    async def aclose(self) -> None:
        """Close the wrapped backend (the cache stays open: it may be shared)."""
        await self.inner.aclose()


@dataclass(frozen=True)
class CachingFactory:
    """A backend factory whose backends record and replay through the cache at ``path``.

    ``mode`` as :class:`CachedBackend`'s: ``replay`` answers from the cache only (a miss is a
    ``cache_miss`` error) and opens it read-only, ``read_write`` fills it as it goes. Picklable when
    ``factory`` is.
    """

    factory: Callable[[str], Backend]
    path: Path
    mode: CacheMode = "read_write"

    def __call__(self, spec: str) -> Backend:
        cache = ResponseCache(self.path, read_only=self.mode == "replay")
        return CachedBackend(self.factory(spec), cache, self.mode)
