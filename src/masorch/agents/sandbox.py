"""Run untrusted, model-written Python in a separate, limited process.

``await run_sandboxed(code, limits)`` writes ``code`` to ``main.py`` in a fresh temporary
directory and runs it as ``python -I -S -B`` (isolated: no site, no user packages, no ``PYTHON*``
variables, no bytecode writes) with that directory as working directory, ``HOME`` and ``TMPDIR``,
and an environment built from scratch (nothing of the parent's is inherited, so no secrets).

Layers, from the operating system up, and what each one covers:

* **Namespaces** (``unshare --user --map-root-user --net --pid --fork --kill-child --mount-proc``,
  used when the host allows it; probed once per process): a new network namespace with only a
  down loopback, so no connection to anything, host loopback included; a new PID namespace with
  its own ``/proc``, so host processes (and their environments) are invisible and every process
  of the program dies with its first one.
* **Process count**: a ``pids`` cgroup (v1 ``/sys/fs/cgroup/pids``, or v2 where our cgroup
  delegates ``pids``) created per run with ``pids.max = max_processes``, which the child joins
  before anything else; it stops fork bombs, including as root. Where no cgroup can be made and
  masorch is not root, ``RLIMIT_NPROC`` inside the user namespace does the same job (counting the
  sandbox's own processes only); the kernel ignores ``RLIMIT_NPROC`` for real root.
* **Resource limits** (set by the prelude before the program starts, hard = soft so they cannot be
  raised): CPU seconds (``RLIMIT_CPU``; the child exits with status 152), address space
  (``RLIMIT_AS``: allocations fail with ``MemoryError``), file size (``RLIMIT_FSIZE``), open
  files, no core dumps.
* **Wall clock**: the whole process group is killed with SIGKILL at ``wall_s`` (and when the caller
  is cancelled); with the PID namespace, killing its first process kills all of them.
* **Audit hook** (``_sandbox_prelude.py``, installed before any user code): refuses process
  creation (fork, exec, spawn, ``subprocess``, ``os.system``; the raw ``_posixsubprocess`` entry is
  replaced), signals to other processes, socket connect/bind/send and name lookups, raw ``ctypes``
  calls, raising limits, opening files for writing or renaming/removing/changing anything outside
  the sandbox directory, and reading files other than the sandbox's, the interpreter's and its
  import path's, and a short list of system data (``/usr/share``, ``/usr/lib``, time zone, ...):
  no home directories, data sets or credentials, no other process's ``/proc``. Audit hooks are not a
  security boundary against determined code (PEP 578); this layer turns the common ways out into
  clear ``PermissionError``s, and it is the only layer that confines file reads and writes (the
  child's user namespace maps it to the caller's uid, so file permissions are the caller's).
* **Output**: stdout and stderr are captured up to ``max_output_bytes`` each (the rest is dropped;
  a program that prints more than 16 times that is killed).

Layers the host cannot provide are left out and logged once; ``SandboxResult.isolation`` names the
layers that were active for each run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from masorch.errors import RunError

logger = logging.getLogger(__name__)

_PRELUDE = Path(__file__).with_name("_sandbox_prelude.py")
_NAMESPACE_ARGS = ("--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--mount-proc")
#: The exit status the prelude uses when the CPU limit is reached (see ``_sandbox_prelude``).
EXIT_CPU_LIMIT = 152
#: The exit status of a prelude that could not set up a promised layer (no user code ran).
EXIT_SETUP_FAILED = 125
_OUTPUT_KILL_FACTOR = 16


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run.

    ``cpu_s`` defaults to the wall limit. ``extra_paths`` are directories added to the child's
    import path (read-only use, e.g. site-packages for numpy or sympy). ``namespaces`` and
    ``audit_hook`` exist to test each layer alone; leave them on.
    """

    wall_s: float = 10.0
    cpu_s: float | None = None
    memory_mb: int = 512
    file_size_mb: int = 16
    max_processes: int = 16
    max_open_files: int = 64
    max_output_bytes: int = 64_000
    extra_paths: tuple[str, ...] = ()
    namespaces: bool = True
    audit_hook: bool = True


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed program did.

    ``exit_code`` is the process status (negative: killed by that signal); ``killed_reason`` is
    empty, ``"wall_timeout"``, ``"cpu_limit"`` or ``"output_limit"``; ``isolation`` names the
    layers that were active.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    killed_reason: str = ""
    truncated: bool = False
    isolation: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The program ran to completion and exited with status 0."""
        return self.exit_code == 0 and not self.killed_reason


def site_packages() -> tuple[str, ...]:
    """The running interpreter's package directories, for ``SandboxLimits.extra_paths``."""
    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(p for p in (paths["purelib"], paths["platlib"]) if os.path.isdir(p)))


