"""Options shared by run, eval run and serve: an embedded (``local:``) model's server size, and prices."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

#: The most samples (eval) or runs (serve) in flight: each is a coroutine made up front, so a huge
#: value would stall the start and eat memory before any work.
MAX_CONCURRENCY = 1024

Threads = Annotated[
    int | None,
    typer.Option("--threads", min=1, help="CPU threads of an embedded (local:) model (default: all cores)."),
]
Slots = Annotated[
    int | None,
    typer.Option("--slots", min=1, max=64, help="Requests an embedded (local:) model decodes at once (8)."),
]
Ctx = Annotated[
    int | None,
    typer.Option(
        "--ctx",
        min=256,
        help="Context tokens of each request to an embedded (local:) model, prompt and answer (4096).",
    ),
]
PriceFiles = Annotated[
    list[Path],
    typer.Option("--prices", help="YAML/TOML file with a prices: section ($ per 1M tokens; repeatable)."),
]
PriceFlags = Annotated[
    list[str],
    typer.Option("--price", help="A model's price: MODEL=IN,OUT[,CACHED] ($ per 1M tokens; repeatable)."),
]
