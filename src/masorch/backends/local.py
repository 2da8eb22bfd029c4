"""An embedded GGUF model served by a llama.cpp server process that masorch starts and stops itself.

``local:<name>`` starts ``llama-server`` (:mod:`masorch.backends.engine`) on a free loopback port on the
first call and speaks to it through :class:`~masorch.backends.openai_compat.OpenAIBackend`, so there is
one HTTP code path for every model. The server decodes up to ``slots`` requests at once with continuous
batching: the parallel branches of a plan (sc samples, debate speakers, fan-outs) share forward passes
instead of queueing. A call that is cancelled or times out closes its connection, and the server stops
that request. The process ends with :meth:`LocalBackend.aclose`, when the backend is garbage-collected
or the interpreter exits, and (Linux) when this process dies, however it dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import json
import logging
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from masorch.backends.base import Completion, GenerateConfig, Message
from masorch.backends.batching import SampleBatcher
from masorch.backends.engine import EngineStore
from masorch.backends.openai_compat import OpenAIBackend, RetryPolicy
from masorch.errors import BackendError, UsageError

log = logging.getLogger(__name__)

#: Requests one server decodes at once: enough for a typical plan (sc n=5, a 4-way fan-out, debate).
DEFAULT_SLOTS = 8
#: Context tokens per slot: the orchestrator prompt (~1,300 tokens) plus a 1,024-token plan fits.
DEFAULT_CTX = 4096
_PORT_CLASH = ("address already in use", "couldn't bind", "could not bind", "failed to bind")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # Linux: the server gets SIGKILL when the thread that started it dies (a crash or SIGKILL of
    # masorch included), so no server outlives its owner.
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _exit_text(code: int) -> str:
    """``exit 3``, or ``signal SIGILL`` for a process a signal ended (a negative exit code)."""
    if code >= 0:
        return f"exit {code}"
    try:
        return f"signal {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


def _kill(proc: subprocess.Popen[bytes], log_file: IO[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    log_file.close()


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """How the llama.cpp server of one model runs.

    ``slots`` requests decode at once, each with up to ``n_ctx`` context tokens (one KV cache of
    ``slots * n_ctx`` tokens shared by all); ``n_threads`` CPU threads (default: the usable cores);
    ``startup_timeout_s`` bounds loading the model.
    """

    slots: int = DEFAULT_SLOTS
    n_ctx: int = DEFAULT_CTX
    n_threads: int | None = None
    seed: int = 0
    startup_timeout_s: float = 180.0
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.n_ctx < 256:
            raise UsageError(
                f"n_ctx={self.n_ctx} is below llama.cpp's minimum of 256", hint="use n_ctx >= 256"
            )
        if not 1 <= self.slots <= 64:
            raise UsageError(f"slots={self.slots} is out of range", hint="use 1 to 64 parallel slots")
        if self.n_threads is not None and self.n_threads < 1:
            raise UsageError(f"n_threads={self.n_threads} < 1", hint="use 1 or more threads")
        if not self.startup_timeout_s > 0:
            raise UsageError(
                f"startup_timeout_s={self.startup_timeout_s} is not positive",
                hint="give the seconds a model may take to load (default 180)",
            )


class LocalServer:
    """One ``llama-server`` process serving one GGUF file on a loopback port.

    ``engine_hint`` says how to replace a binary that cannot run here (:meth:`EngineStore.rebuild_hint`).
    """

    def __init__(
        self,
        binary: Path,
        model_path: Path,
        settings: ServerSettings,
        *,
        name: str,
        engine_hint: str = "rebuild it with `masorch models engine --force`",
    ) -> None:
        self.binary = binary
        self.model_path = model_path
        self.settings = settings
        self.name = name
        self.engine_hint = engine_hint
        self.port = 0
        #: Set once ``/health`` answered: later calls skip the check.
        self.ready = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._finalizer: weakref.finalize | None = None
        #: Set by :meth:`stop`: the process was ended by masorch, not by itself.
        self.stopped = False

    @property
    def base_url(self) -> str:
        """The server's OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        """The server's command line."""
        s = self.settings
        threads = str(s.n_threads or _cores())
        return [
            str(self.binary),
            "--model", str(self.model_path),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--parallel", str(s.slots),
            "--ctx-size", str(s.n_ctx * s.slots),
            "--kv-unified",
            "--cont-batching",
            "--threads", threads,
            "--threads-batch", threads,
            "--seed", str(s.seed),
            "--jinja",
            "--no-webui",
            "--no-warmup",
            "--fit", "off",
            "--cache-ram", "256",
            *s.extra_args,
        ]  # fmt: skip

    def spawn(self) -> None:
        """Start the process on a free port (not waiting for the model to load)."""
        self.port = _free_port()
        # Closed by the finalizer with the process: the server writes into it for its whole life.
        self._log = tempfile.TemporaryFile(prefix="masorch-llama-server-")  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            self._log.close()
            why = exc.strerror or str(exc)
            if exc.errno == errno.ENOEXEC:
                why += f": the engine binary is not a program for this machine ({platform.machine()})"
            raise UsageError(
                f"cannot start the llama.cpp server engine {self.binary}: {why}",
                hint=self.engine_hint,
                code="engine_start_failed",
            ) from None
        self._finalizer = weakref.finalize(self, _kill, self._proc, self._log)
        log.info(
            "started %s for %s on port %d (pid %d)", self.binary.name, self.name, self.port, self._proc.pid
        )

    def exit_code(self) -> int | None:
        """The process's exit code (negative: the signal that ended it), or None while it runs."""
        return None if self._proc is None else self._proc.poll()

    def gone(self) -> bool:
        """True once the process has ended or was stopped (a server that never started counts too)."""
        return self._proc is None or self.exit_code() is not None

    def wait_exit(self, timeout_s: float) -> int | None:
        """The exit code once the process ends within ``timeout_s``, else None (it still runs)."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, lines: int = 6) -> str:
        """The last lines the server printed."""
        if self._log is None or self._log.closed:
            return ""
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - 8192))
        text = self._log.read().decode("utf-8", "replace")
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])

    def healthy(self) -> bool:
        """True once the server answers ``/health`` with 200 (the model is loaded)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1.0) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def count_tokens(self, text: str) -> int | None:
        """The tokens of ``text`` by the model's tokenizer (``/tokenize``), or None if unanswered."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/tokenize",
            data=json.dumps({"content": text}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5.0) as reply:
                tokens = json.loads(reply.read()).get("tokens")
        except (urllib.error.URLError, OSError, ValueError, AttributeError):
            return None
        return len(tokens) if isinstance(tokens, list) else None

    def stop(self) -> None:
        """End the process (terminate, then kill after 5 s); it then counts as :meth:`gone`."""
        self.stopped = True
        if self._finalizer is not None:
            self._finalizer()


class LocalBackend:
    """A GGUF model answering chat completions from a llama.cpp server that this backend manages.

    ``settings`` sizes the server (slots, context per slot, threads, seed); ``timeout_s`` bounds one
    request. Sample ``i`` of a prompt uses seed ``seed + i`` when a call gives none. JSON-schema calls
    and grammar (GBNF) calls are constrained by the server, so their output parses.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        name: str | None = None,
        settings: ServerSettings | None = None,
        timeout_s: float = 900.0,
        engine: EngineStore | None = None,
        n_ctx: int | None = None,
        n_threads: int | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise UsageError(
                f"no GGUF model file at {self.model_path}",
                hint="give the path of a .gguf file, or an embedded model name (masorch models list)",
            )
        settings = settings or ServerSettings()
        if n_ctx is not None or n_threads is not None:
            settings = dataclasses.replace(
                settings, n_ctx=n_ctx or settings.n_ctx, n_threads=n_threads or settings.n_threads
            )
        self.settings = settings
        self._name = name or self.model_path.stem
        self._model_id = f"local:{self._name}"
        self.timeout_s = timeout_s
        # Checked now, so a missing engine is a usage error before any run starts, not a failed call.
        engine = engine or EngineStore()
        self._binary = engine.binary()
        self._engine_hint = engine.rebuild_hint()
        self._server: LocalServer | None = None
        self._client: OpenAIBackend | None = None
        self._lock = threading.Lock()
        self._closed = False
        # Samples of one prompt (an sc node's) share one request, so the prompt is processed once.
        self._batcher = SampleBatcher(self._complete_n, max_n=settings.slots)

    @property
    def model_id(self) -> str:
        """``local:<name>``."""
        return self._model_id

    @property
    def seed(self) -> int:
        """The sampling seed of calls that give none."""
        return self.settings.seed

    def __repr__(self) -> str:
        s = self.settings
        return f"LocalBackend(model_id={self._model_id!r}, slots={s.slots}, n_ctx={s.n_ctx})"

    async def start(self) -> None:
        """Start the server and wait until the model is loaded (the first call does this otherwise)."""
        await self._ready_client()

    def load(self) -> None:
        """Start the server and wait for the model, from synchronous code."""
        asyncio.run(self._ready_client())

    async def _ready_client(self) -> OpenAIBackend:
        if self._closed:
            raise BackendError(
                f"{self._model_id} is closed", hint="make a new backend", code="backend_closed"
            )
        for _ in range(3):  # a port taken between choosing and binding it: choose again
            with self._lock:
                server, client = self._server, self._client
                if server is None or server.gone():
                    if server is not None:
                        server.stop()
                    server = LocalServer(
                        self._binary,
                        self.model_path,
                        self.settings,
                        name=self._model_id,
                        engine_hint=self._engine_hint,
                    )
                    server.spawn()
                    client = self._make_client(server)
                    self._server, self._client = server, client
            assert client is not None
            if server.ready or await self._wait_healthy(server):
                server.ready = True
                return client
        raise BackendError(
            f"{self._model_id}: the llama.cpp server could not bind a loopback port three times",
            hint="free some ports, or check what else listens on 127.0.0.1",
            code="engine_start_failed",
            retryable=False,
        )

    def _make_client(self, server: LocalServer) -> OpenAIBackend:
        return OpenAIBackend(
            self._name,
            base_url=server.base_url,
            model_id=self._model_id,
            provider="local",
            timeout_s=self.timeout_s,
            retry=RetryPolicy(max_attempts=1),  # a local server does not fail transiently
            connection_shards=1,
            grammar_format="llama.cpp",
            fresh_connection=True,  # a cancelled call closes its connection: the server stops it
            n_usage="first",  # llama.cpp counts the first of n completions only
            env={},
        )

    async def _wait_healthy(self, server: LocalServer) -> bool:
        """True when the server is up; False on a port clash; raises when it cannot load the model."""
        deadline = time.monotonic() + self.settings.startup_timeout_s
        while not await asyncio.to_thread(server.healthy):
            code = server.exit_code()
            if code is not None and server.stopped:  # another waiter timed out, or aclose()
                if self._closed:
                    raise BackendError(
                        f"{self._model_id} is closed", hint="make a new backend", code="backend_closed"
                    )
                raise self._load_timeout("")
            if code is not None:
                tail = server.log_tail()
                if any(clash in tail.lower() for clash in _PORT_CLASH):
                    log.info("%s: port %d was taken; retrying", self._model_id, server.port)
                    return False
                if code < 0 and -code != signal.SIGKILL:  # SIGKILL while loading: the OOM killer
                    raise self._engine_crash(server, code, tail)
                raise BackendError(
                    f"{self._model_id}: the llama.cpp server exited ({_exit_text(code)}) while loading "
                    f"{self.model_path.name}: {tail[-500:]}",
                    hint="check the file (masorch models verify NAME, or pull it again with --force) "
                    "and the free memory",
                    code="engine_load_failed",
                    retryable=False,
                )
            if time.monotonic() > deadline:
                tail = server.log_tail()  # read before stopping: stop() closes the log
                server.stop()
                raise self._load_timeout(tail)
            await asyncio.sleep(0.1)
        return True

    def _engine_crash(self, server: LocalServer, code: int, tail: str) -> BackendError:
        # A signal, not an exit: the engine itself broke. SIGILL: it uses instructions this CPU lacks.
        cpu = " (an instruction this CPU does not have)" if -code == signal.SIGILL else ""
        also = "" if cpu else "; if it crashes again, check the model file (masorch models verify NAME)"
        return BackendError(
            f"{self._model_id}: the llama.cpp server engine {server.binary} crashed with "
            f"{_exit_text(code)}{cpu} while loading {self.model_path.name}: {tail[-500:]}",
            hint=server.engine_hint + also,
            code="engine_crashed",
            retryable=False,
        )

    def _load_timeout(self, tail: str) -> BackendError:
        said = f": {tail[-500:]}" if tail else ""
        return BackendError(
            f"{self._model_id}: the model {self.model_path.name} did not load within "
            f"{self.settings.startup_timeout_s:g} s; the server was stopped{said}",
            hint="check the free memory and CPU load, or raise startup_timeout_s "
            "(BackendSettings or ServerSettings); the next call starts a new server",
            code="engine_load_timeout",
            retryable=False,
        )

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """One chat completion from the local server (started on first use)."""
        if not messages:
            raise BackendError(f"{self._model_id}: no messages to send", hint="give at least one message")
        if config.seed is None:
            config = dataclasses.replace(config, seed=self.settings.seed)
        return await self._batcher.complete(messages, config)

    async def _complete_n(
        self, messages: Sequence[Message], config: GenerateConfig, n: int
    ) -> list[Completion]:
        """``n`` samples of one prompt in one request (the server starts on first use)."""
        client = await self._ready_client()
        try:
            completions = await client.complete_n(messages, config, n)
            if n > 1 and self._server is not None:  # the server counted the first only: count the rest
                live = self._server
                guessed = [i for i, c in enumerate(completions) if c.usage.estimated]
                counts = await asyncio.gather(
                    *(asyncio.to_thread(live.count_tokens, completions[i].text) for i in guessed)
                )
                for i, k in zip(guessed, counts, strict=True):
                    if k is not None:
                        c = completions[i]
                        usage = dataclasses.replace(c.usage, completion_tokens=k, estimated=False)
                        completions[i] = dataclasses.replace(c, usage=usage)
            return completions
        except BackendError as exc:
            server = self._server
            code = server.exit_code() if server is not None else None
            if code is None and server is not None and exc.code == "backend_connection":
                # A dropped connection may be the server dying: give the kernel a moment to say so.
                code = await asyncio.to_thread(server.wait_exit, 1.0)
            if code is not None and server is not None:
                raise BackendError(
                    f"{self._model_id}: the llama.cpp server died ({_exit_text(code)}): "
                    f"{server.log_tail()[-400:]}",
                    hint="check the free memory (dmesg for the OOM killer); the next call starts it again",
                    code="backend_local_died",
                    retryable=False,
                ) from None
            if exc.code in ("backend_bad_request", "backend_context"):
                raise BackendError(
                    exc.message,
                    hint=f"the prompt may be longer than a slot's context ({self.settings.n_ctx} tokens): "
                    "shorten it, lower max_tokens, or raise n_ctx (--ctx on run, eval and serve)",
                    code="backend_context" if "context" in exc.message.lower() else exc.code,
                    retryable=False,
                ) from None
            raise

    async def aclose(self) -> None:
        """Close the client and end the server process."""
        self._closed = True
        with self._lock:
            server, client = self._server, self._client
            self._server, self._client = None, None
        if client is not None:
            with contextlib.suppress(RuntimeError):  # a client bound to a finished loop
                await client.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)
