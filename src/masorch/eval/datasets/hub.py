"""Rows from the Hugging Face hub through ``datasets`` (the ``data`` extra): ``hf:NAME[:CONFIG][:SPLIT]``.

Loaded rows are cached by ``datasets`` under ``<data cache>/hub``, so a dataset loaded once online
loads again offline (with ``HF_DATASETS_OFFLINE=1``). Any failure - no network, an unknown name,
config or split - is one :class:`~masorch.errors.UsageError` coded ``data_hub``, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from masorch.errors import UsageError, require_extra
from masorch.eval.datasets.types import HubSource

PREFIX = "hf:"
#: The directory under the data cache where ``datasets`` keeps what it loaded.
HUB_CACHE = "hub"
#: The split taken when ``hf:NAME[:CONFIG]`` names none and the dataset has several.
DEFAULT_SPLIT = "test"


def parse_hf_spec(spec: str) -> HubSource:
    """The hub source of ``hf:NAME[:CONFIG][:SPLIT]`` (an empty CONFIG is the default config).

    >>> parse_hf_spec("hf:Salesforce/MASBench:depth:test")
    HubSource(path='Salesforce/MASBench', name='depth', split='test', data_files=None)
    >>> parse_hf_spec("hf:openai/gsm8k::test").name is None, parse_hf_spec("hf:user/set").split is None
    (True, True)
    """
    parts = spec.removeprefix(PREFIX).split(":")
    if not parts[0] or len(parts) > 3:
        raise UsageError(
            f"--data {spec[:100]!r} is not hf:NAME[:CONFIG][:SPLIT]",
            hint="e.g. hf:Salesforce/MASBench:depth:test or hf:openai/gsm8k:main:test",
        )
    name = parts[1] if len(parts) > 1 and parts[1] else None
    split = parts[2] if len(parts) > 2 and parts[2] else None
    return HubSource(path=parts[0], name=name, split=split)


def load_hub_rows(hub: HubSource, label: str, cache_dir: Path | None = None) -> list[dict[str, Any]]:
    """The rows of ``hub`` as dicts (no split given: :data:`DEFAULT_SPLIT`, or the only one)."""
    require_extra("datasets", "data")
    import datasets

    cache = str(cache_dir) if cache_dir is not None else None
    try:
        split = hub.split or _default_split(datasets, hub, cache)
        rows = datasets.load_dataset(
            hub.path, hub.name, split=split, data_files=hub.data_files, cache_dir=cache
        )
    except UsageError:
        raise
    except Exception as exc:  # datasets raises many unrelated types; re-raised as one usage error
        raise UsageError(
            f"could not load {label} from the hub ({hub.path}): {type(exc).__name__}: {str(exc)[:300]}",
            hint="check the name, config and split and the internet access to the hub (a dataset "
            "loaded once is cached; set HF_DATASETS_OFFLINE=1 to use the cache offline)",
            code="data_hub",
        ) from exc
    return [dict(row) for row in rows]


def _default_split(datasets: Any, hub: HubSource, cache: str | None) -> str:
    splits = list(
        datasets.get_dataset_split_names(hub.path, hub.name, data_files=hub.data_files, cache_dir=cache)
    )
    if DEFAULT_SPLIT in splits or not splits:
        return DEFAULT_SPLIT
    if len(splits) == 1:
        return str(splits[0])
    raise UsageError(
        f"{hub.path} has no '{DEFAULT_SPLIT}' split and several others: {', '.join(map(str, splits))}",
        hint=f"name one: hf:{hub.path}:{hub.name or ''}:{splits[0]}",
        code="data_hub",
    )
