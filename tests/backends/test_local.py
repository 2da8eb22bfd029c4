"""LocalBackend: the managed llama.cpp server's life cycle against a stand-in binary (default tier),
and real generation, batching and cancellation with the built engine and smollm2-135m (marked `model`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

import masorch
from masorch.backends.base import Backend, GenerateConfig, Message
from masorch.backends.engine import ENGINE_ENV, EngineStore
from masorch.backends.local import LocalBackend, ServerSettings
from masorch.backends.models import ModelStore
from masorch.errors import BackendError, UsageError

pytestmark = pytest.mark.timeout(120)
ASK = [Message("user", "What is 2 + 3? Answer with one number.")]
FAKE = Path(__file__).with_name("fake_llama_server.py")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture()
def fake_binary(tmp_path: Path) -> Path:
    src = Path(masorch.__file__).resolve().parents[1]
    script = tmp_path / "llama-server"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{src}" exec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(0o755)
    return script


@pytest.fixture()
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


def _backend(binary: Path, model: Path, **settings: object) -> LocalBackend:
    return LocalBackend(
        model,
        name="tiny",
        settings=ServerSettings(**settings),  # type: ignore[arg-type]
        engine=EngineStore(env={ENGINE_ENV: str(binary)}),
    )


def test_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no GGUF model file"):
        LocalBackend(tmp_path / "x.gguf")
    with pytest.raises(UsageError, match="minimum of 256"):
        ServerSettings(n_ctx=64)
    with pytest.raises(UsageError, match="slots"):
        ServerSettings(slots=0)


def test_a_missing_engine_names_the_build_command(tmp_path: Path, model_file: Path) -> None:
    with pytest.raises(UsageError) as info:
        LocalBackend(model_file, engine=EngineStore(tmp_path / "engines", env={}))
    assert info.value.code == "engine_missing" and "masorch models engine" in info.value.hint
    with pytest.raises(UsageError, match="not an executable"):
        EngineStore(env={ENGINE_ENV: str(tmp_path / "nope")}).find()


async def test_serves_through_the_server_and_stops_it(
    fake_binary: Path, model_file: Path, tmp_path: Path
) -> None:
    args_file = tmp_path / "args.json"
    os.environ["FAKE_ARGS"] = str(args_file)
    try:
        backend = _backend(fake_binary, model_file, slots=4, n_ctx=2048, n_threads=2, seed=7)
        assert isinstance(backend, Backend) and backend.model_id == "local:tiny"
        replies = await asyncio.gather(*[backend.complete(ASK, GenerateConfig()) for _ in range(3)])
    finally:
        del os.environ["FAKE_ARGS"]
    assert {r.text for r in replies} == {f"model tiny.gguf: {ASK[0].content}"}
    assert all(r.model == "local:tiny" and r.attempts == 1 for r in replies)
    argv = json.loads(args_file.read_text())
    assert argv[argv.index("--parallel") + 1] == "4"
    assert argv[argv.index("--ctx-size") + 1] == str(4 * 2048)  # one shared KV cache for all slots
    assert argv[argv.index("--threads") + 1] == "2" and argv[argv.index("--host") + 1] == "127.0.0.1"
    server = backend._server
    assert server is not None and server.exit_code() is None
    pid = server._proc.pid  # type: ignore[union-attr]
    await backend.aclose()
    assert _wait_gone(pid)
    with pytest.raises(BackendError, match="closed"):
        await backend.complete(ASK, GenerateConfig())


async def test_the_run_flags_size_the_server_of_a_local_model(
    fake_binary: Path, model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--slots`` and ``--ctx`` of run, eval and serve reach the llama.cpp server (through EnvSpec)."""
    from masorch.run import EnvSpec

    args_file = tmp_path / "args.json"
    monkeypatch.setenv("FAKE_ARGS", str(args_file))
    monkeypatch.setenv(ENGINE_ENV, str(fake_binary))
    backend = EnvSpec.default(slots=2, n_ctx=8192).backend_factory(f"local:{model_file}")
    try:
        reply = await backend.complete(ASK, GenerateConfig())
    finally:
        await backend.aclose()
    assert reply.text.startswith("model tiny.gguf")
    argv = json.loads(args_file.read_text())
    assert argv[argv.index("--parallel") + 1] == "2"
    assert argv[argv.index("--ctx-size") + 1] == str(2 * 8192)


