"""Prompt templates (Jinja, ``StrictUndefined``) shipped as package data, and their renderer.

The one Jinja environment of masorch: every template (agents, orchestrator, rounds, scorers, MASBench,
the plan repair message) renders through :func:`render`. It imports nothing else of masorch, so
every layer, ``plan`` included, may use it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # Cached read-only template loader: templates are package data and never change at run time.
    return jinja2.Environment(
        loader=jinja2.PackageLoader("masorch", "prompts"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render(name: str, **variables: Any) -> str:
    """Render the template ``prompts/<name>`` (e.g. ``"agents/cot.j2"``); a missing variable raises."""
    return _environment().get_template(name).render(**variables).strip()
