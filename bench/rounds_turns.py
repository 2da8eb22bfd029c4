"""Do the embedded models make well-formed tool calls as rounds orchestrators, constrained or free?

For each orchestrator model and decoding (the tool-call grammar, free), one greedy first
orchestrator turn of the rounds mode per question (docs/rounds.md): the system prompt and the
question as `masorch run --mode rounds` sends them, the tools a run without a corpus offers, the
default limits (12 rounds, 4 calls a round). The turn is checked as the round would check it,
nothing is run. Questions: the 80 of `bench/plan_validity.py` (40 held-out MASBench test tasks,
the first 40 math500-subset problems; its `--out` directory holds the MASBench files).

A turn is **well-formed** when it makes at least one call and every call would run (no
`FORMAT_ERR`, no `REJECTED`), or is one `final_answer` with an answer (or `synthesize: true`).
Results go to ``OUT/turns.jsonl``, one line per call (resumable; calls through
``OUT/cache.sqlite``). A model whose chat template asks for no Hermes ``<tool_call>`` blocks
decodes freely in both cells (the backend says so in its log); the Qwen models do.

    python bench/rounds_turns.py --out runs/plan_validity5            # run what is missing, then the table
    python bench/rounds_turns.py --out runs/plan_validity5 --report   # the table only
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
from pathlib import Path
from typing import Any

from plan_validity import make_data, questions

MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")


async def turns(out: Path, models: tuple[str, ...], limit: int, tokens: int, concurrency: int) -> None:
    """One first turn per (model, decoding, question), appended to ``OUT/turns.jsonl``."""
    from masorch.agents import default_registry
    from masorch.agents.registry import offered_registry
    from masorch.backends.registry import BackendSettings, make_backend
    from masorch.run.round_exec import RoundsOptions

    results = out / "turns.jsonl"
    done = set()
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done.add((r["model"], r["constrain"], r["id"]))
    items = questions(out, limit)
    registry = offered_registry(default_registry(), retriever=False)
    settings = BackendSettings(cache_path=out / "cache.sqlite", slots=concurrency)
    for model in models:
        backend = make_backend(f"local:{model}", settings=settings)
        gate = asyncio.Semaphore(concurrency)
        for constrain in (True, False):
            opts = RoundsOptions(max_tokens=tokens, constrain=constrain)
            todo = [q for q in items if (model, constrain, q.id) not in done]
            print(f"{model} constrain={constrain}: {len(todo)} calls", flush=True)

            cell = Cell(backend, gate, registry, opts, model, results)
            await asyncio.gather(*[cell.one(q) for q in todo])
        await backend.aclose()


class Cell:
    """One (model, decoding) cell: its backend, options and where its records go."""

    def __init__(self, backend: Any, gate: asyncio.Semaphore, registry: Any, opts: Any, model: str,
                 results: Path) -> None:  # fmt: skip
        self.backend, self.gate, self.registry = backend, gate, registry
        self.opts, self.model, self.results = opts, model, results

    async def one(self, q: Any) -> None:
        """The first turn of ``q``, checked, appended to the results."""
        from masorch.run.executor import RoleBackends
        from masorch.run.round_exec import RoundCalls
        from masorch.run.rounds import turn_grammar
        from masorch.run.session import RunSession

        opts = self.opts
        calls = RoundCalls(q.question, RoleBackends(self.backend), self.registry, opts, RunSession())
        grammar = turn_grammar(calls, opts) if opts.constrain else None
        async with self.gate:
            record = await _turn(self.backend, calls, opts, grammar, q.question)
        record.update(model=self.model, constrain=opts.constrain, id=q.id, dataset=q.dataset)
        with self.results.open("a") as sink:
            sink.write(json.dumps(record) + "\n")


async def _turn(backend: Any, calls: Any, opts: Any, grammar: str | None, question: str) -> dict[str, Any]:
    """One orchestrator turn and how the round would take it."""
    from masorch.backends.base import Message
    from masorch.errors import BackendError
    from masorch.run.round_calls import (
        FINAL_TOOL,
        call_ids,
        calls_in_text,
        check_calls,
        final_answer,
        wants_synthesis,
    )
    from masorch.run.trajectory import CallOutcome

    messages = [Message("system", calls.system_prompt()), Message("user", question)]
    config = opts.generate_config(max_tokens=opts.max_tokens, tools=calls.tools, grammar=grammar)
    try:
        reply = await backend.complete(messages, config)
    except BackendError as exc:  # a failed call is a result too: no turn
        return {"well_formed": False, "statuses": {exc.code: 1}, "tools": [], "reply_calls": False,
                "finish": "error", "tokens": 0, "latency_s": 0.0, "text": ""}  # fmt: skip
    # Calls on the reply (native, or read from the grammar's text by the backend) or in its text.
    made, reply_calls = reply.tool_calls, bool(reply.tool_calls)
    if not made and reply.text.strip():
        made, _problem = calls_in_text(reply.text)
    made = call_ids(made, 1)
    statuses: collections.Counter[str] = collections.Counter()
    if len(made) == 1 and made[0].name == FINAL_TOOL:
        ok = final_answer(made[0]) is not None or wants_synthesis(made[0])
        statuses["FINAL" if ok else "FORMAT_ERR"] += 1
    elif made:
        checked = check_calls(
            made, round_no=1, catalogue=calls.catalogue, pool=(), max_calls=opts.max_calls_per_round
        )
        statuses.update(c.status if isinstance(c, CallOutcome) else "RUNS" for c in checked)
    else:
        statuses["NO_CALL"] += 1
    return {
        "well_formed": bool(made) and set(statuses) <= {"RUNS", "FINAL"},
        "statuses": dict(statuses), "tools": [c.name for c in made], "reply_calls": reply_calls,
        "finish": reply.finish, "tokens": reply.usage.completion_tokens,
        "latency_s": round(reply.latency_s, 2), "text": reply.text,
    }  # fmt: skip


def report(out: Path) -> None:
    """Well-formed-turn rate per model and decoding, with what the other turns did."""
    results = out / "turns.jsonl"
    if not results.exists():
        return
    groups: dict[tuple[str, bool], list[dict[str, Any]]] = collections.defaultdict(list)
    for line in results.read_text().splitlines():
        r = json.loads(line)
        groups[(r["model"], r["constrain"])].append(r)
    head = f"{'model':<20} {'decoding':<12} {'n':>4} {'well-formed':>12} {'calls/turn':>11}"
    head += f" {'tokens':>7} {'s/call':>7}  call statuses; tools"
    print(head)
    print("-" * len(head))
    for (model, constrain), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], not kv[0][1])):
        n = len(rs)
        statuses: collections.Counter[str] = collections.Counter()
        for r in rs:
            statuses.update(r["statuses"])
        tools = collections.Counter(t for r in rs for t in r["tools"])
        calls = sum(len(r["tools"]) for r in rs) / n
        tokens = sum(r["tokens"] for r in rs) / n
        latency = sum(r["latency_s"] for r in rs) / n
        shown = ", ".join(f"{k} {c}" for k, c in statuses.most_common())
        shown += "; " + (", ".join(f"{k} {c}" for k, c in tools.most_common()) or "-")
        decoding = "constrained" if constrain else "free"
        rate = sum(r["well_formed"] for r in rs) / n
        row = f"{model:<20} {decoding:<12} {n:>4} {rate:>12.0%} {calls:>11.2f}"
        print(f"{row} {tokens:>7.0f} {latency:>7.1f}  {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("runs/plan_validity5"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--limit", type=int, default=40, help="Questions per dataset.")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--turn-tokens", type=int, default=512, help="Token cap of the turn.")
    parser.add_argument("--report", action="store_true", help="Print the table of what has run, run nothing.")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        make_data(args.out)
        models = tuple(m for m in args.models.split(",") if m)
        asyncio.run(turns(args.out, models, args.limit, args.turn_tokens, args.concurrency))
    report(args.out)


if __name__ == "__main__":
    main()
