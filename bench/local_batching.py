"""Does the embedded engine batch concurrent calls? Aggregate decode speed vs the forward-pass limit.

For N concurrent streams (1, 2, 4, 8, 16) on one managed llama.cpp server (``local:`` backend):

- **batched**: N requests decode T tokens each at once (greedy, EOS ignored); aggregate tokens/s =
  all tokens / the longest stream's decode time (the server's own timings);
- **limit**: one forward pass over N tokens of ONE sequence (an N-token prompt, evaluated as one batch):
  the same arithmetic as one batched decode step, with no scheduling; tokens/s = N / its time.

The two are measured side by side, interleaved, ``--rounds`` times (medians), so machine noise hits
both alike. Target: batched >= 0.85 x limit at every N. Then whole runs through the executor, with
the server at 1 slot (calls queue: sequential) and at 8 slots (calls batch): a 4-way fan-out plan
(four cot agents and a cot that combines them) and one sc node with n=5.

    python bench/local_batching.py                        # qwen2.5-coder-1.5b (pulled, engine built)
    python bench/local_batching.py --model smollm2-135m --tokens 32 --rounds 1
    python bench/local_batching.py --parts repeat        # is greedy decoding repeatable?

``repeat``: one greedy chat call (temperature 0, fixed seed) decoded three times alone on a 2-slot
server, then three times beside another greedy stream started 0, 1 and 2 s earlier: how many
distinct texts each way, and where the first one that differs leaves the first alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from typing import Any

import httpx

from masorch.agents import default_registry
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.engine import EngineStore
from masorch.backends.local import LocalBackend, ServerSettings
from masorch.backends.models import ModelStore
from masorch.plan import DoM, check
from masorch.run.budget import Budget
from masorch.run.executor import Executor, RoleBackends
from masorch.run.session import RunSession

STREAMS = (1, 2, 4, 8, 16)
FAN_OUT = """
create_agent(id="a", kind="cot", task="What is 17 * 23?")
create_agent(id="b", kind="cot", task="What is 19 * 21?")
create_agent(id="c", kind="cot", task="What is 13 * 29?")
create_agent(id="d", kind="cot", task="What is 11 * 31?")
create_agent(id="sum", kind="cot", task="Add ${a}, ${b}, ${c} and ${d}.")
create_flow("a", "sum")
create_flow("b", "sum")
create_flow("c", "sum")
create_flow("d", "sum")
"""
SC = 'create_agent(id="s", kind="sc", task="", n=5)'
REPEAT_QUESTION = (
    "How many positive whole-number divisors does 196 have? Think step by step, then answer in \\boxed{}."
)
SC_QUESTION = (
    "A shop sells pens at 3 dollars and notebooks at 5 dollars. Ann buys 4 pens and 2 notebooks. How much?"
)


async def _completion(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    reply = await client.post("/completion", json=body, timeout=600)
    reply.raise_for_status()
    timings: dict[str, Any] = reply.json()["timings"]
    return timings


async def limit_tps(client: httpx.AsyncClient, n: int, token: int) -> float:
    """Tokens/s of one forward pass over ``n`` tokens of one sequence (best of 3 passes)."""
    times = []
    for _ in range(3):
        body = {"prompt": [token] * n, "n_predict": 1, "cache_prompt": False, "temperature": 0}
        timings = await _completion(client, body)
        assert timings["prompt_n"] == n, timings
        times.append(timings["prompt_ms"] / 1000)
    return n / min(times)


async def batched_tps(client: httpx.AsyncClient, n: int, tokens: int) -> float:
    """Aggregate decode tokens/s of ``n`` concurrent streams of ``tokens`` tokens each."""
    bodies = [
        {
            "prompt": f"Stream {i}: write a long story about the number {i}.",
            "n_predict": tokens,
            "ignore_eos": True,
            "temperature": 0,
            "cache_prompt": False,
        }
        for i in range(n)
    ]
    results = await asyncio.gather(*[_completion(client, b) for b in bodies])
    produced = sum(r["predicted_n"] for r in results)
    return float(produced / (max(r["predicted_ms"] for r in results) / 1000))


async def cancel_latency(backend: LocalBackend) -> tuple[float, float]:
    """Seconds until a 1-slot server answers a 1-token call: idle, and right after cancelling a long call.

    The difference is how long the server went on with the cancelled call.
    """
    short = [Message("user", "Say yes.")]
    config = GenerateConfig(max_tokens=1)
    await backend.complete(short, config)  # the prompt is cached from here on, as after the cancel
    start = time.perf_counter()
    await backend.complete(short, config)
    idle = time.perf_counter() - start
    count = [Message("user", "Count from 1 to 1000, one number per line.")]
    long = asyncio.create_task(backend.complete(count, GenerateConfig(max_tokens=900)))
    await asyncio.sleep(3.0)
    long.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await long
    start = time.perf_counter()
    await backend.complete(short, config)
    return idle, time.perf_counter() - start


async def run_plan(backend: LocalBackend, plan_text: str, question: str, max_tokens: int) -> float:
    """Wall seconds of one plan executed on ``backend`` (sub-agent calls capped at ``max_tokens``)."""
    agents = default_registry(max_tokens=max_tokens)
    checked = check(plan_text, DoM.HIGH, agents.catalogue(), "calls")
    assert checked.validated is not None, [d.message for d in checked.diagnostics]
    session = RunSession(Budget())
    start = time.perf_counter()
    result = await Executor(agents, RoleBackends(subagent=backend), session).execute(
        checked.validated, question
    )
    wall = time.perf_counter() - start
    assert result.status == "ok", (result.status, result.error)
    return wall


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--tokens", type=int, default=48, help="Tokens each stream decodes.")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--plan-tokens", type=int, default=96, help="Completion cap of each plan call.")
    parser.add_argument(
        "--parts", default="streams,runs,cancel", help="Which measurements to run (or repeat)."
    )
    parser.add_argument("--repeat-tokens", type=int, default=256, help="Completion cap of the repeat calls.")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    path = ModelStore().path(args.model)
    print(f"engine: {EngineStore().binary()}")
    if "streams" in parts:
        await streams(path, args)
    if "runs" in parts:
        await runs(path, args)
    if "cancel" in parts:
        await cancel(path, args)
    if "repeat" in parts:
        await repeat(path, args)


async def streams(path: Any, args: argparse.Namespace) -> None:
    """The batched vs limit table."""
    backend = LocalBackend(path, name=args.model, settings=ServerSettings(slots=16, n_threads=args.threads))
    await backend.start()
    assert backend._server is not None
    base = f"http://127.0.0.1:{backend._server.port}"
    limits: dict[int, list[float]] = {n: [] for n in STREAMS}
    batched: dict[int, list[float]] = {n: [] for n in STREAMS}
    async with httpx.AsyncClient(base_url=base) as client:
        await _completion(client, {"prompt": "warm up", "n_predict": 4})
        for _ in range(args.rounds):
            for n in STREAMS:
                limits[n].append(await limit_tps(client, n, token=1000))
                batched[n].append(await batched_tps(client, n, args.tokens))
    await backend.aclose()

    print(
        f"\n{args.model}: aggregate decode tokens/s, {args.tokens} tokens per stream, "
        f"medians of {args.rounds}"
    )
    print(f"{'streams':>7} {'batched':>9} {'x 1 stream':>10} {'limit':>8} {'batched/limit':>13}")
    one = statistics.median(batched[1])
    for n in STREAMS:
        b, lim = statistics.median(batched[n]), statistics.median(limits[n])
        print(f"{n:>7} {b:>9.1f} {b / one:>10.2f} {lim:>8.1f} {b / lim:>13.2f}")


async def runs(path: Any, args: argparse.Namespace) -> None:
    """Whole plans at 1 slot and at 8 slots."""
    print(f"\nwhole runs through the executor (sub-agent calls capped at {args.plan_tokens} tokens)")
    print(f"{'run':<22} {'1 slot (s)':>10} {'8 slots (s)':>11} {'speed-up':>8}")
    for label, plan, question in (
        ("4-way fan-out + join", FAN_OUT, "Combine the products."),
        ("sc n=5", SC, SC_QUESTION),
    ):
        walls = {}
        for slots in (1, 8):
            b = LocalBackend(
                path, name=args.model, settings=ServerSettings(slots=slots, n_threads=args.threads)
            )
            await b.start()
            walls[slots] = await run_plan(b, plan, question, args.plan_tokens)
            await b.aclose()
        print(f"{label:<22} {walls[1]:>10.1f} {walls[8]:>11.1f} {walls[1] / walls[8]:>8.2f}")


async def cancel(path: Any, args: argparse.Namespace) -> None:
    """How long a cancelled call goes on."""
    b = LocalBackend(path, name=args.model, settings=ServerSettings(slots=1, n_threads=args.threads))
    await b.start()
    idle, after_cancel = await cancel_latency(b)
    await b.aclose()
    print(
        f"\ncancel: a 1-token call on a 1-slot server took {idle:.2f} s idle and {after_cancel:.2f} s right "
        f"after cancelling a long call: the cancelled call went on for about {after_cancel - idle:.2f} s"
    )


def _diverges(a: str, b: str) -> int:
    """The index of the first character where ``a`` and ``b`` differ (-1 when equal)."""
    if a == b:
        return -1
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


async def repeat(path: Any, args: argparse.Namespace) -> None:
    """The same greedy call alone and beside another stream: is the text the same every time?"""
    b = LocalBackend(path, name=args.model, settings=ServerSettings(slots=2, n_threads=args.threads))
    await b.start()
    config = GenerateConfig(temperature=0.0, max_tokens=args.repeat_tokens, seed=0)
    question = [Message("user", REPEAT_QUESTION)]
    other = [Message("user", "Write a long story about the number 7.")]
    alone = [(await b.complete(question, config)).text for _ in range(3)]
    beside = []
    for lead in range(3):
        background = asyncio.create_task(b.complete(other, config))
        await asyncio.sleep(lead)
        beside.append((await b.complete(question, config)).text)
        await background
    await b.aclose()
    print(f"\ngreedy repeatability ({args.model}, {args.repeat_tokens}-token cap, 2 slots)")
    first = alone[0]
    for label, texts in (("alone", alone), ("beside", beside)):
        where = [_diverges(first, t) for t in texts]
        print(
            f"{label:<7} {len(set(texts))} distinct of 3; first character that differs from alone[0]: {where}"
        )


if __name__ == "__main__":
    asyncio.run(main())
