"""Executor parallelism and per-call overhead, against a loopback OpenAI-compatible server.

Every call to the loopback server takes ``--latency-ms`` ms. For plans of known shape (4 parallel
nodes -> combiner, a diamond, a chain, one sc node with n=5) it prints the executor's wall time,
the plan's critical path (levels x latency), their ratio (target <= 1.15), the same calls made
directly without the executor in the ideal concurrent schedule ("direct": what the HTTP client and
server themselves cost), and the speed-up over making the same calls one after another. Then it
measures the gate's overhead per LLM call (budget check, ledger, trace event; target < 2 ms) with
many calls at 0 ms latency.

    PYTHONPATH=src python bench/executor_parallel.py [--latency-ms 100 250] [--overhead-calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from _server import loopback_process

from masorch.agents.base import AgentRegistry
from masorch.agents.cot import CotAgent
from masorch.agents.sc import SelfConsistencyAgent
from masorch.backends.base import Backend, GenerateConfig, Message
from masorch.backends.openai_compat import OpenAIBackend
from masorch.backends.scripted import ScriptedBackend
from masorch.plan import DoM, ValidatedPlan, check
from masorch.run.budget import Budget
from masorch.run.executor import Executor, RoleBackends
from masorch.run.session import RunSession
from masorch.trace.writer import MemoryTrace

PLANS = {
    "fan-in 4 -> 1": """
create_agent(id="s1", kind="cot", task="part 1")
create_agent(id="s2", kind="cot", task="part 2")
create_agent(id="s3", kind="cot", task="part 3")
create_agent(id="s4", kind="cot", task="part 4")
create_agent(id="c", kind="cot", task="combine ${s1} ${s2} ${s3} ${s4}")
create_flow("s1", "c")
create_flow("s2", "c")
create_flow("s3", "c")
create_flow("s4", "c")
""",
    "diamond": """
create_agent(id="a", kind="cot", task="start")
create_agent(id="b", kind="cot", task="left ${a}")
create_agent(id="c", kind="sc", task="right ${a}", n=5)
create_agent(id="d", kind="cot", task="join ${b} ${c}")
create_flow("a", "b")
create_flow("a", "c")
create_flow("b", "d")
create_flow("c", "d")
""",
    "chain of 4": """