@functools.lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """Whether the sandbox can start here: a POSIX host (process groups, ``resource`` limits) and an
    interpreter executable to run the program with. Namespaces and cgroups are optional layers.
    """
    if os.name != "posix" or not hasattr(os, "killpg"):
        logger.info("sandbox: not a POSIX host; the python agent is not offered")
        return False
    if not sys.executable or not os.access(sys.executable, os.X_OK):
        logger.info(
            "sandbox: no interpreter executable (sys.executable=%r); python is not offered", sys.executable
        )
        return False
    try:
        import resource  # noqa: F401  # the prelude sets its limits with it
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def namespace_prefix() -> tuple[str, ...]:
    """The ``unshare`` command prefix if this host can create the sandbox namespaces, else ``()``.

    Probed once per process (a fact about the host): runs ``unshare ... true``.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        logger.warning("sandbox: 'unshare' not found; running without namespaces")
        return ()
    command = (unshare, *_NAMESPACE_ARGS)
    try:
        probe = subprocess.run([*command, "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("sandbox: namespaces unavailable (%s); running without them", exc)
        return ()
    if probe.returncode != 0:
        logger.warning(
            "sandbox: namespaces unavailable (%s); running without them",
            probe.stderr.decode(errors="replace").strip(),
        )
        return ()
    return (*command, "--")


@functools.lru_cache(maxsize=1)
def pids_cgroup_base() -> Path | None:
    """A cgroup directory under which per-run ``pids`` cgroups can be made, or None.

    Found once per process (a fact about the host) from ``/proc/self/cgroup``: the cgroup v1
    ``pids`` hierarchy, or a cgroup v2 directory whose ``cgroup.subtree_control`` enables ``pids``.
    """
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates: list[Path] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            candidates.append(Path("/sys/fs/cgroup/pids") / path.lstrip("/"))
        elif controllers == "":
            unified = Path("/sys/fs/cgroup") / path.lstrip("/")
            try:
                if "pids" in (unified / "cgroup.subtree_control").read_text().split():
                    candidates.append(unified)
            except OSError:
                continue
    for base in candidates:
        if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
            return base
    logger.warning(
        "sandbox: no writable pids cgroup; process counts fall back to RLIMIT_NPROC (not enforced for root)"
    )
    return None


def _make_pids_cgroup(base: Path, max_processes: int) -> Path | None:
    group = Path(tempfile.mkdtemp(prefix="masorch-sandbox-", dir=base))
    try:
        (group / "pids.max").write_text(str(max_processes))
    except OSError as exc:
        logger.warning("sandbox: could not limit processes in %s: %s", group, exc)
        _remove_cgroup(group)
        return None
    return group


async def _remove_cgroup_when_empty(group: Path) -> None:
    # A dying namespace's processes leave the cgroup a moment after its first process is reaped.
    for _ in range(40):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            await asyncio.sleep(0.05)
    _remove_cgroup(group)


def _remove_cgroup(group: Path) -> None:
    try:
        group.rmdir()
    except OSError as exc:
        logger.warning("sandbox: could not remove cgroup %s: %s", group, exc)


def _environment(root: str) -> dict[str, str]:
    # Built from nothing: the parent's environment (API keys, tokens) never reaches the child.
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": root,
        "TMPDIR": root,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MPLCONFIGDIR": root,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


async def _drain(
    stream: asyncio.StreamReader | None, buffer: bytearray, cap: int, overflow: asyncio.Event
) -> int:
    total = 0
    if stream is None:
        return total
    while chunk := await stream.read(65536):
        total += len(chunk)
        if len(buffer) < cap:
            buffer.extend(chunk[: cap - len(buffer)])
        if total > cap * _OUTPUT_KILL_FACTOR:
            overflow.set()
    return total


def _kill_group(process: asyncio.subprocess.Process) -> None:
    # The group id stays reserved while any member lives, so this also reaches stragglers the
    # program left behind after its first process exited.
    with contextlib.suppress(ProcessLookupError):  # the whole group is already gone
        os.killpg(process.pid, signal.SIGKILL)


async def run_sandboxed(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``code`` as a Python program in the sandbox and report its output and fate."""
    limits = limits or SandboxLimits()
    # The first call probes the host (runs unshare once); keep that off the event loop.
    prefix = await asyncio.to_thread(namespace_prefix) if limits.namespaces else ()
    cgroup_base = pids_cgroup_base()
    group = _make_pids_cgroup(cgroup_base, limits.max_processes) if cgroup_base is not None else None
    # RLIMIT_NPROC counts every process of the uid outside a user namespace, and real root is exempt.
    use_nproc = group is None and bool(prefix) and os.geteuid() != 0
    isolation = ["fresh_env", "rlimits", "process_group"]
    if prefix:
        isolation += ["user_ns", "net_ns", "pid_ns"]
    if group is not None:
        isolation.append("pids_cgroup")
    if use_nproc:
        isolation.append("nproc_limit")
    if limits.audit_hook:
        isolation.append("audit_hook")
    root = os.path.realpath(tempfile.mkdtemp(prefix="masorch-sandbox-"))
    try:
        Path(root, "main.py").write_text(code, encoding="utf-8")
        config = {
            "root": root,
            "cpu_s": math.ceil(limits.cpu_s if limits.cpu_s is not None else limits.wall_s),
            "memory_bytes": limits.memory_mb * 1024 * 1024,
            "file_size_bytes": limits.file_size_mb * 1024 * 1024,
            "max_open_files": limits.max_open_files,
            "max_processes": limits.max_processes if use_nproc else None,
            "cgroup_procs": str(group / "cgroup.procs") if group is not None else None,
            "extra_paths": list(limits.extra_paths),
            "audit_hook": limits.audit_hook,
        }
        argv = [*prefix, sys.executable, "-I", "-S", "-B", str(_PRELUDE), json.dumps(config)]
        return await _run(argv, root, limits, tuple(isolation))
    finally:
        _remove_tree(root)
        if group is not None:
            await _remove_cgroup_when_empty(group)


