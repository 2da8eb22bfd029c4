"""The llama.cpp server engine behind ``local:`` models: found on disk, or built once from pinned sources.

``llama-server`` (llama.cpp's HTTP server) batches concurrent requests into shared forward passes
(parallel slots, continuous batching), constrains output with GBNF grammars and JSON schemas, and
stops a request whose client went away. masorch runs it as a child process and speaks to it through
the same OpenAI-compatible client as every other server (:mod:`masorch.backends.local`).

The binary is, in this order: the file named by ``$MASORCH_LLAMA_SERVER``; the one built into the
cache for this machine's architecture (``$MASORCH_CACHE/engines/llama-server-<version>-<machine>/
llama-server``; on x86-64 also a build from before the cache was keyed on it,
``llama-server-<version>/``). :meth:`EngineStore.build`
makes the latter from the llama.cpp sources that the pinned ``llama-cpp-python`` source archive carries
(fetched with ``pip download``, sha256-checked), compiling only the server target, portably.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from masorch.config import cache_dir
from masorch.errors import RunError, UsageError
from masorch.fetch import PipDownload, sha256_file

log = logging.getLogger(__name__)

#: The environment variable that names a ``llama-server`` binary to use instead of the cached build.
ENGINE_ENV = "MASORCH_LLAMA_SERVER"


@dataclass(frozen=True)
class SourcePin:
    """A pinned source archive from the package registry and the llama.cpp tree inside it."""

    package: str
    version: str
    sha256: str
    subdir: str

    @property
    def requirement(self) -> str:
        """The pip requirement ``package==version``."""
        return f"{self.package}=={self.version}"

    @property
    def archive_name(self) -> str:
        """The source archive's file name on the registry."""
        return f"{self.package.replace('-', '_')}-{self.version}.tar.gz"


#: llama-cpp-python 0.3.36's sdist vendors the llama.cpp tree (server included) it was released with.
LLAMA_CPP_SOURCE = SourcePin(
    "llama-cpp-python",
    "0.3.36",
    "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
    "vendor/llama.cpp",
)

#: Portable flags (on x86-64 with AVX2/FMA/F16C, as fast as a native build on the machines measured),
#: one static binary, nothing but the server: no tests, examples, web UI download or network libraries.
CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
_X86_FLAGS = ("-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON")
#: How long a build waits for another process's build of the same engine (one takes 4-13 minutes
#: on 2 cores).
BUILD_WAIT_S = 45 * 60.0

BuildPhase = Literal["wait", "download", "extract", "configure", "compile", "done"]


@dataclass(frozen=True)
class BuildProgress:
    """A progress report of an engine build: the phase and, while compiling, the percent done."""

    phase: BuildPhase
    percent: int = 0
    detail: str = ""


