"""Measure math-verify scoring time per answer on the real math datasets (needs `masorch data pull all`).

For every gold answer it scores a correct solution (gold in a box after some text), a wrong one and
an unboxed one ending in a number, in both isolations, and prints startup and per-answer times.
Run: PYTHONPATH=src python bench/math_scoring.py
"""

from __future__ import annotations

import statistics
import time

from masorch.eval.datasets import load
from masorch.score.math import MathScorer

DATASETS = ("aime24", "aime25-i", "math500-subset", "cnmo")


def predictions(answer: str) -> list[tuple[str, bool]]:
    """A correct boxed solution, a wrong boxed one, and (for integers) an unboxed correct one."""
    wrong = str(int(answer) + 1) if answer.lstrip("-").isdigit() else answer + "+1"
    out = [
        (f"We simplify and check the cases. Therefore \\boxed{{{answer}}}.", True),
        (f"\\boxed{{{wrong}}}", False),
    ]
    if answer.lstrip("-").isdigit():
        out.append((f"Adding up gives {answer}", True))
    return out


def main() -> None:
    """Score every prediction and print the timing distribution and agreement with expectations."""
    cases = [
        (p, s, expected) for name in DATASETS for s in load(name) for p, expected in predictions(s.answer)
    ]
    for isolation in ("process", "thread"):
        with MathScorer(isolation=isolation, timeout_s=30, workers=1) as scorer:
            start = time.perf_counter()
            scorer.score("\\boxed{1}", cases[0][1])
            startup = time.perf_counter() - start
            times, agree, timeouts = [], 0, 0
            for prediction, sample, expected in cases:
                t0 = time.perf_counter()
                result = scorer.score(prediction, sample)
                times.append(time.perf_counter() - t0)
                agree += result.correct == expected
                timeouts += "timed out" in str(result.details.get("error", ""))
        times.sort()
        print(
            f"{isolation:8} answers={len(times)} first-call={startup:.2f}s "
            f"mean={statistics.mean(times) * 1e3:.1f}ms median={statistics.median(times) * 1e3:.1f}ms "
            f"p95={times[int(0.95 * len(times))] * 1e3:.1f}ms max={times[-1] * 1e3:.0f}ms "
            f"agree={agree}/{len(times)} timeouts={timeouts}"
        )


if __name__ == "__main__":
    main()
