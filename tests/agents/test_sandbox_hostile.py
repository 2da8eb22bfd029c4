"""Hostile programs against the sandbox's file boundary: every known escape class, and variants.

Each snippet tries to read a canary secret outside the work directory (a file, a SQLite database,
a file in ``$HOME``), to list an outside directory, or to create or change a file outside (next to
the canaries, in ``/tmp``, in the repository). A snippet *escapes* when the secret or the hidden
listing marker appears in its output, or anything outside changed. The suite runs under every
layer configuration: all layers, the kernel layers with the audit hook off, and (slow tier) each
kernel layer alone. ``python tests/agents/test_sandbox_hostile.py`` prints the counts.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from masorch.agents.sandbox import SandboxLimits, file_boundary, run_sandboxed

REPO = Path(__file__).resolve().parents[2]

# Reach the prelude's module globals through the frame chain and empty every check the audit hook
# makes (the frame-globals and traceback-frame escapes of the attack): afterwards the hook allows
# everything it can be told to allow. Used as a prefix so each kernel layer meets hook-free code.
DEFEAT = """
import sys
def _defeat():
    frame = sys._getframe()
    while frame is not None:
        g = frame.f_globals
        if "_make_hook" in g:
            g["_ALWAYS_BLOCKED"] = frozenset()
            g["_PATH_EVENTS"] = {}
            g["_under"] = lambda real, roots: True
            return "defeated"
        frame = frame.f_back
    return "no prelude frame"
