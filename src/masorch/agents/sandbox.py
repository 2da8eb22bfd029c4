"""Run untrusted, model-written Python in a separate, limited process.

``await run_sandboxed(code, limits)`` writes ``code`` to ``main.py`` in a fresh temporary
directory and runs it as ``python -I -S -B`` (isolated: no site, no user packages, no ``PYTHON*``
variables, no bytecode writes) with that directory as working directory, ``HOME`` and ``TMPDIR``,
and an environment built from scratch (nothing of the parent's is inherited, so no secrets).

Layers, from the operating system up, and what each one covers:

* **Namespaces** (``unshare --user --map-root-user --net --pid --ipc --uts --fork --kill-child
  --mount-proc``, used when the host allows it; probed once per process): a new network namespace
  with only a down loopback, so no connection to anything, host loopback included; a new PID
  namespace, so host processes are invisible and every process of the program dies with its first
  one; a new IPC namespace, so no SysV shared memory, semaphore or queue of the host is reachable
  and none outlives the run; a new UTS namespace (the host name stays the host's own).
* **Private root** (in that namespace's mount namespace, see ``_sandbox_kernel``): the child's
  ``/`` becomes a fresh read-only tmpfs with read-only bind mounts of only the import path, the
  shared libraries and a few devices, and the work directory is a private tmpfs; the host's tree
  is detached (``pivot_root``), so nothing else has a path.
* **Landlock** (applied by the program's own process before its code runs): reads only of those
  paths, writes only in the work directory, no exec, no mount changes, no TCP, no signals out.
  With the private root, each of the two holds alone (``tests/agents/test_sandbox_hostile.py``).
* **No privilege**: the program drops every capability and sets no-new-privileges.
* **System-call filter** (seccomp, x86_64 and aarch64, probed once per process): the kernel
  keyrings (the caller's session keyring is otherwise inherited, keys and all), SysV IPC (for
  hosts without the IPC namespace), ``ptrace``, ``io_uring``, ``execve``/``execveat`` (Landlock
  does not see a file with no path, such as a ``memfd``), inotify (its instances are counted per
  host user, across namespaces) and sockets of any family but Unix and IP (``AF_VSOCK`` reaches a
  VM's host, past every namespace) are refused.
* **Process count**: a ``pids`` cgroup (v1, or v2 where our cgroup delegates ``pids``) per run
  with ``pids.max = max_processes``, joined before anything else; it stops fork bombs, including
  as root. Where no cgroup can be made and masorch is not root, ``RLIMIT_NPROC`` inside the user
  namespace does the same job (the kernel ignores it for real root).
* **Memory**: a memory cgroup per run caps all of the program's processes and its work directory
  together at ``memory_mb`` (the kernel kills past it: ``killed_reason="memory_limit"``);
  ``RLIMIT_AS`` caps each process (allocations fail with ``MemoryError``).
* **CPU share**: a cpu cgroup per run caps all of the program's processes together at ``cpus``
  CPUs (1 by default), so a program cannot take every core from the runs beside it.
* **Resource limits** (hard = soft + 0 or 1 so they cannot be raised): CPU seconds
  (``RLIMIT_CPU``: exit status 152 from the prelude's handler, or SIGKILL one second later for a
  program that ignores SIGXCPU; both are ``"cpu_limit"``), file size, open files, no core dumps,
  and the kernel objects counted per host user across user namespaces: queued signals and POSIX
  timers (``RLIMIT_SIGPENDING``) and POSIX message queues (``RLIMIT_MSGQUEUE``), so a program
  cannot use up what every process of the caller's user shares.
* **Wall clock**: the whole process group is killed with SIGKILL at ``wall_s`` (and when the caller
  is cancelled); with the PID namespace, killing its first process kills all of them.
* **Caller's lifetime**: the first process is started through ``setpriv --pdeathsig KILL`` (probed
  once per process) and the program's process asks for the same from its supervisor, so a caller
  killed outright (SIGKILL, the OOM killer, a preempted job) takes its programs with it instead of
  leaving them to sleep past ``wall_s``, which only the caller enforces.
* **Audit hook** (``_sandbox_prelude.py``, installed before any user code): a first layer that
  turns the common ways out (process creation, signals, sockets, ``ctypes``, raising limits, file
  access outside the allowed paths) into clear ``PermissionError``s. Audit hooks are not a
  security boundary (PEP 578) and the hostile suite defeats this one on purpose.
* **Output**: stdout and stderr keep up to ``max_output_bytes`` each: past that, the first and the
  last half of the budget, with a line naming how many bytes were left out between them (a
  program's answer and a traceback come last); a program that prints more than 16 times that is
  killed.

A supervisor process (the prelude, before it forks the program) reports how the program ended on
a pipe the program never holds, so a kernel kill still names its limit. Layers the host cannot
provide are left out and logged (a missing kernel file layer loudly, see :func:`file_boundary`);
``SandboxResult.isolation`` names the layers that were active for each run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.agents._sandbox_cgroup import (
    controller_base,
    cpu_settings,
    make_group,
    memory_settings,
    oom_kills,
    remove_group_when_empty,
)
from masorch.agents._sandbox_kernel import landlock_abi
from masorch.agents._sandbox_leftovers import owned_prefix, sweep
from masorch.agents._sandbox_leftovers import remove_tree as _remove_tree
from masorch.errors import RunError

logger = logging.getLogger(__name__)

_PRELUDE = Path(__file__).with_name("_sandbox_prelude.py")
_NAMESPACE_ARGS = (
    "--user",
    "--map-root-user",
    "--net",
    "--pid",
    "--ipc",
    "--uts",
    "--fork",
    "--kill-child",
    "--mount-proc",
)
#: The exit status the prelude uses when the CPU limit is reached (see ``_sandbox_prelude``).
EXIT_CPU_LIMIT = 152
#: The exit status of a prelude that could not set up a promised layer (no user code ran).
EXIT_SETUP_FAILED = 125
_OUTPUT_KILL_FACTOR = 16


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run.

    ``cpu_s`` defaults to the wall limit; ``cpus`` is how many CPUs the program's processes may use
    together (a cpu cgroup's quota, where the host delegates one). ``extra_paths`` are directories
    added to the child's import path (read-only use, e.g. site-packages for numpy or sympy).
    ``namespaces`` and ``audit_hook`` exist to test each layer alone; leave them on.
    """

    wall_s: float = 10.0
    cpu_s: float | None = None
    memory_mb: int = 512
    file_size_mb: int = 16
    max_processes: int = 16
    max_open_files: int = 64
    max_output_bytes: int = 64_000
    cpus: float = 1.0
    extra_paths: tuple[str, ...] = ()
    namespaces: bool = True
    audit_hook: bool = True
    landlock: bool = True
    seccomp: bool = True

    def __post_init__(self) -> None:
        if not self.cpus > 0:
            raise ValueError(f"cpus must be a positive number of CPUs, got {self.cpus!r}")


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed program did.

    ``exit_code`` is the program's status (negative: killed by that signal); ``killed_reason``
    names the limit that stopped it: ``"wall_timeout"``, ``"cpu_limit"``, ``"memory_limit"``,
    ``"file_size_limit"`` or ``"output_limit"``, else empty; ``isolation`` names the layers that
    were active (``file_boundary`` the ones that confined its files).
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

    @property
    def file_boundary(self) -> str:
        """The layers that confined the program's files: ``"private_root+landlock"``, ..., ``"audit_hook"``.

        ``"none"`` when no layer did (every layer switched off).
        """
        layers = [name for name in ("private_root", "landlock", "audit_hook") if name in self.isolation]
        return "+".join(layers) or "none"


