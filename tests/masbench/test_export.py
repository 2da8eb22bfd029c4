"""Files: byte-identical regeneration, the golden file, the verl parquet layout and datasets loading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from masorch.masbench.check import check_records, stats
from masorch.masbench.export import read_records, verl_row, write_records
from masorch.masbench.suite import PAPER_SUITE, generate, jobs_for, parse_values

GOLDEN = Path(__file__).parent / "golden" / "small.jsonl"


def _golden_jobs():
    jobs = []
    for axis in ("depth", "horizon", "breadth", "parallel", "robustness"):
        jobs += jobs_for(axis, [(2, 1)], "train", 2024)
        jobs += jobs_for(axis, [(3, 1)], "test", 2024)
    return jobs


def test_golden_file_is_reproduced_exactly(tmp_path):
    out = tmp_path / "small.jsonl"
    write_records(out, generate(_golden_jobs()))
    if os.environ.get("MASBENCH_REGEN_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_bytes(out.read_bytes())
    assert out.read_bytes() == GOLDEN.read_bytes(), "regenerate with MASBENCH_REGEN_GOLDEN=1 if intended"


def test_golden_file_passes_the_check():
    report = check_records(read_records(GOLDEN))
    assert report.n == 10 and report.ok, report.problems


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_same_arguments_give_byte_identical_files(tmp_path, suffix):
    jobs = jobs_for("robustness", [(2, 3), (4, 2)], "test", 5) + jobs_for("depth", [(7, 3)], "test", 5)
    a, b = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    write_records(a, generate(jobs))
    write_records(b, generate(jobs, workers=2))
    assert a.read_bytes() == b.read_bytes()
    back = list(read_records(a))
    assert [r["id"] for r in back] == [r["id"] for r in generate(jobs)]


def test_parquet_has_the_verl_layout_and_loads_with_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    jobs = jobs_for("horizon", [(3, 2)], "train", 1) + jobs_for("depth", [(2, 2)], "train", 1)
    pq_path, js_path = tmp_path / "x.parquet", tmp_path / "x.jsonl"
    write_records(pq_path, generate(jobs))
    write_records(js_path, generate(jobs))
    ds = datasets.load_dataset("parquet", data_files=str(pq_path), split="train")
    row = ds[0]
    assert row["prompt"][0]["role"] == "user" and "Problem 3:" in row["prompt"][0]["content"]
    assert row["reward_model"]["ground_truth"].count("<<horizon>>") == 2
    assert row["data_source"] == "masbench/horizon" and row["axis"] == "horizon" and row["value"] == 3
    assert row["extra_info"]["measured"]["horizon"] == 3
    dj = datasets.load_dataset("json", data_files=str(js_path), split="train")
    assert (
        dj.num_rows == 4 and dj[3]["axis"] == "depth" and dj[0]["answers"] == ds[0]["extra_info"]["answers"]
    )


def test_verl_row_matches_the_record():
    rec = next(generate(jobs_for("robustness", [(3, 1)], "train", 0)))
    row = verl_row(rec)
    assert row["reward_model"]["ground_truth"] == "<<horizon>>".join(str(a) for a in rec["answers"])
    assert row["extra_info"]["decoys"] == rec["decoys"]


def test_check_finds_tampered_answers_and_split_overlap():
    train = list(generate(jobs_for("depth", [(3, 2)], "train", 0)))
    test = list(generate(jobs_for("depth", [(3, 2)], "test", 0)))
    assert check_records(train + test).ok
    bad = [dict(train[0], answers=[(train[0]["answers"][0] + 1) % 23])]
    assert any("evaluator answers" in p for p in check_records(bad).problems)
    leaked = dict(train[1], split="test")
    problems = check_records([train[1], leaked, *test]).problems
    assert any("both train and test" in p for p in problems)
    assert any("not in the test split" in p for p in problems)


def test_values_parse_ranges_and_lists():
    from masorch.errors import UsageError

    assert parse_values("2-4,8") == (2, 3, 4, 8)
    assert parse_values("12") == (12,)
    for bad in ("1-3", "4-2", "x", "2-13"):
        with pytest.raises(UsageError):
            parse_values(bad)


def test_paper_suite_sizes_and_ranges():
    sizes = {(p.axis, p.split): p.total for p in PAPER_SUITE}
    assert sizes[("depth", "train")] == 3993 and sizes[("robustness", "test")] == 600
    assert sum(sizes.values()) == 16579
    depth_test = next(p for p in PAPER_SUITE if p.axis == "depth" and p.split == "test")
    assert depth_test.values == tuple(range(2, 13))
    assert sum(n for _, n in depth_test.counts()) == 1195


def test_stats_counts_and_histogram():
    recs = list(generate(jobs_for("parallel", [(2, 3), (3, 2)], "train", 0)))
    st = stats(recs)
    assert st["instances"] == 5
    assert sum(st["answer_histogram"]) == 2 * 3 + 3 * 2
    assert st["measured_ranges"]["parallel"] == [2, 3]


def test_jsonl_files_of_different_axes_load_as_one_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    from masorch.masbench.export import jsonl_features

    files = []
    for axis, split in (("depth", "train"), ("robustness", "test"), ("horizon", "train")):
        path = tmp_path / f"{axis}_{split}.jsonl"
        write_records(path, generate(jobs_for(axis, [(2, 2)], split, 3)))
        files.append(str(path))
    ds = datasets.load_dataset(
        "json", data_files=files, features=jsonl_features(), split="train", cache_dir=str(tmp_path / "cache")
    )
    assert ds.num_rows == 6
    rob = [r for r in ds if r["axis"] == "robustness"]
    assert rob[0]["subtasks"][0]["needle"]["number"] > 10**6 and rob[0]["decoys"][0] is not None
    assert ds[0]["controls"]["depth"] == [2, 2]


def test_progress_counts_every_instance_a_consumer_takes():
    import itertools

    jobs = jobs_for("depth", [(2, 3)], "train", 0)
    made: list[int] = []
    stream = generate(jobs, progress=made.append)
    assert len(list(itertools.islice(stream, len(jobs)))) == 3  # islice stops without resuming the stream
    assert sum(made) == 3