print(_defeat())
"""

#: (class, name, code). ``T`` holds the targets; only ``metadata`` snippets are left out of the
#: Landlock-only configuration (Landlock does not govern chmod/chown/utime; see docs/agents.md).
SNIPPETS: list[tuple[str, str, str]] = [
    # -- direct reads
    ("direct_read", "open", "print(open(T['secret']).read())"),
    ("direct_read", "open_bytes_path", "print(open(T['secret'].encode()).read())"),
    ("direct_read", "io.open", "import io; print(io.open(T['secret']).read())"),
    ("direct_read", "io.FileIO", "import io; print(io.FileIO(T['secret']).read())"),
    ("direct_read", "os.open", "import os; fd = os.open(T['secret'], os.O_RDONLY); print(os.read(fd, 999))"),
    ("direct_read", "pathlib", "import pathlib; print(pathlib.Path(T['secret']).read_text())"),
    ("direct_read", "linecache", "import linecache; print(linecache.getline(T['secret'], 1))"),
    ("direct_read", "mmap", "import mmap; f = open(T['secret'], 'rb'); print(mmap.mmap(f.fileno(), 0)[:])"),
    ("direct_read", "listdir", "import os; print(os.listdir(T['outside']))"),
    ("direct_read", "scandir", "import os; print([e.name for e in os.scandir(T['outside'])])"),
    ("direct_read", "glob", "import glob; print(glob.glob(T['outside'] + '/*'))"),
    ("direct_read", "relative_dotdot", "import os; print(open(os.path.relpath(T['secret'])).read())"),
    # -- /proc
    ("proc", "proc_self_root", "print(open('/proc/self/root' + T['secret']).read())"),
    ("proc", "proc_1_root", "print(open('/proc/1/root' + T['secret']).read())"),
    ("proc", "proc_ppid_root", "import os; print(open(f'/proc/{os.getppid()}/root' + T['secret']).read())"),
    ("proc", "proc_self_cwd", "print(open('/proc/self/cwd/../..' + T['secret']).read())"),
    (
        "proc",
        "proc_every_pid_root",
        """
        import os
        for pid in os.listdir('/proc'):
            if pid.isdigit():
                try:
                    print(open(f'/proc/{pid}/root' + T['secret']).read())
                except OSError as exc:
                    print('no', pid, exc)
        """,
    ),
    ("proc", "proc_environ", "print(open('/proc/1/environ', 'rb').read())"),
    # -- hard links
    ("hard_link", "os.link", "import os; os.link(T['secret'], 'h'); print(open('h').read())"),
    (
        "hard_link",
        "link_dir_fd",
        "import os; d = os.open(T['outside'], os.O_RDONLY); os.link(T['secret_name'], 'h', src_dir_fd=d); "
        "print(open('h').read())",
    ),
    # -- traversal through a directory descriptor (openat)
    (
        "dir_fd",
        "openat",
        "import os; d = os.open(T['outside'], os.O_RDONLY | os.O_DIRECTORY); "
        "print(os.read(os.open(T['secret_name'], os.O_RDONLY, dir_fd=d), 999))",
    ),
    (
        "dir_fd",
        "dotdot_chain",
        """
        import os
        d = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(12):
            d = os.open('..', os.O_RDONLY | os.O_DIRECTORY, dir_fd=d)
        print(os.read(os.open(T['secret'].lstrip('/'), os.O_RDONLY, dir_fd=d), 999))
        """,
    ),
    (
        "dir_fd",
        "listdir_fd",
        "import os; print(os.listdir(os.open(T['outside'], os.O_RDONLY | os.O_DIRECTORY)))",
    ),
    ("dir_fd", "fwalk", "import os; print([f for _, _, f, _ in os.fwalk(T['outside'])])"),
    (
        "dir_fd",
        "open_opener",
        "import os; d = os.open(T['outside'], os.O_RDONLY); "
        "print(open(T['secret_name'], opener=lambda p, f: os.open(p, f, dir_fd=d)).read())",
    ),
    # -- symlinks and races
    ("symlink", "symlink", "import os; os.symlink(T['secret'], 'l'); print(open('l').read())"),
    (
        "symlink",
        "symlink_dir",
        "import os; os.symlink(T['outside'], 'd'); print(open('d/' + T['secret_name']).read())",
    ),
    (
        "symlink",
        "symlink_race",
        """
        import os, threading, time
        open('ok', 'w').write('fine')
        stop = time.time() + 0.6
        def swap():
            while time.time() < stop:
                for target in ('ok', T['secret']):
                    try:
                        os.remove('link')
                    except OSError:
                        pass
                    try:
                        os.symlink(target, 'link')
                    except OSError:
                        pass
        threading.Thread(target=swap).start()
        seen = set()
        while time.time() < stop:
            try:
                seen.add(open('link').read())
            except OSError:
                pass
        print(seen)
        """,
    ),
    (
        "symlink",
        "rename_race",
        """
        import os, threading, time
        open('ok', 'w').write('fine')
        stop = time.time() + 0.6
        def swap():
            while time.time() < stop:
                try:
                    os.symlink(T['secret'], 'evil')
                    os.rename('evil', 'target')
                except OSError:
                    pass
                try:
                    os.link('ok', 'good')
                    os.rename('good', 'target')
                except OSError:
                    pass
        threading.Thread(target=swap).start()
        seen = set()
        while time.time() < stop:
            try:
                seen.add(open('target').read())
            except OSError:
                pass
        print(seen)
        """,
    ),
    # -- monkeypatching what the audit hook relies on
    (
        "monkeypatch",
        "realpath",
        "import os.path; os.path.realpath = lambda p, **k: os.getcwd(); print(open(T['secret']).read())",
    ),
    (
        "monkeypatch",
        "builtins_any",
        "import builtins; builtins.any = lambda *a: True; print(open(T['secret']).read())",
    ),
    (
        "monkeypatch",
        "builtins_isinstance",
        "import builtins; builtins.isinstance = lambda *a: False; print(open(T['secret']).read())",
    ),
    (
        "monkeypatch",
        "builtins_len",
        "import builtins; builtins.len = lambda *a: 0; print(open(T['secret']).read())",
    ),
    (
        "monkeypatch",
        "fsdecode",
        "import os; os.fsdecode = lambda p: os.getcwd(); print(open(T['secret']).read())",
    ),
    # -- reaching the prelude's globals through frames and tracebacks
    ("frame_globals", "frames_then_open", DEFEAT + "print(open(T['secret']).read())"),
    (
        "frame_globals",
        "traceback_frames",
        """
        import sys
        try:
            raise RuntimeError
        except RuntimeError as exc:
            frame = exc.__traceback__.tb_frame
        while frame is not None and '_make_hook' not in frame.f_globals:
            frame = frame.f_back
        if frame is not None:
            frame.f_globals['_under'] = lambda real, roots: True
        print(open(T['secret']).read())
        """,
    ),
    (
        "frame_globals",
        "frames_then_write",
        DEFEAT + "open(T['outside'] + '/pwned-' + T['token'], 'w').write('x')",
    ),
    # -- sqlite3
    (
        "sqlite",
        "connect_read",
        "import sqlite3; print(sqlite3.connect(T['db']).execute('select * from s').fetchall())",
    ),
    (
        "sqlite",
        "connect_uri",
        "import sqlite3; print(sqlite3.connect('file:' + T['db'] + '?mode=ro', uri=True)"
        ".execute('select * from s').fetchall())",
    ),
    (
        "sqlite",
        "attach",
        "import sqlite3; c = sqlite3.connect(':memory:'); c.execute(f\"attach database '{T['db']}' as o\"); "
        "print(c.execute('select * from o.s').fetchall())",
    ),
    (
        "sqlite",
        "create_outside",
        "import sqlite3; sqlite3.connect(T['outside'] + '/pwned-' + T['token']).execute('create table t(x)')",
    ),
    (
        "sqlite",
        "vacuum_into",
        "import sqlite3; c = sqlite3.connect(':memory:'); c.execute('create table t(x)'); "
        "c.execute(f\"vacuum into '{T['outside']}/pwned-{T['token']}'\")",
    ),
    # -- ctypes: the C library's open/read, raw syscalls
    (
        "ctypes",
        "libc_open",
        """
        import ctypes
        libc = ctypes.CDLL(None)
        fd = libc.open(T['secret'].encode(), 0)
        buf = ctypes.create_string_buffer(999)
        libc.read(fd, buf, 999)
        print(fd, buf.value)
        """,
    ),
    (
        "ctypes",
        "defeated_libc_open",
        DEFEAT
        + """
