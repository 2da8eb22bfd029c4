"""Search: a multi-hop retrieval loop over the run's retriever, then an answer grounded in it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence

from masorch.agents import signatures
from masorch.agents.answer import extract_answer, normalize_answer
from masorch.agents.base import AgentContext, NodeInput, NodeOutput, NodeStatus
from masorch.agents.common import CallLog, missing_problem, problem_vars, prompt_messages
from masorch.backends.base import GenerateConfig
from masorch.errors import BackendError, MasorchError
from masorch.plan.catalogue import KindSignature

_QUERY = re.compile(
    r"^[\s>*_#-]*(?:search\s+)?query[*_\s]*[:：]\s*(?P<query>.+?)\s*$", re.IGNORECASE | re.MULTILINE
)
_DONE = re.compile(r"^[\s>*_#-]*(?:done|enough)\b", re.IGNORECASE | re.MULTILINE)

NO_RETRIEVER = (
    "the search agent needs a document retriever and this run has none "
    "(hint: give the run a corpus, e.g. masorch.agents.corpus.BM25Corpus.open(docs.jsonl, index_dir), "
    "or any object with search(query, k), such as a web-search provider)"
)


def parse_step(text: str) -> tuple[str, str]:
    """Read a search step reply as ``("query", text)``, ``("done", "")`` or ``("unclear", "")``.

    >>> parse_step("I need the year.\\nQUERY: founding year of Acme")
    ('query', 'founding year of Acme')
    >>> parse_step("DONE")
    ('done', '')
    """
    match = _QUERY.search(text)
    if match:
        query = match.group("query").strip(" \t\"'`*_")
        if query:
            return "query", query
    if _DONE.search(text):
        return "done", ""
    return "unclear", ""


def _key(doc: Mapping[str, str]) -> str:
    return str(doc.get("id") or f"{doc.get('title', '')}\n{doc.get('text', '')}")


class SearchAgent:
    """Up to ``max_hops`` rounds of: the model proposes a query (or says it has enough), the
    retriever returns ``top_k`` documents, new ones join the evidence. Then a final call answers
    from the evidence.

    Documents are deduplicated across hops by ``id`` (else title and text) and shown cut to
    ``max_doc_chars``. A repeated query ends the loop. An unclear reply on the first hop searches
    for the task itself; later it ends the loop. Without a retriever the node fails with a message
    saying how to configure one, so a run offers it only with one (``requires``).
    """

    #: What this agent needs from the run's environment (see ``AgentRegistry.offered``).
    requires: frozenset[str] = frozenset({"retriever"})

    def __init__(
        self,
        *,
        max_tokens: int = 2048,
        temperature: float = 0.0,
        max_doc_chars: int = 1500,
        signature: KindSignature | None = None,
    ) -> None:
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._max_doc_chars = max_doc_chars
        self._signature = signature or signatures.SEARCH

    @property
    def signature(self) -> KindSignature:
        """The ``search`` kind's signature (the default catalogue's unless an agent profile sets one)."""
        return self._signature

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        """Search hop by hop, then answer from what was found."""
        problem = missing_problem(node)
        if problem is not None:
            return problem
        retriever = ctx.retriever
        if retriever is None:
            return NodeOutput(status=NodeStatus.ERROR, error=NO_RETRIEVER)
        params = self.signature.resolve(node.params)
        top_k, max_hops = int(params["top_k"]), int(params["max_hops"])
        variables = problem_vars(node)
        config = GenerateConfig(temperature=self._temperature, max_tokens=self._max_tokens)
        log = CallLog()
        evidence: list[dict[str, str]] = []
        seen: set[str] = set()
        queries: list[str] = []
        try:
            for hop in range(max_hops):
                step = await log.complete(
                    ctx,
                    prompt_messages(
                        "agents/search_step.j2",
                        system_role="a research assistant with a search tool",
                        queries=queries,
                        evidence=evidence,
                        hops_left=max_hops - hop,
                        **variables,
                    ),
                    config,
                )
                action, query = parse_step(step.text)
                if action == "unclear" and hop == 0:
                    action, query = "query", variables["task"]
                if action != "query" or normalize_answer(query) in {normalize_answer(q) for q in queries}:
                    break
                queries.append(query)
                try:
                    found = await asyncio.to_thread(retriever.search, query, top_k)
                except MasorchError as exc:
                    return log.error(f"search for {query!r} failed: {exc}", {"queries": queries})
                self._gather(found, seen, evidence)
            final = await log.complete(
                ctx,
                prompt_messages(
                    "agents/search_answer.j2",
                    system_role="a research assistant",
                    evidence=evidence,
                    **variables,
                ),
                config,
            )
        except BackendError as exc:
            return log.error(f"model call failed: {exc}", {"queries": queries})
        answer = extract_answer(final.text)
        if not answer:
            return log.error("the final reply was empty", {"queries": queries})
        sources = "\n".join(f"[{i}] {doc['title']}" for i, doc in enumerate(evidence, start=1))
        rationale = f"{final.text}\n\nSources:\n{sources}" if evidence else final.text
        details = {"queries": queries, "documents": [doc["id"] for doc in evidence]}
        return log.ok(answer, rationale, details)

    def _gather(
        self, found: Sequence[Mapping[str, str]], seen: set[str], evidence: list[dict[str, str]]
    ) -> None:
        """Add the documents of ``found`` not seen before to ``evidence``, as the model is shown them."""
        for doc in found:
            key = _key(doc)
            if key not in seen:
                seen.add(key)
                evidence.append(self._shown(doc))

    def _shown(self, doc: Mapping[str, str]) -> dict[str, str]:
        text = str(doc.get("text", ""))
        if len(text) > self._max_doc_chars:
            text = text[: self._max_doc_chars].rstrip() + " ..."
        return {"id": _key(doc), "title": str(doc.get("title", "")), "text": text}
