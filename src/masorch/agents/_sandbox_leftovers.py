"""The sandbox's own files and cgroups: named after the process that made them, removed, and swept.

A run removes its work directory and cgroups when it ends. A caller killed outright (SIGKILL, the
OOM killer, the end of a session) cannot, and its entries stay; since each name carries the pid of
the process that made it, a later process removes the entries of processes that are gone.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: What every work directory and cgroup of a run is called, before its owner's pid.
PREFIX = "masorch-sandbox-"
_OWNED = re.compile(re.escape(PREFIX) + r"(\d+)-")


def owned_prefix() -> str:
    """The name prefix of this process's entries: ``masorch-sandbox-<pid>-``."""
    return f"{PREFIX}{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep(tmp_dirs: Iterable[Path], cgroup_dirs: Iterable[Path], min_age_s: float) -> int:
    """Remove the entries of processes that are gone and that are older than ``min_age_s``.

    Work directories are looked for in ``tmp_dirs``, cgroups in ``cgroup_dirs`` (a cgroup that
    still holds a process is refused by the kernel and stays). Entries from before names carried
    a pid are left alone: nothing says whose they are. Returns how many entries were removed.
    """
    removed = 0
    now = time.time()
    for base, is_cgroup in [*((b, False) for b in tmp_dirs), *((b, True) for b in cgroup_dirs)]:
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            match = _OWNED.match(entry.name)
            if match is None or not entry.is_dir(follow_symlinks=False) or _alive(int(match.group(1))):
                continue
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime < min_age_s:
                    continue
            except OSError:
                continue
            if is_cgroup:
                try:
                    os.rmdir(entry.path)
                except OSError as exc:
                    logger.debug("sandbox: left cgroup %s: %s", entry.path, exc)
                    continue
            else:
                remove_tree(entry.path)
            removed += 1
    if removed:
        logger.info("sandbox: removed %d work directories and cgroups of processes that are gone", removed)
    return removed


def remove_tree(root: str) -> None:
    """Remove a work directory however deep the program made it (an explicit stack, no recursion:
    the interpreter's recursion limit is smaller than a program's 1,500 nested directories)."""
    stack, emptied = [root], []
    while stack:
        top = stack.pop()
        emptied.append(top)
        try:
            entries = list(os.scandir(top))
        except OSError as exc:
            logger.warning("sandbox: could not list %s: %s", top, exc)
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                _remove(os.unlink, entry.path)
    for directory in reversed(emptied):  # children were listed after their parents
        _remove(os.rmdir, directory)


def _remove(function: Any, path: str) -> None:
    try:
        function(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("sandbox: could not remove %s: %s", path, exc)
