"""Multi-round mode: parallel rounds vs one call per round, and the mode's overhead per round.

A loopback OpenAI-compatible server (in its own process, every reply after ``--latency-ms``) plays
both the orchestrator and the sub-agents over real HTTP. The orchestrator makes 12 cot calls in
all: 4 a round over 3 rounds, then ``final_answer`` (``mas:rounds``), or 1 a round over the 12-round
cap, then the synthesis call (``mas:rounds-serial``, the paper's ablation). Printed side by side:
wall time of each (target: parallel <= 0.35x serial), and the overhead per round, the round's wall
time minus its orchestrator call and its slowest tool call (target < 5 ms). A second table runs the
same trajectories on a 0 ms in-process backend, where a round's wall time is all overhead.

    PYTHONPATH=src python bench/rounds_parallel.py [--latency-ms 50 100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import time
from collections.abc import Sequence
from typing import Any

from _server import loopback_process

from masorch.agents.base import AgentRegistry
from masorch.agents.cot import CotAgent
from masorch.backends.base import Backend, Completion, GenerateConfig, Message, ToolCall
from masorch.backends.openai_compat import OpenAIBackend
from masorch.backends.scripted import ScriptedBackend
from masorch.run.executor import RoleBackends
from masorch.run.result import RunResult
from masorch.run.rounds import RoundsOptions, run_rounds
from masorch.trace.writer import MemoryTrace

TOTAL_CALLS = 12
_PER_ROUND = re.compile(r"between 1 and (\d+) tool calls")
VARIANTS = {"mas:rounds": 4, "mas:rounds-serial": 1}


def plan_turn(messages: Sequence[dict[str, Any]]) -> str | dict[str, Any]:
    """The scripted orchestrator and sub-agent, on the wire: tool calls until 12 are made, then the answer.

    Picklable (a module function) so that the server process can use it.
    """
    system = str(messages[0].get("content", "")) if messages else ""
    if not system.startswith("You are the orchestrator"):
        return "Adding up. \\boxed{7}"  # a cot sub-agent
    if "rounds are used" in str(messages[-1].get("content", "")):
        return "All calls agree. \\boxed{7}"  # the synthesis call at the round cap
    made = sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")
    match = _PER_ROUND.search(system)
    per_round = int(match.group(1)) if match else 1
    if made >= TOTAL_CALLS:
        calls = [("final_answer", {"answer": "7"})]
    else:
        calls = [("cot", {"task": f"part {made + i + 1}"}) for i in range(min(per_round, TOTAL_CALLS - made))]
    return {
        "tool_calls": [
            {
                "id": f"call_{made + i}",
                "type": "function",
                "function": {"name": n, "arguments": json.dumps(a)},
            }
            for i, (n, a) in enumerate(calls)
        ]
    }


async def one_run(backend: Backend, per_round: int) -> RunResult:
    """One trajectory of 12 calls, ``per_round`` at a time."""
    return await run_rounds(
        "bench question",
        orchestrator=backend,
        backends=RoleBackends(backend),
        agents=AgentRegistry([CotAgent(max_tokens=32)]),
        options=RoundsOptions(max_rounds=12, max_calls_per_round=per_round, max_tokens=64),
        trace=MemoryTrace(),
    )


def round_overheads(result: RunResult) -> list[float]:
    """Each tool round's wall time minus its orchestrator call and its slowest tool call (s)."""
    assert result.trajectory is not None and result.ledger is not None
    entries = result.ledger.entries
    turns = [e.latency_s for e in entries if e.role == "orchestrator" and e.node is None]
    out = []
    for i, rnd in enumerate(result.trajectory.rounds):
        nodes = {c.node for c in rnd.calls}
        slowest = max(e.latency_s for e in entries if e.node in nodes)
        out.append(rnd.wall_s - turns[i] - slowest)
    return out


async def figures(backend: Backend, repeats: int) -> dict[str, tuple[float, float, int, str]]:
    """Per variant: median wall (s), median overhead per round (s), rounds, how it ended."""
    await one_run(backend, 4)  # warm the client's connections
    out = {}
    for name, per_round in VARIANTS.items():
        walls, overheads = [], []
        result = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = await one_run(backend, per_round)
            walls.append(time.perf_counter() - t0)
            assert result.status == "ok" and result.trajectory is not None, result.error
            assert len(result.trajectory.calls) == TOTAL_CALLS
            overheads += round_overheads(result)
        assert result is not None and result.trajectory is not None
        out[name] = (
            statistics.median(walls),
            statistics.median(overheads),
            len(result.trajectory.rounds),
            result.trajectory.ended_by,
        )
    return out


def show(title: str, rows: dict[str, tuple[float, float, int, str]], *, target: bool = True) -> None:
    """One table: the two variants side by side, and their ratio (against the target with latency)."""
    print(f"\n{title}")
    print(f"{'system':<20}{'rounds':>7}{'ended by':>14}{'wall':>10}{'overhead per round':>22}")
    for name, (wall, overhead, rounds, ended) in rows.items():
        print(f"{name:<20}{rounds:>7}{ended:>14}{wall * 1000:>8.1f}ms{overhead * 1000:>20.3f}ms")
    parallel, serial = rows["mas:rounds"][0], rows["mas:rounds-serial"][0]
    goal = " (target <= 0.35x)" if target else " (no latency to hide: overhead only)"
    print(f"parallel / serial wall time: {parallel / serial:.3f}x{goal}")


async def loopback(base_url: str, latency_ms: float, repeats: int) -> None:
    backend = OpenAIBackend("bench", base_url=base_url, api_key="k-loopback", provider="loopback")
    try:
        rows = await figures(backend, repeats)
    finally:
        await backend.aclose()
    show(
        f"loopback server, {latency_ms:g} ms a call, median of {repeats} runs "
        f"(3 rounds x 4 calls vs 12 rounds x 1 call)",
        rows,
    )


async def in_process(repeats: int) -> None:
    """The same trajectories on a 0 ms scripted backend: every round's wall time is overhead."""

    def reply(messages: Sequence[Message], config: GenerateConfig) -> str | Completion:
        turn = plan_turn(
            [
                {"role": m.role, "content": m.content, "tool_calls": [c.name for c in m.tool_calls]}
                for m in messages
            ]
        )
        if isinstance(turn, str):
            return turn
        calls = tuple(
            ToolCall(c["function"]["name"], c["function"]["arguments"], id=c["id"])
            for c in turn["tool_calls"]
        )
        return Completion(text="", tool_calls=calls, finish="tool_calls")

    rows = await figures(ScriptedBackend(reply, name="bench"), repeats)
    show(
        f"in-process scripted backend, 0 ms a call, median of {repeats} runs",
        rows,
        target=False,
    )


def main() -> None:
    """Parse flags, print the loopback figures for each latency and the in-process figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[50.0, 100.0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    # Shared machines skew wall times: say how busy this one was.
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for latency in args.latency_ms:
        with loopback_process(latency, plan_turn) as base_url:
            asyncio.run(loopback(base_url, latency, args.repeats))
    asyncio.run(in_process(args.repeats))


if __name__ == "__main__":
    main()
