"""Kernel-enforced file confinement for the sandbox child: a private root, Landlock, no capabilities.

Standard library only (``ctypes`` on the C library): the sandbox prelude loads it by path inside
the child, before any user code, and the parent imports it to probe Landlock. Two independent
boundaries, each of which holds when model code has defeated every Python-level check:

* :func:`enter_private_root` (inside the sandbox's user + mount namespace): a fresh ``tmpfs``
  becomes the root, holding read-only bind mounts of only what the interpreter needs and a private,
  size-limited ``tmpfs`` work directory; ``pivot_root`` then detaches the host's tree, so nothing
  else (``/etc``, ``/root``, home directories, the repository, other processes' ``/proc``) has a
  path any more. There is no ``/proc``, no shell and no ``/tmp``.
* :func:`restrict_with_landlock`: the calling process and its descendants may read only the given
  paths, write only the work directory, execute nothing, change no mount, connect or bind no TCP
  port and signal no process outside the sandbox (each as far as the kernel's Landlock ABI goes).
* :func:`restrict_syscalls`: a seccomp filter refuses the kernel interfaces none of the other
  layers confine: the kernel keyrings (the caller's session keyring is inherited), SysV IPC,
  ``ptrace``, ``execve`` (a ``memfd`` has no path for Landlock to refuse), inotify (counted per
  host user, across namespaces), and sockets of any family but Unix and IP (a VM's ``AF_VSOCK``
  reaches its host).
* :func:`die_with_parent`: the kernel kills the calling process when its parent dies.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Iterable

_SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture (asm-generic)
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_PR_CAPBSET_DROP = 24
_PR_SET_DUMPABLE = 4
_PR_SET_PDEATHSIG = 1

# Landlock filesystem rights, by the ABI version that introduced them.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_FS_LATEST = (1 << 16) - 1
_NET_ALL = 0b11  # bind and connect TCP, ABI 4
_SCOPE_ALL = 0b11  # abstract unix sockets and signals outside the domain, ABI 6
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ = FS_READ_FILE | FS_READ_DIR
WRITE = (
    READ
    | FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SYM
    | FS_MAKE_FIFO
    | FS_MAKE_SOCK
    | FS_REFER
    | FS_TRUNCATE
)

_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_BIND = 4096
_MS_PRIVATE = 1 << 18
_MS_REC = 1 << 14
_MS_RELATIME = 1 << 21
_MNT_DETACH = 2
# statvfs f_flag bits -> mount flags: a bind remount must keep the flags the kernel locked.
_ST_TO_MS = {
    1: _MS_RDONLY,
    2: _MS_NOSUID,
    4: _MS_NODEV,
    8: _MS_NOEXEC,
    1024: _MS_NOATIME,
    2048: _MS_NODIRATIME,
    4096: _MS_RELATIME,
}

#: System paths the interpreter and its extension modules need (shared libraries, the loader
#: cache, time zones, a few devices). Everything else of the host stays out of the sandbox.
SYSTEM_READ = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/usr/share/zoneinfo",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is missing or disabled."""
    try:
        libc = _libc()
    except OSError:
        return 0
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(
        _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _LANDLOCK_CREATE_RULESET_VERSION
    )
    return max(int(version), 0)


