"""The search agent (multi-hop over a tiny BM25 corpus) and the corpus itself."""

from __future__ import annotations

import json

import pytest

from masorch.agents.base import NodeInput, NodeStatus
from masorch.agents.corpus import BM25Corpus, Document, read_documents
from masorch.agents.search import SearchAgent, parse_step
from masorch.errors import RunError, UsageError

DOCS = [
    {"id": "acme", "title": "Acme Corporation", "text": "Acme Corporation was founded in 1990 by Jane Roe."},
    {"id": "roe", "title": "Jane Roe", "text": "Jane Roe, an engineer, was born in Lyon, France."},
    {"id": "lyon", "title": "Lyon", "text": "Lyon is a city in France on the Rhone river."},
    {
        "id": "bolt",
        "title": "Bolt Industries",
        "text": "Bolt Industries makes screws and was founded in 1920.",
    },
    {"id": "smith", "title": "John Smith", "text": "John Smith was born in Leeds and founded a bakery."},
]
QUESTION = "In which city was the founder of Acme Corporation born?"


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def corpus(corpus_file):
    return BM25Corpus.from_jsonl(corpus_file)


def test_corpus_ranks_the_matching_document_first(corpus):
    assert len(corpus) == 5
    hits = corpus.search("who founded Acme Corporation", 3)
    assert hits[0]["id"] == "acme" and set(hits[0]) == {"id", "title", "text"}
    assert corpus.search("Jane Roe born", 1)[0]["id"] == "roe"


def test_unknown_or_empty_queries_find_nothing(corpus):
    assert corpus.search("zyxwvut", 3) == []
    assert corpus.search("the of and", 3) == []
    assert corpus.search("", 3) == []


def test_index_is_saved_once_and_reused(corpus_file, tmp_path, monkeypatch):
    index_dir = tmp_path / "index"
    first = BM25Corpus.open(corpus_file, index_dir)
    assert (index_dir / "masorch_corpus.json").exists()

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the saved index should have been loaded")

    monkeypatch.setattr(BM25Corpus, "build", classmethod(no_rebuild))
    loaded = BM25Corpus.open(corpus_file, index_dir)
    assert loaded.search("Jane Roe born", 2) == first.search("Jane Roe born", 2)
    monkeypatch.undo()
    # A changed source file makes the index stale: it is rebuilt.
    corpus_file.write_text(json.dumps({"id": "x", "title": "Zeta", "text": "Zeta founded Omega."}) + "\n")
    rebuilt = BM25Corpus.open(corpus_file, index_dir)
    assert len(rebuilt) == 1 and rebuilt.search("Omega", 1)[0]["id"] == "x"


def test_bad_corpus_lines_name_the_place(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "1", "text": "ok"}\n{"id": "2", "title": "no text"}\n')
    with pytest.raises(UsageError, match=r"bad.jsonl:2"):
        read_documents(path)
    path.write_text("not json\n")
    with pytest.raises(UsageError, match=r"bad.jsonl:1: not JSON"):
        read_documents(path)
    with pytest.raises(UsageError):
        BM25Corpus.build([])


def test_ids_and_titles_default():
    corpus = BM25Corpus.build([Document("a", "", "alpha beta"), Document("b", "Gamma", "delta")])
    assert corpus.search("gamma", 1) == [{"id": "b", "title": "Gamma", "text": "delta"}]


def researcher(messages, config):
    """Asks for the founder, then the founder's birthplace, then answers from the evidence."""
    prompt = messages[-1].content
    if "Documents found so far" in prompt and "DONE" in prompt:
        if "born in Lyon" in prompt:
            return "DONE"
        if "founded in 1990 by Jane Roe" in prompt:
            return "The founder is Jane Roe.\nQUERY: Jane Roe birthplace born"
        return "QUERY: Acme Corporation founder"
    if "No documents found yet" in prompt:
        return "QUERY: Acme Corporation founder"
    assert "born in Lyon" in prompt
    return r"Jane Roe founded Acme [1] and was born in Lyon [2]. \boxed{Lyon}"


async def test_two_hops_retrieve_both_documents_then_answer(make_ctx, corpus):
    ctx = make_ctx(researcher, retriever=corpus)
    node = NodeInput("s", QUESTION, "", params={"top_k": 2, "max_hops": 4})
    out = await SearchAgent().run(node, ctx)
    assert out.status is NodeStatus.OK and out.answer == "Lyon"
    assert out.details["queries"] == ["Acme Corporation founder", "Jane Roe birthplace born"]
    assert {"acme", "roe"} <= set(out.details["documents"])
    assert ctx.calls == 4  # two queries, one DONE, one answer
    final_prompt = ctx.backend.calls[-1][0][-1].content
    # Both hops return the Jane Roe / Acme documents; each is shown once.
    assert final_prompt.count("Acme Corporation was founded in 1990") == 1
    assert final_prompt.count("was born in Lyon") == 1
    assert "Sources:" in out.rationale


async def test_stops_after_max_hops(make_ctx, corpus):
    queries = iter(["QUERY: Acme", "QUERY: Bolt", "QUERY: Smith", "QUERY: never asked"])

    def respond(messages, config):
        if "QUERY:" in messages[-1].content:
            return next(queries)
        return r"\boxed{unknown}"

    ctx = make_ctx(respond, retriever=corpus)
    out = await SearchAgent().run(NodeInput("s", QUESTION, "", params={"top_k": 1, "max_hops": 3}), ctx)
    assert out.details["queries"] == ["Acme", "Bolt", "Smith"] and ctx.calls == 4


async def test_a_repeated_query_ends_the_loop(make_ctx, corpus):
    ctx = make_ctx(["QUERY: Acme founder", "QUERY: acme founder", r"\boxed{Jane Roe}"], retriever=corpus)
    out = await SearchAgent().run(NodeInput("s", QUESTION, "", params={"top_k": 1, "max_hops": 5}), ctx)
    assert out.answer == "Jane Roe" and out.details["queries"] == ["Acme founder"] and ctx.calls == 3


async def test_an_unclear_first_step_searches_the_task(make_ctx, corpus):
    ctx = make_ctx(["Let me think about it.", "DONE", r"\boxed{1990}"], retriever=corpus)
    node = NodeInput("s", "", "When was Acme Corporation founded?", params={"top_k": 1, "max_hops": 2})
    out = await SearchAgent().run(node, ctx)
    assert out.details["queries"] == ["When was Acme Corporation founded?"]
    assert out.details["documents"] == ["acme"]


async def test_without_a_retriever_the_node_fails_clearly(make_ctx):
    ctx = make_ctx([])
    out = await SearchAgent().run(NodeInput("s", QUESTION, ""), ctx)
    assert out.status is NodeStatus.ERROR and "retriever" in out.error and "BM25Corpus" in out.error
    assert ctx.calls == 0


async def test_a_failing_retriever_is_a_node_error(make_ctx):
    class Offline:
        def search(self, query, k):
            raise RunError("web search is offline", hint="try later")

    ctx = make_ctx(["QUERY: anything"], retriever=Offline())
    out = await SearchAgent().run(NodeInput("s", QUESTION, ""), ctx)
    assert out.status is NodeStatus.ERROR and "web search is offline" in out.error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("QUERY: acme founder", ("query", "acme founder")),
        ('Reasoning first.\n**Query:** "acme founder"', ("query", "acme founder")),
        ("search query: x y", ("query", "x y")),
        ("Done.", ("done", "")),
        ("I have enough information.", ("unclear", "")),
        ("ENOUGH", ("done", "")),
    ],
)
def test_parse_step(text, expected):
    assert parse_step(text) == expected
