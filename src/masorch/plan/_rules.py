"""Validation rules on single agents: id, task length, kind and typed parameters."""

from __future__ import annotations

import difflib
from collections.abc import Collection

from masorch.plan.catalogue import Catalogue, KindSignature, ParamSpec
from masorch.plan.diagnostics import Diagnostic, diag
from masorch.plan.model import AgentSpec
from masorch.plan.refs import ID_RE

#: Most names a "did you mean" suggestion compares against, and most suggestions one validation
#: makes: each costs up to a millisecond, so a plan far over its limits (thousands of agents or
#: dangling references) gets none beyond these, and validation stays linear in the plan's size.
MAX_SUGGESTION_OPTIONS = 64
MAX_SUGGESTIONS = 32


def close_match(word: str, options: list[str]) -> str:
    """A "did you mean ...?" prefix for a hint, or an empty string."""
    if len(word) > 100:  # far longer than any id: nothing is close, and comparing costs its square
        return ""
    match = difflib.get_close_matches(word, options, n=1)
    return f"did you mean {match[0]!r}? " if match else ""


class Suggestions:
    """Hint prefixes ("did you mean ...?") against one set of names, at most ``MAX_SUGGESTIONS``."""

    def __init__(self, names: Collection[str]) -> None:
        self._names = sorted(names) if len(names) <= MAX_SUGGESTION_OPTIONS else []
        self._left = MAX_SUGGESTIONS

    def __call__(self, word: str) -> str:
        """The prefix for ``word``, or an empty string (also once the budget is spent)."""
        if not self._names or self._left <= 0:
            return ""
        self._left -= 1
        return close_match(word, self._names)


def check_agent(agent: AgentSpec, catalogue: Catalogue, max_task_chars: int, out: list[Diagnostic]) -> None:
    """Rules on one agent: its id, task length, kind and parameters."""
    where = f"agent:{agent.id}"
    if not ID_RE.match(agent.id):
        out.append(
            diag(
                "bad_id",
                f"agent id {agent.id!r} is not a valid id",
                "use a letter first, then letters, digits, _ or -, at most 64 characters (e.g. calc_1)",
                where,
            )
        )
    if len(agent.task) > max_task_chars:
        out.append(
            diag(
                "task_too_long",
                f"the task has {len(agent.task)} characters; the limit is {max_task_chars}",
                "shorten the task; pass long material through ${ref} references instead",
                where,
            )
        )
    signature = catalogue.get(agent.kind)
    if signature is None:
        kinds = list(catalogue)
        out.append(
            diag(
                "unknown_kind",
                f"kind {agent.kind!r} is not a known sub-agent",
                f"{close_match(agent.kind, kinds)}use one of: {', '.join(kinds)}",
                where,
            )
        )
        return
    _params(agent, signature, where, out)


def _params(agent: AgentSpec, signature: KindSignature, where: str, out: list[Diagnostic]) -> None:
    """Rules on an agent's parameters: each known and in range, every required one given."""
    for name, value in agent.params.items():
        spec = signature.param(name)
        if spec is None:
            names = [p.name for p in signature.params]
            takes = (
                f"{agent.kind} takes: {', '.join(names)}" if names else f"{agent.kind} takes no parameters"
            )
            out.append(
                diag(
                    "unknown_param",
                    f"{agent.kind} has no parameter {name!r}",
                    f"{close_match(name, names)}{takes}",
                    where,
                )
            )
            continue
        problem = spec.problem(value)
        if problem is not None:
            out.append(diag("bad_param", problem, param_hint(spec.name, spec), where))
    for spec in signature.params:
        if spec.required and spec.name not in agent.params:
            out.append(
                diag(
                    "missing_param",
                    f"{agent.kind} needs the parameter {spec.name!r}",
                    param_hint(spec.name, spec),
                    where,
                )
            )


def param_hint(name: str, spec: ParamSpec) -> str:
    """What a parameter accepts: its type, range, choices, sizes and default, as a fix hint."""
    parts = [f"{name} is {spec.type}"]
    if spec.minimum is not None or spec.maximum is not None:
        lo = "" if spec.minimum is None else f"{spec.minimum:g}"
        hi = "" if spec.maximum is None else f"{spec.maximum:g}"
        parts.append(f"in [{lo}, {hi}]")
    if spec.choices:
        parts.append(f"one of {', '.join(spec.choices)}")
    if spec.min_items is not None:
        parts.append(f"with at least {spec.min_items} items")
    if spec.max_items is not None:
        parts.append(f"with at most {spec.max_items} items")
    if spec.default is not None:
        parts.append(f"(default {spec.default!r})")
    return " ".join(parts)
