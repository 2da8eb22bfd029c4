"""Settings shared by every component: where masorch keeps its caches."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_dir(kind: str, env: Mapping[str, str] | None = None) -> Path:
    """The cache directory for ``kind`` (``models``, ``data``, ...).

    ``$MASORCH_CACHE/<kind>`` where set, else ``$XDG_CACHE_HOME/masorch/<kind>``, else
    ``~/.cache/masorch/<kind>``.

    >>> cache_dir("models", {"MASORCH_CACHE": "/srv/cache"}).as_posix()
    '/srv/cache/models'
    >>> cache_dir("data", {"XDG_CACHE_HOME": "/xdg"}).as_posix()
    '/xdg/masorch/data'
    """
    env = os.environ if env is None else env
    if env.get("MASORCH_CACHE"):
        return Path(env["MASORCH_CACHE"]).expanduser() / kind
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "masorch" / kind