create_agent(id="a", kind="cot", task="one")
create_agent(id="b", kind="cot", task="two ${a}")
create_agent(id="c", kind="cot", task="three ${b}")
create_agent(id="d", kind="cot", task="four ${c}")
create_flow("a", "b")
create_flow("b", "c")
create_flow("c", "d")
""",
    "sc n=5": 'create_agent(id="v", kind="sc", task="vote", n=5)',
}


def agents() -> AgentRegistry:
    """cot and sc agents (each sc sample is one call; samples run concurrently)."""
    return AgentRegistry([CotAgent(max_tokens=32), SelfConsistencyAgent(max_tokens=32)])


def validated(text: str, registry: AgentRegistry) -> ValidatedPlan:
    """The plan checked by the real validator."""
    result = check(text, DoM.HIGH, registry.catalogue(), "calls")
    assert result.validated is not None, [d.to_dict() for d in result.diagnostics]
    return result.validated


def calls_of(plan: ValidatedPlan, node: str) -> int:
    """Calls a node makes: n for sc, 1 otherwise."""
    spec = plan.plan.agent(node)
    assert spec is not None
    return int(spec.params.get("n", 5)) if spec.kind == "sc" else 1


def critical_path_calls(plan: ValidatedPlan) -> int:
    """Longest chain of sequential call latencies (concurrent sc samples count once)."""
    depth: dict[str, int] = {}
    for nid in plan.order:
        depth[nid] = 1 + max((depth[p] for p in plan.parents.get(nid, ())), default=0)
    return max(depth.values())


async def execute(plan: ValidatedPlan, backend: Backend, registry: AgentRegistry) -> tuple[float, str]:
    """Wall time of one execution and its status."""
    session = RunSession(Budget(), trace=MemoryTrace())
    executor = Executor(registry, RoleBackends(backend), session)
    t0 = time.perf_counter()
    result = await executor.execute(plan, "bench question")
    return time.perf_counter() - t0, result.status


def levels(plan: ValidatedPlan) -> list[list[str]]:
    """Nodes grouped by depth: for these plans, the ideal schedule is one concurrent step per level."""
    depth: dict[str, int] = {}
    for nid in plan.order:
        depth[nid] = 1 + max((depth[p] for p in plan.parents.get(nid, ())), default=0)
    return [[n for n in plan.order if depth[n] == d] for d in range(1, max(depth.values()) + 1)]


async def oracle(plan: ValidatedPlan, backend: Backend) -> tuple[float, float]:
    """The same calls made directly, without the executor: (ideal concurrent schedule, one by one)."""
    messages = [Message("user", "bench call")]
    config = GenerateConfig(max_tokens=32)
    t0 = time.perf_counter()
    for level in levels(plan):
        n = sum(calls_of(plan, nid) for nid in level)
        await asyncio.gather(*(backend.complete(messages, config) for _ in range(n)))
    ideal = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(sum(calls_of(plan, nid) for nid in plan.order)):
        await backend.complete(messages, config)
    return ideal, time.perf_counter() - t0


async def parallel_figures(base_url: str, latency_ms: float, repeats: int) -> None:
    """Wall time of each plan vs its critical path and vs its calls made one after another."""
    registry = agents()
    backend = OpenAIBackend("bench", base_url=base_url, api_key="k-loopback", provider="loopback")
    try:
        await execute(validated(PLANS["sc n=5"], registry), backend, registry)  # warm the client
        print(
            f"\nloopback latency {latency_ms:g} ms per call (server in its own process), median of {repeats}"
        )
        print(
            f"{'plan':<15}{'calls':>6}{'cp':>8}{'direct':>8}{'wall':>8}{'wall/cp':>9}{'wall/direct':>12}"
            f"{'serial':>8}{'speed-up':>9}"
        )
        for name, text in PLANS.items():
            plan = validated(text, registry)
            walls, ideals, serials = [], [], []
            for _ in range(repeats):
                wall, status = await execute(plan, backend, registry)
                assert status == "ok", status
                walls.append(wall)
                ideal, serial = await oracle(plan, backend)
                ideals.append(ideal)
                serials.append(serial)
            wall, ideal, serial = (statistics.median(x) for x in (walls, ideals, serials))
            calls = sum(calls_of(plan, n) for n in plan.order)
            cp = critical_path_calls(plan) * latency_ms / 1000
            print(
                f"{name:<15}{calls:>6}{_ms(cp):>8}{_ms(ideal):>8}{_ms(wall):>8}{wall / cp:>9.3f}"
                f"{wall / ideal:>12.3f}{_ms(serial):>8}{serial / wall:>8.2f}x"
            )
    finally:
        await backend.aclose()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}ms"


async def overhead_figures(n_calls: int) -> None:
    """Per-call cost of the gate (budget check, ledger, trace event) and of the executor per node."""
    backend = ScriptedBackend(["ok \\boxed{1}"], cycle=True)
    messages = [Message("user", "q")]
    config = GenerateConfig()
    t0 = time.perf_counter()
    for _ in range(n_calls):
        await backend.complete(messages, config)
    direct = (time.perf_counter() - t0) / n_calls
    session = RunSession(Budget(max_calls=10 * n_calls, max_tokens=10**9), trace=MemoryTrace())
    t0 = time.perf_counter()
    for _ in range(n_calls):
        await session.complete(backend, messages, config, role="subagent", node="n")
    gated = (time.perf_counter() - t0) / n_calls
    print(f"\ngate overhead per LLM call (0 ms backend, {n_calls} calls): {1000 * (gated - direct):.3f} ms")

    # Whole-executor overhead: a 10-node plan of cot nodes at 0 ms, run many times.
    registry = agents()
    text = "\n".join(
        [f'create_agent(id="n{i}", kind="cot", task="t{i}")' for i in range(9)]
        + ['create_agent(id="z", kind="cot", task="join")']
        + [f'create_flow("n{i}", "z")' for i in range(9)]
    )
    plan = validated(text, registry)
    runs = max(1, n_calls // 10)
    t0 = time.perf_counter()
    for _ in range(runs):
        _, status = await execute(plan, backend, registry)
        assert status == "ok"
    per_call = (time.perf_counter() - t0) / (runs * 10)
    print(
        f"executor time per LLM call incl. cot agent prompt rendering and answer extraction "
        f"(10-node plan, {runs} runs): {1000 * per_call:.3f} ms"
    )


def main() -> None:
    """Parse flags and print both sets of figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[100.0, 250.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--overhead-calls", type=int, default=2000)
    args = parser.parse_args()
    # Shared machines skew wall times: say how busy this one was.
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for latency in args.latency_ms:
        with loopback_process(latency) as base_url:
            asyncio.run(parallel_figures(base_url, latency, args.repeats))
    asyncio.run(overhead_figures(args.overhead_calls))


if __name__ == "__main__":
    main()