def restrict_with_landlock(read: Iterable[str], write: Iterable[str]) -> int:
    """Confine this process and its future children to reading ``read`` and writing ``write``.

    Returns the ABI version used; raises ``OSError`` when Landlock is unavailable or a rule cannot
    be added (a path that does not exist is skipped: there is nothing to reach there). Irreversible.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled = _FS_BY_ABI.get(abi, _FS_LATEST)
    attr = _RulesetAttr(fs=handled, net=_NET_ALL if abi >= 4 else 0, scoped=_SCOPE_ALL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _check(
        libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    try:
        rules = [(path, READ) for path in read] + [(path, WRITE | FS_READ_FILE) for path in write]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                allowed = rights & handled
                if not os.path.isdir(path):
                    allowed &= _FILE_RIGHTS
                rule = _PathBeneathAttr(allowed=allowed, parent_fd=fd)
                _check(
                    libc.syscall(
                        _SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0
                    ),
                    f"landlock_add_rule {path}",
                )
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


# seccomp: per architecture, its audit id and the numbers of the system calls the filter refuses.
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_DENIED_SYSCALLS = {
    # add_key, request_key, keyctl; shmget, semget, msgget; ptrace; io_uring_setup, _enter, _register
    # (io_uring would make sockets and open files past this filter); execve, execveat (Landlock does
    # not check a file without a path: a memfd's ELF would run); inotify_init(1) (a host-wide count)
    "x86_64": (248, 249, 250, 29, 64, 68, 101, 425, 426, 427, 59, 322, 253, 294),
    "aarch64": (217, 218, 219, 194, 190, 186, 117, 425, 426, 427, 221, 281, 26),
}
_SYS_SOCKET = {"x86_64": 41, "aarch64": 198}
_X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: the same calls under other numbers
#: Socket families a program may create (loopback-only inside the network namespace): Unix, IPv4, IPv6.
ALLOWED_SOCKET_FAMILIES = (1, 2, 10)
_EPERM = 1
_EAFNOSUPPORT = 97
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The classic-BPF filter of :func:`restrict_syscalls` for ``machine`` as (code, jt, jf, k).

    A call through another architecture's entry point (x86_64's 32-bit and x32 ones) fails with
    ``EPERM``, the denied calls fail with ``EPERM``, ``socket`` of another family than
    :data:`ALLOWED_SOCKET_FAMILIES` fails with ``EAFNOSUPPORT``; everything else is allowed.

    >>> prog = seccomp_program("x86_64")
    >>> prog[0], prog[-1]
    ((32, 0, 0, 4), (6, 0, 0, 327681))
    """
    Jump = int | str
    code: list[tuple[int, Jump, Jump, int]] = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # the architecture
        (_BPF_JEQ_K, 0, "eperm", _AUDIT_ARCH[machine]),
        (_BPF_LD_W_ABS, 0, 0, 0),  # the system call number
        (_BPF_JGE_K, "eperm", 0, _X32_SYSCALL_BIT),
        *((_BPF_JEQ_K, "eperm", 0, nr) for nr in _DENIED_SYSCALLS[machine]),
        (_BPF_JEQ_K, 0, "allow", _SYS_SOCKET[machine]),
        (_BPF_LD_W_ABS, 0, 0, 16),  # socket's first argument (its low half on both): the family
        *((_BPF_JEQ_K, "allow", 0, family) for family in ALLOWED_SOCKET_FAMILIES),
        (_BPF_RET_K, 0, 0, _RET_ERRNO | _EAFNOSUPPORT),
    ]
    labels = {"allow": len(code), "eperm": len(code) + 1}
    code += [(_BPF_RET_K, 0, 0, _RET_ALLOW), (_BPF_RET_K, 0, 0, _RET_ERRNO | _EPERM)]

    def offset(at: int, jump: Jump) -> int:
        return labels[jump] - at - 1 if isinstance(jump, str) else jump

    return [(op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(code)]


def restrict_syscalls() -> None:
    """Install :func:`seccomp_program` on this process and its future children. Irreversible.

    Raises ``OSError`` on an architecture it has no numbers for or when the kernel refuses it.
    """
    machine = os.uname().machine
    if machine not in _AUDIT_ARCH:
        raise OSError(f"seccomp: unsupported architecture {machine}")
    program = seccomp_program(machine)
    filters = (_SockFilter * len(program))(*(_SockFilter(*ins) for ins in program))
    fprog = _SockFprog(len(program), filters)
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process once its parent (pid ``parent``) dies; exit at once if
    it already has (it died before the request could take effect)."""
    _check(_libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:
        os._exit(128 + signal.SIGKILL)


def drop_capabilities() -> None:
    """Empty this process's capability sets and bounding set (a root caller keeps no privilege).

    Also marks the process not dumpable, so that no process without privilege may ptrace it.
    """
    libc = _libc()
    _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 and ctypes.get_errno() == 22:  # EINVAL: no such cap
            break
    header = _CapHeader(version=0x20080522, pid=0)  # _LINUX_CAPABILITY_VERSION_3: two data structs
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    def encode(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    _check(
        libc.mount(encode(source), target.encode(), encode(fstype), ctypes.c_ulong(flags), encode(data)),
        f"mount {target}",
    )


def _locked_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _ST_TO_MS.items() if flags & st)


def _bind_read_only(libc: ctypes.CDLL, source: str, target: str, *, devices: bool = False) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a"):
            pass
    _mount(libc, source, target, None, _MS_BIND, None)
    flags = _locked_flags(source) | _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID
    if not devices:
        flags |= _MS_NODEV
    _mount(libc, None, target, None, flags, None)


def enter_private_root(
    new_root: str, work: str, read: Iterable[str], files: dict[str, bytes], work_bytes: int
) -> None:
    """Make a fresh root at ``new_root`` from read-only binds of ``read`` and a private ``work`` dir.

    Must run in a private mount namespace where this process may mount (the sandbox's user
    namespace). ``new_root`` is an empty-enough host directory to mount over; ``work`` keeps its
    absolute path inside the new root, is a ``tmpfs`` of ``work_bytes`` and receives ``files``.
    Afterwards the host's tree is detached and the current directory is ``work``.
    """
    libc = _libc()
    machine = os.uname().machine
    if machine not in _SYS_PIVOT_ROOT:
        raise OSError(f"pivot_root: unsupported architecture {machine}")
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, None)
    _mount(libc, "tmpfs", new_root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=4m")
    for path in sorted(set(read), key=lambda p: (p.count("/"), p)):
        target = new_root + path
        if os.path.islink(path) and os.path.dirname(path) == "/":  # /lib -> usr/lib on merged-/usr systems
            if not os.path.lexists(target):
                os.symlink(os.readlink(path), target)
        elif os.path.exists(path) and not os.path.exists(target):
            _bind_read_only(libc, path, target)
    for device in DEVICES:
        if os.path.exists(device):
            _bind_read_only(libc, device, new_root + device, devices=True)
    os.makedirs(new_root + work, exist_ok=True)
    _mount(
        libc,
        "tmpfs",
        new_root + work,
        "tmpfs",
        _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
        f"mode=0700,size={work_bytes}",
    )
    for name, content in files.items():
        with open(os.path.join(new_root + work, name), "wb") as handle:
            handle.write(content)
    _mount(libc, None, new_root, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
    os.chdir(new_root)
    libc.syscall.restype = ctypes.c_long
    _check(libc.syscall(_SYS_PIVOT_ROOT[machine], b".", b"."), "pivot_root")
    _check(libc.umount2(b".", _MNT_DETACH), "umount the host root")
    os.chdir(work)