import ctypes
libc = ctypes.CDLL(None)
fd = libc.open(T['secret'].encode(), 0)
buf = ctypes.create_string_buffer(999)
libc.read(fd, buf, 999)
print(fd, buf.value)
""",
    ),
    (
        "ctypes",
        "defeated_syscall_openat",
        DEFEAT
        + """
import ctypes
libc = ctypes.CDLL(None)
fd = libc.syscall(257, -100, T['secret'].encode(), 0)
buf = ctypes.create_string_buffer(999)
libc.read(fd, buf, 999)
print(fd, buf.value)
""",
    ),
    (
        "ctypes",
        "defeated_libc_creat",
        DEFEAT + "import ctypes; path = T['outside'] + '/pwned-' + T['token']\n"
        "print(ctypes.CDLL(None).creat(path.encode(), 0o644))",
    ),
    # -- processes and shells
    ("process", "os.system", "import os; print(os.system('cat ' + T['secret']))"),
    (
        "process",
        "defeated_os.system",
        DEFEAT + "import os; print(os.system('cat ' + T['secret'] + ' /etc/shadow'))",
    ),
    (
        "process",
        "subprocess",
        "import subprocess; print(subprocess.run(['cat', T['secret']], capture_output=True))",
    ),
    ("process", "os.popen", "import os; print(os.popen('cat ' + T['secret']).read())"),
    (
        "process",
        "defeated_fork_exec",
        DEFEAT
        + """
import os
pid = os.fork()
if pid == 0:
    os.execv('/bin/cat', ['cat', T['secret']])
print(os.waitpid(pid, 0))
""",
    ),
    (
        "process",
        "defeated_fork_read",
        DEFEAT
        + """
import os
pid = os.fork()
if pid == 0:
    print(open(T['secret']).read(), flush=True)
    os._exit(0)
