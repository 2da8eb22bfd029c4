"""Diagnostics: every problem found in a plan, with a stable code, the place and a fix hint.

The same diagnostics serve three readers: a human (``message`` + ``hint``), an orchestrator that is
asked to repair its plan (:func:`masorch.plan.repair.repair_message`) and a reward function
(:func:`compliance`, :func:`code_counts`). Codes are stable: they are part of the public contract
and every code is listed in :data:`CODES` and in ``docs/plan-language.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Severity(str, Enum):
    """How bad a diagnostic is: an error makes a plan invalid, a warning does not, and an info only
    records how the plan was read (e.g. a flow implied by a reference)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Diagnostic:
    """One problem: a stable ``code``, its severity, what is wrong, how to fix it and where."""

    code: str
    severity: Severity
    message: str
    hint: str = ""
    where: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view: ``{"code", "severity", "message", "hint", "where"}``."""
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "hint": self.hint,
            "where": self.where,
        }

    @property
    def is_error(self) -> bool:
        """True when this diagnostic makes the plan invalid."""
        return self.severity is Severity.ERROR


#: Every diagnostic code, its default severity and a one-line meaning (the documentation's table).
CODES: dict[str, tuple[Severity, str]] = {
    # reading the text (parse stage)
    "plan_too_large": (Severity.ERROR, "the text is longer than the limit and was not read"),
    "no_plan": (Severity.ERROR, "the text contains no plan in any dialect"),
    "syntax": (Severity.ERROR, "a call, JSON value or tag could not be read"),
    "truncated": (Severity.ERROR, "the text ends inside a call, JSON value or tag"),
    "non_literal": (Severity.ERROR, "an argument is code (a name, expression or f-string), not a literal"),
    "bad_argument": (Severity.ERROR, "a call has a missing, repeated or mistyped argument"),
    "unknown_call": (Severity.WARNING, "a call to a function that is not part of the plan language"),
    "prose_call_ignored": (Severity.WARNING, "an unreadable call mentioned inside prose was skipped"),
    "multiple_answers": (Severity.ERROR, "more than one direct final answer"),
    "unpaired_edge": (Severity.ERROR, "an XML <from> without its <to>, or a <to> without its <from>"),
    "missing_tag": (Severity.ERROR, "an XML <agent> block lacks a required tag"),
    "ignored_argument": (Severity.WARNING, "an XML argument masorch does not use was dropped"),
    "answer_missing": (Severity.WARNING, "an XML plan delegates to an agent but has no <answer>"),
    "answer_ignored": (Severity.WARNING, "an XML <answer> beside agents is not an agent id and was ignored"),
    # judging the plan (validate stage)
    "empty_plan": (Severity.ERROR, "the plan has neither agents nor a direct answer"),
    "answer_with_agents": (Severity.ERROR, "the plan has both agents and a direct answer"),
    "empty_answer": (Severity.ERROR, "the direct answer is empty"),
    "bad_id": (Severity.ERROR, "an agent id is not a valid identifier"),
    "duplicate_id": (Severity.ERROR, "two agents share an id"),
    "unknown_kind": (Severity.ERROR, "an agent's kind is not in the catalogue"),
    "unknown_param": (Severity.ERROR, "an agent has a parameter its kind does not take"),
    "missing_param": (Severity.ERROR, "an agent lacks a required parameter of its kind"),
    "bad_param": (Severity.ERROR, "a parameter has the wrong type or is out of range"),
    "empty_task": (Severity.WARNING, "an agent with inputs has no task saying what to do with them"),
    "empty_task_alone": (Severity.ERROR, "an agent asks for its task alone (task_only) but has no task"),
    "task_too_long": (Severity.ERROR, "a task is longer than the limit"),
    "too_many_agents": (Severity.ERROR, "more agents than the limit"),
    "too_many_flows": (Severity.ERROR, "more flows than the limit"),
    "dangling_flow": (Severity.ERROR, "a flow names an agent that does not exist"),
    "duplicate_flow": (Severity.WARNING, "the same flow is declared twice"),
    "self_loop": (Severity.ERROR, "a flow from an agent to itself"),
    "cycle": (Severity.ERROR, "flows form a cycle"),
    "multiple_sinks": (Severity.ERROR, "more than one agent has no outgoing flow"),
    "pruned_agent": (Severity.WARNING, "an agent whose output never reaches the final agent is left out"),
    "unreachable": (Severity.ERROR, "an agent's output never reaches the sink"),
    "unknown_ref": (Severity.ERROR, "a ${ref} names an agent that does not exist"),
    "self_ref": (Severity.ERROR, "a ${ref} names the agent it appears in"),
    "bad_ref_field": (Severity.ERROR, "a ${id.field} reads a field other than answer or rationale"),
    "implied_flow": (Severity.INFO, "a ${ref} to an agent with no flow into this one implies that flow"),
    # Retired: a reference without a flow now implies the flow (implied_flow); a reference to an
    # agent that does not exist is unknown_ref. Kept so that older logs and traces still resolve.
    "ref_without_flow": (Severity.ERROR, "(retired) a ${ref} names an agent with no flow into this one"),
    "dom_agents": (Severity.ERROR, "more agents than the degree of MAS allows"),
    "dom_flows": (Severity.ERROR, "flows where the degree of MAS allows none"),
    "dom_direct_answer": (Severity.ERROR, "a direct answer where the degree of MAS requires agents"),
}


def diag(code: str, message: str, hint: str = "", where: str | None = None) -> Diagnostic:
    """A diagnostic with the default severity of ``code`` (which must be in :data:`CODES`)."""
    return Diagnostic(code, CODES[code][0], message, hint, where)


def errors(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Only the error-severity diagnostics, in order."""
    return [d for d in diagnostics if d.is_error]


def code_counts(diagnostics: Iterable[Diagnostic]) -> dict[str, int]:
    """How often each code occurs: a stable, machine-readable summary for logs and rewards.

    >>> code_counts([diag("cycle", "a"), diag("cycle", "b"), diag("self_loop", "c")])
    {'cycle': 2, 'self_loop': 1}
    """
    return dict(Counter(d.code for d in diagnostics))


def compliance(diagnostics: Sequence[Diagnostic]) -> float:
    """Protocol compliance in [0, 1]: 1.0 with no diagnostics, 0.0 when no plan could be read.

    No plan is read when none was found (``no_plan``) or when the text was too long to read
    (``plan_too_large``).

    Each error costs a full unit and each warning a quarter: ``1 / (1 + errors + warnings / 4)``;
    an info costs nothing.
    The score falls monotonically as problems are added, so a reward can prefer a plan with fewer
    problems even when both are invalid.

    >>> compliance([])
    1.0
    >>> compliance([diag("cycle", "x")])
    0.5
    >>> compliance([diag("no_plan", "nothing")])
    0.0
    >>> compliance([diag("implied_flow", "a -> b")])
    1.0
    """
    if any(d.code in ("no_plan", "plan_too_large") for d in diagnostics):
        return 0.0
    n_err = sum(1 for d in diagnostics if d.is_error)
    n_warn = sum(1 for d in diagnostics if d.severity is Severity.WARNING)
    return 1.0 / (1.0 + n_err + n_warn / 4.0)
