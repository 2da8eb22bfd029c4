"""The repair message: diagnostics rendered as feedback an orchestrator can act on."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import jinja2

from masorch.plan.diagnostics import Diagnostic, Severity

_TEMPLATE = "plan/repair.j2"


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    # plan/ imports nothing else of masorch, so it loads its one template itself (read-only package data).
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("masorch", "prompts"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    return env.get_template(_TEMPLATE)


def repair_message(diagnostics: Sequence[Diagnostic]) -> str:
    """The message that asks an orchestrator to fix its plan: every error, then every warning.

    Infos (how the plan was read, nothing to fix) are left out. Returns an empty string when there
    is nothing to fix.
    """
    errors = [_clean(d) for d in diagnostics if d.is_error]
    warnings = [_clean(d) for d in diagnostics if d.severity is Severity.WARNING]
    if not errors and not warnings:
        return ""
    return _template().render(errors=errors, warnings=warnings).strip()


def _clean(d: Diagnostic) -> Diagnostic:
    """The diagnostic with trailing full stops removed, so the template's punctuation reads well."""
    return Diagnostic(d.code, d.severity, d.message.rstrip(". "), d.hint.rstrip(". "), d.where)
