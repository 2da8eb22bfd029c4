"""Read an orchestrator's text as a ``Plan`` in one of three dialects; never raises on bad text."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

from masorch.plan.diagnostics import Diagnostic, diag
from masorch.plan.model import Plan
from masorch.plan.parse_calls import parse_calls
from masorch.plan.parse_json import parse_json
from masorch.plan.parse_xml import parse_xml, strip_thinking, xml_start

logger = logging.getLogger(__name__)

Dialect = Literal["calls", "json", "xml"]
DialectChoice = Literal["auto", "calls", "json", "xml"]
DIALECTS: tuple[Dialect, ...] = ("calls", "json", "xml")

_CALLS_HINT = re.compile(r"(?:create_agent|create_flow|final_answer)\s*\(")


@dataclass(frozen=True)
class ParseResult:
    """What the reader made of a text: the plan (None if none was found), its dialect, problems."""

    plan: Plan | None
    dialect: Dialect | None
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        """True when a plan was read without error-severity diagnostics."""
        return self.plan is not None and not any(d.is_error for d in self.diagnostics)


def detect_dialect(text: str) -> Dialect | None:
    """The dialect ``text`` appears to be written in, or None when it shows no plan at all.

    >>> detect_dialect('create_agent(id="a", kind="cot")')
    'calls'
    >>> detect_dialect('[{"name": "final_answer", "arguments": {"text": "4"}}]')
    'json'
    >>> detect_dialect("<answer>4</answer>")
    'xml'
    """
    bare = text.lstrip()
    if bare.startswith("```"):  # skip the fence line, e.g. "```json"
        bare = bare[bare.find("\n") + 1 :].lstrip() if "\n" in bare else ""
    if bare.startswith(("{", "[")):
        return "json"
    # Otherwise the structure that starts first wins, so a tag quoted inside a call's task (or a
    # call quoted in MAS-Orchestra reasoning) does not decide the dialect.
    body = strip_thinking(text) if "<think" in text.lower() else text
    starts: list[tuple[int, Dialect]] = []
    tag = xml_start(body)
    if tag is not None:
        starts.append((tag, "xml"))
    for m in _CALLS_HINT.finditer(body) if ("create_" in body or "final_answer" in body) else ():
        if m.start() == 0 or (body[m.start() - 1] not in "\"'_" and not body[m.start() - 1].isalnum()):
            starts.append((m.start(), "calls"))
            break
    tool = body.find("<tool_call>")
    if tool >= 0:
        starts.append((tool, "json"))
    if starts:
        return min(starts)[1]
    if "<thinking>" in text.lower():  # MAS-Orchestra output cut off inside its reasoning
        return "xml"
    if "{" in text and ('"name"' in text or '"agents"' in text or '"final_answer"' in text):
        return "json"
    return None


_READERS = {"calls": parse_calls, "json": parse_json, "xml": parse_xml}


def parse(text: str, dialect: DialectChoice = "auto") -> ParseResult:
    """Parse ``text`` in ``dialect`` (``"auto"`` detects it); problems are diagnostics, never raised."""
    chosen: Dialect | None = detect_dialect(text) if dialect == "auto" else dialect
    if chosen is None:
        return ParseResult(None, None, (_no_plan(dialect),))
    plan, diags = _READERS[chosen](text)
    if plan is None:
        diags = [*diags, _no_plan(chosen)]
    logger.debug("parsed %s plan: %d diagnostics", chosen, len(diags))
    return ParseResult(plan, chosen, tuple(diags))


def _no_plan(dialect: str) -> Diagnostic:
    where = "any dialect" if dialect == "auto" else f"the {dialect} dialect"
    return diag(
        "no_plan",
        f"no plan found in {where}",
        'write create_agent(id=..., kind=..., task=...) calls, or final_answer("...") to answer directly',
    )
