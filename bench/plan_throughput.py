"""Parse + validate throughput of realistic DoM-high plans (6-10 agents), per dialect, on one core.

One GRPO step of 64 prompts x 32 samples is 2,048 plans; the target is under 1 s for all of them.
Run: ``PYTHONPATH=src python bench/plan_throughput.py [--plans 2048] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from masorch.agents.signatures import builtin_catalogue
from masorch.plan import AgentSpec, DoM, Flow, Plan, check, render

KINDS = {
    "search": {"top_k": 5},
    "cot": {},
    "sc": {"n": 5},
    "debate": {"roles": ["Economist", "Statistician"]},
    "reflexion": {"max_rounds": 3},
    "python": {"timeout_s": 10.0},
}
PROSE = (
    "The question needs retrieval, computation and a check, so I split it into sub-tasks. "
    "Searches run in parallel; the computation waits for both; an audit checks units before the "
    "final write-up. The last agent is the sink.\n\n"
)


def make_plan(rng: random.Random) -> Plan:
    """A layered DAG of 6-10 agents whose tasks reference their parents, with one sink."""
    n = rng.randint(6, 10)
    ids = [f"A{i}_{rng.choice(['SEARCH', 'CALC', 'CHECK', 'MERGE'])}" for i in range(n)]
    flows: list[Flow] = []
    agents: list[AgentSpec] = []
    for i, agent_id in enumerate(ids):
        parents = sorted(rng.sample(ids[:i], k=min(i, rng.randint(1, 3)))) if i else []
        if i == n - 1:  # the sink reads every node that would otherwise be a second sink
            has_child = {f.src for f in flows}
            parents = sorted(set(parents) | {p for p in ids[:i] if p not in has_child})
        flows += [Flow(src=p, dst=agent_id) for p in parents]
        kind = rng.choice(list(KINDS))
        inputs = "\n".join(f"Input {p}: ${{{p}}}" for p in parents)
        task = (
            f"Step {i + 1}: work out the part of the question about item {rng.randint(1, 99)}, "
            f"state every assumption and give one number with its unit.\n{inputs}"
        ).strip()
        agents.append(AgentSpec(id=agent_id, kind=kind, task=task, params=KINDS[kind]))
    return Plan(agents=tuple(agents), flows=tuple(flows))


def texts(dialect: str, count: int, seed: int = 0) -> list[str]:
    """``count`` plan texts in ``dialect`` as an orchestrator would write them (with reasoning)."""
    rng = random.Random(seed)
    distinct = [make_plan(rng) for _ in range(64)]
    out = []
    for i in range(count):
        body = render(distinct[i % len(distinct)], dialect)  # type: ignore[arg-type]
        if dialect == "calls":
            out.append(f"{PROSE}```python\n{body}\n```\n")
        elif dialect == "json":
            out.append(f"{PROSE}```json\n{body}\n```\n")
        else:
            out.append(f"<thinking>\n{PROSE}</thinking>\n\n{body}\n")
    return out


def reference_ms() -> float:
    """CPU milliseconds of an empty million-step loop: a yardstick for how fast this core is now."""
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(1_000_000):
            pass
        best = min(best, time.process_time() - start)
    return best * 1e3


def main() -> None:
    """Measure and print plans/s and the time for the batch, per dialect."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per dialect; the best is shown")
    args = parser.parse_args()
    catalogue = builtin_catalogue()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"one core, CPU time (process_time), best of {args.repeat}; load average {load:.1f}")
    print(f"reference: an empty 10^6-iteration Python loop takes {reference_ms():.1f} ms CPU here")
    print(
        f"{'dialect':<8} {'plans/s':>9} {f'time for {args.plans}':>15} {'quiet-core est.':>16}"
        f"  {'valid':>5}  mean chars"
    )
    for dialect in ("calls", "json", "xml"):
        batch = texts(dialect, args.plans)
        assert all(check(t, DoM.HIGH, catalogue).valid for t in batch[:64]), dialect
        best = float("inf")
        best_chunk = float("inf")  # per plan, over chunks of 128: the least-disturbed stretch
        valid = 0
        for _ in range(args.repeat):
            total, valid = 0.0, 0
            for i in range(0, len(batch), 128):
                chunk = batch[i : i + 128]
                start = time.process_time()
                results = [check(t, DoM.HIGH, catalogue) for t in chunk]
                spent = time.process_time() - start
                valid += sum(r.valid for r in results)
                total += spent
                best_chunk = min(best_chunk, spent / len(chunk))
            best = min(best, total)
        chars = sum(map(len, batch)) / len(batch)
        print(
            f"{dialect:<8} {args.plans / best:>9.0f} {best:>13.3f} s {best_chunk * args.plans:>14.3f} s"
            f"  {valid:>5}  {chars:>10.0f}"
        )


if __name__ == "__main__":
    main()
