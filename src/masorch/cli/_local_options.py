"""The options that size an embedded (``local:``) model's server, shared by run, eval run and serve."""

from __future__ import annotations

from typing import Annotated

import typer

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