async def test_a_corrupt_model_is_a_named_error(
    fake_binary: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "bad_model")
    backend = _backend(fake_binary, model_file)
    with pytest.raises(BackendError) as info:
        await backend.complete(ASK, GenerateConfig())
    await backend.aclose()
    assert info.value.code == "engine_load_failed"
    assert "error loading model" in info.value.message and "models verify" in info.value.hint


def _cached_engine(tmp_path: Path, script: str) -> EngineStore:
    """An engine cache (no override) holding ``script`` as its built binary."""
    store = EngineStore(tmp_path / "engines", env={})
    store.built_binary.parent.mkdir(parents=True)
    store.built_binary.write_text(script)
    store.built_binary.chmod(0o755)
    return store


async def test_an_engine_this_cpu_cannot_run_is_named_not_the_model(tmp_path: Path, model_file: Path) -> None:
    script = "#!/bin/sh\necho 'system info: CPU : SSE3 = 1'\nkill -ILL $$\n"
    backend = LocalBackend(model_file, name="tiny", engine=_cached_engine(tmp_path, script))
    with pytest.raises(BackendError) as info:
        await backend.complete(ASK, GenerateConfig())
    await backend.aclose()
    assert info.value.code == "engine_crashed"
    assert "SIGILL" in info.value.message and "llama-server" in info.value.message
    assert "masorch models engine --force" in info.value.hint and "verify" not in info.value.hint


async def test_an_engine_built_for_another_machine_is_named(tmp_path: Path, model_file: Path) -> None:
    backend = LocalBackend(model_file, name="tiny", engine=_cached_engine(tmp_path, "\x7fELF not for here"))
    with pytest.raises(UsageError) as info:
        await backend.complete(ASK, GenerateConfig())
    await backend.aclose()
    assert info.value.code == "engine_start_failed" and "not a program for this machine" in info.value.message
    assert "masorch models engine --force" in info.value.hint


async def test_a_port_clash_is_retried_on_another_port(
    fake_binary: Path, model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "clash_once")
    monkeypatch.setenv("FAKE_STATE", str(tmp_path / "starts"))
    backend = _backend(fake_binary, model_file)
    reply = await backend.complete(ASK, GenerateConfig())
    await backend.aclose()
    assert reply.text.startswith("model tiny.gguf") and (tmp_path / "starts").read_text() == "2"