BuildProgressFn = Callable[[BuildProgress], None]
_PERCENT = re.compile(r"^\[\s*(\d{1,3})%\]")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class EngineStore:
    """Finds or builds the ``llama-server`` binary in one cache directory.

    ``pip_args`` are added to the ``pip download`` of the sources (e.g. ``--index-url``); ``jobs``
    is the compile parallelism (default: the usable cores); ``cmake`` the CMake executable (default:
    the one on ``PATH``, else the ``cmake`` package's).
    """

    def __init__(
        self,
        cache: Path | str | None = None,
        *,
        source: SourcePin = LLAMA_CPP_SOURCE,
        pip_args: Sequence[str] = (),
        python: str = sys.executable,
        jobs: int | None = None,
        cmake: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.cache_dir = Path(cache) if cache is not None else cache_dir("engines", env)
        self.source = source
        self.pip_args = tuple(pip_args)
        self.python = python
        self.jobs = jobs or _cores()
        self.cmake = cmake
        self._env = os.environ if env is None else env

    @property
    def build_dir(self) -> Path:
        """Where the cached build of the pinned version for this machine's architecture lives."""
        # Keyed on the architecture: the cache may be shared (one home directory) by other machines.
        return self.cache_dir / f"llama-server-{self.source.version}-{_machine()}"

    @property
    def built_binary(self) -> Path:
        """The cached binary's path (it may not exist yet)."""
        return self.build_dir / "llama-server"

    def rebuild_hint(self) -> str:
        """How to replace an engine binary that does not run here (it depends on where it came from)."""
        if self._env.get(ENGINE_ENV):
            return (
                f"point {ENGINE_ENV} at a llama-server built for this machine, or unset it and run "
                "`masorch models engine` to build one"
            )
        return "rebuild the engine for this machine with `masorch models engine --force`"

    def _cached(self) -> Path | None:
        # x86-64 builds made before the key had the architecture are still found (a rebuild costs
        # minutes); they were x86-64 builds wherever the old layout was documented.
        legacy = self.cache_dir / f"llama-server-{self.source.version}" / "llama-server"
        for binary in (self.built_binary, *((legacy,) if _is_x86() else ())):
            if binary.is_file() and os.access(binary, os.X_OK):
                return binary
        return None

    def find(self) -> Path | None:
        """The binary to run: ``$MASORCH_LLAMA_SERVER`` if set, else the cached build if present."""
        override = self._env.get(ENGINE_ENV)
        if override:
            path = Path(override).expanduser()
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise UsageError(
                    f"{ENGINE_ENV}={override} is not an executable file",
                    hint=f"point {ENGINE_ENV} at a llama-server binary, or unset it to use the cached build",
                )
            return path
        return self._cached()

    def binary(self) -> Path:
        """The binary to run; a :class:`UsageError` naming the build command when there is none."""
        found = self.find()
        if found is None:
            raise UsageError(
                f"the llama.cpp server engine is not built yet (looked for {self.built_binary})",
                hint="run `masorch models engine` once (or `masorch models pull NAME`, which builds it "
                f"too), or set {ENGINE_ENV} to a llama-server binary",
                code="engine_missing",
            )
        return found

    def build(self, *, force: bool = False, progress: BuildProgressFn | None = None) -> Path:
        """Build the pinned ``llama-server`` into the cache (kept as is when already built).

        One build at a time per cache and architecture (a file lock, across processes): a second
        build waits for the first and then uses its binary (with ``force``: one finished while waiting).
        """
        cached = None if force else self._cached()
        if cached is not None:
            _report(progress, BuildProgress("done", 100))
            return cached
        cmake = self._cmake()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        before = _identity(self.built_binary)
        with self._build_lock(progress):
            cached = self._cached()
            if cached is not None and (not force or _identity(self.built_binary) != before):
                log.info("another process built %s meanwhile", cached)
                _report(progress, BuildProgress("done", 100))
                return cached
            return self._build_locked(cmake, progress)

    @contextlib.contextmanager
    def _build_lock(self, progress: BuildProgressFn | None) -> Iterator[None]:
        # Freed by the kernel when the holder ends, however it ends: no lock can go stale.
        with (self.cache_dir / f".{self.build_dir.name}.lock").open("ab") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                detail = "another masorch process is building the engine: waiting for it"
                log.info("%s (%s)", detail, self.build_dir)
                _report(progress, BuildProgress("wait", detail=detail))
                _wait_for_lock(handle.fileno(), BUILD_WAIT_S, self.build_dir)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _build_locked(self, cmake: str, progress: BuildProgressFn | None) -> Path:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="masorch-engine-", dir=self.cache_dir) as scratch_name:
            scratch = Path(scratch_name)
            _report(progress, BuildProgress("download", detail=self.source.requirement))
            archive = self._download(scratch)
            _report(progress, BuildProgress("extract"))
            tree = self._extract(archive, scratch / "src")
            archive.unlink()
            flags = [*CMAKE_FLAGS, *_cpu_flags()]
            build = scratch / "build"
            _report(progress, BuildProgress("configure"))
            self._run([cmake, "-S", str(tree), "-B", str(build), *flags], "configure", progress)
            command = [cmake, "--build", str(build), "--target", "llama-server", "-j", str(self.jobs)]
            self._run(command, "compile", progress)
            produced = build / "bin" / "llama-server"
            if not produced.is_file():
                raise RunError(
                    f"the build finished but {produced} is missing",
                    hint="report it to masorch with the llama.cpp version",
                    code="engine_build_failed",
                )
            self.build_dir.mkdir(parents=True, exist_ok=True)
            handle, staged_name = tempfile.mkstemp(prefix=".llama-server.", suffix=".tmp", dir=self.build_dir)
            os.close(handle)
            staged = Path(staged_name)
            try:
                shutil.copy2(produced, staged)
                os.replace(staged, self.built_binary)
            finally:
                staged.unlink(missing_ok=True)
        seconds = time.perf_counter() - start
        record = {"source": self.source.requirement, "flags": flags, "build_s": round(seconds, 1)}
        (self.build_dir / "build.json").write_text(json.dumps(record, indent=2))
        log.info("built %s in %.0fs", self.built_binary, seconds)
        _report(progress, BuildProgress("done", 100))
        return self.built_binary

    def _cmake(self) -> str:
        if self.cmake:
            return self.cmake
        found = shutil.which("cmake")
        if found:
            return found
        try:  # the `cmake` package from the registry ships the binary
            import cmake as cmake_package

            return str(Path(cmake_package.CMAKE_BIN_DIR) / "cmake")
        except (ImportError, AttributeError):
            raise UsageError(
                "building the llama.cpp server needs CMake and a C++ compiler",
                hint="pip install cmake (or apt-get install cmake g++), then build again",
                code="engine_build_tools",
            ) from None

    def _download(self, scratch: Path) -> Path:
        source = [self.source.requirement]
        done = PipDownload(source, scratch, sources=True, pip_args=self.pip_args, python=self.python).run()
        archive = scratch / self.source.archive_name
        if not done.ok or not archive.is_file():
            raise RunError(
                f"pip could not download the sources {self.source.requirement}: {done.tail}",
                hint="check that the package registry is reachable (pip config list)",
                code="engine_download_failed",
            )
        digest = sha256_file(archive)
        if digest != self.source.sha256:
            raise RunError(
                f"{archive.name} has sha256 {digest[:16]}..., expected {self.source.sha256[:16]}...",
                hint="the registry served other bytes than the pinned release; retry, or report it",
                code="engine_checksum",
            )
        return archive

    def _extract(self, archive: Path, dest: Path) -> Path:
        prefix = f"{archive.name.removesuffix('.tar.gz')}/{self.source.subdir}/"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            if not members:
                raise RunError(
                    f"{archive.name} has no {self.source.subdir}",
                    hint="the source package changed its layout; report it to masorch",
                    code="engine_build_failed",
                )
            tar.extractall(dest, members=members, filter="data")
        return dest / prefix.rstrip("/")

    def _run(self, command: list[str], phase: BuildPhase, progress: BuildProgressFn | None) -> None:
        log.info("%s: %s", phase, " ".join(command))
        tail: list[str] = []
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                tail = [*tail[-19:], line.rstrip()]
                match = _PERCENT.match(line)
                if match and progress is not None:
                    progress(BuildProgress(phase, min(100, int(match.group(1))), line.strip()[:120]))
            code = proc.wait()
        if code != 0:
            raise RunError(
                f"the llama.cpp server build failed in its {phase} step (exit {code}): "
                + " | ".join(tail[-4:])[:600],
                hint="it needs CMake >= 3.14 and a C++17 compiler (apt-get install cmake g++); "
                "then run `masorch models engine --force`",
                code="engine_build_failed",
            )


