"""MASBench generator throughput: instances/s per axis on one core, and the wall time of ``--paper``.

Run from the repository root:

    PYTHONPATH=src python bench/masbench_throughput.py            # per-axis rates + paper suite
    PYTHONPATH=src python bench/masbench_throughput.py --no-paper # per-axis rates only

The original iGSM generator makes about 210 problems/s on one core of a 2-core machine (measured at its
hard preset); the ratio printed is ours divided by that figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from masorch.masbench.instance import AXES
from masorch.masbench.suite import PAPER_SUITE, generate, jobs_for

IGSM_PER_SECOND = 210.0


def per_axis(n_per_value: int, values: range) -> dict[str, tuple[int, float, float]]:
    """(instances, cpu seconds, wall seconds) per axis, train and test alternating, one process."""
    out = {}
    for axis in AXES:
        jobs = []
        for split in ("train", "test"):
            jobs += jobs_for(axis, [(v, n_per_value) for v in values], split, 12345)
        t0, c0 = time.perf_counter(), time.process_time()
        n = sum(1 for _ in generate(jobs))
        out[axis] = (n, time.process_time() - c0, time.perf_counter() - t0)
    return out


def paper_wall(workers: int, fmt: str) -> tuple[int, float, float]:
    """Instances, wall seconds and CPU seconds (all processes) of ``masorch bench make --paper``."""
    src = Path(__file__).resolve().parents[1] / "src"
    env = dict(os.environ, PYTHONPATH=str(src))
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "masorch",
            "bench",
            "make",
            "--paper",
            "-o",
            tmp,
            "--workers",
            str(workers),
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([*cmd, "--format", fmt, "-q"], check=True, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return sum(p.total for p in PAPER_SUITE), wall, cpu


def main() -> None:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="instances per value and split for the per-axis rates")
    ap.add_argument("--workers", type=int, default=2, help="processes for the --paper run")
    ap.add_argument("--format", default="parquet", choices=("parquet", "jsonl"))
    ap.add_argument("--no-paper", action="store_true", help="skip the paper-suite run")
    args = ap.parse_args()

    print(f"per-axis generation, one core, values 2..8, train+test, {args.n} per value and split")
    print(f"{'axis':<12}{'instances':>10}{'cpu s':>9}{'inst/s (cpu)':>14}{'inst/s (wall)':>15}{'x iGSM':>8}")
    total_n, total_cpu = 0, 0.0
    for axis, (n, cpu, wall) in per_axis(args.n, range(2, 9)).items():
        total_n, total_cpu = total_n + n, total_cpu + cpu
        print(
            f"{axis:<12}{n:>10}{cpu:>9.2f}{n / cpu:>14.0f}{n / wall:>15.0f}{n / cpu / IGSM_PER_SECOND:>8.1f}"
        )
    rate = total_n / total_cpu
    print(f"{'all':<12}{total_n:>10}{total_cpu:>9.2f}{rate:>14.0f}{'':>15}{rate / IGSM_PER_SECOND:>8.1f}")
    print(
        f"ratio to the original iGSM generator (~{IGSM_PER_SECOND:.0f}/s/core): {rate / IGSM_PER_SECOND:.1f}x"
    )
    if not args.no_paper:
        n, wall, cpu = paper_wall(args.workers, args.format)
        print(
            f"paper suite (--paper, {args.format}, {args.workers} workers): {n} instances in "
            f"{wall:.1f} s wall ({n / wall:.0f}/s; target < 60 s on 2 cores); "
            f"{cpu:.1f} CPU s in all processes (~{cpu / 2:.1f} s on 2 idle cores); "
            f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )


if __name__ == "__main__":
    main()
