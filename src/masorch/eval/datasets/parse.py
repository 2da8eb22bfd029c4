"""Pure parsers from the raw records of each source file to :class:`Sample` lists, and the corpus builder."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from masorch.errors import UsageError
from masorch.eval.datasets.types import Sample

_MMATH_KEYS = ("question", "answer", "data_source", "data_source_id")
_HOTPOT_KEYS = ("_id", "question", "answer", "context")
_REPULL = "the cached file is corrupt or not the pinned one: pull again with --force"


def strip_math_delimiters(text: str) -> str:
    """Drop one pair of surrounding ``$...$`` / ``$$...$$`` and outer whitespace.

    >>> strip_math_delimiters("$\\\\frac{3}{4}$")
    '\\\\frac{3}{4}'
    >>> strip_math_delimiters(" 204 ")
    '204'
    """
    text = text.strip()
    for delim in ("$$", "$"):
        if len(text) > 2 * len(delim) and text.startswith(delim) and text.endswith(delim):
            return text[len(delim) : -len(delim)].strip()
    return text


def _require(record: object, keys: Sequence[str], where: str) -> Mapping[str, Any]:
    if not isinstance(record, Mapping):
        raise UsageError(
            f"{where}: expected a JSON object, got {type(record).__name__}",
            hint=_REPULL,
            code="data_format",
        )
    missing = [k for k in keys if k not in record]
    if missing:
        raise UsageError(
            f"{where} lacks field(s) {', '.join(missing)}",
            hint=_REPULL,
            code="data_format",
        )
    return record


def _is_paragraph(item: object) -> bool:
    """Whether ``item`` is a HotpotQA paragraph: ``[title, [sentence, ...]]``."""
    return (
        isinstance(item, list | tuple)
        and len(item) == 2
        and isinstance(item[0], str)
        and isinstance(item[1], list | tuple)
        and all(isinstance(sentence, str) for sentence in item[1])
    )


def _context(record: Mapping[str, Any], where: str) -> list[list[Any]]:
    """A HotpotQA record's ``context`` as ``[title, [sentence, ...]]`` pairs; another shape is an error."""
    context = record["context"]
    if not (isinstance(context, list) and all(_is_paragraph(p) for p in context)):
        raise UsageError(
            f"{where}: context is not a list of [title, [sentence, ...]] pairs",
            hint=_REPULL,
            code="data_format",
        )
    return [[title, list(sentences)] for title, sentences in context]


def _facts(record: Mapping[str, Any], where: str) -> list[list[Any]]:
    """A HotpotQA record's ``supporting_facts`` (none when absent) as ``[title, sentence index]`` pairs."""
    facts = record.get("supporting_facts", [])
    if not (isinstance(facts, list) and all(isinstance(f, list | tuple) and len(f) == 2 for f in facts)):
        raise UsageError(
            f"{where}: supporting_facts is not a list of [title, sentence index] pairs",
            hint=_REPULL,
            code="data_format",
        )
    return [list(f) for f in facts]


def parse_mmath(records: Iterable[object], *, dataset: str, data_source: str) -> list[Sample]:
    """The MMATH records whose ``data_source`` equals ``data_source``, as samples of ``dataset``.

    Ids are ``<dataset>/<data_source_id>`` (for MATH-500 the index into the original 500 problems);
    answers lose their surrounding ``$`` (the raw form stays in ``meta["raw_answer"]``).
    """
    samples: list[Sample] = []
    for index, raw in enumerate(records):
        record = _require(raw, _MMATH_KEYS, f"MMATH record {index}")
        if record["data_source"] != data_source:
            continue
        raw_answer = str(record["answer"])
        samples.append(
            Sample(
                id=f"{dataset}/{record['data_source_id']}",
                question=str(record["question"]).strip(),
                answer=strip_math_delimiters(raw_answer),
                dataset=dataset,
                meta={
                    "data_source": record["data_source"],
                    "data_source_id": record["data_source_id"],
                    "gid": record.get("gid"),
                    "raw_answer": raw_answer,
                },
            )
        )
    return samples


def parse_hotpotqa(records: Iterable[object], *, dataset: str = "hotpotqa") -> list[Sample]:
    """HotpotQA records (official dev format) as samples; ``meta`` keeps type, level, facts and context."""
    samples: list[Sample] = []
    for index, raw in enumerate(records):
        where = f"HotpotQA record {index}"
        record = _require(raw, _HOTPOT_KEYS, where)
        samples.append(
            Sample(
                id=str(record["_id"]),
                question=str(record["question"]).strip(),
                answer=str(record["answer"]).strip(),
                dataset=dataset,
                meta={
                    "type": record.get("type"),
                    "level": record.get("level"),
                    "supporting_facts": _facts(record, where),
                    "context": _context(record, where),
                },
            )
        )
    return samples


def iter_corpus(records: Iterable[object]) -> Iterator[dict[str, str]]:
    """Every context paragraph of HotpotQA records, deduplicated by title (first occurrence wins).

    Yields ``{"id", "title", "text"}`` with ids ``"0"``, ``"1"``, ... in first-seen order; the text is
    the paragraph's sentences joined as in the official file (sentences carry their own spacing).
    """
    seen: set[str] = set()
    for index, raw in enumerate(records):
        where = f"HotpotQA record {index}"
        for title, sentences in _context(_require(raw, ("context",), where), where):
            if title in seen:
                continue
            seen.add(title)
            yield {"id": str(len(seen) - 1), "title": str(title), "text": "".join(sentences).strip()}
