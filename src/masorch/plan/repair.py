"""The repair message: diagnostics rendered as feedback an orchestrator can act on."""

from __future__ import annotations

from collections.abc import Sequence

from masorch.plan.diagnostics import Diagnostic, Severity
from masorch.prompts import render

_TEMPLATE = "plan/repair.j2"


def repair_message(diagnostics: Sequence[Diagnostic]) -> str:
    """The message that asks an orchestrator to fix its plan: every error, then every warning.

    Infos (how the plan was read, nothing to fix) are left out. Returns an empty string when there
    is nothing to fix.
    """
    errors = [_clean(d) for d in diagnostics if d.is_error]
    warnings = [_clean(d) for d in diagnostics if d.severity is Severity.WARNING]
    if not errors and not warnings:
        return ""
    return render(_TEMPLATE, errors=errors, warnings=warnings)


def _clean(d: Diagnostic) -> Diagnostic:
    """The diagnostic with trailing full stops removed, so the template's punctuation reads well."""
    return Diagnostic(d.code, d.severity, d.message.rstrip(". "), d.hint.rstrip(". "), d.where)
