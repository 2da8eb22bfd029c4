"""A local document corpus with a BM25 index (bm25s): the search agent's default retriever.

Documents come from a JSONL file, one ``{"id", "title", "text"}`` object per line (``text``
required; ``id`` defaults to the line number, ``title`` to empty). :meth:`BM25Corpus.open` builds
the index once, saves it to a directory next to a fingerprint of the source file, and loads it on
later runs while the file is unchanged.

Any other source of documents plugs into the search agent through the same
:class:`masorch.agents.base.Retriever` protocol: an object with ``search(query, k)`` returning up
to ``k`` mappings with ``title`` and ``text`` (and ideally a stable ``id``, used to drop duplicates
across hops). A web-search provider is such an object wrapping its HTTP API; it should raise a
:class:`masorch.errors.RunError` on failure so that the agent reports it as a node error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s

from masorch.errors import UsageError
from masorch.fetch import sha256_file
from masorch.files import iter_jsonl, read_text

logger = logging.getLogger(__name__)

_FORMAT = 1
_META = "masorch_corpus.json"
_DOCS = "documents.jsonl"


@dataclass(frozen=True)
class Document:
    """One searchable document."""

    id: str
    title: str
    text: str

    def as_dict(self) -> dict[str, str]:
        """The mapping the :class:`~masorch.agents.base.Retriever` protocol returns."""
        return {"id": self.id, "title": self.title, "text": self.text}


def read_documents(path: str | Path) -> list[Document]:
    """Read a JSONL corpus; a bad line is a usage error naming the file and line."""
    documents: list[Document] = []
    hint = 'each line must be a JSON object like {"id": "1", "title": "...", "text": "..."}'
    for number, row in iter_jsonl(path, what="JSONL corpus", item="a document", hint=hint):
        if not isinstance(row.get("text"), str):
            raise UsageError(f"{path}:{number}: a document needs a string 'text'", hint=hint)
        documents.append(Document(str(row.get("id", number)), str(row.get("title", "") or ""), row["text"]))
    if not documents:
        raise UsageError(f"corpus {path} has no documents", hint="add one JSON document per line")
    return documents


def _tokenizer() -> bm25s.tokenization.Tokenizer:
    return bm25s.tokenization.Tokenizer(stopwords="en", stemmer=None)


class BM25Corpus:
    """BM25 search over a fixed set of documents (English stopwords removed, no stemming).

    Implements :class:`masorch.agents.base.Retriever`. Build with :meth:`build`, :meth:`from_jsonl`
    or (cached on disk) :meth:`open`.
    """

    def __init__(
        self,
        documents: Sequence[Document],
        index: bm25s.BM25,
        tokenizer: bm25s.tokenization.Tokenizer,
    ) -> None:
        self._documents = tuple(documents)
        self._index = index
        self._tokenizer = tokenizer

    @classmethod
    def build(cls, documents: Iterable[Document]) -> BM25Corpus:
        """Index these documents (title and text)."""
        docs = list(documents)
        if not docs:
            raise UsageError("cannot index an empty corpus", hint="give at least one document")
        tokenizer = _tokenizer()
        texts = [f"{d.title}\n{d.text}" if d.title else d.text for d in docs]
        tokens = tokenizer.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
        index = bm25s.BM25()
        index.index(tokens, show_progress=False)
        return cls(docs, index, tokenizer)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> BM25Corpus:
        """Read and index a JSONL corpus (no caching)."""
        return cls.build(read_documents(path))

    @classmethod
    def open(cls, path: str | Path, index_dir: str | Path) -> BM25Corpus:
        """The corpus of a JSONL file, loading the index from ``index_dir`` if it matches the file.

        The index is (re)built and saved when ``index_dir`` is empty, missing, or was built from a
        different version of the file.
        """
        path, index_dir = Path(path), Path(index_dir)
        if not path.is_file():
            raise UsageError(f"corpus file {path} does not exist", hint="pass an existing JSONL file")
        fingerprint = sha256_file(path)
        meta_path = index_dir / _META
        if meta_path.is_file():
            try:
                meta = json.loads(read_text(meta_path, what="corpus index metadata", max_bytes=1 << 16))
            except (UsageError, json.JSONDecodeError):
                meta = None  # damaged: rebuilt below like a stale one
            if not isinstance(meta, dict):
                meta = {}
            if meta.get("format") == _FORMAT and meta.get("source_sha256") == fingerprint:
                return cls.load(index_dir)
            logger.info("corpus index in %s is stale; rebuilding from %s", index_dir, path)
        corpus = cls.from_jsonl(path)
        corpus.save(index_dir, source_sha256=fingerprint)
        return corpus

    def save(self, directory: str | Path, *, source_sha256: str = "") -> None:
        """Write the index, vocabulary and documents to ``directory`` (created if needed)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._index.save(str(directory))
        self._tokenizer.save_vocab(str(directory))
        self._tokenizer.save_stopwords(str(directory))
        with (directory / _DOCS).open("w", encoding="utf-8") as handle:
            for doc in self._documents:
                handle.write(json.dumps(doc.as_dict(), ensure_ascii=False) + "\n")
        meta = {"format": _FORMAT, "source_sha256": source_sha256, "documents": len(self._documents)}
        # Written last: its presence means the directory holds a complete index.
        (directory / _META).write_text(json.dumps(meta), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path) -> BM25Corpus:
        """Load a corpus saved by :meth:`save`."""
        directory = Path(directory)
        if not (directory / _META).is_file():
            raise UsageError(
                f"{directory} holds no saved corpus index", hint="build it with BM25Corpus.open(jsonl, dir)"
            )
        index = bm25s.BM25.load(str(directory))
        tokenizer = _tokenizer()
        tokenizer.load_vocab(str(directory))
        tokenizer.load_stopwords(str(directory))
        documents = read_documents(directory / _DOCS)
        return cls(documents, index, tokenizer)

    def __len__(self) -> int:
        return len(self._documents)

    def search(self, query: str, k: int) -> list[dict[str, str]]:
        """Up to ``k`` documents matching ``query``, best first; none when no query word is known."""
        if k < 1 or not query.strip():
            return []
        tokens = self._tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
        k = min(k, len(self._documents))
        indices, scores = self._index.retrieve(tokens, k=k, show_progress=False)
        return [
            self._documents[int(i)].as_dict()
            for i, score in zip(indices[0], scores[0], strict=True)
            if float(score) > 0.0
        ]
