"""MASBench audit of a generated suite: canonical template leaks across splits, effective axis values.

Run from the repository root on a suite made with ``masorch bench make --paper -o DIR``:

    PYTHONPATH=src python bench/masbench_audit.py DIR

It prints (1) how many test iGSM sub-problems share a canonical template shape (names and the order of
commutative operands ignored) with a train sub-problem, per axis and per depth value, and (2) how many
instances per axis and value have an effective axis value (measured from the text by the independent
evaluator: only quantities and answer references that can change the answer count) below the declared
one. Files made before the canonical hashing and the effective-value check show what those changes fixed.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from masorch.masbench.evaluator import solve_text
from masorch.masbench.export import data_files, read_records
from masorch.masbench.templates import template_hash


def main() -> None:
    """Read the suite and print both audits."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path, help="directory (or file) of a generated suite")
    args = ap.parse_args()
    records = [r for f in data_files(args.suite) for r in read_records(f)]

    train: set[str] = set()
    for rec in records:
        if rec["split"] == "train":
            train.update(template_hash(s["sketch"])[0] for s in rec["subtasks"] if s["kind"] == "igsm")
    shared: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for rec in records:
        if rec["split"] != "test":
            continue
        for s in rec["subtasks"]:
            if s["kind"] != "igsm":
                continue
            keys = [rec["axis"]] + ([f"depth={rec['value']}"] if rec["axis"] == "depth" else [])
            hit = template_hash(s["sketch"])[0] in train
            for key in ["all", *keys]:
                total[key] += 1
                shared[key] += hit
    print("test iGSM sub-problems sharing a canonical template shape with train")

    def order(key: str) -> tuple[bool, str, int]:
        name, _, value = key.partition("=")
        return key != "all", name, int(value or 0)

    for key in sorted(total, key=order):
        print(f"  {key:<12}{shared[key]:>6} / {total[key]:<6}{100 * shared[key] / total[key]:6.1f}%")

    short: Counter[tuple[str, int]] = Counter()
    count: Counter[tuple[str, int]] = Counter()
    for rec in records:
        got = solve_text(rec["question"], rec["worlds"])
        key = (rec["axis"], rec["value"])
        count[key] += 1
        short[key] += got.effective[rec["axis"]] != rec["value"]
    print("instances whose effective axis value differs from the declared one (axis, value: n / total)")
    for axis in dict.fromkeys(a for a, _ in sorted(count)):
        cells = [f"{v}: {short[(a, v)]}/{count[(a, v)]}" for a, v in sorted(count) if a == axis]
        n, t = sum(short[k] for k in count if k[0] == axis), sum(count[k] for k in count if k[0] == axis)
        print(f"  {axis:<11}{100 * n / t:5.1f}%  " + ", ".join(cells))


if __name__ == "__main__":
    main()
