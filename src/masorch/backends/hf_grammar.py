"""Grammar- and schema-constrained decoding for in-process transformers models (``hf:`` policies).

The llama.cpp engine decodes a call under ``GenerateConfig.grammar`` (GBNF) or ``json_schema``; an
``hf:`` policy does the same here, so that a trained checkpoint writes plans and rounds turns under
the constraint an embedded model gets. llguidance matches the grammar (rewritten by
:func:`gbnf_to_lark`) or the JSON schema; before each new token, :class:`GrammarProcessor` masks
every token the grammar cannot take next (the end tokens only once the grammar is complete), so
the text ends where the grammar ends, or at the token cap, as on llama.cpp.

:class:`TokenIndex` (about a second to build for a 150k-token vocabulary) belongs to one
tokenizer and is reused for every call. llguidance and torch load only when one is made
(``masorch[train]``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from masorch.errors import BackendError, require_extra


class TokenIndex:
    """llguidance's view of one tokenizer: its tokens' bytes and the ids that end a generation."""

    def __init__(self, tokenizer: Any, *, vocab_size: int, end_ids: Sequence[int]) -> None:
        """``vocab_size``: the width of the model's logits (may exceed the tokenizer's length);
        ``end_ids``: the tokens a generation stops at, allowed once the grammar is complete."""
        require_extra("llguidance", "train")
        import llguidance.hf

        self.vocab_size = vocab_size
        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=list(end_ids))
        #: the texts of the tokenizer's added tokens (``<tool_call>``, ...), longest first: a grammar
        #: literal holding one is matched by that token, as the model writes it
        self.special: tuple[str, ...] = tuple(sorted(tokenizer.get_added_vocab(), key=len, reverse=True))


# One lexical unit of the GBNF the grammar module writes (one rule a line): a character class, a
# string literal, a rule name, a bounded repetition, or an operator.
_GBNF_UNIT = re.compile(
    r'(?P<cls>\[(?:[^\]\\]|\\.)*\])|"(?P<lit>(?:[^"\\]|\\.)*)"|(?P<name>[A-Za-z0-9-]+)'
    r"|(?P<rep>\{\d+(?:,\d*)?\})|(?P<op>[()|?*+])|(?P<space>\s+)"
)
# One character of a GBNF string literal: an escape or a plain character.
_LIT_CHAR = re.compile(r"\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\.|.", re.S)
_LIT_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


def gbnf_to_lark(gbnf: str, special: Sequence[str] = ()) -> str:
    """llguidance's Lark form of a GBNF grammar of :mod:`masorch.plan.grammar`, same language.

    llguidance's own GBNF reader turns every rule made only of literals and classes into one
    greedy lexeme, which changes the language: after ``"sc"`` it reads ``, t`` as the start of an
    optional ``, temperature=`` and then refuses ``ask=`` (measured on the calls grammar). Here
    every rule stays a parser rule and every literal is split into one-character strings, so no
    lexeme is a prefix of another and the parser alone decides, as llama.cpp's character-level
    matcher does. An added token of the tokenizer (``special``, e.g. ``<tool_call>``) inside a
    literal is written as that token, which is how the model writes it.
    """
    rules = []
    for line in gbnf.splitlines():
        if not line.strip():
            continue
        name, sep, body = line.partition(" ::= ")
        if not sep:
            raise ValueError(f"not a GBNF rule line: {line[:80]!r}")
        rules.append(f"{_lark_name(name)}: {_lark_body(body, special)}")
    return "\n".join(rules) + "\n"


def _lark_name(name: str) -> str:
    return "start" if name == "root" else "r_" + name.replace("-", "_").lower()


def _lark_body(body: str, special: Sequence[str]) -> str:
    out, pos = [], 0
    while pos < len(body):
        m = _GBNF_UNIT.match(body, pos)
        if m is None:
            raise ValueError(f"cannot read the GBNF at {body[pos : pos + 40]!r}")
        pos = m.end()
        if m.group("cls") is not None:
            # A repeated class is one lexeme (a run of free text); as parser items, a bound like
            # {1,600} overflows llguidance's item limit. The grammar module ends every such run at a
            # character outside its class, so reading the run greedily changes nothing.
            rep = _GBNF_UNIT.match(body, pos)
            repeated = rep is not None and (rep.group("rep") or rep.group("op") in ("*", "+"))
            run = rep.group(0) if rep is not None and repeated else ""
            pos += len(run)
            out.append("/" + m.group("cls").replace("/", "\\/") + run + "/")
        elif m.group("lit") is not None:
            out.append(_lark_literal(_unescape(m.group("lit")), special))
        elif m.group("name") is not None:
            out.append(_lark_name(m.group("name")))
        elif m.group("space") is None:
            out.append(m.group(0))
    return " ".join(out)


def _unescape(lit: str) -> str:
    chars = []
    for unit in _LIT_CHAR.findall(lit):
        if unit.startswith(("\\x", "\\u")):
            chars.append(chr(int(unit[2:], 16)))
        elif unit.startswith("\\"):
            chars.append(_LIT_ESCAPES.get(unit[1], unit[1]))
        else:
            chars.append(unit)
    return "".join(chars)


def _lark_literal(text: str, special: Sequence[str]) -> str:
    if not text:
        return '""'
    parts, i = [], 0
    while i < len(text):
        token = next((t for t in special if text.startswith(t, i)), None)
        if token is not None:
            parts.append(token)
            i += len(token)
        else:
            parts.append(json.dumps(text[i], ensure_ascii=False))
            i += 1
    return "(" + " ".join(parts) + ")" if len(parts) > 1 else parts[0]


def constraint_text(
    grammar: str | None, json_schema: Mapping[str, Any] | None, special: Sequence[str] = ()
) -> str:
    """The llguidance grammar of a call's constraint (``grammar`` wins over ``json_schema``; one
    of them is set).

    Raises BackendError when it cannot be read (a bug in the grammar, not the model's)."""
    require_extra("llguidance", "train")
    import llguidance

    try:
        if grammar is not None:
            return str(llguidance.grammar_from("lark", gbnf_to_lark(grammar, special)))
        if json_schema is None:
            raise ValueError("no grammar and no JSON schema")
        return str(llguidance.grammar_from("json_schema", json.dumps(json_schema)))
    except (ValueError, RuntimeError) as exc:
        raise BackendError(
            f"cannot read the call's constraint: {exc}", hint="report this with the grammar or schema"
        ) from None


#: Earley items llguidance may build for one token mask. Its default (50,000) is too few for the
#: rounds turn grammar: every character of a task (up to 999) is a parser step, so a long task
#: overflows it. With 1,000,000, a four-call turn of 999-character tasks decodes, at about 4 ms a
#: mask (the Qwen2.5 tokenizer, measured on 2 busy cores); the cost is paid only where items are needed.
STEP_MAX_ITEMS = 1_000_000


def new_matcher(index: TokenIndex, grammar: str) -> Any:
    """A fresh llguidance matcher of ``grammar`` (a :func:`constraint_text`) over ``index``."""
    import llguidance

    limits = llguidance.LLParserLimits(step_max_items=STEP_MAX_ITEMS)
    matcher = llguidance.LLMatcher(index.tokenizer, grammar, log_level=0, limits=limits)
    if matcher.is_error():
        raise BackendError(f"cannot compile the call's constraint: {matcher.get_error()}")
    return matcher


class GrammarProcessor:
    """A transformers logits processor holding ``rows`` sequences to one grammar.

    Called before each new token with the sequences so far: it feeds each row's tokens since the
    last call to the row's matcher, then keeps only the logits of the tokens the grammar allows
    next. ``prompt_len`` is the (padded) prompt's length: tokens before it are context, not output.
    """

    def __init__(self, index: TokenIndex, grammar: str, *, prompt_len: int, rows: int = 1) -> None:
        import llguidance.torch

        self._matchers = [new_matcher(index, grammar) for _ in range(rows)]
        self._seen = prompt_len
        self._mask = llguidance.torch.allocate_token_bitmask(rows, index.vocab_size)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """``scores`` with every token the grammar does not allow next set to minus infinity."""
        import llguidance.torch

        new = input_ids[:, self._seen :].tolist()
        self._seen = input_ids.shape[1]
        for row, (matcher, tokens) in enumerate(zip(self._matchers, new, strict=True)):
            if tokens and not matcher.is_stopped() and not matcher.consume_tokens(tokens):
                raise BackendError(f"constrained decoding lost its grammar: {matcher.get_error()}")
            llguidance.torch.fill_next_token_bitmask(matcher, self._mask, row)
        width = self._mask.shape[1] * 32
        if scores.shape[-1] > width:  # logits wider than the mask: the extra ids are never allowed
            scores[:, width:] = float("-inf")
        llguidance.torch.apply_token_bitmask_inplace(scores, self._mask.to(scores.device))
        return scores


__all__ = [
    "STEP_MAX_ITEMS",
    "GrammarProcessor",
    "TokenIndex",
    "constraint_text",
    "gbnf_to_lark",
    "new_matcher",
]
