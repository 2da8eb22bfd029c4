"""--data with your own files (.jsonl/.parquet/.csv), the MASBench release layout and hf: sources."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from eval_helpers import SumBackendFactory
from typer.testing import CliRunner

from masorch.cli import eval as eval_cli
from masorch.errors import UsageError
from masorch.eval.datasets.custom import FieldMap
from masorch.eval.harness import EnvSpec
from masorch.eval.log import RunLog
from masorch.eval.sources import resolve

# SumBackendFactory(wrong_every=3) answers "Item i. What is a plus b?" wrongly when i % 3 == 0.
ROWS = [{"key": f"k{i}", "q": f"Item {i}. What is {i} plus 4?", "gold": (i + 4) % 23} for i in range(4)]
VERDICTS = {"k0": False, "k1": True, "k2": True, "k3": False}


def _app() -> typer.Typer:
    app = typer.Typer()
    eval_cli.register(app, env_factory=lambda args: EnvSpec(backend_factory=SumBackendFactory(wrong_every=3)))
    return app


def _eval(data: Path | str, out: Path, *extra: str):
    args = ["eval", "run", "--systems", "sas:cot", "--model", "scripted:m", "--data", str(data)]
    return CliRunner().invoke(_app(), [*args, "--out", str(out), "--no-plots", *extra])


def _write(path: Path, rows: list[dict]) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_own_file_with_named_fields_and_a_chosen_scorer(tmp_path: Path, suffix: str) -> None:
    data = _write(tmp_path / f"mine{suffix}", ROWS)
    fields = ["--question-field", "q", "--answer-field", "gold", "--id-field", "key", "--scorer", "em"]
    result = _eval(data, tmp_path / "o", *fields)
    assert result.exit_code == 0, result.output
    _, records = RunLog.read(tmp_path / "o")
    assert {r["sample_id"]: r["correct"] for r in records} == {f"mine/{k}": v for k, v in VERDICTS.items()}
    assert {r["dataset"] for r in records} == {"mine"}
    assert "4/4 samples, accuracy 50.0%" in result.output


def test_default_fields_and_row_number_ids(tmp_path: Path) -> None:
    rows = [{"question": r["q"], "answer": r["gold"], "topic": "sums"} for r in ROWS]
    source = resolve(str(_write(tmp_path / "data.csv", rows)), scorer="exact")
    assert [s.id for s in source.samples] == ["data/0", "data/1", "data/2", "data/3"]
    assert source.samples[1].answer == "5" and source.samples[1].meta == {"topic": "sums"}


def test_own_data_needs_a_scorer_and_bad_rows_are_named(tmp_path: Path) -> None:
    data = _write(tmp_path / "mine.jsonl", ROWS)
    result = _eval(data, tmp_path / "o", "--question-field", "q", "--answer-field", "gold")
    assert isinstance(result.exception, UsageError) and "choose how answers are graded" in str(
        result.exception
    )
    assert not (tmp_path / "o" / "log.jsonl").exists()  # nothing written, nothing lost
    with pytest.raises(
        UsageError, match=r"row 0: no question in column 'question' \(columns: key, q, gold\)"
    ):
        resolve(str(data), scorer="exact")
    with pytest.raises(UsageError, match="the id 'k1' is used twice"):
        resolve(
            str(_write(tmp_path / "dup.jsonl", [*ROWS, ROWS[1]])),
            scorer="exact",
            fields=FieldMap("q", "gold", "key"),
        )
    blank = [{**ROWS[0], "gold": None}]
    with pytest.raises(UsageError, match="row 0: no answer in column 'gold'"):
        resolve(str(_write(tmp_path / "blank.parquet", blank)), scorer="exact", fields=FieldMap("q", "gold"))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", b"", "no samples"),
        ("empty.jsonl", b"\n\n", "no samples"),
        ("latin1.csv", "question,answer\nCaf\xe9?,oui\n".encode("latin-1"), "not UTF-8"),
        ("nul.jsonl", b'{"question": "a\x00"}\n', "is binary"),
        ("bad.jsonl", b'{"question": "q", "answer": "a"}\n{oops\n', "bad.jsonl:2: not JSON"),
        ("bad.parquet", b"PAR1 not really", "not a readable parquet file"),
        ("notes.txt", b"question,answer\n", "unknown data file type"),
    ],
)
def test_bad_files_are_one_usage_error(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    result = _eval(path, tmp_path / "o", "--scorer", "exact")
    assert isinstance(result.exception, UsageError), result.output
    assert message in str(result.exception)


def test_a_huge_jsonl_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b'{"question": "' + b"x" * (17 << 20) + b'"}\n')
    with pytest.raises(UsageError, match=r"huge\.jsonl:1: a line longer than 16 MiB"):
        resolve(str(path), scorer="exact")


def _release_rows(axis: str, n: int, values: tuple[str, ...] = ("2", "3")) -> list[dict]:
    """Rows with the columns of the official MASBench release (its parquet files, one config per axis)."""
    rows = []
    for value in values:
        for i in range(n):
            a, b = i + int(value), 2 * i + 1
            answers = [(a + b) % 23] if axis != "horizon" else [(a + b) % 23, (a * b) % 23]
            rows.append(
                {
                    "reward_model_json": json.dumps({"ground_truth": "<<horizon>>".join(map(str, answers))}),
                    "extra_info_json": json.dumps({"index": i}),
                    "prompt_json": json.dumps(
                        [
                            {"role": "system", "content": "You design multi-agent systems."},
                            {"role": "user", "content": f"Item {i}. What is {a} plus {b}? Modulo 23."},
                        ]
                    ),
                    "axis": axis,
                    "value": value,
                    "data": "igsm",
                }
            )
    return rows


def test_the_masbench_release_layout_loads_with_the_masbench_scorer(tmp_path: Path) -> None:
    path = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(_release_rows("depth", 3)), path)
    source = resolve(str(path), limit=2)  # --limit is per axis value, as for MASBench files
    assert source.scorer == "masbench" and source.name == "masbench:test-00000-of-00001"
    assert [s.id for s in source.samples] == ["depth/2/0", "depth/2/1", "depth/3/3", "depth/3/4"]
    first = source.samples[0]
    assert first.question == "Item 0. What is 2 plus 1? Modulo 23." and first.answer == "3"
    assert first.meta["axis"] == "depth" and first.meta["extra_info"] == {"index": 0}
    result = _eval(path, tmp_path / "o")
    assert result.exit_code == 0, result.output
    _, records = RunLog.read(tmp_path / "o")
    assert len(records) == 6 and sum(r["correct"] for r in records) == 4  # items 0 and 3 answered wrong
    horizon = resolve(str(_write(tmp_path / "h.jsonl", _release_rows("horizon", 1, ("2",)))))
    assert horizon.samples[0].meta["answers"] == [3, 2]


def test_bad_release_rows_are_named(tmp_path: Path) -> None:
    row = _release_rows("depth", 1, ("2",))[0]
    for broken, message in [
        ({"prompt_json": "{oops"}, "the column prompt_json is not JSON"),
        ({"prompt_json": "[]"}, "no user message"),
        ({"reward_model_json": json.dumps({"ground_truth": "x<<horizon>>1"})}, "not integers"),
    ]:
        with pytest.raises(UsageError, match=message):
            resolve(str(_write(tmp_path / "r.jsonl", [{**row, **broken}])))


def test_hf_sources_load_through_datasets_with_the_release_configs(tmp_path: Path, monkeypatch) -> None:
    # A local copy laid out as the hub repository: one config per axis, parquet per split.
    pytest.importorskip("datasets")
    repo = tmp_path / "MASBench"
    for axis in ("depth", "horizon"):
        (repo / axis).mkdir(parents=True)
        pq.write_table(
            pa.Table.from_pylist(_release_rows(axis, 2)), repo / axis / "test-00000-of-00001.parquet"
        )
    configs = "".join(
        f"- config_name: {a}\n  data_files:\n  - split: test\n    path: {a}/test-*.parquet\n"
        for a in ("depth", "horizon")
    )
    (repo / "README.md").write_text(f"---\nconfigs:\n{configs}---\n# MASBench (test copy)\n")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    source = resolve(f"hf:{repo}:horizon", cache_dir=tmp_path / "cache")  # the test split by default
    assert source.scorer == "masbench" and source.name == f"hf:{repo}:horizon"
    assert len(source.samples) == 4 and source.samples[0].meta["answers"] == [3, 2]
    assert (tmp_path / "cache" / "hub").is_dir()  # datasets' cache lives in the masorch data cache


def test_hf_errors_are_usage_errors(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(UsageError, match="is not hf:NAME"):
        resolve("hf:a:b:c:d")
    monkeypatch.setitem(sys.modules, "datasets", None)  # the data extra is not installed
    result = _eval("hf:someone/some-set", tmp_path / "o", "--scorer", "f1")
    assert isinstance(result.exception, UsageError) and "pip install 'masorch[data]'" in result.exception.hint


def test_hf_offline_and_unknown_is_a_named_error(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError) as info:
        resolve(f"hf:{tmp_path / 'no-such-set'}:x:test", cache_dir=tmp_path, scorer="exact")
    assert info.value.code == "data_hub" and "could not load" in info.value.message


def test_scorer_aliases_map_onto_the_one_registry(tmp_path: Path) -> None:
    data = _write(tmp_path / "mine.jsonl", [{"question": r["q"], "answer": r["gold"]} for r in ROWS])
    assert resolve(str(data), scorer="em").scorer == "exact"
    result = _eval(data, tmp_path / "o", "--scorer", "judge")
    assert isinstance(result.exception, UsageError) and "needs --judge-model" in str(result.exception)
    with pytest.raises(UsageError, match="unknown scorer"):
        resolve(str(data), scorer="bleu")


def test_skip_leaves_out_the_first_rows_and_keeps_their_ids(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "question": f"What is {i} plus 1?", "answer": str(i + 1)} for i in range(5)]
    path = _write(tmp_path / "own.jsonl", rows)
    source = resolve(str(path), scorer="exact", skip=2, limit=2)
    assert [s.answer for s in source.samples] == ["3", "4"]
    assert [s.id for s in source.samples] == [s.id for s in resolve(str(path), scorer="exact").samples][2:4]
    release = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(_release_rows("depth", 3)), release)
    skipped = resolve(str(release), skip=4)  # records 4 and 5: depth 3's last two
    assert [s.id for s in skipped.samples] == ["depth/3/4", "depth/3/5"]
    with pytest.raises(UsageError, match="skip must be >= 0"):
        resolve(str(path), scorer="exact", skip=-1)


def test_masbench_prefix_without_a_path_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the current directory would have been read as MASBench files
    with pytest.raises(UsageError, match="names no files"):
        resolve("masbench:")


def test_a_small_parquet_file_that_decodes_to_gigabytes_is_refused(tmp_path) -> None:
    # One long text a dictionary page repeats in every row: a few kB on disk, 300 MB decoded (the
    # auditor's file: 0.77 MB holding 5 GB, which ran the reader out of memory).
    from masorch.eval.datasets.rows import read_rows

    bomb = tmp_path / "bomb.parquet"
    pq.write_table(pa.table({"question": ["x" * 1_000_000] * 300, "answer": ["1"] * 300}), bomb)
    assert bomb.stat().st_size < 100_000
    with pytest.raises(UsageError, match="holds more than 50 MiB of data"):
        read_rows(bomb, max_bytes=50 << 20)
    # A text compressed a thousandfold is refused from the footer's sizes, before any decoding.
    packed = tmp_path / "packed.parquet"
    pq.write_table(pa.table({"question": ["y" * 80_000_000], "answer": ["1"]}), packed, compression="zstd")
    assert packed.stat().st_size < 1_000_000
    with pytest.raises(UsageError, match="holds more than 50 MiB of data"):
        read_rows(packed, max_bytes=50 << 20)
    fine = tmp_path / "fine.parquet"
    pq.write_table(pa.table({"question": ["What is 1 plus 2?"] * 3, "answer": ["3"] * 3}), fine)
    assert read_rows(fine, max_bytes=50 << 20) == [{"question": "What is 1 plus 2?", "answer": "3"}] * 3


def test_a_masbench_id_met_twice_is_refused_naming_both_files(tmp_path: Path) -> None:
    from masorch.cli.main import main

    suite = tmp_path / "suite"
    argv = ["bench", "make", "--axis", "depth", "--values", "2", "--n", "2", "-q"]
    assert main([*argv, "-o", str(suite / "d.jsonl")]) == 0
    assert main([*argv, "-o", str(suite / "d.parquet")]) == 0
    with pytest.raises(UsageError, match=r"occurs twice in .*d\.parquet \(also in .*d\.jsonl\)") as err:
        resolve(str(suite))
    assert "keep one of them" in (err.value.hint or "")
    twice = tmp_path / "twice.jsonl"
    line = (suite / "d.jsonl").read_text().splitlines()[0]
    twice.write_text(line + "\n" + line + "\n")
    with pytest.raises(UsageError, match="occurs twice in"):
        resolve(f"masbench:{twice}")
    with pytest.raises(UsageError, match="occurs twice in"):
        resolve(str(twice))


@pytest.mark.parametrize("gold", ["1,000", "3|4", "1/2"])
def test_answers_the_masbench_scorer_cannot_read_are_refused_before_calls(tmp_path: Path, gold: str) -> None:
    rows = [{"question": "2+2?", "answer": "4"}, {"question": "big?", "answer": gold}]
    data = _write(tmp_path / "mine.jsonl", rows)
    with pytest.raises(UsageError, match=r"sample 'mine/1' has the answer .* not integers") as err:
        resolve(str(data), scorer="masbench")
    assert "--scorer" in err.value.hint
    result = _eval(data, tmp_path / "o", "--scorer", "masbench_final")
    assert isinstance(result.exception, UsageError)
    assert not (tmp_path / "o" / "log.jsonl").exists()


def test_masbench_records_whose_answers_are_not_integers_are_refused(tmp_path: Path) -> None:
    from masorch.cli.main import main

    out = tmp_path / "d.jsonl"
    assert main(["bench", "make", "--axis", "depth", "--values", "2", "--n", "1", "-q", "-o", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert resolve(str(out)).scorer == "masbench"
    rec["answers"] = [str(a) for a in rec["answers"]]
    out.write_text(json.dumps(rec) + "\n")
    with pytest.raises(UsageError, match="not integers"):
        resolve(str(out))


def test_a_masbench_suite_directory_gives_every_record(tmp_path: Path) -> None:
    from masorch.cli.main import main

    suite = tmp_path / "suite"
    argv = ["bench", "make", "--axis", "depth", "--values", "2-3", "--n", "2", "-q"]
    assert main([*argv, "-o", str(suite / "a.jsonl")]) == 0
    assert main([*argv, "--seed", "9", "-o", str(suite / "b.parquet")]) == 0
    assert len(resolve(str(suite)).samples) == 8