def site_packages() -> tuple[str, ...]:
    """The running interpreter's package directories, for ``SandboxLimits.extra_paths``."""
    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(p for p in (paths["purelib"], paths["platlib"]) if os.path.isdir(p)))


#: Set to ``1`` to offer the python agent on a host whose sandbox lacks its network namespace or
#: any kernel file boundary (see :func:`missing_boundaries`), with the layers that remain.
ALLOW_WEAK_ENV = "MASORCH_SANDBOX_ALLOW_WEAK"


@functools.lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """Whether the python agent is offered here (probed once per process).

    The sandbox must be able to start (a POSIX host with process groups and ``resource`` limits, an
    interpreter executable) and must hold its boundaries: without a network namespace (UDP, known
    Unix sockets and host loopback stay reachable) or without any kernel file boundary (only the
    audit hook, which code can defeat), model-written programs are not run unless
    ``$MASORCH_SANDBOX_ALLOW_WEAK=1`` says the deployment accepts that. cgroups are optional layers.
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
    missing = missing_boundaries()
    if missing and os.environ.get(ALLOW_WEAK_ENV, "").strip() != "1":
        logger.warning(
            "sandbox: this host gives the sandbox no %s, so the python agent is not offered; run masorch "
            "where unprivileged user namespaces are allowed, or set %s=1 to offer it with the layers "
            "that remain (docs/agents.md, Known limits)",
            " and no ".join(missing),
            ALLOW_WEAK_ENV,
        )
        return False
    return True


def missing_boundaries() -> tuple[str, ...]:
    """The sandbox boundaries this host cannot give: ``"network namespace"``, ``"kernel file boundary"``.

    Empty on a host with user namespaces and a private root or Landlock.
    """
    missing = []
    if not namespace_prefix():
        missing.append("network namespace")
    if not file_boundary():
        missing.append("kernel file boundary")
    return tuple(missing)


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
def lifetime_prefix() -> tuple[str, ...]:
    """``setpriv --pdeathsig KILL`` where this host has it (util-linux 2.33 and newer), else ``()``.

    Probed once per process: the sandbox's first process then dies with the thread that started it,
    and with it (``unshare --kill-child``, or the program's own parent-death signal) the program.
    """
    setpriv = shutil.which("setpriv")
    command = (setpriv, "--pdeathsig", "KILL") if setpriv is not None else ()
    try:
        probe = subprocess.run([*command, "true"], capture_output=True, timeout=10) if command else None
    except (OSError, subprocess.TimeoutExpired):
        probe = None
    works = probe is not None and probe.returncode == 0
    if not works:
        logger.warning(
            "sandbox: no 'setpriv --pdeathsig' on this host; a program outlives a caller that is killed "
            "outright (its CPU limit still ends a busy one)"
        )
        return ()
    return command


def pids_cgroup_base() -> Path | None:
    """A cgroup directory under which per-run ``pids`` cgroups can be made, or None (logged once)."""
    return _cgroup_base_or_warn("pids", "process counts fall back to RLIMIT_NPROC (not enforced for root)")


def memory_cgroup_base() -> Path | None:
    """A cgroup directory under which per-run memory cgroups can be made, or None (logged once)."""
    return _cgroup_base_or_warn(
        "memory", "memory_mb limits each process (RLIMIT_AS), not the program's processes together"
    )


def cpu_cgroup_base() -> Path | None:
    """A cgroup directory under which per-run cpu cgroups can be made, or None (logged once)."""
    return _cgroup_base_or_warn("cpu", "a program's processes may keep every core busy until wall_s")


def _cgroup_base_or_warn(controller: str, consequence: str) -> Path | None:
    base = controller_base(controller)
    if base is None:
        _warn_once(f"sandbox: no writable {controller} cgroup; {consequence}")
    return base


@functools.cache
def _warn_once(message: str) -> None:
    logger.warning(message)


def file_boundary() -> tuple[str, ...]:
    """The kernel layers this host gives the sandbox's file confinement: ``private_root``, ``landlock``.

    Probed once per process (a fact about the host; concurrent first runs wait for one probe).
    Each missing layer is logged as a warning; with neither, only the audit hook confines files,
    which determined code can defeat, and that is logged as an error.
    """
    with _PROBE_LOCK:
        return _probe_file_boundary()


_PROBE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _probe_file_boundary() -> tuple[str, ...]:
    layers = []
    if namespace_prefix():
        problem = _probe_private_root(namespace_prefix())
        if problem:
            logger.warning(
                "sandbox: no private root (mount namespace) on this host: %s; files are confined by "
                "Landlock alone, which leaves chmod/chown/utime of reachable files unchecked",
                problem,
            )
        else:
            layers.append("private_root")
    else:
        logger.warning(
            "sandbox: no private root: this host cannot create the sandbox namespaces; files are "
            "confined by Landlock alone, which leaves chmod/chown/utime of reachable files unchecked"
        )
    abi = landlock_abi()
    if abi:
        layers.append("landlock")
    else:
        logger.warning("sandbox: Landlock is not available in this kernel")
    if not layers:
        logger.error(
            "sandbox: NO kernel file boundary on this host (no mount namespace, no Landlock): only the "
            "Python audit hook confines file access, and determined code can defeat it"
        )
    return tuple(layers)


def _probe_private_root(prefix: tuple[str, ...]) -> str:
    root = os.path.realpath(tempfile.mkdtemp(prefix=owned_prefix() + "probe-"))
    try:
        Path(root, "main.py").write_text("import os\nprint(os.path.exists('/etc/passwd'))\n")
        config = {"root": root, "private_root": True, "work_bytes": 1 << 20, **_PROBE_LIMITS}
        argv = [*prefix, sys.executable, "-I", "-S", "-B", str(_PRELUDE), json.dumps(config)]
        done = subprocess.run(
            argv, cwd=root, env=_environment(root), capture_output=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        _remove_tree(root)
    if done.returncode != 0 or done.stdout.strip() != b"False":
        return done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
    return ""


def syscall_filter() -> bool:
    """Whether the sandbox's seccomp filter holds on this host (probed once per process, logged if not)."""
    with _PROBE_LOCK:
        return _probe_syscall_filter()


@functools.lru_cache(maxsize=1)
def _probe_syscall_filter() -> bool:
    root = os.path.realpath(tempfile.mkdtemp(prefix=owned_prefix() + "probe-"))
    try:
        # Netlink exists on every Linux: refused with EAFNOSUPPORT, it was the filter that refused it.
        Path(root, "main.py").write_text(
            "import socket\ntry:\n    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)\n"
            "except OSError as e:\n    print(e.errno)\n"
        )
        config = {"root": root, "seccomp": True, "audit_hook": False, "work_bytes": 1 << 20, **_PROBE_LIMITS}
        argv = [sys.executable, "-I", "-S", "-B", str(_PRELUDE), json.dumps(config)]
        done = subprocess.run(
            argv, cwd=root, env=_environment(root), capture_output=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    else:
        problem = (
            ""
            if done.returncode == 0 and done.stdout.strip() == b"97"
            else (done.stderr.decode(errors="replace").strip()[-300:] or f"exit status {done.returncode}")
        )
    finally:
        _remove_tree(root)
    if problem:
        logger.warning(
            "sandbox: no system-call filter (seccomp) on this host: %s; kernel keyrings, SysV IPC "
            "without the IPC namespace, ptrace, io_uring and non-IP sockets are not refused",
            problem,
        )
    return not problem


_PROBE_LIMITS = {"cpu_s": 10, "memory_bytes": 1 << 30, "file_size_bytes": 1 << 20, "max_open_files": 64}


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


class _Capture:
    """A stream's bytes within ``cap``; past it, its first and last ``cap / 2`` bytes and its size."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.overflowed = False

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if not self.overflowed:
            self.head.extend(chunk)
            if len(self.head) <= self.cap:
                return
            self.overflowed = True
            chunk = bytes(self.head[self.cap // 2 :])
            del self.head[self.cap // 2 :]
        self.tail.extend(chunk)
        del self.tail[: max(0, len(self.tail) - (self.cap - self.cap // 2))]

    def bytes(self) -> bytes:
        if not self.overflowed:
            return bytes(self.head)
        left_out = self.total - len(self.head) - len(self.tail)
        return bytes(self.head) + f"\n[... {left_out} bytes left out ...]\n".encode() + bytes(self.tail)


async def _drain(stream: asyncio.StreamReader | None, capture: _Capture, overflow: asyncio.Event) -> int:
    if stream is None:
        return 0
    while chunk := await stream.read(65536):
        capture.add(chunk)
        if capture.total > capture.cap * _OUTPUT_KILL_FACTOR:
            overflow.set()
    return capture.total


def _kill_group(process: asyncio.subprocess.Process) -> None:
    # The group id stays reserved while any member lives, so this also reaches stragglers the
    # program left behind after its first process exited.
    with contextlib.suppress(ProcessLookupError):  # the whole group is already gone
        os.killpg(process.pid, signal.SIGKILL)


#: How old a dead process's leftover must be before :func:`sweep_leftovers` removes it by default
#: (a margin for a process in another PID namespace that shares this temporary directory).
LEFTOVER_MIN_AGE_S = 600.0


def sweep_leftovers(min_age_s: float = LEFTOVER_MIN_AGE_S) -> int:
    """Remove the work directories and cgroups that runs of processes now gone left behind.

    A caller killed outright (SIGKILL, the OOM killer, a session's end) cannot remove its runs'
    entries; every name carries its maker's pid, so a later process can. :func:`run_sandboxed` does
    this once per process. Returns how many entries were removed.
    """
    bases = dict.fromkeys(b for b in (pids_cgroup_base(), memory_cgroup_base(), cpu_cgroup_base()) if b)
    return sweep([Path(tempfile.gettempdir())], list(bases), min_age_s)


@functools.lru_cache(maxsize=1)
def _swept_once() -> int:
    return sweep_leftovers()


async def run_sandboxed(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``code`` as a Python program in the sandbox and report its output and fate."""
    limits = limits or SandboxLimits()
    await asyncio.to_thread(_swept_once)
    # The first call probes the host (runs unshare and a probe child); keep that off the event loop.
    prefix = await asyncio.to_thread(namespace_prefix) if limits.namespaces else ()
    lifetime = await asyncio.to_thread(lifetime_prefix)
    boundary = await asyncio.to_thread(file_boundary)
    private_root = bool(prefix) and "private_root" in boundary
    landlock = limits.landlock and "landlock" in boundary
    seccomp = limits.seccomp and await asyncio.to_thread(syscall_filter)
    memory_bytes = limits.memory_mb * 1024 * 1024
    pids_group, memory_group, cpu_group = _cgroups(limits, memory_bytes)
    groups = [g for g in (pids_group, memory_group, cpu_group) if g is not None]
    # RLIMIT_NPROC counts every process of the uid outside a user namespace, and real root is exempt.
    use_nproc = pids_group is None and bool(prefix) and os.geteuid() != 0
    layers = {
        "pids_cgroup": pids_group is not None,
        "memory_cgroup": memory_group is not None,
        "cpu_cgroup": cpu_group is not None,
        "nproc_limit": use_nproc,
        "private_root": private_root,
        "landlock": landlock,
        "seccomp": seccomp,
        "audit_hook": limits.audit_hook,
    }
    isolation = ["fresh_env", "rlimits", "process_group"] + (["parent_death"] if lifetime else [])
    isolation += ["user_ns", "net_ns", "pid_ns", "ipc_ns", "uts_ns"] if prefix else []
    isolation += [name for name, on in layers.items() if on]
    root = os.path.realpath(tempfile.mkdtemp(prefix=owned_prefix()))
    try:
        # A lone surrogate (half an emoji from a JSON escape) has no UTF-8 form: written as "?".
        Path(root, "main.py").write_text(code, encoding="utf-8", errors="replace")
        config = {
            "root": root,
            "cpu_s": _cpu_seconds(limits),
            "memory_bytes": memory_bytes,
            "file_size_bytes": limits.file_size_mb * 1024 * 1024,
            "max_open_files": limits.max_open_files,
            "max_processes": limits.max_processes if use_nproc else None,
            "cgroup_procs": [str(group / "cgroup.procs") for group in groups],
            "extra_paths": list(limits.extra_paths),
            "audit_hook": limits.audit_hook,
            "private_root": private_root,
            "landlock": landlock,
            "seccomp": seccomp,
            # The work directory is a tmpfs in the program's memory (its pages count against it).
            "work_bytes": memory_bytes,
        }
        # The supervisor's report travels on its own pipe; _run closes the write end once spawned.
        status_read, status_write = os.pipe()
        try:
            config["status_fd"] = status_write
            argv = [*lifetime, *prefix, sys.executable, "-I", "-S", "-B", str(_PRELUDE), json.dumps(config)]
            result = await _run(argv, root, limits, tuple(isolation), (status_read, status_write))
        finally:
            os.close(status_read)
        return _with_oom(result, memory_group)
    finally:
        _remove_tree(root)
        for group in groups:
            await remove_group_when_empty(group)


def _with_oom(result: SandboxResult, memory_group: Path | None) -> SandboxResult:
    """``result``, ended by ``memory_limit`` where its memory cgroup saw an OOM kill."""
    if memory_group is not None and oom_kills(memory_group) and result.killed_reason in ("", "memory_limit"):
        return dataclasses.replace(result, killed_reason="memory_limit")
    return result


def _cpu_seconds(limits: SandboxLimits) -> int:
    return math.ceil(limits.cpu_s if limits.cpu_s is not None else limits.wall_s)


def _make_pids_cgroup(base: Path, max_processes: int) -> Path | None:
    return make_group(base, {"pids.max": str(max_processes)})


def _cgroups(limits: SandboxLimits, memory_bytes: int) -> tuple[Path | None, Path | None, Path | None]:
    """A pids, a memory and a cpu cgroup for one program, each None where the host does not delegate it."""
    pids_base, memory_base, cpu_base = pids_cgroup_base(), memory_cgroup_base(), cpu_cgroup_base()
    pids_group = _make_pids_cgroup(pids_base, limits.max_processes) if pids_base is not None else None
    memory_group = (
        make_group(memory_base, memory_settings(memory_base, memory_bytes))
        if memory_base is not None
        else None
    )
    cpu_group = make_group(cpu_base, cpu_settings(cpu_base, limits.cpus)) if cpu_base is not None else None
    return pids_group, memory_group, cpu_group


async def _run(
    argv: list[str], root: str, limits: SandboxLimits, isolation: tuple[str, ...], status: tuple[int, int]
) -> SandboxResult:
    status_read, status_write = status
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=root,
            env=_environment(root),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            pass_fds=(status_write,),
        )
    finally:
        os.close(status_write)  # the child's supervisor holds the only write end now
    out, err = _Capture(limits.max_output_bytes), _Capture(limits.max_output_bytes)
    overflow = asyncio.Event()
    drains = [
        asyncio.create_task(_drain(process.stdout, out, overflow)),
        asyncio.create_task(_drain(process.stderr, err, overflow)),
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
    exit_code, report = _program_exit(process.returncode, err.bytes(), status_read)
    if not killed_reason:
        killed_reason = _limit_reached(exit_code, float(report.get("cpu_s", 0.0)), _cpu_seconds(limits))
    truncated = len(totals) < 2 or any(total > limits.max_output_bytes for total in totals)
    return SandboxResult(
        stdout=out.bytes().decode("utf-8", errors="replace"),
        stderr=err.bytes().decode("utf-8", errors="replace"),
        exit_code=exit_code,
        timed_out=killed_reason == "wall_timeout",
        killed_reason=killed_reason,
        truncated=truncated,
        isolation=isolation,
    )


def _program_exit(
    returncode: int | None, stderr: bytes | bytearray, status_read: int
) -> tuple[int | None, dict[str, Any]]:
    """The program's exit code (negative: the signal that ended it) and the supervisor's report.

    The supervisor's own exit code is the program's unless its report says otherwise; a sandbox
    that could not be set up is a RunError. Only the supervisor's report says whether the program's
    code ran (``confined``), so a program cannot pass its own exit for a failed setup.
    """
    report = _read_status(status_read)
    if returncode == EXIT_SETUP_FAILED and not report.get("confined") and stderr.startswith(b"sandbox: "):
        raise RunError(
            f"the sandbox could not be set up: {stderr.decode(errors='replace').strip()[:300]}",
            hint="check that this process may write to its cgroups and create namespaces, or report the host",
        )
    if "signal" in report:
        return -int(report["signal"]), report
    if "exit" in report:
        return int(report["exit"]), report
    return returncode, report


def _read_status(fd: int) -> dict[str, Any]:
    # The supervisor writes one small JSON object before it exits; a dead supervisor writes none.
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 4096)
    except BlockingIOError:
        return {}
    try:
        report = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    return report if isinstance(report, dict) else {}


def _limit_reached(exit_code: int | None, cpu_used: float, cpu_limit: int) -> str:
    """The limit that ended a program the kernel or the prelude stopped, else ``""``."""
    # The CPU time is the supervisor's measurement, so a program cannot claim the limit by its exit code.
    if exit_code == EXIT_CPU_LIMIT and cpu_used >= 0.95 * cpu_limit:
        return "cpu_limit"
    # A program that ignores SIGXCPU is killed with SIGKILL at the hard limit (one second later).
    if exit_code in (-signal.SIGKILL, -signal.SIGXCPU) and cpu_used >= cpu_limit:
        return "cpu_limit"
    if exit_code == -signal.SIGXFSZ:
        return "file_size_limit"
    return ""
