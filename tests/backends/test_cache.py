"""The record/replay cache: hits, misses, replay, sample distinctness, persistence, concurrency,
failures of the cache file, read-only replay and the server URL in the key."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from pathlib import Path

import pytest

from masorch.backends.base import Backend, Completion, GenerateConfig, Message, ToolCall, ToolSpec
from masorch.backends.cache import CachedBackend, CachingFactory, ResponseCache, cache_key
from masorch.backends.loopback import LoopbackServer
from masorch.backends.openai_compat import OpenAIBackend
from masorch.backends.registry import BackendSettings, make_backend
from masorch.backends.scripted import ScriptedBackend
from masorch.errors import BackendError, UsageError

pytestmark = pytest.mark.timeout(30)
ASK = [Message("user", "what is 2+2")]


def counter_backend(delay_s: float = 0.0) -> ScriptedBackend:
    def reply(messages, config):  # type: ignore[no-untyped-def]
        return f"answer {len(backend.calls)} t={config.temperature} s={config.sample_index}"

    backend = ScriptedBackend(reply, name="counter", delay_s=delay_s)
    return backend


async def test_read_write_miss_then_hit(tmp_path: Path) -> None:
    inner = counter_backend()
    cached = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    assert isinstance(cached, Backend) and cached.model_id == "scripted:counter"
    first = await cached.complete(ASK, GenerateConfig())
    second = await cached.complete(ASK, GenerateConfig())
    assert not first.cached and first.attempts == 1
    assert second.cached and second.attempts == 0
    assert (second.text, second.usage, second.finish) == (first.text, first.usage, first.finish)
    assert len(inner.calls) == 1


async def test_samples_and_settings_stay_distinct(tmp_path: Path) -> None:
    inner = counter_backend()
    cached = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    configs = [GenerateConfig(temperature=0.7, sample_index=i) for i in range(3)]
    configs += [GenerateConfig(temperature=0.2), GenerateConfig(json_schema={"type": "object"})]
    configs += [GenerateConfig(tools=(ToolSpec("f", "d", {"type": "object"}),))]
    texts = [(await cached.complete(ASK, c)).text for c in configs]
    assert len(set(texts)) == len(configs) == len(inner.calls)
    again = [(await cached.complete(ASK, c)).text for c in configs]
    assert again == texts and len(inner.calls) == len(configs)
    assert cache_key("a", ASK, GenerateConfig()) != cache_key("b", ASK, GenerateConfig())
    assert cache_key("a", ASK, GenerateConfig()) != cache_key(
        "a", [Message("system", "what is 2+2")], GenerateConfig()
    )


async def test_replay_answers_from_a_recording_and_refuses_misses(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    recorder = CachedBackend(counter_backend(), ResponseCache(path), mode="record")
    recorded = await recorder.complete(ASK, GenerateConfig(sample_index=1))
    recorder.cache.close()

    replay_inner = counter_backend()
    replay = CachedBackend(replay_inner, ResponseCache(path), mode="replay")
    hit = await replay.complete(ASK, GenerateConfig(sample_index=1))
    assert hit.cached and hit.text == recorded.text
    with pytest.raises(BackendError) as info:
        await replay.complete(ASK, GenerateConfig(sample_index=2))
    assert info.value.code == "cache_miss" and not info.value.retryable and info.value.hint
    assert replay_inner.calls == []


async def test_record_mode_always_calls_and_overwrites(tmp_path: Path) -> None:
    inner = counter_backend()
    cached = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"), mode="record")
    a = await cached.complete(ASK, GenerateConfig())
    b = await cached.complete(ASK, GenerateConfig())
    assert a.text != b.text and len(inner.calls) == 2 and len(cached.cache) == 1
    reader = CachedBackend(inner, cached.cache, mode="replay")
    assert (await reader.complete(ASK, GenerateConfig())).text == b.text


async def test_off_mode_passes_through() -> None:
    inner = counter_backend()
    cached = CachedBackend(inner, ResponseCache(":memory:"), mode="off")
    await cached.complete(ASK, GenerateConfig())
    await cached.complete(ASK, GenerateConfig())
    assert len(inner.calls) == 2 and len(cached.cache) == 0
    with pytest.raises(UsageError):
        CachedBackend(inner, cached.cache, mode="sometimes")  # type: ignore[arg-type]


async def test_errors_are_not_cached() -> None:
    inner = ScriptedBackend([BackendError("boom", retryable=True), "fine"])
    cached = CachedBackend(inner, ResponseCache(":memory:"))
    with pytest.raises(BackendError):
        await cached.complete(ASK, GenerateConfig())
    assert (await cached.complete(ASK, GenerateConfig())).text == "fine"
    assert len(cached.cache) == 1


async def test_concurrent_identical_requests_share_one_call(tmp_path: Path) -> None:
    inner = counter_backend(delay_s=0.05)
    cached = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    same = await asyncio.gather(*[cached.complete(ASK, GenerateConfig()) for _ in range(10)])
    different = await asyncio.gather(
        *[cached.complete(ASK, GenerateConfig(temperature=1.0, sample_index=i)) for i in range(10)]
    )
    assert len({c.text for c in same}) == 1 and sum(not c.cached for c in same) == 1
    assert len({c.text for c in different}) == 10
    assert len(inner.calls) == 11 and len(cached.cache) == 11


async def test_shared_failure_reaches_every_waiter() -> None:
    inner = ScriptedBackend([BackendError("down", retryable=True)], delay_s=0.05)
    cached = CachedBackend(inner, ResponseCache(":memory:"))
    results = await asyncio.gather(
        *[cached.complete(ASK, GenerateConfig()) for _ in range(3)], return_exceptions=True
    )
    assert all(isinstance(r, BackendError) for r in results) and len(inner.calls) == 1


def test_threads_share_one_cache(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            backend = CachedBackend(counter_backend(), cache)
            for i in range(20):
                asyncio.run(backend.complete([Message("user", f"{t}-{i % 5}")], GenerateConfig()))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(cache) == 20


def test_a_file_that_is_not_a_cache_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UsageError, match="cannot open the response cache"):
        ResponseCache(bad)
    newer = tmp_path / "newer.sqlite"
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(UsageError, match="schema version 99"):
        ResponseCache(newer)


def test_tool_calls_and_tool_call_ids_are_in_the_key() -> None:
    plain = cache_key("m", [Message("assistant", "")], GenerateConfig())
    one = [Message("assistant", "", tool_calls=(ToolCall("cot", '{"task": "a"}', id="c1"),))]
    other = [Message("assistant", "", tool_calls=(ToolCall("cot", '{"task": "b"}', id="c1"),))]
    assert len({plain, cache_key("m", one, GenerateConfig()), cache_key("m", other, GenerateConfig())}) == 3
    answered = cache_key("m", [Message("tool", "4", tool_call_id="c1")], GenerateConfig())
    assert answered != cache_key("m", [Message("tool", "4", tool_call_id="c2")], GenerateConfig())
    # A message without tool parts keys as it did before messages could carry them.
    assert plain == cache_key("m", [Message("assistant", "")], GenerateConfig())


def test_an_sqlite_file_of_something_else_is_refused_untouched(tmp_path: Path) -> None:
    for name, schema in (
        ("other.sqlite", "CREATE TABLE notes (id INTEGER, text TEXT)"),
        ("clash.sqlite", "CREATE TABLE completions (id INTEGER, reply TEXT)"),
    ):
        path = tmp_path / name
        with sqlite3.connect(path) as conn:
            conn.execute(schema)
        with pytest.raises(UsageError, match="not a masorch response cache"):
            ResponseCache(path)
        with sqlite3.connect(path) as conn:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
        assert tables == [schema.split()[2]]
    ResponseCache(tmp_path / "fresh.sqlite")  # a new file, and one of ours, open as before
    ResponseCache(tmp_path / "fresh.sqlite")


def _sqlite(path: Path, *statements: str) -> None:
    """Run ``statements`` on ``path`` as another program would (an sqlite3 shell)."""
    conn = sqlite3.connect(path)
    with conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()


async def test_a_failed_store_reaches_every_caller_of_a_shared_call(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cached = CachedBackend(counter_backend(delay_s=0.2), ResponseCache(path))
    # Another program makes every write fail (as a full disk or a lock past the timeout would).
    _sqlite(
        path, "CREATE TRIGGER refuse BEFORE INSERT ON completions BEGIN SELECT RAISE(ABORT, 'disk full'); END"
    )
    calls = asyncio.gather(
        *[cached.complete(ASK, GenerateConfig()) for _ in range(2)], return_exceptions=True
    )
    results = await asyncio.wait_for(calls, timeout=10)  # the second caller used to wait forever
    for result in results:
        assert isinstance(result, UsageError) and result.code == "cache_error"
        assert str(path) in result.message and "disk full" in result.message and result.hint
    assert len(cached.inner.calls) == 1  # type: ignore[attr-defined]


async def test_a_locked_cache_does_not_stall_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cached = CachedBackend(counter_backend(), ResponseCache(path))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(asyncio.TimeoutError):  # the deadline fires while the store waits
            await asyncio.wait_for(cached.complete(ASK, GenerateConfig()), timeout=0.5)
        assert asyncio.get_running_loop().time() - started < 5
    finally:
        holder.rollback()
        holder.close()


async def test_a_damaged_cache_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    recorder = CachedBackend(counter_backend(), cache)
    for i in range(40):
        await recorder.complete([Message("user", f"{i} " + "x" * 3000)], GenerateConfig())
    cache.close()
    data = path.read_bytes()  # the header page intact, the rest overwritten
    path.write_bytes(data[:4096] + b"\xff" * (len(data) - 4096))
    damaged = CachedBackend(counter_backend(), ResponseCache(path))
    with pytest.raises(UsageError, match="malformed") as info:
        await damaged.complete([Message("user", "3 " + "x" * 3000)], GenerateConfig())
    assert info.value.code == "cache_error" and str(path) in info.value.message
    assert "delete the file" in info.value.hint

    row = tmp_path / "row.sqlite"
    cached = CachedBackend(counter_backend(), ResponseCache(row))
    await cached.complete(ASK, GenerateConfig())
    _sqlite(row, """UPDATE completions SET completion = '{"text": 1}'""")
    with pytest.raises(UsageError, match="cannot read entry") as info:
        await cached.complete(ASK, GenerateConfig())
    assert info.value.code == "cache_error" and str(row) in info.value.message


async def test_replay_reads_the_cache_without_writing_to_it(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    recorded = await CachedBackend(counter_backend(), cache).complete(ASK, GenerateConfig())
    cache.close()
    path.chmod(0o444)  # a write-protected file (root may write it anyway: the checks below hold for all)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    replay = CachingFactory(lambda spec: counter_backend(), path, "replay")("scripted:counter")
    hit = await replay.complete(ASK, GenerateConfig())
    assert hit.cached and hit.text == recorded.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite"]  # no -wal, no -shm
    replay.cache.close()  # type: ignore[attr-defined]
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite"]


async def test_replay_sees_a_recording_still_open(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    recorder = CachedBackend(counter_backend(), ResponseCache(path))
    recorded = await recorder.complete(ASK, GenerateConfig())  # still in the -wal file
    replay = CachingFactory(lambda spec: counter_backend(), path, "replay")("scripted:counter")
    assert (await replay.complete(ASK, GenerateConfig())).text == recorded.text


def test_replay_of_a_missing_or_empty_cache_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    with pytest.raises(UsageError, match=r"no response cache at .*none\.sqlite to replay") as info:
        CachingFactory(lambda spec: counter_backend(), missing, "replay")("scripted:counter")
    assert "record" in info.value.hint and not missing.exists()
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(UsageError, match="holds no recorded completions"):
        CachingFactory(lambda spec: counter_backend(), empty, "replay")("scripted:counter")


async def test_openai_answers_from_two_servers_do_not_mix(tmp_path: Path) -> None:
    settings = BackendSettings(openai_api_key="sk-test-SECRET", cache_path=tmp_path / "c.sqlite")
    with LoopbackServer() as first, LoopbackServer() as second:
        for server in (first, second, first):
            at = dataclasses.replace(settings, openai_base_url=server.base_url)
            backend = make_backend("openai:echo-model", settings=at, env={})
            await backend.complete(ASK, GenerateConfig())
            await backend.aclose()
        assert (first.request_count, second.request_count) == (1, 1)


async def test_the_cache_id_adds_a_non_default_server_url_without_credentials() -> None:
    plain = OpenAIBackend("m", api_key="sk-x", env={})
    official = OpenAIBackend("m", api_key="sk-x", base_url="https://api.openai.com/v1/", env={})
    assert plain.cache_id == official.cache_id == "openai:m"
    cache = ResponseCache(":memory:")  # an entry recorded before the URL counted still answers
    cache.put(cache_key("openai:m", ASK, GenerateConfig()), "openai:m", "{}", Completion(text="old"))
    assert (await CachedBackend(official, cache, "replay").complete(ASK, GenerateConfig())).text == "old"
    proxy = OpenAIBackend("m", base_url="http://user:pw-SECRET@10.0.0.1:8000/v1?key=SECRET2", env={})
    assert proxy.cache_id == "openai:m@http://10.0.0.1:8000/v1" and proxy.model_id == "openai:m"
    vllm = make_backend("vllm:http://user:pw@127.0.0.1:8000/v1#m", env={})
    assert vllm.cache_id == vllm.model_id == "vllm:http://127.0.0.1:8000/v1#m"  # type: ignore[attr-defined]
