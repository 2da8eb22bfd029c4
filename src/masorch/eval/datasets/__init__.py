"""Datasets for evaluation: pinned offline sources, a cache, and loaders returning :class:`Sample` records.

>>> from masorch.eval.datasets import DATASETS
>>> sorted(DATASETS)
['aime24', 'aime25-i', 'cnmo', 'hotpotqa', 'math500-subset']
"""

from masorch.eval.datasets.load import corpus_path, data_dir, is_pulled, load, pull, write_corpus
from masorch.eval.datasets.pull import PullReport, cache_root, pip_command, pull_source
from masorch.eval.datasets.registry import DATASETS, HOTPOTQA_CORPUS_SIZE, get_spec
from masorch.eval.datasets.types import DatasetSpec, HubSource, Sample, WheelSource

__all__ = [
    "DATASETS",
    "HOTPOTQA_CORPUS_SIZE",
    "DatasetSpec",
    "HubSource",
    "PullReport",
    "Sample",
    "WheelSource",
    "cache_root",
    "corpus_path",
    "data_dir",
    "get_spec",
    "is_pulled",
    "load",
    "pip_command",
    "pull",
    "pull_source",
    "write_corpus",
]