async def test_a_model_that_never_loads_times_out_and_is_killed(
    fake_binary: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "hang")
    backend = _backend(fake_binary, model_file, startup_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        await backend.complete(ASK, GenerateConfig())
    assert info.value.code == "engine_load_timeout" and time.monotonic() - started < 10
    await backend.aclose()


async def test_after_a_load_timeout_the_next_call_starts_a_new_server(
    fake_binary: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "hang")
    backend = _backend(fake_binary, model_file, startup_timeout_s=1.0)
    other = [Message("user", "another question")]
    failed = await asyncio.gather(
        backend.complete(ASK, GenerateConfig()),
        backend.complete(other, GenerateConfig()),
        return_exceptions=True,
    )
    # Both waiters on the stopped server say it timed out (not that the engine crashed).
    assert [getattr(e, "code", e) for e in failed] == ["engine_load_timeout"] * 2
    with pytest.raises(BackendError) as info:
        await backend.complete(ASK, GenerateConfig())
    assert info.value.code == "engine_load_timeout"
    assert "loaded meta data" in info.value.message  # the server's last lines, as for a failed load
    assert "BackendSettings" in info.value.hint  # where startup_timeout_s can be raised
    monkeypatch.setenv("FAKE_MODE", "ok")  # the engine would start now
    started = time.monotonic()
    reply = await backend.complete(ASK, GenerateConfig())
    assert reply.text.startswith("model tiny.gguf") and time.monotonic() - started < 30
    await backend.aclose()


def test_the_startup_timeout_is_a_backend_setting(
    model_file: Path, fake_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from masorch.backends.registry import BackendSettings, make_backend

    monkeypatch.setenv(ENGINE_ENV, str(fake_binary))
    backend = make_backend(f"local:{model_file}", settings=BackendSettings(startup_timeout_s=600))
    assert isinstance(backend, LocalBackend) and backend.settings.startup_timeout_s == 600
    with pytest.raises(UsageError, match="startup_timeout_s"):
        ServerSettings(startup_timeout_s=0)


async def test_a_server_that_dies_mid_run_is_named_and_restarted(fake_binary: Path, model_file: Path) -> None:
    backend = _backend(fake_binary, model_file)
    await backend.complete(ASK, GenerateConfig())
    first = backend._server._proc.pid  # type: ignore[union-attr]
    with pytest.raises(BackendError) as info:
        await backend.complete([Message("user", "die")], GenerateConfig())
    assert info.value.code == "backend_local_died" and "exit 3" in info.value.message
    again = await backend.complete(ASK, GenerateConfig())  # the next call starts a new server
    assert again.text.startswith("model tiny.gguf") and backend._server._proc.pid != first  # type: ignore[union-attr]
    await backend.aclose()


def test_no_orphan_server_when_the_owner_is_killed(
    fake_binary: Path, model_file: Path, tmp_path: Path
) -> None:
    src = Path(masorch.__file__).resolve().parents[1]
    pid_file = tmp_path / "server.pid"
    owner = textwrap.dedent(
        f"""
        import asyncio, os, sys, time
        sys.path.insert(0, {str(src)!r})
        from masorch.backends.engine import EngineStore
        from masorch.backends.local import LocalBackend
        from masorch.backends.base import GenerateConfig, Message

        async def main():
            engine = EngineStore(env={{"{ENGINE_ENV}": {str(fake_binary)!r}}})
            b = LocalBackend({str(model_file)!r}, engine=engine)
            await b.complete([Message("user", "hi")], GenerateConfig())
            open({str(pid_file)!r}, "w").write(str(b._server._proc.pid))
            time.sleep(600)

        asyncio.run(main())
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", owner])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the owner did not start a server"
            time.sleep(0.1)
        server_pid = int(pid_file.read_text())
        assert _alive(server_pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert _wait_gone(server_pid), "the llama.cpp server outlived its owner"
    finally:
        if proc.poll() is None:
            proc.kill()


# -- the real engine --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm() -> Path:
    if EngineStore().find() is None:
        pytest.skip("the llama.cpp server is not built: masorch models engine")
    try:
        return ModelStore().path("smollm2-135m")
    except UsageError:
        pytest.skip("smollm2-135m is not cached: masorch models pull smollm2-135m")


@pytest.mark.model
async def test_bounded_generation_with_real_usage(smollm: Path) -> None:
    b = LocalBackend(smollm, name="smollm2-135m", n_ctx=1024)
    assert isinstance(b, Backend) and b.model_id == "local:smollm2-135m"
    first = await b.complete(ASK, GenerateConfig(max_tokens=8))
    again = await b.complete(ASK, GenerateConfig(max_tokens=8))
    await b.aclose()
    assert first.text.strip() and first.finish in ("stop", "length")
    assert 0 < first.usage.completion_tokens <= 8 and first.usage.prompt_tokens > 5
    assert not first.usage.estimated and first.usage.calls == 1
    assert again.text == first.text  # greedy is deterministic
    with pytest.raises(BackendError, match="closed"):
        await b.complete(ASK, GenerateConfig())


@pytest.mark.model
async def test_json_schema_output_parses(smollm: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "integer"},
            "steps": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 2},
        },
        "required": ["answer", "steps"],
    }
    b = LocalBackend(smollm, n_ctx=1024)
    c = await b.complete(
        [Message("user", "What is 2 + 3? Reply as JSON with answer and steps.")],
        GenerateConfig(max_tokens=96, json_schema=schema),
    )
    await b.aclose()
    value = json.loads(c.text)
    assert isinstance(value["answer"], int) and isinstance(value["steps"], list)


@pytest.mark.model
async def test_concurrent_calls_share_the_server_and_the_loop_stays_free(smollm: Path) -> None:
    b = LocalBackend(smollm, settings=ServerSettings(slots=4, n_ctx=1024))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    prompts = [[Message("user", f"Name a colour number {i}.")] for i in range(6)]
    results = await asyncio.gather(*[b.complete(p, GenerateConfig(max_tokens=6)) for p in prompts])
    task.cancel()
    await b.aclose()
    assert all(r.usage.completion_tokens > 0 for r in results)
    assert ticks > 5  # the event loop ran while the model generated


@pytest.mark.model
async def test_a_cancelled_call_frees_its_slot(smollm: Path) -> None:
    b = LocalBackend(smollm, settings=ServerSettings(slots=1, n_ctx=1024))
    await b.start()
    count = [Message("user", "Count from 1 to 1000, one number per line.")]
    url = f"http://127.0.0.1:{b._server.port}/slots"  # type: ignore[union-attr]

    def busy() -> bool:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return any(slot.get("is_processing") for slot in json.loads(reply.read()))

    long = asyncio.create_task(b.complete(count, GenerateConfig(max_tokens=900)))
    deadline = time.monotonic() + 30
    while not busy():
        assert time.monotonic() < deadline, "the request never started"
        await asyncio.sleep(0.5)
    long.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long
    # llama.cpp checks each second whether a waiting client is still there (any other request's
    # result restarts that wait, so the slot is looked at sparsely, not polled) and stops the request
    # after its current batch step. 900 tokens would take far longer than the bound here; the latency
    # on a quiet machine is measured by bench/local_batching.py.
    still_busy = True
    for _ in range(4):
        await asyncio.sleep(1.25)
        still_busy = busy()
        if not still_busy:
            break
    await b.aclose()
    assert not still_busy, "the slot still generates 5 s after the call was cancelled"


@pytest.mark.model
async def test_prompt_beyond_context_is_a_clear_error(smollm: Path) -> None:
    b = LocalBackend(smollm, settings=ServerSettings(slots=1, n_ctx=256))
    with pytest.raises(BackendError) as info:
        await b.complete([Message("user", "word " * 400)], GenerateConfig(max_tokens=8))
    await b.aclose()
    assert info.value.code == "backend_context" and "n_ctx" in info.value.hint


@pytest.mark.model
async def test_tool_calls_follow_the_tool_schema(smollm: Path) -> None:
    from masorch.backends.base import ToolSpec

    parameters = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    b = LocalBackend(smollm, n_ctx=1024)
    c = await b.complete(
        [Message("system", "You can call tools."), Message("user", "Use the add tool to add 17 and 25.")],
        GenerateConfig(max_tokens=48, tools=(ToolSpec("add", "Add two integers", parameters),)),
    )
    await b.aclose()
    if c.tool_calls:
        assert c.tool_calls[0].name == "add"
        assert set(json.loads(c.tool_calls[0].arguments)) == {"a", "b"}
    else:
        assert c.text


async def test_an_sc_nodes_samples_go_to_the_server_as_one_request(
    fake_binary: Path, model_file: Path
) -> None:
    b = _backend(fake_binary, model_file, slots=4)
    configs = [GenerateConfig(temperature=0.7, sample_index=i) for i in range(6)]
    try:
        out = await asyncio.gather(*(b.complete([Message("user", "hi")], c) for c in configs))
    finally:
        await b.aclose()
    assert len(out) == 6 and all(c.text for c in out)
    # 6 samples on 4 slots: two requests (n=4, n=2), each prompt processed once
    assert [c.usage.prompt_tokens > 0 for c in out] == [True, False, False, False, True, False]