def _wait_for_lock(fd: int, limit_s: float, build_dir: Path) -> None:
    """Take the exclusive lock on ``fd``, polling, for at most ``limit_s`` seconds (a build takes
    minutes; one that holds the lock far longer is stuck, and waiting on it would be a hang)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise RunError(
                    f"another process has been building the engine in {build_dir} for over "
                    f"{limit_s / 60:g} minutes",
                    hint="let it finish, or stop it (a stuck cmake or make) and build again",
                    code="engine_build_failed",
                ) from None
            time.sleep(1.0)


def _machine() -> str:
    """This machine's architecture, one name per kind (``x86_64``, ``aarch64``, ...)."""
    machine = platform.machine().lower() or "unknown"
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _is_x86() -> bool:
    return _machine() == "x86_64"


def _cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, ...]:
    """AVX2/FMA/F16C on an x86-64 CPU that has them (a binary with them dies of SIGILL elsewhere)."""
    if not _is_x86():
        return ()
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:  # not Linux: assume a CPU of the last decade, as before
        return _X86_FLAGS
    lines = [line for line in text.splitlines() if line.startswith("flags") and ":" in line]
    flags = set(lines[0].split(":", 1)[1].split()) if lines else set()
    return _X86_FLAGS if {"avx2", "fma", "f16c"} <= flags else ()


def _identity(path: Path) -> tuple[int, int] | None:
    """What tells one file at ``path`` from the next (a replaced file has another inode)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def _report(progress: BuildProgressFn | None, event: BuildProgress) -> None:
    if progress is not None:
        progress(event)
