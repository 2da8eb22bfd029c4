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

#: Most characters a text may have to be read at all (``Limits.max_text_chars``): 256 Ki characters,
#: about 64k tokens, more than any orchestrator's completion. A longer text is rejected before any
#: reading step, so the worst case of every reader stays bounded.
MAX_TEXT_CHARS = 262_144

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


def parse(text: str, dialect: DialectChoice = "auto", max_chars: int = MAX_TEXT_CHARS) -> ParseResult:
    """Parse ``text`` in ``dialect`` (``"auto"`` detects it); problems are diagnostics, never raised.

    A text longer than ``max_chars`` is not read: its only diagnostic is ``plan_too_large``.
    """
    if len(text) > max_chars:
        return ParseResult(None, None if dialect == "auto" else dialect, (_too_large(len(text), max_chars),))
    chosen: Dialect | None = detect_dialect(text) if dialect == "auto" else dialect
    if chosen is None:
        return ParseResult(None, None, (_no_plan(dialect),))
    plan, diags = _READERS[chosen](text)
    if plan is None:
        diags = [*diags, _no_plan(chosen)]
    logger.debug("parsed %s plan: %d diagnostics", chosen, len(diags))
    return ParseResult(plan, chosen, tuple(diags))


def _too_large(size: int, limit: int) -> Diagnostic:
    return diag(
        "plan_too_large",
        f"the text has {size:,} characters; the limit is {limit:,}, so it was not read",
        "write a shorter answer: brief reasoning, then the plan once",
    )


def _no_plan(dialect: str) -> Diagnostic:
    where = "any dialect" if dialect == "auto" else f"the {dialect} dialect"
    return diag(
        "no_plan",
        f"no plan found in {where}",
        'write create_agent(id=..., kind=..., task=...) calls, or final_answer("...") to answer directly',
    )
