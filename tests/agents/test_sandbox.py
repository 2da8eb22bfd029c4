"""The sandbox: ordinary programs run; hostile ones are contained, each layer checked alone too."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from masorch.agents.sandbox import (
    SandboxLimits,
    SandboxResult,
    cpu_cgroup_base,
    file_boundary,
    lifetime_prefix,
    memory_cgroup_base,
    namespace_prefix,
    pids_cgroup_base,
    run_sandboxed,
    sweep_leftovers,
    syscall_filter,
)
from masorch.errors import RunError

needs_namespaces = pytest.mark.skipif(not namespace_prefix(), reason="this host cannot create namespaces")
FAST = SandboxLimits(wall_s=5.0)
HOOK_ONLY = SandboxLimits(wall_s=5.0, namespaces=False)
NAMESPACES_ONLY = SandboxLimits(wall_s=5.0, audit_hook=False)


def program(source: str) -> str:
    return textwrap.dedent(source).strip() + "\n"


async def test_runs_a_program_and_captures_output():
    result = await run_sandboxed("import math\nprint(math.factorial(10))\n", FAST)
    assert result.ok and result.stdout == "3628800\n" and result.stderr == ""
    assert "fresh_env" in result.isolation and "audit_hook" in result.isolation


async def test_a_crash_reports_the_programs_traceback_only():
    result = await run_sandboxed("x = 1\nraise ValueError('bad value')\n", FAST)
    assert not result.ok and result.exit_code == 1
    assert "ValueError: bad value" in result.stderr and "main.py" in result.stderr
    assert "_sandbox_prelude" not in result.stderr and "runpy" not in result.stderr


async def test_writes_inside_the_sandbox_directory_are_allowed():
    code = program(
        """
        import os, pathlib
        pathlib.Path("data.txt").write_text("hello")
        os.makedirs("sub/dir")
        os.rename("data.txt", "sub/dir/data.txt")
        print(open(os.path.join(os.environ["HOME"], "sub/dir/data.txt")).read())
        """
    )
    result = await run_sandboxed(code, FAST)
    assert result.ok and result.stdout.strip() == "hello"


NETWORK = program(
    """
    import socket, sys
    port = int(sys.argv[0] and {port})
    attempts = {{
        "connect host loopback": lambda: socket.create_connection(("127.0.0.1", port), timeout=2),
        "dns": lambda: socket.getaddrinfo("example.com", 80),
        "connect outside": lambda: socket.create_connection(("1.1.1.1", 53), timeout=2),
        "udp send": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("1.1.1.1", 53)),
    }}
    for name, attempt in attempts.items():
        try:
            attempt()
            print("REACHED", name)
        except OSError as exc:
            print("blocked", name, type(exc).__name__)
    """
)


@pytest.mark.parametrize(
    "limits",
    [FAST, HOOK_ONLY, pytest.param(NAMESPACES_ONLY, marks=needs_namespaces)],
    ids=["all_layers", "audit_hook_only", "namespaces_only"],
)
async def test_network_is_unreachable(limits):
    connections = []
    server = await asyncio.start_server(lambda r, w: connections.append(w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        result = await run_sandboxed(NETWORK.format(port=port), limits)
    finally:
        server.close()
    assert result.ok, result.stderr
    assert "REACHED" not in result.stdout
    assert result.stdout.count("blocked") == 4
    assert connections == []


WRITES = program(
    """
    import os, pathlib, shutil
    target, victim = {target!r}, {victim!r}
    open("inside.txt", "w").write("ok")
    attempts = {{
        "open": lambda: open(target, "w").write("pwned"),
        "append": lambda: open(victim, "a").write("pwned"),
        "os.open": lambda: os.open(target, os.O_WRONLY | os.O_CREAT),
        "pathlib": lambda: pathlib.Path(target).write_text("pwned"),
        "rename out": lambda: os.rename("inside.txt", target),
        "remove": lambda: os.remove(victim),
        "copy": lambda: shutil.copy("inside.txt", target),
        "symlink": lambda: (os.symlink(victim, "link"), open("link", "w").write("pwned")),
        "chmod": lambda: os.chmod(victim, 0o777),
        "relative escape": lambda: open("../" + os.path.basename(os.getcwd()) + "-escape", "w"),
    }}
    for name, attempt in attempts.items():
        try:
            attempt()
            print("WROTE", name)
        except OSError as exc:
            print("blocked", name, type(exc).__name__)
    """
)


async def test_no_writes_outside_the_sandbox_directory(tmp_path):
    target, victim = tmp_path / "target.txt", tmp_path / "victim.txt"
    victim.write_text("original")
    os.chmod(victim, 0o644)
    result = await run_sandboxed(WRITES.format(target=str(target), victim=str(victim)), FAST)
    assert result.ok, result.stderr
    assert "WROTE" not in result.stdout and result.stdout.count("blocked") == 10
    assert not target.exists()
    assert victim.read_text() == "original" and (victim.stat().st_mode & 0o777) == 0o644


SPAWN = program(
    """
    import os, subprocess, pty, multiprocessing
    import _posixsubprocess
    attempts = {
        "subprocess.run": lambda: subprocess.run(["echo", "spawned"]),
        "os.system": lambda: os.system("echo spawned"),
        "os.popen": lambda: os.popen("echo spawned").read(),
        "os.execv": lambda: os.execv("/bin/echo", ["echo", "spawned"]),
        "os.posix_spawn": lambda: os.posix_spawn("/bin/echo", ["echo", "spawned"], {}),
        "os.fork": lambda: os.fork(),
        "pty.fork": lambda: pty.fork(),
        "fork_exec": lambda: _posixsubprocess.fork_exec(*[None] * 23),
        "multiprocessing": lambda: multiprocessing.Process(target=print).start(),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            print("SPAWNED", name)
        except (OSError, TypeError) as exc:
            print("blocked", name, type(exc).__name__)
    """
)


async def test_no_subprocesses():
    result = await run_sandboxed(SPAWN, FAST)
    assert result.ok, result.stderr
    assert "SPAWNED" not in result.stdout and "spawned" not in result.stdout
    assert result.stdout.count("blocked") == 9


async def test_fork_bomb_is_stopped_by_the_audit_hook():
    start = time.perf_counter()
    result = await run_sandboxed("import os\nwhile True:\n    os.fork()\n", FAST)
    assert result.exit_code == 1 and "PermissionError" in result.stderr
    assert time.perf_counter() - start < 3


@pytest.mark.skipif(
    pids_cgroup_base() is None and (not namespace_prefix() or os.geteuid() == 0),
    reason="no process-count layer on this host (no pids cgroup; NPROC does not bind root)",
)
async def test_fork_bomb_is_stopped_by_the_process_limit_without_the_hook():
    code = program(
        """
        import os, time
        children = 0
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            children += 1
        print(children)
        """
    )
    start = time.perf_counter()
    result = await run_sandboxed(code, SandboxLimits(wall_s=10.0, max_processes=8, audit_hook=False))
    assert result.ok, result.stderr
    assert int(result.stdout) < 8
    assert "pids_cgroup" in result.isolation or "nproc_limit" in result.isolation
    # The sleeping children die with the namespace's first process, so the run ends at once.
    assert time.perf_counter() - start < 5


async def test_memory_hog_fails_with_memory_error():
    start = time.perf_counter()
    result = await run_sandboxed("hog = bytearray(2 * 1024 ** 3)\n", SandboxLimits(wall_s=5.0, memory_mb=256))
    assert result.exit_code == 1 and "MemoryError" in result.stderr
    assert time.perf_counter() - start < 3


async def test_infinite_loop_is_killed_at_the_wall_limit():
    start = time.perf_counter()
    result = await run_sandboxed("while True:\n    pass\n", SandboxLimits(wall_s=1.0, cpu_s=10))
    elapsed = time.perf_counter() - start
    assert result.timed_out and result.killed_reason == "wall_timeout" and not result.ok
    assert elapsed < 3


async def test_cpu_limit_stops_a_busy_program():
    result = await run_sandboxed("while True:\n    pass\n", SandboxLimits(wall_s=10.0, cpu_s=1))
    assert result.killed_reason == "cpu_limit" and not result.timed_out
    assert "CPU time limit" in result.stderr


async def test_output_flood_is_truncated_and_killed():
    limits = SandboxLimits(wall_s=5.0, max_output_bytes=1000)
    result = await run_sandboxed("while True:\n    print('x' * 1000)\n", limits)
    assert result.killed_reason == "output_limit" and result.truncated
    kept, _, tail = result.stdout.partition(" bytes left out ...]\n")
    head, marker, count = kept.rpartition("\n[... ")
    assert head == "x" * 500 and marker and len(tail) == 500
    # Killed once a stream passed 16 times its budget: all it printed is more than that.
    assert len(head) + int(count) + len(tail) > 16 * 1000


async def test_large_output_keeps_its_first_and_last_bytes():
    result = await run_sandboxed("print('y' * 5000)\n", SandboxLimits(wall_s=5.0, max_output_bytes=1000))
    assert result.ok and result.truncated
    assert result.stdout == "y" * 500 + "\n[... 4001 bytes left out ...]\n" + "y" * 499 + "\n"


async def test_truncated_output_keeps_the_answer_and_the_traceback_at_its_end():
    # About 5,000 bytes: over the cap, under the 16-fold flood that kills the program.
    code = "for i in range(600):\n    print('noise', i)\nprint('ANSWER 42')\nraise ValueError('late')\n"
    result = await run_sandboxed(code, SandboxLimits(wall_s=5.0, max_output_bytes=1000))
    assert result.truncated and not result.ok and not result.killed_reason
    assert result.stdout.startswith("noise 0\n") and result.stdout.endswith("noise 599\nANSWER 42\n")
    assert len(result.stdout) < 1100
    assert result.stderr.rstrip().endswith("ValueError: late")


SNOOP = program(
    """
    import os
    print("SECRET" if "MASORCH_FAKE_SECRET" in os.environ else "env clean")
    found = []
    try:
        pids = os.listdir("/proc")
    except OSError:  # the private root has no /proc
        pids = []
    for pid in pids:
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if b"hunter2" in handle.read():
                    found.append(pid)
        except OSError:
            pass
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as handle:
            parent = b"hunter2" in handle.read()
    except OSError:
        parent = False
    print("LEAK" if found or parent else "proc clean")
    """
)


@pytest.mark.parametrize("namespaces", [True, False], ids=["all_layers", "without_namespaces"])
def test_environment_secrets_do_not_reach_the_program(namespaces):
    # A parent whose *initial* environment holds the secret, so /proc/<parent>/environ has it too.
    launcher = (
        "import asyncio, sys\n"
        "from masorch.agents.sandbox import SandboxLimits, run_sandboxed\n"
        "code = sys.stdin.read()\n"
        f"r = asyncio.run(run_sandboxed(code, SandboxLimits(wall_s=5.0, namespaces={namespaces})))\n"
        "print(r.stdout, r.stderr)\n"
    )
    src = Path(__file__).parents[2] / "src"
    env = {**os.environ, "MASORCH_FAKE_SECRET": "hunter2", "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", launcher], input=SNOOP, capture_output=True, text=True, env=env, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert "env clean" in done.stdout and "proc clean" in done.stdout, done.stdout


async def test_cancelling_the_caller_kills_the_program(tmp_path):
    # Without namespaces, Landlock and hook, so the program can tell the test its host pid.
    pid_file = tmp_path / "pid"
    code = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(30)\n"
    limits = SandboxLimits(wall_s=60.0, namespaces=False, audit_hook=False, landlock=False)
    task = asyncio.create_task(run_sandboxed(code, limits))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if pid_file.exists() and pid_file.read_text():
            break
    pid = int(pid_file.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(40):
        if not _alive(pid):  # a zombie counts as gone: where PID 1 does not reap, it stays listed
            break
        await asyncio.sleep(0.05)
    assert not _alive(pid)


async def test_the_program_sees_the_standard_library_only_unless_paths_are_given():
    code = "import importlib.util as u\nprint([u.find_spec(m) is None for m in ('masorch', 'numpy')])\n"
    bare = await run_sandboxed(code, FAST)
    assert bare.ok and bare.stdout.strip() == "[True, True]"
    numpy_dir = str(Path(__import__("numpy").__file__).parents[1])
    with_packages = await run_sandboxed(code, SandboxLimits(wall_s=5.0, extra_paths=(numpy_dir,)))
    assert with_packages.ok and with_packages.stdout.strip().endswith("False]")


async def test_a_layer_that_cannot_be_set_up_is_a_run_error(tmp_path, monkeypatch):
    import masorch.agents.sandbox as sandbox

    monkeypatch.setattr(sandbox, "pids_cgroup_base", lambda: tmp_path)
    monkeypatch.setattr(sandbox, "_make_pids_cgroup", lambda base, n: tmp_path / "no-such-cgroup")
    with pytest.raises(RunError, match="could not join the run's cgroup"):
        await run_sandboxed("print('never runs')\n", FAST)


async def test_reads_are_confined_to_the_sandbox_interpreter_and_system_data(tmp_path):
    secret = tmp_path / "answers.jsonl"
    secret.write_text('{"answer": "42"}')
    code = program(
        f"""
        import os, json
        for path in ({str(secret)!r}, "/etc/shadow", os.path.expanduser("~/../../root/.bashrc")):
            try:
                print("READ", open(path).read()[:20])
            except OSError as exc:
                print("blocked", type(exc).__name__)
        print("stdlib", len(open(json.__file__).read()) > 0)
        """
    )
    result = await run_sandboxed(code, FAST)
    assert result.ok, result.stderr
    assert "READ" not in result.stdout and result.stdout.count("blocked") == 3
    assert "stdlib True" in result.stdout


async def test_a_crash_in_c_code_is_reported_with_a_traceback():
    code = "import ctypes\nctypes.string_at(0)\n"  # ctypes is refused by the hook, so turn it off
    result = await run_sandboxed(code, SandboxLimits(wall_s=5.0, audit_hook=False))
    assert result.exit_code == -11 and not result.ok
    assert "Segmentation fault" in result.stderr and "main.py" in result.stderr


async def test_a_program_that_ignores_sigxcpu_is_killed_and_named():
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n"
    result = await run_sandboxed(code, SandboxLimits(wall_s=10.0, cpu_s=1))
    # The kernel's SIGKILL at the hard limit; the supervisor's report names the limit.
    assert result.killed_reason == "cpu_limit" and not result.timed_out
    assert result.exit_code == -9 and not result.ok


@pytest.mark.skipif(memory_cgroup_base() is None, reason="no writable memory cgroup on this host")
async def test_the_memory_limit_holds_across_processes():
    # Six children of 48 MB each under a 128 MB limit: each fits RLIMIT_AS, together they do not.
    code = program(
        """
        import os, time
        children = []
        for _ in range(6):
            pid = os.fork()
            if pid == 0:
                hold = b"x" * (48 << 20)
                time.sleep(3)
                os._exit(0)
            children.append(pid)
        statuses = [os.waitpid(pid, 0)[1] for pid in children]
        print("killed", sum(os.WIFSIGNALED(s) for s in statuses))
        """
    )
    limits = SandboxLimits(wall_s=10.0, memory_mb=128, audit_hook=False)
    result = await run_sandboxed(code, limits)
    assert "memory_cgroup" in result.isolation
    assert result.killed_reason == "memory_limit"
    assert int(result.stdout.split()[-1]) >= 1


@pytest.mark.skipif(cpu_cgroup_base() is None, reason="no writable cpu cgroup on this host")
async def test_the_cpu_share_caps_a_busy_program():
    # A program that spins for 2 s of wall time gets about cpus x 2 s of CPU (0.2 s), not 2 s.
    code = program(
        """
        import time
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            pass
        print(round(time.process_time(), 2))
        """
    )
    result = await run_sandboxed(code, SandboxLimits(wall_s=20.0, cpus=0.1))
    assert result.ok and "cpu_cgroup" in result.isolation, result.stderr
    assert float(result.stdout.split()[-1]) < 0.6  # uncapped on an idle core: about 2.0
    with pytest.raises(ValueError, match="cpus"):
        SandboxLimits(cpus=0)


async def test_the_file_boundary_is_recorded():
    result = await run_sandboxed("print('hi')\n", FAST)
    assert result.file_boundary == "+".join([*file_boundary(), "audit_hook"])
    assert SandboxResult("", "", 0).file_boundary == "none"


@pytest.fixture
def fresh_boundary_probe():
    import masorch.agents.sandbox as sandbox

    sandbox._probe_file_boundary.cache_clear()
    yield sandbox
    sandbox._probe_file_boundary.cache_clear()


async def test_a_host_without_kernel_boundary_is_loud_and_recorded(fresh_boundary_probe, monkeypatch, caplog):
    sandbox = fresh_boundary_probe
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)
    monkeypatch.setattr(sandbox, "_probe_private_root", lambda prefix: "mount: permission denied")
    with caplog.at_level("WARNING", logger="masorch.agents.sandbox"):
        result = await run_sandboxed("print(open('main.py').read() != '')\n", FAST)
    assert result.ok and result.stdout.strip() == "True"
    assert "private_root" not in result.isolation and "landlock" not in result.isolation
    assert result.file_boundary == "audit_hook"
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    # The faked mount failure is the reason where the host has namespaces; where it has none, that is
    expected = (
        "sandbox: no private root (mount namespace) on this host: mount"
        if sandbox.namespace_prefix()
        else "sandbox: no private root: this host cannot create the sandbox namespaces"
    )
    assert any(level == "WARNING" and text.startswith(expected) for level, text in messages), messages
    assert any(level == "ERROR" and "NO kernel file boundary" in text for level, text in messages)


needs_filter = pytest.mark.skipif(
    not syscall_filter(), reason="this host has no seccomp filter for the sandbox"
)

# Reaches the prelude's globals and empties the audit hook's checks, so the kernel layers alone meet
# the raw system calls below (the hostile suite's DEFEAT, tests/agents/test_sandbox_hostile.py).
UNHOOK = """
import sys
frame = sys._getframe()
while frame is not None and "_ALWAYS_BLOCKED" not in frame.f_globals:
    frame = frame.f_back
frame.f_globals["_ALWAYS_BLOCKED"] = frozenset()
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
"""
KEYCTL, SHMGET = {"x86_64": (250, 29), "aarch64": (219, 194)}.get(os.uname().machine, (0, 0))


@needs_filter
async def test_the_kernel_keyrings_and_sysv_ipc_are_refused():
    # keyctl(KEYCTL_READ, KEY_SPEC_SESSION_KEYRING, ...) would list the caller's session keys;
    # shmget(IPC_PRIVATE, ...) would make host memory that outlives the run.
    code = UNHOOK + textwrap.dedent(f"""
        buf = ctypes.create_string_buffer(256)
        print("keyctl", libc.syscall({KEYCTL}, 11, -3, buf, 256), ctypes.get_errno())
        print("shmget", libc.syscall({SHMGET}, 0, 1 << 20, 0o1600), ctypes.get_errno())
    """)
    result = await run_sandboxed(code, FAST)
    assert result.stdout.split() == ["keyctl", "-1", "1", "shmget", "-1", "1"], result.stderr
    assert "seccomp" in result.isolation


@needs_filter
@pytest.mark.parametrize("limits", [FAST, HOOK_ONLY], ids=["all_layers", "without_namespaces"])
async def test_only_unix_and_ip_sockets_can_be_made(limits):
    code = program("""
        import socket
        for family in (socket.AF_UNIX, socket.AF_INET, socket.AF_NETLINK, 40):  # 40: AF_VSOCK
            try:
                socket.socket(family, socket.SOCK_DGRAM if family != socket.AF_NETLINK else socket.SOCK_RAW)
                print(family, "made")
            except OSError as exc:
                print(family, exc.errno)
    """)
    result = await run_sandboxed(code, limits)
    assert result.stdout.split() == ["1", "made", "2", "made", "16", "97", "40", "97"], result.stderr


@needs_namespaces
async def test_the_program_has_its_own_ipc_and_uts_namespaces():
    result = await run_sandboxed("print('ok')\n", FAST)
    assert {"ipc_ns", "uts_ns"} <= set(result.isolation)


async def test_a_program_cannot_pass_its_exit_for_a_failed_setup_or_a_cpu_limit():
    forged_setup = (
        'import os, sys\nsys.stderr.write("sandbox: forged\\n"); sys.stderr.flush(); os._exit(125)\n'
    )
    result = await run_sandboxed(forged_setup, FAST)  # not a RunError: the program's code ran
    assert result.exit_code == 125 and result.stderr == "sandbox: forged\n"
    result = await run_sandboxed("import sys\nsys.exit(152)\n", FAST)
    assert result.exit_code == 152 and result.killed_reason == ""


async def test_a_work_directory_deeper_than_the_recursion_limit_is_removed(monkeypatch):
    import masorch.agents.sandbox as sandbox

    roots: list[str] = []
    remove = sandbox._remove_tree
    monkeypatch.setattr(sandbox, "_remove_tree", lambda root: (roots.append(root), remove(root)))
    code = program("""
        import os
        for _ in range(1500):
            os.mkdir("d"); os.chdir("d")
        os.symlink("/", "up")
        print("deep")
    """)
    result = await run_sandboxed(code, HOOK_ONLY)  # no namespaces: the tree is on the host's disk
    assert result.stdout == "deep\n", result.stderr
    assert roots and not os.path.exists(roots[0])


def _descendants(pid: int) -> list[int]:
    """The host pids below ``pid`` (from /proc: no process library needed)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _is_runs_prelude(pid: int) -> bool:
    """Whether ``pid`` is the interpreter of a run's prelude (its config names a status pipe)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return argv[0] == sys.executable.encode() and b'"status_fd"' in argv[-2]


@pytest.mark.skipif(not lifetime_prefix(), reason="this host has no setpriv --pdeathsig")
@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "without_namespaces"])
def test_a_caller_killed_outright_takes_its_program_with_it(namespaces):
    # wall_s is the caller's to enforce: a caller killed by SIGKILL (or the OOM killer) never does.
    launcher = (
        "import asyncio\n"
        "from masorch.agents.sandbox import SandboxLimits, run_sandboxed\n"
        f"limits = SandboxLimits(wall_s=60, namespaces={namespaces})\n"
        "asyncio.run(run_sandboxed('import time\\ntime.sleep(60)\\n', limits))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    caller = subprocess.Popen([sys.executable, "-c", launcher], env=env)
    below: list[int] = []
    try:
        for _ in range(300):  # the run's supervisor and the program it forked (not the host probes)
            below = _descendants(caller.pid)
            if sum(_is_runs_prelude(p) for p in below) >= 2:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the sandboxed program never started")
        time.sleep(0.3)
        caller.kill()
        caller.wait(10)
        for _ in range(100):
            if not any(_alive(p) for p in below):
                break
            time.sleep(0.05)
        assert [p for p in below if _alive(p)] == []
        # It could not remove its work directory and cgroups; a later process does, once they are old.
        bases = [Path(tempfile.gettempdir())] + [b for b in (pids_cgroup_base(), memory_cgroup_base()) if b]
        left = [e for base in bases for e in base.glob(f"masorch-sandbox-{caller.pid}-*")]
        assert any(e.parent == bases[0] for e in left)
        sweep_leftovers()
        assert all(e.exists() for e in left)  # younger than the default margin
        assert sweep_leftovers(min_age_s=0) >= len(left)
        assert [e for e in left if e.exists()] == []
    finally:
        caller.kill()
        for p in below:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


async def test_code_with_a_lone_surrogate_still_runs():
    # Half an emoji from a JSON escape (``"\ud83d"``) has no UTF-8 form.
    result = await run_sandboxed("print('a\ud83d')\n", FAST)
    assert (result.exit_code, result.stdout) == (0, "a?\n"), result.stderr


EXECVE, EXECVEAT, INOTIFY_INIT1 = {"x86_64": (59, 322, 294), "aarch64": (221, 281, 26)}.get(
    os.uname().machine, (0, 0, 0)
)


@needs_filter
async def test_exec_and_inotify_are_refused_by_the_filter():
    # Landlock sees no path for a memfd, so an ELF written to one would run through execveat; and
    # inotify instances are counted per host user, across namespaces. Without the filter these fail
    # with ENOENT (2), EBADF (9) and succeed.
    code = UNHOOK + textwrap.dedent(f"""
        print("execve", libc.syscall({EXECVE}, b"/nonexistent", None, None), ctypes.get_errno())
        print("execveat", libc.syscall({EXECVEAT}, -1, b"", None, None, 0x1000), ctypes.get_errno())
        print("inotify", libc.syscall({INOTIFY_INIT1}, 0), ctypes.get_errno())
    """)
    result = await run_sandboxed(code, NAMESPACES_ONLY)
    assert result.stdout.split() == ["execve", "-1", "1", "execveat", "-1", "1", "inotify", "-1", "1"], (
        result.stderr
    )


async def test_a_program_cannot_queue_the_hosts_signals_away():
    # Pending signals are counted per host user across user namespaces: a program that queued them
    # until refused would leave every process of the caller's user without timers or sigqueue.
    code = program("""
        import signal
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
        queued = 0
        try:
            while queued < 5000:
                signal.raise_signal(signal.SIGRTMIN)
                queued += 1
        except OSError as exc:
            print("refused", exc.errno)
        print("queued", queued)
    """)
    result = await run_sandboxed(code, NAMESPACES_ONLY)
    assert "refused 11" in result.stdout, (result.stdout, result.stderr)
    assert int(result.stdout.split()[-1]) <= 64
