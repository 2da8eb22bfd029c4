"""Measure the built-in agents' mechanics: sandbox overhead per run, and the concurrency speed-up
of self-consistency samples and debate speakers over a backend with fixed latency.

Run from the repository root: ``PYTHONPATH=src python bench/agents.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from masorch.agents import DebateAgent, NodeInput, SandboxLimits, SelfConsistencyAgent, run_sandboxed
from masorch.agents.sandbox import site_packages
from masorch.backends import ScriptedBackend

RUNS = 10
LATENCY_S = 0.25


class Context:
    node_id = "bench"
    retriever = None

    def __init__(self, backend: ScriptedBackend) -> None:
        self.backend = backend

    async def complete(self, messages, config):
        return await self.backend.complete(messages, config)


async def time_sandbox(code: str, limits: SandboxLimits) -> tuple[float, float, tuple[str, ...]]:
    times = []
    isolation: tuple[str, ...] = ()
    for _ in range(RUNS):
        start = time.perf_counter()
        result = await run_sandboxed(code, limits)
        times.append(time.perf_counter() - start)
        assert result.ok, result.stderr
        isolation = result.isolation
    return statistics.median(times), max(times), isolation


async def speedup(agent, node: NodeInput, calls: int) -> tuple[float, float]:
    ctx = Context(ScriptedBackend([r"ok \boxed{1}"], cycle=True, delay_s=LATENCY_S))
    start = time.perf_counter()
    out = await agent.run(node, ctx)
    elapsed = time.perf_counter() - start
    assert out.status.value == "ok" and len(ctx.backend.calls) == calls
    return elapsed, calls * LATENCY_S


async def main() -> None:
    print(f"sandbox, {RUNS} runs each (median / max seconds per run):")
    cases = [
        ("print(1), all layers", "print(1)", SandboxLimits()),
        ("print(1), no namespaces", "print(1)", SandboxLimits(namespaces=False)),
        ("print(1), no audit hook", "print(1)", SandboxLimits(audit_hook=False)),
        ("import numpy, all layers", "import numpy; print(1)", SandboxLimits(extra_paths=site_packages())),
    ]
    for name, code, limits in cases:
        median, worst, isolation = await time_sandbox(code, limits)
        print(f"  {name:28s} {median:6.3f} / {worst:6.3f}   layers: {','.join(isolation)}")
    print(f"concurrency, backend latency {LATENCY_S} s per call:")
    sc_node = NodeInput("sc", "q", "", params={"n": 8, "temperature": 0.7})
    elapsed, serial = await speedup(SelfConsistencyAgent(), sc_node, 8)
    print(f"  sc n=8: {elapsed:.3f} s vs {serial:.2f} s serial -> speed-up {serial / elapsed:.1f}x")
    debate_node = NodeInput("d", "q", "", params={"roles": ["A", "B", "C", "D"], "rounds": 3})
    elapsed, serial = await speedup(DebateAgent(), debate_node, 13)
    print(
        f"  debate 4 roles x 3 rounds + judge: {elapsed:.3f} s vs {serial:.2f} s serial -> "
        f"speed-up {serial / elapsed:.1f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
