"""Runs first inside a sandbox child process: boundary, limits, guards, then the user's program.

Started as ``python -I -S -B _sandbox_prelude.py CONFIG_JSON`` by :mod:`masorch.agents.sandbox`
(never imported by masorch itself). It joins the run's cgroups, builds the private root
(``_sandbox_kernel``), then forks: the child confines itself with Landlock, drops every
capability, lowers resource limits, patches the raw process-spawn primitive, installs an audit
hook that refuses network, process creation, signals to other processes, writes outside the
sandbox directory and reads outside it, the interpreter, the import path and a few system data
files, and only then runs ``main.py`` as ``__main__``; this process supervises it and reports how
it ended. Standard library only: the child may not see any other package.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import resource
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

#: Exit status the child uses when its CPU time limit is reached (128 + SIGXCPU).
EXIT_CPU_LIMIT = 152
#: Exit status when the sandbox could not be set up as promised (nothing of the program ran).
EXIT_SETUP_FAILED = 125

_ALWAYS_BLOCKED = frozenset(
    {
        # process creation and replacement
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.spawn",
        "os.exec",
        "os.system",
        "subprocess.Popen",
        "pty.spawn",
        # signals to other processes
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        # network
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.sethostname",
        "urllib.Request",
        # raw foreign calls would bypass every check below
        "ctypes.call_function",
        "ctypes.dlsym",
        "ctypes.dlsym/handle",
        "ctypes.cdata",
        # limits stay as set; the guard's objects stay out of reach
        "resource.setrlimit",
        "resource.prlimit",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)

#: Path-changing events: (event, indexes of the path arguments that must stay in the sandbox).
_PATH_EVENTS: dict[str, tuple[int, ...]] = {
    "os.rename": (0, 1),
    "os.link": (1,),
    "os.symlink": (1,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "os.chflags": (0,),
    "os.lchflags": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.copyfile": (1,),
    "shutil.copymode": (1,),
    "shutil.copystat": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
    "shutil.rmtree": (0,),
    "shutil.chown": (0,),
}

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
#: System files and directories a program may read besides the sandbox and the import path.
_READABLE = (
    "/usr/share",
    "/usr/lib",
    "/usr/local/lib",
    "/lib",
    "/lib64",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/os-release",
    "/etc/mime.types",
    "/etc/ssl",
    "/proc/cpuinfo",
    "/proc/meminfo",
)


#: Queued signals and POSIX timers a program may hold (the host's default is thousands per user).
_MAX_PENDING_SIGNALS = 64


def _set_limits(config: dict[str, Any]) -> None:
    cpu = int(config["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(config["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = int(config["file_size_bytes"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    files = int(config["max_open_files"])
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Counted per host user across user namespaces: without a cap a program could queue signals or
    # timers, or fill message queues, until every process of the caller's user is refused them.
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (_MAX_PENDING_SIGNALS, _MAX_PENDING_SIGNALS))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    if config.get("max_processes") is not None:
        nproc = int(config["max_processes"])
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _on_cpu_limit(signum: int, frame: object) -> None:
    os.write(2, b"\nsandbox: CPU time limit exceeded\n")
    os._exit(EXIT_CPU_LIMIT)


def _deny_spawn(*args: object, **kwargs: object) -> None:
    raise PermissionError("sandbox: starting processes is not allowed")


def _path_name(path: object) -> str | None:
    if isinstance(path, (str, bytes, os.PathLike)):
        return os.fsdecode(path)
    return None


def _under(real: str, roots: tuple[str, ...]) -> bool:
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _make_hook(root: str, read_roots: tuple[str, ...]) -> Callable[[str, tuple[Any, ...]], None]:
    own_proc = f"/proc/{os.getpid()}"
    write_roots = (root, "/dev/null")
    readable = (*write_roots, *read_roots, own_proc, *_READABLE)

    def allowed(path: object, roots: tuple[str, ...], dir_fd: object = None) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor
        name = _path_name(path)
        if name is None or (dir_fd is not None and not os.path.isabs(name)):
            return False
        return _under(os.path.realpath(name), roots)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in _ALWAYS_BLOCKED:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open":
            path, flags = args[0], args[2]
            if isinstance(flags, int) and flags & _WRITE_FLAGS:
                if not allowed(path, write_roots):
                    raise PermissionError(
                        f"sandbox: writing outside the sandbox directory is not allowed: {path!r}"
                    )
            elif not allowed(path, readable):
                raise PermissionError(f"sandbox: reading {path!r} is not allowed (outside the sandbox)")
        elif event in _PATH_EVENTS:
            for index in _PATH_EVENTS[event]:
                if index < len(args) and not allowed(args[index], write_roots):
                    raise PermissionError(f"sandbox: {event} outside the sandbox directory is not allowed")
        elif event == "import" and args and args[0] == "_posixsubprocess":
            raise PermissionError("sandbox: re-importing _posixsubprocess is not allowed")

    return hook


def _print_user_traceback(exc: BaseException, program: str) -> None:
    # Show the program's frames only: the prelude and runpy frames would only confuse the model.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != program:
        tb = tb.tb_next
    report = traceback.TracebackException(type(exc), exc, tb if tb is not None else exc.__traceback__)
    report.stack = traceback.StackSummary.from_list(
        [frame for frame in report.stack if frame.filename != __file__]
    )
    sys.stderr.write("".join(report.format()))


def _load_kernel() -> Any:
    # A sibling file loaded by path: the child's import path holds the standard library only.
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sandbox_kernel.py")
    spec = importlib.util.spec_from_file_location("_masorch_sandbox_kernel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _setup_failed(what: str, exc: BaseException) -> None:
    sys.stderr.write(f"sandbox: {what}: {exc}\n")
    sys.stderr.flush()
    os._exit(EXIT_SETUP_FAILED)


def main() -> None:
    """Set up the boundary from the JSON config in ``argv[1]``, then run the program in a child.

    This process stays outside the program's Landlock domain as its supervisor (the PID
    namespace's init where there is one): it waits for the program's process and writes how it
    ended (exit status or signal, CPU seconds) to the status descriptor, which the program never
    holds, so a program killed by the kernel still has its cause reported.
    """
    config = json.loads(sys.argv[1])
    for procs_file in config.get("cgroup_procs", ()):
        # Join the run's cgroups before anything else can fork; refuse to run without them.
        try:
            with open(procs_file, "w") as procs:
                procs.write("0")
        except OSError as exc:
            _setup_failed("could not join the run's cgroup", exc)
    root = os.path.realpath(config["root"])
    program = os.path.join(root, "main.py")
    extra = [p for p in config.get("extra_paths", ()) if p]
    import_path = [p for p in sys.path if p and os.path.exists(p)]
    kernel = _load_kernel()
    read_paths = [*import_path, *extra, *kernel.SYSTEM_READ]
    if config.get("private_root"):
        try:
            with open(program, "rb") as handle:
                source = handle.read()
            kernel.enter_private_root(root, root, read_paths, {"main.py": source}, int(config["work_bytes"]))
        except OSError as exc:
            _setup_failed("could not build the private root", exc)
    else:
        os.chdir(root)
    try:
        # The supervisor keeps no privilege either: a program that reached it would gain nothing.
        kernel.drop_capabilities()
    except OSError as exc:
        _setup_failed("could not drop privileges", exc)
    status_fd = config.get("status_fd")
    # The program's process writes one byte here once it is confined, just before the user's code
    # runs, and closes it: the supervisor then knows whether an exit came from setup or from the code.
    ready_read, ready_write = os.pipe()
    supervisor = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:  # a supervisor killed outright (its caller died) takes the program with it
            kernel.die_with_parent(supervisor)
        except OSError as exc:
            _setup_failed("could not tie the program to its supervisor", exc)
        os.close(ready_read)
        if status_fd is not None:
            os.close(status_fd)
        _run_program(config, kernel, root, program, read_paths, ready_write)
        return
    os.close(ready_write)
    _supervise(pid, status_fd, ready_read)


def _supervise(pid: int, status_fd: int | None, ready_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    os.set_blocking(ready_fd, False)
    try:
        confined = os.read(ready_fd, 1) == b"1"
    except BlockingIOError:
        confined = False
    report: dict[str, Any] = {"cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "confined": confined}
    if os.WIFSIGNALED(status):
        report["signal"] = os.WTERMSIG(status)
        code = 128 + report["signal"]
    else:
        code = report["exit"] = os.waitstatus_to_exitcode(status)
    if status_fd is not None:
        with contextlib.suppress(OSError):
            os.write(status_fd, json.dumps(report).encode())
    os._exit(code)


def _run_program(
    config: dict[str, Any], kernel: Any, root: str, program: str, read_paths: list[str], ready_fd: int
) -> None:
    try:
        if config.get("landlock"):
            kernel.restrict_with_landlock([*read_paths, *kernel.DEVICES], [root, "/dev/null"])
        kernel.drop_capabilities()
        if config.get("seccomp"):
            kernel.restrict_syscalls()
    except OSError as exc:
        _setup_failed("could not confine the program", exc)
    _set_limits(config)
    signal.signal(signal.SIGXCPU, _on_cpu_limit)
    faulthandler.enable()  # a crash in C code still leaves a Python traceback for the model
    sys.path[:0] = [root]
    sys.path.extend(config.get("extra_paths", ()))
    sys.argv = [program]
    if config.get("audit_hook", True):
        import _posixsubprocess

        _posixsubprocess.fork_exec = _deny_spawn  # type: ignore[assignment]
        # Reads are confined to the sandbox, the interpreter and its import path, and system data:
        # not the caller's home, data sets (with their answers) or credentials.
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
        read_roots = tuple(os.path.realpath(p) for p in (*prefixes, *sys.path) if p)
        sys.addaudithook(_make_hook(root, read_roots))
    import runpy

    os.write(ready_fd, b"1")  # confined: what ends the process from here on is the program's doing
    os.close(ready_fd)
    try:
        runpy.run_path(program, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as exc:
        _print_user_traceback(exc, program)
        sys.exit(1)


if __name__ == "__main__":
    main()