def _remove_tree(root: str) -> None:
    def log_error(function: object, path: str, error: object) -> None:
        logger.warning("sandbox: could not remove %s: %s", path, error)

    if sys.version_info >= (3, 12):
        shutil.rmtree(root, onexc=log_error)
    else:
        shutil.rmtree(root, onerror=log_error)


async def _run(
    argv: list[str], root: str, limits: SandboxLimits, isolation: tuple[str, ...]
) -> SandboxResult:
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=root,
        env=_environment(root),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    out, err = bytearray(), bytearray()
    overflow = asyncio.Event()
    drains = [
        asyncio.create_task(_drain(process.stdout, out, limits.max_output_bytes, overflow)),
        asyncio.create_task(_drain(process.stderr, err, limits.max_output_bytes, overflow)),
    ]
    waiter = asyncio.create_task(process.wait())
    overflowed = asyncio.create_task(overflow.wait())
    killed_reason = ""
    try:
        done, _ = await asyncio.wait(
            {waiter, overflowed}, timeout=limits.wall_s, return_when="FIRST_COMPLETED"
        )
        if waiter not in done:
            killed_reason = "output_limit" if overflowed in done else "wall_timeout"
            _kill_group(process)
        await waiter
        # Output pipes close when the last process holding them dies; do not wait on stragglers.
        finished, unfinished = await asyncio.wait(drains, timeout=2.0)
        for task in unfinished:
            task.cancel()
        totals = [task.result() for task in finished]
    finally:
        _kill_group(process)
        overflowed.cancel()
        for task in (*drains, waiter):
            if not task.done():
                task.cancel()
    exit_code = process.returncode
    if exit_code == EXIT_SETUP_FAILED and err.startswith(b"sandbox: "):
        raise RunError(
            f"the sandbox could not be set up: {err.decode(errors='replace').strip()}",
            hint="check that this process may write to the pids cgroup, or run where cgroups are writable",
        )
    if not killed_reason and exit_code == EXIT_CPU_LIMIT:
        killed_reason = "cpu_limit"
    truncated = len(totals) < 2 or any(total > limits.max_output_bytes for total in totals)
    return SandboxResult(
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        exit_code=exit_code,
        timed_out=killed_reason == "wall_timeout",
        killed_reason=killed_reason,
        truncated=truncated,
        isolation=isolation,
    )
