"""GBNF grammars of the plan dialects, derived from the catalogue a run offers (pure, no I/O).

An orchestrator call decodes under its dialect's grammar where the backend can (llama.cpp's
server, vLLM): every kind is one the run offers, every parameter is one its kind takes with a value
in range, agents and flows are counted within the limits, and every string is bounded so a small
model cannot loop to the token limit. The language of each grammar is a subset of what
:func:`masorch.plan.check` reads in that dialect without a parse error.

The calls grammar at DoM high (plans by reference) goes further: agents are named ``a1``, ``a2``,
... in the order they are written, a task's ``${aJ}`` names only an earlier agent, and the plan may
end only once every agent but the last is used by a later one. The grammar counts the unused agents
(a bounded number of agents makes that finite), so every plan it allows is a connected DAG with one
sink, the final agent: unique ids, existing references, no cycle. What the other grammars cannot
say (unique ids, flows between existing agents, no cycle, one sink) is left to the validator and
its repair message.

Reasoning before the plan stays possible: the calls grammar allows one ``Thought: ...`` line first,
the xml grammar one ``<thinking>...</thinking>`` block (the released MAS-Orchestra format). Both
texts leave out the characters that could start a plan structure inside them (``(`` and ``<``).

The grammars are written for llama.cpp's GBNF parser, the strictest of the engines that take them:
rule names of letters, digits and ``-``; bounded repetitions below its limit of 2000.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from masorch.plan.catalogue import Catalogue, KindSignature, ParamSpec
from masorch.plan.model import DoM
from masorch.plan.parse_xml import ARG_TO_PARAM, IGNORED_ARGS, KIND_TO_NAME, kind_of
from masorch.plan.validate import Limits

GrammarDialect = Literal["calls", "xml"]
#: The tool that ends a multi-round run (``masorch.run.round_calls.FINAL_TOOL``).
TOOL_FINAL = "final_answer"


@dataclass(frozen=True)
class GrammarLimits:
    """String and list bounds of the grammars (llama.cpp refuses bounded repetitions above 2000)."""

    #: most characters of a task (also capped by ``Limits.max_task_chars``) or a direct answer
    max_text_chars: int = 1000
    #: most characters of the reasoning before the plan (0: no reasoning prefix)
    max_thought_chars: int = 600
    #: most characters of a task in the calls dialect: every agent sees the question, so a task says
    #: only what that agent must work out (small models otherwise copy the question into it: run 3
    #: copied it whole at 1000, the development plans before run 5 sentence by sentence at 300)
    max_task_chars: int = 160
    #: most create_flow lines in the calls dialect. A ``${id}`` reference implies its flow, so the
    #: prompt asks for create_agent lines only and the grammar allows none: a small model that
    #: writes flows loops on them to the token cap (plan-validity run 3)
    max_declared_flows: int = 0
    #: most agents of a calls plan by reference at DoM high (also capped by ``Limits.max_agents``):
    #: the grammar tracks which earlier agents are still unused, so its size grows as 2^n
    max_ref_agents: int = 4
    #: most characters of an agent id (ids allow 64; short ids are what models write)
    max_id_chars: int = 32
    #: most characters of a free string parameter, an xml description, a list item
    max_short_chars: int = 120
    #: most items of a list parameter without a ``max_items``
    max_list_items: int = 8
    #: widest integer range spelt out value by value (wider ranges are left out of the grammar)
    max_enum_values: int = 64


_SPACES = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
# One unit inside a double-quoted Python string: no quote, backslash or control character; the
# escapes \\ \" \n \t, which Python and JSON read alike (LaTeX in a task needs \\); and a "<" only
# before a character that cannot start a tag (a "<think>" inside a task would make the calls reader
# set text aside as reasoning). A unit is one or two characters.
_STR_CHAR = '([^"\\\\<\\x00-\\x1f\\x7f] | "\\\\" ["\\\\nt] | "<" [^"\\\\<A-Za-z/!?\\x00-\\x1f\\x7f])'
# A unit of a task in a plan by reference: as _STR_CHAR, but "${" only opens a reference the
# grammar writes itself: a "$" (or "$$", LaTeX's display math) is followed by a character other
# than "{", "$", a quote, a backslash or "<", or by an escape ("$\\frac" in a task), and a "<" never by "$",
# so no text reads as a reference to an agent that does not exist.
_REF_STR_CHAR = (
    '([^"\\\\<$\\x00-\\x1f\\x7f] | "\\\\" ["\\\\nt] | "<" [^"\\\\<$A-Za-z/!?\\x00-\\x1f\\x7f]'
    ' | "$" "$"? ([^{$"\\\\<\\x00-\\x1f\\x7f] | "\\\\" ["\\\\nt]))'
)
# The first unit of a direct answer: also no white space (an answer is stripped, never empty).
_ANSWER_FIRST = f'([^"\\\\<\\x00-\\x1f\\x7f{_SPACES}] | "\\\\" ["\\\\])'
# The first unit of a rounds task: as _ANSWER_FIRST, and a "$" only as _REF_STR_CHAR allows it.
_TASK_FIRST = (
    f'([^"\\\\<$\\x00-\\x1f\\x7f{_SPACES}] | "\\\\" ["\\\\]'
    ' | "$" "$"? ([^{$"\\\\<\\x00-\\x1f\\x7f] | "\\\\" ["\\\\nt]))'
)
# Text between xml tags: anything but "<" (so no tag opens or closes inside it).
_XML_CHAR = "[^<\\x00]"
_XML_ANSWER_FIRST = f"[^<\\x00{_SPACES}]"
# Text of a JSON string inside an xml argument: JSON's own rules, and no "<".
_XML_STR_CHAR = '[^"\\\\<\\x00-\\x1f\\x7f]'
# Tags of an agent block that a parameter must not be named after.
_XML_FIELDS = frozenset(
    {"agent_id", "agent_output_id", "agent_name", "agent_description", "required_arguments", "agent_input"}
)
_CALL_FIELDS = frozenset({"id", "kind", "task"})
_THOUGHT_CHAR = "[^\\n(<\\x00]"
# The end of a Hermes tool call: the arguments' object and the call object close, then the tag.
_CALL_END = "}\n</tool_call>"


def plan_grammar(
    dialect: GrammarDialect,
    catalogue: Catalogue,
    dom: DoM,
    limits: Limits | None = None,
    bounds: GrammarLimits | None = None,
) -> str:
    """The GBNF grammar of a plan in ``dialect`` using only the kinds of ``catalogue``, under ``dom``.

    ``limits`` are the validator's (default ``Limits()``). Raises ValueError when no kind of the
    catalogue can be written in the grammar (an empty one).
    """
    limits = limits or Limits()
    bounds = bounds or GrammarLimits()
    if dialect == "calls":
        return _CallsGrammar(catalogue, dom, limits, bounds).text()
    if dialect == "xml":
        return _XmlGrammar(catalogue, dom, limits, bounds).text()
    raise ValueError(f"no grammar for dialect {dialect!r}: the json dialect uses a JSON schema")


def tool_turn_grammar(
    catalogue: Catalogue,
    *,
    pool: tuple[str, ...] = (),
    max_calls: int = 4,
    bounds: GrammarLimits | None = None,
) -> str:
    """The GBNF grammar of one orchestrator turn of the multi-round mode (docs/rounds.md) in the
    Hermes tool-call format that Qwen-style chat templates use: an optional reasoning text without
    ``<``, then 1..``max_calls`` ``<tool_call>`` blocks of the kinds of ``catalogue`` (``task``
    first, then ``model`` from ``pool`` if any, then the kind's parameters in range), or one
    ``final_answer`` call with an answer or ``{"synthesize": true}``.

    What it cannot rule out (a pool model the call does not need, a question the calls do not
    answer) is the round's own checks' (``masorch.run.round_calls``). Raises ValueError when no
    kind of the catalogue can be written.
    """
    return _ToolTurnGrammar(catalogue, tuple(pool), max_calls, bounds or GrammarLimits()).text()


def max_plan_agents(dialect: str, dom: DoM, limits: Limits, bounds: GrammarLimits | None = None) -> int:
    """The most agents a plan may have, as the orchestrator's prompt states it: a calls plan at DoM
    high has the by-reference grammar's bound, constrained or not (one prompt for both decodings)."""
    bounds = bounds or GrammarLimits()
    if dom is DoM.LOW:
        return 1
    if dialect == "calls" and bounds.max_declared_flows == 0:
        return max(1, min(limits.max_agents, bounds.max_ref_agents))
    return limits.max_agents


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal.

    >>> gbnf_literal('say "hi"\\n')
    '"say \\\\"hi\\\\"\\\\n"'
    """
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _rule_name(*parts: str) -> str:
    return "-".join(re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") or "x" for p in parts)


class _Rules:
    """An ordered set of named rules (the first is ``root``)."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def add(self, name: str, body: str) -> str:
        base, n = name, 1
        while name in self.rules and self.rules[name] != body:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        return name

    def text(self) -> str:
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())