print(os.waitpid(pid, 0))
""",
    ),
    (
        "process",
        "reimport_posixsubprocess",
        "import sys; sys.modules.pop('_posixsubprocess', None); import subprocess; "
        "print(subprocess.run(['cat', T['secret']], capture_output=True))",
    ),
    (
        "process",
        "defeated_shell_write",
        DEFEAT + "import os; os.system('echo x > ' + T['outside'] + '/pwned-' + T['token'])",
    ),
    # -- writes outside the work directory
    ("write", "create_outside", "open(T['outside'] + '/pwned-' + T['token'], 'w').write('x')"),
    ("write", "create_tmp", "open('/tmp/pwned-' + T['token'], 'w').write('x')"),
    ("write", "create_repo", "open(T['repo'] + '/pwned-' + T['token'], 'w').write('x')"),
    ("write", "defeated_create_repo", DEFEAT + "open(T['repo'] + '/pwned-' + T['token'], 'w').write('x')"),
    ("write", "append_victim", "open(T['victim'], 'a').write('pwned')"),
    ("write", "defeated_append_victim", DEFEAT + "open(T['victim'], 'a').write('pwned')"),
    ("write", "truncate_victim", "import os; os.truncate(T['victim'], 0)"),
    ("write", "remove_victim", "import os; os.remove(T['victim'])"),
    (
        "write",
        "rename_out",
        "import os; open('w', 'w').write('x'); os.rename('w', T['outside'] + '/pwned-' + T['token'])",
    ),
    (
        "write",
        "defeated_rename_out",
        DEFEAT
        + "import os; open('w', 'w').write('x'); os.rename('w', T['outside'] + '/pwned-' + T['token'])",
    ),
    ("write", "symlink_then_write", "import os; os.symlink(T['victim'], 'v'); open('v', 'w').write('pwned')"),
    (
        "write",
        "hardlink_then_write",
        DEFEAT + "import os; os.link(T['victim'], 'v'); open('v', 'w').write('pwned')",
    ),
    (
        "write",
        "openat_write",
        DEFEAT + "import os; d = os.open(T['outside'], os.O_RDONLY); "
        "os.write(os.open('pwned-' + T['token'], os.O_WRONLY | os.O_CREAT, dir_fd=d), b'x')",
    ),
    ("write", "mkdir_outside", DEFEAT + "import os; os.mkdir(T['outside'] + '/pwned-' + T['token'])"),
    # -- metadata of outside files (not Landlock's business: the private root covers it)
    ("metadata", "chmod_victim", DEFEAT + "import os; os.chmod(T['victim'], 0o777)"),
    ("metadata", "utime_victim", DEFEAT + "import os; os.utime(T['victim'], (0, 0))"),
    ("metadata", "chown_victim", DEFEAT + "import os; os.chown(T['victim'], 1234, 1234)"),
    # -- home directory and project
    ("home_project", "home_canary", "print(open(T['home_canary']).read())"),
    ("home_project", "defeated_home_canary", DEFEAT + "print(open(T['home_canary']).read())"),
    ("home_project", "list_home", DEFEAT + "import os; print(os.listdir(T['home']))"),
    ("home_project", "repo_file", DEFEAT + "print(open(T['repo'] + '/pyproject.toml').read())"),
    ("home_project", "list_repo", DEFEAT + "import os; print(os.listdir(T['repo']))"),
    ("home_project", "etc_shadow", DEFEAT + "print(open('/etc/shadow').read(), open('/etc/passwd').read())"),
    # -- kernel tricks with the user namespace's capabilities
    (
        "kernel",
        "mount_proc",
        DEFEAT
        + """
import ctypes, os
os.mkdir('p')
libc = ctypes.CDLL(None, use_errno=True)
print(libc.mount(b'proc', b'p', b'proc', 0, None), ctypes.get_errno())
print(open('p/1/root' + T['secret']).read())
""",
    ),
    (
        "kernel",
        "remount_rw",
        DEFEAT
        + """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
lib = os.path.dirname(os.__file__)
print(libc.mount(None, lib.encode(), None, 4096 | 32, None), ctypes.get_errno())
open(lib + '/pwned-' + T['token'], 'w').write('x')
""",
    ),
    (
        "kernel",
        "umount_reveal",
        DEFEAT
        + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.umount2(b'/usr/lib', 2), ctypes.get_errno())
print(open(T['secret']).read())
""",
    ),
    (
        "kernel",
        "chroot_escape",
        DEFEAT
        + """
import os
os.mkdir('jail')
os.chroot('jail')
for _ in range(20):
    os.chdir('..')
os.chroot('.')
print(open(T['secret']).read())
""",
    ),
    (
        "kernel",
        "unshare_and_mount",
        DEFEAT
        + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.unshare(0x10000000 | 0x00020000), ctypes.get_errno())
