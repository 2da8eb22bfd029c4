"""The llama.cpp server engine's cache and build, with a fake CMake and pip (no compiler, no network)."""

from __future__ import annotations

import platform
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from masorch.backends.engine import EngineStore, SourcePin
from masorch.fetch import sha256_file


def _legacy(store: EngineStore) -> Path:
    """A binary where builds went before the cache was keyed on the architecture."""
    binary = store.cache_dir / f"llama-server-{store.source.version}" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return binary


@pytest.mark.parametrize("machine", ["aarch64", "arm64"])
def test_a_cached_engine_is_not_reused_by_another_architecture(
    tmp_path: Path, machine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: machine)
    store = EngineStore(tmp_path / "engines", env={})
    _legacy(store)  # an x86-64 build in a shared cache
    assert store.find() is None and store.build_dir.name == "llama-server-0.3.36-aarch64"


def test_an_x86_64_build_from_before_the_key_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    store = EngineStore(tmp_path / "engines", env={})
    legacy = _legacy(store)
    assert store.find() == legacy and store.build() == legacy  # no rebuild
    store.built_binary.parent.mkdir(parents=True)
    store.built_binary.write_text("#!/bin/sh\n")
    store.built_binary.chmod(0o755)
    assert store.find() == store.built_binary  # a build for this architecture comes first


# -- the build, with a fake pip and CMake -------------------------------------------------------------


def _fake_tools(tmp_path: Path) -> tuple[SourcePin, Path, Path, Path]:
    """A pinned source archive, a ``python`` whose pip drops it, and a ``cmake`` that logs its compiles."""
    root = "llama_cpp_python-0.3.36/vendor/llama.cpp"
    tree = tmp_path / "tree" / root
    tree.mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("project(llama)\n")
    archive = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "tree" / "llama_cpp_python-0.3.36", arcname="llama_cpp_python-0.3.36")
    pin = SourcePin("llama-cpp-python", "0.3.36", sha256_file(archive), "vendor/llama.cpp")
    python = tmp_path / "python"
    python.write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = "-d" ] && { shift; cp '
        f'"{archive}" "$1/"; }}; shift; done\n'
    )
    compiles = tmp_path / "compiles"
    cmake = tmp_path / "cmake"
    cmake.write_text(
        '#!/bin/sh\nif [ "$1" = "--build" ]; then\n'
        f'  echo x >> "{compiles}"; sleep 1\n'
        '  mkdir -p "$2/bin"; printf "#!/bin/sh\\n" > "$2/bin/llama-server"; chmod +x "$2/bin/llama-server"\n'
        '  echo "[100%] Built target llama-server"\nfi\n'
    )
    for tool in (python, cmake):
        tool.chmod(0o755)
    return pin, python, cmake, compiles


def test_two_builds_at_once_compile_once_and_both_get_the_binary(tmp_path: Path) -> None:
    pin, python, cmake, compiles = _fake_tools(tmp_path)

    def store() -> EngineStore:
        return EngineStore(tmp_path / "engines", source=pin, python=str(python), cmake=str(cmake), env={})

    # Threads stand in for processes: each build opens the lock file itself, and flock locks per open.
    with ThreadPoolExecutor(2) as pool:
        built = list(pool.map(lambda _: store().build(), range(2)))
    assert built == [store().built_binary] * 2 and store().find() == built[0]
    assert compiles.read_text().count("x") == 1  # the second waited, then used the first's binary
    assert not list(store().build_dir.glob(".llama-server*"))  # nothing staged is left behind
    store().build(force=True)
    assert compiles.read_text().count("x") == 2


def test_a_build_waits_for_another_only_so_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    from masorch.backends import engine
    from masorch.errors import RunError

    pin, python, cmake, compiles = _fake_tools(tmp_path)
    store = EngineStore(tmp_path / "engines", source=pin, python=str(python), cmake=str(cmake), env={})
    store.cache_dir.mkdir(parents=True)
    monkeypatch.setattr(engine, "BUILD_WAIT_S", 1.0)
    with (store.cache_dir / f".{store.build_dir.name}.lock").open("ab") as held:  # a stuck build
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(RunError, match=r"building the engine .* for over"):
            store.build()
    assert not compiles.exists()