def _alts(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _repeat(item: str, lo: int, hi: int) -> str:
    """``item`` repeated ``lo`` to ``hi`` times, in the shortest GBNF llama.cpp reads."""
    if hi <= 0:
        return ""
    if lo == hi:
        return item if lo == 1 else f"{item}{{{lo}}}"
    if lo == 0 and hi == 1:
        return f"{item}?"
    return f"{item}{{{lo},{hi}}}"


def _int_literals(lo: float, hi: float, cap: int) -> list[str] | None:
    """Every integer in [lo, hi] as a literal, or None when the range is open, fractional or wide."""
    if not (float(lo).is_integer() and float(hi).is_integer()) or hi - lo + 1 > cap or hi < lo:
        return None
    return [gbnf_literal(str(v)) for v in range(int(lo), int(hi) + 1)]


def _number(spec: ParamSpec, bounds: GrammarLimits) -> str | None:
    """Numbers in the parameter's range (literals both Python and JSON read alike), or None."""
    lo, hi = spec.minimum, spec.maximum
    if lo is None and hi is None:
        whole = '("0" | "-"? [1-9] [0-9]{0,8})'
        return whole if spec.type == "int" else whole + ' ("." [0-9]{1,3})?'
    if lo is None or hi is None:
        return None
    ints = _int_literals(lo, hi, bounds.max_enum_values)
    if ints is None:
        return None
    if spec.type == "int":
        return _alts(ints)
    # A float: whole numbers below the maximum take any two decimals; the maximum only zeros.
    below = _alts(ints[:-1]) + ' ("." [0-9]{1,2})?' if len(ints) > 1 else None
    top = ints[-1] + ' ("." "0"{1,2})?'
    return f"({below} | {top})" if below else f"({top})"


class _Grammar:
    """What the calls and xml grammars share: the rules, the kinds that can be written, the limits."""

    def __init__(self, catalogue: Catalogue, dom: DoM, limits: Limits, bounds: GrammarLimits) -> None:
        self.catalogue = catalogue
        self.dom = dom
        self.limits = limits
        self.bounds = bounds
        self.r = _Rules()
        self.r.add("root", "")  # filled last, kept first

    def task_chars(self) -> int:
        return max(0, min(self.limits.max_task_chars, self.bounds.max_text_chars))

    def agent_count(self) -> tuple[int, int]:
        return (1, 1) if self.dom is DoM.LOW else (1, max(1, self.limits.max_agents))

    def flow_count(self) -> int:
        # A DAG of n agents has at most n(n-1)/2 distinct flows; more would only be repeats.
        n = self.agent_count()[1]
        return max(0, min(self.limits.max_flows, n * (n - 1) // 2))

    def direct_answer(self) -> bool:
        return self.dom is DoM.LOW or self.limits.direct_answer_in_high

    def kinds(self, agent: Callable[[KindSignature], str | None]) -> list[str]:
        out = [rule for sig in self.catalogue.values() if (rule := agent(sig)) is not None]
        if not out:
            raise ValueError(
                "no kind of the catalogue can be written in the grammar: "
                f"{', '.join(self.catalogue) or 'the catalogue is empty'}"
            )
        return out

    def params(self, sig: KindSignature, write: Callable[[ParamSpec], str | None]) -> str | None:
        """Optional parameters in signature order (a required one always); None if one can't be written."""
        parts = []
        for spec in sig.params:
            item = write(spec)
            if item is None:
                if spec.required:
                    return None
                continue  # an optional parameter the grammar cannot bound is left to its default
            parts.append(item if spec.required else f"({item})?")
        return " ".join(parts)

    def json_value(self, spec: ParamSpec, char: str) -> str | None:
        """A parameter's value as JSON: a number in range, ``true``/``false``, one of its choices, a
        quoted string (or list of them) of ``char`` units; None for a choice holding a ``<``."""
        if spec.type in ("int", "float"):
            return _number(spec, self.bounds)
        if spec.type == "bool":
            return '("true" | "false")'
        if spec.type == "str":
            if spec.choices:
                if any("<" in c for c in spec.choices):
                    return None
                return _alts([gbnf_literal(json.dumps(c, ensure_ascii=False)) for c in spec.choices])
            return f'"\\"" {char}{{0,{self.bounds.max_short_chars}}} "\\""'
        item = self.r.add("jitem", f'"\\"" {char}{{1,{self.bounds.max_short_chars}}} "\\""')
        return self.list_value(spec, item, ", ")

    def list_value(self, spec: ParamSpec, item: str, sep: str) -> str:
        lo = spec.min_items or 0
        hi = spec.max_items if spec.max_items is not None else max(lo, self.bounds.max_list_items)
        if hi < lo:
            hi = lo
        if hi == 0:
            return '"[]"'
        rest = _repeat(f"({gbnf_literal(sep)} {item})", max(0, lo - 1), hi - 1)
        body = f"{item} {rest}".strip()
        return f'"[" {body} "]"' if lo >= 1 else f'"[" ({body})? "]"'


class _CallsGrammar(_Grammar):
    """``create_agent(...)``/``create_flow(...)`` lines (and ``final_answer(...)`` where allowed)."""

    def task_chars(self) -> int:
        # A string unit is at most two characters, so the validator's limit counts twice.
        return max(0, min(self.limits.max_task_chars // 2, self.bounds.max_task_chars))

    def flow_count(self) -> int:
        return min(super().flow_count(), self.bounds.max_declared_flows)

    def text(self) -> str:
        r, b = self.r, self.bounds
        r.add("char", _STR_CHAR)
        # Calls are separated by one line break or two (a blank line, e.g. between agents and
        # flows), and the plan may end right after its last ")": a model that wants a blank line or
        # to stop there must not be pushed into writing another call instead.
        r.add("eol", '"\\n" "\\n"?')
        lo, hi = self.agent_count()
        if self.dom is DoM.HIGH and hi > 1 and self.flow_count() == 0:
            body = self.by_reference(min(hi, b.max_ref_agents))
        else:
            r.add("id", f"[A-Za-z] [A-Za-z0-9_-]{{0,{max(0, b.max_id_chars - 1)}}}")
            r.add("qid", '"\\"" id "\\""')
            r.add("task", f'"\\"" {_repeat("char", 0, self.task_chars())} "\\""'.replace("  ", " "))
            kinds = self.kinds(self.kind)
            r.add("agent", '"create_agent(id=" qid ", kind=" ' + _alts(kinds) + ' ")"')
            body = "agent " + _repeat("(eol agent)", max(0, lo - 1), hi - 1)
        if self.dom is DoM.HIGH and self.flow_count() > 0:
            r.add("flow", '"create_flow(" qid ", " qid ")"')
            body += " " + _repeat("(eol flow)", 0, self.flow_count())
        body = body.strip()
        if self.direct_answer():
            tail = _repeat("char", 0, max(0, b.max_text_chars // 2 - 1))  # units of up to 2 chars
            r.add("answer", f'"final_answer(\\"" {_ANSWER_FIRST} {tail} "\\")"'.replace("  ", " "))
            body = f"({body} | answer)"
        body += " eol?"
        if b.max_thought_chars > 0:
            r.add("thought", f'"Thought: " {_THOUGHT_CHAR}{{1,{b.max_thought_chars}}} eol')
            body = f"thought? {body}"
        r.rules["root"] = body
        return r.text()

    def kind(self, sig: KindSignature) -> str | None:
        params = self.params(sig, lambda spec: self.param(sig, spec))
        if params is None:
            return None
        head = gbnf_literal(json.dumps(sig.kind, ensure_ascii=False) + ", task=")
        return self.r.add(_rule_name("kind", sig.kind), f"{head} task {params}".strip())

    def head(self, sig: KindSignature) -> str | None:
        """A kind and its parameters, written before the task (a plan by reference ends each call
        with its task, so what follows a task depends only on the references in it)."""
        params = self.params(sig, lambda spec: self.param(sig, spec))
        if params is None:
            return None
        kind = gbnf_literal(json.dumps(sig.kind, ensure_ascii=False))
        return self.r.add(_rule_name("head", sig.kind), f"{kind} {params}".strip())

    def by_reference(self, n: int) -> str:
        """Agents ``a1`` .. ``a{n}`` whose tasks name earlier agents as ``${aJ}``; the plan ends
        only when every agent but the last is used. Returns the body of the plan.

        States: ``t-K-P-C`` is inside agent K's task with P (a bit set) the earlier agents no one
        uses yet and C references written in this task (at most K-1); ``n-K-P`` follows agent K.
        Only states from which the plan can still end are written.
        """
        r, half = self.r, max(0, self.task_chars() // 2)
        r.add("rchar", _REF_STR_CHAR)
        r.add("first", f"rchar{{0,{self.task_chars()}}}")  # a1 has no one to refer to
        r.add("seg", f"rchar{{0,{half}}}")
        r.add("field", '("." ("rationale" | "answer"))?')
        r.add("head", _alts(self.kinds(self.head)))
        done: set[str] = set()

        def call(k: int) -> str:
            opening = gbnf_literal('create_agent(id="a' + str(k) + '", kind=')
            return f"{opening} head {gbnf_literal(', task=' + chr(34))}"

        def alive(k: int, unused: int, refs: int) -> bool:
            return k < n or unused.bit_count() <= (k - 1) - refs

        def task(k: int, unused: int, refs: int) -> str:
            name = f"t-{k}-{unused}-{refs}"
            if name in done:
                return name
            done.add(name)
            options = []
            for j in range(1, k) if refs < k - 1 else ():
                left = unused & ~(1 << (j - 1))
                if alive(k, left, refs + 1):
                    options.append(f'"${{a{j}" field "}}" {task(k, left, refs + 1)}')
            if k < n or not unused:
                options.append(f'"\\")" {after(k, unused)}'.strip())
            r.add(name, ("first " if k == 1 else "seg ") + _alts(options))
            return name

        def after(k: int, unused: int) -> str:
            if k == n:
                return ""  # unused is empty here: the plan ends with a_n, its final agent
            name = f"n-{k}-{unused}"
            if name not in done:
                done.add(name)
                more = unused | (1 << (k - 1))
                nxt = f"eol {call(k + 1)} {task(k + 1, more, 0)}"
                r.add(name, f"({nxt})?" if not unused else nxt)
            return name

        return f"{call(1)} {task(1, 0, 0)}"

    def param(self, sig: KindSignature, spec: ParamSpec) -> str | None:
        value = self.value(spec)
        if value is None:
            return None
        rule = self.r.add(_rule_name(sig.kind, spec.name), value)
        return f"{gbnf_literal(f', {spec.name}=')} {rule}"

    def value(self, spec: ParamSpec) -> str | None:
        if not spec.name.isidentifier() or keyword.iskeyword(spec.name) or spec.name in _CALL_FIELDS:
            return None
        if spec.type in ("int", "float"):
            return _number(spec, self.bounds)
        if spec.type == "bool":
            return '("True" | "False")'
        if spec.type == "str":
            if spec.choices:
                return _alts([gbnf_literal(json.dumps(c, ensure_ascii=False)) for c in spec.choices])
            return f'"\\"" char{{0,{self.bounds.max_short_chars}}} "\\""'
        item = self.r.add("item", f'"\\"" char{{1,{self.bounds.max_short_chars}}} "\\""')
        return self.list_value(spec, item, ", ")


class _ToolTurnGrammar(_Grammar):
    """One turn of the multi-round mode in the Hermes tool-call format: 1..``max_calls`` tool calls,
    or one ``final_answer`` call, each a ``<tool_call>`` block holding ``{"name", "arguments"}``."""

    def __init__(
        self, catalogue: Catalogue, pool: tuple[str, ...], max_calls: int, bounds: GrammarLimits
    ) -> None:
        super().__init__(catalogue, DoM.LOW, Limits(), bounds)
        self.pool = pool
        self.max_calls = max(1, max_calls)

    def task_chars(self) -> int:
        # A string unit is at most two characters, so the validator's limit counts twice.
        return max(1, min(self.limits.max_task_chars // 2, self.bounds.max_text_chars))

    def text(self) -> str:
        r, b = self.r, self.bounds
        r.add("char", _STR_CHAR)
        # A task opens with a character that is not white space (the round refuses a blank one), and
        # never holds "${" (the round reads it as a reference to another agent, and refuses it).
        r.add("rchar", _REF_STR_CHAR)
        # A "$" before the closing quote ends LaTeX ("Solve $x^2 = 4$"): rchar puts one only before
        # another character.
        r.add("task", f'"\\"" {_TASK_FIRST} rchar{{0,{self.task_chars() - 1}}} ("$" "$"?)? "\\""')
        if self.pool:
            r.add("model", _alts([gbnf_literal(json.dumps(name, ensure_ascii=False)) for name in self.pool]))
        r.add("call", _alts(self.kinds(self.kind)))
        calls = "call " + _repeat('("\\n" call)', 0, self.max_calls - 1)
        tail = _repeat("char", 0, max(0, b.max_text_chars // 2 - 1))  # units of up to 2 chars
        answer = " ".join(
            x for x in (gbnf_literal('{"answer": "'), _ANSWER_FIRST, tail, gbnf_literal('"}')) if x
        )
        synthesize = gbnf_literal('{"synthesize": true}')
        opening = gbnf_literal('<tool_call>\n{"name": "' + TOOL_FINAL + '", "arguments": ')
        r.add("final", f"{opening} ({answer} | {synthesize}) {gbnf_literal(_CALL_END)}")
        body = f"(final | {calls.strip()})"
        if b.max_thought_chars > 0:
            # Reasoning before the calls: text without "<", "{" or "`", so no tag, JSON call or code
            # fence opens inside it (a model that starts writing a call as JSON must use the tag).
            r.add("thought", f"[^<{{`\\x00]{{1,{b.max_thought_chars}}}")
            body = f"thought? {body}"
        r.rules["root"] = body
        return r.text()

    def kind(self, sig: KindSignature) -> str | None:
        if sig.kind == TOOL_FINAL:
            return None
        params = self.params(sig, lambda spec: self.param(sig, spec))
        if params is None:
            return None
        name = json.dumps(sig.kind, ensure_ascii=False)
        head = gbnf_literal('<tool_call>\n{"name": ' + name + ', "arguments": {"task": ')
        model = gbnf_literal(', "model": ') if self.pool else ""
        parts = [head, "task", f"({model} model)?" if model else "", params, gbnf_literal("}" + _CALL_END)]
        return self.r.add(_rule_name("tool", sig.kind), " ".join(p for p in parts if p))

    def param(self, sig: KindSignature, spec: ParamSpec) -> str | None:
        if spec.name in ("task", "model"):
            return None
        value = self.value(spec)
        if value is None:
            return None
        rule = self.r.add(_rule_name("j", sig.kind, spec.name), value)
        return f"{gbnf_literal(', ' + json.dumps(spec.name) + ': ')} {rule}"

    def value(self, spec: ParamSpec) -> str | None:
        return self.json_value(spec, "char")


class _XmlGrammar(_Grammar):
    """MAS-Orchestra tags: ``<agent>`` blocks and one ``<edge>`` block, or ``<answer>`` where allowed."""

    def text(self) -> str:
        r, b = self.r, self.bounds
        r.add("id", f"[A-Za-z] [A-Za-z0-9_]{{0,{max(0, b.max_id_chars - 1)}}}")
        r.add("xchar", _XML_CHAR)
        r.add("input", _repeat("xchar", 0, self.task_chars()))
        r.add("desc", _repeat("xchar", 0, b.max_short_chars))
        r.add("jchar", _XML_STR_CHAR)
        # Between tags: line breaks and indentation as the checkpoints write them (the reader
        # ignores white space between tags), bounded.
        r.add("ws", "[ \\t\\n]{0,12}")
        kinds = self.kinds(self.kind)
        low = self.dom is DoM.LOW
        head = '"<agent>" ws' if low else '"<agent>" ws "<agent_id>" id "</agent_id>" ws'
        tail = '"</required_arguments>" ws'
        tail += ' "<agent_output_id>" id "</agent_output_id>" ws' if low else ""
        r.add("agent", f'{head} {_alts(kinds)} {tail} "</agent>" ws')
        lo, hi = self.agent_count()
        if low:
            body = 'agent "<answer>" id "</answer>" ws'
        else:
            r.add("edge", '"<from>" id "</from>" ws "<to>" id "</to>" ws')
            edges = _repeat("edge", 0, self.flow_count())
            body = f'{_repeat("agent", lo, hi)} "<edge>" ws {edges} "</edge>" ws'.replace("  ", " ")
        if self.direct_answer():
            text = _repeat("xchar", 0, max(0, b.max_text_chars - 1))
            r.add("answer", f'"<answer>" {_XML_ANSWER_FIRST} {text} "</answer>" ws'.replace("  ", " "))
            body = f"({body} | answer)"
        if b.max_thought_chars > 0:
            r.add("thinking", f'"<thinking>" xchar{{1,{b.max_thought_chars}}} "</thinking>" ws')
            body = f"thinking? {body}"
        r.rules["root"] = body
        return r.text()

    def kind(self, sig: KindSignature) -> str | None:
        name = KIND_TO_NAME.get(sig.kind, sig.kind.capitalize() + "Agent")
        if kind_of(name) != sig.kind or "<" in name:  # the reader would not map it back to this kind
            return None
        params = self.params(sig, lambda spec: self.param(sig, spec))
        if params is None:
            return None
        head = (
            f"{gbnf_literal(f'<agent_name>{name}</agent_name>')} ws "
            '"<agent_description>" desc "</agent_description>" ws'
            ' "<required_arguments>" ws "<agent_input>" input "</agent_input>" ws'
        )
        return self.r.add(_rule_name("xkind", sig.kind), f"{head} {params}".strip())

    def param(self, sig: KindSignature, spec: ParamSpec) -> str | None:
        tag = {v: k for k, v in ARG_TO_PARAM.items()}.get(spec.name, spec.name)
        readable = re.fullmatch(r"[A-Za-z_][\w\-]*", tag) is not None
        if not readable or ARG_TO_PARAM.get(tag, tag) != spec.name or tag in IGNORED_ARGS | _XML_FIELDS:
            return None
        value = self.value(spec)
        if value is None:
            return None
        rule = self.r.add(_rule_name("x", sig.kind, spec.name), value)
        return f"{gbnf_literal(f'<{tag}>')} {rule} {gbnf_literal(f'</{tag}>')} ws"

    def value(self, spec: ParamSpec) -> str | None:
        # Values are read as JSON (a text that is not JSON stays a string), so strings are quoted.
        return self.json_value(spec, "jchar")


__all__ = [
    "TOOL_FINAL",
    "GrammarDialect",
    "GrammarLimits",
    "gbnf_literal",
    "max_plan_agents",
    "plan_grammar",
    "tool_turn_grammar",
]