print(libc.mount(b'/', b'.', None, 4096 | 16384, None), ctypes.get_errno())
print(open(T['secret']).read())
""",
    ),
    (
        "kernel",
        "open_by_handle",
        DEFEAT
        + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
handle = (ctypes.c_uint32 * 34)(128)
mount_id = ctypes.c_int()
print(libc.name_to_handle_at(-100, b'/', handle, ctypes.byref(mount_id), 0), ctypes.get_errno())
print(libc.open_by_handle_at(-100, handle, 0), ctypes.get_errno())
""",
    ),
    (
        "kernel",
        "unshare_and_remount",
        DEFEAT
        + """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(libc.unshare(0x10000000 | 0x00020000), ctypes.get_errno())
lib = os.path.dirname(os.__file__)
print(libc.mount(None, lib.encode(), None, 4096 | 32, None), ctypes.get_errno())
open(lib + '/pwned-' + T['token'], 'w').write('x')
""",
    ),
    (
        "kernel",
        "ptrace_supervisor",
        DEFEAT
        + """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, os.getppid(), None, None) == 0:
    print('BOUNDARY-' + 'BROKEN: attached to the supervisor')
print(ctypes.get_errno())
""",
    ),
    (
        "kernel",
        "mknod_disk",
        DEFEAT + "import os, stat; os.mknod('disk', stat.S_IFBLK | 0o600, os.makedev(253, 0))",
    ),
]

CLASSES = sorted({cls for cls, _, _ in SNIPPETS})

#: Layer configurations: name -> (limits, needs these kernel layers on this host, metadata covered).
CONFIGS = {
    "all_layers": (SandboxLimits(wall_s=5.0), ("private_root", "landlock")),
    "kernel_only": (SandboxLimits(wall_s=5.0, audit_hook=False), ("private_root", "landlock")),
    "private_root_only": (SandboxLimits(wall_s=5.0, audit_hook=False, landlock=False), ("private_root",)),
    "landlock_only": (SandboxLimits(wall_s=5.0, audit_hook=False, namespaces=False), ("landlock",)),
}


@dataclass
class Targets:
    """The canaries outside the work directory."""

    token: str
    secret: str
    outside: Path
    marker: str
    victim: Path
    db: Path
    home_canary: Path

    def as_dict(self) -> dict[str, str]:
        return {
            "token": self.token,
            "secret": str(self.outside / f"secret-{self.token}.txt"),
            "secret_name": f"secret-{self.token}.txt",
            "outside": str(self.outside),
            "victim": str(self.victim),
            "db": str(self.db),
            "home_canary": str(self.home_canary),
            "home": str(self.home_canary.parent),
            "repo": str(REPO),
        }

    def victim_state(self) -> tuple[object, ...]:
        try:
            st = self.victim.stat()
            return (self.victim.read_text(), st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)
        except OSError as exc:
            return ("unreadable", str(exc))

    def restore_victim(self, state: tuple[object, ...]) -> None:
        text, mode, uid, gid, mtime = state
        self.victim.write_text(str(text))
        os.chmod(self.victim, int(mode))  # type: ignore[call-overload]
        os.chown(self.victim, int(uid), int(gid))  # type: ignore[call-overload]
        os.utime(self.victim, ns=(int(mtime), int(mtime)))  # type: ignore[call-overload]

    def created(self) -> list[str]:
        places = [self.outside, Path("/tmp"), REPO, self.home_canary.parent, Path(os.__file__).parent]
        return [str(p / f"pwned-{self.token}") for p in places if (p / f"pwned-{self.token}").exists()]


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[Targets]:
    yield from make_targets(tmp_path)


def make_targets(outside: Path) -> Iterator[Targets]:
    token = secrets.token_hex(8)
    secret = f"CANARY-{secrets.token_hex(16)}"
    (outside / f"secret-{token}.txt").write_text(secret + "\n")
    marker = f"listing-marker-{secrets.token_hex(8)}"  # only a directory listing can reveal this name
    (outside / marker).write_text("")
    victim = outside / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o644)
    db = outside / "secret.db"
    with sqlite3.connect(db) as connection:
        connection.execute("create table s(v)")
        connection.execute("insert into s values (?)", (secret,))
    connection.close()
    home_canary = Path.home() / f".masorch-canary-{token}"
    try:
        home_canary.write_text(secret)
    except OSError:  # a read-only home: a stand-in outside the work directory does the same job
        (outside / "home").mkdir()
        home_canary = outside / "home" / f".masorch-canary-{token}"
        home_canary.write_text(secret)
    try:
        yield Targets(token, secret, outside, marker, victim, db, home_canary)
    finally:
        home_canary.unlink(missing_ok=True)
        for place in (Path("/tmp"), REPO, Path.home()):
            (place / f"pwned-{token}").unlink(missing_ok=True)


