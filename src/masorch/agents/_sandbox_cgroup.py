"""Per-run cgroups for the sandbox: a process count (``pids``), a memory limit and a CPU quota for all
processes.

Each controller is found once per process (a fact about the host) from ``/proc/self/cgroup``: its
cgroup v1 hierarchy, or a cgroup v2 directory whose ``cgroup.subtree_control`` enables it. A run
makes one group per controller below that base; the child joins them before anything else.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import tempfile
from pathlib import Path

from masorch.agents._sandbox_leftovers import owned_prefix

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4)
def controller_base(controller: str) -> Path | None:
    """A writable cgroup directory under which per-run groups with ``controller`` can be made."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates: list[Path] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            candidates.append(Path("/sys/fs/cgroup") / controller / path.lstrip("/"))
        elif controllers == "":
            unified = Path("/sys/fs/cgroup") / path.lstrip("/")
            try:
                if controller in (unified / "cgroup.subtree_control").read_text().split():
                    candidates.append(unified)
            except OSError:
                continue
    for base in candidates:
        if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
            return base
    return None


def make_group(base: Path, settings: dict[str, str]) -> Path | None:
    """A new group below ``base`` with ``settings`` written in order; None (logged) if refused."""
    group = Path(tempfile.mkdtemp(prefix=owned_prefix(), dir=base))
    for name, value in settings.items():
        try:
            (group / name).write_text(value)
        except OSError as exc:
            logger.warning("sandbox: could not set %s in %s: %s", name, group, exc)
            remove_group(group)
            return None
    return group


def memory_settings(base: Path, limit_bytes: int) -> dict[str, str]:
    """The files that cap a group's memory (swap included) at ``limit_bytes``, v1 or v2."""
    if (base / "memory.limit_in_bytes").exists():
        settings = {"memory.limit_in_bytes": str(limit_bytes)}
        if (base / "memory.memsw.limit_in_bytes").exists():
            settings["memory.memsw.limit_in_bytes"] = str(limit_bytes)
        return settings
    settings = {"memory.max": str(limit_bytes)}
    if (base / "memory.swap.max").exists():
        settings["memory.swap.max"] = "0"
    return settings


#: The period of a CPU quota, in microseconds (the kernel's default).
CPU_PERIOD_US = 100_000


def cpu_settings(base: Path, cpus: float) -> dict[str, str]:
    """The files that let a group's processes use at most ``cpus`` CPUs together, v1 or v2.

    >>> cpu_settings(Path("/nonexistent"), 0.5)
    {'cpu.max': '50000 100000'}
    """
    quota = max(1_000, round(cpus * CPU_PERIOD_US))  # the kernel refuses quotas under 1 ms
    if (base / "cpu.cfs_quota_us").exists():
        return {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": str(quota)}
    return {"cpu.max": f"{quota} {CPU_PERIOD_US}"}


def oom_kills(group: Path) -> int:
    """How many processes the kernel killed in ``group`` for exceeding its memory limit."""
    for name in ("memory.events", "memory.oom_control"):
        try:
            lines = (group / name).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return 0


async def remove_group_when_empty(group: Path) -> None:
    """Remove ``group`` once its processes are gone (a dying namespace takes a moment)."""
    for _ in range(40):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            await asyncio.sleep(0.05)
    remove_group(group)


def remove_group(group: Path) -> None:
    """Remove ``group`` now, logging (not raising) a failure."""
    try:
        group.rmdir()
    except OSError as exc:
        logger.warning("sandbox: could not remove cgroup %s: %s", group, exc)