def _program(code: str, targets: Targets) -> str:
    return f"T = {targets.as_dict()!r}\n" + textwrap.dedent(code).strip() + "\n"


async def attack(config: str, targets: Targets, concurrency: int = 3) -> dict[str, str]:
    """Run every snippet under ``config``; the escaped ones, by name, with what gave them away."""
    limits, _ = CONFIGS[config]
    gate = asyncio.Semaphore(concurrency)
    escaped: dict[str, str] = {}
    before = targets.victim_state()

    async def one(cls: str, name: str, code: str) -> None:
        if config == "landlock_only" and cls == "metadata":
            return
        async with gate:
            result = await run_sandboxed(_program(code, targets), limits)
        seen = result.stdout + result.stderr
        needles = (("secret", targets.secret), ("listing", targets.marker), ("success", "BOUNDARY-BROKEN"))
        for what, needle in needles:
            if needle in seen:
                escaped[f"{cls}/{name}"] = f"{what} in output: {seen[-400:]!r}"
        for path in targets.created():
            escaped[f"{cls}/{name}"] = f"created {path}"
            Path(path).unlink() if Path(path).is_file() else Path(path).rmdir()
        if targets.victim_state() != before:
            escaped[f"{cls}/{name}"] = "changed the victim file"
            targets.restore_victim(before)

    # Snippets that change shared state outside run one by one so a change is pinned on its author.
    await asyncio.gather(*(one(*s) for s in SNIPPETS if s[0] not in ("write", "metadata")))
    for snippet in SNIPPETS:
        if snippet[0] in ("write", "metadata"):
            await one(*snippet)
    return escaped


def _skip_unless(layers: tuple[str, ...]) -> None:
    missing = [layer for layer in layers if layer not in file_boundary()]
    if missing:
        pytest.skip(f"this host lacks {', '.join(missing)}")


@pytest.mark.parametrize("config", ["all_layers", "kernel_only"])
async def test_no_snippet_escapes(config, targets):
    _skip_unless(CONFIGS[config][1])
    escaped = await attack(config, targets)
    assert escaped == {}, f"{len(escaped)} of {len(SNIPPETS)} snippets escaped under {config}: {escaped}"


@pytest.mark.slow
@pytest.mark.parametrize("config", ["private_root_only", "landlock_only"])
async def test_each_kernel_layer_holds_alone(config, targets):
    _skip_unless(CONFIGS[config][1])
    escaped = await attack(config, targets)
    assert escaped == {}, f"{len(escaped)} of {len(SNIPPETS)} snippets escaped under {config}: {escaped}"


async def test_the_defeat_prefix_really_disables_the_audit_hook(targets):
    # Proof that the kernel layers, not the hook, stop the DEFEAT snippets: without them the
    # defeated hook lets the secret through.
    code = DEFEAT + "print(open(T['secret']).read())"
    limits = SandboxLimits(wall_s=5.0, namespaces=False, landlock=False)
    result = await run_sandboxed(_program(code, targets), limits)
    assert "defeated" in result.stdout and targets.secret in result.stdout, result.stderr


def main() -> None:
    """Print the suite's counts per configuration (the numbers in docs/agents.md)."""
    import tempfile

    print(f"snippets={len(SNIPPETS)} classes={len(CLASSES)} ({', '.join(CLASSES)})")
    print(f"kernel file boundary on this host: {'+'.join(file_boundary()) or 'none'}")
    # For reference, not a test: the audit hook alone (the layer the attack defeated).
    CONFIGS["hook_only_reference"] = (SandboxLimits(wall_s=5.0, namespaces=False, landlock=False), ())
    for config, (_, needs) in CONFIGS.items():
        if any(layer not in file_boundary() for layer in needs):
            print(f"{config}: skipped (host lacks {needs})")
            continue
        with tempfile.TemporaryDirectory() as outside:
            for targets in make_targets(Path(outside)):
                escaped = asyncio.run(attack(config, targets))
        run = len(SNIPPETS) - (
            sum(cls == "metadata" for cls, _, _ in SNIPPETS) if config == "landlock_only" else 0
        )
        print(f"{config}: run={run} escaped={len(escaped)} {sorted(escaped) if escaped else ''}")
    sys.exit(0)


if __name__ == "__main__":
    main()
